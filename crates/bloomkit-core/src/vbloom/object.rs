//! A valkey-bloom object: its sub-filters (each a serialized `bloomfilter`
//! crate filter with its own SipHash seed), adds that scale out as
//! valkey-bloom does, and lookups.

use std::hash::Hasher;

use siphasher::sip::SipHasher13;

use super::*;
use crate::common::memory::{
    relocate_list, slice_block, vec_block, zeroed_bytes, HeapBlocks, Limits, Modulus, Relocate,
};
use crate::common::sizing::is_rate;

/// One SipHash-1-3 of an item as `Hash for [u8]` feeds it.
pub(super) fn sip(keys: (u64, u64), item: &[u8]) -> u64 {
    let mut h = SipHasher13::new_with_keys(keys.0, keys.1);
    h.write(&(item.len() as u64).to_le_bytes());
    h.write(item);
    h.finish()
}

/// An item's two hashes for one seed, remembered so that sub-filters
/// sharing a seed (all of them, normally) hash the item once.
pub(super) struct HashCache<'a> {
    item: &'a [u8],
    last: Option<(SipKeys, (u64, u64))>,
}

/// A seed as its two SipHash key pairs.
type SipKeys = [(u64, u64); 2];

impl<'a> HashCache<'a> {
    pub(super) fn new(item: &'a [u8]) -> HashCache<'a> {
        HashCache { item, last: None }
    }

    pub(super) fn of(&mut self, f: &Filter) -> (u64, u64) {
        match self.last {
            Some((keys, h)) if keys == f.keys => h,
            _ => {
                let h = (sip(f.keys[0], self.item), sip(f.keys[1], self.item));
                self.last = Some((f.keys, h));
                h
            }
        }
    }
}

/// One sub-filter, kept as its serialized bytes so that saving is a copy.
#[derive(Debug)]
pub struct Filter {
    pub(super) data: Box<[u8]>,
    pub(super) bits: u64,
    pub(super) k: u32,
    pub(super) keys: SipKeys,
    pub(super) modulus: Modulus,
    pub(super) capacity: u64,
    pub(super) items: u64,
}

impl Filter {
    /// A sub-filter over its serialized bytes, after checking that they are one.
    pub(super) fn from_serialized(data: Box<[u8]>, capacity: u64, items: u64) -> Result<Filter, ValkeyError> {
        let (bytes, k, seed) = parse_header(&data)?;
        if capacity == 0 || capacity > i64::MAX as u64 {
            return Err(bad("a sub-filter's capacity is outside 1 to 2^63-1"));
        }
        // valkey-bloom counts an item only while there is room, so no
        // sub-filter holds more than its capacity.
        if items > capacity {
            return Err(bad("a sub-filter holds more items than its capacity"));
        }
        let bits = bytes * 8;
        Ok(Filter { data, bits, k, keys: sip_keys(&seed), modulus: Modulus::new(bits), capacity, items })
    }

    /// An empty sub-filter, sized as valkey-bloom sizes one.
    pub(super) fn new(capacity: u64, fp_rate: f64, seed: &[u8; 32]) -> Result<Filter, ValkeyError> {
        let bytes = bitmap_bytes(capacity, fp_rate).ok_or(ValkeyError::MemoryLimit)?;
        let total = bytes.checked_add(FILTER_HEADER as u64).ok_or(ValkeyError::MemoryLimit)?;
        let mut data = zeroed_bytes(total).map_err(|_| ValkeyError::OutOfMemory)?;
        let k = hashes_for(bytes * 8, capacity);
        data[0] = FILTER_VERSION;
        data[1..9].copy_from_slice(&bytes.to_le_bytes());
        data[9..13].copy_from_slice(&k.to_le_bytes());
        data[13..45].copy_from_slice(seed);
        Filter::from_serialized(data, capacity, 0)
    }

    pub(super) fn try_clone(&self) -> Result<Filter, ValkeyError> {
        let mut data = zeroed_bytes(self.data.len() as u64).map_err(|_| ValkeyError::OutOfMemory)?;
        data.copy_from_slice(&self.data);
        Ok(Filter { data, ..*self })
    }

    #[inline]
    pub(super) fn bit(&self, i: u32, (h0, h1): (u64, u64)) -> u64 {
        let x = match i {
            0 => h0,
            1 => h1,
            _ => h0.wrapping_add(u64::from(i).wrapping_mul(h1)) % PRIME,
        };
        self.modulus.reduce(x)
    }

    pub(super) fn check(&self, h: (u64, u64)) -> bool {
        (0..self.k).all(|i| {
            let b = self.bit(i, h);
            // In bounds: the modulus is 8 x the bitmap's length.
            self.data[FILTER_HEADER + (b >> 3) as usize] & (1 << (b & 7)) != 0
        })
    }

    pub(super) fn set(&mut self, h: (u64, u64)) {
        for i in 0..self.k {
            let b = self.bit(i, h);
            self.data[FILTER_HEADER + (b >> 3) as usize] |= 1 << (b & 7);
        }
    }

    /// The serialized filter: header and bits, as saved.
    pub fn serialized(&self) -> &[u8] {
        &self.data
    }

    /// Bytes of bits (`L`).
    pub fn bitmap_len(&self) -> u64 {
        self.bits / 8
    }

    pub fn hashes(&self) -> u32 {
        self.k
    }

    pub fn seed(&self) -> [u8; 32] {
        self.data[13..45].try_into().expect("a 45-byte header")
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    /// What `BF.INFO Size` counts for this sub-filter.
    pub(super) fn accounted(&self) -> u64 {
        FILTER_BYTES + self.bitmap_len()
    }
}

/// Checks a serialized filter's header against its length: `(L, k, seed)`.
pub(super) fn parse_header(data: &[u8]) -> Result<(u64, u32, [u8; 32]), ValkeyError> {
    let Some((header, bits)) = data.split_first_chunk::<FILTER_HEADER>() else {
        return Err(bad("a sub-filter is shorter than its 45-byte header"));
    };
    if header[0] != FILTER_VERSION {
        return Err(bad("a sub-filter's format version is not 1"));
    }
    let bytes = u64::from_le_bytes(header[1..9].try_into().expect("8 bytes"));
    let k = u32::from_le_bytes(header[9..13].try_into().expect("4 bytes"));
    if bytes == 0 || bytes != bits.len() as u64 || bytes > u64::MAX / 8 {
        return Err(bad("a sub-filter's bitmap length does not match its bytes"));
    }
    if !(1..=MAX_HASHES).contains(&k) {
        return Err(bad("a sub-filter's hash count is outside 1 to 1100"));
    }
    Ok((bytes, k, header[13..45].try_into().expect("32 bytes")))
}

/// Bytes of bits in a serialized filter (what `Size` counts of it).
pub(super) fn bits_of(data: &[u8]) -> u64 {
    (data.len() as u64).saturating_sub(FILTER_HEADER as u64)
}

/// The two SipHash keys of a seed: each 16-byte half as two u64 LE.
pub(super) fn sip_keys(seed: &[u8; 32]) -> SipKeys {
    let word = |i: usize| u64::from_le_bytes(seed[i..i + 8].try_into().expect("8 bytes"));
    [(word(0), word(8)), (word(16), word(24))]
}

/// A valkey-bloom object: its parameters and sub-filters, oldest first.
#[derive(Debug)]
pub struct Object {
    /// 0 for a non-scaling object.
    pub(super) expansion: u32,
    pub(super) fp_rate: f64,
    pub(super) tightening: f64,
    pub(super) seed_random: bool,
    pub(super) filters: Vec<Filter>,
    /// The capacity valkey-bloom's filter vector would have: part of its
    /// `Size` figure (1 after creation or RDB load, grown as Rust grows a
    /// `Vec`; exact after `BF.LOAD`).
    pub(super) slots: u64,
}

/// The list of filters and each one's serialized bytes.
impl HeapBlocks for Object {
    fn heap_blocks(&self, each: &mut dyn FnMut(*const u8, usize)) {
        vec_block(&self.filters, each);
        for f in &self.filters {
            slice_block(&f.data, each);
        }
    }
}

impl Object {
    /// An empty object as valkey-bloom's `BF.RESERVE`/`BF.INSERT` make one
    /// (`expansion` 0 for non-scaling), refused before anything is
    /// allocated if it would pass the limit.
    pub fn new(
        capacity: u64,
        fp_rate: f64,
        tightening: f64,
        expansion: u32,
        seed: &[u8; 32],
        limits: Limits,
    ) -> Result<Object, ValkeyError> {
        Object::check_parameters(u64::from(expansion), fp_rate, tightening)?;
        if capacity == 0 || capacity > i64::MAX as u64 {
            return Err(ValkeyError::BadCapacity);
        }
        let size =
            bitmap_bytes(capacity, fp_rate).and_then(|b| accounted_size(1, b.checked_add(FILTER_BYTES)?));
        check_growth(limits, 0, size)?;
        let filter = Filter::new(capacity, fp_rate, seed)?;
        let mut filters = Vec::new();
        filters.try_reserve_exact(1).map_err(|_| ValkeyError::OutOfMemory)?;
        filters.push(filter);
        Ok(Object { expansion, fp_rate, tightening, seed_random: *seed != FIXED_SEED, filters, slots: 1 })
    }

    /// The object a parsed command asked for, with `seed` where it named none.
    pub fn create(c: &Creation, seed: &[u8; 32], limits: Limits) -> Result<Object, ValkeyError> {
        Object::new(c.capacity, c.fp_rate, c.tightening, c.expansion, c.seed.as_ref().unwrap_or(seed), limits)
    }

    /// The parameters it was created with, for replicating its creation as
    /// valkey-bloom does (`BF.INSERT key CAPACITY c ERROR e TIGHTENING t SEED s ...`).
    pub fn creation(&self) -> Creation {
        Creation {
            capacity: self.filters[0].capacity,
            fp_rate: self.fp_rate,
            tightening: self.tightening,
            expansion: self.expansion,
            seed: Some(self.filters[0].seed()),
        }
    }

    /// The object's parameters, checked as valkey-bloom checks them on load.
    pub(super) fn check_parameters(
        expansion: u64,
        fp_rate: f64,
        tightening: f64,
    ) -> Result<u32, ValkeyError> {
        let expansion = u32::try_from(expansion).map_err(|_| ValkeyError::BadExpansion)?;
        if !is_rate(fp_rate) || !is_rate(tightening) {
            return Err(ValkeyError::ErrorRateRange);
        }
        Ok(expansion)
    }

    /// True when every bit of the item is set in some sub-filter.
    pub fn contains(&self, item: &[u8]) -> bool {
        let mut h = HashCache::new(item);
        self.filters.iter().any(|f| f.check(h.of(f)))
    }

    /// valkey-bloom's `add_item`: a present item (false positives included)
    /// changes nothing; otherwise it goes into the newest sub-filter, or, when
    /// that one holds its capacity, into a new one of `capacity x expansion`
    /// at `fp_rate x tightening^n`, with the same seed.
    pub fn add(&mut self, item: &[u8], limits: Limits) -> Result<bool, ValkeyError> {
        let mut h = HashCache::new(item);
        if self.filters.iter().any(|f| f.check(h.of(f))) {
            return Ok(false);
        }
        let newest = self.filters.last_mut().expect("an object has at least one sub-filter");
        if newest.items < newest.capacity {
            newest.set(h.of(newest));
            newest.items += 1;
            return Ok(true);
        }
        let mut filter = self.next_filter(limits)?;
        self.filters.try_reserve(1).map_err(|_| ValkeyError::OutOfMemory)?;
        filter.set(h.of(&filter));
        filter.items = 1;
        self.filters.push(filter);
        if self.filters.len() as u64 > self.slots {
            self.slots = (self.slots * 2).max(self.filters.len() as u64).max(4);
        }
        Ok(true)
    }

    /// The sub-filter a scale-out adds, checked as valkey-bloom checks it.
    pub(super) fn next_filter(&self, limits: Limits) -> Result<Filter, ValkeyError> {
        if self.expansion == 0 {
            return Err(ValkeyError::NonScalingFull);
        }
        let n = self.filters.len() as u64;
        if n >= MAX_FILTERS {
            return Err(ValkeyError::MaxFilters);
        }
        let fp = rate_of(self.fp_rate, n, self.tightening)?;
        let newest = self.filters.last().expect("an object has at least one sub-filter");
        let capacity = newest
            .capacity
            .checked_mul(u64::from(self.expansion))
            .filter(|c| *c <= i64::MAX as u64)
            .ok_or(ValkeyError::BadCapacity)?;
        let size = self.size();
        let needed = bitmap_bytes(capacity, fp)
            .and_then(|b| b.checked_add(FILTER_BYTES))
            .and_then(|b| b.checked_add(size));
        check_growth(limits, size, needed)?;
        Filter::new(capacity, fp, &self.filters[0].seed())
    }

    /// Adds each item in order as [`Object::add`]; `result` sees each
    /// outcome and returns false to stop.
    pub fn add_each<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        limits: Limits,
        mut result: impl FnMut(Result<bool, ValkeyError>) -> bool,
    ) {
        for item in items {
            if !result(self.add(item.as_ref(), limits)) {
                return;
            }
        }
    }

    /// valkey-bloom refuses a whole `BF.MADD`/`BF.INSERT` that would overfill
    /// a non-scaling object, adding nothing: `Err(NonScalingFull)` when
    /// adding `items` in order would. Exact (duplicates and false positives
    /// within the batch count as they will); only a batch larger than the
    /// room left costs a trial run on a copy of the newest sub-filter.
    pub fn check_room<I: AsRef<[u8]>>(&self, items: &[I]) -> Result<(), ValkeyError> {
        let (newest, older) = self.filters.split_last().expect("an object has at least one sub-filter");
        if self.expansion != 0 || newest.capacity.saturating_sub(newest.items) >= items.len() as u64 {
            return Ok(());
        }
        let mut trial = newest.try_clone()?;
        for item in items {
            let mut h = HashCache::new(item.as_ref());
            if older.iter().any(|f| f.check(h.of(f))) || trial.check(h.of(&trial)) {
                continue;
            }
            if trial.items >= trial.capacity {
                return Err(ValkeyError::NonScalingFull);
            }
            trial.set(h.of(&trial));
            trial.items += 1;
        }
        Ok(())
    }

    /// A deep copy that reports allocation failure (for `COPY`).
    pub fn try_clone(&self) -> Result<Object, ValkeyError> {
        let mut filters = Vec::new();
        filters.try_reserve_exact(self.filters.len()).map_err(|_| ValkeyError::OutOfMemory)?;
        for f in &self.filters {
            filters.push(f.try_clone()?);
        }
        Ok(Object { filters, ..*self })
    }

    /// `BF.CARD`, `Number of items inserted`: items in every sub-filter.
    pub fn items(&self) -> u64 {
        self.filters.iter().fold(0u64, |n, f| n.saturating_add(f.items)).min(i64::MAX as u64)
    }

    /// `BF.INFO Capacity`: the sub-filters' capacities summed.
    pub fn capacity(&self) -> u64 {
        self.filters.iter().fold(0u64, |n, f| n.saturating_add(f.capacity)).min(i64::MAX as u64)
    }

    /// `BF.INFO Size` and `MEMORY USAGE`: valkey-bloom's accounting.
    pub fn size(&self) -> u64 {
        let data = self.filters.iter().fold(0u64, |n, f| n.saturating_add(f.accounted()));
        accounted_size(self.slots, data).unwrap_or(u64::MAX)
    }

    /// `None` for a non-scaling object (`Expansion rate` is nil then).
    pub fn expansion(&self) -> Option<u32> {
        (self.expansion != 0).then_some(self.expansion)
    }

    pub fn fp_rate(&self) -> f64 {
        self.fp_rate
    }

    pub fn tightening(&self) -> f64 {
        self.tightening
    }

    pub fn seed_random(&self) -> bool {
        self.seed_random
    }

    /// Offers the object's buffers to `to` from buffer `from` on, for a
    /// server's active defragmentation: the list of sub-filters (buffer 0),
    /// then each sub-filter's serialized bytes. `Some(next)` when `to` asked
    /// to stop; see [`relocate_list`]. The object itself is the caller's to move.
    pub fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize> {
        relocate_list(&mut self.filters, from, to, |f, to| to.bytes(&mut f.data))
    }

    pub fn filters(&self) -> &[Filter] {
        &self.filters
    }

    /// `BF.INFO … MAXSCALEDCAPACITY`: the capacity the object can reach
    /// before a scale-out would pass the limit or its rate degrade to 0.
    pub fn max_scaled_capacity(&self, limits: Limits) -> u64 {
        let start = self.filters[0].capacity;
        scaled_capacity(start, self.fp_rate, None, self.tightening, self.expansion, limits).unwrap_or(0)
    }
}
