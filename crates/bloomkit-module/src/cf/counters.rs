//! `INFO bf`'s `cuckoo` section: the cuckoo filters (`CF.*`).

use crate::stats::Counters;

pub static COUNTERS: Counters = Counters::new(
    c"cuckoo",
    "cf",
    &[
        c"cf_filters",
        c"cf_bytes",
        c"cf_items_added",
        c"cf_items_deleted",
        c"cf_lookups",
        c"cf_refused_creations",
    ],
);

pub const ITEMS_ADDED: usize = 2;
pub const ITEMS_DELETED: usize = 3;
/// Items looked up (main thread only).
pub const LOOKUPS: usize = 4;
/// Creations and growths refused by the size limit or memory.
pub const REFUSED: usize = 5;

/// A write ran: items added and deleted, and the size before and after
/// (growth and compaction change it).
pub fn wrote(added: u64, deleted: u64, size_before: u64, size_after: u64) {
    COUNTERS.add(ITEMS_ADDED, added);
    COUNTERS.add(ITEMS_DELETED, deleted);
    COUNTERS.resized(size_before, size_after);
}
