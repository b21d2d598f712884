//! The errors of RedisBloom's Bloom filter (`BF.*` on `MBbloom--` keys)
//! and their exact texts.
//!
//! The texts of RedisBloom 2.8.2 are kept to the letter (clients match on
//! them); the errors bloomkit adds say what was wrong and what is allowed.

use std::borrow::Cow;

use crate::common::fields::FieldError;
use crate::common::memory::{Bound, LimitExceeded, OutOfMemory};
use crate::common::reply::{display_as_reply, Reply, ReplyError};

#[derive(Clone, Debug, PartialEq)]
pub enum BfError {
    /// The server's own wrong-arity error.
    WrongArity,
    // BF.RESERVE
    BadErrorRate,
    ErrorRateRange,
    BadCapacity,
    CapacityRange,
    NoExpansion,
    BadExpansion,
    ExpansionRange,
    NonScalingCannotExpand,
    ItemExists,
    // RedisBloom 8's range errors (bf.compat redisbloom-8)
    ErrorRateOutOfRange,
    CapacityOutOfRange,
    ExpansionOutOfRange,
    /// RedisBloom 8's text for a filter that could not be allocated.
    InsufficientMemory,
    // BF.INSERT
    InsertBadCapacity,
    InsertBadErrorRate,
    InsertBadExpansion,
    InsertBadArgument,
    UnknownArgument,
    // lookups and adds
    NotFound,
    NonScalingFull,
    InvalidInfoField,
    // BF.SCANDUMP / BF.LOADCHUNK
    ScanDumpIterNotNumeric,
    LoadChunkIterNotNumeric,
    BadData,
    NoLinkAtOffset,
    ChunkTooBig,
    // bloomkit's own
    /// Expansion above what bloomkit accepts (RedisBloom 2.8 silently truncated it to 32 bits).
    ExpansionTooLarge,
    /// A filter would grow past the configured `bf.max-filter-bytes`.
    TooLarge {
        bytes: u64,
        limit: u64,
    },
    /// A `BF.LOADCHUNK` header describing a filter past `bf.max-filter-bytes`:
    /// RedisBloom's phrase for a header it refuses, then bloomkit's reason.
    HeaderTooLarge {
        bytes: u64,
        limit: u64,
    },
    /// A new filter's size cannot be computed (the halved error rate underflows to 0).
    CannotCreate,
    /// A size that cannot be computed at all (capacity x expansion overflows,
    /// the error rate underflows after many scalings).
    CannotScale,
    OutOfMemory,
    /// An add that needed a new sub-filter past `bf.max-filter-bytes`.
    /// Every failed growth starts with RedisBloom's `problem inserting into
    /// filter`, which RedisBloom 8 answers (and its tests expect) when a
    /// growth cannot be allocated; bloomkit then says why.
    GrowthTooLarge {
        bytes: u64,
        limit: u64,
    },
    /// An add whose new sub-filter could not be allocated.
    GrowthOutOfMemory,
    /// Creating or growing the filter would take the server past `maxmemory`
    /// (the server's own OOM text, so that clients treat it as it).
    OverMaxmemory,
}

impl ReplyError for BfError {
    fn reply(&self) -> Reply {
        use BfError::*;
        Reply::Error(Cow::Borrowed(match self {
            WrongArity => return Reply::WrongArity,
            BadErrorRate => "ERR bad error rate",
            ErrorRateRange => "ERR (0 < error rate range < 1) ",
            BadCapacity => "ERR bad capacity",
            CapacityRange => "ERR (capacity should be larger than 0)",
            NoExpansion => "ERR no expansion",
            BadExpansion => "ERR bad expansion",
            ExpansionRange => "ERR expansion should be greater or equal to 1",
            NonScalingCannotExpand => "Nonscaling filters cannot expand",
            ItemExists => "ERR item exists",
            ErrorRateOutOfRange => "ERR error rate must be in the range (0.000000, 1.000000)",
            CapacityOutOfRange => "ERR capacity must be in the range [1, 1073741824]",
            ExpansionOutOfRange => "ERR expansion must be in the range [0, 32768]",
            InsufficientMemory => "ERR Insufficient memory to create filter",
            InsertBadCapacity => "Bad capacity",
            InsertBadErrorRate => "Bad error rate",
            InsertBadExpansion => "Bad expansion",
            InsertBadArgument => "Bad argument received",
            UnknownArgument => "Unknown argument received",
            NotFound => "ERR not found",
            NonScalingFull => "ERR non scaling filter is full",
            InvalidInfoField => "Invalid information value",
            ScanDumpIterNotNumeric => "Second argument must be numeric",
            LoadChunkIterNotNumeric => "ERR Second argument must be numeric",
            BadData => "ERR received bad data",
            NoLinkAtOffset => "ERR invalid offset - no link found",
            ChunkTooBig => "ERR invalid chunk - Too big for current filter",
            ExpansionTooLarge => "ERR expansion must be in the range [1, 32768]",
            CannotCreate => "ERR could not create filter",
            CannotScale => {
                "ERR problem inserting into filter: it cannot grow further, its next sub-filter's \
                 size is not representable; create a filter with a larger capacity or expansion"
            }
            OutOfMemory => "ERR out of memory while allocating the filter; nothing was changed",
            GrowthOutOfMemory => {
                "ERR problem inserting into filter: out of memory while allocating its next \
                 sub-filter; the item was not added"
            }
            GrowthTooLarge { bytes, limit } => {
                return Reply::Error(Cow::Owned(format!(
                    "ERR problem inserting into filter: it would grow to {bytes} bytes, more than \
                     bf.max-filter-bytes ({limit}); use a larger error rate or capacity step, or raise \
                     the limit with CONFIG SET bf.max-filter-bytes"
                )))
            }
            OverMaxmemory => "OOM command not allowed when used memory > 'maxmemory'.",
            HeaderTooLarge { bytes, limit } => {
                return Reply::Error(Cow::Owned(format!(
                    "ERR received bad data: the filter would take {bytes} bytes, more than \
                     bf.max-filter-bytes ({limit}); raise the limit with CONFIG SET bf.max-filter-bytes \
                     to load it"
                )))
            }
            TooLarge { bytes, limit } => {
                return Reply::Error(Cow::Owned(format!(
                    "ERR the filter would take {bytes} bytes, more than bf.max-filter-bytes \
                     ({limit}); use a larger error rate or capacity step, or raise the limit \
                     with CONFIG SET bf.max-filter-bytes"
                )))
            }
        }))
    }
}

display_as_reply!(BfError);

impl From<OutOfMemory> for BfError {
    fn from(_: OutOfMemory) -> BfError {
        BfError::OutOfMemory
    }
}

impl From<LimitExceeded> for BfError {
    fn from(e: LimitExceeded) -> BfError {
        match e.bound {
            Bound::Filter => BfError::TooLarge { bytes: e.bytes, limit: e.limit },
            Bound::Memory => BfError::OverMaxmemory,
        }
    }
}

/// A value that ends early or holds a field of the wrong type is bad data.
impl From<FieldError> for BfError {
    fn from(_: FieldError) -> BfError {
        BfError::BadData
    }
}
