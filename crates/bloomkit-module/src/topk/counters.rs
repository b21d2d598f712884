//! `INFO bf`'s `topk` section: the Top-K sketches.

use crate::stats::Counters;

/// The section's fields (objects, bytes, then the type's own tallies).
const FIELDS: &[&str] = &["sketches", "bytes", "units_added", "items_expelled", "lookups", "refused_creations"];
pub static COUNTERS: Counters = Counters::family("topk", FIELDS);

pub const UNITS_ADDED: usize = 2;
pub const EXPELLED: usize = 3;
pub const LOOKUPS: usize = 4;
pub const REFUSED: usize = 5;

/// Units added, and items they pushed out of the heap.
pub fn added(units: u64, expelled: u64) {
    COUNTERS.add(UNITS_ADDED, units);
    COUNTERS.add(EXPELLED, expelled);
}
