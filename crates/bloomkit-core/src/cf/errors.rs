//! The errors of RedisBloom's cuckoo filter (`CF.*`, `MBbloomCF` keys) and
//! their exact texts: RedisBloom 2.8.2's to the letter, and bloomkit's own
//! where it refuses what 2.8.2 would break on.

use std::borrow::Cow;

use crate::common::fields::FieldError;
use crate::common::memory::{Bound, LimitExceeded, OutOfMemory};
use crate::common::reply::{display_as_reply, Reply, ReplyError};

/// The `CF.*` errors with RedisBloom 2.8.2's texts, and bloomkit's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfError {
    /// The server's own wrong-arity error.
    WrongArity,
    /// `CF.INSERT` with an option it does not know (the same text as BF.INSERT's).
    UnknownArgument,
    /// An RDB value or DUMP payload that does not describe a filter.
    BadData,
    /// `CF.RESERVE` onto an existing key.
    ItemExists,
    /// `CF.INSERT ... NOCREATE` and readers that need the key, on a missing one.
    NotFound,
    OutOfMemory,
    /// Creating or growing the filter would take the server past `maxmemory`.
    OverMaxmemory,
    BadCapacity,
    CapacityTooSmall,
    MaxIterationsNotNumber,
    MaxIterationsRange,
    BucketSizeNotNumber,
    BucketSizeRange,
    ExpansionNotNumber,
    ExpansionRange,
    // RedisBloom 8's range errors (bf.compat redisbloom-8), as measured.
    /// `CF.RESERVE`'s capacity outside [2 x bucket size, 2^30].
    CapacityOutOfRange,
    /// `CF.INSERT`'s capacity outside [2 x cf-bucket-size, 2^30].
    InsertCapacityOutOfRange,
    MaxIterationsOutOfRange,
    /// The bucket size's maximum is min(255, cf-initial-size / 2).
    BucketSizeOutOfRange {
        max: u16,
    },
    ExpansionOutOfRange,
    /// `CF.DEL` on a missing key or one of another type.
    DelNotFound,
    /// `CF.COMPACT` on a missing key or one of another type.
    CompactNotFound,
    Full,
    MaxExpansions,
    InvalidPosition,
    InvalidHeader,
    CannotCreate,
    BadChunk,
    /// bloomkit's: growth past [`super::MAX_GROWN_FILTERS`] sub-filters.
    TooManyFilters,
    /// bloomkit's: a size that cannot be represented (capacity or growth overflow).
    CannotSize,
    /// A `CF.LOADCHUNK` header describing a filter past `bf.max-filter-bytes`:
    /// RedisBloom's words for a header it refuses, then bloomkit's reason.
    HeaderTooLarge {
        bytes: u64,
        limit: u64,
    },
    /// The filter would pass `bf.max-filter-bytes`.
    TooLarge {
        bytes: u64,
        limit: u64,
    },
}

impl ReplyError for CfError {
    fn reply(&self) -> Reply {
        use CfError::*;
        Reply::Error(Cow::Borrowed(match *self {
            WrongArity => return Reply::WrongArity,
            UnknownArgument => "Unknown argument received",
            BadData => "ERR received bad data",
            ItemExists => "ERR item exists",
            NotFound => "ERR not found",
            OutOfMemory => "ERR out of memory while allocating the filter; nothing was changed",
            OverMaxmemory => "OOM command not allowed when used memory > 'maxmemory'.",
            BadCapacity => "Bad capacity",
            CapacityTooSmall => "Capacity must be at least (BucketSize * 2)",
            MaxIterationsNotNumber => "Couldn't parse MAXITERATIONS",
            MaxIterationsRange => "MAXITERATIONS: value must be an integer between 1 and 65535, inclusive.",
            BucketSizeNotNumber => "Couldn't parse BUCKETSIZE",
            BucketSizeRange => "BUCKETSIZE: value must be an integer between 1 and 255, inclusive.",
            ExpansionNotNumber => "Couldn't parse EXPANSION",
            ExpansionRange => "EXPANSION: value must be an integer between 0 and 32768, inclusive.",
            CapacityOutOfRange => "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]",
            InsertCapacityOutOfRange => "Capacity must be in the range [cf-bucket-size * 2, 1073741824]",
            MaxIterationsOutOfRange => "MAXITERATIONS: value must be in the range [1, 65535]",
            BucketSizeOutOfRange { max } => {
                return Reply::Error(Cow::Owned(format!("BUCKETSIZE: value must be in the range [1, {max}]")))
            }
            ExpansionOutOfRange => "EXPANSION: value must be in the range [0, 32768]",
            DelNotFound => "Not found",
            CompactNotFound => "Cuckoo filter was not found",
            Full => "Filter is full",
            MaxExpansions => "Maximum expansions reached",
            InvalidPosition => "Invalid position",
            InvalidHeader => "Invalid header",
            CannotCreate => "Couldn't create filter!",
            BadChunk => "Couldn't load chunk!",
            TooManyFilters => {
                "ERR the cuckoo filter cannot grow past 1024 sub-filters in one command (too many \
                 copies of one item?); delete copies, or create it with a larger capacity or \
                 expansion"
            }
            CannotSize => {
                "ERR the cuckoo filter's size is not representable; use a smaller capacity, \
                 bucket size or expansion"
            }
            HeaderTooLarge { bytes, limit } => {
                return Reply::Error(Cow::Owned(format!(
                    "Couldn't create filter! The cuckoo filter would take {bytes} bytes, more than \
                     bf.max-filter-bytes ({limit}); raise the limit with CONFIG SET bf.max-filter-bytes \
                     to load it"
                )))
            }
            TooLarge { bytes, limit } => {
                return Reply::Error(Cow::Owned(format!(
                    "ERR the cuckoo filter would take {bytes} bytes, more than bf.max-filter-bytes \
                     ({limit}); use a smaller capacity or expansion, or raise the limit with \
                     CONFIG SET bf.max-filter-bytes"
                )))
            }
        }))
    }
}

display_as_reply!(CfError);

impl From<OutOfMemory> for CfError {
    fn from(_: OutOfMemory) -> CfError {
        CfError::OutOfMemory
    }
}

/// The size limit, refused in the cuckoo filter's own words.
impl From<LimitExceeded> for CfError {
    fn from(e: LimitExceeded) -> CfError {
        match e.bound {
            Bound::Filter => CfError::TooLarge { bytes: e.bytes, limit: e.limit },
            Bound::Memory => CfError::OverMaxmemory,
        }
    }
}

/// A value that ends early or holds a field of the wrong type is bad data.
impl From<FieldError> for CfError {
    fn from(_: FieldError) -> CfError {
        CfError::BadData
    }
}
