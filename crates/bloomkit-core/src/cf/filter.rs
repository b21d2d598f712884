//! The cuckoo filter itself: sub-filters of fingerprint buckets, inserts
//! with kick-outs, growth, deletes and compaction (see the family's doc in
//! [`crate::cf`] for the layout and what differs from RedisBloom 2.8.2).

use super::errors::CfError;
use super::*;
use crate::common::hash::murmur64a;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use crate::common::memory::{relocate_list, slice_block, zeroed_bytes, HeapBlocks, Limits, Relocate};

/// Parameters of a new filter, as given to `CF.RESERVE` (already range-checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CuckooParams {
    pub capacity: u64,
    pub bucket_size: u16,
    pub max_iterations: u16,
    /// As given; RedisBloom rounds it up to a power of two (0 stays 0: no growth).
    pub expansion: u16,
}

/// What an item reduces to: its fingerprint and its two bucket hashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lookup {
    pub fp: u8,
    pub h1: u64,
    pub h2: u64,
}

impl Lookup {
    #[inline]
    pub fn new(item: &[u8]) -> Lookup {
        Lookup::from_hash(murmur64a(item, 0))
    }

    #[inline]
    pub fn from_hash(hash: u64) -> Lookup {
        let fp = (hash % 255 + 1) as u8;
        Lookup { fp, h1: hash, h2: alt_index(fp, hash) }
    }
}

/// The other bucket of fingerprint `fp` in bucket `index` (before the modulus).
#[inline]
fn alt_index(fp: u8, index: u64) -> u64 {
    index ^ u64::from(fp).wrapping_mul(ALT_MULTIPLIER)
}

/// Outcome of one insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    Inserted,
    /// `CF.ADDNX`/`CF.INSERTNX` only: the item may already be present.
    Exists,
    /// No room, even after kicking out, and the filter may not grow (EXPANSION 0).
    Full,
}

/// One sub-filter: `buckets x bucket_size` one-byte slots, in 16 bytes as
/// RedisBloom's `SubCF` (its bucket count and bucket size packed in one
/// word, the slots behind a bare pointer), so that a filter takes no more
/// memory than RedisBloom's.
pub struct SubFilter {
    /// `buckets x bucket_size` bytes, owned (allocated as a `Box<[u8]>`).
    data: NonNull<u8>,
    /// The bucket count (below 2^56) shifted left 8, then the bucket size.
    packed: u64,
}

// SAFETY: `data` is owned, as a `Box<[u8]>` is: never shared, reached only
// through `&self`/`&mut self`.
unsafe impl Send for SubFilter {}
// SAFETY: as above; `&SubFilter` only reads the slots.
unsafe impl Sync for SubFilter {}

impl std::fmt::Debug for SubFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubFilter")
            .field("buckets", &self.buckets())
            .field("bucket_size", &self.bucket_size())
            .finish()
    }
}

impl Drop for SubFilter {
    fn drop(&mut self) {
        // SAFETY: `data` came from a box of `len()` bytes, freed nowhere else.
        drop(unsafe { self.take_data() });
    }
}

impl SubFilter {
    /// A sub-filter of `buckets` buckets over `data` (`buckets x
    /// bucket_size` bytes), `None` when they do not match.
    pub fn new(buckets: u64, bucket_size: u16, data: Box<[u8]>) -> Option<SubFilter> {
        let bucket_size = u8::try_from(bucket_size).ok()?;
        let fits =
            buckets < 1 << 56 && buckets.checked_mul(u64::from(bucket_size)) == Some(data.len() as u64);
        if !fits {
            return None;
        }
        let data = NonNull::new(Box::into_raw(data).cast::<u8>()).expect("a box is never null");
        Some(SubFilter { data, packed: buckets << 8 | u64::from(bucket_size) })
    }

    pub fn buckets(&self) -> u64 {
        self.packed >> 8
    }

    fn bucket_size(&self) -> usize {
        (self.packed & 0xff) as usize
    }

    fn len(&self) -> usize {
        self.buckets() as usize * self.bucket_size()
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `data` holds `len()` initialised bytes, owned by `self`.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.len()) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr(), self.len()) }
    }

    /// The slots as the box they were made from, which the caller now owns.
    ///
    /// # Safety
    /// `data` must not be used again unless replaced.
    unsafe fn take_data(&mut self) -> Box<[u8]> {
        // SAFETY: the caller's guarantee; `data` came from a box of `len()` bytes.
        unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.data.as_ptr(), self.len())) }
    }

    /// Offers the slots to `to` (active defragmentation).
    fn relocate(&mut self, to: &mut impl Relocate) {
        // SAFETY: the box goes back into `data` below (ManuallyDrop: should
        // `to` panic, the slots are neither freed here nor lost).
        let mut data = ManuallyDrop::new(unsafe { self.take_data() });
        to.bytes(&mut data);
        self.data = NonNull::new(data.as_mut_ptr()).expect("a box is never null");
    }

    /// Slot offset of the bucket of hash `h`: 64-bit (2.8.2 truncates it to
    /// 32). Bucket counts are powers of two (every constructor and decoder
    /// checks), so `h % buckets` is a mask, not a division.
    #[inline]
    fn bucket_start(&self, h: u64, bucket_size: usize) -> usize {
        debug_assert!(self.buckets().is_power_of_two());
        (h & (self.buckets() - 1)) as usize * bucket_size
    }

    #[inline]
    fn bucket(&self, h: u64, bucket_size: usize) -> &[u8] {
        let start = self.bucket_start(h, bucket_size);
        &self.bytes()[start..start + bucket_size]
    }

    /// The first empty slot of bucket h1, else of bucket h2.
    #[inline]
    fn find_empty(&self, h1: u64, h2: u64, bucket_size: usize) -> Option<usize> {
        [h1, h2].into_iter().find_map(|h| {
            let start = self.bucket_start(h, bucket_size);
            self.bytes()[start..start + bucket_size].iter().position(|&s| s == 0).map(|i| start + i)
        })
    }

    #[inline]
    fn contains(&self, l: &Lookup, bucket_size: usize) -> bool {
        self.bucket(l.h1, bucket_size).contains(&l.fp) || self.bucket(l.h2, bucket_size).contains(&l.fp)
    }

    /// Copies in bucket h1 plus copies in bucket h2: a bucket that is both
    /// is counted twice, as RedisBloom does.
    #[inline]
    fn count(&self, l: &Lookup, bucket_size: usize) -> u64 {
        [l.h1, l.h2]
            .iter()
            .map(|&h| self.bucket(h, bucket_size).iter().filter(|&&s| s == l.fp).count() as u64)
            .sum()
    }

    fn delete(&mut self, l: &Lookup, bucket_size: usize) -> bool {
        for h in [l.h1, l.h2] {
            let start = self.bucket_start(h, bucket_size);
            if let Some(slot) = self.bytes()[start..start + bucket_size].iter().position(|&s| s == l.fp) {
                self.bytes_mut()[start + slot] = 0;
                return true;
            }
        }
        false
    }
}

/// The checked shape of a filter: everything that sizes it, before any allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Buckets of the first sub-filter.
    pub buckets: u64,
    pub filters: usize,
    pub bucket_size: u16,
    pub max_iterations: u16,
    pub expansion: u16,
}

impl Shape {
    /// Checks what RESERVE could have made; `Err(CannotCreate)` otherwise.
    pub fn validate(&self) -> Result<(), CfError> {
        let valid = (1..=MAX_BUCKET_SIZE).contains(&self.bucket_size)
            && self.max_iterations >= 1
            && self.expansion <= MAX_EXPANSION
            && (self.expansion == 0 || self.expansion.is_power_of_two())
            && (1..=MAX_FILTERS).contains(&self.filters)
            && !(self.expansion == 0 && self.filters > 1)
            && self.buckets.is_power_of_two();
        if !valid {
            return Err(CfError::CannotCreate);
        }
        self.size_bytes().map(|_| ())
    }

    /// Buckets of sub-filter `i`: `buckets x expansion^i`, checked.
    pub fn sub_buckets(&self, i: usize) -> Result<u64, CfError> {
        let exp = u64::from(self.expansion);
        let growth = match i {
            0 => 1,
            _ => u32::try_from(i).ok().and_then(|i| exp.checked_pow(i)).ok_or(CfError::CannotSize)?,
        };
        let buckets = self.buckets.checked_mul(growth).ok_or(CfError::CannotSize)?;
        // Every slot offset must fit in memory's address space.
        buckets
            .checked_mul(u64::from(self.bucket_size))
            .filter(|b| usize::try_from(*b).is_ok())
            .ok_or(CfError::CannotSize)?;
        Ok(buckets)
    }

    /// `CF.INFO Size` of a filter of this shape, checked.
    pub fn size_bytes(&self) -> Result<u64, CfError> {
        let mut total = SUB_FILTER_OVERHEAD
            .checked_mul(self.filters as u64)
            .and_then(|s| s.checked_add(FILTER_OVERHEAD))
            .ok_or(CfError::CannotSize)?;
        for i in 0..self.filters {
            let bytes = self.sub_buckets(i)? * u64::from(self.bucket_size);
            total = total.checked_add(bytes).ok_or(CfError::CannotSize)?;
        }
        Ok(total)
    }
}

/// A cuckoo filter: sub-filters, counters and parameters, in 40 bytes as
/// RedisBloom's `CuckooFilter`: the shape with its filter count as 16 bits
/// (as RedisBloom's `numFilters`; at most [`MAX_FILTERS`]), the sub-filters
/// behind a bare pointer to exactly that many (a boxed slice's block).
pub struct CuckooFilter {
    pub(super) items: u64,
    pub(super) deletes: u64,
    pub(super) params: Params,
    /// `params.filters` sub-filters, owned (a `Box<[SubFilter]>`'s block).
    list: NonNull<SubFilter>,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<CuckooFilter>() == 40 && std::mem::size_of::<SubFilter>() == 16);

// SAFETY: the list is owned, as a `Box<[SubFilter]>` is, and sub-filters are
// Send and Sync; it is reached only through `&self`/`&mut self`.
unsafe impl Send for CuckooFilter {}
// SAFETY: as above.
unsafe impl Sync for CuckooFilter {}

impl Drop for CuckooFilter {
    fn drop(&mut self) {
        drop(self.take_filters());
    }
}

impl std::fmt::Debug for CuckooFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuckooFilter")
            .field("items", &self.items)
            .field("deletes", &self.deletes)
            .field("shape", &self.shape())
            .finish()
    }
}

/// A [`Shape`] with its filter count as 16 bits: what a filter keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Params {
    pub buckets: u64,
    pub bucket_size: u16,
    pub max_iterations: u16,
    pub expansion: u16,
    pub filters: u16,
}

impl Params {
    /// A checked shape's (its filter count at most [`MAX_FILTERS`]).
    pub(super) fn of(s: &Shape) -> Params {
        Params {
            buckets: s.buckets,
            bucket_size: s.bucket_size,
            max_iterations: s.max_iterations,
            expansion: s.expansion,
            filters: s.filters as u16,
        }
    }
}

/// The list of sub-filters and each one's slots.
impl HeapBlocks for CuckooFilter {
    fn heap_blocks(&self, each: &mut dyn FnMut(*const u8, usize)) {
        slice_block(self.filters(), each);
        for f in self.filters() {
            each(f.data.as_ptr(), f.len());
        }
    }
}

/// Next power of two as RedisBloom's `getNextN2` (0 stays 0), `None` past 2^63.
fn next_power_of_two(n: u64) -> Option<u64> {
    if n == 0 {
        Some(0)
    } else {
        n.checked_next_power_of_two()
    }
}

impl CuckooFilter {
    /// A filter of these parts; `filters` holds `params.filters` of them.
    pub(super) fn assemble(
        items: u64,
        deletes: u64,
        params: Params,
        filters: Vec<SubFilter>,
    ) -> CuckooFilter {
        debug_assert_eq!(filters.len(), usize::from(params.filters));
        // Holding no list until `set_filters` gives it one.
        let mut f = CuckooFilter {
            items,
            deletes,
            params: Params { filters: 0, ..params },
            list: NonNull::dangling(),
        };
        f.set_filters(filters);
        f
    }

    /// The sub-filters, taken out (the filter then holds none until
    /// [`CuckooFilter::set_filters`]).
    fn take_filters(&mut self) -> Vec<SubFilter> {
        let n = usize::from(self.params.filters);
        // SAFETY: `list` is the block of a boxed slice of `n` sub-filters
        // (`set_filters`), given up here: the filter keeps an empty list.
        let list = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.list.as_ptr(), n)) };
        self.list = NonNull::dangling();
        self.params.filters = 0;
        list.into_vec()
    }

    /// Keeps `filters` (at most [`MAX_FILTERS`]) in a block of exactly that many.
    fn set_filters(&mut self, filters: Vec<SubFilter>) {
        debug_assert!(self.params.filters == 0 && filters.len() <= MAX_FILTERS);
        self.params.filters = filters.len() as u16;
        let list = Box::into_raw(filters.into_boxed_slice()).cast::<SubFilter>();
        self.list = NonNull::new(list).expect("a box is never null");
    }

    pub(super) fn filters_mut(&mut self) -> &mut [SubFilter] {
        // SAFETY: `list` holds `params.filters` sub-filters (`set_filters`);
        // `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.list.as_ptr(), usize::from(self.params.filters)) }
    }

    /// A new filter as `CF.RESERVE` creates it: `next_pow2(capacity / bucket_size)`
    /// buckets (at least 1), the expansion rounded up to a power of two.
    pub fn new(params: CuckooParams, limits: Limits) -> Result<CuckooFilter, CfError> {
        if params.bucket_size == 0 {
            return Err(CfError::BucketSizeRange);
        }
        let buckets = next_power_of_two(params.capacity / u64::from(params.bucket_size))
            .ok_or(CfError::CannotSize)?
            .max(1);
        let expansion = next_power_of_two(u64::from(params.expansion)).ok_or(CfError::CannotSize)?;
        let shape = Shape {
            buckets,
            filters: 1,
            bucket_size: params.bucket_size,
            max_iterations: params.max_iterations,
            expansion: u16::try_from(expansion).map_err(|_| CfError::ExpansionRange)?,
        };
        CuckooFilter::allocate(0, 0, shape, limits)
    }

    /// An empty filter of a checked shape: the limit is compared before any allocation.
    pub(super) fn allocate(
        items: u64,
        deletes: u64,
        shape: Shape,
        limits: Limits,
    ) -> Result<CuckooFilter, CfError> {
        shape.validate()?;
        limits.check(shape.size_bytes()?)?;
        let mut filters = Vec::new();
        filters.try_reserve_exact(shape.filters).map_err(|_| CfError::OutOfMemory)?;
        for i in 0..shape.filters {
            let buckets = shape.sub_buckets(i)?;
            let data = zeroed_bytes(buckets * u64::from(shape.bucket_size))?;
            filters.push(SubFilter::new(buckets, shape.bucket_size, data).ok_or(CfError::CannotSize)?);
        }
        Ok(CuckooFilter::assemble(items, deletes, Params::of(&shape), filters))
    }

    #[inline]
    fn bucket_size(&self) -> usize {
        usize::from(self.params.bucket_size)
    }

    /// `CF.EXISTS`: in any sub-filter.
    #[inline]
    pub fn contains(&self, l: &Lookup) -> bool {
        let bs = self.bucket_size();
        self.filters().iter().any(|f| f.contains(l, bs))
    }

    /// `CF.COUNT`: copies of the fingerprint in the item's buckets of every sub-filter.
    pub fn count(&self, l: &Lookup) -> u64 {
        let bs = self.bucket_size();
        self.filters().iter().map(|f| f.count(l, bs)).sum()
    }

    /// Refuses a write up front on a filter with `max_expansions`
    /// sub-filters or more ([`MAX_EXPANSIONS`] by default, RedisBloom 8's
    /// `cf-max-expansions`), as RedisBloom does once per command.
    pub fn check_writable(&self, max_expansions: usize) -> Result<(), CfError> {
        if self.filters().len() >= max_expansions {
            return Err(CfError::MaxExpansions);
        }
        Ok(())
    }

    /// `CF.ADDNX`: inserts unless the item may be present.
    pub fn insert_unique(&mut self, l: &Lookup, limits: Limits) -> Result<Insert, CfError> {
        if self.contains(l) {
            return Ok(Insert::Exists);
        }
        self.insert(l, limits)
    }

    /// `CF.ADD`: into the first empty slot of the item's buckets, trying the
    /// newest sub-filter first; else kicking out in the newest; else growing.
    pub fn insert(&mut self, l: &Lookup, limits: Limits) -> Result<Insert, CfError> {
        loop {
            let bs = self.bucket_size();
            for f in self.filters_mut().iter_mut().rev() {
                if let Some(slot) = f.find_empty(l.h1, l.h2, bs) {
                    f.bytes_mut()[slot] = l.fp;
                    self.items = self.items.wrapping_add(1);
                    return Ok(Insert::Inserted);
                }
            }
            if self.kick_out(l) {
                self.items = self.items.wrapping_add(1);
                return Ok(Insert::Inserted);
            }
            if self.params.expansion == 0 {
                return Ok(Insert::Full);
            }
            self.grow(limits)?;
        }
    }

    /// RedisBloom's kick-out in the newest sub-filter: from bucket `h1`,
    /// victim slot 0, swap the fingerprint in; move the victim to its other
    /// bucket and stop if that has room, else advance the victim slot; at
    /// most `max_iterations` rounds. On failure the swaps are undone in
    /// reverse order, leaving the sub-filter exactly as it was.
    fn kick_out(&mut self, l: &Lookup) -> bool {
        let bs = self.bucket_size();
        let rounds = self.params.max_iterations;
        let f = self.filters_mut().last_mut().expect("a filter has at least one sub-filter");
        let n = f.buckets();
        let f = f.bytes_mut();
        let mut fp = l.fp;
        let mut victim = 0usize;
        let mut bucket = l.h1 % n;
        for _ in 0..rounds {
            std::mem::swap(&mut f[bucket as usize * bs + victim], &mut fp);
            bucket = alt_index(fp, bucket) % n;
            let start = bucket as usize * bs;
            if let Some(i) = f[start..start + bs].iter().position(|&s| s == 0) {
                f[start + i] = fp;
                return true;
            }
            victim = (victim + 1) % bs;
        }
        for _ in 0..rounds {
            victim = (victim + bs - 1) % bs;
            bucket = alt_index(fp, bucket) % n;
            std::mem::swap(&mut f[bucket as usize * bs + victim], &mut fp);
        }
        false
    }

    /// Appends sub-filter `i` of `buckets x expansion^i` buckets, after
    /// checking its size and the limit.
    fn grow(&mut self, limits: Limits) -> Result<(), CfError> {
        if self.filters().len() >= MAX_GROWN_FILTERS {
            return Err(CfError::TooManyFilters);
        }
        let grown = Shape { filters: self.filters().len() + 1, ..self.shape() };
        let buckets = grown.sub_buckets(self.filters().len())?;
        let bytes = buckets * u64::from(self.params.bucket_size);
        let total = self
            .size_bytes()
            .checked_add(SUB_FILTER_OVERHEAD)
            .and_then(|s| s.checked_add(bytes))
            .ok_or(CfError::CannotSize)?;
        limits.check_growth(self.size_bytes(), total)?;
        let data = zeroed_bytes(bytes)?;
        let added = SubFilter::new(buckets, self.params.bucket_size, data).ok_or(CfError::CannotSize)?;
        // One more sub-filter, exactly: the list's block holds no spare room.
        let mut filters = self.take_filters();
        if filters.try_reserve_exact(1).is_err() {
            self.set_filters(filters);
            return Err(CfError::OutOfMemory);
        }
        filters.push(added);
        self.set_filters(filters);
        Ok(())
    }

    /// `CF.DEL`: removes one copy, from the newest sub-filter holding one.
    /// Deletes count up; past a tenth of the items, a filter of several
    /// sub-filters compacts (stopping at the first that cannot be emptied).
    pub fn delete(&mut self, l: &Lookup) -> bool {
        let bs = self.bucket_size();
        let Some(f) = self.filters_mut().iter_mut().rev().find(|f| f.contains(l, bs)) else {
            return false;
        };
        f.delete(l, bs);
        // Counts can come from a dump: they wrap as RedisBloom's unsigned ones do.
        self.items = self.items.wrapping_sub(1);
        self.deletes = self.deletes.wrapping_add(1);
        if self.filters().len() > 1 && self.deletes as f64 > self.items as f64 * 0.10 {
            self.compact(false);
        }
        true
    }

    /// `CF.COMPACT` (`keep_going`) and the compaction after deletes: moves
    /// each fingerprint of a sub-filter, newest first, into an older one with
    /// room in its buckets; a newest sub-filter left empty is freed. Without
    /// `keep_going`, stops at the first sub-filter that cannot be emptied.
    pub fn compact(&mut self, keep_going: bool) {
        let bs = self.bucket_size();
        for ix in (1..self.filters().len()).rev() {
            let (older, rest) = self.filters_mut().split_at_mut(ix);
            let current = &mut rest[0];
            let mut all_moved = true;
            for bucket in 0..current.buckets() {
                for slot in 0..bs {
                    let at = bucket as usize * bs + slot;
                    let fp = current.bytes()[at];
                    if fp == 0 {
                        continue;
                    }
                    // The fingerprint's buckets in a smaller sub-filter follow
                    // from this bucket's index (all counts are powers of two).
                    let (h1, h2) = (bucket, alt_index(fp, bucket));
                    let home = older.iter_mut().find_map(|f| f.find_empty(h1, h2, bs).map(|s| (f, s)));
                    match home {
                        Some((f, s)) => {
                            f.bytes_mut()[s] = fp;
                            current.bytes_mut()[at] = 0;
                        }
                        None => all_moved = false,
                    }
                }
            }
            if all_moved && ix == self.filters().len() - 1 {
                let mut filters = self.take_filters();
                filters.pop();
                self.set_filters(filters);
            } else if !all_moved && !keep_going {
                break;
            }
        }
        self.deletes = 0;
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    pub fn deletes(&self) -> u64 {
        self.deletes
    }

    /// The shape, its filter count the sub-filters there are.
    pub fn shape(&self) -> Shape {
        let p = self.params;
        Shape {
            buckets: p.buckets,
            filters: usize::from(p.filters),
            bucket_size: p.bucket_size,
            max_iterations: p.max_iterations,
            expansion: p.expansion,
        }
    }

    /// Offers the filter's buffers to `to` from buffer `from` on, for a
    /// server's active defragmentation: the list of sub-filters (buffer 0),
    /// then each sub-filter's slots. `Some(next)` when `to` asked to stop;
    /// see [`relocate_list`]. The filter itself is the caller's to move.
    pub fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize> {
        let mut list = self.take_filters();
        let next = relocate_list(&mut list, from, to, |f, to| f.relocate(to));
        self.set_filters(list);
        next
    }

    pub fn filters(&self) -> &[SubFilter] {
        // SAFETY: `list` holds `params.filters` sub-filters (`set_filters`).
        unsafe { std::slice::from_raw_parts(self.list.as_ptr(), usize::from(self.params.filters)) }
    }

    /// `CF.INFO Size`, also the `MEMORY USAGE` figure: RedisBloom's accounting.
    pub fn size_bytes(&self) -> u64 {
        let data = self.filters().iter().map(|f| f.len() as u64).sum::<u64>();
        FILTER_OVERHEAD + SUB_FILTER_OVERHEAD * self.filters().len() as u64 + data
    }

    /// `CF.DEBUG`'s line.
    pub fn debug_line(&self) -> String {
        let s = self.shape();
        format!(
            "bktsize:{} buckets:{} items:{} deletes:{} filters:{} max_iterations:{} expansion:{}",
            s.bucket_size,
            s.buckets,
            self.items,
            self.deletes,
            self.filters().len(),
            s.max_iterations,
            s.expansion
        )
    }

    /// A deep copy that reports allocation failure (for `COPY`).
    pub fn try_clone(&self) -> Result<CuckooFilter, CfError> {
        let mut filters = Vec::new();
        filters.try_reserve_exact(self.filters().len()).map_err(|_| CfError::OutOfMemory)?;
        for f in self.filters() {
            let mut data = zeroed_bytes(f.len() as u64)?;
            data.copy_from_slice(f.bytes());
            filters
                .push(SubFilter::new(f.buckets(), self.params.bucket_size, data).ok_or(CfError::CannotSize)?);
        }
        Ok(CuckooFilter::assemble(self.items, self.deletes, self.params, filters))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::cf) fn params(
        capacity: u64,
        bucket_size: u16,
        max_iterations: u16,
        expansion: u16,
    ) -> CuckooParams {
        CuckooParams { capacity, bucket_size, max_iterations, expansion }
    }

    pub(in crate::cf) fn add(f: &mut CuckooFilter, item: &[u8]) -> Insert {
        f.insert(&Lookup::new(item), Limits::NONE).unwrap()
    }

    pub(in crate::cf) fn slots(f: &CuckooFilter) -> Vec<u8> {
        f.filters().iter().flat_map(|s| s.bytes().iter().copied()).collect()
    }

    #[test]
    fn sizes_like_redisbloom() {
        // CF.RESERVE k 10 -> 8 buckets, Size 72; CF.RESERVE k 100 EXPANSION 3 -> expansion 4.
        let f = CuckooFilter::new(params(10, 2, 20, 1), Limits::NONE).unwrap();
        assert_eq!((f.shape().buckets, f.size_bytes()), (8, 72));
        let f = CuckooFilter::new(params(100, 2, 20, 3), Limits::NONE).unwrap();
        assert_eq!((f.shape().buckets, f.shape().expansion, f.size_bytes()), (64, 4, 184));
        let f = CuckooFilter::new(params(1024, 2, 20, 0), Limits::NONE).unwrap();
        assert_eq!((f.shape().buckets, f.shape().expansion, f.size_bytes()), (512, 0, 1080));
    }

    #[test]
    fn matches_captured_redisbloom_state() {
        // CF.RESERVE src 10; CF.ADD src a on RedisBloom 2.8.2: fingerprint 0xc4 at slot 2,
        // and this SCANDUMP header.
        let mut f = CuckooFilter::new(params(10, 2, 20, 1), Limits::NONE).unwrap();
        assert_eq!(add(&mut f, b"a"), Insert::Inserted);
        let mut expected = vec![0u8; 16];
        expected[2] = 0xc4;
        assert_eq!(slots(&f), expected);
        let header: [u8; 38] = [
            1, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
            2, 0, 20, 0, 1, 0,
        ];
        assert_eq!(f.encode_header(), header);
    }

    #[test]
    fn full_filter_without_expansion_is_unchanged_by_a_failed_insert() {
        let mut f = CuckooFilter::new(params(4, 2, 20, 0), Limits::NONE).unwrap();
        let mut full = 0;
        for i in 0..50u32 {
            let before = slots(&f);
            match add(&mut f, &i.to_le_bytes()) {
                Insert::Full => {
                    full += 1;
                    assert_eq!(slots(&f), before, "a refused insert changes nothing");
                }
                Insert::Inserted => {}
                Insert::Exists => unreachable!(),
            }
        }
        assert!(full > 0);
        assert_eq!(f.filters().len(), 1);
        assert!(slots(&f).iter().all(|&s| s != 0));
    }

    #[test]
    fn relocate_offers_every_buffer_once_and_resumes() {
        use crate::common::memory::TestMover;
        let mut f = CuckooFilter::new(params(64, 2, 20, 2), Limits::NONE).unwrap();
        let items: Vec<Vec<u8>> = (0..1000u32).map(|i| format!("item{i}").into_bytes()).collect();
        for item in &items {
            add(&mut f, item);
        }
        let n = f.filters().len();
        assert!(n > 2);
        let mut mover = TestMover::new(3);
        let calls = mover.run(|from, to| f.relocate(from, to));
        assert_eq!(mover.moved_from.len(), n + 1);
        assert_eq!(calls, (n + 1).div_ceil(3));
        assert!(items.iter().all(|i| f.contains(&Lookup::new(i))));
        assert_eq!(f.items(), 1000);
    }

    #[test]
    fn grows_and_finds_everything() {
        let mut f = CuckooFilter::new(params(64, 2, 20, 2), Limits::NONE).unwrap();
        let items: Vec<Vec<u8>> = (0..2000u32).map(|i| format!("item{i}").into_bytes()).collect();
        for item in &items {
            assert_eq!(add(&mut f, item), Insert::Inserted);
        }
        assert!(f.filters().len() > 1);
        for (i, s) in f.filters().iter().enumerate() {
            assert_eq!(s.buckets(), 32 << i);
        }
        assert!(items.iter().all(|i| f.contains(&Lookup::new(i))));
        assert_eq!(f.items(), 2000);
    }

    #[test]
    fn delete_and_count() {
        let mut f = CuckooFilter::new(params(1000, 4, 20, 1), Limits::NONE).unwrap();
        for _ in 0..3 {
            add(&mut f, b"x");
        }
        let l = Lookup::new(b"x");
        assert_eq!(f.count(&l), 3);
        assert!(f.delete(&l));
        assert_eq!(f.count(&l), 2);
        assert_eq!((f.items(), f.deletes()), (2, 1));
        assert!(!f.delete(&Lookup::new(b"never added")));
        assert_eq!(f.insert_unique(&l, Limits::NONE), Ok(Insert::Exists));
    }

    #[test]
    fn compaction_frees_emptied_sub_filters() {
        let mut f = CuckooFilter::new(params(8, 2, 20, 1), Limits::NONE).unwrap();
        let items: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_le_bytes().to_vec()).collect();
        for item in &items {
            add(&mut f, item);
        }
        let grown = f.filters().len();
        assert!(grown > 3);
        for item in &items[..90] {
            assert!(f.delete(&Lookup::new(item)));
        }
        f.compact(true);
        assert!(f.filters().len() < grown);
        assert_eq!(f.deletes(), 0);
        assert!(items[90..].iter().all(|i| f.contains(&Lookup::new(i))), "no false negatives");
    }

    #[test]
    fn many_copies_of_one_item_stop_at_the_sub_filter_cap() {
        let mut f = CuckooFilter::new(params(4, 1, 1, 1), Limits::NONE).unwrap();
        let l = Lookup::new(b"same");
        let mut refused = None;
        for _ in 0..(MAX_GROWN_FILTERS * 4 + 10) {
            if let Err(e) = f.insert(&l, Limits::NONE) {
                refused = Some(e);
                break;
            }
        }
        assert_eq!(refused, Some(CfError::TooManyFilters));
        assert_eq!(f.filters().len(), MAX_GROWN_FILTERS);
        assert_eq!(f.check_writable(MAX_EXPANSIONS), Err(CfError::MaxExpansions));
    }

    #[test]
    fn limits_are_checked_before_allocation() {
        let limits = Limits::at_most(1 << 20);
        assert!(matches!(
            CuckooFilter::new(params(1 << 40, 2, 20, 1), limits),
            Err(CfError::TooLarge { .. })
        ));
        assert_eq!(
            CuckooFilter::new(params(u64::MAX, 1, 20, 1), Limits::NONE).err(),
            Some(CfError::CannotSize)
        );
        let mut f = CuckooFilter::new(params(1024, 2, 20, 32768), limits).unwrap();
        let mut err = None;
        for i in 0..5000u32 {
            if let Err(e) = f.insert(&Lookup::new(&i.to_le_bytes()), limits) {
                err = Some(e);
                break;
            }
        }
        assert!(matches!(err, Some(CfError::TooLarge { .. })));
        assert_eq!(f.filters().len(), 1);
    }
}
