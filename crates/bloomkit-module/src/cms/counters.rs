//! `INFO bf`'s `cms` section: the Count-Min Sketches.

use crate::stats::Counters;

/// The section's fields (objects, bytes, then the type's own tallies).
const FIELDS: &[&str] = &["sketches", "bytes", "increments", "queries", "merges", "refused_creations"];
pub static COUNTERS: Counters = Counters::family("cms", FIELDS);

pub const INCREMENTS: usize = 2;
pub const QUERIES: usize = 3;
pub const MERGES: usize = 4;
pub const REFUSED: usize = 5;
