//! `INFO bf`'s `cuckoo` section: the cuckoo filters (`CF.*`).

use crate::stats::Counters;

/// The section's fields (objects, bytes, then the type's own tallies).
const FIELDS: &[&str] = &["filters", "bytes", "items_added", "items_deleted", "lookups", "refused_creations"];
pub static COUNTERS: Counters = Counters::new("cuckoo", "cf_", "cf", FIELDS);

pub const ITEMS_ADDED: usize = 2;
pub const ITEMS_DELETED: usize = 3;
pub const LOOKUPS: usize = 4;
pub const REFUSED: usize = 5;

/// A write ran: items added and deleted, and the size before and after
/// (growth and compaction change it).
pub fn wrote(added: u64, deleted: u64, size_before: u64, size_after: u64) {
    COUNTERS.add(ITEMS_ADDED, added);
    COUNTERS.add(ITEMS_DELETED, deleted);
    COUNTERS.resized(size_before, size_after);
}
