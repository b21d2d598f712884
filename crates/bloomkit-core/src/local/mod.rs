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

impl BlockedShape {
    /// The smallest filter (in steps of 1/8 bit per item) whose rate at
    /// `capacity` items is at most `error`.
    pub fn new(capacity: u64, error: f64) -> Option<BlockedShape> {
        if !is_rate(error) || capacity == 0 {
            return None;
        }
        let standard = -error.ln() / (LN_2 * LN_2);
        let mut bits_per_item = standard.max(1.0);
        while bits_per_item < 4.0 * standard + 64.0 {
            let load = f64::from(BLOCK_BITS) / bits_per_item;
            let best_k = (bits_per_item * LN_2).round().max(1.0) as u32;
            let fits =
                (best_k.saturating_sub(4).max(1)..=best_k + 4).find(|&k| blocked_rate(load, k) <= error);
            if let Some(hashes) = fits {
                let blocks =
                    ((capacity as f64 * bits_per_item) / f64::from(BLOCK_BITS)).ceil().max(1.0) as u64;
                return Some(BlockedShape { blocks, hashes, capacity, error });
            }
            bits_per_item += 0.125;
        }
        None
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
    fn new(shape: BlockedShape) -> Option<Part> {
        let mut blocks: Vec<Block> = Vec::new();
        blocks.try_reserve_exact(usize::try_from(shape.blocks).ok()?).ok()?;
        ask_for_huge_pages(blocks.as_ptr().cast(), blocks.capacity() * std::mem::size_of::<Block>());
        blocks.resize(shape.blocks as usize, Block([0; 8]));
        Some(Part { shape, blocks, modulus: Modulus::new(shape.blocks), items: 0 })
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
        let shape = BlockedShape::new(capacity, error / 2.0)?;
        Some(BlockedFilter { parts: vec![Part::new(shape)?] })
    }

    pub fn contains(&self, item: &[u8]) -> bool {
        let (h1, h2) = hash(item);
        self.parts.iter().any(|p| p.contains(h1, h2))
    }

    /// Adds items in order; `answer(true)` for each one that was new. Fails
    /// only when growing needs memory that cannot be had.
    pub fn add_each<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        mut answer: impl FnMut(bool),
    ) -> Result<(), &'static str> {
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
    ) -> Result<(), &'static str> {
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

    fn add_hash(&mut self, h1: u64, h2: u64) -> Result<bool, &'static str> {
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
        let next = BlockedShape::new(newest.shape.capacity.saturating_mul(2), newest.shape.error / 2.0)
            .and_then(Part::new)
            .ok_or("out of memory growing the filter")?;
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
}
