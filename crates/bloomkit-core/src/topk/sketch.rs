//! The HeavyKeeper itself: buckets, the min-heap of heavy items, and the
//! update, count, query and list rules of RedisBloom 2.8.2, step for step
//! where its answers depend on them (the `>=` that lets ties displace the
//! heap's minimum, the one-way sift-down, the stable sort of ties in LIST).
//!
//! # How bloomkit keeps replicas identical
//!
//! RedisBloom decides each decay with the process-wide `rand()`, so the same
//! command stream leaves a replica or an AOF replay with other counts than
//! the primary. bloomkit decides it with [`TopK::draw`]: a 64-bit mix of the
//! item's fingerprint, the row, the bucket's fingerprint and count, the unit
//! being decayed and the sketch's draw counter (how many draws it has made),
//! mapped to `[0, 1)`. Every input is part of the sketch's state, and the
//! counter travels with it in the RDB value (in slot 0's pointer bytes,
//! which RedisBloom writes but never reads), so a verbatim-replicated
//! command makes the same draws everywhere, across RDB and AOF too. The
//! counter keeps draws independent: without it an item that failed to decay
//! a bucket would fail again on every repeat until the bucket changed.
//! With decay 1 every draw succeeds, as in RedisBloom, so the answers are
//! RedisBloom's exactly; below 1 they are statistically the same.

use super::errors::TopkError;
use super::*;
use crate::common::hash::{murmur2_32, murmur2_32_seeds, Mod32};
use crate::common::memory::{slice_block, vec_block, HeapBlocks, Limits, Relocate};

/// Parameters of a new sketch, as given to `TOPK.RESERVE` (already checked).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TopkParams {
    pub k: u32,
    pub width: u32,
    pub depth: u32,
    pub decay: f64,
}

impl TopkParams {
    /// RedisBloom's accounting (`MEMORY USAGE`): its struct, the buckets and
    /// the heap slots; `None` when it does not fit 64 bits.
    pub fn size_bytes(&self) -> Option<u64> {
        let buckets = u64::from(self.width).checked_mul(u64::from(self.depth))?.checked_mul(BUCKET_BYTES)?;
        let heap = u64::from(self.k).checked_mul(SLOT_BYTES)?;
        STRUCT_BYTES.checked_add(buckets)?.checked_add(heap)
    }
}

/// One bucket: the fingerprint that owns it and its count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bucket {
    pub fp: u32,
    pub count: u32,
}

/// One heap slot: an item (none in a slot never filled), its fingerprint
/// and its count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub fp: u32,
    pub count: u32,
    pub item: Option<Box<[u8]>>,
}

impl Slot {
    /// The item's bytes (empty for an empty slot).
    pub fn bytes(&self) -> &[u8] {
        self.item.as_deref().unwrap_or(&[])
    }

    fn holds(&self, fp: u32, item: &[u8]) -> bool {
        self.fp == fp && self.bytes() == item
    }
}

/// A Top-K sketch.
#[derive(Debug)]
pub struct TopK {
    pub(super) k: u32,
    pub(super) width: u32,
    pub(super) depth: u32,
    pub(super) decay: f64,
    /// `depth` rows of `width` buckets, row-major.
    pub(super) buckets: Vec<Bucket>,
    /// `k` slots, a min-heap on count (slot 0 the minimum).
    pub(super) heap: Vec<Slot>,
    /// `decay^i` for `i < 256`, computed with `pow` as RedisBloom's RESERVE does.
    pub(super) table: Box<[f64; DECAY_TABLE_LEN]>,
    /// Decay draws made so far: an input of the next one.
    pub(super) draws: u64,
    /// `% width` by multiplication (derived from `width`).
    pub(super) column: Mod32,
}

/// Hashes computed at once ([`murmur2_32_seeds`]).
const LANES: usize = 8;

/// An item's hashes: its fingerprint and one per row, computed `LANES`
/// interleaved chains at a time (the fingerprint and rows 0 to 6 first).
struct ItemHashes<'a> {
    item: &'a [u8],
    group: [u32; LANES],
}

impl<'a> ItemHashes<'a> {
    #[inline(always)]
    fn new(item: &'a [u8]) -> ItemHashes<'a> {
        let seeds = std::array::from_fn(|i| if i == 0 { FINGERPRINT_SEED } else { i as u32 - 1 });
        ItemHashes { item, group: murmur2_32_seeds(item, seeds) }
    }

    /// The fingerprint: read it before any row.
    #[inline(always)]
    fn fingerprint(&self) -> u32 {
        self.group[0]
    }

    /// Row `row`'s hash (`murmur2_32(item, row)`); rows are asked for in
    /// order from 0.
    #[inline(always)]
    fn row(&mut self, row: u32) -> u32 {
        let lane = (row as usize + 1) % LANES;
        if lane == 0 {
            self.group = murmur2_32_seeds(self.item, std::array::from_fn(|i| row.wrapping_add(i as u32)));
        }
        self.group[lane]
    }
}

/// The fingerprint of an item.
#[inline]
pub fn fingerprint(item: &[u8]) -> u32 {
    murmur2_32(item, FINGERPRINT_SEED)
}

/// The draw numbered `draws` (see the module doc): a function of its
/// inputs only, so that draws whose inputs are known can be computed
/// together.
#[inline(always)]
fn draw_value(draws: u64, fp: u32, row: u32, bucket: Bucket, unit: u32) -> f64 {
    let mut h = mix64(draws ^ 0x5851_f42d_4c95_7f2d);
    h = mix64(h ^ ((u64::from(fp) << 32) | u64::from(row)));
    h = mix64(h ^ ((u64::from(bucket.fp) << 32) | u64::from(bucket.count)));
    h = mix64(h ^ u64::from(unit));
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The draws of one unit (`unit` 1) for the first `m` rows listed, the
/// `j`-th numbered `first + j` (the lanes past `m` are not draws).
#[inline(always)]
fn draw_group(first: u64, fp: u32, rows: &[(usize, u32, Bucket); LANES], m: usize) -> [f64; LANES] {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512dq") {
        let row_keys = std::array::from_fn(|j| (u64::from(fp) << 32) | u64::from(rows[j].1));
        let bucket_keys =
            std::array::from_fn(|j| (u64::from(rows[j].2.fp) << 32) | u64::from(rows[j].2.count));
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { draw_lanes_avx512(first, &row_keys, &bucket_keys) };
    }
    draw_group_portable(first, fp, rows, m)
}

/// [`draw_group`] on any CPU: only the `m` draws, one chain each.
#[inline(always)]
fn draw_group_portable(first: u64, fp: u32, rows: &[(usize, u32, Bucket); LANES], m: usize) -> [f64; LANES] {
    let mut draws = [0.0f64; LANES];
    for (j, ((_, r, b), d)) in rows[..m].iter().zip(&mut draws).enumerate() {
        *d = draw_value(first.wrapping_add(j as u64), fp, *r, *b, 1);
    }
    draws
}

/// [`draw_value`] for every lane, `unit` 1, the draw numbers `first + j`,
/// from `(fp << 32) | row` and `(bucket.fp << 32) | bucket.count`: the
/// same operations lane by lane, written so that the compiler can do
/// each step for all lanes at once.
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn draw_lanes(first: u64, row_keys: &[u64; LANES], bucket_keys: &[u64; LANES]) -> [f64; LANES] {
    let mut h: [u64; LANES] = std::array::from_fn(|j| first.wrapping_add(j as u64) ^ 0x5851_f42d_4c95_7f2d);
    for x in &mut h {
        *x = mix64(*x);
    }
    for (x, k) in h.iter_mut().zip(row_keys) {
        *x = mix64(*x ^ k);
    }
    for (x, k) in h.iter_mut().zip(bucket_keys) {
        *x = mix64(*x ^ k);
    }
    for x in &mut h {
        *x = mix64(*x ^ 1);
    }
    h.map(|x| (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64))
}

/// [`draw_lanes`] compiled for AVX-512 (eight 64-bit multiplies at once).
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512DQ.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn draw_lanes_avx512(first: u64, row_keys: &[u64; LANES], bucket_keys: &[u64; LANES]) -> [f64; LANES] {
    draw_lanes(first, row_keys, bucket_keys)
}

/// `decay^i` for the table's entries.
pub(super) fn decay_table(decay: f64) -> Box<[f64; DECAY_TABLE_LEN]> {
    let mut table = Box::new([0.0; DECAY_TABLE_LEN]);
    for (i, v) in table.iter_mut().enumerate() {
        *v = decay.powf(i as f64);
    }
    table
}

/// splitmix64's finaliser: every input bit moves every output bit.
#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Zeroed buckets and empty slots, allocated fallibly.
pub(super) fn allocate(k: u32, width: u32, depth: u32) -> Result<(Vec<Bucket>, Vec<Slot>), TopkError> {
    let cells = usize::try_from(u64::from(width) * u64::from(depth)).map_err(|_| TopkError::OutOfMemory)?;
    let mut buckets = Vec::new();
    buckets.try_reserve_exact(cells).map_err(|_| TopkError::OutOfMemory)?;
    buckets.resize(cells, Bucket::default());
    let mut heap = Vec::new();
    heap.try_reserve_exact(k as usize).map_err(|_| TopkError::OutOfMemory)?;
    heap.resize_with(k as usize, Slot::default);
    Ok((buckets, heap))
}

/// The buckets, the heap, the decay table and each item the heap holds.
impl HeapBlocks for TopK {
    fn heap_blocks(&self, each: &mut dyn FnMut(*const u8, usize)) {
        vec_block(&self.buckets, each);
        vec_block(&self.heap, each);
        each(self.table.as_ptr().cast(), std::mem::size_of::<[f64; DECAY_TABLE_LEN]>());
        for slot in &self.heap {
            if let Some(item) = &slot.item {
                slice_block(item, each);
            }
        }
    }
}

impl TopK {
    /// A new empty sketch; its size is checked against `limits` before
    /// anything is allocated.
    pub fn new(params: TopkParams, limits: Limits) -> Result<TopK, TopkError> {
        let TopkParams { k, width, depth, decay } = params;
        if k == 0 || width == 0 || depth == 0 || !(decay > 0.0 && decay <= 1.0) {
            return Err(TopkError::BadData);
        }
        // A size past 2^64 bytes is over any limit (and fails to allocate without one).
        limits.check(params.size_bytes().unwrap_or(u64::MAX))?;
        let (buckets, heap) = allocate(k, width, depth)?;
        Ok(TopK::assemble(params, buckets, heap, 0))
    }

    /// A sketch of these arrays, with what is derived from its parameters
    /// (the decay table, the column reducer) derived here alone.
    pub(super) fn assemble(params: TopkParams, buckets: Vec<Bucket>, heap: Vec<Slot>, draws: u64) -> TopK {
        let TopkParams { k, width, depth, decay } = params;
        TopK {
            k,
            width,
            depth,
            decay,
            buckets,
            heap,
            table: decay_table(decay),
            draws,
            column: Mod32::new(width),
        }
    }

    pub fn params(&self) -> TopkParams {
        TopkParams { k: self.k, width: self.width, depth: self.depth, decay: self.decay }
    }

    /// `MEMORY USAGE`, RedisBloom's figure: `2088 + 8 x width x depth + 24 x k`.
    pub fn size_bytes(&self) -> u64 {
        self.params().size_bytes().unwrap_or(u64::MAX)
    }

    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    pub fn heap(&self) -> &[Slot] {
        &self.heap
    }

    pub fn draws(&self) -> u64 {
        self.draws
    }

    /// A copy, or `OutOfMemory`.
    pub fn try_clone(&self) -> Result<TopK, TopkError> {
        let (mut buckets, mut heap) = allocate(self.k, self.width, self.depth)?;
        buckets.copy_from_slice(&self.buckets);
        heap.clone_from_slice(&self.heap);
        Ok(TopK { buckets, heap, table: self.table.clone(), ..*self })
    }

    /// The probability that one unit decays a bucket of this count:
    /// RedisBloom's table lookup, and its formula past the table.
    #[inline]
    fn decay_probability(&self, count: u32) -> f64 {
        match self.table.get(count as usize) {
            Some(&p) => p,
            None => self.table[255].powf(f64::from(count / 255)) * self.table[(count % 255) as usize],
        }
    }

    /// A draw in `[0, 1)` decided by the sketch's state (see the module doc).
    #[inline]
    fn draw(&mut self, fp: u32, row: u32, bucket: Bucket, unit: u32) -> f64 {
        let value = draw_value(self.draws, fp, row, bucket, unit);
        self.draws = self.draws.wrapping_add(1);
        value
    }

    /// The bucket of a row whose hash of the item is `hash`.
    #[inline(always)]
    fn cell(&self, hash: u32, row: u32) -> usize {
        row as usize * self.width as usize + self.column.reduce(hash) as usize
    }

    /// The heap slot holding the item, searched from the last slot down.
    /// Four fingerprints are compared at a time, with one branch, and only
    /// a group holding the fingerprint is searched slot by slot.
    #[inline]
    fn find(&self, fp: u32, item: &[u8]) -> Option<usize> {
        let heap = &self.heap;
        let mut end = heap.len();
        while end >= 4 {
            let g = &heap[end - 4..end];
            if (g[0].fp == fp) | (g[1].fp == fp) | (g[2].fp == fp) | (g[3].fp == fp) {
                if let Some(i) = (end - 4..end).rev().find(|&i| heap[i].holds(fp, item)) {
                    return Some(i);
                }
            }
            end -= 4;
        }
        (0..end).rev().find(|&i| heap[i].holds(fp, item))
    }

    /// Adds `incr` units of an item (`TOPK.ADD` adds 1). Returns the item it
    /// expelled from the heap, if any (`Some(None)` never happens: an empty
    /// slot taken over expels nothing).
    pub fn add(&mut self, item: &[u8], incr: u32) -> Option<Box<[u8]>> {
        self.add_with(item, incr, incr == 1)
    }

    /// [`TopK::add`], its rows updated by [`TopK::update_rows_once`] when
    /// `once` (which needs `incr` 1), else one row after another.
    #[inline(always)]
    fn add_with(&mut self, item: &[u8], incr: u32, once: bool) -> Option<Box<[u8]>> {
        let mut hashes = ItemHashes::new(item);
        let fp = hashes.fingerprint();
        let heap_min = self.heap[0].count;
        let max_count = if once {
            self.update_rows_once(&mut hashes, fp)
        } else {
            self.update_rows(&mut hashes, fp, incr)
        };
        if max_count < heap_min {
            return None;
        }
        match self.find(fp, item) {
            Some(i) => {
                self.heap[i].count = max_count;
                self.sift_down(i);
                None
            }
            None => {
                let slot = Slot { fp, count: max_count, item: Some(item.into()) };
                let expelled = std::mem::replace(&mut self.heap[0], slot).item;
                self.sift_down(0);
                expelled
            }
        }
    }

    /// One unit of an item (`TOPK.ADD`) into its bucket of every row; the
    /// largest count among them after. The same steps and draws as
    /// [`TopK::update_rows`] with `incr` 1, in another order: rows never
    /// share a bucket, so each row's outcome depends only on its own bucket
    /// and on its draw's number (the draws made before it). The rows are
    /// taken `LANES` at a time: their buckets are read, the rows whose
    /// bucket another item owns are listed, and their draws (the `j`-th
    /// such row's numbered `draws + j`, as one row after another would
    /// number it) are computed together, as independent chains the CPU
    /// overlaps, before any decision is applied.
    #[inline(always)]
    fn update_rows_once(&mut self, hashes: &mut ItemHashes<'_>, fp: u32) -> u32 {
        let mut max_count = 0u32;
        let mut row = 0u32;
        while row < self.depth {
            let n = (self.depth - row).min(LANES as u32);
            let mut colliding = [(0usize, 0u32, Bucket::default()); LANES];
            let mut m = 0usize;
            for r in row..row + n {
                let cell = self.cell(hashes.row(r), r);
                let b = self.buckets[cell];
                if b.count == 0 {
                    self.buckets[cell] = Bucket { fp, count: 1 };
                    max_count = max_count.max(1);
                } else if b.fp == fp {
                    let count = b.count.wrapping_add(1);
                    self.buckets[cell].count = count;
                    max_count = max_count.max(count);
                } else {
                    colliding[m] = (cell, r, b);
                    m += 1;
                }
            }
            let draws = draw_group(self.draws, fp, &colliding, m);
            for ((cell, _, b), d) in colliding[..m].iter().zip(draws) {
                if d < self.decay_probability(b.count) {
                    let count = b.count - 1;
                    if count == 0 {
                        self.buckets[*cell] = Bucket { fp, count: 1 };
                        max_count = max_count.max(1);
                    } else {
                        self.buckets[*cell].count = count;
                    }
                }
            }
            self.draws = self.draws.wrapping_add(m as u64);
            row += n;
        }
        max_count
    }

    /// `incr` units of an item into its bucket of every row, one row after
    /// another; the largest count among them after.
    fn update_rows(&mut self, hashes: &mut ItemHashes<'_>, fp: u32, incr: u32) -> u32 {
        let mut max_count = 0u32;
        for row in 0..self.depth {
            let cell = self.cell(hashes.row(row), row);
            let b = self.buckets[cell];
            if b.count == 0 {
                self.buckets[cell] = Bucket { fp, count: incr };
                max_count = max_count.max(incr);
            } else if b.fp == fp {
                let count = b.count.wrapping_add(incr);
                self.buckets[cell].count = count;
                max_count = max_count.max(count);
            } else {
                let mut unit = incr;
                while unit > 0 {
                    let b = self.buckets[cell];
                    let p = self.decay_probability(b.count);
                    if self.draw(fp, row, b, unit) < p {
                        let count = b.count - 1;
                        if count == 0 {
                            self.buckets[cell] = Bucket { fp, count: unit };
                            max_count = max_count.max(unit);
                            break;
                        }
                        self.buckets[cell].count = count;
                    }
                    unit -= 1;
                }
            }
        }
        max_count
    }

    /// RedisBloom's sift-down from `start`, exactly (it decides tie order):
    /// equal counts move down at the first step, then only smaller ones.
    fn sift_down(&mut self, start: usize) {
        let len = self.heap.len();
        if len < 2 || start > (len - 2) / 2 {
            return;
        }
        let smaller_child = |heap: &[Slot], parent: usize| {
            let c = 2 * parent + 1;
            if c + 1 < len && heap[c + 1].count < heap[c].count {
                c + 1
            } else {
                c
            }
        };
        let mut child = smaller_child(&self.heap, start);
        if self.heap[child].count > self.heap[start].count {
            return;
        }
        let kept = std::mem::take(&mut self.heap[start]);
        let mut hole = start;
        loop {
            self.heap[hole] = std::mem::take(&mut self.heap[child]);
            hole = child;
            if hole > (len - 2) / 2 {
                break;
            }
            child = smaller_child(&self.heap, hole);
            if self.heap[child].count >= kept.count {
                break;
            }
        }
        self.heap[hole] = kept;
    }

    /// `TOPK.QUERY`: whether the item is in the heap (count 0 included).
    pub fn query(&self, item: &[u8]) -> bool {
        self.find(fingerprint(item), item).is_some()
    }

    /// `TOPK.COUNT`: the largest count of the item's buckets, counting a
    /// bucket only if the item is not in the heap or the bucket's count is
    /// at least the heap's minimum (RedisBloom's rule).
    pub fn count(&self, item: &[u8]) -> u32 {
        let mut hashes = ItemHashes::new(item);
        let fp = hashes.fingerprint();
        let heap_min = self.heap[0].count;
        let in_heap = self.find(fp, item).is_some();
        (0..self.depth)
            .map(|row| self.buckets[self.cell(hashes.row(row), row)])
            .filter(|b| b.fp == fp && (!in_heap || b.count >= heap_min))
            .map(|b| b.count)
            .max()
            .unwrap_or(0)
    }

    /// `TOPK.LIST`: the heap by count, largest first, ties in slot order
    /// (RedisBloom's glibc qsort is a stable merge sort), up to the first
    /// count of 0.
    pub fn list(&self) -> Vec<&Slot> {
        let mut slots: Vec<&Slot> = self.heap.iter().collect();
        slots.sort_by_key(|s| std::cmp::Reverse(s.count));
        slots.into_iter().take_while(|s| s.count > 0).collect()
    }

    /// Offers the buckets (buffer 0), the heap (buffer 1) and each item
    /// (buffers 2 on) to active defrag from buffer `from` on; `Some(next)`
    /// when `to.should_stop()` cut the walk short.
    pub fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize> {
        let last = self.heap.len() + 1;
        for next in from..=last {
            if next > from && to.should_stop() {
                return Some(next);
            }
            match next {
                0 => to.vec(&mut self.buckets),
                1 => to.vec(&mut self.heap),
                i => {
                    if let Some(item) = self.heap[i - 2].item.as_mut() {
                        to.bytes(item);
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn sketch(k: u32, width: u32, depth: u32, decay: f64) -> TopK {
        TopK::new(TopkParams { k, width, depth, decay }, Limits::NONE).unwrap()
    }

    fn listed(t: &TopK) -> Vec<(String, u32)> {
        t.list().iter().map(|s| (String::from_utf8_lossy(s.bytes()).into_owned(), s.count)).collect()
    }

    #[test]
    fn the_dump_vector_stream() {
        // TOPK.RESERVE tk 2 8 2 0.9; TOPK.ADD tk a b a
        let mut t = sketch(2, 8, 2, 0.9);
        assert_eq!(t.add(b"a", 1), None);
        assert_eq!(t.add(b"b", 1), None);
        assert_eq!(t.add(b"a", 1), None);
        assert_eq!(listed(&t), [("a".into(), 2), ("b".into(), 1)]);
        assert_eq!(fingerprint(b"a"), 0xf23cf517);
        assert_eq!(fingerprint(b"b"), 0x2adfed97);
        assert_eq!(t.buckets[6], Bucket { fp: 0xf23cf517, count: 2 });
        assert_eq!(t.buckets[8 + 4], Bucket { fp: 0xf23cf517, count: 2 });
        assert_eq!(t.buckets[4], Bucket { fp: 0x2adfed97, count: 1 });
        assert_eq!(t.buckets[8 + 1], Bucket { fp: 0x2adfed97, count: 1 });
        assert_eq!((t.heap[0].fp, t.heap[0].count), (0x2adfed97, 1));
        assert_eq!((t.heap[1].fp, t.heap[1].count), (0xf23cf517, 2));
        assert_eq!(t.count(b"a"), 2);
        assert!(t.query(b"b") && !t.query(b"c"));
    }

    #[test]
    fn ties_displace_the_minimum_and_expel() {
        let mut t = sketch(1, 50, 3, 1.0);
        assert_eq!(t.add(b"x", 1), None); // empty slot: nothing expelled
        assert_eq!(t.add(b"y", 1).as_deref(), Some(&b"x"[..])); // a tie displaces
        assert_eq!(listed(&t), [("y".into(), 1)]);
        // An increment of 0 enters a heap with empty slots, and queries true.
        let mut t = sketch(3, 50, 3, 1.0);
        t.add(b"z", 0);
        assert!(t.query(b"z"));
        assert!(listed(&t).is_empty());
    }

    #[test]
    fn decay_one_always_takes_over_a_colliding_bucket() {
        let mut t = sketch(2, 1, 1, 1.0);
        t.add(b"a", 3);
        t.add(b"b", 5); // units 5, 4, 3 decay a's count to 0; b takes it with 3
        assert_eq!(t.buckets[0], Bucket { fp: fingerprint(b"b"), count: 3 });
        assert_eq!(t.count(b"b"), 3);
        assert_eq!(t.count(b"a"), 0);
    }

    #[test]
    fn draws_are_deterministic_and_spread() {
        let run = || {
            let mut t = sketch(5, 4, 3, 0.9);
            for i in 0..5000u32 {
                t.add(format!("i{}", (i * 7919) % 97 % (1 + i % 13)).as_bytes(), 1 + i % 3);
            }
            (t.buckets.clone(), t.heap.clone(), t.draws)
        };
        let (a, b) = (run(), run());
        assert_eq!(a, b);
        assert!(a.2 > 1000, "draws were made: {}", a.2);
        let mut t = sketch(1, 1, 1, 0.5);
        let draws: Vec<f64> =
            (0..10_000u32).map(|u| t.draw(1, 2, Bucket { fp: 3, count: 4 }, u % 3)).collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
    }

    /// The grouped search finds what a scan from the last slot down finds,
    /// among repeated fingerprints and items too.
    #[test]
    fn find_is_the_scan_from_the_top() {
        let mut state = 0x7777_1234_0000_0001u64;
        let mut next = move || {
            state = mix64(state.wrapping_add(0x9e37_79b9_7f4a_7c15));
            state
        };
        for k in 1..=13u32 {
            let mut t = sketch(k, 4, 1, 1.0);
            for _ in 0..300 {
                for slot in t.heap.iter_mut() {
                    let item = format!("x{}", next() % 5);
                    // Some slots share a fingerprint with other items.
                    let fp = if next() % 3 == 0 { 7 } else { fingerprint(item.as_bytes()) };
                    *slot = Slot { fp, count: 1, item: (next() % 6 != 0).then(|| item.as_bytes().into()) };
                }
                for probe in 0..6 {
                    let item = format!("x{probe}");
                    for fp in [7, fingerprint(item.as_bytes()), 0] {
                        let want = (0..t.heap.len()).rev().find(|&i| t.heap[i].holds(fp, item.as_bytes()));
                        assert_eq!(t.find(fp, item.as_bytes()), want);
                        assert_eq!(
                            t.find(fp, b""),
                            (0..t.heap.len()).rev().find(|&i| t.heap[i].holds(fp, b""))
                        );
                    }
                }
            }
        }
    }

    /// The lanes' draws are [`draw_value`]'s, on every path this CPU has.
    #[test]
    fn lane_draws_equal_one_at_a_time() {
        let mut state = 0x0123_4567_89ab_cdefu64;
        let mut next = move || {
            state = mix64(state.wrapping_add(0x9e37_79b9_7f4a_7c15));
            state
        };
        for _ in 0..2000 {
            let first = next();
            let fp = next() as u32;
            let rows: [(usize, u32, Bucket); LANES] = std::array::from_fn(|_| {
                let r = if next() % 2 == 0 { next() as u32 % 8 } else { next() as u32 };
                (0, r, Bucket { fp: next() as u32, count: next() as u32 % 600 })
            });
            let want: [f64; LANES] = std::array::from_fn(|j| {
                draw_value(first.wrapping_add(j as u64), fp, rows[j].1, rows[j].2, 1)
            });
            let row_keys = std::array::from_fn(|j| (u64::from(fp) << 32) | u64::from(rows[j].1));
            let bucket_keys =
                std::array::from_fn(|j| (u64::from(rows[j].2.fp) << 32) | u64::from(rows[j].2.count));
            let bits = |v: [f64; LANES]| v.map(f64::to_bits);
            assert_eq!(bits(draw_lanes(first, &row_keys, &bucket_keys)), bits(want));
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512dq")
            {
                // SAFETY: the CPU has the features.
                assert_eq!(bits(unsafe { draw_lanes_avx512(first, &row_keys, &bucket_keys) }), bits(want));
            }
            for m in 0..=LANES {
                assert_eq!(bits(draw_group(first, fp, &rows, m))[..m], bits(want)[..m]);
                assert_eq!(bits(draw_group_portable(first, fp, &rows, m))[..m], bits(want)[..m]);
            }
        }
    }

    /// TOPK.ADD's rows taken together make the same sketch, draw for draw,
    /// as one row after another, whatever the shape, decay and stream.
    #[test]
    fn rows_taken_together_equal_one_after_another() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as u32
        };
        for (k, width, depth, decay) in [
            (5, 4, 3, 0.9),
            (10, 16, 7, 0.925),
            (3, 2, 8, 0.5),
            (7, 5, 9, 0.99),
            (4, 3, 17, 1.0),
            (50, 64, 1, 0.8),
        ] {
            let (mut fast, mut slow) = (sketch(k, width, depth, decay), sketch(k, width, depth, decay));
            for i in 0..4000u32 {
                let item = format!("i{}", next() % (1 + i % 97));
                // Some heavier counts first, so that draws past the table happen too.
                let incr = if i < 200 && i % 5 == 0 { 1 + next() % 400 } else { 1 };
                let a = fast.add(item.as_bytes(), incr);
                let b = slow.add_with(item.as_bytes(), incr, false);
                assert_eq!(a, b, "expelled, step {i}");
            }
            assert_eq!((fast.buckets, fast.heap, fast.draws), (slow.buckets, slow.heap, slow.draws));
        }
    }

    #[test]
    fn a_repeated_colliding_item_eventually_decays_a_static_bucket() {
        // Without the draw counter the same draw would repeat forever.
        let mut t = sketch(1, 1, 1, 0.9);
        t.add(b"owner", 10);
        let mut took_over = false;
        for _ in 0..2000 {
            t.add(b"other", 1);
            took_over |= t.buckets[0].fp == fingerprint(b"other");
        }
        assert!(took_over);
    }

    #[test]
    fn decay_past_the_table_uses_redisbloom_formula() {
        let t = sketch(1, 1, 1, 0.99);
        let p = t.decay_probability(600);
        assert_eq!(p, t.table[255].powf(2.0) * t.table[90]);
        assert_eq!(t.decay_probability(3), 0.99f64.powf(3.0));
    }

    #[test]
    fn sift_down_moves_ties_down_one_level_first() {
        let mut t = sketch(3, 8, 1, 1.0);
        t.heap = vec![
            Slot { fp: 1, count: 5, item: Some(b"p".as_slice().into()) },
            Slot { fp: 2, count: 5, item: Some(b"q".as_slice().into()) },
            Slot { fp: 3, count: 7, item: Some(b"r".as_slice().into()) },
        ];
        t.sift_down(0);
        assert_eq!(t.heap.iter().map(|s| s.fp).collect::<Vec<_>>(), [2, 1, 3]);
    }

    #[test]
    fn relocate_offers_every_buffer() {
        use crate::common::memory::TestMover;
        let mut t = sketch(4, 8, 2, 1.0);
        for item in ["a", "b", "c"] {
            t.add(item.as_bytes(), 1);
        }
        let before = (t.buckets.clone(), t.heap.clone());
        let mut mover = TestMover::new(2);
        mover.run(|from, to| t.relocate(from, to));
        assert_eq!(mover.moved_from.len(), 2 + 3);
        assert_eq!((t.buckets.clone(), t.heap.clone()), before);
    }
}
