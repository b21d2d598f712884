//! One sub-filter: a bit array and the parameters that address it.

use super::errors::BfError;
use crate::common::hash::HashPair;
use crate::common::memory::{zeroed_bytes, Modulus, Relocate};
use crate::common::sizing::Shape;

/// A sub-filter of a chain, laid out as RedisBloom lays it out.
#[derive(Debug)]
pub struct SubFilter {
    pub shape: Shape,
    /// Items added to this sub-filter (RedisBloom's per-link `size`).
    pub items: u64,
    bits: Box<[u8]>,
    modulus: Modulus,
}

impl SubFilter {
    /// An empty sub-filter of the given shape.
    pub fn new(shape: Shape) -> Result<SubFilter, BfError> {
        let bits = zeroed_bytes(shape.bytes)?;
        SubFilter::from_parts(shape, 0, bits)
    }

    /// A sub-filter over existing bytes, after checking that every probe the
    /// shape can produce lands inside them (a decoder's last line of defence).
    pub fn from_parts(shape: Shape, items: u64, bits: Box<[u8]>) -> Result<SubFilter, BfError> {
        let available = (bits.len() as u64).checked_mul(8).ok_or(BfError::BadData)?;
        let modulus = if shape.n2 > 0 {
            if shape.n2 > 63 {
                return Err(BfError::BadData);
            }
            1u64 << shape.n2
        } else {
            shape.bits
        };
        let valid = modulus >= 1
            && modulus <= available
            && shape.bytes == bits.len() as u64
            && shape.hashes >= 1
            && shape.hashes <= MAX_HASHES
            && shape.error > 0.0
            && shape.error < 1.0
            && shape.bpe > 0.0
            && shape.capacity >= 1;
        if !valid {
            return Err(BfError::BadData);
        }
        Ok(SubFilter { shape, items, bits, modulus: Modulus::new(modulus) })
    }

    /// True when every bit of the item is set.
    #[inline]
    pub fn contains(&self, h: HashPair) -> bool {
        let mut x = h.a;
        for _ in 0..self.shape.hashes {
            let bit = self.modulus.reduce(x);
            // In bounds: `from_parts` checked the modulus against the length.
            if self.bits[(bit >> 3) as usize] & (1 << (bit & 7)) == 0 {
                return false;
            }
            x = x.wrapping_add(h.b);
        }
        true
    }

    /// Sets the item's bits; true when at least one was newly set.
    #[inline]
    pub fn insert(&mut self, h: HashPair) -> bool {
        let mut x = h.a;
        let mut newly_set = false;
        for _ in 0..self.shape.hashes {
            let bit = self.modulus.reduce(x);
            let byte = &mut self.bits[(bit >> 3) as usize];
            let mask = 1 << (bit & 7);
            newly_set |= *byte & mask == 0;
            *byte |= mask;
            x = x.wrapping_add(h.b);
        }
        newly_set
    }

    /// Asks the CPU to load the cache lines of the item's first `probes`
    /// probes, so that the misses of a batch overlap instead of happening one
    /// after another. Only worth it when the arrays probed together do not
    /// fit in cache ([`PREFETCH_FROM_BYTES`]): the caller decides.
    #[inline]
    pub fn prefetch(&self, h: HashPair, probes: u32) {
        let mut x = h.a;
        for _ in 0..self.shape.hashes.min(probes) {
            let bit = self.modulus.reduce(x);
            prefetch_byte(self.bits.as_ptr().wrapping_add((bit >> 3) as usize));
            x = x.wrapping_add(h.b);
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bits
    }

    /// Offers the bit array to `to` (active defragmentation).
    pub(super) fn relocate(&mut self, to: &mut impl Relocate) {
        to.bytes(&mut self.bits);
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bits
    }

    /// Counts set bits, for fill and estimated false-positive rate.
    pub fn bits_set(&self) -> u64 {
        self.bits.iter().map(|b| u64::from(b.count_ones())).sum()
    }

    pub fn try_clone(&self) -> Result<SubFilter, BfError> {
        let mut bits = zeroed_bytes(self.shape.bytes)?;
        bits.copy_from_slice(&self.bits);
        Ok(SubFilter { shape: self.shape, items: self.items, bits, modulus: self.modulus })
    }
}

/// Arrays probed together that are smaller than this in all (about a core's
/// L2 on server CPUs) stay in cache: prefetching them costs more than it
/// saves. It is the sum that counts: a chain of five 1 MB sub-filters misses
/// the L2 as one 5 MB filter does.
pub(crate) const PREFETCH_FROM_BYTES: usize = 2 << 20;

#[inline(always)]
fn prefetch_byte(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(ptr as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// More hashes than any error rate above the smallest double can ask for
/// (ceil(ln2 x -ln(4.9e-324) / ln2^2) = 1075); larger counts are corrupt data.
pub const MAX_HASHES: u32 = 1100;
