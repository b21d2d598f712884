//! `INFO bf`'s `stats` section: every `BF.*` filter, of RedisBloom's type
//! and valkey-bloom's (whose own totals are in [`crate::vbloom::counters`]).
//! The module-wide `maxmemory_refusals` and `bloomkit_version` close it.

use crate::stats::{Counters, BYTES};

/// The section's fields (objects, bytes, then the type's own tallies).
const FIELDS: &[&str] = &["filters", "bytes", "items_added", "lookups", "scale_outs", "refused_creations"];
pub static COUNTERS: Counters = Counters::new("stats", "", "bf", FIELDS);

pub const ITEMS_ADDED: usize = 2;
pub const LOOKUPS: usize = 3;
pub const SCALE_OUTS: usize = 4;
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
