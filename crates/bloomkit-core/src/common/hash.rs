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

/// MurmurHash2 (32-bit) of one item under `L` seeds at once: lane `i` is
/// `murmur2_32(data, seeds[i])`, exactly.
///
/// The Count-Min Sketch and Top-K hash each item once per row, with the row
/// number as the seed. In MurmurHash2 a block's mixed word does not depend
/// on the seed, so here it is computed once per block for every lane, and
/// the lanes' chains (one multiply and one xor per block) are independent,
/// so the CPU overlaps them instead of waiting on one chain after another.
#[inline]
pub fn murmur2_32_seeds<const L: usize>(data: &[u8], seeds: [u32; L]) -> [u32; L] {
    const M: u32 = 0x5bd1e995;
    const R: u32 = 24;
    let len = data.len() as u32;
    let mut h = seeds.map(|seed| seed ^ len);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes(chunk.try_into().expect("chunks_exact(4)"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        for x in &mut h {
            *x = x.wrapping_mul(M) ^ k;
        }
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut t = 0u32;
        for (i, &byte) in tail.iter().enumerate() {
            t ^= u32::from(byte) << (8 * i);
        }
        for x in &mut h {
            *x = (*x ^ t).wrapping_mul(M);
        }
    }
    for x in &mut h {
        *x ^= *x >> 13;
        *x = x.wrapping_mul(M);
        *x ^= *x >> 15;
    }
    h
}

/// `x mod d` for a 32-bit hash and a divisor fixed when the sketch is made
/// (a row's width): Lemire's direct remainder ("Faster Remainder by Direct
/// Computation", 2019) with a 64-bit reciprocal, exact for every 32-bit
/// numerator and divisor, two multiplies instead of a division.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mod32 {
    divisor: u32,
    reciprocal: u64,
}

impl Mod32 {
    pub fn new(divisor: u32) -> Mod32 {
        assert!(divisor > 0, "modulus of zero");
        // For a divisor of 1 this wraps to 0, and every remainder is 0.
        Mod32 { divisor, reciprocal: (u64::MAX / u64::from(divisor)).wrapping_add(1) }
    }

    /// The reciprocal, for a value that keeps it beside its divisor.
    pub fn reciprocal(self) -> u64 {
        self.reciprocal
    }

    /// The remainder by `divisor` given the `reciprocal` [`Mod32::new`] made for it.
    #[inline(always)]
    pub fn from_parts(divisor: u32, reciprocal: u64) -> Mod32 {
        Mod32 { divisor, reciprocal }
    }

    #[inline(always)]
    pub fn reduce(self, x: u32) -> u32 {
        let low = self.reciprocal.wrapping_mul(u64::from(x));
        ((u128::from(low) * u128::from(self.divisor)) >> 64) as u32
    }
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

    /// The interleaved hashes are the one-at-a-time ones, lane for lane,
    /// for every length from 0 to 64 (every tail) and seeds all over.
    #[test]
    fn murmur2_seeds_equal_one_at_a_time() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 32) as u32
        };
        for len in 0..=64usize {
            for _ in 0..20 {
                let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                let seeds8: [u32; 8] = std::array::from_fn(|i| if i % 2 == 0 { i as u32 } else { next() });
                let got = murmur2_32_seeds(&data, seeds8);
                for (seed, h) in seeds8.iter().zip(got) {
                    assert_eq!(h, murmur2_32(&data, *seed), "len {len} seed {seed}");
                }
                let seeds4 = [next(), 0, u32::MAX, 1919];
                let got = murmur2_32_seeds(&data, seeds4);
                for (seed, h) in seeds4.iter().zip(got) {
                    assert_eq!(h, murmur2_32(&data, *seed), "len {len} seed {seed}");
                }
                assert_eq!(murmur2_32_seeds(&data, [7]), [murmur2_32(&data, 7)]);
            }
        }
    }

    /// The direct remainder is `%`, at the edges and at random.
    #[test]
    fn mod32_is_the_remainder() {
        let mut state = 0x0f0f_1234_5555_aaaau64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 32) as u32
        };
        let mut divisors =
            vec![1, 2, 3, 5, 7, 10, 2719, 2000, 1 << 16, (1 << 31) - 1, 1 << 31, u32::MAX - 1, u32::MAX];
        divisors.extend((0..200).map(|_| next().max(1)));
        divisors.extend((0..200).map(|_| (next() >> 16).max(1)));
        for d in divisors {
            let m = Mod32::new(d);
            let edges = [0, 1, d - 1, d, d.wrapping_add(1), u32::MAX, u32::MAX - 1, u32::MAX / 2];
            for x in edges.into_iter().chain((0..500).map(|_| next())) {
                assert_eq!(m.reduce(x), x % d, "{x} mod {d}");
            }
        }
    }

    #[test]
    fn murmur2_known_values() {
        // Empty input with seed 0 hashes to 0 in every MurmurHash2 variant.
        assert_eq!(murmur2_32(b"", 0), 0);
        assert_ne!(murmur2_32(b"abc", SEED32), murmur2_32(b"abd", SEED32));
    }
}
