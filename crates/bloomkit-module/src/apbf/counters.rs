//! `INFO bf`'s `apbf` section: the sliding-window filters.

use crate::stats::Counters;

/// The section's fields (objects, bytes, then the type's own tallies).
const FIELDS: &[&str] = &["filters", "bytes", "items_added", "lookups", "refused_creations"];
pub static COUNTERS: Counters = Counters::family("apbf", FIELDS);

pub const ITEMS_ADDED: usize = 2;
pub const LOOKUPS: usize = 3;
pub const REFUSED: usize = 4;
