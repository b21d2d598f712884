//! RedisBloom's scalable Bloom filter (`BF.*`, data type `MBbloom--`).
//!
//! - [`sub_filter`]: one bit array and the parameters that address it;
//! - [`chain`]: the scalable filter, the one source of truth for `BF.ADD`;
//! - [`args`]: `BF.RESERVE` / `BF.INSERT` / `BF.INFO` arguments;
//! - [`errors`]: every error and its reply text;
//! - formats: [`scandump`] (`BF.SCANDUMP` / `BF.LOADCHUNK`), [`rdb`] (RDB
//!   and DUMP values) and [`file`](mod@file) (bloomkit's filter file).

pub mod args;
pub mod chain;
pub mod errors;
pub mod file;
pub mod rdb;
pub mod scandump;
pub mod sub_filter;

pub use chain::{check_counts, Chain, ChainParams, Counts, TIGHTENING_RATIO};
pub use errors::BfError;
pub use sub_filter::{SubFilter, MAX_HASHES};
