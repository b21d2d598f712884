//! `INFO bf`'s `topk` section: the Top-K sketches' counters, kept here with
//! the family rather than in the shared `stats.rs`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Sketches in the keyspace and their total `MEMORY USAGE` figure.
pub static SKETCHES: AtomicU64 = AtomicU64::new(0);
pub static BYTES: AtomicU64 = AtomicU64::new(0);
/// Units added by `TOPK.ADD` (1 per item) and `TOPK.INCRBY` (the increments).
pub static UNITS_ADDED: AtomicU64 = AtomicU64::new(0);
/// Items pushed out of a heap by a heavier one.
pub static EXPELLED: AtomicU64 = AtomicU64::new(0);
/// Items looked up by `TOPK.QUERY` and `TOPK.COUNT`.
pub static LOOKUPS: AtomicU64 = AtomicU64::new(0);

pub fn created(bytes: u64) {
    SKETCHES.fetch_add(1, Relaxed);
    BYTES.fetch_add(bytes, Relaxed);
}

pub fn freed(bytes: u64) {
    SKETCHES.fetch_sub(1, Relaxed);
    BYTES.fetch_sub(bytes, Relaxed);
}

pub fn added(units: u64, expelled: u64) {
    UNITS_ADDED.fetch_add(units, Relaxed);
    EXPELLED.fetch_add(expelled, Relaxed);
}

pub fn looked_up(n: u64) {
    LOOKUPS.fetch_add(n, Relaxed);
}

pub fn get(counter: &AtomicU64) -> u64 {
    counter.load(Relaxed)
}
