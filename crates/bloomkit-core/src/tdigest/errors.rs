//! The errors of RedisBloom's t-digest (`TDIGEST.*`, `TDIS-TYPE` keys) and
//! their exact texts: RedisBloom 2.8.2's to the letter, and bloomkit's own
//! where it refuses what 2.8.2 would break on.

use std::borrow::Cow;

use crate::common::fields::FieldError;
use crate::common::memory::{Bound, LimitExceeded, OutOfMemory};
use crate::common::reply::{display_as_reply, Reply, ReplyError};

/// The `TDIGEST.*` errors with RedisBloom 2.8.2's texts, and bloomkit's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TdError {
    /// The server's own wrong-arity error.
    WrongArity,
    KeyExists,
    KeyMissing,
    WrongKeyword,
    CompressionParse,
    CompressionNotPositive,
    /// CREATE: the digest could not be allocated (or its capacity would not
    /// fit RedisBloom's `int`, which 2.8.2 answers with the same text or a crash).
    AllocationFailed,
    /// MERGE: the destination could not be allocated.
    MergeAllocationFailed,
    ValParse,
    ValNotFinite,
    /// A weight would overflow (ADD, MERGE).
    Overflow,
    NumkeysParse,
    NumkeysNotPositive,
    QuantileParse,
    QuantileRange,
    CdfParse,
    ValueParse,
    RankParse,
    RankNegative,
    LowCutParse,
    HighCutParse,
    CutRange,
    CutOrder,
    /// An RDB value or DUMP payload that does not describe a digest.
    BadData,
    /// Creating the digest would take the server past `maxmemory`.
    OverMaxmemory,
    /// The digest would pass `bf.max-filter-bytes`.
    TooLarge {
        bytes: u64,
        limit: u64,
    },
}

impl ReplyError for TdError {
    fn reply(&self) -> Reply {
        use TdError::*;
        Reply::Error(Cow::Borrowed(match *self {
            WrongArity => return Reply::WrongArity,
            KeyExists => "ERR T-Digest: key already exists",
            KeyMissing => "ERR T-Digest: key does not exist",
            WrongKeyword => "ERR T-Digest: wrong keyword",
            CompressionParse => "ERR T-Digest: error parsing compression parameter",
            CompressionNotPositive => "ERR T-Digest: compression parameter needs to be a positive integer",
            AllocationFailed => "ERR T-Digest: allocation failed",
            MergeAllocationFailed => "ERR T-Digest: allocation of destination digest failed",
            ValParse => "ERR T-Digest: error parsing val parameter",
            ValNotFinite => "ERR T-Digest: val parameter needs to be a finite number",
            Overflow => "ERR T-Digest: overflow detected",
            NumkeysParse => "ERR T-Digest: error parsing numkeys",
            NumkeysNotPositive => "ERR T-Digest: numkeys needs to be a positive integer",
            QuantileParse => "ERR T-Digest: error parsing quantile",
            QuantileRange => "ERR T-Digest: quantile should be in [0,1]",
            CdfParse => "ERR T-Digest: error parsing cdf",
            ValueParse => "ERR T-Digest: error parsing value",
            RankParse => "ERR T-Digest: error parsing rank",
            RankNegative => "ERR T-Digest: rank needs to be non negative",
            LowCutParse => "ERR T-Digest: error parsing low_cut_percentile",
            HighCutParse => "ERR T-Digest: error parsing high_cut_percentile",
            CutRange => "ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]",
            CutOrder => "ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile",
            BadData => "ERR T-Digest: received bad data",
            OverMaxmemory => "OOM command not allowed when used memory > 'maxmemory'.",
            TooLarge { bytes, limit } => {
                return Reply::Error(Cow::Owned(format!(
                    "ERR T-Digest: the t-digest would take {bytes} bytes, more than bf.max-filter-bytes \
                     ({limit}); use a smaller compression, or raise the limit with CONFIG SET \
                     bf.max-filter-bytes"
                )))
            }
        }))
    }
}

display_as_reply!(TdError);

impl From<OutOfMemory> for TdError {
    fn from(_: OutOfMemory) -> TdError {
        TdError::AllocationFailed
    }
}

/// The size limit, refused in the t-digest's own words.
impl From<LimitExceeded> for TdError {
    fn from(e: LimitExceeded) -> TdError {
        match e.bound {
            Bound::Filter => TdError::TooLarge { bytes: e.bytes, limit: e.limit },
            Bound::Memory => TdError::OverMaxmemory,
        }
    }
}

/// A value that ends early or holds a field of the wrong type is bad data.
impl From<FieldError> for TdError {
    fn from(_: FieldError) -> TdError {
        TdError::BadData
    }
}
