//! SipHash-1-3 with a 128-bit output (what `siphasher`'s `SipHasher13`
//! and `finish128` give, bit for bit) of many byte strings at once: two
//! registers' lanes side by side, four 64-bit lanes each with AVX2, eight
//! with AVX-512.
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
//! process, an AMD EPYC; one group alone, 9.9 ns for 17 bytes, a third
//! no faster). AVX-512 rotates a lane in one instruction (`vprolq`, three
//! of a round's five rotations were two shifts and an or) and holds eight
//! lanes: on an Intel Xeon with AVX-512, 17-byte items 7.3 ns each in
//! AVX2's lanes, 5.2 in AVX-512's eight (8 bytes 6.1 -> 4.2, 40 bytes 8.6
//! -> 6.2; the crate alone 13.4).
//! The keyed PRF stays: this is the same function, checked against the
//! crate on every length to 40 bytes (and longer ones to 120), batches
//! of every size to 40 and mixes of lengths in every lane, in every kind
//! of lanes the CPU runs ([`Lanes`]).
//!
//! Strings of different lengths share the registers: each lane absorbs its
//! own words, its last (the length byte and the tail) at its own step, and
//! is left as it was at the steps past that, so a register's strings cost
//! the compression rounds of the longest. CPUs without AVX2 (and other
//! architectures) hash one at a time through the crate, as does a batch's
//! remainder past its last four. The rounds are written once over a
//! register type and inlined into one entry point per kind, compiled for
//! its instructions (`#[target_feature]`): a closure or a helper outside
//! it is a function of its own, whose intrinsics are calls, and a first
//! version that built its words through `array::map` and copied tails
//! with `copy_from_slice` (a call to `memcpy` each) ran slower than the
//! scalar crate.
//!
//! Eight lanes are 512-bit instructions, which the first Xeons with
//! AVX-512 (Skylake-SP to Cooper Lake) pay for by lowering the core's
//! clock for a while after, every command on that core with it: those
//! keep AVX2's four lanes. (AVX-512's rotation on AVX2's registers, 6.4
//! ns for 17 bytes, was not kept for them: compiled with AVX-512's
//! features, the compiler wrote its outputs with 512-bit stores anyway.)

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

/// [`sip13_128`] of each of `items` into `out` (the same length), in the
/// vector lanes the CPU has ([`Lanes::get`]): sixteen at a time with
/// AVX-512, eight with AVX2, then fewer.
#[inline]
pub fn sip13_128_each<T: From<u128>>(k0: u64, k1: u64, items: &[&[u8]], out: &mut [T]) {
    each_in(Lanes::get(), k0, k1, items, out);
}

/// How many lanes the CPU hashes in: AVX2's four or AVX-512's eight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lanes {
    /// One item at a time (no AVX2, or not x86-64).
    One,
    /// Four lanes of AVX2; a rotation is two shifts and an or.
    Avx2,
    /// Eight lanes of AVX-512; a rotation is one `vprolq`.
    Avx512,
}

impl Lanes {
    /// Every kind, from least to most.
    pub const ALL: [Lanes; 3] = [Lanes::One, Lanes::Avx2, Lanes::Avx512];

    /// The most this CPU runs, less what `BLOOMKIT_SIP_LANES` (`one` or
    /// `avx2`) asks to go without (for benchmarks: every
    /// kind gives the same hashes); decided on the first call.
    #[inline]
    pub fn get() -> Lanes {
        static CHOSEN: std::sync::OnceLock<Lanes> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| Lanes::chosen(std::env::var("BLOOMKIT_SIP_LANES").ok().as_deref()))
    }

    /// The most this CPU runs of those no more than `asked` (a name; any
    /// other word asks for the most).
    fn chosen(asked: Option<&str>) -> Lanes {
        let most = Lanes::ALL.into_iter().find(|l| Some(l.name()) == asked).unwrap_or(Lanes::Avx512);
        Lanes::ALL.into_iter().rev().find(|l| l.runs() && *l <= most).unwrap_or(Lanes::One)
    }

    /// Its name, as `BLOOMKIT_SIP_LANES` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Lanes::One => "one",
            Lanes::Avx2 => "avx2",
            Lanes::Avx512 => "avx512",
        }
    }

    /// Whether this CPU has the instructions (`cpuid` once, then cached by
    /// the standard library), and, for eight lanes, runs them at its clock.
    pub fn runs(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2 = crate::common::cpu::has_avx2();
            match self {
                Lanes::One => true,
                Lanes::Avx2 => avx2,
                Lanes::Avx512 => avx2 && has!("avx512f") && !wide_lowers_clock(),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Lanes::One
        }
    }
}

/// Intel's family 6, model 0x55 (Skylake-SP, Cascade Lake, Cooper Lake,
/// Skylake-X): 512-bit instructions lower the core's clock.
#[cfg(target_arch = "x86_64")]
fn wide_lowers_clock() -> bool {
    use crate::common::cpu::{signature, INTEL};
    let s = signature();
    s.vendor == INTEL && s.family == 6 && s.model == 0x55
}

/// [`sip13_128_each`] in `lanes`, which the CPU must run.
fn each_in<T: From<u128>>(lanes: Lanes, k0: u64, k1: u64, items: &[&[u8]], out: &mut [T]) {
    assert_eq!(items.len(), out.len(), "one output per item");
    // What makes the lanes' `unsafe` calls sound (a few loads a batch).
    assert!(lanes.runs(), "{lanes:?} asked of a CPU that does not run it");
    let mut done = in_lanes(lanes, k0, k1, items, out);
    if lanes == Lanes::Avx512 && items.len() - done >= 4 {
        // A remainder of four to seven in four lanes.
        done += in_lanes(Lanes::Avx2, k0, k1, &items[done..done + 4], &mut out[done..done + 4]);
    }
    for (item, h) in items[done..].iter().zip(&mut out[done..]) {
        *h = T::from(sip13_128(k0, k1, item));
    }
}

/// The first items of `items` hashed in `lanes` into `out`: two registers'
/// lanes at a time side by side, then one register's; how many (0 for
/// [`Lanes::One`]).
#[cfg(target_arch = "x86_64")]
fn in_lanes<T: From<u128>>(lanes: Lanes, k0: u64, k1: u64, items: &[&[u8]], out: &mut [T]) -> usize {
    let n = match lanes {
        Lanes::One => return 0,
        Lanes::Avx512 => 8,
        Lanes::Avx2 => 4,
    };
    let mut done = 0;
    while items.len() - done >= n {
        let g = if items.len() - done >= 2 * n { 2 } else { 1 };
        let (items, out) = (&items[done..done + g * n], &mut out[done..done + g * n]);
        // SAFETY: `lanes` runs on this CPU (`each_in` checked it), and
        // with AVX-512 so does AVX2 (`Lanes::runs`).
        unsafe {
            match (lanes, g) {
                (Lanes::Avx512, 2) => simd::hash_avx512::<2, T>(k0, k1, items, out),
                (Lanes::Avx512, _) => simd::hash_avx512::<1, T>(k0, k1, items, out),
                (_, 2) => simd::hash_avx2::<2, T>(k0, k1, items, out),
                (_, _) => simd::hash_avx2::<1, T>(k0, k1, items, out),
            }
        }
        done += g * n;
    }
    done
}

#[cfg(not(target_arch = "x86_64"))]
fn in_lanes<T>(_: Lanes, _: u64, _: u64, _: &[&[u8]], _: &mut [T]) -> usize {
    0
}

/// SipHash-1-3-128 in the lanes of vector registers. Every function here
/// is `unsafe` for the instructions it runs: its caller must have found
/// them ([`Lanes::runs`]). The rounds are written once, over [`Vector`];
/// each kind of register is an entry point compiled for its instructions
/// (`#[target_feature]`), into which the rest is inlined.
#[cfg(target_arch = "x86_64")]
mod simd {
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

    /// `N` 64-bit lanes and what a SipRound does to them.
    pub(super) trait Vector: Copy {
        const N: usize;
        unsafe fn splat(x: u64) -> Self;
        /// The first `N` of `x`.
        unsafe fn load(x: &[u64; 8]) -> Self;
        unsafe fn store(self) -> [u64; 8];
        unsafe fn add(self, o: Self) -> Self;
        unsafe fn xor(self, o: Self) -> Self;
        /// Each lane rotated left by `L` (`R` is `64 - L`).
        unsafe fn rotl<const L: i32, const R: i32>(self) -> Self;
        /// `now`'s lanes where bit `l` of `live` is set, `was`'s elsewhere.
        unsafe fn keep(was: Self, now: Self, live: u8) -> Self;
    }

    /// AVX2's four lanes: a rotation by 16 or 32 is a byte or word
    /// shuffle, any other two shifts and an or.
    #[derive(Clone, Copy)]
    pub(super) struct Avx2(__m256i);

    impl Vector for Avx2 {
        const N: usize = 4;
        #[inline(always)]
        unsafe fn splat(x: u64) -> Self {
            Avx2(_mm256_set1_epi64x(x as i64))
        }
        #[inline(always)]
        unsafe fn load(x: &[u64; 8]) -> Self {
            Avx2(_mm256_loadu_si256(x.as_ptr().cast()))
        }
        #[inline(always)]
        unsafe fn store(self) -> [u64; 8] {
            let mut out = [0u64; 8];
            _mm256_storeu_si256(out.as_mut_ptr().cast(), self.0);
            out
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            Avx2(_mm256_add_epi64(self.0, o.0))
        }
        #[inline(always)]
        unsafe fn xor(self, o: Self) -> Self {
            Avx2(_mm256_xor_si256(self.0, o.0))
        }
        #[inline(always)]
        unsafe fn rotl<const L: i32, const R: i32>(self) -> Self {
            let x = self.0;
            Avx2(if L == 32 {
                _mm256_shuffle_epi32::<0b10_11_00_01>(x)
            } else if L == 16 {
                // Bytes of each 64-bit lane rotated left by 16 bits.
                let rot16 = _mm256_setr_epi8(
                    6, 7, 0, 1, 2, 3, 4, 5, 14, 15, 8, 9, 10, 11, 12, 13, 6, 7, 0, 1, 2, 3, 4, 5, 14, 15, 8,
                    9, 10, 11, 12, 13,
                );
                _mm256_shuffle_epi8(x, rot16)
            } else {
                _mm256_or_si256(_mm256_slli_epi64::<L>(x), _mm256_srli_epi64::<R>(x))
            })
        }
        #[inline(always)]
        unsafe fn keep(was: Self, now: Self, live: u8) -> Self {
            let mask = |l: u8| if live >> l & 1 == 1 { -1 } else { 0 };
            let live = _mm256_set_epi64x(mask(3), mask(2), mask(1), mask(0));
            Avx2(_mm256_blendv_epi8(was.0, now.0, live))
        }
    }

    /// AVX-512's eight lanes (AVX-512F alone: its rotations, its masks).
    #[derive(Clone, Copy)]
    pub(super) struct Avx512(__m512i);

    impl Vector for Avx512 {
        const N: usize = 8;
        #[inline(always)]
        unsafe fn splat(x: u64) -> Self {
            Avx512(_mm512_set1_epi64(x as i64))
        }
        #[inline(always)]
        unsafe fn load(x: &[u64; 8]) -> Self {
            Avx512(_mm512_loadu_si512(x.as_ptr().cast()))
        }
        #[inline(always)]
        unsafe fn store(self) -> [u64; 8] {
            let mut out = [0u64; 8];
            _mm512_storeu_si512(out.as_mut_ptr().cast(), self.0);
            out
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            Avx512(_mm512_add_epi64(self.0, o.0))
        }
        #[inline(always)]
        unsafe fn xor(self, o: Self) -> Self {
            Avx512(_mm512_xor_si512(self.0, o.0))
        }
        #[inline(always)]
        unsafe fn rotl<const L: i32, const R: i32>(self) -> Self {
            Avx512(_mm512_rol_epi64::<L>(self.0))
        }
        #[inline(always)]
        unsafe fn keep(was: Self, now: Self, live: u8) -> Self {
            Avx512(_mm512_mask_blend_epi64(live, was.0, now.0))
        }
    }

    /// One SipRound on the lanes.
    #[inline(always)]
    unsafe fn round<V: Vector>(v: &mut [V; 4]) {
        let [mut v0, mut v1, mut v2, mut v3] = *v;
        v0 = v0.add(v1);
        v1 = v1.rotl::<13, 51>();
        v1 = v1.xor(v0);
        v0 = v0.rotl::<32, 32>();
        v2 = v2.add(v3);
        v3 = v3.rotl::<16, 48>();
        v3 = v3.xor(v2);
        v0 = v0.add(v3);
        v3 = v3.rotl::<21, 43>();
        v3 = v3.xor(v0);
        v2 = v2.add(v1);
        v1 = v1.rotl::<17, 47>();
        v1 = v1.xor(v2);
        v2 = v2.rotl::<32, 32>();
        *v = [v0, v1, v2, v3];
    }

    /// One message word per lane: SipHash-1-3's one compression round.
    #[inline(always)]
    unsafe fn absorb<V: Vector>(v: &mut [V; 4], m: V) {
        v[3] = v[3].xor(m);
        round(v);
        v[0] = v[0].xor(m);
    }

    /// The lanes' `v0 ^ v1 ^ v2 ^ v3`.
    #[inline(always)]
    unsafe fn fold<V: Vector>(v: &[V; 4]) -> [u64; 8] {
        v[0].xor(v[1]).xor(v[2].xor(v[3])).store()
    }

    /// [`hash_in`] in AVX2's lanes.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn hash_avx2<const G: usize, T: From<u128>>(
        k0: u64,
        k1: u64,
        items: &[&[u8]],
        out: &mut [T],
    ) {
        hash_in::<Avx2, G, T>(k0, k1, items, out)
    }

    /// [`hash_in`] in AVX-512's lanes.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn hash_avx512<const G: usize, T: From<u128>>(
        k0: u64,
        k1: u64,
        items: &[&[u8]],
        out: &mut [T],
    ) {
        hash_in::<Avx512, G, T>(k0, k1, items, out)
    }

    /// The hashes of `G` groups of `V::N` strings (`items`) into `out`: the
    /// groups' rounds side by side, since one group's rounds follow each
    /// other (each round's steps depend on the last), and two groups fill
    /// what one leaves idle.
    #[inline(always)]
    unsafe fn hash_in<V: Vector, const G: usize, T: From<u128>>(
        k0: u64,
        k1: u64,
        items: &[&[u8]],
        out: &mut [T],
    ) {
        let n = V::N;
        assert!(items.len() == n * G && out.len() == n * G);
        let (k0, k1) = (V::splat(k0), V::splat(k1));
        let mut v = [[
            k0.xor(V::splat(0x736f_6d65_7073_6575)),
            k1.xor(V::splat(0x646f_7261_6e64_6f6d ^ 0xee)),
            k0.xor(V::splat(0x6c79_6765_6e65_7261)),
            k1.xor(V::splat(0x7465_6462_7974_6573)),
        ]; G];
        let steps = items.iter().map(|i| i.len() / 8 + 1).max().unwrap_or(1);
        // The words every lane has: loaded straight, no lane waiting.
        let common = items.iter().map(|i| i.len() / 8).min().unwrap_or(0);
        for step in 0..common {
            let at = 8 * step;
            for (g, v) in v.iter_mut().enumerate() {
                let mut w = [0u64; 8];
                for (l, w) in w.iter_mut().take(n).enumerate() {
                    *w = u64::from_le_bytes(items[n * g + l][at..at + 8].try_into().expect("8 bytes"));
                }
                absorb(v, V::load(&w));
            }
        }
        let all = (1u16 << n) - 1;
        for step in common..steps {
            for (g, v) in v.iter_mut().enumerate() {
                let (mut w, mut live) = ([0u64; 8], 0u16);
                for l in 0..n {
                    if let Some(x) = word(items[n * g + l], step) {
                        (w[l], live) = (x, live | 1 << l);
                    }
                }
                let was = *v;
                absorb(v, V::load(&w));
                if live != all {
                    // Lanes past their last word keep their state.
                    for (now, was) in v.iter_mut().zip(was) {
                        *now = V::keep(was, *now, live as u8);
                    }
                }
            }
        }
        for v in &mut v {
            v[2] = v[2].xor(V::splat(0xee));
        }
        for _ in 0..3 {
            for v in &mut v {
                round(v);
            }
        }
        let mut h1 = [[0u64; 8]; G];
        for (h1, v) in h1.iter_mut().zip(&v) {
            *h1 = fold(v);
        }
        for v in &mut v {
            v[1] = v[1].xor(V::splat(0xdd));
        }
        for _ in 0..3 {
            for v in &mut v {
                round(v);
            }
        }
        for (g, v) in v.iter().enumerate() {
            let h2 = fold(v);
            for l in 0..n {
                out[n * g + l] = T::from(u128::from(h1[g][l]) | u128::from(h2[l]) << 64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length from 0 to 40 in every lane, beside strings of other
    /// lengths (so that lanes wait for each other), in batches of every
    /// size from 1 to 40 (two registers side by side, one, four lanes
    /// after eight, the rest alone), under a few keys, in every kind of
    /// lanes this CPU runs: the crate's answer each time.
    #[test]
    fn many_at_once_is_the_crate_bit_for_bit() {
        let bytes: Vec<u8> = (0..200u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let kinds: Vec<Lanes> = Lanes::ALL.into_iter().filter(|l| l.runs()).collect();
        assert!(kinds.contains(&Lanes::get()), "{:?} among {kinds:?}", Lanes::get());
        for (k0, k1) in [(0, 0), (1, 2), (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908), (u64::MAX, 7)] {
            for a in 0..=40usize {
                for b in [0, 1, 7, 8, 9, 17, 40, 64, 120] {
                    let four: [&[u8]; 4] = [
                        &bytes[..a],
                        &bytes[3..3 + b],
                        &bytes[50..50 + (a + b) % 33],
                        &bytes[100..100 + b / 2],
                    ];
                    let items: Vec<&[u8]> =
                        (0..40).map(|i| four[(i + a) % 4].get(i % 3..).unwrap_or(&[])).collect();
                    let expected: Vec<u128> = items.iter().map(|item| sip13_128(k0, k1, item)).collect();
                    for &lanes in &kinds {
                        for n in 1..=items.len() {
                            let mut out = vec![0u128; n];
                            each_in(lanes, k0, k1, &items[..n], &mut out);
                            assert_eq!(
                                out,
                                expected[..n],
                                "{lanes:?}, {n} items of {a} and {b} bytes, keys {k0:x} {k1:x}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_environment_asks_for_less_never_more() {
        let best = Lanes::chosen(None);
        assert!(best.runs() && Lanes::ALL.iter().all(|l| !l.runs() || *l <= best));
        assert_eq!(Lanes::chosen(Some("more")), best);
        for l in Lanes::ALL {
            let got = Lanes::chosen(Some(l.name()));
            assert!(got <= l && got.runs(), "{l:?} asked, {got:?} chosen");
            if l.runs() {
                assert_eq!(got, l);
            }
        }
        assert_eq!(Lanes::chosen(Some("one")), Lanes::One);
    }
}
