//! The item hashes RedisBloom uses, so that the same item sets the same bits.
//!
//! Filters created by `BF.*` hash with MurmurHash64A (chain option FORCE64);
//! filters from old RDB files hash with the 32-bit MurmurHash2. Either way an
//! item becomes a pair `(a, b)` and bit `i` is `(a + i*b) mod m`.

/// Seed of the first 64-bit hash; the second is seeded with the first's value.
const SEED64: u64 = 0xc6a4a7935bd1e995;
/// Seed of the first 32-bit hash (legacy filters).
const SEED32: u32 = 0x9747b28c;

/// The two hashes an item is reduced to; everything after hashing uses only these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashPair {
    pub a: u64,
    pub b: u64,
}

/// Which hash a chain uses, chosen once per chain from its options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashWidth {
    Bits32,
    Bits64,
}

impl HashWidth {
    /// Hashes an item the way RedisBloom does for this width.
    #[inline]
    pub fn hash(self, item: &[u8]) -> HashPair {
        match self {
            HashWidth::Bits64 => {
                let a = murmur64a(item, SEED64);
                HashPair { a, b: murmur64a(item, a) }
            }
            HashWidth::Bits32 => {
                let a = murmur2_32(item, SEED32);
                HashPair { a: u64::from(a), b: u64::from(murmur2_32(item, a)) }
            }
        }
    }

    /// The `hashwidth:` figure of `BF.DEBUG`.
    pub fn bits(self) -> u32 {
        match self {
            HashWidth::Bits32 => 32,
            HashWidth::Bits64 => 64,
        }
    }
}

/// MurmurHash64A by Austin Appleby, little-endian reads.
#[inline]
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4a7935bd1e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut k = u64::from_le_bytes(chunk.try_into().expect("chunks_exact(8)"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= u64::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// MurmurHash2 (32-bit) by Austin Appleby, little-endian reads.
pub fn murmur2_32(data: &[u8], seed: u32) -> u32 {
    const M: u32 = 0x5bd1e995;
    const R: u32 = 24;
    let mut h = seed ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes(chunk.try_into().expect("chunks_exact(4)"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= u32::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// murmur3_x64_128 with seed 0, as Guava's `Hashing.murmur3_128()`: the two
/// little-endian halves of its 16-byte result.
#[inline]
pub fn murmur3_128(item: &[u8]) -> (u64, u64) {
    mur3::murmurhash3_x64_128(item, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur64a_known_values() {
        // Reference values of the canonical C implementation.
        assert_eq!(murmur64a(b"", 0), 0);
        assert_ne!(murmur64a(b"a", SEED64), murmur64a(b"b", SEED64));
    }

    #[test]
    fn murmur2_known_values() {
        // Empty input with seed 0 hashes to 0 in every MurmurHash2 variant.
        assert_eq!(murmur2_32(b"", 0), 0);
        assert_ne!(murmur2_32(b"abc", SEED32), murmur2_32(b"abd", SEED32));
    }
}
