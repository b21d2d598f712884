//! `INFO bf`'s `tdigest` section: the t-digests.

use crate::stats::Counters;

/// The section's fields (objects, bytes, then the type's own tallies).
const FIELDS: &[&str] = &["digests", "bytes", "observations_added", "merges", "queries", "compressions_replicated", "refused_creations"];
pub static COUNTERS: Counters = Counters::family("tdigest", FIELDS);

pub const OBSERVATIONS_ADDED: usize = 2;
pub const MERGES: usize = 3;
pub const QUERIES: usize = 4;
pub const COMPRESSIONS_REPLICATED: usize = 5;
pub const REFUSED: usize = 6;
