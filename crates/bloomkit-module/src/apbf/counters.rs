//! `INFO bf`'s `apbf` section: the sliding-window filters.

use crate::stats::{counters, Counters};

counters! {
    Counters::family("apbf", FIELDS);
    filters, bytes, items_added => ITEMS_ADDED, lookups => LOOKUPS, refused_creations => REFUSED
}
