//! The errors of RedisBloom's Top-K (`TOPK.*`, `TopK-TYPE` keys) and their
//! exact texts: RedisBloom 2.8.2's to the letter (most start `TopK: ` with no
//! `ERR`), and bloomkit's own where it refuses what 2.8.2 would break on.

use std::borrow::Cow;

use crate::common::fields::FieldError;
use crate::common::memory::{Bound, LimitExceeded, OutOfMemory};
use crate::common::reply::{display_as_reply, Reply, ReplyError};

/// The `TOPK.*` errors with RedisBloom 2.8.2's texts, and bloomkit's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopkError {
    /// The server's own wrong-arity error.
    WrongArity,
    /// `TOPK.RESERVE` onto a key that holds anything.
    KeyExists,
    /// Every other command on a missing key.
    KeyMissing,
    InvalidK,
    InvalidWidth,
    InvalidDepth,
    InvalidDecay,
    /// `TOPK.INCRBY`'s increment: not an integer, or outside 0..=100000.
    /// An element of the reply's array, not the whole reply.
    BadIncrement,
    /// `TOPK.LIST`'s third argument is not a prefix of `WITHCOUNT`.
    WithcountExpected,
    /// The sketch could not be allocated.
    OutOfMemory,
    /// Creating the sketch would take the server past `maxmemory`.
    OverMaxmemory,
    /// The sketch would pass `bf.max-filter-bytes`: RedisBloom's words for
    /// a creation it cannot allocate (which its own tests look for), then
    /// bloomkit's reason.
    TooLarge {
        bytes: u64,
        limit: u64,
    },
    /// An RDB value or DUMP payload that does not describe a sketch.
    BadData,
}

/// `TOPK.INCRBY`'s error element, with RedisBloom's 28 spaces in the middle.
pub const BAD_INCREMENT: &str =
    "TopK: increment must be an integer greater or equal to 0                            and smaller or equal to 100,000";

impl ReplyError for TopkError {
    fn reply(&self) -> Reply {
        use TopkError::*;
        Reply::Error(Cow::Borrowed(match *self {
            WrongArity => return Reply::WrongArity,
            KeyExists => "TopK: key already exists",
            KeyMissing => "TopK: key does not exist",
            InvalidK => "TopK: invalid k",
            InvalidWidth => "TopK: invalid width",
            InvalidDepth => "TopK: invalid depth",
            InvalidDecay => "TopK: invalid decay value. must be '<= 1' & '> 0'",
            BadIncrement => BAD_INCREMENT,
            WithcountExpected => "WITHCOUNT keyword expected",
            OutOfMemory => "ERR Insufficient memory to create topk data structure",
            OverMaxmemory => "OOM command not allowed when used memory > 'maxmemory'.",
            BadData => "ERR received bad data",
            TooLarge { bytes, limit } => {
                return Reply::Error(Cow::Owned(format!(
                    "ERR Insufficient memory to create topk data structure: the Top-K sketch would \
                     take {bytes} bytes, more than bf.max-filter-bytes \
                     ({limit}); use a smaller k, width or depth, or raise the limit with \
                     CONFIG SET bf.max-filter-bytes"
                )))
            }
        }))
    }
}

display_as_reply!(TopkError);

impl From<OutOfMemory> for TopkError {
    fn from(_: OutOfMemory) -> TopkError {
        TopkError::OutOfMemory
    }
}

/// The size limit, refused in Top-K's own words.
impl From<LimitExceeded> for TopkError {
    fn from(e: LimitExceeded) -> TopkError {
        match e.bound {
            Bound::Filter => TopkError::TooLarge { bytes: e.bytes, limit: e.limit },
            Bound::Memory => TopkError::OverMaxmemory,
        }
    }
}

/// A value that ends early or holds a field of the wrong type is bad data.
impl From<FieldError> for TopkError {
    fn from(_: FieldError) -> TopkError {
        TopkError::BadData
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increment_error_has_28_spaces() {
        let text = TopkError::BadIncrement.message();
        assert!(text.contains(&format!("0{}and", " ".repeat(28))));
        assert_eq!(text.matches(' ').count(), 28 + 15);
    }
}
