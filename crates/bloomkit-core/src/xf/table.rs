//! One quotient-filter table with variable-length fingerprints (see
//! `DESIGN.md`): `m` canonical slots (quotients) plus a short tail that runs
//! may spill into, each slot `F + 4` bits wide, bit-packed in `u64` words.
//!
//! A slot holds three metadata bits (bit 0 `occupied`: some entry has this
//! slot as its quotient; bit 1 `continuation`: this entry continues the run
//! of the slot before; bit 2 `shifted`: this entry is not in its canonical
//! slot), then an `F + 1`-bit remainder field. An entry with an `f`-bit
//! fingerprint `fp` (`0 <= f <= F`) is stored as `((fp << 1) | 1) << (F - f)`:
//! the fingerprint, a stop bit, then zeros, so its length is read back from
//! the trailing zeros. An empty slot is all zeros. A fingerprint is a prefix
//! of the bits that follow the quotient, so the entries a lookup matches are
//! prefixes of one string: the longest is the most specific.
//!
//! A lookup does not walk back to its cluster's start: a run index holds,
//! for each block of [`BLOCK`] quotients, where the entries of the block's
//! quotients begin (past every entry of an earlier quotient), so a lookup
//! reads the index, the block's occupied bits up to its quotient and the
//! runs of the block's earlier quotients: a number of slots set by how many
//! entries 64 quotients hold (about 61 at the growth load), not by the
//! cluster's length, which grows with the table (the counting quotient
//! filter's offsets, Pandey et al. 2017). The index is derived from the
//! slots (rebuilt at load, never saved) and costs 16 bits per 64 quotients.
//!
//! Quotient and fingerprint come from a 128-bit hash `h` by multiplication
//! (`h x m`: the integer part is the quotient, the fraction's top bits the
//! fingerprint), so `m` need not be a power of two, and doubling `m` moves
//! the fraction's top bit into the quotient: the new quotient is `2q + bit`.

use crate::common::memory::{OutOfMemory, Relocate};

/// Zeroed words that report failure instead of aborting. The allocator
/// hands out fresh pages already zeroed, so a large table costs no
/// up-front memset (growth allocates the doubled table in one command).
fn zeroed_words<T: Zeroable>(n: usize) -> Result<Box<[T]>, OutOfMemory> {
    if n == 0 {
        return Ok(Box::new([]));
    }
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| OutOfMemory)?;
    // SAFETY: the layout has a non-zero size; a null result is handled; the
    // pointer and length describe exactly the block just allocated, zeroed
    // (a valid `u64` each), which `Box<[u64]>` frees with the same layout.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<T>();
        if ptr.is_null() {
            return Err(OutOfMemory);
        }
        Ok(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n)))
    }
}

/// Integers whose all-zero bytes are a valid value (0).
trait Zeroable: Copy {}
impl Zeroable for u64 {}
impl Zeroable for u16 {}

/// Quotients per block of the run index.
pub const BLOCK: u64 = 64;
/// The most slots a lookup walks around its quotient, back to its
/// cluster's start and forward to its run, before it asks the run index.
const NEAR: u64 = 48;
/// An index entry too far from its block to hold (only crafted items make
/// clusters that long): lookups in that block walk back to the cluster's
/// start instead, until the cluster is laid out again.
const UNKNOWN: u16 = u16::MAX;

/// Blocks of the run index of a table of `m` quotients.
fn blocks_for(m: u64) -> u64 {
    m.div_ceil(BLOCK)
}

/// Metadata bits of a slot.
const OCCUPIED: u64 = 1;
const CONTINUATION: u64 = 2;
const SHIFTED: u64 = 4;

/// The longest fingerprint a table stores (slots are then 56 bits wide).
pub const MAX_FINGERPRINT_BITS: u32 = 52;

/// The slots past the last quotient that runs may spill into.
pub fn tail_slots(m: u64) -> u64 {
    128 + m.div_ceil(256)
}

/// Where a hash falls in a table of `m` quotients: the quotient and the
/// 64 bits of the fraction that follow it.
#[inline]
pub fn locate(h: u128, m: u64) -> (u64, u64) {
    let (hi, lo) = ((h >> 64) as u64, h as u64);
    let p1 = u128::from(hi) * u128::from(m);
    let p0 = u128::from(lo) * u128::from(m);
    let mid = u128::from(p1 as u64) + (p0 >> 64);
    (((p1 >> 64) + (mid >> 64)) as u64, mid as u64)
}

/// An entry's remainder field for a fingerprint of `f` bits (the top `f`
/// bits of `frac`) in a table of `F`-bit fingerprints.
#[inline]
pub fn encode(frac: u64, f: u32, fbits: u32) -> u64 {
    let fp = if f == 0 { 0 } else { frac >> (64 - f) };
    ((fp << 1) | 1) << (fbits - f)
}

/// The fingerprint length and value of a remainder field.
#[inline]
pub fn decode(r: u64, fbits: u32) -> (u32, u64) {
    let tz = r.trailing_zeros();
    (fbits - tz, r >> (tz + 1))
}

/// Whether remainder `r` matches a query whose top `F` fraction bits are `qv`.
#[inline]
fn matches(r: u64, qv: u64) -> bool {
    let tz = r.trailing_zeros();
    (r >> (tz + 1)) == (qv >> tz)
}

/// A cluster taken out of a table: its first slot, its entries (quotient,
/// remainder) in slot order, and the slot after it.
pub type Cluster = (u64, Vec<(u64, u64)>, u64);

/// The table could not place an entry: no free slot before its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableFull;

pub struct Table {
    /// Canonical slots (quotients).
    m: u64,
    /// Physical slots: `m` plus the tail.
    len: u64,
    fbits: u32,
    width: u32,
    /// `words_for(len, width)` words, then one padding word (always zero).
    words: Box<[u64]>,
    /// Per block `b` of quotients `64b..64b+64`: the slot where the runs of
    /// its quotients begin, `max(64b, 1 + the slot of the last entry of a
    /// quotient below 64b)`, less `64b`; or [`UNKNOWN`].
    index: Box<[u16]>,
    /// Entries stored (void copies included), by fingerprint length.
    hist: [u64; MAX_FINGERPRINT_BITS as usize + 1],
    entries: u64,
}

/// Words holding `len` slots of `width` bits.
pub fn words_for(len: u64, width: u32) -> Option<u64> {
    len.checked_mul(u64::from(width)).map(|bits| bits.div_ceil(64))
}

impl Table {
    /// Bytes a table of `m` quotients and `F`-bit fingerprints allocates.
    pub fn bytes_for(m: u64, fbits: u32) -> Option<u64> {
        Table::slot_bytes_for(m, fbits)?.checked_add(blocks_for(m).checked_mul(2)?)
    }

    /// Bytes of the slots alone (what is saved; the run index is derived).
    pub fn slot_bytes_for(m: u64, fbits: u32) -> Option<u64> {
        let len = m.checked_add(tail_slots(m))?;
        words_for(len, fbits + 4)?.checked_add(1)?.checked_mul(8)
    }

    pub fn new(m: u64, fbits: u32) -> Result<Table, OutOfMemory> {
        assert!(m > 0 && (1..=MAX_FINGERPRINT_BITS).contains(&fbits));
        Table::bytes_for(m, fbits).ok_or(OutOfMemory)?;
        let len = m + tail_slots(m);
        let n = words_for(len, fbits + 4).and_then(|w| usize::try_from(w + 1).ok()).ok_or(OutOfMemory)?;
        let blocks = usize::try_from(blocks_for(m)).map_err(|_| OutOfMemory)?;
        Ok(Table {
            m,
            len,
            fbits,
            width: fbits + 4,
            words: zeroed_words(n)?,
            index: zeroed_words(blocks)?,
            hist: [0; MAX_FINGERPRINT_BITS as usize + 1],
            entries: 0,
        })
    }

    pub fn try_clone(&self) -> Result<Table, OutOfMemory> {
        let mut words = Vec::new();
        words.try_reserve_exact(self.words.len()).map_err(|_| OutOfMemory)?;
        words.extend_from_slice(&self.words);
        let mut index = Vec::new();
        index.try_reserve_exact(self.index.len()).map_err(|_| OutOfMemory)?;
        index.extend_from_slice(&self.index);
        Ok(Table { words: words.into_boxed_slice(), index: index.into_boxed_slice(), ..*self })
    }

    pub fn m(&self) -> u64 {
        self.m
    }
    /// Physical slots (quotients and tail).
    pub fn slots(&self) -> u64 {
        self.len
    }
    pub fn fbits(&self) -> u32 {
        self.fbits
    }
    pub fn entries(&self) -> u64 {
        self.entries
    }
    pub fn hist(&self) -> &[u64] {
        &self.hist
    }
    pub fn size_bytes(&self) -> u64 {
        self.words.len() as u64 * 8 + self.index.len() as u64 * 2
    }

    /// The expected number of entries a random absent hash matches: the sum
    /// over entries of `2^-f / m` (an upper bound on the false-positive rate).
    pub fn mass(&self) -> f64 {
        let sum: f64 = self.hist.iter().enumerate().map(|(f, &n)| n as f64 * (-(f as f64)).exp2()).sum();
        sum / self.m as f64
    }

    /// The shortest fingerprint any entry has, `None` when empty.
    pub fn shortest(&self) -> Option<u32> {
        self.hist.iter().position(|&n| n > 0).map(|f| f as u32)
    }

    /// The slot words as little-endian bytes (the padding word left out).
    pub fn bytes(&self) -> Vec<u8> {
        let n = self.words.len() - 1;
        let mut out = Vec::with_capacity(n * 8);
        for w in &self.words[..n] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// `len` bytes of [`Table::bytes`] from byte `offset` (a SCANDUMP chunk).
    pub fn bytes_at(&self, offset: u64, len: u64) -> Vec<u8> {
        (offset..offset + len).map(|at| (self.words[(at / 8) as usize] >> ((at % 8) * 8)) as u8).collect()
    }

    /// Bytes of [`Table::bytes`].
    pub fn data_len(&self) -> u64 {
        (self.words.len() as u64 - 1) * 8
    }

    /// Copies `data` into the slot words at byte `offset` (a load in
    /// progress; nothing is checked until [`Scan`] walks the slots).
    pub fn write_bytes(&mut self, offset: u64, data: &[u8]) -> bool {
        let end = match offset.checked_add(data.len() as u64) {
            Some(end) if end <= self.data_len() => end,
            _ => return false,
        };
        let mut at = offset;
        for &b in data {
            let (w, s) = ((at / 8) as usize, (at % 8) * 8);
            self.words[w] = (self.words[w] & !(0xffu64 << s)) | (u64::from(b) << s);
            at += 1;
        }
        debug_assert_eq!(at, end);
        true
    }

    /// The bit-packed padding past the last slot is zero (loads check it).
    pub fn padding_is_clear(&self) -> bool {
        let bits = self.len * u64::from(self.width);
        let last = self.words.len() - 1;
        let used = (bits % 64) as u32;
        let in_last_data = if used == 0 { 0 } else { self.words[last - 1] >> used };
        in_last_data == 0 && self.words[last] == 0
    }

    #[inline]
    fn get(&self, i: u64) -> u64 {
        if i >= self.len {
            return 0;
        }
        let off = i * u64::from(self.width);
        let (w, s) = ((off / 64) as usize, off % 64);
        let x = u128::from(self.words[w]) | (u128::from(self.words[w + 1]) << 64);
        ((x >> s) as u64) & ((1u64 << self.width) - 1)
    }

    #[inline]
    fn set(&mut self, i: u64, v: u64) {
        let off = i * u64::from(self.width);
        let (w, s) = ((off / 64) as usize, off % 64);
        let mask = ((1u128 << self.width) - 1) << s;
        let x = u128::from(self.words[w]) | (u128::from(self.words[w + 1]) << 64);
        let x = (x & !mask) | (u128::from(v) << s);
        self.words[w] = x as u64;
        self.words[w + 1] = (x >> 64) as u64;
    }

    #[inline]
    fn occupied(&self, i: u64) -> bool {
        self.get(i) & OCCUPIED != 0
    }

    fn set_occupied(&mut self, i: u64, on: bool) {
        let v = self.get(i);
        self.set(i, if on { v | OCCUPIED } else { v & !OCCUPIED });
    }

    /// The top `F` bits of a fraction: what remainders are matched against.
    #[inline]
    pub fn query_bits(&self, frac: u64) -> u64 {
        frac >> (64 - self.fbits)
    }

    /// The slot where quotient `q`'s run starts (or would start): from the
    /// run index, past the runs of the block's earlier quotients. `q` must
    /// be marked occupied.
    #[inline]
    fn run_start(&self, q: u64) -> u64 {
        // An entry in its own slot starts its quotient's run.
        let v = self.get(q);
        if v & SHIFTED == 0 && v >> 3 != 0 {
            return q;
        }
        // Where the cluster is short (most lookups below the growth load),
        // the slots around `q` tell, with no second memory access for the
        // index: on a filter larger than the cache that access is a miss
        // of its own, which the lookup would wait for.
        if let Some((s, _)) = self.run_start_near(q) {
            return s;
        }
        self.run_start_indexed(q)
    }

    /// [`Table::run_start`] through the run index.
    fn run_start_indexed(&self, q: u64) -> u64 {
        let b = q / BLOCK;
        let d = self.index[b as usize];
        if d == UNKNOWN {
            return self.run_start_walk(q).0;
        }
        let base = b * BLOCK;
        let mut pos = base + u64::from(d);
        let mut p = base;
        loop {
            while !self.occupied(p) {
                p += 1;
            }
            // A run starts at its quotient, or right after the run before.
            let s = pos.max(p);
            if p == q {
                return s;
            }
            let mut e = s + 1;
            while self.get(e) & CONTINUATION != 0 {
                e += 1;
            }
            pos = e;
            p += 1;
        }
    }

    /// [`Table::run_start_walk`] when it reads at most [`NEAR`] slots.
    fn run_start_near(&self, q: u64) -> Option<(u64, u64)> {
        self.walk(q, NEAR)
    }

    /// [`Table::run_start`] the classic way, walking back to the cluster's
    /// start (blocks the index cannot place), and that start.
    fn run_start_walk(&self, q: u64) -> (u64, u64) {
        // A table has fewer slots than any budget this large.
        self.walk(q, u64::MAX).expect("an unbounded walk ends")
    }

    /// The classic walk: back to the cluster's start, then forward over the
    /// runs of the quotients before `q`; `None` past `budget` slots read.
    fn walk(&self, q: u64, mut budget: u64) -> Option<(u64, u64)> {
        let mut b = q;
        while self.get(b) & SHIFTED != 0 {
            b -= 1;
            budget = budget.checked_sub(1)?;
        }
        let cluster = b;
        let mut s = b;
        while b != q {
            loop {
                s += 1;
                budget = budget.checked_sub(1)?;
                if self.get(s) & CONTINUATION == 0 {
                    break;
                }
            }
            loop {
                b += 1;
                if self.occupied(b) {
                    break;
                }
            }
        }
        Some((s, cluster))
    }

    /// Sets block `b`'s index entry to slot `start`.
    fn set_index(&mut self, b: u64, start: u64) {
        let d = start - b * BLOCK;
        self.index[b as usize] = if d >= u64::from(UNKNOWN) { UNKNOWN } else { d as u16 };
    }

    /// An entry of quotient `q` went into slot `pos` and the entries from
    /// there to `free` moved one slot on (slot `free` was empty): the blocks
    /// after `q`'s whose runs began in that stretch begin a slot later. An
    /// entry 0 is ambiguous (the last earlier entry ends at the block's
    /// start, or before it); the slot before the block says which, as it
    /// was: an entry there has a quotient below the block's.
    fn index_insert(&mut self, q: u64, pos: u64, free: u64) {
        let last = (free / BLOCK).min(self.index.len() as u64 - 1);
        for b in q / BLOCK + 1..=last {
            let base = b * BLOCK;
            let d = self.index[b as usize];
            if d == UNKNOWN {
                continue;
            }
            let before = base - 1;
            let ends_at_base =
                d == 0 && if before < pos { self.get(before) & !OCCUPIED != 0 } else { before < free };
            if d > 0 || ends_at_base {
                self.set_index(b, (base + u64::from(d)).max(pos) + 1);
            } else if pos >= base {
                self.set_index(b, pos + 1);
            }
        }
    }

    /// Rebuilds the index entries of the blocks starting in `lo+1..=hi`
    /// after the slots `lo..hi` were laid out again: `lo` starts a cluster
    /// (or is empty, or 0) and slot `hi` is empty (or past the end).
    fn reindex(&mut self, lo: u64, hi: u64) {
        let Some(last) = (self.index.len() as u64).checked_sub(1) else { return };
        let last = last.min(hi / BLOCK);
        let mut b = lo / BLOCK + 1;
        // One past the last entry seen: entries before `lo` end by `lo`.
        let mut end = lo;
        let (mut q, mut in_cluster) = (0, false);
        let mut i = lo;
        while b <= last {
            let v = if i < hi { self.get(i) } else { 0 };
            let upto = if v & !OCCUPIED == 0 {
                in_cluster = false;
                // Entries after an empty slot belong to later quotients.
                if i >= hi {
                    u64::MAX
                } else {
                    i
                }
            } else {
                if !in_cluster {
                    (q, in_cluster) = (i, true);
                } else if v & CONTINUATION == 0 {
                    q += 1;
                    while !self.occupied(q) {
                        q += 1;
                    }
                }
                q
            };
            // Blocks whose first quotient is reached: their runs begin here.
            while b <= last && b * BLOCK <= upto {
                self.set_index(b, (b * BLOCK).max(end));
                b += 1;
            }
            if v & !OCCUPIED != 0 {
                end = i + 1;
            }
            i += 1;
        }
    }

    /// The run of quotient `q`: its slot range, empty when `q` has none.
    fn run(&self, q: u64) -> std::ops::Range<u64> {
        if !self.occupied(q) {
            return q..q;
        }
        let s = self.run_start(q);
        let mut e = s + 1;
        while self.get(e) & CONTINUATION != 0 {
            e += 1;
        }
        s..e
    }

    /// How many entries of quotient `q` match a query (fraction `frac`).
    pub fn count(&self, q: u64, frac: u64) -> u64 {
        let qv = self.query_bits(frac);
        self.run(q).filter(|&i| matches(self.get(i) >> 3, qv)).count() as u64
    }

    pub fn contains(&self, q: u64, frac: u64) -> bool {
        let qv = self.query_bits(frac);
        self.run(q).any(|i| matches(self.get(i) >> 3, qv))
    }

    /// The slots and 64-byte lines a lookup of `q` reads: the cluster from
    /// its start to `q`'s run's end where that is near; else the index
    /// entry, the block's slots up to `q` (their occupied bits) and the
    /// slots from where the block's runs begin to the end of `q`'s run; `q`
    /// alone when it has no run.
    pub fn probe_cost(&self, q: u64) -> (u64, u64) {
        if !self.occupied(q) {
            return (1, self.cache_lines(q, q));
        }
        let b = q / BLOCK;
        let s = self.run_start(q);
        let mut e = s;
        while self.get(e + 1) & CONTINUATION != 0 {
            e += 1;
        }
        let v = self.get(q);
        let near = if v & SHIFTED == 0 && v >> 3 != 0 { Some((q, q)) } else { self.run_start_near(q) };
        let d = self.index[b as usize];
        let (lo, from, index_line) = match near {
            Some((_, cluster)) => (cluster, cluster, 0),
            None if d == UNKNOWN => {
                let (_, cluster) = self.run_start_walk(q);
                (cluster, cluster, 0)
            }
            None => (b * BLOCK, b * BLOCK + u64::from(d), 1),
        };
        if from <= q + 1 {
            // One stretch: from the cluster's (or the block's) start to the run's end.
            let hi = e.max(q);
            (hi - lo + 1, self.cache_lines(lo, hi) + index_line)
        } else {
            let (a, c) = (self.cache_lines(lo, q), self.cache_lines(from, e));
            // A line both stretches touch is read once.
            let w = u64::from(self.width);
            let shared = u64::from((q * w + w - 1) / 512 == (from * w) / 512);
            (q - lo + 1 + e - from + 1, a + c - shared + index_line)
        }
    }

    /// The 64-byte lines slots `lo..=hi` span.
    pub fn cache_lines(&self, lo: u64, hi: u64) -> u64 {
        let w = u64::from(self.width);
        (hi * w + w - 1) / 512 - (lo * w) / 512 + 1
    }

    /// Adds an entry (remainder field `r`) to quotient `q`'s run; nothing
    /// changes when no free slot is left before the table's end.
    pub fn insert(&mut self, q: u64, r: u64) -> Result<(), TableFull> {
        debug_assert!(q < self.m && r != 0 && r >> (self.fbits + 1) == 0);
        let slot = self.get(q);
        if slot == 0 {
            self.set(q, (r << 3) | OCCUPIED);
            self.count_in(r);
            return Ok(());
        }
        let was_occupied = slot & OCCUPIED != 0;
        self.set(q, slot | OCCUPIED);
        let mut pos = self.run_start(q);
        if was_occupied {
            while self.get(pos + 1) & CONTINUATION != 0 {
                pos += 1;
            }
            pos += 1;
        }
        // The first free slot at or after `pos`: everything up to it shifts.
        let mut free = pos;
        while free < self.len && self.get(free) & !OCCUPIED != 0 {
            free += 1;
        }
        if free >= self.len {
            if !was_occupied {
                self.set_occupied(q, false);
            }
            return Err(TableFull);
        }
        let mut cur =
            (r << 3) | if was_occupied { CONTINUATION } else { 0 } | if pos != q { SHIFTED } else { 0 };
        let mut i = pos;
        loop {
            let old = self.get(i);
            self.set(i, (old & OCCUPIED) | cur);
            if old & !OCCUPIED == 0 {
                break;
            }
            cur = (old & !OCCUPIED) | SHIFTED;
            i += 1;
        }
        self.index_insert(q, pos, i);
        self.count_in(r);
        Ok(())
    }

    fn count_in(&mut self, r: u64) {
        let (f, _) = decode(r, self.fbits);
        self.hist[f as usize] += 1;
        self.entries += 1;
    }

    /// The most specific entry of `q` matching a query (the longest
    /// matching fingerprint): its length and slot.
    pub fn best_match(&self, q: u64, frac: u64) -> Option<(u32, u64)> {
        let qv = self.query_bits(frac);
        let mut best: Option<(u32, u64)> = None;
        for i in self.run(q) {
            let r = self.get(i) >> 3;
            if matches(r, qv) {
                let (f, _) = decode(r, self.fbits);
                if best.is_none_or(|(bf, _)| f > bf) {
                    best = Some((f, i));
                }
            }
        }
        best
    }

    /// Removes the most specific entry of `q` matching a query: true when one was removed.
    pub fn remove_match(&mut self, q: u64, frac: u64) -> bool {
        match self.best_match(q, frac) {
            Some((_, at)) => {
                self.remove_at(at);
                true
            }
            None => false,
        }
    }

    /// Removes an entry whose remainder field is exactly `r` from `q`'s run.
    pub fn remove_exact(&mut self, q: u64, r: u64) -> bool {
        match self.run(q).find(|&i| self.get(i) >> 3 == r) {
            Some(at) => {
                self.remove_at(at);
                true
            }
            None => false,
        }
    }

    /// Removes the entry in slot `at` by laying its cluster out again.
    pub fn remove_at(&mut self, at: u64) {
        let mut cs = at;
        while self.get(cs) & SHIFTED != 0 {
            cs -= 1;
        }
        let (mut entries, end) = self.decode_cluster(cs);
        let index = (at - cs) as usize;
        let (_, r) = entries.remove(index);
        let (f, _) = decode(r, self.fbits);
        self.hist[f as usize] -= 1;
        self.entries -= 1;
        for i in cs..end {
            self.set(i, 0);
        }
        self.lay_out(cs, &entries);
        self.reindex(cs, end);
    }

    /// The entries of the cluster starting at `cs` (an unshifted, filled
    /// slot) in slot order, with their quotients, and the slot after it.
    fn decode_cluster(&self, cs: u64) -> (Vec<(u64, u64)>, u64) {
        let mut out = Vec::new();
        let mut q = cs;
        let mut i = cs;
        loop {
            let v = self.get(i);
            if v & !OCCUPIED == 0 {
                break;
            }
            if v & CONTINUATION == 0 && i != cs {
                q += 1;
                while !self.occupied(q) {
                    q += 1;
                }
            }
            out.push((q, v >> 3));
            i += 1;
        }
        (out, i)
    }

    /// Writes entries (quotient order, runs together) from slot `cs` on,
    /// into cleared slots; the slot after the last.
    fn lay_out(&mut self, cs: u64, entries: &[(u64, u64)]) -> u64 {
        let mut pos = cs;
        let mut prev: Option<u64> = None;
        for &(q, r) in entries {
            let first = prev != Some(q);
            if first {
                pos = pos.max(q);
                self.set_occupied(q, true);
            }
            let v = self.get(pos) & OCCUPIED;
            let meta = if first { 0 } else { CONTINUATION } | if pos != q { SHIFTED } else { 0 };
            self.set(pos, v | meta | (r << 3));
            prev = Some(q);
            pos += 1;
        }
        pos
    }

    /// Removes the cluster at or after slot `from` (skipping empty slots):
    /// its first slot, its entries with their quotients, and the slot after
    /// it. `None` when no entry is left at or after `from`. At most `budget`
    /// empty slots are skipped: then `Some((next, vec![], next))`.
    pub fn take_cluster(&mut self, from: u64, budget: u64) -> Option<Cluster> {
        let mut i = from;
        let stop = from.saturating_add(budget.max(1));
        while i < self.len && self.get(i) & !OCCUPIED == 0 {
            i += 1;
            if i >= stop && i < self.len {
                return Some((i, Vec::new(), i));
            }
        }
        if i >= self.len {
            return None;
        }
        let (entries, end) = self.decode_cluster(i);
        for s in i..end {
            self.set(s, 0);
        }
        // The blocks starting inside the emptied stretch: every entry of an
        // earlier quotient now ends before `i`, so their runs begin at their
        // own start (what `reindex` would find, without walking).
        let last = (end / BLOCK).min(self.index.len() as u64 - 1);
        for b in i / BLOCK + 1..=last {
            self.index[b as usize] = 0;
        }
        for &(_, r) in &entries {
            let (f, _) = decode(r, self.fbits);
            self.hist[f as usize] -= 1;
        }
        self.entries -= entries.len() as u64;
        Some((i, entries, end))
    }

    /// Puts back a cluster [`Table::take_cluster`] removed, as it was.
    pub fn restore_cluster(&mut self, cs: u64, entries: &[(u64, u64)]) {
        let end = self.lay_out(cs, entries);
        self.reindex(cs, end);
        for &(_, r) in entries {
            self.count_in(r);
        }
    }

    /// Every entry with its quotient, in slot order (merges, tests).
    pub fn for_each(&self, mut each: impl FnMut(u64, u64)) {
        let mut i = 0;
        while i < self.len {
            if self.get(i) & !OCCUPIED == 0 {
                i += 1;
                continue;
            }
            let (entries, end) = self.decode_cluster(i);
            for (q, r) in entries {
                each(q, r);
            }
            i = end;
        }
    }

    /// Offers the slot words and the run index to a server's defragmentation.
    pub fn relocate(&mut self, to: &mut impl Relocate) {
        let mut words = std::mem::take(&mut self.words).into_vec();
        to.vec(&mut words);
        self.words = words.into_boxed_slice();
        let mut index = std::mem::take(&mut self.index).into_vec();
        to.vec(&mut index);
        self.index = index.into_boxed_slice();
    }

    /// A table with the slots of a checked load.
    /// A table with the slots of a checked load, its run index built.
    pub fn counted(mut self, scan: &Scan) -> Table {
        self.hist = scan.hist;
        self.entries = scan.hist.iter().sum();
        self.reindex(0, self.len);
        self
    }

    /// Whether the run index says what the slots do (tests).
    pub fn index_is_exact(&self) -> bool {
        let mut fresh = match self.try_clone() {
            Ok(t) => t,
            Err(_) => return false,
        };
        fresh.index.iter_mut().for_each(|d| *d = 0);
        fresh.reindex(0, fresh.len);
        self.index.iter().zip(fresh.index.iter()).all(|(&a, &b)| a == b || a == UNKNOWN)
    }
}

/// A walk over a table's slots in order that checks every invariant the
/// operations rely on, resumable so that a load in chunks checks each
/// chunk as it arrives. `quotients` bounds the quotients that may be used,
/// `empty_before` the slots that must be empty (a migration's source).
#[derive(Clone, Debug)]
pub struct Scan {
    pub next: u64,
    pending: u64,
    /// The last quotient whose run started.
    last_q: Option<u64>,
    in_run: bool,
    pub quotients: std::ops::Range<u64>,
    pub empty_before: u64,
    pub hist: [u64; MAX_FINGERPRINT_BITS as usize + 1],
}

impl Scan {
    pub fn new(quotients: std::ops::Range<u64>, empty_before: u64) -> Scan {
        Scan {
            next: 0,
            pending: 0,
            last_q: None,
            in_run: false,
            quotients,
            empty_before,
            hist: [0; MAX_FINGERPRINT_BITS as usize + 1],
        }
    }

    /// Checks slots `self.next .. upto`; `Err` names what is wrong.
    pub fn feed(&mut self, t: &Table, upto: u64) -> Result<(), &'static str> {
        let upto = upto.min(t.len);
        while self.next < upto {
            let i = self.next;
            let v = t.get(i);
            let r = v >> 3;
            if v & OCCUPIED != 0 {
                if !self.quotients.contains(&i) {
                    return Err("a slot outside the quotients in use is marked occupied");
                }
                if r == 0 {
                    return Err("an occupied slot is empty");
                }
                self.pending += 1;
            }
            if r == 0 {
                if v & (CONTINUATION | SHIFTED) != 0 {
                    return Err("an empty slot has metadata bits set");
                }
                if self.pending > 0 {
                    return Err("a run is missing");
                }
                self.in_run = false;
            } else {
                if i < self.empty_before {
                    return Err("a slot already migrated holds an entry");
                }
                if v & CONTINUATION != 0 {
                    if !self.in_run || v & SHIFTED == 0 {
                        return Err("a continuation does not follow a run");
                    }
                } else {
                    if self.pending == 0 {
                        return Err("a run starts with no occupied quotient for it");
                    }
                    self.pending -= 1;
                    let mut q = self.last_q.map_or(0, |q| q + 1);
                    while !t.occupied(q) {
                        q += 1;
                    }
                    if (v & SHIFTED != 0) != (i != q) {
                        return Err("a run's shifted bit is wrong");
                    }
                    self.last_q = Some(q);
                    self.in_run = true;
                }
                let (f, _) = decode(r, t.fbits);
                self.hist[f as usize] += 1;
            }
            self.next += 1;
        }
        if self.next == t.len && self.pending > 0 {
            return Err("a run is missing at the end");
        }
        Ok(())
    }

    pub fn done(&self, t: &Table) -> bool {
        self.next == t.len
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// The table's entries as a map quotient -> sorted remainders.
    pub fn contents(t: &Table) -> BTreeMap<u64, Vec<u64>> {
        let mut out: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        t.for_each(|q, r| out.entry(q).or_default().push(r));
        for v in out.values_mut() {
            v.sort();
        }
        out
    }

    pub fn check(t: &Table) {
        let mut scan = Scan::new(0..t.m, 0);
        scan.feed(t, t.len).unwrap();
        assert!(scan.done(t));
        assert_eq!(scan.hist, t.hist);
        assert!(t.padding_is_clear());
        assert!(t.index_is_exact());
        // Every run is found the same through the index as by the walk.
        for q in 0..t.m {
            if t.occupied(q) && t.index[(q / BLOCK) as usize] != UNKNOWN {
                assert_eq!(t.run_start_indexed(q), t.run_start_walk(q).0, "quotient {q}");
            }
        }
    }

    #[test]
    fn encoding_reads_back_and_matches_prefixes() {
        for f in 0..=12u32 {
            let frac = 0xdead_beef_0000_0000u64;
            let r = encode(frac, f, 12);
            assert_eq!(decode(r, 12).0, f);
            assert!(matches(r, frac >> 52));
            assert!(r >> 13 == 0);
        }
        let r = encode(0x8000_0000_0000_0000, 3, 12);
        assert!(!matches(r, 0));
    }

    #[test]
    fn locate_doubles_by_moving_a_bit() {
        for h in [0u128, 1, u128::MAX, 0x1234_5678_9abc_def0_1122_3344_5566_7788] {
            for m in [1u64, 1112, 2224, 1 << 40, 3 << 20] {
                let (q, frac) = locate(h, m);
                let (q2, frac2) = locate(h, 2 * m);
                assert!(q < m);
                assert_eq!(q2, 2 * q + (frac >> 63), "h={h:x} m={m}");
                assert_eq!(frac2 >> 12, (frac << 1) >> 12);
            }
        }
    }

    proptest! {
        #[test]
        fn inserts_and_removals_keep_the_structure(
            ops in prop::collection::vec((0u64..60, any::<u64>(), 0u32..=6, any::<bool>()), 1..300)
        ) {
            let mut t = Table::new(60, 6).unwrap();
            let mut model: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
            for (q, frac, f, remove) in ops {
                let r = encode(frac, f, 6);
                if remove {
                    let removed = t.remove_exact(q, r);
                    let v = model.entry(q).or_default();
                    let at = v.iter().position(|&x| x == r);
                    prop_assert_eq!(removed, at.is_some());
                    if let Some(at) = at { v.remove(at); }
                } else if t.insert(q, r).is_ok() {
                    model.entry(q).or_default().push(r);
                }
                model.retain(|_, v| !v.is_empty());
                for v in model.values_mut() { v.sort(); }
                check(&t);
                prop_assert_eq!(&contents(&t), &model);
            }
            for (&q, v) in &model {
                for &r in v {
                    let (f, fp) = decode(r, 6);
                    let frac = if f == 0 { 0 } else { fp << (64 - f) };
                    prop_assert!(t.contains(q, frac));
                    prop_assert!(t.count(q, frac) >= v.iter().filter(|&&x| x == r).count() as u64);
                }
            }
        }
    }

    proptest! {
        /// Clusters that cross many index blocks: every insert, removal,
        /// cluster taken and put back keeps the run index exact.
        #[test]
        fn the_run_index_follows_every_change(
            ops in prop::collection::vec((0u64..400, any::<u64>(), 0u8..10), 1..400)
        ) {
            let mut t = Table::new(400, 5).unwrap();
            let mut model: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
            for (q, frac, op) in ops {
                // Crowd a few stretches so that clusters run long.
                let q = if op % 2 == 0 { (q % 40) + 100 * (q % 3) } else { q };
                let r = encode(frac, 5, 5);
                match op {
                    0..=6 => {
                        if t.insert(q, r).is_ok() {
                            model.entry(q).or_default().push(r);
                        }
                    }
                    7 | 8 => {
                        let removed = t.remove_exact(q, r);
                        let v = model.entry(q).or_default();
                        let at = v.iter().position(|&x| x == r);
                        prop_assert_eq!(removed, at.is_some());
                        if let Some(at) = at { v.remove(at); }
                    }
                    _ => {
                        // From a run's first slot, as migration does.
                        let mut from = q;
                        while t.get(from) & SHIFTED != 0 {
                            from -= 1;
                        }
                        if let Some((cs, entries, _)) = t.take_cluster(from, 1000) {
                            prop_assert!(t.index_is_exact());
                            t.restore_cluster(cs, &entries);
                        }
                    }
                }
                model.retain(|_, v| !v.is_empty());
                for v in model.values_mut() { v.sort(); }
                check(&t);
                prop_assert_eq!(&contents(&t), &model);
                for (&q, v) in &model {
                    prop_assert!(t.contains(q, v[0] << 58));
                }
            }
        }
    }

    /// Blocks the index cannot place (a displacement past 16 bits, which
    /// only crafted items reach) are looked up the classic way, and every
    /// change keeps working on them.
    #[test]
    fn blocks_the_index_cannot_place_are_walked() {
        let mut t = Table::new(1000, 6).unwrap();
        let mut model: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for i in 0..900u64 {
            let q = (i * 7) % 300;
            let r = encode(i << 58, 6, 6);
            t.insert(q, r).unwrap();
            model.entry(q).or_default().push(r);
            if i == 400 {
                t.index.iter_mut().for_each(|d| *d = UNKNOWN);
            }
        }
        for (i, (&q, v)) in model.iter_mut().enumerate() {
            if i % 3 == 0 {
                assert!(t.remove_exact(q, v.pop().unwrap()));
            }
        }
        model.retain(|_, v| !v.is_empty());
        for v in model.values_mut() {
            v.sort();
        }
        check(&t);
        assert_eq!(contents(&t), model);
        for (&q, v) in &model {
            for &r in v {
                assert!(t.contains(q, decode(r, 6).1 << 58));
            }
        }
    }

    #[test]
    fn a_full_tail_refuses_and_changes_nothing() {
        let mut t = Table::new(4, 4).unwrap();
        let mut n = 0;
        while t.insert(0, encode(0, 4, 4)).is_ok() {
            n += 1;
        }
        assert_eq!(n, t.slots());
        let before = t.bytes();
        // A quotient with no run yet: its occupied bit must not stay set.
        assert_eq!(t.insert(2, encode(0, 4, 4)), Err(TableFull));
        assert_eq!(t.insert(0, encode(0, 4, 4)), Err(TableFull));
        assert_eq!(t.bytes(), before);
        check(&t);
    }

    #[test]
    fn taking_clusters_empties_the_table_in_order() {
        let mut t = Table::new(100, 8).unwrap();
        for i in 0..90u64 {
            t.insert((i * 37) % 100, encode(i << 56, 8, 8)).unwrap();
        }
        let mut from = 0;
        let mut seen = 0;
        let mut last_q = 0;
        while let Some((_, entries, next)) = t.take_cluster(from, 4) {
            for &(q, _) in &entries {
                assert!(q >= last_q);
                last_q = q;
            }
            seen += entries.len();
            from = next;
        }
        assert_eq!(seen, 90);
        assert_eq!(t.entries(), 0);
        assert!(t.bytes().iter().all(|&b| b == 0));
    }
}
