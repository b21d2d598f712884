//! The errors of RedisBloom's Count-Min Sketch (`CMS.*`, `CMSk-TYPE` keys)
//! and their exact texts: RedisBloom 2.8.2's and Redis 8.12's to the letter
//! (their `CMS: ` prefix, without `ERR`), and bloomkit's own where it
//! refuses what 2.8.2 would crash on or accept broken.

use std::borrow::Cow;

use crate::common::fields::FieldError;
use crate::common::memory::{Bound, LimitExceeded, OutOfMemory};
use crate::common::reply::{display_as_reply, Reply, ReplyError};

/// The `CMS.*` errors with RedisBloom 2.8.2's texts, and bloomkit's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmsError {
    /// The server's own wrong-arity error.
    WrongArity,
    /// `CMS.INITBY*` onto a key that holds anything (any type).
    KeyExists,
    /// A command that needs the key, on an empty one.
    KeyMissing,
    InvalidWidth,
    InvalidDepth,
    InvalidOverestimation,
    InvalidProb,
    /// Dimensions whose product does not fit 64 signed bits (or are not
    /// representable at all, from `CMS.INITBYPROB`).
    InvalidInitArguments,
    /// The allocation failed (RedisBloom's text for it).
    InsufficientMemory,
    CannotParseNumber,
    NegativeNumber,
    /// One element of a `CMS.INCRBY` reply: before Redis 8.12, the item's
    /// estimate reached 4294967295; under 8.12's rules, the increment would
    /// take a cell past its maximum or the total past 2^63 - 1 and was not
    /// applied. Not a command failure.
    IncrbyOverflow,
    /// One element of a `CMS.INCRBY` reply under Redis 8.12's rules: the
    /// decrement would take a cell or the total below 0 and was not applied.
    IncrbyUnderflow,
    /// `CELL_SIZE` with a value other than 1, 2, 4 or 8 (Redis 8.12).
    InvalidCellSize,
    /// Something other than `CELL_SIZE` after a creation's numbers (Redis 8.12).
    UnknownArgument,
    InvalidNumKeys,
    NumKeysNotPositive,
    WrongNumberOfKeys,
    WrongNumberOfKeysWeights,
    InvalidWeight,
    DimensionsDiffer,
    /// A `CMS.MERGE` source whose cells are not the destination's size (Redis 8.12).
    CellSizeDiffers,
    MergeOverflow,
    /// An RDB value or DUMP payload that does not describe a sketch.
    BadData,
    /// Creating the sketch would take the server past `maxmemory`.
    OverMaxmemory,
    /// The sketch would pass `bf.max-filter-bytes`: RedisBloom's words for
    /// a creation it cannot allocate (which its own tests look for), then
    /// bloomkit's reason.
    TooLarge {
        bytes: u64,
        limit: u64,
    },
}

impl ReplyError for CmsError {
    fn reply(&self) -> Reply {
        use CmsError::*;
        Reply::Error(Cow::Borrowed(match *self {
            WrongArity => return Reply::WrongArity,
            KeyExists => "CMS: key already exists",
            KeyMissing => "CMS: key does not exist",
            InvalidWidth => "CMS: invalid width",
            InvalidDepth => "CMS: invalid depth",
            InvalidOverestimation => "CMS: invalid overestimation value",
            InvalidProb => "CMS: invalid prob value",
            InvalidInitArguments => "CMS: invalid init arguments",
            InsufficientMemory => "CMS: Insufficient memory to create the key",
            CannotParseNumber => "CMS: Cannot parse number",
            NegativeNumber => "CMS: Number cannot be negative",
            IncrbyOverflow => "CMS: INCRBY overflow",
            IncrbyUnderflow => "CMS: INCRBY underflow",
            InvalidCellSize => "CMS: CELL_SIZE must be 1, 2, 4 or 8",
            UnknownArgument => "CMS: unknown argument",
            InvalidNumKeys => "CMS: invalid numkeys",
            NumKeysNotPositive => "CMS: Number of keys must be positive",
            WrongNumberOfKeys => "CMS: wrong number of keys",
            WrongNumberOfKeysWeights => "CMS: wrong number of keys/weights",
            InvalidWeight => "CMS: invalid weight value",
            DimensionsDiffer => "CMS: width/depth is not equal",
            CellSizeDiffers => "CMS: cell size is not equal",
            MergeOverflow => "CMS: MERGE overflow",
            BadData => "ERR received bad data: not a Count-Min Sketch",
            OverMaxmemory => "OOM command not allowed when used memory > 'maxmemory'.",
            TooLarge { bytes, limit } => {
                return Reply::Error(Cow::Owned(format!(
                    "CMS: Insufficient memory to create the key: the sketch would take {bytes} \
                     bytes, more than bf.max-filter-bytes \
                     ({limit}); use a smaller width or depth, or raise the limit with \
                     CONFIG SET bf.max-filter-bytes"
                )))
            }
        }))
    }
}

display_as_reply!(CmsError);

impl From<OutOfMemory> for CmsError {
    fn from(_: OutOfMemory) -> CmsError {
        CmsError::InsufficientMemory
    }
}

/// The size limit, refused in the sketch's own words.
impl From<LimitExceeded> for CmsError {
    fn from(e: LimitExceeded) -> CmsError {
        match e.bound {
            Bound::Filter => CmsError::TooLarge { bytes: e.bytes, limit: e.limit },
            Bound::Memory => CmsError::OverMaxmemory,
        }
    }
}

/// A value that ends early or holds a field of the wrong type is bad data.
impl From<FieldError> for CmsError {
    fn from(_: FieldError) -> CmsError {
        CmsError::BadData
    }
}
