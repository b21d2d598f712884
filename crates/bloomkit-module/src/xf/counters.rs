//! The expandable filter's counters for `INFO bf` (section `xf`), kept with
//! the family. Relaxed atomics: plain tallies, and lazy-free may drop a
//! filter on a background thread.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Filters the keyspace holds, and their bytes (as `MEMORY USAGE` counts them).
pub static FILTERS: AtomicU64 = AtomicU64::new(0);
pub static BYTES: AtomicU64 = AtomicU64::new(0);
/// Items added, deleted and looked up (EXISTS, MEXISTS and COUNT items).
pub static ITEMS_ADDED: AtomicU64 = AtomicU64::new(0);
pub static ITEMS_DELETED: AtomicU64 = AtomicU64::new(0);
pub static LOOKUPS: AtomicU64 = AtomicU64::new(0);
/// Doublings finished, by writes, merges and loads.
pub static EXPANSIONS: AtomicU64 = AtomicU64::new(0);
/// `XF.MERGE` commands that changed their destination.
pub static MERGES: AtomicU64 = AtomicU64::new(0);
/// Creations and growths refused by `bf.max-filter-bytes`, `maxmemory` or a failed allocation.
pub static REFUSED: AtomicU64 = AtomicU64::new(0);

pub fn created(bytes: u64) {
    FILTERS.fetch_add(1, Relaxed);
    BYTES.fetch_add(bytes, Relaxed);
}

pub fn freed(bytes: u64) {
    FILTERS.fetch_sub(1, Relaxed);
    BYTES.fetch_sub(bytes, Relaxed);
}

/// A stored filter changed size (a doubling started or finished).
pub fn resized(before: u64, after: u64) {
    if after >= before {
        BYTES.fetch_add(after - before, Relaxed);
    } else {
        BYTES.fetch_sub(before - after, Relaxed);
    }
}

pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Relaxed);
}

pub fn get(counter: &AtomicU64) -> u64 {
    counter.load(Relaxed)
}
