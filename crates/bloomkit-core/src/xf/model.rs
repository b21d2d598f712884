//! What an expandable filter (`XF.*`) takes at n items, by simulation.
//!
//! Its bytes follow no closed formula: blocks split one at a time as they
//! fill (each at its own threshold), fingerprint lengths follow a schedule
//! that depends on the rate already spent, and the allocator rounds every
//! block to a size class. So this module grows a model of the filter,
//! block by block, with the filter's own rules ([`super::filter`]):
//! `grow_threshold`, `doubles`, `grows` and `deepest_level` for when and
//! how a block grows, `entry_at`, `give_bit` and `fbits_at_level` for each
//! entry, `units` for the mass that feeds back into the schedule,
//! `directory_bytes` for the directory, and a real [`Block`] built once per
//! shape for a block's bytes. What is not kept is the packing of entries
//! into words: a block here is a list of entries, so an add costs tens of
//! nanoseconds instead of a shift of the block's bits.
//!
//! Past [`RESIDENT`] entries the model keeps a part of the hash space and
//! drops the rest, halving that part each time it fills again: hashes are
//! uniform, so each half of a filter holds what the whole holds at half
//! the items, block for block, and the part kept stands for the whole
//! (its bytes times the halvings). Block for block but for their split
//! thresholds: a block's share of their spread is read from the last bits
//! of its prefix (`split_at`), which within the part include the bits of
//! the halvings' path, so a part's shallow blocks take the whole's shares
//! offset by up to half an interval either way (a sixteenth of the spread
//! three levels below the part's root). The offset averages out over parts, and
//! at [`RESIDENT`] the part's blocks are eight levels or more below its
//! root, where it is below the spread's resolution; the tests, which keep
//! 4,096 entries, average several models. Two things are global and are kept for
//! the whole filter rather than the part: the mass (every add counts as
//! the adds it stands for, so the schedule sees the rate the real filter
//! would have spent) and the directory (from the deepest block). Memory then stays under a few tens of MB
//! and time grows with log n: a filter of 10^10 items takes about
//! 4 million adds.
//!
//! The model is checked against real filters (`XfFilter`, in process) at
//! 16 points per doubling in this module's tests; `calc`'s own tests check
//! it against a server's `XF.INFO`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::block::{max_entries, Block, Entry};
use super::filter::{
    deepest_level, directory_bytes, doubles, entry_at, fbits_at_level, fbits_within, give_bit,
    grow_threshold, grows, held_by_voids, own_bytes, rate_units, units, XfParams, GROW_QBITS, MASS_BITS,
};

/// Entries the model holds before it keeps half of its part of the hash
/// space: about 500 blocks, whose bytes vary by about 0.3% from one set of
/// items to another (as a real filter of that size does).
pub const RESIDENT: u64 = 1 << 18;

/// One block: its place (depth and prefix, as in the filter), its entries,
/// and what its bytes and the split rule need.
struct ModelBlock {
    depth: u32,
    prefix: u64,
    entries: Vec<Entry>,
    /// Entries in the lower half of the quotients, and entries whose
    /// fingerprint ran out: what decides whether a full block grows
    /// (core's `grows`).
    lower: u32,
    voids: u32,
    min_f: u32,
    max_f: u32,
    bytes: u64,
}

impl ModelBlock {
    fn new(depth: u32, prefix: u64, entries: Vec<Entry>) -> ModelBlock {
        ModelBlock { depth, prefix, entries, lower: 0, voids: 0, min_f: 0, max_f: 0, bytes: 0 }
    }
}

/// A model of one filter grown with random items.
pub struct XfModel {
    error: f64,
    first: u32,
    last: u32,
    qbits: u32,
    max_capacity: u64,
    /// The part of the hash space kept: hashes whose top `shift` bits are
    /// `path` (each halving keeps a half at random, so that the split
    /// thresholds and fingerprint lengths met are a sample of the filter's,
    /// not always those of one corner).
    shift: u32,
    path: u128,
    blocks: Vec<ModelBlock>,
    /// Blocks by the hash's `dir_bits` bits after the `shift` bits.
    dir: Vec<u32>,
    dir_bits: u32,
    /// Entries and blocks' bytes of the part kept.
    entries: u64,
    block_bytes: u64,
    /// The whole filter's mass, in `2^-MASS_BITS` units.
    mass: u128,
    /// Items the model stands for.
    items: u64,
    resident: u64,
    rng: u64,
    /// A block took `max_entries` and still could not split (only for
    /// error rates so high that most entries run out of fingerprint).
    stuck: bool,
}

/// splitmix64: a fast, well-mixed sequence (the model's items).
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl XfModel {
    /// An empty filter as `XF.RESERVE` lays it out; `seed` picks the items.
    pub fn new(params: XfParams, seed: u64) -> XfModel {
        XfModel::with_resident(params, seed, RESIDENT)
    }

    pub fn with_resident(params: XfParams, seed: u64, resident: u64) -> XfModel {
        let (first, last) = (params.first_level(), params.last_level());
        let qbits = first.min(GROW_QBITS);
        let depth = first - qbits;
        let empty = block_bytes(qbits, 0, 0, 0);
        let blocks: Vec<ModelBlock> = (0..1u64 << depth)
            .map(|prefix| ModelBlock { bytes: empty, ..ModelBlock::new(depth, prefix, Vec::new()) })
            .collect();
        XfModel {
            error: params.error_rate,
            first,
            last,
            qbits,
            max_capacity: params.max_capacity,
            shift: 0,
            path: 0,
            block_bytes: empty * blocks.len() as u64,
            dir: (0..blocks.len() as u32).collect(),
            dir_bits: depth,
            blocks,
            entries: 0,
            mass: 0,
            items: 0,
            resident,
            rng: seed,
            stuck: false,
        }
    }

    /// Items the model stands for.
    /// The blocks a filter of `params` starts with (one below a lone
    /// block's quotients, 2^k blocks of [`GROW_QBITS`] above).
    pub fn first_blocks(params: XfParams) -> u64 {
        1u64 << (params.first_level() - params.first_level().min(GROW_QBITS))
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    /// Whether it can take no more: `MAXCAPACITY`, or a crowded block.
    pub fn is_full(&self) -> bool {
        self.items >= self.max_capacity || self.stuck
    }

    /// The rate guaranteed now (`XF.INFO`'s), which the schedule reads.
    pub fn guaranteed_rate(&self) -> f64 {
        self.mass as f64 / (1u64 << MASS_BITS) as f64
    }

    /// Adds items until it stands for at least `n` (or is full).
    pub fn grow_to(&mut self, n: u64) {
        while self.items < n && !self.is_full() {
            if self.entries >= self.resident && self.blocks.iter().all(|b| b.depth > self.shift) {
                self.halve();
            }
            self.add_one();
        }
    }

    /// The filter's bytes, as `XF.INFO` reports them.
    pub fn bytes(&self) -> f64 {
        if self.is_one() {
            return (own_bytes() + self.blocks[0].bytes) as f64;
        }
        let scale = 2f64.powi(self.shift as i32);
        let depth = self.blocks.iter().map(|b| b.depth).max().unwrap_or(0);
        let rest = own_bytes() + directory_bytes(1 << depth);
        self.block_bytes as f64 * scale + rest as f64
    }

    /// One block, undivided, with no directory (`Store::One`).
    fn is_one(&self) -> bool {
        self.shift == 0 && self.blocks.len() == 1 && self.blocks[0].depth == 0
    }

    /// The length of an entry added now, with the whole filter's mass.
    /// `None`: the filter refuses it, no length keeping its rate (core's [`fbits_within`]).
    fn fbits(&self, level: u32, prefix: u64, qbits: u32) -> Option<u32> {
        let f =
            fbits_at_level(self.error, (self.first, self.last), self.guaranteed_rate(), level, prefix, qbits);
        let ceiling = u128::from(rate_units(self.error));
        // One simulated entry stands for 2^shift: the room, per entry, is
        // the room over 2^shift.
        fbits_within(f, level, self.mass >> self.shift, ceiling >> self.shift)
    }

    /// Counts an add of an entry of `t` bits, standing for `2^shift`.
    fn count(&mut self, t: u32) {
        self.mass += u128::from(units(t)) << self.shift;
        self.items += 1 << self.shift;
    }

    /// Refreshes block `i`'s counts and bytes after its entries changed.
    fn restat(&mut self, i: usize) {
        let half = (1u32 << self.qbits) / 2;
        let b = &mut self.blocks[i];
        (b.lower, b.voids, b.min_f, b.max_f) = (0, 0, u32::MAX, 0);
        for e in &b.entries {
            b.lower += u32::from(e.quotient < half);
            b.voids += u32::from(e.f == 0);
            b.min_f = b.min_f.min(e.f);
            b.max_f = b.max_f.max(e.f);
        }
        b.min_f = b.min_f.min(b.max_f);
        let before = b.bytes;
        b.bytes = block_bytes(self.qbits, b.entries.len() as u32, b.min_f, b.max_f);
        self.block_bytes = self.block_bytes - before + b.bytes;
    }

    /// Whether full block `i` grows for `h` (core's [`grows`]).
    fn grows_for(&self, i: usize, h: u128, doubling: bool) -> bool {
        let b = &self.blocks[i];
        let n = b.entries.len() as u32;
        let side = if (h >> (127 - b.depth)) & 1 == 1 { n - b.lower } else { b.lower };
        grows(n, b.lower, side, doubling, || b.voids)
    }

    /// Adds one random item of the part kept (`XfFilter::add`).
    fn add_one(&mut self) {
        let r = (u128::from(next(&mut self.rng)) << 64) | u128::from(next(&mut self.rng));
        let h = if self.shift == 0 { r } else { (self.path << (128 - self.shift)) | (r >> self.shift) };
        let i = if self.dir_bits == 0 { 0 } else { self.dir[(r >> (128 - self.dir_bits)) as usize] as usize };
        let qbits = self.qbits;
        let (depth, prefix, len) =
            (self.blocks[i].depth, self.blocks[i].prefix, self.blocks[i].entries.len());
        let level = depth + qbits;
        let doubling = doubles(self.is_one(), qbits);
        let full = grow_threshold(self.is_one(), qbits, depth, prefix);
        if len as u32 >= full && self.grows_for(i, h, doubling) && level < deepest_level(self.last, qbits) {
            if doubling {
                self.double(h);
            } else {
                self.split(i, h);
            }
            return;
        }
        let b = &self.blocks[i];
        if len as u32 >= max_entries(qbits) && !held_by_voids(len as u32, b.lower, b.voids) {
            self.stuck = true;
            return;
        }
        let Some(f) = self.fbits(level, prefix, qbits) else {
            self.stuck = true;
            return;
        };
        let e = entry_at(h, level, qbits, f);
        let b = &mut self.blocks[i];
        (b.min_f, b.max_f) = if b.entries.is_empty() { (f, f) } else { (b.min_f.min(f), b.max_f.max(f)) };
        b.lower += u32::from(e.quotient < (1 << qbits) / 2);
        b.voids += u32::from(f == 0);
        b.entries.push(e);
        let before = b.bytes;
        b.bytes = block_bytes(qbits, b.entries.len() as u32, b.min_f, b.max_f);
        self.block_bytes = self.block_bytes - before + b.bytes;
        self.entries += 1;
        self.count(level + f);
    }

    /// A lone block doubles its quotients, `h`'s entry placed at the new level.
    fn double(&mut self, h: u128) {
        let qbits = self.qbits + 1;
        let Some(f) = self.fbits(qbits, 0, qbits) else {
            self.stuck = true;
            return;
        };
        let e = entry_at(h, qbits, qbits, f);
        let old = std::mem::take(&mut self.blocks[0].entries);
        let mut all = Vec::with_capacity(old.len() * 2 + 1);
        for x in old {
            give_bit(x, &mut |c| all.push(c));
        }
        all.push(e);
        self.entries = all.len() as u64;
        self.blocks[0].entries = all;
        self.qbits = qbits;
        self.restat(0);
        self.count(qbits + f);
    }

    /// Block `i` splits in two of one more depth (`XfFilter::grow_with`),
    /// `h`'s entry placed in its half.
    fn split(&mut self, i: usize, h: u128) {
        let (qbits, depth, prefix) = (self.qbits, self.blocks[i].depth, self.blocks[i].prefix);
        let q = 1u32 << qbits;
        let level = depth + qbits + 1;
        let bit = (h >> (127 - depth)) as u64 & 1;
        let Some(f) = self.fbits(level, (prefix << 1) | bit, qbits) else {
            self.stuck = true;
            return;
        };
        let e = entry_at(h, level, qbits, f);
        let old = std::mem::take(&mut self.blocks[i].entries);
        let before = old.len() as u64;
        let (mut lo, mut hi) = (Vec::with_capacity(q as usize), Vec::with_capacity(q as usize));
        for x in old {
            give_bit(x, &mut |c| {
                if c.quotient < q {
                    lo.push(c)
                } else {
                    hi.push(Entry { quotient: c.quotient - q, ..c })
                }
            });
        }
        if bit == 1 { &mut hi } else { &mut lo }.push(e);
        self.entries = self.entries - before + (lo.len() + hi.len()) as u64;
        self.blocks[i].entries = lo;
        self.blocks[i].depth = depth + 1;
        self.blocks[i].prefix = prefix << 1;
        self.blocks.push(ModelBlock::new(depth + 1, (prefix << 1) | 1, hi));
        let upper = self.blocks.len() - 1;
        self.restat(i);
        self.restat(upper);
        // The directory over the part kept: the block's slots from its
        // prefix on, the upper half of them to the new block.
        let relative = depth - self.shift;
        if relative + 1 > self.dir_bits {
            self.dir = self.dir.iter().flat_map(|&b| [b, b]).collect();
            self.dir_bits += 1;
        }
        let span = 1usize << (self.dir_bits - relative);
        let first = (prefix & ((1u64 << relative) - 1)) as usize * span;
        self.dir[first + span / 2..first + span].fill(upper as u32);
        self.count(level + f);
    }

    /// Keeps one half of the part kept, at random (every block is deeper
    /// than the part, so each lies in one half).
    fn halve(&mut self) {
        let shift = self.shift;
        let half = next(&mut self.rng) & 1;
        let mut renumbered = vec![u32::MAX; self.blocks.len()];
        let mut kept = Vec::with_capacity(self.blocks.len() / 2 + 1);
        for (i, b) in std::mem::take(&mut self.blocks).into_iter().enumerate() {
            if (b.prefix >> (b.depth - shift - 1)) & 1 == half {
                renumbered[i] = kept.len() as u32;
                kept.push(b);
            }
        }
        self.blocks = kept;
        let slots = self.dir.len() / 2;
        let from = if half == 0 { 0 } else { slots };
        self.dir = self.dir[from..from + slots].iter().map(|&i| renumbered[i as usize]).collect();
        debug_assert!(self.dir.iter().all(|&i| i != u32::MAX));
        self.path = (self.path << 1) | u128::from(half);
        self.shift += 1;
        self.dir_bits -= 1;
        self.entries = self.blocks.iter().map(|b| b.entries.len() as u64).sum();
        self.block_bytes = self.blocks.iter().map(|b| b.bytes).sum();
    }
}

/// A block's bytes by its quotient bits, entries and fingerprint lengths:
/// they depend on nothing else (its field width is the longest
/// fingerprint's plus a stop bit, or the one length of a uniform block, and
/// its room is what the allocator's class holds), so each shape is built
/// once as a real [`Block`] and its bytes remembered, for every model.
fn block_bytes(qbits: u32, n: u32, min_f: u32, max_f: u32) -> u64 {
    thread_local! {
        static SIZES: RefCell<HashMap<u64, u64, BuildHasherDefault<Mix>>> = RefCell::default();
    }
    let uniform = n > 0 && min_f == max_f && min_f >= 1;
    let key = u64::from(n) | u64::from(max_f) << 32 | u64::from(qbits) << 40 | u64::from(uniform) << 48;
    SIZES.with(|sizes| {
        *sizes.borrow_mut().entry(key).or_insert_with(|| {
            let q = u64::from(1u32 << qbits);
            // In order (quotients rising, the shorter first), as a block keeps them.
            let entries: Vec<Entry> = (0..n)
                .map(|i| Entry {
                    quotient: (u64::from(i) * q / u64::from(n)) as u32,
                    f: if i == 0 { min_f } else { max_f },
                    fp: 0,
                })
                .collect();
            Block::build_sorted(qbits, 0, &entries, 0).expect("a block of a few KiB").bytes()
        })
    })
}

/// A cheap hash for the shapes' keys (they are not chosen by anyone).
#[derive(Default)]
struct Mix(u64);

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xf::{Seed, XfFilter};
    use crate::Limits;

    /// 16 points per doubling up to `n`.
    fn points(n: u64) -> Vec<u64> {
        let mut out: Vec<u64> =
            (0..).map(|j| 2f64.powf(f64::from(j) / 16.0).round() as u64).take_while(|&c| c <= n).collect();
        out.dedup();
        out
    }

    /// A real filter's bytes at each of `points`.
    fn real(params: XfParams, seed: u64, points: &[u64]) -> Vec<f64> {
        let mut f = XfFilter::with_seed(params, Seed([seed, !seed]), Limits::NONE).unwrap();
        let mut i = 0u64;
        let mut at = |p: u64| {
            while i < p {
                f.insert(&i.to_le_bytes(), Limits::NONE).unwrap();
                i += 1;
            }
            f.size_bytes() as f64
        };
        points.iter().map(|&p| at(p)).collect()
    }

    /// Kept to a part of the hash space from 4,096 entries on (halved five
    /// times by 2^17 items), the model's bytes, averaged over 16 of them,
    /// are those of a real filter (averaged over four: one filter of a few
    /// dozen blocks is 2-4% above or below the mean, as its blocks happen
    /// to fill): within 4% at each of 16 points per doubling, within 1% on
    /// average.
    #[test]
    fn a_part_of_the_hash_space_stands_for_the_whole() {
        for (error_rate, capacity) in [(0.01, 100), (1e-4, 5000)] {
            let params = XfParams { error_rate, capacity, max_capacity: 1 << 36 };
            let points: Vec<u64> = points(1 << 17).into_iter().filter(|p| *p >= 1 << 13).collect();
            let truth: Vec<f64> = {
                let seeds = [11, 12, 13, 14];
                let each: Vec<Vec<f64>> = seeds.iter().map(|&s| real(params, s, &points)).collect();
                (0..points.len())
                    .map(|i| each.iter().map(|e| e[i]).sum::<f64>() / seeds.len() as f64)
                    .collect()
            };
            let mut sums = vec![0.0; points.len()];
            let runs = 16;
            for seed in 0..runs {
                let mut m = XfModel::with_resident(params, seed, 1 << 12);
                for (p, sum) in points.iter().zip(&mut sums) {
                    m.grow_to(*p);
                    *sum += m.bytes();
                }
                assert!(m.shift >= 5, "halved {} times", m.shift);
            }
            let mut total = 0.0;
            for ((p, sum), real) in points.iter().zip(&sums).zip(&truth) {
                let d = sum / runs as f64 / real - 1.0;
                assert!(d.abs() < 0.04, "{params:?} at {p}: {d:+.4}");
                total += d;
            }
            let mean = total / points.len() as f64;
            assert!(mean.abs() < 0.01, "{params:?}: mean {mean:+.4}");
        }
    }

    /// The mass, kept for the whole filter, is the rate a real one
    /// guarantees: the mean of four models (each keeps its own part of the
    /// hash space, and one part's splits move its rate by about 1%) within
    /// 1% of a real filter's.
    #[test]
    fn the_rate_spent_is_the_filters() {
        let params = XfParams { error_rate: 0.01, capacity: 100, max_capacity: 1 << 36 };
        let mut f = XfFilter::with_seed(params, Seed([5, 6]), Limits::NONE).unwrap();
        for i in 0..1u64 << 16 {
            f.insert(&i.to_le_bytes(), Limits::NONE).unwrap();
        }
        let models: f64 = (0..4)
            .map(|seed| {
                let mut m = XfModel::with_resident(params, seed, 1 << 12);
                m.grow_to(1 << 16);
                m.guaranteed_rate()
            })
            .sum();
        let (model, real) = (models / 4.0, f.guaranteed_rate());
        assert!((model / real - 1.0).abs() < 0.01, "{model} against {real}");
    }
}
