//! A split by passes over a block's words ([`Block::split_words`]), for
//! the blocks most splits meet: not counted, at most [`MOST_ENTRIES`]
//! entries, a few voids at most.
//!
//! Why: the split's walk ([`FieldSplit`]) gives each entry its child one
//! at a time, into lists its halves are then built from, at about 125
//! instructions an entry moved (DESIGN-NEXT 4.8): 8% of an add's time at
//! 4M items. But a split keeps its entries' order and their fields' bits.
//! The children of parent quotient `x` are `2x` (fingerprint's first bit
//! 0) and `2x + 1` (bit 1), and a run is sorted, so its 0s come first:
//! - a half is a stretch of the parent's entries (the lower half's
//!   quotients are the first half of the parent's);
//! - a child's field is its parent's with the first bit off, moved to the
//!   half's width (a stop bit's zeros dropped or added; a uniform half's
//!   stop bit dropped with them): one shift, the same for every entry;
//! - a child's runends are the parent's, and one more wherever a run's
//!   first bits turn from 0 to 1: `R | (!T & T >> 1 & !R)`, a word at a
//!   time, with `T` the first bits gathered;
//! - a child quotient is occupied when its parent's run starts with a 0
//!   (`2x`) or ends with a 1 (`2x + 1`), a step per run.
//!
//! So a split is one pass over the fields (the masses need each entry's
//! length and whether it repeats the one before, so this pass cannot be
//! words), which writes each child into a scratch vector at the width its
//! half will most likely have; each half then takes its children by one
//! copy (or a shift per field, when its shape is another), and its header
//! from words and a step per run; the new entry goes in by
//! [`Block::insert_in`], as any add's. A void (an entry whose bits ran
//! out, first in its run) goes to both children of its quotient: to `2x`
//! with the run's 0s, and its second child after, by [`Block::insert_in`]
//! too (most blocks that split at 1% hold 2-4, so this is a few inserts,
//! not a walk). The walk ([`super::FieldSplit`]) takes the blocks of more
//! than [`MOST_ENTRIES`] entries or [`MOST_VOIDS`] voids in a half, of
//! 1-bit uniform fields (`w < 2`) or a field with no stop bit, and a half
//! whose shape the parent's fields cannot take by a shift (a uniform
//! parent's half given a new entry of another length); counted blocks and
//! halves that would fold copies are built from their entries
//! (`split_entries` in `filter.rs`), which is also what debug builds
//! compare every split with.

use super::{
    get, get_short, narrowest, room_for, run_of, BitWriter, Block, Entry, Meta, OutOfMemory, SplitHalves,
    Words, GROUP, OCCUPIEDS_AT,
};

/// The most entries a block split by words holds (the bound of what adds
/// and merges give a block, [`super::max_entries`], and its room past
/// it): the first bits and runends are held on the stack. Larger blocks
/// (loaded crowded ones) keep the walk.
pub(super) const MOST_ENTRIES: usize = 4_224;
const BIT_WORDS: usize = MOST_ENTRIES / 64 + 1;
/// The most voids a block split by words holds: each costs its second
/// child's insert (a shift of the half's fields).
const MOST_VOIDS: u32 = 16;

#[cfg(test)]
thread_local! {
    /// Splits made by words on this thread, the runs with voids they
    /// split, and the void children shared with a 1-bit entry's (tests
    /// count the roads taken).
    pub(crate) static BY_WORDS: std::cell::Cell<(u64, u64, u64)> = const { std::cell::Cell::new((0, 0, 0)) };
}

/// A half's stretch of the parent's entries and what its shape is read
/// from: the lengths its entries have (bit `f`), and its voids.
#[derive(Clone, Copy)]
struct Stretch {
    from: u32,
    to: u32,
    /// Where its children start in [`Read::children`] (bits), and their
    /// width there.
    at: u64,
    width: u32,
    lengths: u64,
    voids: u32,
}

impl Stretch {
    fn is_empty(&self) -> bool {
        self.from == self.to
    }
}

/// Bit `i` of one of [`Read`]'s vectors of a bit per entry.
#[inline(always)]
fn bit(v: &[u64; BIT_WORDS], i: u32) -> bool {
    v[i as usize / 64] >> (i % 64) & 1 == 1
}

/// The parent's fields read once: their children, their first bits `T` (a
/// void's 0: its first child goes with the run's 0s), its runends `R`, its
/// voids `V`, the distinct entries of each length, the halves' stretches.
struct Read {
    /// Every entry's child, in order from bit 0, at its half's width as
    /// the parent and the new entry say it (the parent's less one, or the
    /// new entry's with a stop bit when longer): the half's fields when
    /// its entries keep that shape (most halves).
    children: Vec<u64>,
    first: [u64; BIT_WORDS],
    ends: [u64; BIT_WORDS],
    voids: [u64; BIT_WORDS],
    was: [u32; 64],
    halves: [Stretch; 2],
}

impl Block {
    /// [`Block::split_fields`] by passes over words (see the module docs),
    /// or `None` for the blocks it leaves to the walk.
    pub(super) fn split_words(&self, meta: &Meta, extra: Entry) -> Option<Result<SplitHalves, OutOfMemory>> {
        let (n, w) = (meta.n as usize, meta.w);
        // A uniform parent of 1-bit fingerprints has voids for children.
        if meta.counted || n == 0 || n > MOST_ENTRIES || w < 2 {
            return None;
        }
        let words: &[u64] = &self.words;
        let k = run_of::<false>(words, meta, meta.q() / 2).start;
        let twin_half = (extra.quotient >= meta.q()) as usize;
        // The half of a new entry longer than the parent's children takes
        // its width, with a stop bit (when the half has other entries).
        let mut widths = [w - 1; 2];
        if !meta.uniform && extra.f >= w - 1 {
            widths[twin_half] = extra.f + 1;
        }
        let mut children = Vec::new();
        let len = super::words_for(u64::from(meta.n) * u64::from(widths[0].max(widths[1]))) as usize + 1;
        if children.try_reserve_exact(len).is_err() {
            return Some(Err(OutOfMemory));
        }
        children.resize(len, 0);
        let read = read_fields(words, meta, k, widths, children)?;
        let (mut built, mut shared) = ([None, None], 0);
        for (h, stretch) in read.halves.iter().enumerate() {
            let extra = (h == twin_half).then_some(extra);
            let shape = half_shape(meta, stretch, extra)?;
            built[h] = Some(match write_half(words, meta, &read, h, shape, extra) {
                Ok(Some((b, new, both))) => {
                    shared += both;
                    (b, new)
                }
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            });
        }
        let [Some((lo, lo_new)), Some((hi, hi_new))] = built else { unreachable!("both halves built") };
        // A child is distinct when its parent is, one bit shorter; a void
        // has two, voids both, each one with the void child of a 1-bit
        // entry beside it (`shared`); and the new entry when no copy.
        let mut now = [0u32; 64];
        now[..63].copy_from_slice(&read.was[1..]);
        now[0] += 2 * read.was[0] - shared;
        now[extra.f as usize] += u32::from(lo_new || hi_new);
        #[cfg(test)]
        BY_WORDS.with(|n| {
            let (splits, voids, both) = n.get();
            n.set((splits + 1, voids + u64::from(read.was[0]), both + u64::from(shared)));
        });
        Some(Ok(SplitHalves { lo, hi, was: read.was, now }))
    }
}

/// Reads the parent's fields and runends: `None` past [`MOST_VOIDS`].
fn read_fields(words: &[u64], meta: &Meta, k: u32, widths: [u32; 2], children: Vec<u64>) -> Option<Read> {
    let n = meta.n as usize;
    let high_at = u64::from(k) * u64::from(widths[0]);
    let mut read = Read {
        children,
        first: [0; BIT_WORDS],
        ends: [0; BIT_WORDS],
        voids: [0; BIT_WORDS],
        was: [0; 64],
        halves: [
            Stretch { from: 0, to: k, at: 0, width: widths[0], lengths: 0, voids: 0 },
            Stretch { from: k, to: meta.n, at: high_at, width: widths[1], lengths: 0, voids: 0 },
        ],
    };
    let ends_at = meta.ends_at();
    for (j, word) in read.ends.iter_mut().enumerate().take(n.div_ceil(64)) {
        let at = 64 * j as u64;
        *word = get(words, ends_at + at, (n as u64 - at).min(64) as u32);
    }
    let mut prev = u64::MAX;
    let mut children = std::mem::take(&mut read.children);
    let mut out = BitWriter::at(&mut children, 0);
    for h in 0..2 {
        let stretch = read.halves[h];
        let up = stretch.width - (meta.w - 1);
        let (mut i, mut voids) = (stretch.from, 0);
        let mut lengths = 0;
        // A word of first bits and voids at a time, held in registers.
        while i < stretch.to {
            let j = (i / 64) as usize;
            let to = stretch.to.min(64 * (j as u32 + 1));
            let chunk = if meta.uniform {
                read_chunk::<true>(words, meta, &mut read, (i, to), &mut prev, (&mut out, up))
            } else {
                read_chunk::<false>(words, meta, &mut read, (i, to), &mut prev, (&mut out, up))
            }?;
            read.first[j] |= chunk.first;
            read.voids[j] |= chunk.voids;
            voids += chunk.voids.count_ones();
            lengths |= chunk.lengths;
            i = to;
        }
        if voids > MOST_VOIDS {
            return None;
        }
        (read.halves[h].lengths, read.halves[h].voids) = (lengths, voids);
    }
    out.finish();
    read.children = children;
    Some(read)
}

/// What [`read_chunk`] gathers of entries within one word of bits.
struct Chunk {
    first: u64,
    voids: u64,
    lengths: u64,
}

/// Entries `from..to` (within one word of bits) of the parent: their first
/// bits and voids, the distinct ones of each length counted into
/// `read.was`, their children written to `out` (`up` bits wider than the
/// parent's less one); `None` on a field with no stop bit (no write makes
/// one).
#[inline(always)]
fn read_chunk<const UNIFORM: bool>(
    words: &[u64],
    meta: &Meta,
    read: &mut Read,
    (from, to): (u32, u32),
    prev: &mut u64,
    (out, up): (&mut BitWriter, u32),
) -> Option<Chunk> {
    let w = meta.w;
    let (void, keep) = (1u64 << (w - 1), (1u64 << (w - 1)) - 1);
    let j = (from / 64) as usize;
    // Bit `b`: entry `64 j + b - 1` ends its run (or there is none: the first).
    let ended = read.ends[j] << 1 | if j == 0 { 1 } else { read.ends[j - 1] >> 63 };
    let mut chunk = Chunk { first: 0, voids: 0, lengths: 0 };
    let mut bad = false;
    let mut pos = meta.fields_at() + u64::from(from) * u64::from(w);
    for b in from % 64..to - 64 * j as u32 {
        let v = get_short(words, pos, w);
        pos += u64::from(w);
        bad |= !UNIFORM && v == 0;
        let is_void = !UNIFORM && v == void;
        chunk.voids |= u64::from(is_void) << b;
        chunk.first |= (v >> (w - 1) & u64::from(!is_void)) << b;
        // The child: the first bit off (a void's child is its stop bit
        // alone, one lower).
        out.put((v & keep | u64::from(is_void) << (w - 2)) << up, w - 1 + up);
        // (A field of no stop bit, `bad`, gives no length: kept in range.)
        let f = if UNIFORM { w } else { (w - 1).wrapping_sub(v.trailing_zeros()) & 63 };
        // A copy is its run's entry before it, of the same field.
        read.was[f as usize] += u32::from(ended >> b & 1 == 1 || v != *prev);
        *prev = v;
        chunk.lengths |= 1 << f;
    }
    (!bad).then_some(chunk)
}

/// A half's field shape `(w, uniform)` with `extra` in it, when its
/// parent's fields take it by one shift; else `None` (the walk's).
fn half_shape(meta: &Meta, stretch: &Stretch, extra: Option<Entry>) -> Option<(u32, bool)> {
    let w = meta.w;
    // The children's longest length and whether all share it: each one
    // bit shorter than its parent, a void's voids.
    let children = (!stretch.is_empty()).then(|| {
        let lengths = stretch.lengths >> 1 | stretch.lengths & 1;
        (63 - lengths.leading_zeros(), lengths.is_power_of_two())
    });
    let (widest, one) = match (children, extra) {
        (None, None) => return Some(narrowest(None, false)),
        (Some(c), None) => c,
        (None, Some(e)) => (e.f, true),
        (Some((f, one)), Some(e)) => (f.max(e.f), one && f == e.f),
    };
    let shape = narrowest(Some(widest), one);
    // A uniform parent's children are bare fingerprints: a half of them
    // with a stop bit (a new entry of another length) is the walk's.
    (!meta.uniform || stretch.is_empty() || shape == (w - 1, true)).then_some(shape)
}

/// Half `h` of the split, of `shape`, with `extra` inserted when given:
/// the block, whether `extra` was no copy, and how many void children
/// are one entry with a 1-bit entry's; `None` when copies would fold (the
/// walk's).
fn write_half(
    words: &[u64],
    meta: &Meta,
    read: &Read,
    h: usize,
    (w, uniform): (u32, bool),
    extra: Option<Entry>,
) -> Result<Option<(Block, bool, u32)>, OutOfMemory> {
    let stretch = &read.halves[h];
    let n = stretch.to - stretch.from;
    let mut half = Meta { n, cap: 0, w, uniform, qbits: meta.qbits, depth: meta.depth + 1, counted: false };
    half.cap = room_for(half, n + stretch.voids + u32::from(extra.is_some()), 0);
    let mut out = super::laid_out(&half, 0)?;
    write_fields(meta, read, stretch, &half, &mut out);
    let mut seconds = [0u32; MOST_VOIDS as usize];
    let Some((held, shared)) = write_head(words, meta, read, h, &half, &mut out, &mut seconds) else {
        return Ok(None); // copies that fold
    };
    let seconds = &seconds[..held];
    let mut block = Block { words: Words::new(out) };
    // The voids' second children: copies of one another when a quotient
    // had several, so each goes in as an add's would.
    let void = |quotient| Entry { quotient, f: 0, fp: 0 };
    if seconds.iter().any(|&x| block.insert_in(void(x), None).is_err()) {
        return Ok(None); // copies that fold
    }
    let Some(e) = extra else { return Ok(Some((block, false, shared))) };
    let e = Entry { quotient: e.quotient - h as u32 * meta.q(), ..e };
    Ok(block.insert_in(e, None).ok().map(|done| (block, !done.copy, shared)))
}

/// The half's fields: its entries' children (at the width the read gave
/// them), copied when that is the half's shape, else each moved to its
/// width (the same shift for every field of a half: a stop bit's zeros
/// dropped or added, a uniform half's stop bit dropped with them).
fn write_fields(meta: &Meta, read: &Read, stretch: &Stretch, half: &Meta, out: &mut [u64]) {
    let w = stretch.width;
    let (from, n) = (stretch.at, u64::from(stretch.to - stretch.from));
    if (half.w, half.uniform) == (w, meta.uniform) {
        super::copy_bits(out, half.fields_at(), &read.children, from, n * u64::from(w));
        return;
    }
    let (up, down) = (half.w.saturating_sub(w), w.saturating_sub(half.w));
    let mut fields = BitWriter::at(out, half.fields_at());
    for i in 0..n {
        let c = get_short(&read.children, from + i * u64::from(w), w);
        fields.put(c << up >> down, half.w);
    }
    fields.finish();
}

/// The half's occupieds, group index and runends, from the parent's runs
/// and the first bits of their entries; `seconds` takes the quotient of
/// each void's second child. Returns how many it took, and how many void
/// children are one entry with a 1-bit entry's child; `None` when a void's
/// first children and those would fold.
fn write_head(
    words: &[u64],
    meta: &Meta,
    read: &Read,
    h: usize,
    half: &Meta,
    out: &mut [u64],
    seconds: &mut [u32; MOST_VOIDS as usize],
) -> Option<(usize, u32)> {
    let stretch = &read.halves[h];
    let q = meta.q();
    // Entries before each group of the half's quotients: a group of 64
    // children is 32 parents'.
    let mut groups = [0u32; (1 << super::MAX_QBITS) / GROUP as usize];
    // The parent's runends from the stretch on, a word at a time.
    let mut j = (stretch.from / 64) as usize;
    let mut ends = read.ends[j] & u64::MAX << (stretch.from % 64);
    let (mut start, mut held, mut shared) = (stretch.from, 0, 0);
    let (first, parents) = (h as u32 * q / 2, q / 2);
    // The half's parents 32 at a time (or all, fewer), their children's
    // occupied bits in one register.
    let mut p = 0;
    while p < parents {
        let len = (parents - p).min(32);
        let mut occupied = get(words, OCCUPIEDS_AT + u64::from(first + p), len);
        let mut pairs = 0u64;
        while occupied != 0 {
            let x = p + occupied.trailing_zeros();
            occupied &= occupied - 1;
            while ends == 0 {
                j += 1;
                ends = *read.ends.get(j)?;
            }
            let end = 64 * j as u32 + ends.trailing_zeros();
            ends &= ends - 1;
            // `2x` has the run's 0s (and voids), `2x + 1` its 1s.
            let pair = u64::from(!bit(&read.first, start)) | u64::from(bit(&read.first, end)) << 1;
            pairs |= pair << (2 * (x - p));
            groups[(x / 32) as usize] += end + 1 - start;
            if bit(&read.voids, start) {
                shared += voids_of_run(words, meta, read, (start, end), 2 * x, seconds, &mut held)?;
            }
            start = end + 1;
        }
        out[(OCCUPIEDS_AT / 64) as usize + (2 * p / 64) as usize] |= pairs;
        p += len;
    }
    if half.index_bits() > 0 {
        let mut before = 0;
        for g in 1..(q / GROUP) as usize {
            before += groups[g - 1];
            super::set(out, half.index_at() + 16 * (g as u64 - 1), 16, u64::from(before));
        }
    }
    // The runends: the parent's, and where a run's first bits turn 0 to 1.
    let mut at = half.ends_at();
    let mut i = stretch.from;
    while i < stretch.to {
        let len = (stretch.to - i).min(64 - i % 64);
        let (j, off) = ((i / 64) as usize, i % 64);
        let (r, t) = (read.ends[j], read.first[j]);
        let next = read.first.get(j + 1).map_or(0, |&x| x << 63);
        let child = r | (!t & (t >> 1 | next) & !r);
        let chunk = (child >> off) & if len == 64 { u64::MAX } else { (1 << len) - 1 };
        super::set(out, at, len, chunk);
        at += u64::from(len);
        i += len;
    }
    Some((held, shared))
}

/// The voids of a parent's run `start..=end` (its first entries): each a
/// second child at `child + 1`, into `seconds`. Returns how many of the
/// run's two void children are one entry with a 1-bit entry's (`0` and
/// `1` follow the voids: `(1, 0)` right after them, `(1, 1)` first of the
/// run's 1s), or `None` when the first child's copies would fold (the
/// second's are inserted, which checks).
fn voids_of_run(
    words: &[u64],
    meta: &Meta,
    read: &Read,
    (start, end): (u32, u32),
    child: u32,
    seconds: &mut [u32; MOST_VOIDS as usize],
    held: &mut usize,
) -> Option<u32> {
    let field = |i: u32| get_short(words, meta.fields_at() + u64::from(i) * u64::from(meta.w), meta.w);
    let mut i = start;
    while i <= end && bit(&read.voids, i) {
        (seconds[*held], *held, i) = (child + 1, *held + 1, i + 1);
    }
    let (zero, one) = (1u64 << (meta.w - 2), 3u64 << (meta.w - 2));
    let mut copies = i - start;
    let mut shared = 0;
    if i <= end && field(i) == zero {
        shared += 1;
        while i <= end && field(i) == zero {
            (copies, i) = (copies + 1, i + 1);
        }
    }
    if copies >= super::FOLD_AT {
        return None;
    }
    while i <= end && !bit(&read.first, i) {
        i += 1;
    }
    Some(shared + u32::from(i <= end && field(i) == one))
}
