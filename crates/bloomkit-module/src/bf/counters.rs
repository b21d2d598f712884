//! `INFO bf`'s `stats` section: every `BF.*` filter, of RedisBloom's type
//! and valkey-bloom's (whose own totals are in [`crate::vbloom::counters`]).
//! The module-wide `maxmemory_refusals` and `bloomkit_version` close it.

use crate::stats::{counters, Counters, BYTES};

counters! {
    Counters::new("stats", "", "bf", FIELDS);
    filters, bytes, items_added => ITEMS_ADDED, lookups => LOOKUPS, scale_outs => SCALE_OUTS,
    refused_creations => REFUSED
}

/// A write ran on a filter: items newly added, and what growth added.
pub fn wrote(new_items: u64, size_before: u64, chain: &bloomkit_core::bf::Chain, filters_before: usize) {
    COUNTERS.add(ITEMS_ADDED, new_items);
    let grown = chain.size_bytes() - size_before;
    if grown > 0 {
        COUNTERS.add(BYTES, grown);
        COUNTERS.add(SCALE_OUTS, (chain.filters().len() - filters_before) as u64);
    }
}
