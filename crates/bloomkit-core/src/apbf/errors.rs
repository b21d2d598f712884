//! The sliding-window filter's errors (`APBF.*`) and their reply texts,
//! which say what was wrong and what is allowed.

use std::borrow::Cow;

use super::MAX_WINDOW_SECONDS;
use crate::common::memory::{Bound, LimitExceeded};
use crate::common::reply::{display_as_reply, Reply, ReplyError};

/// Everything that can go wrong with a sliding-window filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApbfError {
    /// The server's own wrong-arity error.
    WrongArity,
    /// A LOADCHUNK iterator that is not a non-negative integer.
    IterNotNumeric,
    /// A SCANDUMP iterator that is not a non-negative integer.
    ScanDumpIterNotNumeric,
    /// `APBF.RESERVE` (or a header's LOADCHUNK) onto an existing key.
    ItemExists,
    /// A write or read that needs the key, on a missing one.
    NotFound,
    /// `APBF.ADD` or `APBF.MADD` on a missing key. Unlike `BF.ADD` and
    /// `XF.ADD`, they create nothing: a window has no default (count or
    /// time, how long, for how many items), and one guessed would forget
    /// items too soon or take far more memory than needed. The reply keeps
    /// `not found` (clients create the filter on it) and names the command
    /// that creates one.
    AddToMissing,
    /// The error rate is not a number strictly between 0 and 1.
    BadErrorRate,
    /// The capacity is not a positive integer.
    BadCapacity,
    /// Neither `COUNT` nor `TIME seconds`.
    BadWindow,
    /// `TIME` seconds not within 1 ..= [`MAX_WINDOW_SECONDS`].
    BadSeconds,
    /// No shape of at most [`super::MAX_SLICES`] slices meets the rate.
    CannotSize,
    /// The filter would exceed `bf.max-filter-bytes`.
    TooLarge {
        bytes: u64,
        limit: u64,
    },
    OutOfMemory,
    /// Creating the filter would take the server past `maxmemory`.
    OverMaxmemory,
    /// `APBF.ADVANCE`'s count or times are not non-negative integers.
    BadAdvance,
    /// A state (RDB, DUMP, LOADCHUNK header, file) that is not valid.
    BadState(&'static str),
    /// A LOADCHUNK chunk that does not fit the filter.
    BadChunk,
}

impl ReplyError for ApbfError {
    fn reply(&self) -> Reply {
        use ApbfError::*;
        Reply::Error(Cow::Borrowed(match self {
            WrongArity => return Reply::WrongArity,
            IterNotNumeric => "ERR Second argument must be numeric",
            ScanDumpIterNotNumeric => "Second argument must be numeric",
            ItemExists => "ERR item exists",
            NotFound => "ERR not found",
            AddToMissing => {
                "ERR not found: APBF.ADD and APBF.MADD add to an existing window filter; create it \
                 first with APBF.RESERVE key error_rate capacity COUNT | TIME seconds"
            }
            BadErrorRate => "ERR error rate must be a number strictly between 0 and 1",
            BadCapacity => "ERR capacity must be a positive integer (the most items per window)",
            BadWindow => "ERR the window must be COUNT (the last capacity items) or TIME seconds",
            BadSeconds => {
                return Reply::Error(Cow::Owned(format!(
                "ERR TIME takes a window in seconds, a whole number from 1 to {MAX_WINDOW_SECONDS} (10 years)"
            )))
            }
            CannotSize => {
                "ERR cannot size a window filter for this error rate and capacity: use a larger \
             error rate or a smaller capacity"
            }
            TooLarge { bytes, limit } => {
                return Reply::Error(Cow::Owned(format!(
                    "ERR the window filter would take {bytes} bytes, more than bf.max-filter-bytes \
                 ({limit}); use a larger error rate or a smaller capacity, or raise the limit \
                 with CONFIG SET bf.max-filter-bytes"
                )))
            }
            OutOfMemory => "ERR out of memory while allocating the window filter; nothing was changed",
            OverMaxmemory => "OOM command not allowed when used memory > 'maxmemory'.",
            BadAdvance => "ERR APBF.ADVANCE takes a generation count and times in ms, non-negative integers",
            BadState(why) => {
                return Reply::Error(Cow::Owned(format!("ERR invalid sliding-window filter state: {why}")))
            }
            BadChunk => "ERR invalid chunk: it does not fit the sliding-window filter",
        }))
    }
}

display_as_reply!(ApbfError);

impl From<LimitExceeded> for ApbfError {
    fn from(e: LimitExceeded) -> ApbfError {
        match e.bound {
            Bound::Filter => ApbfError::TooLarge { bytes: e.bytes, limit: e.limit },
            Bound::Memory => ApbfError::OverMaxmemory,
        }
    }
}
