//! `INFO bf`'s `cms` section: the Count-Min Sketches.

use crate::stats::{counters, Counters};

counters! {
    Counters::family("cms", FIELDS);
    sketches, bytes, increments => INCREMENTS, queries => QUERIES, merges => MERGES,
    refused_creations => REFUSED
}
