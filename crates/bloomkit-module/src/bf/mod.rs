//! `BF.*`: RedisBloom's scalable Bloom filter, type `MBbloom--`.

pub mod commands;
pub mod data_type;
