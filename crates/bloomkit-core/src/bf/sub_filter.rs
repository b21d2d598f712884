//! One sub-filter: a bit array and the parameters that address it.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use super::errors::BfError;
use crate::common::hash::HashPair;
use crate::common::memory::{zeroed_bytes, Relocate};
use crate::common::sizing::Shape;

/// A sub-filter of a chain, laid out as RedisBloom lays it out, in 64
/// bytes as RedisBloom's `SBLink` is (`struct bloom` and its count): a
/// chain of `n` sub-filters then takes the same blocks as RedisBloom's (a
/// 32-byte chain, `64 n` bytes of links, the bit arrays), so that no value
/// costs more memory than RedisBloom's. Hence the fields below: the
/// shape's `bits` is not kept when it is `bytes x 8` (always, for a filter
/// RedisBloom or bloomkit made; a loaded one that differs is `odd`, its
/// `bits` kept where the divisor's magic number goes), the array is a bare
/// pointer (its length is `bytes`), and the fast remainder is a 64-bit
/// multiply ([`Remainder`]) rather than a 128-bit one.
pub struct SubFilter {
    capacity: u64,
    error: f64,
    bpe: f64,
    bytes: u64,
    /// Items added to this sub-filter (RedisBloom's per-link `size`).
    pub items: u64,
    /// The bit array: `bytes` bytes, owned (allocated as a `Box<[u8]>`).
    array: NonNull<u8>,
    /// [`Remainder`]'s multiplier for the divisor `bytes x 8`; an odd
    /// filter's `bits` (its divisor); unused for a power of two (`n2 > 0`).
    magic: u64,
    hashes: u32,
    n2: u8,
    /// [`Remainder`]'s shift.
    shift: u8,
    /// `bits` is not `bytes x 8` (a loaded filter): probes reduce by a
    /// plain remainder by `magic`.
    odd: bool,
}

// SAFETY: `array` is owned, as a `Box<[u8]>` is: it is never shared, and
// the sub-filter gives access to it only through `&self`/`&mut self`.
unsafe impl Send for SubFilter {}
// SAFETY: as above; `&SubFilter` only reads the array.
unsafe impl Sync for SubFilter {}

impl std::fmt::Debug for SubFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubFilter").field("shape", &self.shape()).field("items", &self.items).finish()
    }
}

impl Drop for SubFilter {
    fn drop(&mut self) {
        // SAFETY: `array` came from a `Box<[u8]>` of `bytes` bytes (see
        // `from_parts` and `relocate`), freed nowhere else.
        drop(unsafe { self.take_array() });
    }
}

/// `x mod d` for a divisor fixed when the filter is built, as a 64-bit
/// multiply-high, shifts and a multiply (libdivide's branch-free unsigned
/// division, Ridiculous Fish 2011, then `x - q d`): exact for every 64-bit
/// `x` and every divisor from 2 on, and held in 9 bytes, where the
/// 128-bit reciprocal of Lemire's direct remainder takes 16.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remainder {
    pub magic: u64,
    pub shift: u8,
}

impl Remainder {
    /// The multiplier and shift for `divisor` (at least 2).
    pub fn new(divisor: u64) -> Remainder {
        assert!(divisor >= 2, "a remainder by {divisor}");
        let log = 63 - divisor.leading_zeros();
        if divisor.is_power_of_two() {
            return Remainder { magic: 0, shift: (log - 1) as u8 };
        }
        // 2^(64 + log) / divisor, below 2^64 as divisor > 2^log; doubled,
        // its 65th bit is the one `reduce`'s halving add supplies.
        let wide = 1u128 << (64 + log);
        let (proposed, rem) = ((wide / u128::from(divisor)) as u64, (wide % u128::from(divisor)) as u64);
        let mut magic = proposed.wrapping_add(proposed);
        let twice_rem = rem.wrapping_add(rem);
        if twice_rem >= divisor || twice_rem < rem {
            magic = magic.wrapping_add(1);
        }
        Remainder { magic: magic.wrapping_add(1), shift: log as u8 }
    }

    /// `x % divisor`, for the divisor this was made for.
    #[inline(always)]
    pub fn reduce(self, x: u64, divisor: u64) -> u64 {
        let high = ((u128::from(self.magic) * u128::from(x)) >> 64) as u64;
        let quotient = (((x - high) >> 1) + high) >> self.shift;
        x - quotient * divisor
    }
}

/// How an item's probes become bit positions, chosen once per call so that
/// the probe loops are compiled once per way.
#[derive(Clone, Copy)]
enum Reduce {
    /// A power of two: the low `n2` bits.
    Mask(u64),
    /// `bytes x 8` ([`Remainder`]).
    Fast(Remainder, u64),
    /// A loaded filter's own bit count.
    Plain(u64),
}

impl Reduce {
    #[inline(always)]
    fn bit(self, x: u64) -> u64 {
        match self {
            Reduce::Mask(mask) => x & mask,
            Reduce::Fast(r, divisor) => r.reduce(x, divisor),
            Reduce::Plain(divisor) => x % divisor,
        }
    }
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
        let odd = shape.bits != available;
        let (magic, shift) = match (shape.n2, odd) {
            (0, false) => {
                let r = Remainder::new(available);
                (r.magic, r.shift)
            }
            (_, true) => (shape.bits, 0),
            _ => (0, 0),
        };
        let array = NonNull::new(Box::into_raw(bits).cast::<u8>()).expect("a box is never null");
        Ok(SubFilter {
            capacity: shape.capacity,
            error: shape.error,
            bpe: shape.bpe,
            bytes: shape.bytes,
            items,
            array,
            magic,
            hashes: shape.hashes,
            n2: shape.n2,
            shift,
            odd,
        })
    }

    /// The parameters (RedisBloom's `struct bloom` without its array).
    #[inline]
    pub fn shape(&self) -> Shape {
        Shape {
            capacity: self.capacity,
            error: self.error,
            bpe: self.bpe,
            hashes: self.hashes,
            bits: if self.odd { self.magic } else { self.bytes * 8 },
            bytes: self.bytes,
            n2: self.n2,
        }
    }

    /// Items the sub-filter is meant to hold.
    #[inline]
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    #[inline(always)]
    fn reduce(&self) -> Reduce {
        if self.n2 > 0 {
            // n2 <= 63 (checked by `from_parts`).
            Reduce::Mask((1u64 << self.n2) - 1)
        } else if self.odd {
            Reduce::Plain(self.magic)
        } else {
            Reduce::Fast(Remainder { magic: self.magic, shift: self.shift }, self.bytes * 8)
        }
    }

    /// True when every bit of the item is set.
    #[inline]
    pub fn contains(&self, h: HashPair) -> bool {
        let (r, bits) = (self.reduce(), self.bytes());
        let mut x = h.a;
        for _ in 0..self.hashes {
            let bit = r.bit(x);
            // In bounds: `from_parts` checked the modulus against the length.
            if bits[(bit >> 3) as usize] & (1 << (bit & 7)) == 0 {
                return false;
            }
            x = x.wrapping_add(h.b);
        }
        true
    }

    /// Sets the item's bits; true when at least one was newly set.
    #[inline]
    pub fn insert(&mut self, h: HashPair) -> bool {
        let (r, hashes) = (self.reduce(), self.hashes);
        let bits = self.bytes_mut();
        let mut x = h.a;
        let mut newly_set = false;
        for _ in 0..hashes {
            let bit = r.bit(x);
            let byte = &mut bits[(bit >> 3) as usize];
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
        let r = self.reduce();
        let mut x = h.a;
        for _ in 0..self.hashes.min(probes) {
            let bit = r.bit(x);
            prefetch_byte(self.array.as_ptr().wrapping_add((bit >> 3) as usize));
            x = x.wrapping_add(h.b);
        }
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `array` holds `bytes` initialised bytes, owned by `self`.
        unsafe { std::slice::from_raw_parts(self.array.as_ptr(), self.bytes as usize) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.array.as_ptr(), self.bytes as usize) }
    }

    /// The array as the box it was made from, which the caller now owns.
    ///
    /// # Safety
    /// `array` must not be used again unless replaced.
    unsafe fn take_array(&mut self) -> Box<[u8]> {
        // SAFETY: the caller's guarantee; `array` came from a box of `bytes` bytes.
        unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.array.as_ptr(), self.bytes as usize)) }
    }

    /// Offers the bit array to `to` (active defragmentation).
    pub(super) fn relocate(&mut self, to: &mut impl Relocate) {
        // SAFETY: the box goes back into `array` below (ManuallyDrop: should
        // `to` panic, the array is neither freed here nor lost).
        let mut array = ManuallyDrop::new(unsafe { self.take_array() });
        to.bytes(&mut array);
        self.array = NonNull::new(array.as_mut_ptr()).expect("a box is never null");
    }

    /// The heap block it owns: its bit array.
    pub fn heap_block(&self) -> (*const u8, usize) {
        (self.array.as_ptr(), self.bytes as usize)
    }

    /// Counts set bits, for fill and estimated false-positive rate.
    pub fn bits_set(&self) -> u64 {
        self.bytes().iter().map(|b| u64::from(b.count_ones())).sum()
    }

    pub fn try_clone(&self) -> Result<SubFilter, BfError> {
        let mut bits = zeroed_bytes(self.bytes)?;
        bits.copy_from_slice(self.bytes());
        SubFilter::from_parts(self.shape(), self.items, bits)
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn remainder_matches_division(x: u64, d in 2u64..) {
            prop_assert_eq!(Remainder::new(d).reduce(x, d), x % d);
        }

        #[test]
        fn remainder_matches_division_small(x: u64, d in 2u64..100_000) {
            prop_assert_eq!(Remainder::new(d).reduce(x, d), x % d);
        }
    }

    #[test]
    fn remainder_edges() {
        for d in [2, 3, 7, 64, 1152, 1103 * 8, u64::MAX, u64::MAX - 1, 1 << 63, (1 << 63) + 1, (1 << 32) + 1]
        {
            let r = Remainder::new(d);
            for x in [0, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1, d.wrapping_mul(3)] {
                assert_eq!(r.reduce(x, d), x % d, "x={x} d={d}");
            }
        }
    }

    /// A loaded filter whose bit count is not its bytes x 8 keeps it, and
    /// probes below it.
    #[test]
    fn odd_bit_counts_are_kept() {
        let shape = Shape { capacity: 10, error: 0.01, bpe: 9.6, hashes: 7, bits: 77, bytes: 16, n2: 0 };
        let mut f = SubFilter::from_parts(shape, 0, vec![0u8; 16].into_boxed_slice()).unwrap();
        assert_eq!(f.shape(), shape);
        for i in 0..1000u64 {
            f.insert(HashPair { a: i.wrapping_mul(0x9e37_79b9_7f4a_7c15), b: i | 1 });
        }
        assert!(f.bytes()[10..].iter().all(|&b| b == 0), "a bit at or past 77 was set");
        assert!(f.contains(HashPair { a: 5u64.wrapping_mul(0x9e37_79b9_7f4a_7c15), b: 5 }));
    }
}
