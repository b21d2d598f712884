//! bloomkit's expandable filter (`XF.*`, `bkit-xflt` keys): a filter that
//! grows from any start to any size without slowing down, at a stable
//! false-positive rate, with deletes, counts and merges.
//!
//! Blocks of quotients stored Elias-Fano style, each a dyadic range of
//! hashes, found by an extendible-hashing directory and split one at a time
//! as they fill: memory follows the items at every size, with no table that
//! doubles all at once. Entries give a fingerprint bit to the address at
//! each split (InfiniFilter, Dayan et al. SIGMOD 2023; the Aleph filter,
//! Dayan, Bercea and Pagh PVLDB 2024), newer entries get longer
//! fingerprints so that the expected false matches stay within the
//! configured rate, and items are hashed with a per-filter secret seed.
//! `DESIGN.md` beside this file says why it works, what it costs and where
//! its limits are.
//!
//! Here: [`block`] (one block: its layout, lookups, in-place writes, the
//! checks of a loaded one), [`filter`] (the filter: hashing, the schedule,
//! growth, reads and writes), `plans` (the fingerprint lengths of the
//! ranks adds fill, kept so that an add does no float division), `slots`
//! (the directory: each slot holds its block, and owns the blocks), `batch`
//! and `undo` (all-or-nothing batches of adds and the records that undo
//! them), `merge` (building blocks in hash order:
//! merges and the conversion of old values), [`args`] (`XF.*` arguments),
//! [`errors`] (every error and its reply text), [`formats`] (RDB, DUMP and
//! `XF.SCANDUMP`/`XF.LOADCHUNK`), `legacy` (bloomkit 0.1's encoding, read).

pub mod args;
mod batch;
mod block;
pub mod errors;
mod filter;
pub mod formats;
pub mod kernel;
mod legacy;
mod legacy_table;
mod loading;
mod merge;
mod model;
mod plans;
mod slots;
mod undo;

pub use args::XfDefaults;
pub use batch::Batch;
pub use errors::XfError;
pub use filter::{
    deployment_key, key_id, Added, Hashing, LookupCost, Seed, XfFilter, XfHash, XfInfo, XfParams,
    HASHED_AT_ONCE, HASH_SEED_VAR,
};
pub use formats::{HEADER_LEN, MODULE_ID};
pub use kernel::Kernel;
pub use model::XfModel;

/// The most distinct entries a block takes from adds and merges: past it,
/// items that fall on that block are refused as crowded.
pub const MAX_BLOCK_ENTRIES: u32 = block::max_entries(0);

/// The data type's name and encoding version.
pub const TYPE_NAME: &str = "bkit-xflt";
pub const ENCODING_VERSION: i32 = 1;

/// What `XF.ADD` and friends create a missing key with.
pub const DEFAULT_ERROR_RATE: f64 = 0.01;
pub const DEFAULT_CAPACITY: u64 = 100;
/// The default `MAXCAPACITY`: 2^36 (about 69 billion) items, far past what
/// any memory holds, so that in practice only the size limits stop growth.
pub const DEFAULT_MAX_CAPACITY: u64 = 1 << 36;
/// The most entries one `XF.MERGE` reads by default (`bf.xf-max-merge-entries`):
/// a merge runs in one command, holding the server for its whole run
/// (tens of nanoseconds per entry), so its size is bounded like a filter's
/// bytes; 2^24 is about 8 million items in each of two sources.
pub const DEFAULT_MAX_MERGE_ENTRIES: u64 = 1 << 24;
/// The highest `bf.xf-max-merge-entries` accepted.
pub const MAX_MERGE_ENTRIES_LIMIT: u64 = 1 << 48;
/// The largest `CAPACITY` and `MAXCAPACITY` accepted: 2^40 items.
pub const MAX_CAPACITY_LIMIT: u64 = 1 << 40;
/// The error rates accepted: fingerprints stay within 52 bits.
pub const MIN_ERROR_RATE: f64 = 1e-9;
pub const MAX_ERROR_RATE: f64 = 0.5;
/// The largest chunk `XF.SCANDUMP` hands out: small enough that
/// `XF.LOADCHUNK` checks one in about a millisecond.
pub const CHUNK_BYTES: u64 = 1 << 20;
