//! `INFO bf`'s `xf` section: the expandable filters.

use crate::stats::Counters;

pub static COUNTERS: Counters = Counters::new(
    c"xf",
    "xf",
    &[
        c"xf_filters",
        c"xf_bytes",
        c"xf_items_added",
        c"xf_items_deleted",
        c"xf_lookups",
        c"xf_expansions",
        c"xf_merges",
        c"xf_refused_creations",
    ],
);

pub const ITEMS_ADDED: usize = 2;
pub const ITEMS_DELETED: usize = 3;
/// Items looked up (EXISTS, MEXISTS and COUNT items).
pub const LOOKUPS: usize = 4;
/// Doublings finished, by writes, merges and loads.
pub const EXPANSIONS: usize = 5;
/// `XF.MERGE` commands that changed their destination.
pub const MERGES: usize = 6;
/// Creations and growths refused by `bf.max-filter-bytes`, `maxmemory` or a failed allocation.
pub const REFUSED: usize = 7;
