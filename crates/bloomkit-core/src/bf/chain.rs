//! The scalable filter: the single source of truth for what `BF.ADD` does.

use super::errors::BfError;
use super::sub_filter::{SubFilter, PREFETCH_FROM_BYTES};
use crate::common::hash::{HashPair, HashWidth};
use crate::common::memory::{relocate_list, slice_block, Bound, HeapBlocks, Limits, Relocate};
use crate::common::sizing::{options, Shape};

/// Each new sub-filter halves the error rate, so the chain's total stays
/// below the rate asked for (a geometric series).
pub const TIGHTENING_RATIO: f64 = 0.5;

/// Items hashed and prefetched together by the batch operations: enough
/// misses in flight to hide memory latency, few enough to stay in L1.
const BATCH: usize = 16;

/// Bytes RedisBloom counts for the chain header and for each sub-filter's
/// bookkeeping in `BF.INFO Size` and `MEMORY USAGE`.
const CHAIN_OVERHEAD: u64 = 32;
const LINK_OVERHEAD: u64 = 64;

/// Whether a loaded chain's counts are checked against [`check_counts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counts {
    /// Input a client sent (RESTORE, a SCANDUMP header, a file): refused
    /// when its counts lie.
    Checked,
    /// A value the server saved itself, or its primary sent: loaded as it
    /// is, so that no RDB file stops a server from starting. RedisBloom
    /// 2.8.2 writes some that fail the checks (an `EXPANSION` of 2^32 is
    /// stored as a growth of 0 on a scaling filter); the caller logs them.
    Trusted,
}

/// The rules every chain obeys, checked on whatever is loaded (SCANDUMP
/// headers, RDB values, DUMP payloads, filter files) as RedisBloom 8 checks
/// them: only known option bits, at least one sub-filter, a growth of at
/// least 1 unless the chain never grows, no sub-filter holding more items
/// than its capacity, and a total equal to the sum of the sub-filters'.
/// Anything else is `received bad data`: a count that lies would make
/// `BF.CARD` lie, and survive every save and reload.
pub fn check_counts(
    items: u64,
    chain_options: u32,
    growth: u32,
    links: impl IntoIterator<Item = (u64, u64)>,
) -> Result<(), BfError> {
    if chain_options & !options::KNOWN != 0 || (growth == 0 && chain_options & options::NO_SCALING == 0) {
        return Err(BfError::BadData);
    }
    let (mut count, mut sum) = (0usize, 0u64);
    for (capacity, link_items) in links {
        if link_items > capacity {
            return Err(BfError::BadData);
        }
        sum = sum.checked_add(link_items).ok_or(BfError::BadData)?;
        count += 1;
    }
    if count == 0 || sum != items {
        return Err(BfError::BadData);
    }
    Ok(())
}

/// Parameters of a new chain, as given to `BF.RESERVE` / `BF.INSERT`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChainParams {
    pub capacity: u64,
    pub error: f64,
    pub expansion: u32,
    pub scaling: bool,
}

/// RedisBloom's `SBChain` in its 32 bytes: the sub-filters as a boxed
/// slice (exactly as many as there are, as RedisBloom reallocates its links
/// one more at a time), the hash width read off the options.
#[derive(Debug)]
pub struct Chain {
    items: u64,
    options: u32,
    growth: u32,
    filters: Box<[SubFilter]>,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Chain>() == 32 && std::mem::size_of::<SubFilter>() == 64);

/// The list of sub-filters and each one's bit array.
impl HeapBlocks for Chain {
    fn heap_blocks(&self, each: &mut dyn FnMut(*const u8, usize)) {
        slice_block(&self.filters, each);
        for f in self.filters.iter() {
            let (ptr, len) = f.heap_block();
            each(ptr, len);
        }
    }
}

impl Chain {
    /// A new chain as `BF.RESERVE` creates it.
    pub fn new(params: ChainParams, limits: Limits) -> Result<Chain, BfError> {
        let mut chain_options = options::DEFAULT;
        let error = if params.scaling {
            params.error * TIGHTENING_RATIO
        } else {
            chain_options |= options::NO_SCALING;
            params.error
        };
        let shape = Shape::new(params.capacity, error, chain_options).ok_or(BfError::CannotCreate)?;
        limits.check(CHAIN_OVERHEAD + LINK_OVERHEAD + shape.bytes)?;
        let first = SubFilter::new(shape)?;
        Chain::from_parts(0, chain_options, params.expansion, vec![first])
    }

    /// A chain from decoded parts (RDB, SCANDUMP header), checked for consistency.
    pub fn from_parts(
        items: u64,
        options: u32,
        growth: u32,
        filters: Vec<SubFilter>,
    ) -> Result<Chain, BfError> {
        Chain::from_loaded_parts(items, options, growth, filters, Counts::Checked)
    }

    /// [`Chain::from_parts`] for a loaded value, its counts checked or trusted.
    pub fn from_loaded_parts(
        items: u64,
        options: u32,
        growth: u32,
        filters: Vec<SubFilter>,
        counts: Counts,
    ) -> Result<Chain, BfError> {
        if filters.is_empty() {
            return Err(BfError::BadData);
        }
        if counts == Counts::Checked {
            check_counts(items, options, growth, filters.iter().map(|f| (f.capacity(), f.items)))?;
        }
        Ok(Chain { items, options, growth, filters: filters.into_boxed_slice() })
    }

    #[inline]
    pub fn hash(&self, item: &[u8]) -> HashPair {
        self.width().hash(item)
    }

    /// One item: its probes are prefetched before any is tested, so that on
    /// a filter larger than the cache its k misses overlap instead of
    /// following one another (`BF.EXISTS`).
    #[inline]
    pub fn contains(&self, item: &[u8]) -> bool {
        let h = self.hash(item);
        if self.worth_prefetching() {
            self.prefetch(h);
        }
        self.contains_hash(h)
    }

    /// Whether the sub-filters together are too large to stay in cache.
    #[inline]
    fn worth_prefetching(&self) -> bool {
        self.filters.iter().map(|f| f.bytes().len()).sum::<usize>() >= PREFETCH_FROM_BYTES
    }

    #[inline]
    pub fn contains_hash(&self, h: HashPair) -> bool {
        self.filters.iter().rev().any(|f| f.contains(h))
    }

    /// Answers `contains` for each item in order, hashing a group of items
    /// first and prefetching their probes so that cache misses overlap.
    pub fn contains_each<I: AsRef<[u8]>>(&self, items: &[I], mut answer: impl FnMut(bool)) {
        for group in items.chunks(BATCH) {
            let hashes = self.hash_and_prefetch(group);
            for h in &hashes[..group.len()] {
                answer(self.contains_hash(*h));
            }
        }
    }

    /// Adds each item in order, as [`Chain::add`] would one by one, with the
    /// hashing and prefetching of [`Chain::contains_each`]. `result` sees each
    /// outcome and returns false to stop (as `BF.MADD` stops at an error).
    pub fn add_each<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        limits: Limits,
        mut result: impl FnMut(Result<bool, BfError>) -> bool,
    ) {
        for group in items.chunks(BATCH) {
            let hashes = self.hash_and_prefetch(group);
            for h in &hashes[..group.len()] {
                if !result(self.add_hash(*h, limits)) {
                    return;
                }
            }
        }
    }

    /// Hashes a group and prefetches what checking it will touch: every probe
    /// in the newest sub-filter (where adds go and most items are), and the
    /// first two in older ones, where a check usually stops at the first
    /// unset bit (a filter at most full has half its bits unset).
    #[inline]
    fn hash_and_prefetch<I: AsRef<[u8]>>(&self, group: &[I]) -> [HashPair; BATCH] {
        let mut hashes = [HashPair { a: 0, b: 0 }; BATCH];
        let prefetch = self.worth_prefetching();
        for (h, item) in hashes.iter_mut().zip(group) {
            *h = self.hash(item.as_ref());
            if prefetch {
                self.prefetch(*h);
            }
        }
        hashes
    }

    /// Prefetches an item's probes: all of them in the newest sub-filter
    /// first, then the first two in each older one.
    #[inline]
    fn prefetch(&self, h: HashPair) {
        let (newest, older) = self.filters.split_last().expect("a chain has at least one sub-filter");
        newest.prefetch(h, u32::MAX);
        for f in older.iter().rev() {
            f.prefetch(h, 2);
        }
    }

    /// Adds an item: `Ok(true)` when new, `Ok(false)` when probably present.
    #[inline]
    pub fn add(&mut self, item: &[u8], limits: Limits) -> Result<bool, BfError> {
        self.add_hash(self.hash(item), limits)
    }

    /// RedisBloom's `SBChain_Add`: a present item changes nothing; a full newest
    /// sub-filter is followed by a larger, tighter one before the item goes in.
    ///
    /// When the newest sub-filter has room, checking it and inserting into it
    /// are one pass (test-and-set): if every bit was already set, nothing
    /// changed and the item was present, exactly as a check would have said.
    pub fn add_hash(&mut self, h: HashPair, limits: Limits) -> Result<bool, BfError> {
        let (newest, older) = self.filters.split_last().expect("a chain has at least one sub-filter");
        if older.iter().rev().any(|f| f.contains(h)) {
            return Ok(false);
        }
        if newest.items >= newest.capacity() {
            if newest.contains(h) {
                return Ok(false);
            }
            self.grow(limits)?;
        }
        let newest = self.filters.last_mut().expect("a chain has at least one sub-filter");
        let newly_set = newest.insert(h);
        if newly_set {
            // Counts can come from a dump or an RDB file: they wrap, as
            // RedisBloom's size_t counters do, rather than overflow.
            newest.items = newest.items.wrapping_add(1);
            self.items = self.items.wrapping_add(1);
        }
        Ok(newly_set)
    }

    fn grow(&mut self, limits: Limits) -> Result<(), BfError> {
        if self.options & options::NO_SCALING != 0 {
            return Err(BfError::NonScalingFull);
        }
        let newest = &self.filters.last().expect("a chain has at least one sub-filter").shape();
        let capacity = newest.capacity.checked_mul(u64::from(self.growth)).ok_or(BfError::CannotScale)?;
        let shape = Shape::new(capacity, newest.error * TIGHTENING_RATIO, self.options)
            .ok_or(BfError::CannotScale)?;
        let total = self.size_bytes().checked_add(LINK_OVERHEAD + shape.bytes).ok_or(BfError::CannotScale)?;
        limits.check_growth(self.size_bytes(), total).map_err(|e| match e.bound {
            Bound::Filter => BfError::GrowthTooLarge { bytes: e.bytes, limit: e.limit },
            Bound::Memory => BfError::OverMaxmemory,
        })?;
        let added = SubFilter::new(shape).map_err(|e| match e {
            BfError::OutOfMemory => BfError::GrowthOutOfMemory,
            other => other,
        })?;
        // One more link, exactly: the list's block holds no spare room.
        let mut filters = std::mem::take(&mut self.filters).into_vec();
        if filters.try_reserve_exact(1).is_err() {
            self.filters = filters.into_boxed_slice();
            return Err(BfError::GrowthOutOfMemory);
        }
        filters.push(added);
        self.filters = filters.into_boxed_slice();
        Ok(())
    }

    /// Items added (`BF.CARD`, `Number of items inserted`).
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Sum of the sub-filters' capacities (`BF.INFO Capacity`).
    pub fn capacity(&self) -> u64 {
        self.filters.iter().map(|f| f.capacity()).fold(0, u64::saturating_add)
    }

    /// `BF.INFO Size`, also the `MEMORY USAGE` figure: RedisBloom's accounting.
    pub fn size_bytes(&self) -> u64 {
        let data = self.filters.iter().map(|f| f.bytes().len() as u64).fold(0, u64::saturating_add);
        Chain::accounted_size(self.filters.len() as u64, data).unwrap_or(u64::MAX)
    }

    /// The `Size` of a chain of `nfilters` sub-filters holding `data_bytes` of bits.
    pub fn accounted_size(nfilters: u64, data_bytes: u64) -> Option<u64> {
        LINK_OVERHEAD.checked_mul(nfilters)?.checked_add(CHAIN_OVERHEAD)?.checked_add(data_bytes)
    }

    /// `None` for a non-scaling filter (`Expansion rate` is nil then).
    pub fn expansion(&self) -> Option<u32> {
        (self.options & options::NO_SCALING == 0).then_some(self.growth)
    }

    pub fn options(&self) -> u32 {
        self.options
    }

    /// The stored growth factor, also for non-scaling filters.
    pub fn growth(&self) -> u32 {
        self.growth
    }

    /// The hash, chosen by the options.
    #[inline]
    pub fn width(&self) -> HashWidth {
        if self.options & options::FORCE64 != 0 {
            HashWidth::Bits64
        } else {
            HashWidth::Bits32
        }
    }

    pub fn filters(&self) -> &[SubFilter] {
        &self.filters
    }

    /// Offers the chain's buffers to `to` from buffer `from` on, for a
    /// server's active defragmentation: the list of sub-filters (buffer 0),
    /// then each sub-filter's bit array. `Some(next)` when `to` asked to
    /// stop; see [`relocate_list`]. The chain itself (its `Box`) is the
    /// caller's to move.
    pub fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize> {
        relocate_list(&mut self.filters, from, to, |f, to| f.relocate(to))
    }

    pub fn filters_mut(&mut self) -> &mut [SubFilter] {
        &mut self.filters
    }

    /// Estimated false-positive rate at the current fill, from the bits set.
    pub fn estimated_false_positive_rate(&self) -> f64 {
        // 1 - Π(1 - fill^k) through ln_1p/exp_m1, so that a near-empty
        // filter's tiny rate does not cancel to 0 against 1.
        let log_miss: f64 = self
            .filters
            .iter()
            .map(|f| {
                let fill = f.bits_set() as f64 / (f.shape().bytes * 8) as f64;
                (-fill.powf(f64::from(f.shape().hashes))).ln_1p()
            })
            .sum();
        -log_miss.exp_m1()
    }

    /// [`Chain::estimated_false_positive_rate`] as its base-10 logarithm,
    /// which stays finite where `fill^k` underflows (many hashes, few items).
    pub fn log10_estimated_false_positive_rate(&self) -> f64 {
        let rates: Vec<f64> = self
            .filters
            .iter()
            .map(|f| {
                let fill = f.bits_set() as f64 / (f.shape().bytes * 8) as f64;
                f64::from(f.shape().hashes) * fill.log10()
            })
            .collect();
        crate::common::sizing::log10_combined_rate(&rates)
    }

    /// A deep copy that reports allocation failure (for `COPY`).
    pub fn try_clone(&self) -> Result<Chain, BfError> {
        let mut filters = Vec::new();
        filters.try_reserve_exact(self.filters.len()).map_err(|_| BfError::OutOfMemory)?;
        for f in self.filters.iter() {
            filters.push(f.try_clone()?);
        }
        Ok(Chain {
            items: self.items,
            options: self.options,
            growth: self.growth,
            filters: filters.into_boxed_slice(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(capacity: u64, error: f64, expansion: u32, scaling: bool) -> ChainParams {
        ChainParams { capacity, error, expansion, scaling }
    }

    /// Every buffer is offered once, across calls cut short by the budget,
    /// and the chain answers the same from its moved buffers.
    #[test]
    fn relocate_offers_every_buffer_once_and_resumes() {
        use crate::common::memory::TestMover;
        let mut c = Chain::new(params(10, 0.01, 2, true), Limits::NONE).unwrap();
        let items: Vec<String> = (0..200).map(|i| format!("item{i}")).collect();
        for i in &items {
            c.add(i.as_bytes(), Limits::NONE).unwrap();
        }
        let n = c.filters().len();
        assert!(n >= 4, "{n} sub-filters");
        let before: Vec<usize> = c.filters().iter().map(|f| f.bytes().as_ptr() as usize).collect();
        let mut mover = TestMover::new(2);
        let calls = mover.run(|from, to| c.relocate(from, to));
        assert_eq!(mover.moved_from.len(), n + 1, "the list and each bit array, once");
        assert_eq!(&mover.moved_from[1..], &before[..]);
        assert_eq!(calls, (n + 1).div_ceil(2));
        assert!(items.iter().all(|i| c.contains(i.as_bytes())));
        // A cursor past the end (the chain shrank, the key was replaced) offers nothing.
        let mut mover = TestMover::new(1);
        assert_eq!(c.relocate(n + 5, &mut mover), None);
        assert!(mover.moved_from.is_empty());
    }

    #[test]
    fn scales_like_redisbloom() {
        // BF.INSERT f CAPACITY 1 ITEMS a a b c d on RedisBloom 2.8.2:
        // replies 1 0 1 1 1; sub-filters of capacity 1, 2, 4 with hashes 8, 9, 10.
        let mut c = Chain::new(params(1, 0.01, 2, true), Limits::NONE).unwrap();
        let got: Vec<bool> =
            [&b"a"[..], b"a", b"b", b"c", b"d"].iter().map(|i| c.add(i, Limits::NONE).unwrap()).collect();
        assert_eq!(got, [true, false, true, true, true]);
        let shapes: Vec<(u64, u32, u64)> =
            c.filters().iter().map(|f| (f.shape().capacity, f.shape().hashes, f.items)).collect();
        assert_eq!(shapes, [(1, 8, 1), (2, 9, 2), (4, 10, 1)]);
        assert_eq!((c.capacity(), c.size_bytes(), c.items()), (7, 248, 4));
    }

    #[test]
    fn batch_operations_answer_like_single_ones() {
        let p = params(50, 0.01, 2, true);
        let (mut one, mut batch) =
            (Chain::new(p, Limits::NONE).unwrap(), Chain::new(p, Limits::NONE).unwrap());
        let items: Vec<Vec<u8>> = (0..700u32).map(|i| (i % 500).to_le_bytes().to_vec()).collect();
        let singles: Vec<_> = items.iter().map(|i| one.add(i, Limits::NONE)).collect();
        let mut batched = Vec::new();
        batch.add_each(&items, Limits::NONE, |r| {
            batched.push(r);
            true
        });
        assert_eq!(singles, batched);
        let mut found = Vec::new();
        batch.contains_each(&items, |b| found.push(b));
        assert!(found.iter().all(|&b| b));
    }

    #[test]
    fn add_each_stops_when_told() {
        let mut c = Chain::new(params(2, 0.01, 2, false), Limits::NONE).unwrap();
        let mut seen = Vec::new();
        c.add_each(&[b"a", b"b", b"c", b"d"], Limits::NONE, |r| {
            let go_on = r.is_ok();
            seen.push(r);
            go_on
        });
        assert_eq!(seen, [Ok(true), Ok(true), Err(BfError::NonScalingFull)]);
    }

    #[test]
    fn non_scaling_filter_refuses_new_items_when_full() {
        let mut c = Chain::new(params(3, 0.1, 2, false), Limits::NONE).unwrap();
        for item in [b"a", b"b", b"c"] {
            assert_eq!(c.add(item, Limits::NONE), Ok(true));
        }
        assert_eq!(c.add(b"d", Limits::NONE), Err(BfError::NonScalingFull));
        assert_eq!(c.add(b"a", Limits::NONE), Ok(false));
        assert_eq!(c.expansion(), None);
        assert_eq!(c.size_bytes(), 104);
    }

    #[test]
    fn size_limit_refuses_creation_and_growth() {
        let limits = Limits::at_most(300);
        assert!(matches!(Chain::new(params(1000, 0.01, 2, true), limits), Err(BfError::TooLarge { .. })));
        let mut c = Chain::new(params(100, 0.01, 2, true), limits).unwrap();
        let mut refused = None;
        for i in 0..200u32 {
            if let Err(e) = c.add(&i.to_le_bytes(), limits) {
                refused = Some(e);
                break;
            }
        }
        assert!(matches!(refused, Some(BfError::GrowthTooLarge { limit: 300, .. })));
        assert_eq!(c.filters().len(), 1, "a refused growth leaves the chain as it was");
    }
}
