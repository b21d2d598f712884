//! RedisBloom's Count-Min Sketch (`CMS.*`, `CMSk-TYPE`): the single source
//! of truth for what `CMS.*` does to a sketch, with no Redis in sight.
//!
//! A sketch is `depth` rows of `width` unsigned 32-bit counters and a 64-bit
//! total of every increment. Row `i` hashes an item with MurmurHash2 seeded
//! by `i`; the item's estimate is the smallest of its cells. A cell that
//! would wrap saturates at 4294967295, which `CMS.INCRBY` reports as an
//! overflow.
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
pub mod errors;
pub mod formats;
pub mod sketch;

pub use args::Dimensions;
pub use errors::CmsError;
pub use sketch::{CountMinSketch, Source};

/// The data type's name and encoding version, RedisBloom's.
pub const TYPE_NAME: &str = "CMSk-TYPE";
pub const ENCODING_VERSION: i32 = 0;
