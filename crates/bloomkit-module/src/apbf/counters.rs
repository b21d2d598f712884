//! `INFO bf`'s `apbf` section: the sliding-window filters.

use crate::stats::Counters;

pub static COUNTERS: Counters = Counters::new(
    c"apbf",
    "apbf",
    &[c"apbf_filters", c"apbf_bytes", c"apbf_items_added", c"apbf_lookups", c"apbf_refused_creations"],
);

/// Items added (`APBF.ADD`, `APBF.MADD`).
pub const ITEMS_ADDED: usize = 2;
/// Items looked up (main thread only).
pub const LOOKUPS: usize = 3;
/// Creations refused by `bf.max-filter-bytes`, `maxmemory` or a failed allocation.
pub const REFUSED: usize = 4;
