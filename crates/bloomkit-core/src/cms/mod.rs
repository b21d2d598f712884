//! RedisBloom's Count-Min Sketch (`CMS.*`, `CMSk-TYPE`): the single source
//! of truth for what `CMS.*` does to a sketch, with no Redis in sight.
//!
//! A sketch is `depth` rows of `width` unsigned counters and a 64-bit
//! total of every increment. Row `i` hashes an item with MurmurHash2 seeded
//! by `i`; the item's estimate is the smallest of its cells. Under
//! RedisBloom 2.8's rules ([`Rules::Classic`]) counters are 4 bytes and a
//! cell that would wrap saturates at 4294967295, which `CMS.INCRBY` reports
//! as an overflow; under Redis 8.12's ([`Rules::CellSized`]) they are 1, 2,
//! 4 or 8 bytes, increments may be negative, and a change that would leave
//! a cell's range is refused and changes nothing.
//!
//! What bloomkit does differently from 2.8.2, on purpose (README says so too):
//! - the size (`4 * width * depth` bytes) is computed with checked
//!   arithmetic and compared with the size limit before anything is
//!   allocated, and allocation is fallible;
//! - an RDB value with a zero dimension or a counter array of the wrong
//!   length is refused (2.8.2 loads it and reads past the buffer later);
//! - `MEMORY USAGE` counts the array once (`32 + 4 * width * depth`, as
//!   RedisBloom 8.6), where 2.8.2 counted it twice.
//!
//! Here: [`sketch`] (the sketch), [`args`] (`CMS.*` arguments), [`errors`]
//! (every error and its reply text), [`formats`] (the RDB value and the
//! `DUMP` payload).

pub mod args;
pub mod cells;
pub mod errors;
pub mod formats;
pub mod sketch;

pub use args::{Dimensions, Init};
pub use cells::CellSize;
pub use errors::CmsError;
pub use sketch::{CountMinSketch, Source};

use crate::common::compat::Compat;

/// The data type's name, RedisBloom's.
pub const TYPE_NAME: &str = "CMSk-TYPE";
/// The encoding version RedisBloom 2.8 and 8.10 write (and the only one they read).
pub const ENCODING_VERSION: i32 = 0;
/// The encoding version Redis 8.12 writes: the cell size after the total.
pub const ENCODING_VERSION_CELL_SIZE: i32 = 1;

/// Whose Count-Min Sketch `CMS.*` answers as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rules {
    /// RedisBloom 2.8 and 8.10: 4-byte cells that saturate, no negative
    /// increments, three `CMS.INFO` fields, encoding version 0.
    Classic,
    /// Redis 8.12: `CELL_SIZE`, negative increments, overflow and underflow
    /// refused per item, the total kept within 2^63 - 1, the `cell_size`
    /// field, encoding version 1.
    CellSized,
}

impl Rules {
    /// The rules of a compatibility level.
    pub fn of(level: Compat) -> Rules {
        match level {
            Compat::RedisBloom812 => Rules::CellSized,
            _ => Rules::Classic,
        }
    }

    /// The encoding version values are written at.
    pub fn encoding_version(self) -> i32 {
        match self {
            Rules::Classic => ENCODING_VERSION,
            Rules::CellSized => ENCODING_VERSION_CELL_SIZE,
        }
    }
}
