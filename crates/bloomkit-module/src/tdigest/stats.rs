//! The t-digests' counters for `INFO bf` (section `tdigest`): relaxed
//! atomics, plain tallies, as for the other families.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub static DIGESTS: AtomicU64 = AtomicU64::new(0);
pub static BYTES: AtomicU64 = AtomicU64::new(0);
pub static OBSERVATIONS_ADDED: AtomicU64 = AtomicU64::new(0);
pub static MERGES: AtomicU64 = AtomicU64::new(0);
pub static QUERIES: AtomicU64 = AtomicU64::new(0);
/// Compressions a read ran in place on a primary, sent on to replicas and the AOF.
pub static COMPRESSIONS_REPLICATED: AtomicU64 = AtomicU64::new(0);

/// A digest now owned by the keyspace.
pub fn created(bytes: u64) {
    DIGESTS.fetch_add(1, Relaxed);
    BYTES.fetch_add(bytes, Relaxed);
}

/// A digest freed by the keyspace.
pub fn freed(bytes: u64) {
    DIGESTS.fetch_sub(1, Relaxed);
    BYTES.fetch_sub(bytes, Relaxed);
}

pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Relaxed);
}

pub fn get(counter: &AtomicU64) -> u64 {
    counter.load(Relaxed)
}
