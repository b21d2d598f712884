//! Building blocks from entries in hash order: `XF.MERGE`, and the
//! conversion of bloomkit 0.1's values. Filters of one seed share
//! addresses, so a merge walks the hash space once, in address order,
//! slot by slot at the depth of the finest input: for each slot it takes
//! every input's entries there (decoded once per block), merges the
//! sorted lists, and builds the result's block for the slot, splitting it
//! while it holds more than one entry per quotient. Time and memory go
//! with the entries involved; nothing is inserted entry by entry.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::block::{max_entries, Block, Entry, Survey, MAX_DEPTH, MAX_STORED_ENTRIES};
use super::errors::XfError;
use super::filter::{
    block_held_by_voids, harmonic, mass_of, mass_rate, units, Dir, Hashing, Store, XfFilter, XfParams,
    GROW_QBITS,
};
use super::MAX_ERROR_RATE;
use crate::common::memory::{Limits, OutOfMemory};

/// An entry by its place in the hash space: its prefix (address then
/// fingerprint, `t` bits) left-aligned in 128 bits. Ordered by `(start, t)`:
/// the order of a block's entries, so that every filter lists its entries
/// in this order, block after block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Abs {
    pub start: u128,
    pub t: u32,
}

impl Abs {
    /// The entry at address `addr` (of `level` bits) with fingerprint `fp` of `f` bits.
    #[inline]
    pub fn of(addr: u128, level: u32, f: u32, fp: u64) -> Abs {
        let t = level + f;
        let bits = if f == 0 { addr } else { (addr << f) | u128::from(fp) };
        Abs { start: if t == 0 { 0 } else { bits << (128 - t) }, t }
    }
}

/// Builds the blocks of a region of depth `d` into `out`, in address order: `entries` lie in it (sorted, `t >= d`), `cover` contain
/// it (`t < d`). The region splits while it is shallower than `min_depth`,
/// or holds more entries than quotients and may go deeper.
#[allow(clippy::too_many_arguments)]
pub fn build_region(
    d: u32,
    min_depth: u32,
    qbits: u32,
    entries: &[Abs],
    cover: &[Abs],
    out: &mut Built,
    limits: Limits,
) -> Result<(), XfError> {
    let q = 1u64 << qbits;
    let a = d + qbits;
    // Entries at least as precise as the level count once, and a split
    // divides them between its halves; coarser ones are copied to every
    // quotient they cover, as many in each half after a split as before
    // (those that contain the region, `cover`) or twice as many (those
    // inside it): a split helps only where precise entries make the count.
    // Copies of an entry (identical neighbours: the inputs' counts, decoded)
    // count once in what decides a split, which they do not spread; all of
    // them in what a stored block may hold.
    let coarse = |e: &Abs| 1u64 << (a - e.t).min(63);
    let around = cover.len() as u64 * q;
    // One pass: `count` (copies once) decides, `stored` (every occurrence)
    // is what the block would hold; `kinds` the distinct entries.
    let (mut count, mut stored, mut kinds) = (around, around, 0usize);
    let mut fine = 0u64;
    for (i, e) in entries.iter().enumerate() {
        let weight = if e.t >= a { 1 } else { coarse(e) };
        stored += weight;
        if i > 0 && entries[i - 1] == *e {
            continue;
        }
        kinds += 1;
        count += weight;
        fine += u64::from(e.t >= a);
    }
    let may_split = d < MAX_DEPTH && a < 120;
    // Entries that are exactly this region contain both halves.
    let exact = entries.partition_point(|e| e.t == d);
    let (whole, rest) = entries.split_at(exact);
    let bit = 1u128 << (127 - d);
    let mid = rest.partition_point(|e| e.start & bit == 0);
    // ... and only if each half gets an eighth of it (copies of one item
    // share a place: splitting them never spreads them), and each half can
    // be stored: a coarse entry's copies double with the split (what
    // counting copies once does not see).
    let fits = || {
        let grown = |half: &[Abs]| half.iter().map(|e| if e.t > a { 1 } else { 2 * coarse(e) }).sum::<u64>();
        let both = (cover.len() + whole.len()) as u64 * q;
        let max = u64::from(MAX_STORED_ENTRIES);
        grown(&rest[..mid]) + both <= max && grown(&rest[mid..]) + both <= max
    };
    let relieves = || {
        let least = kinds / 8;
        fine * 4 >= count * 3 && mid >= least && rest.len() - mid >= least && fits()
    };
    if d < min_depth || (may_split && qbits >= GROW_QBITS && count > q && relieves()) {
        let mut cover2;
        let cover = if whole.is_empty() {
            cover
        } else {
            cover2 = Vec::with_capacity(cover.len() + whole.len());
            cover2.extend_from_slice(cover);
            cover2.extend_from_slice(whole);
            &cover2[..]
        };
        build_region(d + 1, min_depth, qbits, &rest[..mid], cover, out, limits)?;
        return build_region(d + 1, min_depth, qbits, &rest[mid..], cover, out, limits);
    }
    build_leaf(d, qbits, entries, cover, stored, out, limits)
}

/// The block of a region that does not split ([`build_region`]): its
/// entries in block coordinates, each coarse one (and each of `cover`) as
/// a void at every quotient it covers; `stored` occurrences in all.
fn build_leaf(
    d: u32,
    qbits: u32,
    entries: &[Abs],
    cover: &[Abs],
    stored: u64,
    out: &mut Built,
    limits: Limits,
) -> Result<(), XfError> {
    let (q, a) = (1u64 << qbits, d + qbits);
    if stored > u64::from(MAX_STORED_ENTRIES) {
        return Err(XfError::Crowded);
    }
    // The entries' list and the voids' counts are the buffers every block
    // of the build reuses.
    let mut list = std::mem::take(&mut out.list);
    let mut voids = std::mem::take(&mut out.voids);
    list.clear();
    list.try_reserve(stored as usize).map_err(|_| OutOfMemory)?;
    // `entries` are in a block's order (`Abs`'s), but for those coarser
    // than the block's level: each is a void at every quotient it covers,
    // as each of `cover` is at every quotient ([`VoidCounts`]).
    voids.clear();
    if !cover.is_empty() || entries.iter().any(|e| e.t < a) {
        voids.try_reserve(q as usize).map_err(|_| OutOfMemory)?;
        voids.resize(q as usize, cover.len() as u32);
        for e in entries.iter().filter(|e| e.t < a) {
            let first = ((e.start << d) >> (128 - qbits)) as usize;
            voids[first..first + (1 << (a - e.t))].iter_mut().for_each(|n| *n += 1);
        }
    }
    let mut counts = VoidCounts { counts: &voids, next: 0 };
    for e in entries.iter().filter(|e| e.t >= a) {
        let inner = e.start << d; // the bits after the region's prefix, left-aligned
        let quotient = (inner >> (128 - qbits)) as u32;
        counts.put_to(quotient, &mut list);
        let f = e.t - a;
        let fp = if f == 0 { 0 } else { ((inner << qbits) >> (128 - f)) as u64 };
        list.push(Entry { quotient, f, fp });
    }
    counts.put_rest(&mut list);
    debug_assert!(list.is_sorted_by_key(Entry::key));
    let built = out.push(qbits, d, &list, limits);
    (out.list, out.voids) = (list, voids);
    built
}

/// In [`build_entries`], an entry whose `f` is at least this is *coarse*:
/// a void (`f = 0`) split `f - COARSE` times since, which covers that many
/// doublings of quotients from its `quotient` (`build_region`'s entries coarser
/// than their level, kept as one until a block is built).
const COARSE: u32 = 64;

/// Where [`build_entries`] builds: a region of depth `d` (its `d` address
/// bits `prefix`) of blocks of `qbits` quotients, split at least to
/// `min_depth`.
#[derive(Clone, Copy, Debug)]
struct Place {
    d: u32,
    min_depth: u32,
    prefix: u128,
    qbits: u32,
}

impl Place {
    /// Its lower (`upper = false`) or upper half.
    fn half(self, upper: bool) -> Place {
        Place { d: self.d + 1, prefix: (self.prefix << 1) | u128::from(upper), ..self }
    }
}

/// What [`build_entries`] decides a region's split on. Copies of an entry
/// (identical neighbours) count once in what decides a split (as in
/// `build_region`), all of them in what a stored block holds.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    /// Distinct entries that are not coarse (voids included), and coarse
    /// ones weighed by the quotients they cover.
    fine: u64,
    copies: u64,
    /// The most doublings a coarse entry covers.
    widest: u32,
    /// Every occurrence, coarse ones weighed.
    stored: u64,
    kinds: usize,
}

/// Counts entries one at a time, without a branch: the common entry is
/// fine and distinct, and a branch per test made the count a fifth of a
/// merge's time. Taken in the walk that merged or split the entries.
struct Counter {
    c: Counts,
    last: Entry,
}

impl Counter {
    fn new() -> Counter {
        Counter { c: Counts::default(), last: Entry { quotient: u32::MAX, f: u32::MAX, fp: u64::MAX } }
    }

    #[inline]
    fn add(&mut self, e: &Entry) {
        let new = u64::from(!self.last.same(e));
        let coarse = e.f >= COARSE;
        let k = e.f.saturating_sub(COARSE) & 63;
        let weight = if coarse { 1u64 << k } else { 1 };
        let c = &mut self.c;
        c.stored += weight;
        c.kinds += new as usize;
        c.copies += weight * new * u64::from(coarse);
        c.fine += new * u64::from(!coarse);
        c.widest = c.widest.max(k * u32::from(coarse && new == 1));
        self.last = *e;
    }
}

impl Counts {
    fn of(entries: &[Entry]) -> Counts {
        let mut counter = Counter::new();
        entries.iter().for_each(|e| counter.add(e));
        counter.c
    }
}

/// Builds the blocks of a region whose entries are in block coordinates
/// already (`entries`: of blocks of `qbits` quotients at depth `d`,
/// sorted, nothing covering the whole region; `c` their counts): what
/// [`build_region`] does, to the same bytes, without taking every entry to
/// [`Abs`] and back. A split moves the first fingerprint bit into the
/// quotient, which keeps the order; a void becomes coarse. A region where
/// a coarse entry would cover a whole block is handed to `build_region`.
fn build_entries(
    at: Place,
    entries: &mut [Entry],
    c: Counts,
    out: &mut Built,
    limits: Limits,
) -> Result<(), XfError> {
    let Place { d, min_depth, qbits, .. } = at;
    let (q, a) = (1u64 << qbits, d + qbits);
    let half = 1u32 << (qbits - 1);
    let count = c.fine + c.copies;
    let mid = entries.partition_point(|e| e.quotient < half);
    // `build_region`'s rule: more entries than quotients, precise ones
    // making the count, and each half an eighth of them.
    let least = c.kinds / 8;
    // ... and each half storable, a void's or coarse entry's copies doubled.
    let fits = || {
        let grown = |half: &[Entry]| {
            half.iter()
                .map(|e| if e.f >= COARSE { 2u64 << (e.f - COARSE) } else { 1 + u64::from(e.f == 0) })
                .sum::<u64>()
        };
        let max = u64::from(MAX_STORED_ENTRIES);
        // A split at most doubles what the region stores: no walk below that.
        c.stored * 2 <= max || (grown(&entries[..mid]) <= max && grown(&entries[mid..]) <= max)
    };
    let splits = d < min_depth
        || (d < MAX_DEPTH
            && a < 120
            && qbits >= GROW_QBITS
            && count > q
            && c.fine * 4 >= count * 3
            && mid >= least
            && entries.len() - mid >= least
            && fits());
    if !splits {
        return build_leaf_entries(d, qbits, entries, c.stored, c.copies > 0, out, limits);
    }
    if c.widest + 1 >= qbits {
        #[cfg(test)]
        PATHS.with(|p| p.set((p.get().0, p.get().1 + 1)));
        return build_through_abs(at, entries, out, limits);
    }
    let (lower, upper) = entries.split_at_mut(mid);
    let counts = split_half(lower, half);
    build_entries(at.half(false), lower, counts, out, limits)?;
    let counts = split_half(upper, half);
    build_entries(at.half(true), upper, counts, out, limits)
}

/// [`build_entries`] of a region's entries, counted first.
fn build_counted(at: Place, entries: &mut [Entry], out: &mut Built, limits: Limits) -> Result<(), XfError> {
    build_entries(at, entries, Counts::of(entries), out, limits)
}

/// The entries of one half of a region (`half` quotients) in the
/// coordinates of its blocks, in place (nothing else reads the parent's
/// list; the order holds), and counted in the same walk.
fn split_half(entries: &mut [Entry], half: u32) -> Counts {
    let mut counter = Counter::new();
    for e in entries.iter_mut() {
        let low = (e.quotient & (half - 1)) << 1;
        *e = match e.f {
            0 => Entry { quotient: low, f: COARSE + 1, fp: 0 },
            f if f >= COARSE => Entry { quotient: low, f: f + 1, fp: 0 },
            f => Entry {
                quotient: low | (e.fp >> (f - 1)) as u32,
                f: f - 1,
                fp: e.fp & ((1u64 << (f - 1)) - 1),
            },
        };
        counter.add(e);
    }
    counter.c
}

/// The block of a region of [`build_entries`] that does not split: its
/// coarse entries (`coarse`) as the voids they stand for; `stored`
/// occurrences in all.
fn build_leaf_entries(
    d: u32,
    qbits: u32,
    entries: &[Entry],
    stored: u64,
    coarse: bool,
    out: &mut Built,
    limits: Limits,
) -> Result<(), XfError> {
    if stored > u64::from(MAX_STORED_ENTRIES) {
        return Err(XfError::Crowded);
    }
    if !coarse {
        return out.push(qbits, d, entries, limits);
    }
    let mut list = std::mem::take(&mut out.list);
    list.clear();
    list.try_reserve(stored as usize).map_err(|_| OutOfMemory)?;
    let mut voids = std::mem::take(&mut out.voids);
    let built = expand(entries, 1 << qbits, &mut voids, &mut list)
        .map_err(XfError::from)
        .and_then(|()| out.push(qbits, d, &list, limits));
    (out.list, out.voids) = (list, voids);
    built
}

/// A region of [`build_entries`] (at `at`) where
/// a coarse entry would cover a whole block, handed to [`build_region`]:
/// its entries as [`Abs`].
fn build_through_abs(at: Place, entries: &[Entry], out: &mut Built, limits: Limits) -> Result<(), XfError> {
    let Place { d, min_depth, prefix, qbits } = at;
    let a = d + qbits;
    let abs = entries.iter().map(|e| match e.f.checked_sub(COARSE) {
        Some(k) => Abs { start: ((prefix << qbits) | u128::from(e.quotient)) << (128 - a), t: a - k },
        None => Abs::of((prefix << qbits) | u128::from(e.quotient), a, e.f, e.fp),
    });
    let mut list = Vec::new();
    list.try_reserve_exact(entries.len()).map_err(|_| OutOfMemory)?;
    list.extend(abs);
    build_region(d, min_depth, qbits, &list, &[], out, limits)
}

/// `entries` (of [`build_entries`], of a block of `q` quotients) with
/// each coarse one as the voids it stands for, one at each quotient it
/// covers, in block order ([`VoidCounts`]).
fn expand(
    entries: &[Entry],
    q: usize,
    voids: &mut Vec<u32>,
    list: &mut Vec<Entry>,
) -> Result<(), OutOfMemory> {
    voids.clear();
    voids.try_reserve(q).map_err(|_| OutOfMemory)?;
    voids.resize(q, 0);
    for e in entries {
        if let Some(k) = e.f.checked_sub(COARSE) {
            voids[e.quotient as usize..][..1 << k].iter_mut().for_each(|n| *n += 1);
        }
    }
    let mut counts = VoidCounts { counts: voids, next: 0 };
    for e in entries.iter().filter(|e| e.f < COARSE) {
        counts.put_to(e.quotient, list);
        list.push(*e);
    }
    counts.put_rest(list);
    debug_assert!(list.is_sorted_by_key(Entry::key));
    Ok(())
}

/// The voids a block's list gets from entries coarser than its level,
/// counted by quotient (`counts`), put in as a walk of its other entries
/// (in key order) passes their quotients. A void sorts first in its
/// quotient, so each quotient's voids go in before its other entries, and
/// entries of one key are one entry: the list a sort would make. Listed
/// and sorted, the voids took a fifth of the CPU of merges of filters of
/// other rates and sizes.
struct VoidCounts<'a> {
    counts: &'a [u32],
    /// The first quotient whose voids are not in yet.
    next: usize,
}

impl VoidCounts<'_> {
    /// The voids of every quotient up to `quotient`, which the walk is at.
    #[inline]
    fn put_to(&mut self, quotient: u32, list: &mut Vec<Entry>) {
        self.put_before(quotient as usize + 1, list);
    }

    /// The voids of the quotients the walk did not reach.
    fn put_rest(&mut self, list: &mut Vec<Entry>) {
        self.put_before(self.counts.len(), list);
    }

    fn put_before(&mut self, end: usize, list: &mut Vec<Entry>) {
        let end = end.min(self.counts.len());
        while self.next < end {
            let void = Entry { quotient: self.next as u32, f: 0, fp: 0 };
            list.extend(std::iter::repeat_n(void, self.counts[self.next] as usize));
            self.next += 1;
        }
    }
}

/// Blocks built so far, in address order, with their bytes kept as they
/// are pushed: the byte limit is checked once per block in constant time
/// (summing every block built before each new one made merges and old-format
/// loads quadratic wherever a limit is set, that is on every primary).
/// The mass of their entries is summed as they are built, so that the
/// result needs no second pass over its entries.
pub struct Built {
    pub blocks: Vec<Block>,
    bytes: u64,
    pub mass: u64,
    list: Vec<Entry>,
    voids: Vec<u32>,
    /// The most entries (copies of one entry counting once) a block may
    /// hold where it cannot split: a merge obeys the bound adds obey
    /// ([`max_entries`]); a conversion of bloomkit 0.1's values keeps
    /// what stored blocks may hold ([`MAX_STORED_ENTRIES`]), so that every
    /// value it wrote still loads.
    most: u32,
}

impl Built {
    /// A merge's blocks: each within [`max_entries`].
    pub fn merged() -> Built {
        Built::holding(max_entries(0))
    }

    /// Blocks of at most `most` entries each.
    pub fn holding(most: u32) -> Built {
        Built { blocks: Vec::new(), bytes: 0, mass: 0, list: Vec::new(), voids: Vec::new(), most }
    }

    /// The block of `entries` (sorted) at depth `d`, after the others: its
    /// bytes checked against the limit and its mass counted here rather
    /// than walked again. A block past the bound is refused (`Crowded`).
    fn push(&mut self, qbits: u32, d: u32, entries: &[Entry], limits: Limits) -> Result<(), XfError> {
        let a = d + qbits;
        let (mut mass, mut last, mut survey) = (0u64, None, Survey::new());
        for e in entries {
            let new = last.is_none_or(|l: &Entry| !l.same(e));
            mass = mass.saturating_add(units(a + e.f) * u64::from(new));
            survey.add(e.f, new);
            last = Some(e);
        }
        let block = Block::build_surveyed(qbits, d, entries, 0, survey)?;
        if block.len() > self.most && !block_held_by_voids(&block) {
            return Err(XfError::Crowded);
        }
        debug_assert_eq!(mass, mass_of(&block, a));
        let bytes = self.bytes + block.bytes();
        if let Some(limit) = limits.max_bytes {
            if bytes > limit {
                return Err(XfError::TooLarge { bytes, limit });
            }
        }
        self.blocks.try_reserve(1).map_err(|_| OutOfMemory)?;
        self.blocks.push(block);
        self.bytes = bytes;
        self.mass = self.mass.saturating_add(mass);
        Ok(())
    }
}

impl Built {
    /// The blocks of a later part of the same merge, built apart, after
    /// these: the byte limit checked block by block as [`Built::push`]
    /// checks it, so that it refuses where a sequential merge would.
    fn append(&mut self, part: Built, limits: Limits) -> Result<(), XfError> {
        self.blocks.try_reserve(part.blocks.len()).map_err(|_| OutOfMemory)?;
        for block in part.blocks {
            let bytes = self.bytes + block.bytes();
            if let Some(limit) = limits.max_bytes {
                if bytes > limit {
                    return Err(XfError::TooLarge { bytes, limit });
                }
            }
            self.blocks.push(block);
            self.bytes = bytes;
        }
        self.mass = self.mass.saturating_add(part.mass);
        Ok(())
    }
}

/// A filter of `blocks` (in address order, covering the hash space): its
/// directory, mass and counts derived and checked. `mass`: the entries'
/// mass when the caller summed it while building them (else counted here).
#[allow(clippy::too_many_arguments)]
pub fn assemble(
    params: XfParams,
    hashing: Hashing,
    items: u64,
    qbits: u32,
    first_level: u32,
    last_level: u32,
    blocks: &mut Vec<Block>,
    mass: Option<u64>,
    limits: Limits,
) -> Result<XfFilter, XfError> {
    // One walk of the blocks' headers for everything checked here: each
    // walk of a large result's blocks misses the cache at every block.
    let (mut entries, mut block_bytes, mut depth) = (0u64, 0u64, 0u32);
    for b in blocks.iter() {
        entries += b.occurrences();
        block_bytes += b.bytes();
        depth = depth.max(b.depth());
    }
    if items > entries {
        return Err(XfError::BadData("it counts more items than it has entries"));
    }
    limits.check(super::filter::own_bytes() + block_bytes)?;
    let store = store_of(blocks, depth, block_bytes)?;
    let mut f = XfFilter {
        params,
        seed: hashing.split().0,
        kind: hashing.split().1,
        items,
        mass: 0,
        qbits: qbits as u8,
        first_level: first_level.min(255) as u8,
        last_level: last_level.min(255) as u8,
        store,
    };
    f.mass = mass.unwrap_or_else(|| f.recount());
    debug_assert_eq!(f.mass, f.recount(), "the mass summed while building is the mass");
    debug_assert_eq!(f.entries(), entries);
    limits.check(f.size_bytes())?;
    Ok(f)
}

/// The store of blocks in address order (`depth` the deepest, of
/// `block_bytes` in all): one block, or a directory. The blocks are taken
/// only when it succeeds.
fn store_of(blocks: &mut Vec<Block>, depth: u32, block_bytes: u64) -> Result<Store, XfError> {
    if blocks.is_empty() {
        return Err(XfError::BadData("a filter has no blocks"));
    }
    if blocks.len() == 1 && depth == 0 {
        return Ok(Store::One(blocks.pop().expect("one block")));
    }
    if depth == 0
        || depth > MAX_DEPTH
        || !super::filter::directory_fits(1u64 << depth, blocks.len() as u64 + 1)
    {
        return Err(XfError::Crowded);
    }
    Ok(Store::Many(Dir::of(blocks, depth, block_bytes)?))
}

impl XfFilter {
    /// The mass of every entry, counted again.
    pub(super) fn recount(&self) -> u64 {
        let q = u32::from(self.qbits);
        let mut mass = 0u64;
        for b in self.blocks() {
            let level = b.depth() + q;
            mass = mass.saturating_add(mass_of(b, level));
        }
        mass
    }

    /// The entries `XF.MERGE` would read from `dest` and `sources` (what
    /// its work is proportional to): checked against
    /// `bf.xf-max-merge-entries` before any work.
    pub fn merge_entries(dest: Option<&XfFilter>, sources: &[&XfFilter]) -> u128 {
        dest.into_iter().chain(sources.iter().copied()).map(|f| u128::from(f.entries())).sum()
    }

    /// `XF.MERGE`: `dest` (`None`: a copy of the first source) with every
    /// entry of every source, built anew (the inputs are only read): every
    /// member of every input is a member, and the guaranteed rate is at
    /// most the sum of theirs (an entry several inputs hold counts once,
    /// with its copies counted). A result that would guarantee a rate above the
    /// destination's error rate is refused unless `raise_rate`, which then
    /// raises the configured rate to what the result needs to keep growing
    /// ([`room_to_grow`]).
    pub fn merged(
        dest: Option<&XfFilter>,
        sources: &[&XfFilter],
        raise_rate: bool,
        limits: Limits,
    ) -> Result<XfFilter, XfError> {
        XfFilter::merged_on(dest, sources, raise_rate, limits, 1)
    }

    /// [`XfFilter::merged`] on up to `threads` threads (the calling one
    /// included; merges of fewer than 2^19 items, or with an input of one block,
    /// take one):
    /// the same result, byte for byte, and the same refusals, in less time
    /// where cores are free. `XF.MERGE` runs on `bf.xf-merge-threads`.
    pub fn merged_on(
        dest: Option<&XfFilter>,
        sources: &[&XfFilter],
        raise_rate: bool,
        limits: Limits,
        threads: usize,
    ) -> Result<XfFilter, XfError> {
        let inputs: Vec<&XfFilter> = dest.into_iter().chain(sources.iter().copied()).collect();
        let first = *inputs.first().ok_or(XfError::BadNumKeys)?;
        for f in &inputs {
            if f.is_loading() {
                return Err(XfError::Loading);
            }
            if f.hashing() != first.hashing() {
                return Err(XfError::MergeIncompatible);
            }
        }
        let mut params = first.params;
        let items: u128 = inputs.iter().map(|f| u128::from(f.items)).sum();
        if items > u128::from(params.max_capacity) {
            return Err(XfError::MergeTooLarge { items, max_capacity: params.max_capacity });
        }
        // The result's mass is at least each input's (entries keep their
        // bits; a void re-expressed deeper can only round up), not their
        // sum (an entry in several inputs is one entry with copies, counted
        // once): a merge refused for its rate by that is refused here,
        // before any work, rather than after building a result.
        let least: u64 = inputs.iter().map(|f| f.mass).max().unwrap_or(0);
        let least_rate = mass_rate(least, first.hashing());
        if least_rate > params.error_rate && !raise_rate {
            return Err(XfError::MergeRaisesRate { rate: least_rate, configured: params.error_rate });
        }
        if least_rate > MAX_ERROR_RATE {
            return Err(XfError::MergeRateTooHigh { rate: least_rate });
        }
        // What the result may allocate at most: every input's blocks again.
        let inputs_bytes: u64 = inputs.iter().map(|f| f.size_bytes()).sum();
        limits.check_growth(first.size_bytes(), first.size_bytes().saturating_add(inputs_bytes))?;
        let multi = inputs.iter().any(|f| matches!(f.store, Store::Many(_)));
        let mut qbits =
            if multi { GROW_QBITS } else { inputs.iter().map(|f| u32::from(f.qbits)).max().unwrap_or(3) };
        let depth = inputs.iter().map(|f| f.dir_depth()).max().unwrap_or(0);
        let mut built = loop {
            let built = merge_blocks(&inputs, depth, qbits, limits, threads)?;
            // A lone block holds at most one entry per quotient: double its
            // quotients until it does (up to where blocks split instead).
            if built.blocks.len() == 1 && qbits < GROW_QBITS && built.blocks[0].len() > 1 << qbits {
                qbits += 1;
                continue;
            }
            break built;
        };
        let mut out = assemble(
            params,
            first.hashing(),
            items as u64,
            qbits,
            u32::from(first.first_level),
            u32::from(first.last_level),
            &mut built.blocks,
            Some(built.mass),
            limits,
        )?;
        let rate = mass_rate(out.mass, out.hashing());
        if rate > params.error_rate {
            if !raise_rate {
                return Err(XfError::MergeRaisesRate { rate, configured: params.error_rate });
            }
            if rate > MAX_ERROR_RATE {
                return Err(XfError::MergeRateTooHigh { rate });
            }
            params.error_rate = room_to_grow(rate, &out);
            out.params = params;
        }
        Ok(out)
    }

    /// The directory's depth (0 for one block).
    pub(super) fn dir_depth(&self) -> u32 {
        match &self.store {
            Store::Many(d) => d.slots.depth(),
            _ => 0,
        }
    }
}

/// The error rate a merge with `RAISERATE` gives a result that guarantees
/// `rate`: the rate whose schedule would have spent that much by the
/// result's deepest level, so that it keeps growing on that schedule
/// (were `rate` itself configured, the result could take no item: its
/// mass would fill its ceiling, `filter::fbits_within`), and 1.25 times
/// `rate` at least; at most [`MAX_ERROR_RATE`], and never below `rate`.
fn room_to_grow(rate: f64, out: &XfFilter) -> f64 {
    let (first, last) = (u32::from(out.first_level), u32::from(out.last_level));
    let ranks = last - first;
    let deepest = (out.dir_depth() + u32::from(out.qbits)).saturating_sub(first);
    // At least the last rank's share is left (a result as deep as its plan
    // goes, or deeper, would otherwise get none), and a fifth at least.
    let planned_share = harmonic(deepest.min(ranks.saturating_sub(1)) + 1) / harmonic(ranks + 1);
    (rate / planned_share.min(0.8)).min(MAX_ERROR_RATE).max(rate)
}

/// One input of a merge: the block it decoded last (slots come in
/// address order, so each block is decoded once).
struct Cursor<'a> {
    f: &'a XfFilter,
    /// The block decoded last ([`Block::is`]).
    block: Option<&'a Block>,
    entries: Vec<Entry>,
}

impl<'a> Cursor<'a> {
    /// The input's block at slot `s` of depth `slot_depth` (`>=` the input's own
    /// directory depth), and its depth.
    fn block_at(&self, slot_depth: u32, s: u64) -> (&'a Block, u32) {
        let f: &'a XfFilter = self.f;
        match &f.store {
            Store::Many(d) => {
                let b = d.slots.at(d.slots.slot_at(slot_depth, s));
                (b, b.depth())
            }
            Store::One(b) => (b, 0),
            Store::Loading(_) => unreachable!("a merge's inputs are loaded"),
        }
    }

    /// Block `b`'s entries in `entries`, decoded once.
    fn load(&mut self, b: &'a Block) {
        if !self.block.is_some_and(|last| last.is(b)) {
            self.block = Some(b);
            self.entries.clear();
            b.decode_into(&mut self.entries);
        }
    }

    /// The input's entries in slot `s` of depth `slot_depth` (`>=` the input's own
    /// directory depth): those inside it to `within`, in order; those that
    /// contain it to `cover`.
    fn gather(&mut self, slot_depth: u32, s: u64, within: &mut Vec<Abs>, cover: &mut Vec<Abs>) {
        let q = u32::from(self.f.qbits);
        let (bi, depth) = self.block_at(slot_depth, s);
        self.load(bi);
        let level = depth + q;
        let l = slot_depth - depth;
        let prefix = u128::from(s >> l);
        let r = s & ((1u64 << l) - 1);
        let addr = |quotient: u32| (prefix << q) | u128::from(quotient);
        if l <= q {
            let lo = (r << (q - l)) as u32;
            let hi = ((r + 1) << (q - l)) as u32;
            let a = self.entries.partition_point(|e| e.quotient < lo);
            let b = self.entries.partition_point(|e| e.quotient < hi);
            within.extend(self.entries[a..b].iter().map(|e| Abs::of(addr(e.quotient), level, e.f, e.fp)));
        } else {
            let extra = l - q;
            let first = (r >> extra) as u32;
            let x = r & ((1u64 << extra) - 1);
            let a = self.entries.partition_point(|e| e.quotient < first);
            let b = self.entries.partition_point(|e| e.quotient <= first);
            for e in &self.entries[a..b] {
                if e.f >= extra {
                    if e.fp >> (e.f - extra) == x {
                        within.push(Abs::of(addr(e.quotient), level, e.f, e.fp));
                    }
                } else if e.f == 0 || e.fp == x >> (extra - e.f) {
                    cover.push(Abs::of(addr(e.quotient), level, e.f, e.fp));
                }
            }
        }
    }
}

/// The result's blocks, slot by slot at depth `depth`, on up to `threads`
/// threads: the slots split into parts of equal ranges (a region never
/// crosses one: it is an aligned block of slots no larger than a part),
/// each built apart, then put together in address order, so that the
/// blocks are the same whatever the number of threads. What a sequential
/// merge would refuse is refused the same way: the first part that fails
/// is built again after the parts before it, which finds the error the
/// sequential merge meets first (the limit counts every earlier part's
/// blocks); a limit passed only by the parts together is found as they
/// are put together.
fn merge_blocks(
    inputs: &[&XfFilter],
    depth: u32,
    qbits: u32,
    limits: Limits,
    threads: usize,
) -> Result<Built, XfError> {
    let fast = fast_merges() && inputs.iter().all(|f| u32::from(f.qbits) == qbits);
    let items: u64 = inputs.iter().map(|f| f.items).fold(0, u64::saturating_add);
    // A region spans the slots of the shallowest input block there, so no
    // part may be smaller than the shallowest block of any input (a lone
    // block is at depth 0: one part).
    let parts_log = match items >= parallel_from() {
        true => threads.max(1).ilog2().min(MAX_PARTS_LOG),
        false => 0,
    };
    let parts_log = match parts_log {
        0 => 0,
        log => inputs.iter().map(|f| shallowest(f)).fold(log.min(depth), u32::min),
    };
    let parts = 1u64 << parts_log;
    let step = (1u64 << depth) / parts;
    let part = |k: u64, out: &mut Built| {
        merge_slots(inputs, depth, qbits, limits, fast, k * step..(k + 1) * step, out)
    };
    let mut out = Built::merged();
    if parts == 1 {
        part(0, &mut out)?;
        return Ok(out);
    }
    let built: Vec<Result<Built, XfError>> = std::thread::scope(|scope| {
        let alone = |k: u64| {
            let mut built = Built::merged();
            part(k, &mut built).map(|()| built)
        };
        // Parts 1.. on threads of their own (on this one should a thread
        // not start), part 0 here meanwhile.
        let spawned: Vec<_> = (1..parts)
            .map(|k| {
                let worker = std::thread::Builder::new().name("bloomkit-merge".into());
                (k, worker.spawn_scoped(scope, move || alone(k)).ok())
            })
            .collect();
        let first = alone(0);
        let rest = spawned.into_iter().map(|(k, handle)| match handle {
            Some(h) => h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            None => alone(k),
        });
        std::iter::once(first).chain(rest).collect()
    });
    for (k, built) in (0..parts).zip(built) {
        match built {
            Ok(built) => out.append(built, limits)?,
            // Built again after the parts before it: the error a sequential
            // merge meets first.
            Err(_) => part(k, &mut out)?,
        }
    }
    Ok(out)
}

/// The depth of a filter's shallowest block (0 for a lone block).
fn shallowest(f: &XfFilter) -> u32 {
    match &f.store {
        Store::Many(_) => f.blocks().map(Block::depth).min().unwrap_or(0),
        _ => 0,
    }
}

/// Merges of fewer input items run on one thread: a thread costs tens of
/// microseconds to start, a merge of this many items milliseconds.
const PARALLEL_FROM: u64 = 1 << 19;
/// At most 2^this parts.
const MAX_PARTS_LOG: u32 = 3;

/// The result's blocks for `slots` (of depth `depth`), after those `out`
/// holds (the byte limit counts them).
fn merge_slots(
    inputs: &[&XfFilter],
    depth: u32,
    qbits: u32,
    limits: Limits,
    fast: bool,
    slots: std::ops::Range<u64>,
    out: &mut Built,
) -> Result<(), XfError> {
    let mut cursors: Vec<Cursor> =
        inputs.iter().map(|f| Cursor { f, block: None, entries: Vec::new() }).collect();
    let (mut lists, mut cover, mut merged): (Vec<Vec<Abs>>, Vec<Abs>, Vec<Abs>) =
        (vec![Vec::new(); inputs.len()], Vec::new(), Vec::new());
    let mut region = Region::default();
    let mut s = slots.start;
    while s < slots.end {
        let (span, built) = match fast {
            true => region.build(&mut cursors, depth, s, qbits, out, limits)?,
            false => (1, false),
        };
        if !built {
            for s in s..s + span {
                cover.clear();
                for (c, list) in cursors.iter_mut().zip(lists.iter_mut()) {
                    list.clear();
                    c.gather(depth, s, list, &mut cover);
                }
                merged.clear();
                merge_sorted(&lists, &mut merged);
                build_region(depth, depth, qbits, &merged, &cover, out, limits)?;
            }
        }
        s += span;
    }
    Ok(())
}

// Tests turn the block-coordinate path off to compare it with the other,
// and count the regions it built and those it handed to `build_region`.
#[cfg(test)]
thread_local! {
    static FAST_MERGES: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
    static PATHS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

#[cfg(test)]
thread_local! {
    static PARALLEL: std::cell::Cell<u64> = const { std::cell::Cell::new(PARALLEL_FROM) };
}

/// [`PARALLEL_FROM`]; tests lower it to run small merges on threads.
fn parallel_from() -> u64 {
    #[cfg(test)]
    return PARALLEL.with(std::cell::Cell::get);
    #[cfg(not(test))]
    PARALLEL_FROM
}

fn fast_merges() -> bool {
    #[cfg(test)]
    return FAST_MERGES.with(std::cell::Cell::get);
    #[cfg(not(test))]
    true
}

/// The buffers of a merge in block coordinates, reused region after region.
#[derive(Default)]
struct Region {
    /// Per input, its entries of a region that is not one of its blocks.
    lifted: Vec<Vec<Entry>>,
    merged: Vec<Entry>,
    spare: Vec<Entry>,
    keys: Vec<u128>,
}

/// The most levels a block may lie below its region for its entries to be
/// taken to the region's coordinates (fingerprints stay under 64 bits).
const MAX_LIFT: u32 = 11;
const _: () = assert!(super::block::MAX_F + MAX_LIFT < 64);

impl Region {
    /// Builds the result's blocks for the region of the coarsest input
    /// block at slot `s` of depth `slot_depth` ([`build_entries`]): every input's
    /// entries there taken to that block's coordinates (a deeper block's
    /// extra address bits go back to the front of its fingerprints, which
    /// keeps their order) and merged, each block decoded once. Inputs of
    /// one size have blocks at one or two depths, so a region is one or two
    /// slots. Returns the slots it covers, and whether it built them (not
    /// when an input's blocks lie too far below it: [`MAX_LIFT`]). All
    /// inputs have `qbits`.
    fn build(
        &mut self,
        cursors: &mut [Cursor],
        slot_depth: u32,
        s: u64,
        qbits: u32,
        out: &mut Built,
        limits: Limits,
    ) -> Result<(u64, bool), XfError> {
        let r = cursors.iter().map(|c| c.block_at(slot_depth, s).1).min().unwrap_or(slot_depth);
        let span = 1u64 << (slot_depth - r);
        #[cfg(test)]
        PATHS.with(|p| p.set((p.get().0 + 1, p.get().1)));
        self.lifted.resize_with(cursors.len(), Vec::new);
        for (c, lifted) in cursors.iter_mut().zip(&mut self.lifted) {
            lifted.clear();
            let (bi, bd) = c.block_at(slot_depth, s);
            if bd == r {
                // The region is this input's block: its entries as decoded.
                c.load(bi);
                continue;
            }
            let mut t = s;
            while t < s + span {
                let (bi, bd) = c.block_at(slot_depth, t);
                if bd - r > MAX_LIFT {
                    return Ok((span, false));
                }
                c.load(bi);
                // The block's address bits below the region's, and how many.
                let (l, x) = (bd - r, (t >> (slot_depth - bd)) & ((1u64 << (bd - r)) - 1));
                lifted.try_reserve(c.entries.len()).map_err(|_| OutOfMemory)?;
                lifted.extend(c.entries.iter().map(|e| lift(e, l, x, qbits)));
                t += 1u64 << (slot_depth - bd);
            }
        }
        let sources = cursors.iter().zip(&self.lifted).map(|(c, lifted)| {
            if c.block_at(slot_depth, s).1 == r {
                &c.entries[..]
            } else {
                &lifted[..]
            }
        });
        let mut sources = sources.filter(|e| !e.is_empty());
        let at = u128::from(s >> (slot_depth - r));
        let (first, second) = (sources.next().unwrap_or(&[]), sources.next().unwrap_or(&[]));
        self.merged.clear();
        merge_two(first, second, &mut self.keys, &mut self.merged)?;
        for more in sources {
            self.spare.clear();
            merge_two(&self.merged, more, &mut self.keys, &mut self.spare)?;
            std::mem::swap(&mut self.merged, &mut self.spare);
        }
        let place = Place { d: r, min_depth: slot_depth, prefix: at, qbits };
        build_counted(place, &mut self.merged, out, limits)?;
        Ok((span, true))
    }
}

/// Entry `e` of a block `l` levels below a region (`0 < l`, `x` its address
/// bits below the region's), in the region's coordinates: the lowest `l`
/// bits of its address, `x` then the top of `e.quotient`, become the front
/// of its fingerprint.
fn lift(e: &Entry, l: u32, x: u64, qbits: u32) -> Entry {
    // Address bits under the region: x (l bits) then e.quotient (qbits
    // bits); the region's quotient is the top qbits of them, the rest goes to the
    // fingerprint, before its own bits.
    // All of it fits 64 bits: `l <= MAX_LIFT`, and `f + l < 64`.
    debug_assert!(l <= MAX_LIFT && qbits <= super::block::MAX_QBITS && e.f + l < 64);
    let under = (x << qbits) | u64::from(e.quotient);
    let quotient = (under >> l) as u32;
    let moved = under & ((1u64 << l) - 1);
    Entry { quotient, f: e.f + l, fp: (moved << e.f) | e.fp }
}

/// Two sorted lists of one block's entries merged into `out`, `keys` a
/// buffer. Branch-free: which list gives the next entry is as good as a
/// coin toss, and a mispredicted branch per entry was a third of a merge.
fn merge_two(
    a: &[Entry],
    b: &[Entry],
    keys: &mut Vec<u128>,
    out: &mut Vec<Entry>,
) -> Result<(), OutOfMemory> {
    out.try_reserve(a.len() + b.len()).map_err(|_| OutOfMemory)?;
    if a.is_empty() || b.is_empty() {
        out.extend_from_slice(if a.is_empty() { b } else { a });
        return Ok(());
    }
    // [`Entry::key`] as one number (`f < 64` here), then a sentinel above
    // every key after each list, so that neither index runs past its end.
    let key = |e: &Entry| {
        let padded = if e.f == 0 { 0 } else { e.fp << (64 - e.f) };
        (u128::from(e.quotient) << 72) | (u128::from(padded) << 8) | u128::from(e.f)
    };
    keys.clear();
    keys.try_reserve(a.len() + b.len() + 2).map_err(|_| OutOfMemory)?;
    keys.extend(a.iter().map(key));
    keys.push(u128::MAX);
    keys.extend(b.iter().map(key));
    keys.push(u128::MAX);
    let (ka, kb) = keys.split_at(a.len() + 1);
    let (mut i, mut j) = (0, 0);
    out.extend((0..a.len() + b.len()).map(|_| {
        // The lesser key by a mask, not a branch. The compiler sees through
        // a mask (and `select_unpredictable`) and branches, mispredicted
        // every other entry: a third of a merge's time in the module's
        // build. `black_box` hides where the mask comes from; it costs a
        // store and a load off the loop's critical path (i, j).
        let (x, y) = (ka[i], kb[j]);
        let from_b = y < x;
        let m = std::hint::black_box(0u64.wrapping_sub(u64::from(from_b)));
        let m = u128::from(m) | (u128::from(m) << 64);
        let k = (y & m) | (x & !m);
        j += usize::from(from_b);
        i += usize::from(!from_b);
        let (f, padded) = ((k & 0xff) as u32, (k >> 8) as u64);
        // `padded >> (64 - f)`, 0 for `f = 0` (then `padded` is 0).
        Entry { quotient: (k >> 72) as u32, f, fp: (padded >> 1) >> (63 - f) }
    }));
    Ok(())
}

/// `lists` (each sorted) merged into `out`.
fn merge_sorted(lists: &[Vec<Abs>], out: &mut Vec<Abs>) {
    let mut filled = lists.iter().filter(|l| !l.is_empty());
    match (filled.next(), filled.next(), filled.next()) {
        (None, _, _) => {}
        (Some(a), None, _) => out.extend_from_slice(a),
        (Some(a), Some(b), None) => {
            let (mut i, mut j) = (0, 0);
            out.reserve(a.len() + b.len());
            while i < a.len() && j < b.len() {
                if b[j] < a[i] {
                    out.push(b[j]);
                    j += 1;
                } else {
                    out.push(a[i]);
                    i += 1;
                }
            }
            out.extend_from_slice(&a[i..]);
            out.extend_from_slice(&b[j..]);
        }
        _ => {
            let nonempty: Vec<&Vec<Abs>> = lists.iter().filter(|l| !l.is_empty()).collect();
            let mut heap: BinaryHeap<Reverse<(Abs, usize, usize)>> =
                nonempty.iter().enumerate().map(|(k, l)| Reverse((l[0], k, 0))).collect();
            while let Some(Reverse((e, k, i))) = heap.pop() {
                out.push(e);
                if let Some(&next) = nonempty[k].get(i + 1) {
                    heap.push(Reverse((next, k, i + 1)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::block::BYTES_ASKED;
    use super::super::filter::{Seed, XfFilter, XfParams};
    use crate::common::memory::Limits;

    fn filled(n: u64, salt: u64) -> XfFilter {
        let params = XfParams { error_rate: 0.01, capacity: 100, max_capacity: 1 << 36 };
        let mut f = XfFilter::with_seed(params, Seed([3, 5]), Limits::NONE).unwrap();
        for i in 0..n {
            f.insert(&(i ^ (salt << 40)).to_le_bytes(), Limits::NONE).unwrap();
        }
        f
    }

    fn filled_at(n: u64, salt: u64, rate: f64, capacity: u64) -> XfFilter {
        let params = XfParams { error_rate: rate, capacity, max_capacity: 1 << 36 };
        let mut f = XfFilter::with_seed(params, Seed([3, 5]), Limits::NONE).unwrap();
        for i in 0..n {
            f.insert(&(i ^ (salt << 40)).to_le_bytes(), Limits::NONE).unwrap();
        }
        f
    }

    /// A merge on threads is the same bytes as on one, for any number of
    /// them (parts that do not divide the slots evenly included), and
    /// refuses the same way: at a byte limit that parts pass only together
    /// or alone, with the same figure, and where a block is crowded.
    #[test]
    fn merges_on_threads_are_the_same_bytes_and_refusals() {
        use super::{merge_blocks, GROW_QBITS, PARALLEL};
        PARALLEL.with(|p| p.set(0));
        let (a, b) = (filled(40_000, 1), filled(25_000, 2));
        let one = XfFilter::merged(None, &[&a, &b], true, Limits::NONE).unwrap();
        for threads in [2, 3, 4, 8, 64] {
            let m = XfFilter::merged_on(None, &[&a, &b], true, Limits::NONE, threads).unwrap();
            assert_eq!(m.dump_payload(), one.dump_payload(), "{threads} threads");
        }
        // Inputs whose shallowest block covers more than a part would (a
        // lone block, two blocks, a few): the parts are no smaller than it
        // (found in review: a region crossed a part, and the merge failed on
        // threads where it succeeds on one).
        for small in [1, 300, 2_000, 6_000] {
            let c = filled(small, 3);
            let one = XfFilter::merged(None, &[&a, &c], true, Limits::NONE).unwrap();
            for threads in [2, 4, 8] {
                let m = XfFilter::merged_on(None, &[&a, &c], true, Limits::NONE, threads).unwrap();
                assert_eq!(m.dump_payload(), one.dump_payload(), "{small} items, {threads} threads");
                let m = XfFilter::merged_on(Some(&c), &[&a], true, Limits::NONE, threads).unwrap();
                let one = XfFilter::merged(Some(&c), &[&a], true, Limits::NONE).unwrap();
                assert_eq!(m.dump_payload(), one.dump_payload(), "into {small} items, {threads} threads");
            }
        }
        let depth = a.dir_depth().max(b.dir_depth());
        assert!(depth >= 3, "the test needs parts: depth {depth}");
        let outcome = |limits: Limits, threads: usize| match merge_blocks(
            &[&a, &b],
            depth,
            GROW_QBITS,
            limits,
            threads,
        ) {
            Ok(built) => format!("{} blocks, {} bytes, mass {}", built.blocks.len(), built.bytes, built.mass),
            Err(e) => format!("{e:?}"),
        };
        let total = one.size_bytes();
        for limit in [1, total / 8, total / 3, total / 2, total * 2 / 3, total - 1, total * 2] {
            let sequential = outcome(Limits::at_most(limit), 1);
            for threads in [2, 4, 8] {
                assert_eq!(
                    outcome(Limits::at_most(limit), threads),
                    sequential,
                    "limit {limit}, {threads} threads"
                );
            }
        }
        PARALLEL.with(|p| p.set(super::PARALLEL_FROM));
    }

    /// A region of 3,000 distinct entries and one void with 20,000 copies is
    /// built: splitting it doubles the void's copies at each step (40,000,
    /// 80,000: past what a stored block counts), which counting copies once
    /// in the split rule did not see, and the merge was refused as crowded
    /// (found in review). Through block coordinates, to the same bytes.
    #[test]
    fn a_hot_void_keeps_its_region_whole() {
        use super::{build_counted, build_region, Abs, Built, Place};
        use crate::xf::block::{Entry, MAX_STORED_ENTRIES};
        let mut x = 12345u64;
        let mut entries = Vec::new();
        for _ in 0..3000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            entries.push(Entry { quotient: (x >> 40) as u32 & 511, f: 10, fp: (x >> 20) & 1023 });
        }
        entries.extend(std::iter::repeat_n(Entry { quotient: 5, f: 0, fp: 0 }, 20_000));
        entries.sort_by_key(Entry::key);
        let abs: Vec<Abs> = entries.iter().map(|e| Abs::of(u128::from(e.quotient), 9, e.f, e.fp)).collect();
        let mut out = Built::merged();
        build_region(0, 0, 9, &abs, &[], &mut out, Limits::NONE).unwrap();
        let mut again = Built::merged();
        let at = Place { d: 0, min_depth: 0, prefix: 0, qbits: 9 };
        build_counted(at, &mut entries, &mut again, Limits::NONE).unwrap();
        assert!(out.blocks.iter().all(|b| b.occurrences() <= u64::from(MAX_STORED_ENTRIES)));
        assert!(out.blocks.iter().map(|b| b.occurrences()).sum::<u64>() >= 23_000);
        assert_eq!(out.blocks.len(), again.blocks.len());
        assert!(out.blocks.iter().zip(&again.blocks).all(|(a, b)| a.words() == b.words()));
    }

    /// Merges built in block coordinates are byte for byte the merges built
    /// through absolute prefixes: at every size, between sizes, from one
    /// block to thousands, three inputs, high rates (short fingerprints, so
    /// splits meet voids), with and without a limit.
    #[test]
    fn block_coordinate_merges_are_the_same_bytes() {
        let cases: Vec<Vec<XfFilter>> = vec![
            vec![filled_at(50, 1, 0.01, 100), filled_at(60, 2, 0.01, 100)],
            vec![filled_at(3_000, 1, 0.01, 100), filled_at(2_000, 2, 0.01, 100)],
            vec![filled_at(40_000, 1, 0.01, 100), filled_at(40_000, 2, 0.01, 100)],
            vec![
                filled_at(40_000, 1, 0.01, 100),
                filled_at(7_000, 2, 0.01, 100),
                filled_at(90_000, 3, 0.01, 100),
            ],
            vec![filled_at(30_000, 1, 0.2, 100), filled_at(30_000, 2, 0.2, 100)],
            vec![filled_at(20_000, 1, 0.001, 100_000), filled_at(25_000, 2, 0.001, 100)],
            vec![filled_at(20_000, 1, 0.1, 100), filled_at(20_000, 1, 0.1, 100)],
        ];
        // And random ones: sizes from one block to many, rates, first sizes.
        let mut next = below(0x9e37_79b9_7f4a_7c15u64);
        let mut cases = cases;
        for _ in 0..12 {
            let rate = [0.001, 0.01, 0.05, 0.15][next(4) as usize];
            let inputs = (0..2 + next(2))
                .map(|salt| filled_at(1 + next(30_000), salt + 10, rate, [8, 100, 5_000][next(3) as usize]))
                .collect();
            cases.push(inputs);
        }
        super::PATHS.with(|p| p.set((0, 0)));
        for (k, inputs) in cases.iter().enumerate() {
            let refs: Vec<&XfFilter> = inputs.iter().collect();
            for limit in [Limits::NONE, Limits::at_most(1 << 40)] {
                let fast = XfFilter::merged(None, &refs, true, limit).unwrap();
                super::FAST_MERGES.with(|on| on.set(false));
                let slow = XfFilter::merged(None, &refs, true, limit).unwrap();
                super::FAST_MERGES.with(|on| on.set(true));
                assert_eq!(fast.dump_payload(), slow.dump_payload(), "case {k}");
                assert_eq!(fast.info().blocks, slow.info().blocks, "case {k}");
            }
        }
        let (fast, handed) = super::PATHS.with(|p| p.get());
        assert!(fast > 1000, "{fast} regions built in block coordinates, {handed} handed over");
    }

    /// Regions of short fingerprints and voids split far below their depth
    /// (a void split k times is one coarse entry; one that would cover a
    /// whole block goes to `build_region`): the same blocks either way.
    #[test]
    fn deep_splits_of_voids_build_the_same_blocks() {
        use super::{build_counted, build_region, Abs, Built, Place, PATHS};
        use crate::xf::block::Entry;
        let mut next = below(0x2545_f491_4f6c_dd1du64);
        PATHS.with(|p| p.set((0, 0)));
        for round in 0..24u32 {
            let (qbits, min_depth) = (9, 1 + round % 12);
            let mut v: Vec<Entry> = (0..200 + next(700))
                .map(|_| {
                    let f = next(7) as u32;
                    Entry { quotient: next(512) as u32, f, fp: if f == 0 { 0 } else { next(1 << f) } }
                })
                .collect();
            v.sort_by_key(Entry::key);
            let abs: Vec<Abs> = v.iter().map(|e| Abs::of(u128::from(e.quotient), qbits, e.f, e.fp)).collect();
            let (mut a, mut b) = (Built::merged(), Built::merged());
            let at = Place { d: 0, min_depth, prefix: 0, qbits };
            let ra = build_counted(at, &mut v, &mut a, Limits::NONE);
            let rb = build_region(0, min_depth, qbits, &abs, &[], &mut b, Limits::NONE);
            assert_eq!(ra.is_ok(), rb.is_ok(), "round {round}: {ra:?} {rb:?}");
            let words = |b: &Built| b.blocks.iter().map(|b| b.words().to_vec()).collect::<Vec<_>>();
            assert_eq!(words(&a), words(&b), "round {round}");
            assert_eq!(a.mass, b.mass, "round {round}");
        }
        assert!(PATHS.with(|p| p.get().1) > 0, "some regions were handed to build_region");
    }

    /// Draws below a bound (xorshift from `seed`): the random cases.
    fn below(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |m| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        }
    }

    /// How often the blocks were asked their bytes while `run` ran.
    fn asked(run: impl FnOnce()) -> u64 {
        BYTES_ASKED.with(|a| a.set(0));
        run();
        BYTES_ASKED.with(|a| a.get())
    }

    /// Issue 47: with a byte limit (which a primary always sets) a merge
    /// re-summed every block built so far for each new one, and a load every
    /// block received for each block placed: quadratic in blocks (a 4M+4M
    /// merge took 55 s instead of 1.2 s). The limit is now checked against
    /// running totals: a few questions per block, at every size.
    #[test]
    fn limit_checks_of_merges_and_loads_are_linear_in_blocks() {
        let limit = Limits::at_most(1 << 40);
        for n in [5_000u64, 40_000] {
            let (a, b) = (filled(n, 1), filled(n, 2));
            let mut merged = None;
            let merging = asked(|| merged = Some(XfFilter::merged(Some(&a), &[&b], true, limit).unwrap()));
            let merged = merged.unwrap();
            let blocks = merged.info().blocks + a.info().blocks + b.info().blocks;
            assert!(blocks > 40, "{n}: {blocks} blocks");
            assert!(merging <= 8 * blocks, "{n}+{n}: a merge of {blocks} blocks asked {merging} times");
            let payload = merged.dump_payload();
            let loading = asked(|| drop(XfFilter::from_payload(&payload, limit).unwrap()));
            assert!(loading <= 8 * blocks, "a load of {blocks} blocks asked {loading} times");
        }
    }
}
