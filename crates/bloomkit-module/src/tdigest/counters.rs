//! `INFO bf`'s `tdigest` section: the t-digests.

use crate::stats::{counters, Counters};

counters! {
    Counters::family("tdigest", FIELDS);
    digests, bytes, observations_added => OBSERVATIONS_ADDED, merges => MERGES, queries => QUERIES,
    compressions_replicated => COMPRESSIONS_REPLICATED, refused_creations => REFUSED
}
