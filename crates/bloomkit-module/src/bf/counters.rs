//! `INFO bf`'s `stats` section: every `BF.*` filter, of RedisBloom's type
//! and valkey-bloom's (whose own totals are in [`crate::vbloom::counters`]).
//! The module-wide `maxmemory_refusals` and `bloomkit_version` close it.

use crate::stats::{Counters, BYTES};

pub static COUNTERS: Counters = Counters::new(
    c"stats",
    "bf",
    &[
        c"filters",
        c"bytes",
        c"items_added",
        c"lookups",
        c"scale_outs",
        c"refused_creations",
    ],
);

/// Items newly added.
pub const ITEMS_ADDED: usize = 2;
/// Items looked up (main thread only).
pub const LOOKUPS: usize = 3;
/// Sub-filters added by growth.
pub const SCALE_OUTS: usize = 4;
/// Creations and growths refused by the size limit or memory.
pub const REFUSED: usize = 5;

/// A write ran on a filter: items newly added, and what growth added.
pub fn wrote(new_items: u64, size_before: u64, chain: &bloomkit_core::bf::Chain, filters_before: usize) {
    COUNTERS.add(ITEMS_ADDED, new_items);
    let grown = chain.size_bytes() - size_before;
    if grown > 0 {
        COUNTERS.add(BYTES, grown);
        COUNTERS.add(SCALE_OUTS, (chain.filters().len() - filters_before) as u64);
    }
}
