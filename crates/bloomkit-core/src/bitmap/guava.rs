//! Guava's `BloomFilter` layout (strategy `MURMUR128_MITZ_64`), for bitmaps
//! shared with Java services.
//!
//! Teams that cannot load a module keep a Bloom filter as a plain Redis
//! string and set its bits with `SETBIT`; their Java services usually size
//! and hash the way Guava does. Reproducing Guava exactly (its sizing, its
//! rounding of the bit count up to 64, murmur3_128 over the item's bytes and
//! `h1 + i*h2` masked to positive) lets bloomkit and such a service set and
//! test the same bits. The reference is real Guava 31.1
//! (`tests/fixtures/guava-31.1.json`, made by `scripts/guava-vectors.sh`).

use crate::common::hash::murmur3_128;
use crate::common::sizing::is_rate;

use std::f64::consts::LN_2;

/// Guava caps the hash count at what its serial form stores (one byte).
pub const MAX_HASHES: u32 = 255;

/// The bit count and hash count Guava derives from (capacity, error rate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuavaShape {
    /// Bits in the array: always a multiple of 64, as in Guava's long array.
    pub bits: u64,
    pub hashes: u32,
}

impl GuavaShape {
    /// `BloomFilter.create(funnel, capacity, error_rate)`: `None` when the
    /// error rate is not strictly between 0 and 1.
    pub fn new(capacity: u64, error_rate: f64) -> Option<GuavaShape> {
        if !is_rate(error_rate) {
            return None;
        }
        let n = capacity.max(1) as f64;
        // optimalNumOfBits: a truncating (long) cast of -n ln p / (ln 2)^2.
        let raw_bits = (-n * error_rate.ln() / (LN_2 * LN_2)) as u64;
        if raw_bits == 0 {
            return None;
        }
        // optimalNumOfHashFunctions (Guava 31): round(m/n ln 2), at least 1,
        // from the bit count before it is rounded up to whole longs.
        let hashes = ((raw_bits as f64 / n * LN_2 + 0.5).floor() as u32).max(1);
        if hashes > MAX_HASHES {
            return None;
        }
        Some(GuavaShape { bits: raw_bits.div_ceil(64).checked_mul(64)?, hashes })
    }

    /// The shape of an explicitly chosen bit array (rounded up to 64 bits).
    pub fn with_bits(bits: u64, hashes: u32) -> Option<GuavaShape> {
        if bits == 0 || hashes == 0 || hashes > MAX_HASHES {
            return None;
        }
        Some(GuavaShape { bits: bits.div_ceil(64).checked_mul(64)?, hashes })
    }

    /// The bit positions of an item (its UTF-8 bytes for a Java `String`).
    #[inline]
    pub fn positions(&self, item: &[u8]) -> Positions {
        let (h1, h2) = murmur3_128(item);
        Positions { combined: h1, step: h2, left: self.hashes, bits: self.bits }
    }
}

/// Iterator over an item's bit positions, in Guava's order.
#[derive(Clone, Debug)]
pub struct Positions {
    combined: u64,
    step: u64,
    left: u32,
    bits: u64,
}

impl Iterator for Positions {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let position = (self.combined & i64::MAX as u64) % self.bits;
        self.combined = self.combined.wrapping_add(self.step);
        Some(position)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Positions {}

/// The header of Guava's serial form (`BloomFilter.writeTo`): strategy
/// ordinal (signed byte), hash count (unsigned byte), word count
/// (big-endian int32); `8 * words` bytes of big-endian longs follow.
pub const SERIAL_HEADER_LEN: usize = 6;

/// `BloomFilterStrategies.MURMUR128_MITZ_64`, what `BloomFilter.create` uses.
const STRATEGY_MITZ_64: u8 = 1;

/// A parsed serial-form header: a filter of `64 * words` bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SerialHeader {
    pub hashes: u32,
    pub words: u32,
}

/// Why a Guava serial form was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SerialError {
    /// Strategy 0, `MURMUR128_MITZ_32`: Guava's legacy hashing.
    LegacyStrategy,
    /// Anything but 0 and 1: Guava itself cannot read it.
    UnknownStrategy(i8),
    /// k = 0, which Guava refuses.
    NoHashes,
    /// A word count of zero or less, which Guava refuses.
    NoWords(i32),
}

impl std::fmt::Display for SerialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            SerialError::LegacyStrategy => f.write_str(
                "it uses Guava's legacy strategy MURMUR128_MITZ_32 (strategy byte 0); bloomkit's guava \
                 layout is MURMUR128_MITZ_64 (strategy byte 1), what BloomFilter.create has used since Guava 12",
            ),
            SerialError::UnknownStrategy(s) => write!(
                f,
                "strategy byte {s} is not a Guava strategy (0 or 1): the file is damaged or not a Guava \
                 BloomFilter"
            ),
            SerialError::NoHashes => f.write_str("it has 0 hash functions; Guava writes 1 to 255"),
            SerialError::NoWords(n) => {
                write!(f, "its bit array has {n} words; Guava writes at least 1")
            }
        }
    }
}

impl std::error::Error for SerialError {}

impl SerialHeader {
    /// Reads a header as `BloomFilter.readFrom` does, refusing what it refuses.
    pub fn parse(bytes: &[u8; SERIAL_HEADER_LEN]) -> Result<SerialHeader, SerialError> {
        match bytes[0] as i8 {
            1 => {}
            0 => return Err(SerialError::LegacyStrategy),
            other => return Err(SerialError::UnknownStrategy(other)),
        }
        if bytes[1] == 0 {
            return Err(SerialError::NoHashes);
        }
        let words = i32::from_be_bytes(bytes[2..6].try_into().expect("4 bytes"));
        if words <= 0 {
            return Err(SerialError::NoWords(words));
        }
        Ok(SerialHeader { hashes: u32::from(bytes[1]), words: words as u32 })
    }

    /// The header of a filter of this shape, `None` if Guava cannot hold it
    /// (bits not whole longs, more than 2^31 - 1 of them, or k over 255).
    pub fn for_shape(shape: GuavaShape) -> Option<SerialHeader> {
        if !shape.bits.is_multiple_of(64) || shape.hashes == 0 || shape.hashes > MAX_HASHES {
            return None;
        }
        let words = u32::try_from(shape.bits / 64).ok().filter(|&w| w > 0 && w <= i32::MAX as u32)?;
        Some(SerialHeader { hashes: shape.hashes, words })
    }

    pub fn to_bytes(self) -> [u8; SERIAL_HEADER_LEN] {
        let w = self.words.to_be_bytes();
        [STRATEGY_MITZ_64, self.hashes as u8, w[0], w[1], w[2], w[3]]
    }

    pub fn shape(self) -> GuavaShape {
        GuavaShape { bits: u64::from(self.words) * 64, hashes: self.hashes }
    }

    /// Bytes of the bit array after the header.
    pub fn body_len(self) -> u64 {
        u64::from(self.words) * 8
    }
}

/// Converts between Guava's words (big-endian longs, bit i of a word at mask
/// `1 << (i & 63)`) and Redis's bit order (bit i in byte i / 8 at mask
/// `0x80 >> (i & 7)`), in place: each 8-byte group reversed and each byte's
/// bits reversed. Its own inverse. `bytes.len()` must be a multiple of 8.
pub fn swap_bit_order(bytes: &mut [u8]) {
    assert!(bytes.len().is_multiple_of(8), "whole words only");
    for word in bytes.chunks_exact_mut(8) {
        let w = u64::from_be_bytes((*word).try_into().expect("8 bytes"));
        // Reversing all 64 bits does both steps at once: Guava bit i (from
        // the least significant end) becomes the i-th bit from the most
        // significant end, which is where Redis reads bit i of the word.
        word.copy_from_slice(&w.reverse_bits().to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_guava_refuses() {
        assert_eq!(GuavaShape::new(100, 0.0), None);
        assert_eq!(GuavaShape::new(100, 1.0), None);
        assert_eq!(GuavaShape::new(100, f64::NAN), None);
        assert_eq!(GuavaShape::with_bits(0, 3), None);
        assert_eq!(GuavaShape::with_bits(64, 256), None);
    }

    #[test]
    fn zero_capacity_is_one_item() {
        assert_eq!(GuavaShape::new(0, 0.01), GuavaShape::new(1, 0.01));
    }

    #[test]
    fn positions_stay_inside_the_array() {
        let shape = GuavaShape::with_bits(1000, 13).unwrap();
        assert_eq!(shape.bits, 1024);
        for i in 0..1000u32 {
            let p: Vec<u64> = shape.positions(&i.to_le_bytes()).collect();
            assert_eq!(p.len(), 13);
            assert!(p.iter().all(|&b| b < 1024));
        }
    }
}
