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
use crate::common::hash::murmur2_32;
use crate::common::memory::{Limits, Relocate};

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
}

/// The fingerprint of an item.
#[inline]
pub fn fingerprint(item: &[u8]) -> u32 {
    murmur2_32(item, FINGERPRINT_SEED)
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
        Ok(TopK { k, width, depth, decay, buckets, heap, table: decay_table(decay), draws: 0 })
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

    /// Bytes of the items the heap holds (for the module's accounting).
    pub fn item_bytes(&self) -> u64 {
        self.heap.iter().map(|s| s.bytes().len() as u64).sum()
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
        let mut h = mix64(self.draws ^ 0x5851_f42d_4c95_7f2d);
        h = mix64(h ^ ((u64::from(fp) << 32) | u64::from(row)));
        h = mix64(h ^ ((u64::from(bucket.fp) << 32) | u64::from(bucket.count)));
        h = mix64(h ^ u64::from(unit));
        self.draws = self.draws.wrapping_add(1);
        (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// The column of an item in a row.
    #[inline]
    fn cell(&self, item: &[u8], row: u32) -> usize {
        row as usize * self.width as usize + (murmur2_32(item, row) % self.width) as usize
    }

    /// The heap slot holding the item, searched from the last slot down.
    fn find(&self, fp: u32, item: &[u8]) -> Option<usize> {
        (0..self.heap.len()).rev().find(|&i| self.heap[i].holds(fp, item))
    }

    /// Adds `incr` units of an item (`TOPK.ADD` adds 1). Returns the item it
    /// expelled from the heap, if any (`Some(None)` never happens: an empty
    /// slot taken over expels nothing).
    pub fn add(&mut self, item: &[u8], incr: u32) -> Option<Box<[u8]>> {
        let fp = fingerprint(item);
        let heap_min = self.heap[0].count;
        let mut max_count = 0u32;
        for row in 0..self.depth {
            let cell = self.cell(item, row);
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
        let fp = fingerprint(item);
        let heap_min = self.heap[0].count;
        let in_heap = self.find(fp, item).is_some();
        (0..self.depth)
            .map(|row| self.buckets[self.cell(item, row)])
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
