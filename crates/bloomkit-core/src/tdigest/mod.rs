//! RedisBloom's t-digest, the merging digest of t-digest-c (`TDIGEST.*`,
//! `TDIS-TYPE`), answering with the same doubles, bit for bit, as
//! RedisBloom 2.8.2 (t-digest-c 9dcd73d8).
//!
//! A digest keeps up to `cap = 6 * compression + 10` nodes in two parallel
//! arrays (means as doubles, weights as 64-bit integers): the merged
//! centroids, sorted, then the points added since the last compression.
//! Compression sorts every node and merges neighbours whose combined
//! weight stays under the scale function's bound.
//!
//! What bloomkit does differently from 2.8.2, on purpose (README says so too):
//! - a digest of one observation answers with that value (2.8.2 leaves the
//!   point in the buffer, where QUANTILE, CDF and TRIMMED_MEAN answer NaN,
//!   RANK a nonsense integer, and RDB loses it): the point stays in the
//!   buffer as in 2.8.2 (so INFO and every later state are RedisBloom's),
//!   the estimates answer from it, RDB saves it as a centroid (which
//!   RedisBloom loads and answers with), and a RedisBloom file that lost
//!   such a point gets it back from its min/max;
//! - a loaded value is checked (capacity matching the compression, node
//!   counts within it, whole weights, no NaN min, max or compression)
//!   instead of trusted;
//! - the compression is bounded by `bf.max-filter-bytes` (and a capacity
//!   that fits RedisBloom's `int`), checked before anything is allocated.
//!
//! Here: [`digest`] (the digest), [`args`] (`TDIGEST.*` arguments),
//! [`errors`] (every error and its reply text), [`formats`] (RDB).

pub mod args;
pub mod digest;
pub mod errors;
pub mod formats;

pub use digest::{c_to_i64, capacity_for, size_for, TDigest};
pub use errors::TdError;

/// The data type's name and encoding version, RedisBloom's.
pub const TYPE_NAME: &str = "TDIS-TYPE";
pub const ENCODING_VERSION: i32 = 0;

/// The compression `TDIGEST.CREATE` uses when none is given.
pub const DEFAULT_COMPRESSION: i64 = 100;
/// The largest compression whose capacity (`6c + 10`) fits RedisBloom's
/// `int` node count, so that the value could load there.
pub const MAX_COMPRESSION: i64 = (i32::MAX as i64 - 10) / 6;

/// RedisBloom's accounting: 8 bytes of header, 16 per node (a mean and a weight).
const FIXED_BYTES: u64 = 8;
const NODE_BYTES: u64 = 16;
