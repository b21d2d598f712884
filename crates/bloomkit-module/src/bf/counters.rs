//! `INFO bf`'s `stats` section: every `BF.*` filter, of RedisBloom's type
//! and valkey-bloom's (whose own totals are in [`crate::vbloom::counters`]).
//! The module-wide `maxmemory_refusals` and `bloomkit_version` close it.

use crate::stats::{counters, Counters};

counters! {
    Counters::new("stats", "", "bf", FIELDS);
    filters, bytes, items_added => ITEMS_ADDED, lookups => LOOKUPS, scale_outs => SCALE_OUTS,
    refused_creations => REFUSED
}

/// A write ran on a filter: items newly added, and the scale-outs it made
/// (its bytes are kept by `value::Value::write`).
pub fn wrote(new_items: u64, chain: &bloomkit_core::bf::Chain, filters_before: usize) {
    COUNTERS.add(ITEMS_ADDED, new_items);
    COUNTERS.add(SCALE_OUTS, (chain.filters().len() - filters_before) as u64);
}
