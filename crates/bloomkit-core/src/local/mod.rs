//! A cache-line-blocked Bloom filter for in-process work that no server
//! will ever read (`bloomkit dedup` without `--state`).
//!
//! RedisBloom's layout spreads an item's `k` bits over the whole array: `k`
//! cache misses per item once the filter outgrows the caches. Here all of an
//! item's bits are in one 64-byte block, so an add or lookup costs one miss,
//! and a batch prefetches its blocks before touching them. Blocking makes
//! some blocks fuller than others, which raises the false-positive rate for
//! a given size; [`BlockedShape::new`] sizes for that exactly (a Poisson
//! mixture over block loads), so the configured rate holds. The filter
//! grows past its capacity as RedisBloom's does: a new, twice as large
//! filter at half the error rate (the first gets half the configured rate,
//! so the sum stays within it).
//!
//! Each halving of the rate costs more bits per item here than in an
//! unblocked filter, and the hash count that reaches a rate falls far
//! below `bits x ln 2` once a block holds few items: a block with more
//! items than its average is then the usual false positive, and fewer
//! bits per item keep it sparse. So the sizing searches every hash count
//! (issue 43: searching only near `bits x ln 2` found no shape below a
//! rate of about 6e-8, and dedup stopped at its fifth part, 1.5 million
//! lines past a capacity of 100 000, calling it out of memory).

use std::f64::consts::LN_2;

use crate::common::hash::murmur3_128;
use crate::common::memory::Modulus;
use crate::common::sizing::is_rate;

const BLOCK_BITS: u32 = 512;
const BATCH: usize = 16;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u64; 8]);

/// Blocks and bits per item for a capacity and error rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockedShape {
    pub blocks: u64,
    pub hashes: u32,
    pub capacity: u64,
    pub error: f64,
}

/// The false-positive rate of `k` bits per item in 512-bit blocks holding
/// on average `load` items: the block loads are Poisson.
fn blocked_rate(load: f64, k: u32) -> f64 {
    let miss = 1.0 - 1.0 / f64::from(BLOCK_BITS);
    let (mut rate, mut p_j) = (0.0, (-load).exp());
    let terms = (load + 12.0 * load.sqrt() + 30.0) as u32;
    for j in 0..terms {
        if j > 0 {
            p_j *= load / f64::from(j);
        }
        rate += p_j * (1.0 - miss.powf(f64::from(k * j))).powi(k as i32);
    }
    rate
}

/// The most bits per item a shape may take: past this a filter sized for
/// the rate would be larger than one a user would want, and a rate that
/// needs more (below about 1e-60) is refused rather than searched for.
const MAX_BITS_PER_ITEM: f64 = 1024.0;

/// The most hash positions an item sets in its block.
const MAX_HASHES: u32 = 64;

/// The fewest hash positions that keep the rate at `error` with
/// `bits_per_item` bits per item, if any does. The rate falls as `k` grows
/// until the block fills, then rises: the search stops once it has risen
/// for a few steps in a row.
fn fewest_hashes(bits_per_item: f64, error: f64) -> Option<u32> {
    let load = f64::from(BLOCK_BITS) / bits_per_item;
    let (mut lowest, mut rising) = (f64::INFINITY, 0);
    for k in 1..=MAX_HASHES {
        let rate = blocked_rate(load, k);
        if rate <= error {
            return Some(k);
        }
        if rate < lowest {
            lowest = rate;
            rising = 0;
        } else {
            rising += 1;
            if rising == 3 {
                return None;
            }
        }
    }
    None
}

/// Why a blocked filter cannot be sized or grown.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BlockedError {
    /// The capacity is 0 or the rate is not strictly between 0 and 1.
    Invalid,
    /// No shape within [`MAX_BITS_PER_ITEM`] reaches this rate.
    RateUnreachable { error: f64 },
    /// The part's size is not representable (its capacity overflows, or its
    /// bytes do not fit this machine's address space).
    TooLarge { capacity: u64 },
    /// The allocation of `bytes` failed.
    OutOfMemory { bytes: u64 },
}

impl std::fmt::Display for BlockedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlockedError::Invalid => {
                f.write_str("the capacity must be at least 1 and the error rate strictly between 0 and 1")
            }
            BlockedError::RateUnreachable { error } => write!(
                f,
                "a part at an error rate of {error:.3e} would need more than {MAX_BITS_PER_ITEM} bits \
                 per item in 512-bit blocks"
            ),
            BlockedError::TooLarge { capacity } => {
                write!(f, "a part for {capacity} items is larger than this machine can address")
            }
            BlockedError::OutOfMemory { bytes } => {
                write!(f, "out of memory: a part of {bytes} bytes could not be allocated")
            }
        }
    }
}

impl std::error::Error for BlockedError {}

impl BlockedShape {
    /// The smallest filter (in steps of 1/8 bit per item) whose rate at
    /// `capacity` items is at most `error`, with the fewest hashes that
    /// reach it there.
    pub fn new(capacity: u64, error: f64) -> Option<BlockedShape> {
        BlockedShape::sized(capacity, error).ok()
    }

    /// [`BlockedShape::new`], saying why when there is no such filter.
    pub fn sized(capacity: u64, error: f64) -> Result<BlockedShape, BlockedError> {
        if !is_rate(error) || capacity == 0 {
            return Err(BlockedError::Invalid);
        }
        // The fewest hashes that reach the rate get fewer with more bits,
        // and more bits never raise the rate: the smallest size is found
        // by bisection over eighths of a bit.
        let standard = (-error.ln() / (LN_2 * LN_2)).max(1.0);
        let eighths = |bits: f64| (bits * 8.0).ceil() as u64;
        let (mut low, mut high) = (eighths(standard), eighths(standard));
        while fewest_hashes(high as f64 / 8.0, error).is_none() {
            low = high + 1;
            high *= 2;
            if high as f64 / 8.0 > MAX_BITS_PER_ITEM {
                return Err(BlockedError::RateUnreachable { error });
            }
        }
        while low < high {
            let mid = low + (high - low) / 2;
            match fewest_hashes(mid as f64 / 8.0, error) {
                Some(_) => high = mid,
                None => low = mid + 1,
            }
        }
        let bits_per_item = high as f64 / 8.0;
        let hashes = fewest_hashes(bits_per_item, error).expect("the bisection ends on a shape that fits");
        let blocks = (capacity as f64 * bits_per_item / f64::from(BLOCK_BITS)).ceil().max(1.0);
        if blocks * 64.0 >= isize::MAX as f64 {
            return Err(BlockedError::TooLarge { capacity });
        }
        Ok(BlockedShape { blocks: blocks as u64, hashes, capacity, error })
    }
}

/// One blocked filter.
struct Part {
    shape: BlockedShape,
    blocks: Vec<Block>,
    modulus: Modulus,
    items: u64,
}

impl Part {
    fn new(shape: BlockedShape) -> Result<Part, BlockedError> {
        let mut blocks: Vec<Block> = Vec::new();
        let count =
            usize::try_from(shape.blocks).map_err(|_| BlockedError::TooLarge { capacity: shape.capacity })?;
        blocks
            .try_reserve_exact(count)
            .map_err(|_| BlockedError::OutOfMemory { bytes: shape.blocks * 64 })?;
        ask_for_huge_pages(blocks.as_ptr().cast(), blocks.capacity() * std::mem::size_of::<Block>());
        blocks.resize(shape.blocks as usize, Block([0; 8]));
        Ok(Part { shape, blocks, modulus: Modulus::new(shape.blocks), items: 0 })
    }

    #[inline]
    fn block_of(&self, h1: u64) -> usize {
        self.modulus.reduce(h1) as usize
    }

    /// The item's bit mask in its block: `k` positions of 9 bits, seven
    /// from each independently mixed word of `h2` (no serial chain of
    /// multiplies, so the words are computed in parallel).
    #[inline]
    fn mask(&self, h2: u64) -> [u64; 8] {
        let mut mask = [0u64; 8];
        let mut left = self.shape.hashes;
        let mut word = 0u64;
        while left > 0 {
            let mut x = fmix64(h2.wrapping_add(word.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
            for _ in 0..left.min(7) {
                let bit = (x & 511) as usize;
                mask[bit >> 6] |= 1 << (bit & 63);
                x >>= 9;
            }
            left = left.saturating_sub(7);
            word += 1;
        }
        mask
    }

    #[inline]
    fn contains(&self, h1: u64, h2: u64) -> bool {
        let block = &self.blocks[self.block_of(h1)].0;
        let mask = self.mask(h2);
        (0..8).all(|i| block[i] & mask[i] == mask[i])
    }

    /// Sets the item's bits; true if any was clear.
    #[inline]
    fn insert(&mut self, h1: u64, h2: u64) -> bool {
        let at = self.block_of(h1);
        let mask = self.mask(h2);
        let block = &mut self.blocks[at].0;
        let mut new = false;
        for i in 0..8 {
            new |= block[i] & mask[i] != mask[i];
            block[i] |= mask[i];
        }
        self.items += u64::from(new);
        new
    }

    #[inline]
    fn prefetch(&self, h1: u64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetching any address is harmless; this one is in bounds.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch(self.blocks.as_ptr().add(self.block_of(h1)).cast(), _MM_HINT_T0);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = h1;
    }
}

/// A growing chain of blocked filters.
pub struct BlockedFilter {
    parts: Vec<Part>,
}

/// Random accesses over tens of MB miss the TLB on 4 KiB pages as often as
/// the cache: asks Linux for transparent huge pages over the (not yet
/// touched) array. Advice only; any failure is ignored.
fn ask_for_huge_pages(ptr: *const u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        const MADV_HUGEPAGE: i32 = 14;
        const PAGE: usize = 4096;
        extern "C" {
            fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
        }
        let start = (ptr as usize).next_multiple_of(PAGE);
        let end = (ptr as usize + len) / PAGE * PAGE;
        if len >= 2 << 20 && end > start {
            // SAFETY: advice over pages inside this allocation; it changes no contents.
            unsafe { madvise(start as *mut std::ffi::c_void, end - start, MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

/// MurmurHash3's finaliser: every output bit depends on every input bit.
#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// One pass of a 128-bit hash over the item.
#[inline]
fn hash(item: &[u8]) -> (u64, u64) {
    murmur3_128(item)
}

impl BlockedFilter {
    /// A filter whose rate stays within `error` however far it grows: the
    /// first part gets half of it, each later part half of the one before.
    pub fn new(capacity: u64, error: f64) -> Option<BlockedFilter> {
        BlockedFilter::with_capacity(capacity, error).ok()
    }

    /// [`BlockedFilter::new`], saying why when it cannot be made.
    pub fn with_capacity(capacity: u64, error: f64) -> Result<BlockedFilter, BlockedError> {
        let shape = BlockedShape::sized(capacity, error / 2.0)?;
        Ok(BlockedFilter { parts: vec![Part::new(shape)?] })
    }

    pub fn contains(&self, item: &[u8]) -> bool {
        let (h1, h2) = hash(item);
        self.parts.iter().any(|p| p.contains(h1, h2))
    }

    /// Adds items in order; `answer(true)` for each one that was new. Fails
    /// only when the next part cannot be made, saying why; the items before
    /// the one that needed it are added.
    pub fn add_each<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        mut answer: impl FnMut(bool),
    ) -> Result<(), BlockedError> {
        let mut hashes = [(0u64, 0u64); BATCH];
        for group in items.chunks(BATCH) {
            for (h, item) in hashes.iter_mut().zip(group) {
                *h = BlockedFilter::hash(item.as_ref());
            }
            self.add_each_hashed(&hashes[..group.len()], &mut answer)?;
        }
        Ok(())
    }

    /// The hash pair of an item, for [`BlockedFilter::add_each_hashed`]
    /// (so that another thread can hash while this one probes).
    #[inline]
    pub fn hash(item: &[u8]) -> (u64, u64) {
        hash(item)
    }

    /// Adds hashed items in order, prefetching a batch's blocks first.
    pub fn add_each_hashed(
        &mut self,
        hashes: &[(u64, u64)],
        mut answer: impl FnMut(bool),
    ) -> Result<(), BlockedError> {
        for group in hashes.chunks(BATCH) {
            let newest = self.parts.last().expect("at least one part");
            for &(h1, _) in group {
                newest.prefetch(h1);
            }
            for &(h1, h2) in group {
                answer(self.add_hash(h1, h2)?);
            }
        }
        Ok(())
    }

    fn add_hash(&mut self, h1: u64, h2: u64) -> Result<bool, BlockedError> {
        let n = self.parts.len();
        let (older, newest) = self.parts.split_at_mut(n - 1);
        if older.iter().any(|p| p.contains(h1, h2)) {
            return Ok(false);
        }
        let newest = &mut newest[0];
        if newest.items < newest.shape.capacity {
            return Ok(newest.insert(h1, h2));
        }
        if newest.contains(h1, h2) {
            return Ok(false);
        }
        let capacity =
            newest.shape.capacity.checked_mul(2).ok_or(BlockedError::TooLarge { capacity: u64::MAX })?;
        let next = Part::new(BlockedShape::sized(capacity, newest.shape.error / 2.0)?)?;
        self.parts.push(next);
        Ok(self.parts.last_mut().expect("just pushed").insert(h1, h2))
    }

    pub fn items(&self) -> u64 {
        self.parts.iter().map(|p| p.items).sum()
    }

    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.shape.blocks * 64).sum()
    }

    /// The chance that a new item is taken for one already seen, now.
    pub fn estimated_false_positive_rate(&self) -> f64 {
        // 1 - Π(1 - r) through ln_1p/exp_m1: a near-empty filter's tiny
        // rate would cancel to 0 against 1.
        let log_miss: f64 = self
            .parts
            .iter()
            .map(|p| (-blocked_rate(p.items as f64 / p.shape.blocks as f64, p.shape.hashes)).ln_1p())
            .sum();
        -log_miss.exp_m1()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizing_accounts_for_blocking() {
        for error in [0.01, 1e-3, 1e-6] {
            let s = BlockedShape::new(1_000_000, error).unwrap();
            let load = 1_000_000.0 / s.blocks as f64;
            assert!(blocked_rate(load, s.hashes) <= error);
            let per_item = s.blocks as f64 * 512.0 / 1e6;
            let standard = -error.ln() / (LN_2 * LN_2);
            assert!(per_item > standard && per_item < 2.0 * standard, "{error}: {per_item} bits per item");
        }
    }

    /// Every halving of the rate a growing filter asks for has a shape, down
    /// to rates no dedup reaches (a capacity guessed 2^40 times too small),
    /// and each is the smallest: an eighth of a bit less misses the rate.
    #[test]
    fn every_halving_has_the_smallest_shape() {
        let mut error = 1e-6 / 2.0;
        for doubling in 0..40 {
            let s =
                BlockedShape::sized(1 << 20, error).unwrap_or_else(|e| panic!("doubling {doubling}: {e}"));
            let bits = s.blocks as f64 * 512.0 / f64::from(1u32 << 20);
            assert!(blocked_rate(512.0 / bits, s.hashes) <= error * 1.001, "doubling {doubling}");
            let less = (bits * 8.0).floor() / 8.0 - 0.125;
            assert!(
                fewest_hashes(less, error).is_none(),
                "doubling {doubling}: {less} bits per item would do"
            );
            error /= 2.0;
        }
    }

    /// Growth past the capacity never fails for want of a shape (issue 43:
    /// it stopped at the fifth part, 1.5 million lines past 100 000), and
    /// keeps every item.
    #[test]
    fn grows_through_many_parts() {
        let mut f = BlockedFilter::with_capacity(100, 1e-6).unwrap();
        let items: Vec<[u8; 8]> = (0..200_000u64).map(u64::to_le_bytes).collect();
        let mut new = 0u64;
        f.add_each(&items, |n| new += u64::from(n)).unwrap();
        assert_eq!(f.parts.len(), 11, "100 x (2^11 - 1) = 204 700 is the first total past 200 000");
        assert!(new >= 199_990, "{new} of 200 000 reported new");
        assert!(items.iter().all(|i| f.contains(i)));
        assert!(f.estimated_false_positive_rate() <= 1e-6);
    }

    /// Errors name their cause: a rate no shape reaches, a size beyond the
    /// address space, and an allocation that fails are three messages.
    #[test]
    fn errors_name_their_cause() {
        let unreachable = BlockedShape::sized(1000, 1e-300).unwrap_err();
        assert_eq!(unreachable, BlockedError::RateUnreachable { error: 1e-300 });
        assert!(unreachable.to_string().contains("error rate of 1.000e-300"), "{unreachable}");
        let huge = BlockedShape::sized(u64::MAX, 0.01).unwrap_err();
        assert!(matches!(huge, BlockedError::TooLarge { .. }), "{huge}");
        assert!(BlockedError::OutOfMemory { bytes: 64 }.to_string().starts_with("out of memory"));
        assert_eq!(BlockedShape::sized(0, 0.01), Err(BlockedError::Invalid));
    }
}
