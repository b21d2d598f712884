//! `INFO bf`'s `topk` section: the Top-K sketches.

use crate::stats::Counters;

pub static COUNTERS: Counters = Counters::new(
    c"topk",
    "topk",
    &[
        c"topk_sketches",
        c"topk_bytes",
        c"topk_units_added",
        c"topk_items_expelled",
        c"topk_lookups",
        c"topk_refused_creations",
    ],
);

/// Units added by `TOPK.ADD` (1 per item) and `TOPK.INCRBY` (the increments).
pub const UNITS_ADDED: usize = 2;
/// Items pushed out of a heap by a heavier one.
pub const EXPELLED: usize = 3;
/// Items looked up by `TOPK.QUERY` and `TOPK.COUNT`.
pub const LOOKUPS: usize = 4;
/// Creations refused by `bf.max-filter-bytes`, `maxmemory` or a failed allocation.
pub const REFUSED: usize = 5;

/// Units added, and items they pushed out of the heap.
pub fn added(units: u64, expelled: u64) {
    COUNTERS.add(UNITS_ADDED, units);
    COUNTERS.add(EXPELLED, expelled);
}
