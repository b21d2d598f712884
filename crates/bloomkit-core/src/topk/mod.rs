//! RedisBloom's Top-K, a HeavyKeeper (`TOPK.*`, `TopK-TYPE`), with no Redis
//! in sight: the single source of truth for what `TOPK.*` does to a sketch.
//!
//! A sketch is `depth` rows of `width` buckets `{fingerprint, count}` and a
//! min-heap of the `k` heaviest items seen. An item's fingerprint is
//! `MurmurHash2(item, 1919)`; its bucket in row `i` is column
//! `MurmurHash2(item, i) % width`. Adding `n` units of an item raises the
//! count of every bucket holding its fingerprint, takes empty buckets, and
//! decays the buckets of other fingerprints one unit at a time with
//! probability `decay^count`; the largest count the item reached enters the
//! heap if it is at least the heap's minimum.
//!
//! What bloomkit does differently from RedisBloom 2.8.2, on purpose (the
//! README says so too):
//! - the decay draws are not `rand()` but a mix of what every copy of the
//!   sketch holds (see [`sketch`]), so that replicas and AOF replays end
//!   identical to the primary; with decay 1 the answers are RedisBloom's;
//! - the decay table is filled after a load (2.8.2 leaves it zero, so a
//!   reloaded sketch never decays);
//! - items are binary-safe in replies and in the RDB value (2.8.2 cuts them
//!   at their first NUL), and an empty-string item stays one after a reload;
//! - `k` above 4294967295 is refused (2.8.2 truncates it, and 2^32 aborts
//!   the server); loads are validated (non-zero `k`, `width`, `depth`,
//!   blob sizes exactly `8 x width x depth` and `24 x k`, each heap slot's
//!   length and text as a writer makes them, so that whatever loads saves
//!   back to the same sketch) and refused cleanly instead of asserting;
//! - sizes are checked against the size limit before anything is allocated.
//!
//! Here: [`sketch`] (the HeavyKeeper), [`args`] (`TOPK.*` arguments),
//! [`errors`] (every error and its reply text), [`formats`] (the RDB value,
//! and DUMP payloads for the AOF rewrite and the tests).

pub mod args;
pub mod errors;
pub mod formats;
pub mod sketch;

pub use errors::TopkError;
pub use sketch::{Bucket, Slot, TopK, TopkParams};

/// The data type's name and encoding version, RedisBloom's.
pub const TYPE_NAME: &str = "TopK-TYPE";
pub const ENCODING_VERSION: i32 = 0;

/// What `TOPK.RESERVE key k` uses for the parameters it leaves out.
pub const DEFAULT_WIDTH: u32 = 8;
pub const DEFAULT_DEPTH: u32 = 7;
pub const DEFAULT_DECAY: f64 = 0.9;

/// The largest increment `TOPK.INCRBY` takes.
pub const MAX_INCREMENT: i64 = 100_000;

/// The seed of the fingerprint hash (row `i` hashes with seed `i`).
pub const FINGERPRINT_SEED: u32 = 1919;

/// Entries of the decay table: `decay^i` for `i` below it.
pub const DECAY_TABLE_LEN: usize = 256;

/// Bytes RedisBloom counts for the sketch's struct (which holds the decay
/// table), for each bucket and for each heap slot, in `MEMORY USAGE`.
pub const STRUCT_BYTES: u64 = 2088;
pub const BUCKET_BYTES: u64 = 8;
pub const SLOT_BYTES: u64 = 24;
