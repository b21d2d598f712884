//! `INFO bf`'s `xf` section: the expandable filters.

use crate::stats::Counters;

/// The section's fields (objects, bytes, then the type's own tallies).
const FIELDS: &[&str] = &["filters", "bytes", "items_added", "items_deleted", "lookups", "expansions", "merges", "refused_creations"];
pub static COUNTERS: Counters = Counters::family("xf", FIELDS);

pub const ITEMS_ADDED: usize = 2;
pub const ITEMS_DELETED: usize = 3;
pub const LOOKUPS: usize = 4;
pub const EXPANSIONS: usize = 5;
pub const MERGES: usize = 6;
pub const REFUSED: usize = 7;
