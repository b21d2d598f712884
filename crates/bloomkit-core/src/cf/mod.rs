//! Cuckoo filters as RedisBloom 2.8 lays them out: the single source of
//! truth for what `CF.*` does to a filter, with no Redis in sight.
//!
//! A filter is a list of sub-filters; each is `buckets x bucket_size` slots
//! of one byte, a slot holding an 8-bit fingerprint (0 = empty). An item
//! hashes to `h = MurmurHash64A(item, 0)`, its fingerprint is
//! `h % 255 + 1`, its two buckets are `h1 = h` and
//! `h2 = h1 ^ (fp * 0x5bd1e995)`, each taken modulo a sub-filter's bucket
//! count. Sub-filter `i` has `buckets x expansion^i` buckets; bucket counts
//! and expansions are powers of two, so that `alt(fp, alt(fp, i)) = i` under
//! every modulus (the kick-out undo and compaction rely on it).
//!
//! What bloomkit does differently from 2.8.2, on purpose (README says so too):
//! - slot offsets `(h % buckets) * bucket_size` and the kick-out loop's bucket
//!   index are 64-bit; 2.8.2 keeps them in 32 bits, which breaks (or divides
//!   by zero) once a sub-filter has 2^32 buckets or slots;
//! - every size is computed with checked arithmetic and compared with the
//!   size limit before anything is allocated, and allocation is fallible;
//! - a filter never grows past [`MAX_GROWN_FILTERS`] sub-filters: 2.8.2 checks
//!   its limit of 32 once per command, so one `CF.INSERT` of very many copies
//!   of one item (each sub-filter holds at most `2 x bucket_size` of them)
//!   grows it without bound until its 16-bit sub-filter count wraps; here the
//!   item that would grow it further is refused and the command stops there;
//! - a header or RDB value that does not describe a filter RESERVE could
//!   have made (zero sub-filters, zero or non-power-of-two buckets, expansion 0
//!   with several sub-filters, a non-power-of-two expansion, sub-filter sizes
//!   off the geometric series, a data length that does not match) is refused.
//!
//! Here: [`filter`] (the filter), [`args`] (`CF.*` arguments), [`errors`]
//! (every error and its reply text), [`formats`] (SCANDUMP and RDB).

pub mod args;
pub mod errors;
pub mod filter;
pub mod formats;

pub use args::CfDefaults;
pub use errors::CfError;
pub use filter::{CuckooFilter, CuckooParams, Insert, Lookup, Shape, SubFilter};

/// The data type's name and encoding version, RedisBloom's.
pub const TYPE_NAME: &str = "MBbloomCF";
pub const ENCODING_VERSION: i32 = 4;

/// What `CF.ADD`/`CF.INSERT` create a missing key with (RedisBloom 2.8.2).
pub const DEFAULT_CAPACITY: u64 = 1024;
pub const DEFAULT_BUCKET_SIZE: u16 = 2;
pub const DEFAULT_MAX_ITERATIONS: u16 = 20;
pub const DEFAULT_EXPANSION: u16 = 1;
pub const MAX_BUCKET_SIZE: u16 = 255;
pub const MAX_EXPANSION: u16 = 32768;
/// A write is refused up front once a filter has this many sub-filters
/// (RedisBloom's `CF_MAX_EXPANSIONS` default): "Maximum expansions reached".
pub const MAX_EXPANSIONS: usize = 32;
/// The most sub-filters a loaded filter may have: RedisBloom counts them in
/// 16 bits, so a filter with more could not come from it or go back to it.
pub const MAX_FILTERS: usize = u16::MAX as usize;
/// The most sub-filters a filter grows to. Writes stop at [`MAX_EXPANSIONS`]
/// already, so only one command adding very many items at once gets here;
/// the bound keeps each insert's scan of the sub-filters short.
pub const MAX_GROWN_FILTERS: usize = 1024;

/// Bytes RedisBloom counts for the filter and for each sub-filter's
/// bookkeeping in `CF.INFO Size` and `MEMORY USAGE` (its struct sizes).
const FILTER_OVERHEAD: u64 = 40;
const SUB_FILTER_OVERHEAD: u64 = 16;
/// The multiplier of the alternate bucket (MurmurHash2's constant).
const ALT_MULTIPLIER: u64 = 0x5bd1e995;
/// Length of the `CF.SCANDUMP` header: four u64 then three u16, packed.
pub const HEADER_LEN: usize = 38;
