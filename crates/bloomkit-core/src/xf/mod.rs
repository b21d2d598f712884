//! bloomkit's expandable filter (`XF.*`, `bkit-xflt` keys): a filter that
//! grows from any start to any size without slowing down, at a stable
//! false-positive rate, with deletes, counts and merges.
//!
//! One quotient-filter table (Bender et al. 2012; Pandey et al. 2017) that
//! doubles, in the manner of InfiniFilter (Dayan et al., SIGMOD 2023) and the
//! Aleph filter (Dayan, Bercea and Pagh, PVLDB 2024): at each doubling every
//! entry gives its fingerprint's first bit to the address, entries added
//! later get longer fingerprints so that the expected false matches form a
//! convergent sum bounded by the configured rate, and an entry whose
//! fingerprint has run out is copied to both halves. The doubling is done
//! incrementally (a few slots per write, or [`XfFilter::migrate_step`] from
//! a timer), the way the server's dictionaries rehash, and every operation
//! is correct at every moment of it. `DESIGN.md` beside this file says why
//! it works, what it costs and where its limits are.
//!
//! Here: [`table`] (one table: slots, runs, the load checks), [`filter`]
//! (the filter, its fingerprint schedule, growth and merges), [`args`]
//! (`XF.*` arguments), [`errors`] (every error and its reply text),
//! [`formats`] (RDB, DUMP and `XF.SCANDUMP`/`XF.LOADCHUNK`).

pub mod args;
pub mod errors;
pub mod filter;
pub mod formats;
pub mod table;

pub use args::XfDefaults;
pub use errors::XfError;
pub use filter::{LookupCost, Retired, XfFilter, XfHash, XfInfo, XfParams, PACE_SLOTS};
pub use formats::{HEADER_LEN, MODULE_ID};

/// The data type's name and encoding version.
pub const TYPE_NAME: &str = "bkit-xflt";
pub const ENCODING_VERSION: i32 = 0;

/// What `XF.ADD` and friends create a missing key with.
pub const DEFAULT_ERROR_RATE: f64 = 0.01;
pub const DEFAULT_CAPACITY: u64 = 1000;
/// The default `MAXCAPACITY`: 2^36 (about 69 billion) items, far past what
/// any memory holds, so that in practice only the size limits stop growth.
pub const DEFAULT_MAX_CAPACITY: u64 = 1 << 36;
/// The largest `CAPACITY` and `MAXCAPACITY` accepted: 2^40 items.
pub const MAX_CAPACITY_LIMIT: u64 = 1 << 40;
/// The error rates accepted: fingerprints stay within 52 bits.
pub const MIN_ERROR_RATE: f64 = 1e-9;
pub const MAX_ERROR_RATE: f64 = 0.5;
/// The largest chunk `XF.SCANDUMP` hands out: small enough that
/// `XF.LOADCHUNK` checks one in about a millisecond.
pub const CHUNK_BYTES: u64 = 1 << 20;
