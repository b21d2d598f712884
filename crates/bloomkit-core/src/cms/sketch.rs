//! The Count-Min Sketch: `depth` rows of `width` 32-bit counters, row-major.
//! Row `i` hashes an item with MurmurHash2 seeded by `i`; the item's cell in
//! that row is the hash modulo the width.

use super::args::Dimensions;
use super::errors::CmsError;
use crate::common::hash::murmur2_32;
use crate::common::memory::{Limits, Relocate};

/// Bytes bloomkit counts for a sketch besides its counters (`MEMORY USAGE`):
/// RedisBloom 8.6's figure, its struct's size.
pub const OVERHEAD: u64 = 32;

#[derive(Debug, PartialEq, Eq)]
pub struct CountMinSketch {
    width: u64,
    depth: u64,
    /// Sum of every increment, wrapping at 2^64 as RedisBloom's `size_t`.
    counter: u64,
    counters: Vec<u32>,
}

/// The bytes of a `width x depth` counter array, or `None` past 2^64.
pub fn array_bytes(width: u64, depth: u64) -> Option<u64> {
    width.checked_mul(depth)?.checked_mul(4)
}

/// `cells` zeroed counters, allocated only if the memory is there (zeroed
/// by the allocator, so that untouched pages stay untouched where it can).
fn zeroed(cells: u64) -> Result<Vec<u32>, CmsError> {
    let cells = usize::try_from(cells).map_err(|_| CmsError::InsufficientMemory)?;
    if cells == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u32>(cells).map_err(|_| CmsError::InsufficientMemory)?;
    // SAFETY: the layout has a non-zero size; a null result is handled; the
    // block holds `cells` zeroed u32 (all-zero is a valid u32) with exactly
    // that capacity, allocated by the global allocator with u32's layout,
    // as `Vec<u32>` frees it.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<u32>();
        if ptr.is_null() {
            return Err(CmsError::InsufficientMemory);
        }
        Ok(Vec::from_raw_parts(ptr, cells, cells))
    }
}

/// A source of `CMS.MERGE`: the destination itself (which may be listed
/// among its sources, its old counts then used), or another sketch.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    Destination,
    Other(&'a CountMinSketch),
}

impl CountMinSketch {
    /// An all-zero sketch; its size is compared with `limits` before any
    /// allocation.
    pub fn new(dims: Dimensions, limits: Limits) -> Result<CountMinSketch, CmsError> {
        let Dimensions { width, depth } = dims;
        if width == 0 || depth == 0 {
            return Err(CmsError::InvalidInitArguments);
        }
        let bytes = array_bytes(width, depth).ok_or(CmsError::InsufficientMemory)?;
        limits.check(bytes.saturating_add(OVERHEAD))?;
        Ok(CountMinSketch { width, depth, counter: 0, counters: zeroed(width * depth)? })
    }

    /// A sketch from its parts, checked: what RDB loading builds.
    pub(super) fn from_parts(
        width: u64,
        depth: u64,
        counter: u64,
        counters: Vec<u32>,
    ) -> Result<CountMinSketch, CmsError> {
        match width.checked_mul(depth) {
            Some(cells) if width > 0 && cells as u128 == counters.len() as u128 => {
                Ok(CountMinSketch { width, depth, counter, counters })
            }
            _ => Err(CmsError::BadData),
        }
    }

    pub fn width(&self) -> u64 {
        self.width
    }

    pub fn depth(&self) -> u64 {
        self.depth
    }

    /// The total of every increment (wraps at 2^64).
    pub fn count(&self) -> u64 {
        self.counter
    }

    pub fn counters(&self) -> &[u32] {
        &self.counters
    }

    /// The item's cell in `row`: RedisBloom passes the row number as the
    /// 32-bit seed.
    #[inline]
    fn cell(&self, item: &[u8], row: u64) -> usize {
        let column = u64::from(murmur2_32(item, row as u32)) % self.width;
        (row * self.width + column) as usize
    }

    /// `CMS.INCRBY`'s step for one item: each of its cells grows by
    /// `by` modulo 2^32 and saturates at 4294967295 when that wrapped
    /// (`new < by`), the total grows by `by`. Returns the item's new
    /// estimate, 4294967295 meaning "overflow" in the reply.
    pub fn increment(&mut self, item: &[u8], by: u64) -> u32 {
        let mut min = u32::MAX;
        for row in 0..self.depth {
            let at = self.cell(item, row);
            let cell = &mut self.counters[at];
            let new = cell.wrapping_add(by as u32);
            *cell = if u64::from(new) < by { u32::MAX } else { new };
            min = min.min(*cell);
        }
        self.counter = self.counter.wrapping_add(by);
        min
    }

    /// The item's estimate: the smallest of its cells.
    pub fn query(&self, item: &[u8]) -> u32 {
        (0..self.depth).map(|row| self.counters[self.cell(item, row)]).min().unwrap_or(u32::MAX)
    }

    /// True when `other` has this sketch's width and depth.
    pub fn same_dimensions(&self, other: &CountMinSketch) -> bool {
        self.width == other.width && self.depth == other.depth
    }

    /// `CMS.MERGE`: every cell becomes the weighted sum of the sources'
    /// cells, the total the weighted sum of their totals (the destination's
    /// old values count only when it is listed). All sources must have the
    /// destination's dimensions. Nothing changes when a cell's sum
    /// overflows 64 signed bits or leaves [0, 4294967295], or the totals'
    /// sum overflows or is negative: RedisBloom's pre-pass, in its order.
    pub fn merge(&mut self, sources: &[(Source<'_>, i64)]) -> Result<(), CmsError> {
        for (s, _) in sources {
            if let Source::Other(o) = s {
                if !self.same_dimensions(o) {
                    return Err(CmsError::DimensionsDiffer);
                }
            }
        }
        for (at, &own) in self.counters.iter().enumerate() {
            weighted_cell(own, sources, at).ok_or(CmsError::MergeOverflow)?;
        }
        let mut total = 0i64;
        for (s, w) in sources {
            let counter = match s {
                Source::Destination => self.counter,
                Source::Other(o) => o.counter,
            };
            let product = i64::try_from(i128::from(counter) * i128::from(*w)).ok();
            total = product.and_then(|p| total.checked_add(p)).ok_or(CmsError::MergeOverflow)?;
        }
        if total < 0 {
            return Err(CmsError::MergeOverflow);
        }
        // Each cell depends only on the same cell of the sources, so the
        // destination can be rewritten in place, cell by cell.
        for at in 0..self.counters.len() {
            self.counters[at] =
                weighted_cell(self.counters[at], sources, at).expect("checked by the pre-pass");
        }
        self.counter = total as u64;
        Ok(())
    }

    /// Bytes `MEMORY USAGE` reports: the counters and the struct, as
    /// RedisBloom 8.6 counts them (2.8.2 reported twice the array).
    pub fn size_bytes(&self) -> u64 {
        OVERHEAD + 4 * self.counters.len() as u64
    }

    /// The counters as RedisBloom stores them: u32 little-endian, row-major.
    pub fn counter_bytes(&self) -> Vec<u8> {
        self.counters.iter().flat_map(|c| c.to_le_bytes()).collect()
    }

    /// A deep copy that reports allocation failure (for `COPY`).
    pub fn try_clone(&self) -> Result<CountMinSketch, CmsError> {
        let mut counters = Vec::new();
        counters.try_reserve_exact(self.counters.len()).map_err(|_| CmsError::InsufficientMemory)?;
        counters.extend_from_slice(&self.counters);
        Ok(CountMinSketch { counters, ..*self })
    }

    /// Offers the counter array to active defrag (its one buffer, number 0).
    /// The sketch itself is the caller's to move.
    pub fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize> {
        if from == 0 {
            to.vec(&mut self.counters);
        }
        None
    }
}

/// One cell of a merge: the weighted sum of the sources' cell `at` (`own`
/// for the destination), `None` when a step overflows 64 signed bits or the
/// sum leaves [0, 4294967295].
fn weighted_cell(own: u32, sources: &[(Source<'_>, i64)], at: usize) -> Option<u32> {
    let mut sum = 0i64;
    for (s, w) in sources {
        let cell = match s {
            Source::Destination => own,
            Source::Other(o) => o.counters[at],
        };
        sum = sum.checked_add(i64::from(cell).checked_mul(*w)?)?;
    }
    u32::try_from(sum).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::memory::TestMover;

    fn sketch(width: u64, depth: u64) -> CountMinSketch {
        CountMinSketch::new(Dimensions { width, depth }, Limits::NONE).unwrap()
    }

    #[test]
    fn murmur2_vectors() {
        assert_eq!(murmur2_32(b"", 0), 0);
        assert_eq!(murmur2_32(b"foo", 0), 0x8fea6375);
        assert_eq!(murmur2_32(b"foo", 1), 0x0bcc2e5a);
        assert_eq!(murmur2_32(b"bar", 0), 0x27f6e557);
        assert_eq!(murmur2_32(b"hello world", 0), 0x44a81419);
        assert_eq!(murmur2_32(b"abcd", 7), 0x80c268ee);
    }

    #[test]
    fn increments_like_redisbloom() {
        let mut s = sketch(8, 2);
        assert_eq!(s.increment(b"foo", 3), 3);
        assert_eq!(s.increment(b"bar", 1), 1);
        // The DUMP vector's cells: foo at 5 and 8 + 2, bar at 7 and 8 + 1.
        let mut want = [0u32; 16];
        (want[5], want[7], want[9], want[10]) = (3, 1, 1, 3);
        assert_eq!(s.counters(), &want);
        assert_eq!(s.count(), 4);
        assert_eq!(s.query(b"foo"), 3);
        assert_eq!(s.query(b"nothing"), 0);
        // A repeated item sees its own update.
        let mut s = sketch(1000, 5);
        assert_eq!([s.increment(b"a", 5), s.increment(b"b", 3), s.increment(b"a", 2)], [5, 3, 7]);
    }

    #[test]
    fn increments_saturate() {
        let mut s = sketch(4, 2);
        assert_eq!(s.increment(b"a", u64::from(u32::MAX) - 1), u32::MAX - 1);
        assert_eq!(s.increment(b"a", 1), u32::MAX, "exactly the maximum reads as overflow");
        assert_eq!(s.increment(b"b", 1 << 32), u32::MAX, "any increment of 2^32 saturates");
        let mut s = sketch(4, 2);
        s.increment(b"a", 10);
        assert_eq!(s.increment(b"a", u64::from(u32::MAX)), u32::MAX);
        s.increment(b"x", i64::MAX as u64);
        s.increment(b"x", i64::MAX as u64);
        assert_eq!(
            s.count(),
            (10 + u64::from(u32::MAX)).wrapping_add(2 * (i64::MAX as u64)),
            "wraps at 2^64"
        );
    }

    #[test]
    fn merges_with_weights_and_checks_first() {
        let mut a = sketch(16, 3);
        let mut b = sketch(16, 3);
        a.increment(b"x", 5);
        b.increment(b"x", 2);
        b.increment(b"y", 7);
        let mut d = sketch(16, 3);
        d.increment(b"old", 100);
        d.merge(&[(Source::Other(&a), 1), (Source::Other(&b), 3)]).unwrap();
        assert_eq!((d.query(b"x"), d.query(b"y"), d.query(b"old")), (11, 21, 0));
        assert_eq!(d.count(), 5 + 27);
        // The destination among its sources uses its old counts.
        d.merge(&[(Source::Destination, 2), (Source::Other(&a), -1)]).unwrap();
        assert_eq!(d.query(b"x"), 17);
        assert_eq!(d.count(), 64 - 5);
        // A negative cell, or a negative total, changes nothing.
        let before = d.try_clone().unwrap();
        assert_eq!(d.merge(&[(Source::Other(&a), -1)]), Err(CmsError::MergeOverflow));
        assert_eq!(d.merge(&[(Source::Other(&b), i64::MAX)]), Err(CmsError::MergeOverflow));
        assert_eq!(d, before);
        let small = sketch(8, 3);
        assert_eq!(d.merge(&[(Source::Other(&small), 1)]), Err(CmsError::DimensionsDiffer));
        // Weight 0 empties it.
        d.merge(&[(Source::Destination, 0)]).unwrap();
        assert_eq!((d.count(), d.counters().iter().max()), (0, Some(&0)));
    }

    /// Issue 31, exact self-merge: `CMS.MERGE d 2 d d` repeated doubles
    /// every counter and the total exactly, until a counter would pass
    /// 4294967295 (or the total 2^63 - 1); that merge is refused and
    /// changes nothing, however often it is asked for. Nothing is rounded
    /// or saturated, and the result saves and loads as it is.
    #[test]
    fn self_merges_are_exact_or_refused() {
        let both = [(Source::Destination, 1), (Source::Destination, 1)];
        let mut d = sketch(64, 4);
        d.increment(b"a", 3);
        d.increment(b"b", 1);
        let mut doublings = 0;
        loop {
            let before = d.try_clone().unwrap();
            match d.merge(&both) {
                Ok(()) => {
                    doublings += 1;
                    assert_eq!(d.count(), 2 * before.count());
                    for (x, y) in d.counters().iter().zip(before.counters()) {
                        assert_eq!(u64::from(*x), 2 * u64::from(*y));
                    }
                }
                Err(e) => {
                    assert_eq!(e, CmsError::MergeOverflow);
                    assert_eq!(d, before, "a refused merge changes nothing");
                    break;
                }
            }
        }
        // 3 * 2^30 fits 32 bits, 3 * 2^31 does not.
        assert_eq!((doublings, d.query(b"a"), d.count()), (30, 3 << 30, 4 << 30));
        for _ in 0..5 {
            assert_eq!(d.merge(&both), Err(CmsError::MergeOverflow));
        }
        assert_eq!(d.query(b"a"), 3 << 30);
        // A total that would pass 2^63 - 1 is refused too, counters aside.
        let mut big = sketch(8, 2);
        big.counter = 1 << 62;
        assert_eq!(big.merge(&both), Err(CmsError::MergeOverflow));
        assert_eq!(big.count(), 1 << 62);
        big.counter = (1 << 62) - 1;
        assert_eq!(big.merge(&both), Ok(()));
        assert_eq!(big.count(), (1 << 63) - 2);
        // Weights other than 1 are exact or refused the same way.
        let mut w = sketch(8, 2);
        w.increment(b"x", 7);
        assert_eq!(w.merge(&[(Source::Destination, 3), (Source::Destination, -1)]), Ok(()));
        assert_eq!(w.query(b"x"), 14);
        assert_eq!(
            w.merge(&[(Source::Destination, i64::MAX), (Source::Destination, 1)]),
            Err(CmsError::MergeOverflow)
        );
        assert_eq!(w.query(b"x"), 14);
        let mut fields = crate::common::fields::FieldStream::default();
        d.save(&mut fields);
        let back = CountMinSketch::load(&mut fields, 0, Limits::NONE).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn merge_total_reads_counters_as_unsigned() {
        let mut a = sketch(2, 1);
        a.counter = 1 << 63;
        let mut d = sketch(2, 1);
        // 2^63 * -1 fits i64 but is negative: refused.
        assert_eq!(d.merge(&[(Source::Other(&a), -1)]), Err(CmsError::MergeOverflow));
        // 2^63 * 1 does not fit i64.
        assert_eq!(d.merge(&[(Source::Other(&a), 1)]), Err(CmsError::MergeOverflow));
        a.counter = (1 << 62) + 1;
        let mut b = sketch(2, 1);
        b.counter = 1 << 62;
        assert_eq!(d.merge(&[(Source::Other(&a), 1), (Source::Other(&b), -1)]), Ok(()));
        assert_eq!(d.count(), 1);
    }

    #[test]
    fn limits_are_checked_before_allocating() {
        let d = |width, depth| Dimensions { width, depth };
        assert_eq!(
            CountMinSketch::new(d(1 << 40, 1 << 10), Limits::at_most(1 << 20)),
            Err(CmsError::TooLarge { bytes: (1 << 52) + 32, limit: 1 << 20 })
        );
        assert_eq!(CountMinSketch::new(d(u64::MAX / 2, 3), Limits::NONE), Err(CmsError::InsufficientMemory));
        assert!(CountMinSketch::new(d(1 << 40, 1 << 10), Limits::NONE).is_err());
        assert_eq!(sketch(10, 3).size_bytes(), 152);
    }

    #[test]
    fn relocate_moves_the_counters() {
        let mut s = sketch(100, 4);
        s.increment(b"a", 9);
        let before = s.try_clone().unwrap();
        let mut mover = TestMover::new(1);
        assert_eq!(mover.run(|from, m| s.relocate(from, m)), 1);
        assert_eq!(mover.moved_from.len(), 1);
        assert_eq!(s, before);
    }
}
