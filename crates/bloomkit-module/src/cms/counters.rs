//! `INFO bf`'s `cms` section: the Count-Min Sketches.

use crate::stats::Counters;

pub static COUNTERS: Counters = Counters::new(
    c"cms",
    "cms",
    &[
        c"cms_sketches",
        c"cms_bytes",
        c"cms_increments",
        c"cms_queries",
        c"cms_merges",
        c"cms_refused_creations",
    ],
);

/// Item increments applied (`CMS.INCRBY` pairs).
pub const INCREMENTS: usize = 2;
/// Items estimated (`CMS.QUERY` items).
pub const QUERIES: usize = 3;
/// `CMS.MERGE` commands that changed their destination.
pub const MERGES: usize = 4;
/// Creations refused by `bf.max-filter-bytes`, `maxmemory` or a failed allocation.
pub const REFUSED: usize = 5;
