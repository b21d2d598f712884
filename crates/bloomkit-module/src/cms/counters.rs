//! The Count-Min Sketch's counters for `INFO bf` (section `cms`), kept with
//! the family. Relaxed atomics: plain tallies, and lazy-free may drop a
//! sketch on a background thread.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Sketches the keyspace holds, and their bytes (as `MEMORY USAGE` counts them).
pub static SKETCHES: AtomicU64 = AtomicU64::new(0);
pub static BYTES: AtomicU64 = AtomicU64::new(0);
/// Item increments applied (`CMS.INCRBY` pairs).
pub static INCREMENTS: AtomicU64 = AtomicU64::new(0);
/// Items estimated (`CMS.QUERY` items).
pub static QUERIES: AtomicU64 = AtomicU64::new(0);
/// `CMS.MERGE` commands that changed their destination.
pub static MERGES: AtomicU64 = AtomicU64::new(0);
/// Creations refused by `bf.max-filter-bytes`, `maxmemory` or a failed allocation.
pub static REFUSED: AtomicU64 = AtomicU64::new(0);

pub fn created(bytes: u64) {
    SKETCHES.fetch_add(1, Relaxed);
    BYTES.fetch_add(bytes, Relaxed);
}

pub fn freed(bytes: u64) {
    SKETCHES.fetch_sub(1, Relaxed);
    BYTES.fetch_sub(bytes, Relaxed);
}

pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Relaxed);
}

pub fn get(counter: &AtomicU64) -> u64 {
    counter.load(Relaxed)
}
