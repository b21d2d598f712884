//! The counter array at each cell size Redis 8.12's RedisBloom offers
//! (`CELL_SIZE 1|2|4|8`): unsigned cells of that many bytes, row-major,
//! stored and saved little-endian. A cell holds at most `2^(8n) - 1`, except
//! 8-byte cells, which stop at `2^63 - 1` so that an estimate is always a
//! RESP integer (RedisBloom 8.12's bounds).

use super::errors::CmsError;
use std::ptr::NonNull;

use crate::common::memory::Relocate;

/// Bytes per counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CellSize {
    One,
    Two,
    Four,
    Eight,
}

impl CellSize {
    /// Every size, smallest first.
    pub const ALL: [CellSize; 4] = [CellSize::One, CellSize::Two, CellSize::Four, CellSize::Eight];

    /// RedisBloom's default, and the only size before 8.12.
    pub const DEFAULT: CellSize = CellSize::Four;

    /// The size of `n` bytes, if it is one.
    pub fn from_bytes(n: u64) -> Option<CellSize> {
        match n {
            1 => Some(CellSize::One),
            2 => Some(CellSize::Two),
            4 => Some(CellSize::Four),
            8 => Some(CellSize::Eight),
            _ => None,
        }
    }

    pub fn bytes(self) -> u64 {
        match self {
            CellSize::One => 1,
            CellSize::Two => 2,
            CellSize::Four => 4,
            CellSize::Eight => 8,
        }
    }

    /// The most a cell holds: 255, 65535, 4294967295, 2^63 - 1.
    pub fn max(self) -> u64 {
        match self {
            CellSize::One => u64::from(u8::MAX),
            CellSize::Two => u64::from(u16::MAX),
            CellSize::Four => u64::from(u32::MAX),
            CellSize::Eight => i64::MAX as u64,
        }
    }
}

/// One cell of a given size, for the row loops that are compiled once per
/// size (no dispatch on the size inside a loop).
pub(super) trait Cell: Copy {
    /// The most the cell holds ([`CellSize::max`]).
    const MAX: u64;
    fn widen(self) -> u64;
    /// The cell holding `value`, which the caller has kept within `MAX`.
    fn narrow(value: u64) -> Self;
}

macro_rules! cell {
    ($t:ty, $max:expr) => {
        impl Cell for $t {
            const MAX: u64 = $max;
            #[inline(always)]
            fn widen(self) -> u64 {
                self as u64
            }
            #[inline(always)]
            fn narrow(value: u64) -> Self {
                value as $t
            }
        }
    };
}
cell!(u8, u8::MAX as u64);
cell!(u16, u16::MAX as u64);
cell!(u32, u32::MAX as u64);
cell!(u64, i64::MAX as u64);

/// The cells, one vector per size so that each access is a plain load.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Cells {
    One(Vec<u8>),
    Two(Vec<u16>),
    Four(Vec<u32>),
    Eight(Vec<u64>),
}

/// The cells a sketch holds, read: a slice of the size's integers.
#[derive(Clone, Copy)]
pub(super) enum CellsRef<'a> {
    One(&'a [u8]),
    Two(&'a [u16]),
    Four(&'a [u32]),
    Eight(&'a [u64]),
}

/// The cells a sketch holds, written.
pub(super) enum CellsMut<'a> {
    One(&'a mut [u8]),
    Two(&'a mut [u16]),
    Four(&'a mut [u32]),
    Eight(&'a mut [u64]),
}

/// Runs `$body` with `$v` bound to the vector or slice of `$kind`
/// (`Cells`, `CellsRef`, `CellsMut`), whatever its element type (the body
/// is compiled once per type).
macro_rules! each {
    ($kind:ident, $cells:expr, $v:ident => $body:expr) => {
        match $cells {
            $kind::One($v) => $body,
            $kind::Two($v) => $body,
            $kind::Four($v) => $body,
            $kind::Eight($v) => $body,
        }
    };
}
pub(super) use each;

/// A sketch's cells as it keeps them: the block of a boxed slice of the
/// size's integers, its length and size kept by the sketch (so that the
/// sketch is as small as RedisBloom's: see `CountMinSketch`).
pub(super) struct RawCells(NonNull<u8>);

// SAFETY: the block is owned, as a `Box<[T]>` is: never shared, reached
// only through the sketch's `&self`/`&mut self`.
unsafe impl Send for RawCells {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for RawCells {}

impl RawCells {
    /// Takes the cells' block (kept exactly as long as the cells).
    pub(super) fn new(cells: Cells) -> (RawCells, CellSize, usize) {
        fn raw<T>(v: Vec<T>) -> NonNull<u8> {
            NonNull::new(Box::into_raw(v.into_boxed_slice()).cast::<u8>()).expect("a box is never null")
        }
        let (size, n) = (cells.size(), cells.len());
        let ptr = each!(Cells, cells, v => raw(v));
        (RawCells(ptr), size, n)
    }

    pub(super) fn ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }

    /// # Safety
    /// `size` and `n` must be what [`RawCells::new`] returned.
    pub(super) unsafe fn view(&self, size: CellSize, n: usize) -> CellsRef<'_> {
        let p = self.0.as_ptr();
        // SAFETY: the caller's guarantee: a live block of `n` cells of
        // `size`, aligned for them (a boxed slice of them).
        unsafe {
            match size {
                CellSize::One => CellsRef::One(std::slice::from_raw_parts(p, n)),
                CellSize::Two => CellsRef::Two(std::slice::from_raw_parts(p.cast(), n)),
                CellSize::Four => CellsRef::Four(std::slice::from_raw_parts(p.cast(), n)),
                CellSize::Eight => CellsRef::Eight(std::slice::from_raw_parts(p.cast(), n)),
            }
        }
    }

    /// # Safety
    /// As for [`RawCells::view`].
    pub(super) unsafe fn view_mut(&mut self, size: CellSize, n: usize) -> CellsMut<'_> {
        let p = self.0.as_ptr();
        // SAFETY: as in `view`; `&mut self` makes the access exclusive.
        unsafe {
            match size {
                CellSize::One => CellsMut::One(std::slice::from_raw_parts_mut(p, n)),
                CellSize::Two => CellsMut::Two(std::slice::from_raw_parts_mut(p.cast(), n)),
                CellSize::Four => CellsMut::Four(std::slice::from_raw_parts_mut(p.cast(), n)),
                CellSize::Eight => CellsMut::Eight(std::slice::from_raw_parts_mut(p.cast(), n)),
            }
        }
    }

    /// The cells back as a vector, which the caller now owns.
    ///
    /// # Safety
    /// As for [`RawCells::view`], and the block must not be used again.
    pub(super) unsafe fn take(&mut self, size: CellSize, n: usize) -> Cells {
        /// # Safety
        /// `p` must be the block of a boxed slice of `n` `T`.
        unsafe fn vec<T>(p: *mut u8, n: usize) -> Vec<T> {
            // SAFETY: the caller's guarantee.
            unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p.cast::<T>(), n)) }.into_vec()
        }
        let p = self.0.as_ptr();
        // SAFETY: the caller's guarantees.
        unsafe {
            match size {
                CellSize::One => Cells::One(vec(p, n)),
                CellSize::Two => Cells::Two(vec(p, n)),
                CellSize::Four => Cells::Four(vec(p, n)),
                CellSize::Eight => Cells::Eight(vec(p, n)),
            }
        }
    }

    /// Offers the block to active defrag.
    ///
    /// # Safety
    /// As for [`RawCells::view`].
    pub(super) unsafe fn relocate(&mut self, size: CellSize, n: usize, to: &mut impl Relocate) {
        // SAFETY: the caller's guarantees; the cells go back into the block
        // below (ManuallyDrop: should `to` panic, they are neither freed here
        // nor lost).
        let mut cells = std::mem::ManuallyDrop::new(unsafe { self.take(size, n) });
        let ptr = each!(Cells, &mut *cells, v => {
            to.vec(v);
            v.as_mut_ptr().cast::<u8>()
        });
        self.0 = NonNull::new(ptr).expect("a vector's block is never null");
    }
}

/// `n` zeroed `T`, allocated only if the memory is there (zeroed by the
/// allocator, so that untouched pages stay untouched where it can).
fn zeroed<T: Copy>(n: usize) -> Result<Vec<T>, CmsError> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| CmsError::InsufficientMemory)?;
    // SAFETY: the layout has a non-zero size (T is one of u8..u64, n > 0); a
    // null result is handled; the block holds `n` zeroed T (all-zero is a
    // valid unsigned integer) with exactly that capacity, allocated by the
    // global allocator with T's array layout, as `Vec<T>` frees it.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<T>();
        if ptr.is_null() {
            return Err(CmsError::InsufficientMemory);
        }
        Ok(Vec::from_raw_parts(ptr, n, n))
    }
}

/// A vector of `n` elements built from `f`, its memory reserved fallibly.
fn filled<T>(n: usize, f: impl Fn(usize) -> T) -> Result<Vec<T>, CmsError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| CmsError::InsufficientMemory)?;
    v.extend((0..n).map(f));
    Ok(v)
}

impl Cells {
    /// `n` zero cells of `size`.
    pub(super) fn zeroed(size: CellSize, n: u64) -> Result<Cells, CmsError> {
        let n = usize::try_from(n).map_err(|_| CmsError::InsufficientMemory)?;
        Ok(match size {
            CellSize::One => Cells::One(zeroed(n)?),
            CellSize::Two => Cells::Two(zeroed(n)?),
            CellSize::Four => Cells::Four(zeroed(n)?),
            CellSize::Eight => Cells::Eight(zeroed(n)?),
        })
    }

    /// The cells a little-endian array of `size` holds (its length a
    /// multiple of the size; the caller checks it).
    pub(super) fn from_le_bytes(size: CellSize, data: &[u8]) -> Result<Cells, CmsError> {
        let step = size.bytes() as usize;
        if !data.len().is_multiple_of(step) {
            return Err(CmsError::BadData);
        }
        let n = data.len() / step;
        let at = |i: usize| &data[i * step..(i + 1) * step];
        Ok(match size {
            CellSize::One => Cells::One(filled(n, |i| data[i])?),
            CellSize::Two => {
                Cells::Two(filled(n, |i| u16::from_le_bytes(at(i).try_into().expect("2 bytes")))?)
            }
            CellSize::Four => {
                Cells::Four(filled(n, |i| u32::from_le_bytes(at(i).try_into().expect("4 bytes")))?)
            }
            CellSize::Eight => {
                Cells::Eight(filled(n, |i| u64::from_le_bytes(at(i).try_into().expect("8 bytes")))?)
            }
        })
    }

    pub(super) fn size(&self) -> CellSize {
        match self {
            Cells::One(_) => CellSize::One,
            Cells::Two(_) => CellSize::Two,
            Cells::Four(_) => CellSize::Four,
            Cells::Eight(_) => CellSize::Eight,
        }
    }

    pub(super) fn len(&self) -> usize {
        each!(Cells, self, v => v.len())
    }

    #[inline]
    pub(super) fn get(&self, at: usize) -> u64 {
        match self {
            Cells::One(v) => u64::from(v[at]),
            Cells::Two(v) => u64::from(v[at]),
            Cells::Four(v) => u64::from(v[at]),
            Cells::Eight(v) => v[at],
        }
    }

    /// Stores `value`, which the caller has kept within the size's maximum.
    #[cfg(test)]
    pub(super) fn set(&mut self, at: usize, value: u64) {
        match self {
            Cells::One(v) => v[at] = value as u8,
            Cells::Two(v) => v[at] = value as u16,
            Cells::Four(v) => v[at] = value as u32,
            Cells::Eight(v) => v[at] = value,
        }
    }

    /// The array as RedisBloom saves it: each cell little-endian, row-major.
    #[cfg(test)]
    pub(super) fn le_bytes(&self) -> Vec<u8> {
        each!(Cells, self, v => v.iter().flat_map(|c| c.to_le_bytes()).collect())
    }

    #[cfg(test)]
    pub(super) fn to_four(&self) -> Result<Cells, CmsError> {
        let view = match self {
            Cells::One(v) => CellsRef::One(v),
            Cells::Two(v) => CellsRef::Two(v),
            Cells::Four(v) => CellsRef::Four(v),
            Cells::Eight(v) => CellsRef::Eight(v),
        };
        view.to_four()
    }
}

impl CellsRef<'_> {
    pub(super) fn len(self) -> usize {
        each!(CellsRef, self, v => v.len())
    }

    #[inline]
    pub(super) fn get(self, at: usize) -> u64 {
        match self {
            CellsRef::One(v) => u64::from(v[at]),
            CellsRef::Two(v) => u64::from(v[at]),
            CellsRef::Four(v) => u64::from(v[at]),
            CellsRef::Eight(v) => v[at],
        }
    }

    /// The array as RedisBloom saves it: each cell little-endian, row-major.
    pub(super) fn le_bytes(self) -> Vec<u8> {
        each!(CellsRef, self, v => v.iter().flat_map(|c| c.to_le_bytes()).collect())
    }

    /// The same values in 4-byte cells, an 8-byte cell above 4294967295
    /// read as 4294967295 (RedisBloom 2.8's saturated "at least this much").
    pub(super) fn to_four(self) -> Result<Cells, CmsError> {
        Ok(match self {
            CellsRef::Four(v) => Cells::Four(filled(v.len(), |i| v[i])?),
            other => Cells::Four(filled(other.len(), |i| other.get(i).min(u64::from(u32::MAX)) as u32)?),
        })
    }

    /// A copy, its memory reserved fallibly.
    pub(super) fn to_cells(self) -> Result<Cells, CmsError> {
        Ok(match self {
            CellsRef::One(v) => Cells::One(filled(v.len(), |i| v[i])?),
            CellsRef::Two(v) => Cells::Two(filled(v.len(), |i| v[i])?),
            CellsRef::Four(v) => Cells::Four(filled(v.len(), |i| v[i])?),
            CellsRef::Eight(v) => Cells::Eight(filled(v.len(), |i| v[i])?),
        })
    }
}

impl CellsMut<'_> {
    /// Stores `value`, which the caller has kept within the size's maximum.
    #[inline]
    pub(super) fn set(&mut self, at: usize, value: u64) {
        match self {
            CellsMut::One(v) => v[at] = value as u8,
            CellsMut::Two(v) => v[at] = value as u16,
            CellsMut::Four(v) => v[at] = value as u32,
            CellsMut::Eight(v) => v[at] = value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_bounds() {
        for (n, size) in [(1, CellSize::One), (2, CellSize::Two), (4, CellSize::Four), (8, CellSize::Eight)] {
            assert_eq!(CellSize::from_bytes(n), Some(size));
            assert_eq!(size.bytes(), n);
        }
        for n in [0, 3, 5, 6, 7, 9, 16, u64::MAX] {
            assert_eq!(CellSize::from_bytes(n), None);
        }
        let maxima: Vec<u64> = CellSize::ALL.iter().map(|s| s.max()).collect();
        assert_eq!(maxima, [255, 65535, 4294967295, 9223372036854775807]);
    }

    #[test]
    fn le_bytes_round_trip_at_every_size() {
        for size in CellSize::ALL {
            let mut c = Cells::zeroed(size, 5).unwrap();
            c.set(0, 1);
            c.set(4, size.max());
            let bytes = c.le_bytes();
            assert_eq!(bytes.len() as u64, 5 * size.bytes());
            assert_eq!(bytes[0], 1, "little-endian");
            let back = Cells::from_le_bytes(size, &bytes).unwrap();
            assert_eq!(back, c);
            assert_eq!(back.get(4), size.max());
        }
        assert_eq!(Cells::from_le_bytes(CellSize::Two, &[0; 3]), Err(CmsError::BadData));
    }

    #[test]
    fn cell_maxima_are_the_sizes_maxima() {
        let cells = [<u8 as Cell>::MAX, <u16 as Cell>::MAX, <u32 as Cell>::MAX, <u64 as Cell>::MAX];
        assert_eq!(cells, CellSize::ALL.map(|s| s.max()));
    }

    #[test]
    fn four_byte_copies_widen_or_saturate() {
        let mut c = Cells::zeroed(CellSize::Eight, 3).unwrap();
        c.set(0, 7);
        c.set(1, u64::from(u32::MAX) + 1);
        c.set(2, u64::from(u32::MAX));
        let four = c.to_four().unwrap();
        assert_eq!((four.get(0), four.get(1), four.get(2)), (7, 4294967295, 4294967295));
        let mut one = Cells::zeroed(CellSize::One, 2).unwrap();
        one.set(1, 255);
        assert_eq!(one.to_four().unwrap(), Cells::Four(vec![0, 255]));
    }
}
