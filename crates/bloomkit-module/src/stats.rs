//! Counters for the module's INFO section (`INFO bf`).
//!
//! Relaxed atomics: they are plain tallies read by INFO, and lazy-free may
//! drop a filter on a background thread.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bloomkit_core::bf::Chain;

pub static FILTERS: AtomicU64 = AtomicU64::new(0);
pub static BYTES: AtomicU64 = AtomicU64::new(0);
pub static ITEMS_ADDED: AtomicU64 = AtomicU64::new(0);
pub static LOOKUPS: AtomicU64 = AtomicU64::new(0);
pub static SCALE_OUTS: AtomicU64 = AtomicU64::new(0);
pub static REFUSED: AtomicU64 = AtomicU64::new(0);
/// Creations and scale-outs refused because they would pass `maxmemory`.
pub static MAXMEMORY_REFUSALS: AtomicU64 = AtomicU64::new(0);

/// A filter now owned by the keyspace.
pub fn created(chain: &Chain) {
    FILTERS.fetch_add(1, Relaxed);
    BYTES.fetch_add(chain.size_bytes(), Relaxed);
}

/// A filter freed by the keyspace.
pub fn freed(chain: &Chain) {
    FILTERS.fetch_sub(1, Relaxed);
    BYTES.fetch_sub(chain.size_bytes(), Relaxed);
}

/// A value of another kind (valkey-bloom's) now owned by the keyspace.
pub fn counted(bytes: u64) {
    FILTERS.fetch_add(1, Relaxed);
    BYTES.fetch_add(bytes, Relaxed);
}

/// A value counted by [`counted`] freed, at its size then.
pub fn uncounted(bytes: u64) {
    FILTERS.fetch_sub(1, Relaxed);
    BYTES.fetch_sub(bytes, Relaxed);
}

/// A write to a value counted by [`counted`]: items added, bytes it grew by
/// and sub-filters it gained.
pub fn grew(new_items: u64, bytes: u64, scale_outs: u64) {
    ITEMS_ADDED.fetch_add(new_items, Relaxed);
    BYTES.fetch_add(bytes, Relaxed);
    SCALE_OUTS.fetch_add(scale_outs, Relaxed);
}

/// A write ran on a filter: items newly added and bytes it grew by.
pub fn wrote(new_items: u64, size_before: u64, chain: &Chain, filters_before: usize) {
    ITEMS_ADDED.fetch_add(new_items, Relaxed);
    let grown = chain.size_bytes() - size_before;
    if grown > 0 {
        BYTES.fetch_add(grown, Relaxed);
        SCALE_OUTS.fetch_add((chain.filters().len() - filters_before) as u64, Relaxed);
    }
}

/// Only the main thread counts lookups: a plain load and store is enough,
/// and cheaper than an atomic add on the hottest path.
pub fn looked_up(n: u64) {
    LOOKUPS.store(LOOKUPS.load(Relaxed) + n, Relaxed);
}

/// A creation or growth refused by the size limit or memory.
pub fn refused() {
    REFUSED.fetch_add(1, Relaxed);
}

pub fn get(counter: &AtomicU64) -> u64 {
    counter.load(Relaxed)
}

/// Cuckoo filters (`CF.*`), counted apart from Bloom filters.
pub mod cuckoo {
    use super::*;

    pub static FILTERS: AtomicU64 = AtomicU64::new(0);
    pub static BYTES: AtomicU64 = AtomicU64::new(0);
    pub static ITEMS_ADDED: AtomicU64 = AtomicU64::new(0);
    pub static ITEMS_DELETED: AtomicU64 = AtomicU64::new(0);
    pub static LOOKUPS: AtomicU64 = AtomicU64::new(0);

    pub fn created(bytes: u64) {
        FILTERS.fetch_add(1, Relaxed);
        BYTES.fetch_add(bytes, Relaxed);
    }

    pub fn freed(bytes: u64) {
        FILTERS.fetch_sub(1, Relaxed);
        BYTES.fetch_sub(bytes, Relaxed);
    }

    /// A write ran: items added and deleted, and the size before and after
    /// (growth and compaction change it).
    pub fn wrote(added: u64, deleted: u64, size_before: u64, size_after: u64) {
        ITEMS_ADDED.fetch_add(added, Relaxed);
        ITEMS_DELETED.fetch_add(deleted, Relaxed);
        if size_after >= size_before {
            BYTES.fetch_add(size_after - size_before, Relaxed);
        } else {
            BYTES.fetch_sub(size_before - size_after, Relaxed);
        }
    }

    /// Main thread only, as [`super::looked_up`].
    pub fn looked_up(n: u64) {
        LOOKUPS.store(LOOKUPS.load(Relaxed) + n, Relaxed);
    }
}

/// Active defrag (`activedefrag yes`), by data type: blocks the server
/// moved (hits) and left where they were (misses), blocks never offered
/// because the allocator treats them specially (`alloc::defrag_may_move`),
/// and defrag calls that resumed a value from a cursor.
pub mod defrag {
    use super::*;

    /// The data types, in the order of the counters below.
    #[derive(Clone, Copy)]
    pub enum Kind {
        Bf = 0,
        Cf = 1,
        Apbf = 2,
        Vbloom = 3,
        Cms = 4,
        Topk = 5,
        Tdigest = 6,
        Xf = 7,
    }

    pub static HITS: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
    pub static MISSES: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
    pub static LARGE_KEPT: AtomicU64 = AtomicU64::new(0);
    pub static KEYS_RESUMED: AtomicU64 = AtomicU64::new(0);

    /// What one defrag call did.
    pub fn tally(kind: Kind, hits: u64, misses: u64, large_kept: u64, resumed: bool) {
        HITS[kind as usize].fetch_add(hits, Relaxed);
        MISSES[kind as usize].fetch_add(misses, Relaxed);
        LARGE_KEPT.fetch_add(large_kept, Relaxed);
        KEYS_RESUMED.fetch_add(u64::from(resumed), Relaxed);
    }
}
