//! `INFO bf`'s `xf` section: the expandable filters.

use crate::stats::{counters, Counters};

counters! {
    Counters::family("xf", FIELDS);
    filters, bytes, items_added => ITEMS_ADDED, items_deleted => ITEMS_DELETED, lookups => LOOKUPS,
    splits => EXPANSIONS, merges => MERGES, refused_creations => REFUSED
}
