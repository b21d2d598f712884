//! SipHash-1-3 with a 128-bit output (what `siphasher`'s `SipHasher13`
//! and `finish128` give, bit for bit) of eight byte strings at once: two
//! groups of four, each group in the four 64-bit lanes of AVX2 registers.
//!
//! Why: a batch command (`XF.MEXISTS`, `XF.MADD`, `XF.INSERT` of 100 items)
//! hashes every item before it looks any up (`xf/filter.rs`'s
//! `hash_chunks`), and SipHash-1-3 is a fifth of what such a lookup costs
//! in the server (about 20 ns of an item's 113 at 100,000 items). Its
//! rounds are additions, rotations and exclusive ors of four words, each
//! step waiting on the one before, with little to overlap within one hash.
//! Four hashes in the lanes of one register share each instruction, and a
//! second group's rounds fill the waits of the first: 17-byte items 15.7
//! -> 8.1 ns each, 40-byte ones 22.5 -> 11.2, 8-byte ones 13.3 -> 7.6 (in
//! process, this machine; one group alone, 9.9 ns for 17 bytes, a third
//! no faster). The keyed PRF stays: this is the same function, checked
//! against the crate on every length to 41 bytes (and longer ones to
//! 120) and mixes of lengths in every lane.
//!
//! Strings of different lengths share the registers: each lane absorbs its
//! own words, its last (the length byte and the tail) at its own step, and
//! is left as it was at the steps past that, so four strings cost the
//! compression rounds of the longest. CPUs without AVX2 (and other
//! architectures) hash one at a time through the crate, as does a batch's
//! remainder past its last four. Every helper the kernel calls is itself
//! compiled for AVX2 (`#[target_feature]`): a closure or a helper without
//! it is a function of its own, whose intrinsics are calls, and a first
//! version that built its words through `array::map` and copied tails
//! with `copy_from_slice` (a call to `memcpy` each) ran slower than the
//! scalar crate.

use siphasher::sip128::{Hasher128, SipHasher13};
use std::hash::Hasher;

/// `SipHasher13::new_with_keys(k0, k1)`, `write(item)`, `finish128()` as a
/// `u128` (`as_u128`), of each item.
#[inline]
pub fn sip13_128(k0: u64, k1: u64, item: &[u8]) -> u128 {
    let mut h = SipHasher13::new_with_keys(k0, k1);
    h.write(item);
    h.finish128().as_u128()
}

/// [`sip13_128`] of each of `items` into `out` (the same length), eight
/// (then four) at a time where the CPU has AVX2.
pub fn sip13_128_each(k0: u64, k1: u64, items: &[&[u8]], out: &mut [u128]) {
    assert_eq!(items.len(), out.len(), "one output per item");
    let done = in_lanes(k0, k1, items, out);
    for (item, h) in items[done..].iter().zip(&mut out[done..]) {
        *h = sip13_128(k0, k1, item);
    }
}

/// The first items of `items` hashed in AVX2 lanes into `out`: eight at a
/// time (two groups of four side by side), then four; how many (0 without
/// AVX2).
#[cfg(target_arch = "x86_64")]
fn in_lanes(k0: u64, k1: u64, items: &[&[u8]], out: &mut [u128]) -> usize {
    if items.len() < 4 || !crate::common::cpu::has_avx2() {
        return 0;
    }
    for (eight, hashes) in items.chunks_exact(8).zip(out.chunks_exact_mut(8)) {
        // SAFETY: the CPU has AVX2 (checked above).
        unsafe { x4::hash::<2>(k0, k1, eight, hashes) };
    }
    let mut done = items.len() / 8 * 8;
    if items.len() - done >= 4 {
        // SAFETY: as above.
        unsafe { x4::hash::<1>(k0, k1, &items[done..done + 4], &mut out[done..done + 4]) };
        done += 4;
    }
    done
}

#[cfg(not(target_arch = "x86_64"))]
fn in_lanes(_: u64, _: u64, _: &[&[u8]], _: &mut [u128]) -> usize {
    0
}

/// The four-lane SipHash-1-3-128. Every function here is `unsafe` for its
/// `#[target_feature]` alone: its caller must have found AVX2
/// (`common::cpu::has_avx2`).
#[cfg(target_arch = "x86_64")]
mod x4 {
    use std::arch::x86_64::*;

    /// The message word each lane absorbs at `step`: its `step`-th 8 bytes
    /// (little-endian), then its last (the length's low byte on top of the
    /// tail), then nothing (`None`: the lane waits).
    #[inline(always)]
    fn word(item: &[u8], step: usize) -> Option<u64> {
        let full = item.len() / 8;
        if step < full {
            let at = 8 * step;
            return Some(u64::from_le_bytes(item[at..at + 8].try_into().expect("8 bytes")));
        }
        if step > full {
            return None;
        }
        Some(last_word(item))
    }

    /// The last word SipHash absorbs: the bytes after the last full 8
    /// (little-endian), the length's low byte on top. Read as the string's
    /// last 8 bytes shifted down when it has 8, byte by byte when shorter
    /// (a copy of a variable length was a call to `memcpy` per string).
    #[inline(always)]
    fn last_word(item: &[u8]) -> u64 {
        let (len, rest) = (item.len(), item.len() % 8);
        let tail = if rest == 0 {
            0
        } else if len >= 8 {
            u64::from_le_bytes(item[len - 8..].try_into().expect("8 bytes")) >> (8 * (8 - rest))
        } else {
            item.iter().enumerate().fold(0u64, |t, (i, &b)| t | u64::from(b) << (8 * i))
        };
        tail | (len as u64 & 0xff) << 56
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn rotl<const L: i32, const R: i32>(x: __m256i) -> __m256i {
        _mm256_or_si256(_mm256_slli_epi64::<L>(x), _mm256_srli_epi64::<R>(x))
    }

    /// One SipRound on the four lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn round(v: &mut [__m256i; 4], rot16: __m256i) {
        let [mut v0, mut v1, mut v2, mut v3] = *v;
        v0 = _mm256_add_epi64(v0, v1);
        v1 = rotl::<13, 51>(v1);
        v1 = _mm256_xor_si256(v1, v0);
        v0 = _mm256_shuffle_epi32::<0b10_11_00_01>(v0); // rotl 32
        v2 = _mm256_add_epi64(v2, v3);
        v3 = _mm256_shuffle_epi8(v3, rot16);
        v3 = _mm256_xor_si256(v3, v2);
        v0 = _mm256_add_epi64(v0, v3);
        v3 = rotl::<21, 43>(v3);
        v3 = _mm256_xor_si256(v3, v0);
        v2 = _mm256_add_epi64(v2, v1);
        v1 = rotl::<17, 47>(v1);
        v1 = _mm256_xor_si256(v1, v2);
        v2 = _mm256_shuffle_epi32::<0b10_11_00_01>(v2);
        *v = [v0, v1, v2, v3];
    }

    /// One message word per lane: SipHash-1-3's one compression round.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn absorb(v: &mut [__m256i; 4], m: __m256i, rot16: __m256i) {
        v[3] = _mm256_xor_si256(v[3], m);
        round(v, rot16);
        v[0] = _mm256_xor_si256(v[0], m);
    }

    /// The four lanes' `v0 ^ v1 ^ v2 ^ v3`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn fold(v: &[__m256i; 4]) -> [u64; 4] {
        unlanes(_mm256_xor_si256(_mm256_xor_si256(v[0], v[1]), _mm256_xor_si256(v[2], v[3])))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn lanes(x: [u64; 4]) -> __m256i {
        _mm256_set_epi64x(x[3] as i64, x[2] as i64, x[1] as i64, x[0] as i64)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn unlanes(x: __m256i) -> [u64; 4] {
        let mut out = [0u64; 4];
        _mm256_storeu_si256(out.as_mut_ptr().cast(), x);
        out
    }

    /// The hashes of `G` groups of four strings (`items`, `4 * G` of them)
    /// into `out`: the groups' rounds side by side, since one group's
    /// rounds follow each other (each round's steps depend on the last),
    /// and two groups fill what one leaves idle.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn hash<const G: usize>(k0: u64, k1: u64, items: &[&[u8]], out: &mut [u128]) {
        assert!(items.len() == 4 * G && out.len() == 4 * G);
        // Bytes of each 64-bit lane rotated left by 16 bits.
        let rot16 = _mm256_setr_epi8(
            6, 7, 0, 1, 2, 3, 4, 5, 14, 15, 8, 9, 10, 11, 12, 13, 6, 7, 0, 1, 2, 3, 4, 5, 14, 15, 8, 9, 10,
            11, 12, 13,
        );
        let (k0, k1) = (_mm256_set1_epi64x(k0 as i64), _mm256_set1_epi64x(k1 as i64));
        let mut v = [[
            _mm256_xor_si256(k0, _mm256_set1_epi64x(0x736f_6d65_7073_6575)),
            _mm256_xor_si256(k1, _mm256_set1_epi64x(0x646f_7261_6e64_6f6d ^ 0xee)),
            _mm256_xor_si256(k0, _mm256_set1_epi64x(0x6c79_6765_6e65_7261)),
            _mm256_xor_si256(k1, _mm256_set1_epi64x(0x7465_6462_7974_6573)),
        ]; G];
        let steps = items.iter().map(|i| i.len() / 8 + 1).max().unwrap_or(1);
        // The words every lane has: loaded straight, no lane waiting.
        let common = items.iter().map(|i| i.len() / 8).min().unwrap_or(0);
        for step in 0..common {
            let at = 8 * step;
            for (g, v) in v.iter_mut().enumerate() {
                let mut w = [0u64; 4];
                for (l, w) in w.iter_mut().enumerate() {
                    *w = u64::from_le_bytes(items[4 * g + l][at..at + 8].try_into().expect("8 bytes"));
                }
                absorb(v, lanes(w), rot16);
            }
        }
        for step in common..steps {
            for (g, v) in v.iter_mut().enumerate() {
                let (mut w, mut live) = ([0u64; 4], [0u64; 4]);
                for l in 0..4 {
                    if let Some(x) = word(items[4 * g + l], step) {
                        (w[l], live[l]) = (x, u64::MAX);
                    }
                }
                let was = *v;
                absorb(v, lanes(w), rot16);
                if live != [u64::MAX; 4] {
                    // Lanes past their last word keep their state.
                    let live = lanes(live);
                    for (now, was) in v.iter_mut().zip(was) {
                        *now = _mm256_blendv_epi8(was, *now, live);
                    }
                }
            }
        }
        for v in &mut v {
            v[2] = _mm256_xor_si256(v[2], _mm256_set1_epi64x(0xee));
        }
        for _ in 0..3 {
            for v in &mut v {
                round(v, rot16);
            }
        }
        let mut h1 = [[0u64; 4]; G];
        for (h1, v) in h1.iter_mut().zip(&v) {
            *h1 = fold(v);
        }
        for v in &mut v {
            v[1] = _mm256_xor_si256(v[1], _mm256_set1_epi64x(0xdd));
        }
        for _ in 0..3 {
            for v in &mut v {
                round(v, rot16);
            }
        }
        for (g, v) in v.iter().enumerate() {
            let h2 = fold(v);
            for l in 0..4 {
                out[4 * g + l] = u128::from(h1[g][l]) | u128::from(h2[l]) << 64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length from 0 to 40 in every lane, beside strings of other
    /// lengths (so that lanes wait for each other), in groups of eight, of
    /// four and alone, under a few keys: the crate's answer each time.
    #[test]
    fn many_at_once_is_the_crate_bit_for_bit() {
        let bytes: Vec<u8> = (0..200u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for (k0, k1) in [(0, 0), (1, 2), (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908), (u64::MAX, 7)] {
            for a in 0..=40usize {
                for b in [0, 1, 7, 8, 9, 17, 40, 64, 120] {
                    let items: Vec<&[u8]> = vec![
                        &bytes[..a],
                        &bytes[3..3 + b],
                        &bytes[50..50 + (a + b) % 33],
                        &bytes[100..100 + b / 2],
                    ];
                    for rotate in 0..4 {
                        // Eight (two groups side by side), four, then one
                        // more hashed alone.
                        let mut items = items.clone();
                        items.rotate_left(rotate);
                        items.extend(items.clone().iter().rev());
                        items.extend([&bytes[7..7 + a], &bytes[..b], &bytes[9..9 + a / 2], &bytes[..a + 1]]);
                        items.push(&bytes[..a % 5]);
                        let mut out = vec![0u128; items.len()];
                        sip13_128_each(k0, k1, &items, &mut out);
                        for (item, h) in items.iter().zip(&out) {
                            assert_eq!(
                                *h,
                                sip13_128(k0, k1, item),
                                "{} bytes, keys {k0:x} {k1:x}",
                                item.len()
                            );
                        }
                    }
                }
            }
        }
    }
}
