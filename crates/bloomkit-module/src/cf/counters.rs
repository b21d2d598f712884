//! `INFO bf`'s `cuckoo` section: the cuckoo filters (`CF.*`).

use crate::stats::{counters, Counters};

counters! {
    Counters::new("cuckoo", "cf_", "cf", FIELDS);
    filters, bytes, items_added => ITEMS_ADDED, items_deleted => ITEMS_DELETED, lookups => LOOKUPS,
    refused_creations => REFUSED
}

/// A write ran: items added and deleted, and the size before and after
/// (growth and compaction change it).
pub fn wrote(added: u64, deleted: u64, size_before: u64, size_after: u64) {
    COUNTERS.add(ITEMS_ADDED, added);
    COUNTERS.add(ITEMS_DELETED, deleted);
    COUNTERS.resized(size_before, size_after);
}
