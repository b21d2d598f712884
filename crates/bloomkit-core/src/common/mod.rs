//! What every family shares, and nothing family-specific: item hashing,
//! Bloom sizing, the RDB field reader and writer, DUMP payload framing,
//! memory (zeroed arrays, size limits, fast modulo), argument numbers,
//! `%g` formatting, how errors become replies and the compatibility level. No module here imports a
//! family.

pub mod compat;
pub mod cpu;
pub mod dump;
pub mod fields;
pub mod fmt;
pub mod hash;
pub mod memory;
pub mod parse;
pub mod payload;
pub mod reply;
pub mod sip4;
pub mod sizing;
pub mod value;

/// The largest chunk `*.SCANDUMP` hands out (RedisBloom's, for BF and CF;
/// bloomkit's APBF uses the same): a client's reply buffer stays bounded
/// whatever the filter's size.
pub const MAX_CHUNK: u64 = 16 * 1024 * 1024;
