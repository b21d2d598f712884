//! `INFO bf`'s `tdigest` section: the t-digests.

use crate::stats::Counters;

pub static COUNTERS: Counters = Counters::new(
    c"tdigest",
    "tdigest",
    &[
        c"tdigest_digests",
        c"tdigest_bytes",
        c"tdigest_observations_added",
        c"tdigest_merges",
        c"tdigest_queries",
        c"tdigest_compressions_replicated",
        c"tdigest_refused_creations",
    ],
);

pub const OBSERVATIONS_ADDED: usize = 2;
pub const MERGES: usize = 3;
pub const QUERIES: usize = 4;
/// Compressions a read ran in place on a primary, sent on to replicas and the AOF.
pub const COMPRESSIONS_REPLICATED: usize = 5;
/// Creations refused by `bf.max-filter-bytes`, `maxmemory` or a failed allocation.
pub const REFUSED: usize = 6;
