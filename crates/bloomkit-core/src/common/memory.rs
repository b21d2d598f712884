//! Memory every family allocates the same way: zeroed arrays that report
//! failure instead of aborting the server, the size limit every new or
//! growing value is checked against before anything is allocated, the
//! fast modulo their probes reduce by, and the hook through which a server's
//! active defragmentation moves a value's buffers ([`Relocate`]).
//!
//! The errors here are small values of their own: each family turns them
//! into its own error, with its own words for the reply.

use std::borrow::Cow;

use crate::common::reply::{Reply, ReplyError};

/// An allocation failed (or its size does not fit this machine's address space).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory;

impl ReplyError for OutOfMemory {
    fn reply(&self) -> Reply {
        Reply::Error(Cow::Borrowed("ERR out of memory while allocating the filter; nothing was changed"))
    }
}

/// A value would take `bytes`, more than the `limit` it was checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitExceeded {
    pub bytes: u64,
    pub limit: u64,
    /// Which limit: the filter's own, or the server's memory.
    pub bound: Bound,
}

/// Which of [`Limits`]' two bounds a value would pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// `bf.max-filter-bytes`: `bytes` is the filter's whole size.
    Filter,
    /// The server's `maxmemory`: `bytes` is what the operation would add,
    /// `limit` what the server may still allocate.
    Memory,
}

/// What one command may allocate: a filter's size is bounded by
/// `bf.max-filter-bytes`, and what a creation or scale-out adds by the memory
/// the server has left under `maxmemory`. Both are `None` when a replicated
/// or loading client replays what the primary already accepted.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_bytes: Option<u64>,
    /// Where the server enforces `maxmemory`: how to ask it what it has
    /// left (`maxmemory - used_memory`). Asked only when something is about
    /// to be allocated, so that the adds that allocate nothing never ask.
    pub headroom: Option<fn() -> u64>,
}

impl Limits {
    pub const NONE: Limits = Limits { max_bytes: None, headroom: None };

    /// A filter's size bounded by `max_bytes`, memory unbounded.
    pub const fn at_most(max_bytes: u64) -> Limits {
        Limits { max_bytes: Some(max_bytes), headroom: None }
    }

    /// `Err` when a new value of `bytes` would pass a bound.
    pub fn check(&self, bytes: u64) -> Result<(), LimitExceeded> {
        self.check_growth(0, bytes)
    }

    /// `Err` when a value growing from `before` to `after` bytes would pass
    /// a bound: `after` against the filter's, the growth against the memory's.
    pub fn check_growth(&self, before: u64, after: u64) -> Result<(), LimitExceeded> {
        if let Some(limit) = self.max_bytes {
            if after > limit {
                return Err(LimitExceeded { bytes: after, limit, bound: Bound::Filter });
            }
        }
        let added = after.saturating_sub(before);
        match self.headroom.map(|left| left()) {
            Some(limit) if added > limit => Err(LimitExceeded { bytes: added, limit, bound: Bound::Memory }),
            _ => Ok(()),
        }
    }
}

/// Zeroed memory that reports failure instead of aborting the process.
pub fn zeroed_bytes(len: u64) -> Result<Box<[u8]>, OutOfMemory> {
    let len = usize::try_from(len).map_err(|_| OutOfMemory)?;
    if len == 0 {
        return Ok(Box::new([]));
    }
    let layout = std::alloc::Layout::array::<u8>(len).map_err(|_| OutOfMemory)?;
    // SAFETY: layout has a non-zero size; a null result is handled; the
    // pointer and length describe exactly the block just allocated, which
    // `Box<[u8]>` frees with the same layout.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout);
        if ptr.is_null() {
            return Err(OutOfMemory);
        }
        Ok(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)))
    }
}

/// The heap blocks a value owns (not the value itself, which its owner
/// allocated), so that the memory it takes can be counted exactly: the
/// module asks the server's allocator what each block really takes (size
/// classes round every request up), which is what `used_memory` grows by.
/// Every block the value frees when dropped is given, once, as its address
/// and the size it was allocated with; a count that misses one lets the
/// server's figures drift from the truth. A value that counts its blocks
/// itself at the allocator's sizes (XF) gives their total once, with a null
/// address.
pub trait HeapBlocks {
    fn heap_blocks(&self, each: &mut dyn FnMut(*const u8, usize));

    /// The bytes the blocks were asked for (a count without the allocator).
    fn heap_requested(&self) -> u64 {
        let mut n = 0u64;
        self.heap_blocks(&mut |_, size| n += size as u64);
        n
    }
}

/// A vector's block, if it has one (its capacity, not its length).
pub fn vec_block<T>(v: &Vec<T>, each: &mut dyn FnMut(*const u8, usize)) {
    let size = v.capacity() * std::mem::size_of::<T>();
    if size > 0 {
        each(v.as_ptr().cast(), size);
    }
}

/// A boxed slice's block, if it has one.
pub fn slice_block<T>(v: &[T], each: &mut dyn FnMut(*const u8, usize)) {
    let size = std::mem::size_of_val(v);
    if size > 0 {
        each(v.as_ptr().cast(), size);
    }
}

/// Moves heap buffers to new addresses with their contents unchanged, as a
/// server's active defragmentation does. Each family's value offers it the
/// buffers it owns, one at a time (`relocate` on `Chain`, `CuckooFilter`,
/// `Apbf` and valkey-bloom's `Object`), so that their fields stay private.
///
/// The contract: an implementation may replace the buffer it is offered by
/// one of the same length, capacity and contents (the same bytes at another
/// address), or leave it as it is. Anything else breaks the value.
pub trait Relocate {
    /// Offers a byte array (a bit array, a bucket array).
    fn bytes(&mut self, buffer: &mut Box<[u8]>);
    /// Offers a vector's buffer (a list of sub-filters, an array).
    fn vec<T>(&mut self, buffer: &mut Vec<T>);
    /// Offers a word array (an expandable filter's block). Left where it
    /// is unless the implementation moves word arrays.
    fn words(&mut self, _buffer: &mut Box<[u64]>) {}
    /// Offers a boxed slice's buffer (a list of sub-filters), as a vector
    /// whose capacity is its length.
    fn slice<T>(&mut self, buffer: &mut Box<[T]>) {
        let mut v = std::mem::take(buffer).into_vec();
        self.vec(&mut v);
        *buffer = v.into_boxed_slice();
    }
    /// True when the caller's time is up: the walk stops before the next buffer.
    fn should_stop(&mut self) -> bool;
}

/// A list of sub-filters as a value keeps it: a vector, or a boxed slice
/// (no spare capacity, one word less).
pub trait List<T> {
    fn offer(&mut self, to: &mut impl Relocate);
    fn items(&mut self) -> &mut [T];
}

impl<T> List<T> for Vec<T> {
    fn offer(&mut self, to: &mut impl Relocate) {
        to.vec(self);
    }
    fn items(&mut self) -> &mut [T] {
        self
    }
}

impl<T> List<T> for Box<[T]> {
    fn offer(&mut self, to: &mut impl Relocate) {
        to.slice(self);
    }
    fn items(&mut self) -> &mut [T] {
        self
    }
}

/// The walk every value with a list of sub-filters makes: the list's own
/// buffer is buffer 0, sub-filter `i`'s buffers are buffer `i + 1` (offered
/// by `each`). Offers them from buffer `from` on and returns `Some(next)`
/// when `to.should_stop()` cut the walk short (at least one buffer is
/// offered per call, so that a resumed walk always progresses), `None`
/// once all were offered. A walk resumed after the value changed (a
/// sub-filter added, the key replaced) may offer a buffer twice or miss one
/// until the next pass, which is harmless; a `from` past the end offers nothing.
pub fn relocate_list<T, R: Relocate>(
    list: &mut impl List<T>,
    from: usize,
    to: &mut R,
    mut each: impl FnMut(&mut T, &mut R),
) -> Option<usize> {
    let len = list.items().len();
    for next in from..=len {
        if next > from && to.should_stop() {
            return Some(next);
        }
        match next {
            0 => list.offer(to),
            i => each(&mut list.items()[i - 1], to),
        }
    }
    None
}

/// `x mod d` for a divisor fixed when the filter is built.
///
/// Every probe of a RedisBloom filter is a 64-bit modulo by the bit count, and a
/// hardware division costs tens of cycles. Lemire's direct remainder
/// ("Faster Remainder by Direct Computation", 2019) with a 128-bit reciprocal is
/// exact for every 64-bit numerator and divisor, and costs three multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modulus {
    divisor: u64,
    reciprocal: u128,
    /// `divisor - 1` when the divisor is a power of two: a mask then suffices.
    mask: Option<u64>,
}

impl Modulus {
    pub fn new(divisor: u64) -> Modulus {
        assert!(divisor > 0, "modulus of zero");
        let mask = divisor.is_power_of_two().then(|| divisor - 1);
        Modulus { divisor, reciprocal: (u128::MAX / u128::from(divisor)).wrapping_add(1), mask }
    }

    #[inline(always)]
    pub fn reduce(&self, x: u64) -> u64 {
        if let Some(mask) = self.mask {
            return x & mask;
        }
        let low = self.reciprocal.wrapping_mul(u128::from(x));
        // High 64 bits of the 192-bit product `low * divisor`.
        let d = u128::from(self.divisor);
        let bottom = ((low & u128::from(u64::MAX)) * d) >> 64;
        let top = (low >> 64) * d;
        ((bottom + top) >> 64) as u64
    }
}

/// A [`Relocate`] for the families' tests: copies every buffer it is
/// offered to a new allocation (as a server's defragmentation would, so
/// that a value still reading an old address would fail under Miri or a
/// sanitizer), records the old addresses, and stops after `budget`
/// buffers per call.
#[cfg(test)]
pub(crate) struct TestMover {
    pub budget: usize,
    pub offered_this_call: usize,
    /// Address of each buffer offered, before it moved.
    pub moved_from: Vec<usize>,
}

#[cfg(test)]
impl TestMover {
    pub fn new(budget: usize) -> TestMover {
        TestMover { budget, offered_this_call: 0, moved_from: Vec::new() }
    }

    /// Runs `walk` (a value's `relocate`) to the end, one call per budget,
    /// and gives the number of calls.
    pub fn run(&mut self, mut walk: impl FnMut(usize, &mut TestMover) -> Option<usize>) -> usize {
        let mut calls = 1;
        self.offered_this_call = 0;
        let mut next = walk(0, self);
        while let Some(from) = next {
            calls += 1;
            self.offered_this_call = 0;
            next = walk(from, self);
        }
        calls
    }
}

#[cfg(test)]
impl Relocate for TestMover {
    fn bytes(&mut self, buffer: &mut Box<[u8]>) {
        self.offered_this_call += 1;
        self.moved_from.push(buffer.as_ptr() as usize);
        *buffer = buffer.to_vec().into_boxed_slice();
    }

    fn vec<T>(&mut self, buffer: &mut Vec<T>) {
        self.offered_this_call += 1;
        self.moved_from.push(buffer.as_ptr() as usize);
        let mut moved = Vec::with_capacity(buffer.capacity());
        moved.append(buffer);
        *buffer = moved;
    }

    fn should_stop(&mut self) -> bool {
        self.offered_this_call >= self.budget
    }
}

/// The bytes the allocator hands out for a request of `bytes` (jemalloc's
/// size classes: 8, 16, then multiples of 16 to 128, then four classes per
/// doubling). Blocks are sized to whole classes, so their room is what the
/// allocator would round to anyway, and the bytes counted are the bytes held.
pub fn alloc_class(bytes: u64) -> u64 {
    if bytes <= 8 {
        return 8;
    }
    if bytes <= 128 {
        return bytes.div_ceil(16) * 16;
    }
    let lg = 63 - (bytes - 1).leading_zeros(); // 2^lg < bytes <= 2^(lg+1)
    let step = 1u64 << (lg - 2);
    bytes.div_ceil(step) * step
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn modulus_matches_division(x: u64, d in 1u64..) {
            prop_assert_eq!(Modulus::new(d).reduce(x), x % d);
        }

        #[test]
        fn modulus_matches_division_small(x: u64, d in 1u64..100_000) {
            prop_assert_eq!(Modulus::new(d).reduce(x), x % d);
        }
    }

    #[test]
    fn modulus_edges() {
        for d in [1, 2, 3, 7, 64, 1152, u64::MAX, u64::MAX - 1, 1 << 63] {
            let m = Modulus::new(d);
            for x in [0, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1] {
                assert_eq!(m.reduce(x), x % d, "x={x} d={d}");
            }
        }
    }

    #[test]
    fn limits_refuse_only_what_passes_them() {
        let limits = Limits::at_most(100);
        assert_eq!(limits.check(100), Ok(()));
        assert_eq!(limits.check(101), Err(LimitExceeded { bytes: 101, limit: 100, bound: Bound::Filter }));
        assert_eq!(Limits::NONE.check(u64::MAX), Ok(()));
        // The memory bound counts what is added, the filter's what there is.
        let tight = Limits { max_bytes: Some(1000), headroom: Some(|| 50) };
        assert_eq!(tight.check_growth(900, 950), Ok(()));
        assert_eq!(
            tight.check_growth(900, 951),
            Err(LimitExceeded { bytes: 51, limit: 50, bound: Bound::Memory })
        );
        assert_eq!(tight.check_growth(0, 1001).unwrap_err().bound, Bound::Filter);
    }
}
