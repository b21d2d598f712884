//! `INFO bf`'s `cuckoo` section: the cuckoo filters (`CF.*`).

use crate::stats::{counters, Counters};

counters! {
    Counters::new("cuckoo", "cf_", "cf", FIELDS);
    filters, bytes, items_added => ITEMS_ADDED, items_deleted => ITEMS_DELETED, lookups => LOOKUPS,
    refused_creations => REFUSED
}

/// A write ran: items added and deleted (bytes are kept by `value::Value::write`).
pub fn wrote(added: u64, deleted: u64) {
    COUNTERS.add(ITEMS_ADDED, added);
    COUNTERS.add(ITEMS_DELETED, deleted);
}
