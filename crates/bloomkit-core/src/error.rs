//! Every error a command can answer with, and its exact text.
//!
//! The texts of RedisBloom 2.8.2 are kept to the letter (clients match on
//! them); the errors bloomkit adds say what was wrong and what is allowed.

use std::borrow::Cow;
use std::fmt;

use crate::apbf::{ApbfError, MAX_WINDOW_SECONDS};
use crate::cuckoo::CuckooError;
use crate::valkey::ValkeyError;

#[derive(Clone, Debug, PartialEq)]
pub enum Error {
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
    // BF.INSERT
    InsertBadCapacity,
    InsertBadErrorRate,
    InsertBadExpansion,
    InsertBadArgument,
    UnknownArgument,
    // lookups and adds
    NotFound,
    /// The key holds a value of another type (the server's standard text).
    WrongType,
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
    /// A new filter's size cannot be computed (the halved error rate underflows to 0).
    CannotCreate,
    /// A size that cannot be computed at all (capacity x expansion overflows,
    /// the error rate underflows after many scalings).
    CannotScale,
    OutOfMemory,
    /// An `APBF.*` error: the sliding-window filter's own type.
    Apbf(ApbfError),
    /// An error of a valkey-bloom filter (`bloomfltr` keys), in its texts.
    Valkey(ValkeyError),
    /// A `CF.*` error: the cuckoo filter's own texts.
    Cuckoo(CuckooError),
}

/// The largest expansion accepted, as in current RedisBloom releases.
pub const MAX_EXPANSION: i64 = 32768;

impl Error {
    /// The error reply, exactly as sent to the client.
    pub fn message(&self) -> Cow<'static, str> {
        use Error::*;
        Cow::Borrowed(match self {
            BadErrorRate => "ERR bad error rate",
            ErrorRateRange => "ERR (0 < error rate range < 1) ",
            BadCapacity => "ERR bad capacity",
            CapacityRange => "ERR (capacity should be larger than 0)",
            NoExpansion => "ERR no expansion",
            BadExpansion => "ERR bad expansion",
            ExpansionRange => "ERR expansion should be greater or equal to 1",
            NonScalingCannotExpand => "Nonscaling filters cannot expand",
            ItemExists => "ERR item exists",
            InsertBadCapacity => "Bad capacity",
            InsertBadErrorRate => "Bad error rate",
            InsertBadExpansion => "Bad expansion",
            InsertBadArgument => "Bad argument received",
            UnknownArgument => "Unknown argument received",
            NotFound => "ERR not found",
            WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value",
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
                "ERR the filter cannot grow further: its next sub-filter's size is not \
                 representable; create a filter with a larger capacity or expansion"
            }
            OutOfMemory => "ERR out of memory while allocating the filter; nothing was changed",
            Apbf(e) => return apbf_message(e),
            Valkey(e) => return e.message(),
            Cuckoo(e) => return e.message(),
            TooLarge { bytes, limit } => {
                return Cow::Owned(format!(
                    "ERR the filter would take {bytes} bytes, more than bf.max-filter-bytes \
                     ({limit}); use a larger error rate or capacity step, or raise the limit \
                     with CONFIG SET bf.max-filter-bytes"
                ))
            }
        })
    }
}

/// The reply texts of the sliding-window filter's errors.
fn apbf_message(e: &ApbfError) -> Cow<'static, str> {
    use ApbfError::*;
    Cow::Borrowed(match e {
        BadErrorRate => "ERR error rate must be a number strictly between 0 and 1",
        BadCapacity => "ERR capacity must be a positive integer (the most items per window)",
        BadWindow => "ERR the window must be COUNT (the last capacity items) or TIME seconds",
        BadSeconds => {
            return Cow::Owned(format!(
                "ERR TIME takes a window in seconds, a whole number from 1 to {MAX_WINDOW_SECONDS} (10 years)"
            ))
        }
        CannotSize => {
            "ERR cannot size a window filter for this error rate and capacity: use a larger \
             error rate or a smaller capacity"
        }
        TooLarge { bytes, limit } => {
            return Cow::Owned(format!(
                "ERR the window filter would take {bytes} bytes, more than bf.max-filter-bytes \
                 ({limit}); use a larger error rate or a smaller capacity, or raise the limit \
                 with CONFIG SET bf.max-filter-bytes"
            ))
        }
        OutOfMemory => "ERR out of memory while allocating the window filter; nothing was changed",
        BadAdvance => "ERR APBF.ADVANCE takes a generation count and times in ms, non-negative integers",
        BadState(why) => return Cow::Owned(format!("ERR invalid sliding-window filter state: {why}")),
        BadChunk => "ERR invalid chunk: it does not fit the sliding-window filter",
    })
}

impl From<ApbfError> for Error {
    fn from(e: ApbfError) -> Error {
        Error::Apbf(e)
    }
}

impl From<ValkeyError> for Error {
    fn from(e: ValkeyError) -> Error {
        Error::Valkey(e)
    }
}

impl fmt::Display for ApbfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&apbf_message(self))
    }
}

impl std::error::Error for ApbfError {}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for Error {}
