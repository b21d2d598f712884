//! Bloom filters as RedisBloom lays them out, with no Redis in sight.
//!
//! Everything `BF.*` does to a filter lives here, in plain Rust: hashing
//! ([`hash`]), sizing ([`sizing`]), one sub-filter ([`bloom`]), the scalable
//! chain ([`chain`]), the SCANDUMP and RDB formats ([`dump`], [`rdb`]), Guava's
//! bitmap layout for filters shared with Java ([`guava`]), the sliding-window
//! filter ([`apbf`]), a cache-line-blocked filter for in-process work
//! ([`blocked`]), valkey-bloom's filters ([`valkey`]) and
//! argument parsing ([`args`]). The module crate only moves bytes between
//! Redis and these types, so all of it is testable and fuzzable on its own.

pub mod apbf;
pub mod args;
pub mod bitmap;
pub mod blocked;
pub mod bloom;
pub mod chain;
pub mod cuckoo;
pub mod dump;
pub mod error;
pub mod file;
pub mod fmt;
pub mod guava;
pub mod hash;
pub mod payload;
pub mod rdb;
pub mod sizing;
pub mod valkey;

pub use chain::{Chain, ChainParams, Limits};
pub use error::Error;
