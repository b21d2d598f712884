//! `INFO bf`'s `topk` section: the Top-K sketches.

use crate::stats::{counters, Counters};

counters! {
    Counters::family("topk", FIELDS);
    sketches, bytes, units_added => UNITS_ADDED, items_expelled => EXPELLED, lookups => LOOKUPS,
    refused_creations => REFUSED
}

/// Units added, and items they pushed out of the heap.
pub fn added(units: u64, expelled: u64) {
    COUNTERS.add(UNITS_ADDED, units);
    COUNTERS.add(EXPELLED, expelled);
}
