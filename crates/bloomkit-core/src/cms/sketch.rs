//! The Count-Min Sketch: `depth` rows of `width` counters, row-major, of
//! 4 bytes (RedisBloom 2.8 and 8.10) or 1, 2, 4 or 8 (Redis 8.12's
//! `CELL_SIZE`). Row `i` hashes an item with MurmurHash2 seeded by `i`; the
//! item's cell in that row is the hash modulo the width.

use super::args::Dimensions;
use super::cells::{each, Cell, CellSize, Cells, CellsMut, CellsRef, RawCells};
use super::errors::CmsError;
#[cfg(test)]
use crate::common::hash::murmur2_32;
use crate::common::hash::{murmur2_32_seeds, Mod32};
use crate::common::memory::{HeapBlocks, Limits, Relocate};

/// Bytes bloomkit counts for a sketch besides its counters (`MEMORY USAGE`):
/// RedisBloom 8.6's figure, its struct's size.
pub const OVERHEAD: u64 = 32;

/// A sketch in 32 bytes, RedisBloom's `CMSketch` (width, depth, the
/// array's pointer, the total), so that with its array it takes no more
/// memory than RedisBloom's: the array behind a bare pointer (its length is
/// `width x depth`), and the width, depth, cell size and the width's
/// reciprocal packed in two words. A sketch whose width passes 32 bits or
/// whose depth passes 24 (at least 16 MB of cells) keeps its shape in a
/// block of its own instead.
pub struct CountMinSketch {
    cells: RawCells,
    /// Sum of every increment: wrapping at 2^64 as RedisBloom 2.8's
    /// `size_t`, or kept within [0, 2^63 - 1] under Redis 8.12's rules.
    counter: u64,
    /// The width's [`Mod32`] reciprocal; for a wide sketch, its [`Wide`] block.
    column: u64,
    /// The width (32 bits, 0 for a wide sketch), the depth (24 bits) and the
    /// cell size (its index in [`CellSize::ALL`]).
    dims: u64,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<CountMinSketch>() == 32);

/// A wide sketch's shape (see [`CountMinSketch`]), in a block of its own.
struct Wide {
    width: u64,
    depth: u64,
    column: Column,
}

impl Drop for CountMinSketch {
    fn drop(&mut self) {
        let (size, n) = (self.cell_size(), self.cells());
        // SAFETY: the block holds `n` cells of `size` and is not used again.
        drop(unsafe { self.cells.take(size, n) });
        if let Some(wide) = self.wide_ptr() {
            // SAFETY: the block `Box::into_raw` made in `from_cells`, freed only here.
            drop(unsafe { Box::from_raw(wide) });
        }
    }
}

impl PartialEq for CountMinSketch {
    fn eq(&self, other: &CountMinSketch) -> bool {
        let (a, b) = (self.view(), other.view());
        self.width() == other.width()
            && self.depth() == other.depth()
            && self.counter == other.counter
            && self.cell_size() == other.cell_size()
            && (0..a.len()).all(|i| a.get(i) == b.get(i))
    }
}

impl Eq for CountMinSketch {}

impl std::fmt::Debug for CountMinSketch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountMinSketch")
            .field("width", &self.width())
            .field("depth", &self.depth())
            .field("counter", &self.counter)
            .field("cell_size", &self.cell_size())
            .finish()
    }
}

/// The array's block, and a wide sketch's shape.
impl HeapBlocks for CountMinSketch {
    fn heap_blocks(&self, each: &mut dyn FnMut(*const u8, usize)) {
        let bytes = self.cells() * self.cell_size().bytes() as usize;
        if bytes > 0 {
            each(self.cells.ptr(), bytes);
        }
        if let Some(wide) = self.wide_ptr() {
            each(wide.cast_const().cast(), std::mem::size_of::<Wide>());
        }
    }
}

/// How a row's 32-bit hash becomes its column, `hash % width`: a direct
/// remainder by a width that fits 32 bits, else the hash itself (which is
/// then always below the width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    Mod(Mod32),
    Whole,
}

impl Column {
    fn of(width: u64) -> Column {
        match u32::try_from(width) {
            Ok(w) => Column::Mod(Mod32::new(w)),
            Err(_) => Column::Whole,
        }
    }
}

/// Rows hashed at once: each item's `depth` hashes are computed in groups
/// of this many interleaved chains ([`murmur2_32_seeds`]).
const LANES: usize = 8;
const _: () = assert!(LANES == 8, "Rows::each has an arm per group size up to 8");

/// Where an item's cells are: a copy of the sketch's shape, so that the
/// row loops can borrow the cells mutably beside it.
#[derive(Clone, Copy)]
struct Rows {
    width: u64,
    depth: u64,
    column: Column,
}

impl Rows {
    /// Calls `f` with the item's cell in each row, row 0 first, while it
    /// returns true. Row `i` hashes the item with MurmurHash2 seeded by `i`
    /// (RedisBloom passes the row number as the 32-bit seed); the cell is
    /// `i * width + hash % width`.
    #[inline(always)]
    fn each(self, item: &[u8], mut f: impl FnMut(usize) -> bool) {
        let mut row = 0u64;
        // One group of `$lanes` rows from `row` on; false when `f` stopped.
        macro_rules! group {
            ($lanes:literal) => {{
                let seeds: [u32; $lanes] = std::array::from_fn(|i| row.wrapping_add(i as u64) as u32);
                let hashes = murmur2_32_seeds(item, seeds);
                let mut go_on = true;
                for (i, &hash) in hashes.iter().enumerate() {
                    let column = match self.column {
                        Column::Mod(m) => u64::from(m.reduce(hash)),
                        Column::Whole => u64::from(hash),
                    };
                    if !f(((row + i as u64) * self.width + column) as usize) {
                        go_on = false;
                        break;
                    }
                }
                go_on
            }};
        }
        while row < self.depth {
            // Exactly as many chains as rows are left (up to LANES): no
            // hash is computed for nothing.
            let n = (self.depth - row).min(LANES as u64);
            let go_on = match n {
                1 => group!(1),
                2 => group!(2),
                3 => group!(3),
                4 => group!(4),
                5 => group!(5),
                6 => group!(6),
                7 => group!(7),
                _ => group!(8),
            };
            if !go_on {
                return;
            }
            row += n;
        }
    }
}

/// [`CountMinSketch::increment`] over cells of one size.
#[inline(always)]
fn increment_in<T: Cell>(cells: &mut [T], rows: Rows, item: &[u8], by: u64) -> u64 {
    let mut min = u64::MAX;
    rows.each(item, |at| {
        let new = cells[at].widen().checked_add(by).filter(|n| *n <= T::MAX).unwrap_or(T::MAX);
        cells[at] = T::narrow(new);
        min = min.min(new);
        true
    });
    min
}

/// [`CountMinSketch::add`]'s cells over cells of one size: every cell
/// changes by `magnitude` (down when `down`), or none does (`None`).
#[inline(always)]
fn add_in<T: Cell>(cells: &mut [T], rows: Rows, item: &[u8], magnitude: u64, down: bool) -> Option<u64> {
    let mut min = u64::MAX;
    let mut done = 0u64;
    let mut refused = false;
    rows.each(item, |at| {
        let cell = cells[at].widen();
        let new = if down { cell.checked_sub(magnitude) } else { cell.checked_add(magnitude) };
        match new.filter(|n| *n <= T::MAX) {
            Some(new) => {
                cells[at] = T::narrow(new);
                min = min.min(new);
                done += 1;
                true
            }
            None => {
                refused = true;
                false
            }
        }
    });
    if !refused {
        return Some(min);
    }
    // Put back the rows already changed (rows never share a cell).
    rows.each(item, |at| {
        if done == 0 {
            return false;
        }
        done -= 1;
        let cell = cells[at].widen();
        cells[at] = T::narrow(if down { cell + magnitude } else { cell - magnitude });
        true
    });
    None
}

/// [`CountMinSketch::query`] over cells of one size.
#[inline(always)]
fn query_in<T: Cell>(cells: &[T], rows: Rows, item: &[u8]) -> u64 {
    let mut min = u64::MAX;
    rows.each(item, |at| {
        min = min.min(cells[at].widen());
        true
    });
    min
}

/// The bytes of a `width x depth` array of `cell` counters, or `None` past 2^64.
pub fn array_bytes_of(width: u64, depth: u64, cell: CellSize) -> Option<u64> {
    width.checked_mul(depth)?.checked_mul(cell.bytes())
}

/// A source of `CMS.MERGE`: the destination itself (which may be listed
/// among its sources, its old counts then used), or another sketch.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    Destination,
    Other(&'a CountMinSketch),
}

impl CountMinSketch {
    /// An all-zero sketch of 4-byte cells; its size is compared with
    /// `limits` before any allocation.
    pub fn new(dims: Dimensions, limits: Limits) -> Result<CountMinSketch, CmsError> {
        CountMinSketch::with_cell_size(dims, CellSize::DEFAULT, limits)
    }

    /// An all-zero sketch of `cell` cells (`CELL_SIZE`); its size is
    /// compared with `limits` before any allocation.
    pub fn with_cell_size(
        dims: Dimensions,
        cell: CellSize,
        limits: Limits,
    ) -> Result<CountMinSketch, CmsError> {
        let Dimensions { width, depth } = dims;
        if width == 0 || depth == 0 {
            return Err(CmsError::InvalidInitArguments);
        }
        let bytes = array_bytes_of(width, depth, cell).ok_or(CmsError::InsufficientMemory)?;
        limits.check(bytes.saturating_add(OVERHEAD))?;
        CountMinSketch::from_cells(width, depth, 0, Cells::zeroed(cell, width * depth)?)
    }

    /// The sketch over `cells` (`width x depth` of them, which the caller checked).
    fn from_cells(width: u64, depth: u64, counter: u64, cells: Cells) -> Result<CountMinSketch, CmsError> {
        let size = cells.size();
        let index = CellSize::ALL.iter().position(|s| *s == size).expect("every size is listed") as u64;
        let (column, dims) = match (u32::try_from(width), depth < 1 << 24) {
            (Ok(w), true) if w > 0 => (Mod32::new(w).reciprocal(), u64::from(w) | depth << 32 | index << 56),
            _ => {
                let wide = Box::new(Wide { width, depth, column: Column::of(width) });
                (Box::into_raw(wide) as u64, index << 56)
            }
        };
        let (cells, _, _) = RawCells::new(cells);
        Ok(CountMinSketch { cells, counter, column, dims })
    }

    /// A sketch from its parts, checked: what RDB loading builds.
    pub(super) fn from_parts(
        width: u64,
        depth: u64,
        counter: u64,
        cells: Cells,
    ) -> Result<CountMinSketch, CmsError> {
        match width.checked_mul(depth) {
            Some(n) if width > 0 && n as u128 == cells.len() as u128 => {
                CountMinSketch::from_cells(width, depth, counter, cells)
            }
            _ => Err(CmsError::BadData),
        }
    }

    /// A wide sketch's shape block (see [`CountMinSketch`]).
    fn wide_ptr(&self) -> Option<*mut Wide> {
        (self.dims & 0xffff_ffff == 0).then_some(self.column as *mut Wide)
    }

    fn wide(&self) -> Option<&Wide> {
        // SAFETY: a wide sketch's `column` is the block `from_cells` made,
        // owned by the sketch and freed only when it is dropped.
        self.wide_ptr().map(|p| unsafe { &*p })
    }

    pub fn width(&self) -> u64 {
        self.wide().map_or(self.dims & 0xffff_ffff, |w| w.width)
    }

    pub fn depth(&self) -> u64 {
        self.wide().map_or(self.dims >> 32 & 0xff_ffff, |w| w.depth)
    }

    /// Bytes per counter.
    pub fn cell_size(&self) -> CellSize {
        CellSize::ALL[(self.dims >> 56) as usize]
    }

    fn view(&self) -> CellsRef<'_> {
        // SAFETY: the block holds `cells()` cells of `cell_size()` (`from_cells`).
        unsafe { self.cells.view(self.cell_size(), self.cells()) }
    }

    fn view_mut(&mut self) -> CellsMut<'_> {
        let (size, n) = (self.cell_size(), self.cells());
        // SAFETY: as in `view`.
        unsafe { self.cells.view_mut(size, n) }
    }

    /// The total of every increment.
    pub fn count(&self) -> u64 {
        self.counter
    }

    /// Counter `at` (row-major), for inspection; `None` past the end.
    pub fn cell(&self, at: usize) -> Option<u64> {
        (at < self.cells()).then(|| self.view().get(at))
    }

    /// How many counters (`width * depth`).
    pub fn cells(&self) -> usize {
        (self.width() * self.depth()) as usize
    }

    #[inline]
    fn rows(&self) -> Rows {
        match self.wide() {
            None => {
                let width = (self.dims & 0xffff_ffff) as u32;
                let column = Column::Mod(Mod32::from_parts(width, self.column));
                Rows { width: u64::from(width), depth: self.dims >> 32 & 0xff_ffff, column }
            }
            Some(w) => Rows { width: w.width, depth: w.depth, column: w.column },
        }
    }

    /// The item's cell in `row`, one hash at a time: the reference the row
    /// loops are tested against.
    #[cfg(test)]
    fn locate(&self, item: &[u8], row: u64) -> usize {
        let column = u64::from(murmur2_32(item, row as u32)) % self.width();
        (row * self.width() + column) as usize
    }

    /// `CMS.INCRBY`'s step for one item under RedisBloom 2.8's rules (the
    /// levels before 8.12): each of its cells grows by `by` and saturates
    /// at the cell's maximum when it would pass it (for 4-byte cells, 2.8's
    /// "wrapped modulo 2^32 to less than `by`"), the total grows by `by`
    /// modulo 2^64. Returns the item's new estimate; the cell maximum means
    /// "overflow" in the reply.
    pub fn increment(&mut self, item: &[u8], by: u64) -> u64 {
        let rows = self.rows();
        let min = each!(CellsMut, self.view_mut(), v => increment_in(v, rows, item, by));
        self.counter = self.counter.wrapping_add(by);
        min
    }

    /// `CMS.INCRBY`'s step for one item under Redis 8.12's rules: every
    /// cell of the item changes by `by` (which may be negative), or none
    /// does. Refused with `IncrbyOverflow` when the total would pass
    /// 2^63 - 1 or a cell its maximum, `IncrbyUnderflow` when the total or
    /// a cell would go below 0; a refused step changes nothing. Returns the
    /// item's new estimate.
    pub fn add(&mut self, item: &[u8], by: i64) -> Result<u64, CmsError> {
        let magnitude = by.unsigned_abs();
        let room = (i64::MAX as u64).saturating_sub(self.counter);
        if by > 0 && magnitude > room {
            return Err(CmsError::IncrbyOverflow);
        }
        if by < 0 && magnitude > self.counter {
            return Err(CmsError::IncrbyUnderflow);
        }
        let rows = self.rows();
        let down = by < 0;
        let refused = if down { CmsError::IncrbyUnderflow } else { CmsError::IncrbyOverflow };
        let min =
            each!(CellsMut, self.view_mut(), v => add_in(v, rows, item, magnitude, down)).ok_or(refused)?;
        self.counter = if down { self.counter - magnitude } else { self.counter + magnitude };
        Ok(min)
    }

    /// The item's estimate: the smallest of its cells.
    pub fn query(&self, item: &[u8]) -> u64 {
        let rows = self.rows();
        each!(CellsRef, self.view(), v => query_in(v, rows, item))
    }

    /// True when `other` has this sketch's width and depth.
    pub fn same_dimensions(&self, other: &CountMinSketch) -> bool {
        self.width() == other.width() && self.depth() == other.depth()
    }

    /// `CMS.MERGE`: every cell becomes the weighted sum of the sources'
    /// cells, the total the weighted sum of their totals (the destination's
    /// old values count only when it is listed). All sources must have the
    /// destination's dimensions and cell size. Nothing changes when a
    /// cell's sum overflows 64 signed bits or leaves [0, cell maximum], or
    /// the totals' sum overflows or is negative: RedisBloom's pre-pass, in
    /// its order.
    pub fn merge(&mut self, sources: &[(Source<'_>, i64)]) -> Result<(), CmsError> {
        for (s, _) in sources {
            if let Source::Other(o) = s {
                if !self.same_dimensions(o) {
                    return Err(CmsError::DimensionsDiffer);
                }
                if self.cell_size() != o.cell_size() {
                    return Err(CmsError::CellSizeDiffers);
                }
            }
        }
        let max = self.cell_size().max();
        for at in 0..self.cells() {
            weighted_cell(self.view(), sources, at, max).ok_or(CmsError::MergeOverflow)?;
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
        for at in 0..self.cells() {
            let sum = weighted_cell(self.view(), sources, at, max).expect("checked by the pre-pass");
            self.view_mut().set(at, sum);
        }
        self.counter = total as u64;
        Ok(())
    }

    /// Bytes `MEMORY USAGE` reports: the counters and the struct, as
    /// RedisBloom 8.6 counts them (2.8.2 reported twice the array).
    pub fn size_bytes(&self) -> u64 {
        OVERHEAD + self.cell_size().bytes() * self.cells() as u64
    }

    /// The counters as RedisBloom stores them: little-endian, row-major.
    pub fn counter_bytes(&self) -> Vec<u8> {
        self.view().le_bytes()
    }

    /// A deep copy that reports allocation failure (for `COPY`).
    pub fn try_clone(&self) -> Result<CountMinSketch, CmsError> {
        CountMinSketch::from_cells(self.width(), self.depth(), self.counter, self.view().to_cells()?)
    }

    /// The same sketch in 4-byte cells, as the levels before Redis 8.12
    /// hold every sketch: narrower cells widened exactly, an 8-byte cell
    /// above 4294967295 saturated there (2.8's "at least this much").
    pub fn into_four_byte_cells(self) -> Result<CountMinSketch, CmsError> {
        if self.cell_size() == CellSize::Four {
            return Ok(self);
        }
        CountMinSketch::from_cells(self.width(), self.depth(), self.counter, self.view().to_four()?)
    }

    /// Offers the counter array to active defrag (its one buffer, number 0).
    /// The sketch itself is the caller's to move.
    pub fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize> {
        if from == 0 {
            let (size, n) = (self.cell_size(), self.cells());
            // SAFETY: the block holds `n` cells of `size` (`from_cells`).
            unsafe { self.cells.relocate(size, n, to) };
        }
        None
    }
}

/// One cell of a merge: the weighted sum of the sources' cell `at` (`own`
/// for the destination), `None` when a step overflows 64 signed bits or the
/// sum leaves [0, max].
fn weighted_cell(own: CellsRef<'_>, sources: &[(Source<'_>, i64)], at: usize, max: u64) -> Option<u64> {
    let mut sum = 0i64;
    for (s, w) in sources {
        let cell = match s {
            Source::Destination => own.get(at),
            Source::Other(o) => o.view().get(at),
        };
        sum = sum.checked_add(i64::try_from(cell).ok()?.checked_mul(*w)?)?;
    }
    u64::try_from(sum).ok().filter(|s| *s <= max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cms::CellSize;
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

    /// The row loop's cells are the ones hashed one row at a time, for
    /// every width (a power of two, 1, past 32 bits) and depth (a group of
    /// rows and its remainder).
    #[test]
    fn rows_find_the_cells_of_one_hash_at_a_time() {
        for (width, depth) in
            [(1, 1), (7, 5), (2719, 5), (1000, 8), (3, 9), (100, 17), (1 << 12, 3), (65537, 2)]
        {
            let s = sketch(width, depth);
            for i in 0..300usize {
                let item = format!("it{i}:").repeat(i % 9);
                let mut got = Vec::new();
                s.rows().each(item.as_bytes(), |at| {
                    got.push(at);
                    true
                });
                let want: Vec<usize> = (0..depth).map(|row| s.locate(item.as_bytes(), row)).collect();
                assert_eq!(got, want, "{width}x{depth} {item:?}");
            }
        }
        // A width past 32 bits: the hash is its own column.
        let width = (1u64 << 33) + 5;
        let rows = Rows { width, depth: 3, column: Column::of(width) };
        let mut got = Vec::new();
        rows.each(b"wide", |at| {
            got.push(at as u64);
            true
        });
        let want: Vec<u64> =
            (0..3).map(|row| row * width + u64::from(murmur2_32(b"wide", row as u32))).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn increments_like_redisbloom() {
        let mut s = sketch(8, 2);
        assert_eq!(s.increment(b"foo", 3), 3);
        assert_eq!(s.increment(b"bar", 1), 1);
        // The DUMP vector's cells: foo at 5 and 8 + 2, bar at 7 and 8 + 1.
        let mut want = [0u64; 16];
        (want[5], want[7], want[9], want[10]) = (3, 1, 1, 3);
        assert_eq!((0..16).map(|i| s.cell(i).unwrap()).collect::<Vec<_>>(), want);
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
        let max = u64::from(u32::MAX);
        assert_eq!(s.increment(b"a", max - 1), max - 1);
        assert_eq!(s.increment(b"a", 1), max, "exactly the maximum reads as overflow");
        assert_eq!(s.increment(b"b", 1 << 32), max, "any increment of 2^32 saturates");
        let mut s = sketch(4, 2);
        s.increment(b"a", 10);
        assert_eq!(s.increment(b"a", max), max);
        s.increment(b"x", i64::MAX as u64);
        s.increment(b"x", i64::MAX as u64);
        assert_eq!(
            s.count(),
            (10 + u64::from(u32::MAX)).wrapping_add(2 * (i64::MAX as u64)),
            "wraps at 2^64"
        );
    }

    fn sized(width: u64, depth: u64, cell: CellSize) -> CountMinSketch {
        CountMinSketch::with_cell_size(Dimensions { width, depth }, cell, Limits::NONE).unwrap()
    }

    /// Redis 8.12: a cell holds up to its size's maximum; one step past it
    /// (or any increment larger than the cell) is refused and changes
    /// nothing, the total included; so is a decrement below 0.
    #[test]
    fn cell_sized_increments_are_exact_or_refused() {
        for cell in CellSize::ALL {
            let max = cell.max();
            let mut s = sized(1, 1, cell);
            assert_eq!(s.add(b"a", max as i64), Ok(max));
            assert_eq!(s.add(b"a", 1), Err(CmsError::IncrbyOverflow), "{cell:?}");
            assert_eq!((s.query(b"a"), s.count()), (max, max));
            assert_eq!(s.add(b"a", -(max as i64)), Ok(0));
            assert_eq!(s.add(b"a", -1), Err(CmsError::IncrbyUnderflow));
            assert_eq!((s.query(b"a"), s.count()), (0, 0));
            assert_eq!(s.add(b"a", 0), Ok(0), "a zero increment reports the estimate");
            let mut wide = sized(20, 5, cell);
            if cell != CellSize::Eight {
                assert_eq!(wide.add(b"a", max as i64 + 1), Err(CmsError::IncrbyOverflow), "in one shot");
                assert_eq!((wide.query(b"a"), wide.count()), (0, 0));
            }
            assert_eq!(wide.add(b"a", 200.min(max as i64)), Ok(200.min(max)));
            assert_eq!(wide.add(b"a", -150), Ok(200.min(max) - 150));
            assert_eq!(wide.add(b"a", -51), Err(CmsError::IncrbyUnderflow));
            assert_eq!(wide.add(b"a", i64::MIN), Err(CmsError::IncrbyUnderflow));
        }
    }

    /// A refused step puts back the rows it had already changed.
    #[test]
    fn a_refused_step_undoes_its_rows() {
        let mut s = sized(2, 4, CellSize::One);
        assert_eq!(s.add(b"filler", 200), Ok(200));
        let before = s.try_clone().unwrap();
        // Some of "a"'s cells are "filler"'s (width 2), some are not.
        assert_eq!(s.add(b"a", 100), Err(CmsError::IncrbyOverflow));
        assert_eq!(s, before);
        assert_eq!(s.add(b"filler", 1), Ok(201));
        // Underflow on a row past the first: an item whose first cell is
        // "filler"'s (at 200) and a later one is empty.
        let mut t = sized(2, 4, CellSize::Four);
        t.add(b"filler", 200).unwrap();
        t.counter = 1000;
        let before = t.try_clone().unwrap();
        let item = (0..1000)
            .map(|i| format!("a{i}"))
            .find(|i| {
                let cell = |row| t.cell(t.locate(i.as_bytes(), row)).unwrap();
                cell(0) > 0 && (1..4).any(|row| cell(row) == 0)
            })
            .expect("such an item among 1000");
        assert_eq!(t.add(item.as_bytes(), -1), Err(CmsError::IncrbyUnderflow));
        assert_eq!(t, before);
    }

    /// The total is a RESP integer: it stops at 2^63 - 1 even when the
    /// item's own cells have room, and cannot go below 0.
    #[test]
    fn the_total_is_capped() {
        let mut s = sized(100, 1, CellSize::Eight);
        assert_eq!(s.add(b"a", i64::MAX), Ok(i64::MAX as u64));
        let other = (0..1000).map(|i| format!("x{i}")).find(|i| s.query(i.as_bytes()) == 0).unwrap();
        assert_eq!(s.add(other.as_bytes(), 1), Err(CmsError::IncrbyOverflow));
        assert_eq!((s.query(other.as_bytes()), s.count()), (0, i64::MAX as u64));
        // A total below a cell's value (a crafted load) refuses the decrement.
        let mut t = sized(20, 5, CellSize::Four);
        t.add(b"a", 7).unwrap();
        t.counter = 0;
        assert_eq!(t.add(b"a", -7), Err(CmsError::IncrbyUnderflow));
        assert_eq!(t.query(b"a"), 7);
    }

    #[test]
    fn merges_need_the_same_cell_size_and_stay_within_it() {
        let mut a = sized(20, 5, CellSize::Two);
        let mut b = sized(20, 5, CellSize::Two);
        let mut d = sized(20, 5, CellSize::Two);
        a.add(b"x", 10).unwrap();
        b.add(b"x", 7).unwrap();
        d.merge(&[(Source::Other(&a), 1), (Source::Other(&b), 1)]).unwrap();
        assert_eq!((d.query(b"x"), d.count()), (17, 17));
        d.merge(&[(Source::Other(&a), 1000), (Source::Other(&b), 1)]).unwrap();
        assert_eq!(d.query(b"x"), 10007);
        let before = d.try_clone().unwrap();
        assert_eq!(
            d.merge(&[(Source::Other(&a), 10000), (Source::Other(&b), 1)]),
            Err(CmsError::MergeOverflow)
        );
        assert_eq!(d, before);
        let four = sized(20, 5, CellSize::Four);
        assert_eq!(d.merge(&[(Source::Other(&four), 1)]), Err(CmsError::CellSizeDiffers));
        let narrow = sized(10, 5, CellSize::Four);
        assert_eq!(
            d.merge(&[(Source::Other(&narrow), 1)]),
            Err(CmsError::DimensionsDiffer),
            "dimensions first"
        );
        assert_eq!(d, before);
    }

    #[test]
    fn sizes_follow_the_cell_size() {
        for cell in CellSize::ALL {
            assert_eq!(sized(1000, 5, cell).size_bytes(), 32 + 5000 * cell.bytes());
        }
        assert_eq!(
            CountMinSketch::with_cell_size(
                Dimensions { width: 1 << 20, depth: 1 },
                CellSize::Eight,
                Limits::at_most(1 << 22)
            ),
            Err(CmsError::TooLarge { bytes: (1 << 23) + 32, limit: 1 << 22 })
        );
        let s = sized(3, 1, CellSize::Eight);
        let mut s = s;
        s.add(b"a", 5_000_000_000).unwrap();
        let four = s.into_four_byte_cells().unwrap();
        assert_eq!(
            (four.cell_size(), four.query(b"a"), four.count()),
            (CellSize::Four, 4294967295, 5_000_000_000)
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
        assert_eq!((d.count(), (0..d.cells()).filter_map(|i| d.cell(i)).max()), (0, Some(0)));
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
                    for i in 0..d.cells() {
                        assert_eq!(d.cell(i), before.cell(i).map(|c| 2 * c));
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
