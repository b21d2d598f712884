//! The Age-Partitioned Bloom Filter (Shtul, Baquero and Almeida, 2020,
//! arXiv 2001.03147): dedup over a sliding window.
//!
//! `k + l` slices of `m` bits in a ring. An insertion sets one bit in each
//! of the `k` newest slices; a lookup looks for `k` consecutive slices
//! holding the item's bits. Every generation (`g = capacity / l` insertions,
//! or `window / l` of time) the oldest slice is cleared and becomes the
//! newest, so an item's bits age by one slice per generation.
//!
//! Guarantees (each tested in `tests/apbf.rs`):
//! - no false negative for an item added within the window: the last
//!   `capacity` insertions (count window), or the last `window` of time
//!   (time window, while at most `capacity` items arrive per window);
//! - a false-positive rate at or below the configured rate at every moment
//!   of steady state, from the sizing below. In a time window this holds
//!   while any `k` consecutive generations (`k/l` of the window) receive at
//!   most `k x capacity / l` items, as an even rate of `capacity` per window
//!   does; a burst raises the rate until it ages out, and never makes the
//!   filter forget an item inside the window;
//! - an item is forgotten once `k + l` generations have passed since the one
//!   it was added in, when the last slice holding its bits is cleared: after
//!   at most `capacity x (1 + (k + 1)/l)` insertions, or `window x (1 + (k +
//!   1)/l)` of time. From generation `l + 1` on, each cleared slice must be
//!   stood in for by a newer one holding its bit by chance (half of them
//!   are set), so the chance of still finding it halves every generation;
//!   after `k + l`, only the false-positive rate remains.
//!
//! Time is a parameter (`now_ms`), never read here: the caller's clock
//! decides, so tests control it and a primary's decision can be replayed.

use std::f64::consts::LN_2;

use crate::bloom::Modulus;
use crate::hash::HashWidth;

/// What the window counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// The last `capacity` insertions.
    Count,
    /// The last `millis` milliseconds.
    Time { millis: u64 },
}

/// Slice count and sizes chosen for an error rate and a window capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApbfShape {
    /// Slices an insertion sets (and a lookup needs in a row).
    pub k: u32,
    /// Extra slices: the window is `l` generations.
    pub l: u32,
    /// Bits per slice.
    pub slice_bits: u64,
    /// Insertions per generation.
    pub generation: u64,
}

/// Largest `k + l` the sizing considers (and a decoded filter may have).
pub const MAX_SLICES: u32 = 1024;

impl ApbfShape {
    /// The smallest filter whose steady-state false-positive rate stays at
    /// or below `error` with `capacity` items per window. Slices are sized
    /// for a fill of one half once full (`m = k g / ln 2`), as the paper
    /// prescribes; for each `k`, the largest `l` meeting the rate is taken,
    /// then the `k` needing the fewest bits.
    pub fn new(error: f64, capacity: u64) -> Option<ApbfShape> {
        if !(error > 0.0 && error < 1.0) || capacity == 0 {
            return None;
        }
        let mut best: Option<(u128, ApbfShape)> = None;
        for k in 1..=64u32 {
            let fits = |l: u32| ApbfShape::sized(k, l, capacity).false_positive_rate() <= error;
            if !fits(1) {
                continue;
            }
            // The rate grows with l: the largest l that fits, by bisection.
            let (mut lo, mut hi) = (1u32, (MAX_SLICES - k).min(capacity.min(u64::from(u32::MAX)) as u32));
            if fits(hi) {
                lo = hi;
            }
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if fits(mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let shape = ApbfShape::sized(k, lo, capacity);
            let bits = u128::from(shape.total_bits());
            if best.is_none() || best.is_some_and(|(b, _)| bits < b) {
                best = Some((bits, shape));
            }
        }
        best.map(|(_, s)| s)
    }

    fn sized(k: u32, l: u32, capacity: u64) -> ApbfShape {
        let generation = capacity.div_ceil(u64::from(l));
        let slice_bits = ((u64::from(k) * generation) as f64 / LN_2).ceil().max(8.0) as u64;
        ApbfShape { k, l, slice_bits, generation }
    }

    pub fn slices(&self) -> u32 {
        self.k + self.l
    }

    pub fn slice_bytes(&self) -> usize {
        self.slice_bits.div_ceil(8) as usize
    }

    pub fn total_bits(&self) -> u64 {
        self.slice_bits * u64::from(self.slices())
    }

    /// Items remembered for sure: `l` generations.
    pub fn capacity(&self) -> u64 {
        self.generation * u64::from(self.l)
    }

    /// The steady-state rate at its worst moment (a full current
    /// generation): the chance that some `k` consecutive slices all hold an
    /// absent item's bit, slice `i` (newest first) having received
    /// `min(i + 1, k)` generations of insertions. Exact for independent bits.
    pub fn false_positive_rate(&self) -> f64 {
        let k = self.k as usize;
        let fill = |i: usize| {
            let inserted = (i.min(k - 1) + 1) as f64 * self.generation as f64;
            1.0 - (-inserted / self.slice_bits as f64).exp()
        };
        // run[j]: probability that the current run of set bits is j (< k)
        // and no run of k has occurred yet.
        let mut run = vec![0.0f64; k];
        run[0] = 1.0;
        let mut hit = 0.0;
        for i in 0..self.slices() as usize {
            let p = fill(i);
            let mut next = vec![0.0f64; k];
            for (j, &q) in run.iter().enumerate() {
                next[0] += q * (1.0 - p);
                if j + 1 == k {
                    hit += q * p;
                } else {
                    next[j + 1] += q * p;
                }
            }
            run = next;
        }
        hit
    }
}

/// An age-partitioned Bloom filter.
#[derive(Clone, Debug, PartialEq)]
pub struct Apbf {
    shape: ApbfShape,
    error: f64,
    window: Window,
    /// The state's body: all slices (physical order, `slice_bytes` each),
    /// then one little-endian u64 per slice counting the adds made while it
    /// was the newest (its generation's size), for "items in window".
    bits: Vec<u8>,
    /// Physical index of the newest slice.
    front: u32,
    /// Insertions into the current generation.
    in_generation: u64,
    /// Time windows: when the current generation began.
    generation_started_ms: u64,
    /// Generations completed since creation.
    generations: u64,
    /// `slice_bits` as a fast divisor: a lookup reduces up to `k + l` hashes.
    modulus: Modulus,
}

impl Apbf {
    pub fn new(error: f64, capacity: u64, window: Window, now_ms: u64) -> Option<Apbf> {
        let shape = ApbfShape::new(error, capacity)?;
        if matches!(window, Window::Time { millis } if millis < u64::from(shape.l)) {
            return None;
        }
        let bytes = shape.slice_bytes().checked_add(8)?.checked_mul(shape.slices() as usize)?;
        Some(Apbf {
            shape,
            error,
            window,
            bits: vec![0; bytes],
            front: 0,
            in_generation: 0,
            generation_started_ms: now_ms,
            generations: 0,
            modulus: Modulus::new(shape.slice_bits),
        })
    }

    pub fn shape(&self) -> &ApbfShape {
        &self.shape
    }

    pub fn error_rate(&self) -> f64 {
        self.error
    }

    pub fn window(&self) -> Window {
        self.window
    }

    pub fn generations(&self) -> u64 {
        self.generations
    }

    /// Bytes of the state's body (slices and generation counts).
    pub fn bytes(&self) -> usize {
        self.bits.len()
    }

    /// The length of one generation in time windows.
    fn interval_ms(&self) -> Option<u64> {
        match self.window {
            Window::Count => None,
            // Rounded up, so that l generations last at least the window.
            Window::Time { millis } => Some(millis.div_ceil(u64::from(self.shape.l))),
        }
    }

    /// Forgets everything; the window starts again at `now_ms`.
    pub fn clear(&mut self, now_ms: u64) {
        self.bits.fill(0);
        self.front = 0;
        self.in_generation = 0;
        self.generation_started_ms = now_ms;
        self.generations = 0;
    }

    /// When the current generation began (time windows).
    pub fn generation_started_ms(&self) -> u64 {
        self.generation_started_ms
    }

    /// Generations that ended by `now_ms` but were not applied yet.
    pub fn due_generations(&self, now_ms: u64) -> u64 {
        match self.interval_ms() {
            None => 0,
            Some(iv) => now_ms.saturating_sub(self.generation_started_ms) / iv,
        }
    }

    /// Insertions into the current generation (0 once it has ended by `now_ms`).
    pub fn items_in_generation(&self, now_ms: u64) -> u64 {
        if self.due_generations(now_ms) > 0 {
            0
        } else {
            self.in_generation
        }
    }

    /// Applies the generations due at `now_ms`; returns how many. A primary
    /// calls this and replicates the count (see [`Apbf::advance`]).
    pub fn advance_to(&mut self, now_ms: u64) -> u64 {
        let due = self.due_generations(now_ms);
        if due > 0 {
            self.advance(due, self.generation_started_ms + due * self.interval_ms().unwrap_or(0));
        }
        due
    }

    /// Ends `n` generations, the last starting at `started_ms`: the replayable
    /// form of a time decision.
    pub fn advance(&mut self, n: u64, started_ms: u64) {
        for _ in 0..n.min(u64::from(self.shape.slices())) {
            self.shift();
        }
        self.generations = self.generations.saturating_add(n.saturating_sub(u64::from(self.shape.slices())));
        self.generation_started_ms = started_ms;
    }

    fn shift(&mut self) {
        let slices = self.shape.slices();
        self.front = (self.front + slices - 1) % slices;
        let size = self.shape.slice_bytes();
        let start = self.front as usize * size;
        self.bits[start..start + size].fill(0);
        self.set_count(self.front, 0);
        self.in_generation = 0;
        self.generations = self.generations.saturating_add(1);
    }

    fn count_at(&self, slice: u32) -> usize {
        self.shape.slice_bytes() * self.shape.slices() as usize + 8 * slice as usize
    }

    fn count(&self, slice: u32) -> u64 {
        let at = self.count_at(slice);
        u64::from_le_bytes(self.bits[at..at + 8].try_into().expect("8 bytes"))
    }

    fn set_count(&mut self, slice: u32, value: u64) {
        let at = self.count_at(slice);
        self.bits[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }

    /// Adds within the window as of `now_ms`: those of the `l` newest
    /// generations (generations due by then count as passed).
    pub fn items_in_window(&self, now_ms: u64) -> u64 {
        let due = self.due_generations(now_ms);
        let l = u64::from(self.shape.l);
        if due >= l {
            return 0;
        }
        (0..(l - due) as u32).map(|j| self.count(self.physical(j))).fold(0u64, u64::saturating_add)
    }

    #[inline]
    fn physical(&self, logical: u32) -> u32 {
        (self.front + logical) % self.shape.slices()
    }

    #[inline]
    fn position(&self, slice: u32, a: u64, b: u64) -> usize {
        let bit = self.modulus.reduce(a.wrapping_add(u64::from(slice).wrapping_mul(b)));
        slice as usize * self.shape.slice_bytes() * 8 + bit as usize
    }

    #[inline]
    fn get(&self, pos: usize) -> bool {
        self.bits[pos / 8] & (1 << (pos % 8)) != 0
    }

    /// Whether an item added within the window may be here, as of `now_ms`
    /// (generations due by then count as passed; nothing changes).
    pub fn contains(&self, item: &[u8], now_ms: u64) -> bool {
        let h = HashWidth::Bits64.hash(item);
        let due = self.due_generations(now_ms).min(u64::from(self.shape.slices())) as u32;
        self.has_run(h.a, h.b, self.shape.slices() - due)
    }

    /// Whether `k` consecutive slices among the newest `n` hold the item's
    /// bits. Any such run covers one of the slices `k-1, 2k-1, ...`, so only
    /// those are probed first, and the run is measured around a set one: an
    /// absent item costs about `2 (k + l) / k` probes, not `k + l`.
    fn has_run(&self, a: u64, b: u64, n: u32) -> bool {
        let k = self.shape.k;
        let set = |logical: u32| self.get(self.position(self.physical(logical), a, b));
        let mut anchor = k - 1;
        // Slices at or before `checked` are known not to start a useful run.
        let mut checked = 0u32;
        while anchor < n {
            if set(anchor) {
                let mut start = anchor;
                while start > checked && set(start - 1) {
                    start -= 1;
                }
                let mut end = anchor + 1;
                while end < n && end - start < k && set(end) {
                    end += 1;
                }
                if end - start >= k {
                    return true;
                }
                checked = end;
            }
            anchor += k;
        }
        false
    }

    /// The plain scan [`Apbf::has_run`] must agree with (tests).
    #[cfg(test)]
    fn has_run_naive(&self, a: u64, b: u64, n: u32) -> bool {
        let mut run = 0;
        for logical in 0..n {
            if self.get(self.position(self.physical(logical), a, b)) {
                run += 1;
                if run == self.shape.k {
                    return true;
                }
            } else {
                run = 0;
            }
        }
        false
    }

    /// Adds an item at `now_ms`; `true` if it was not seen within the window.
    /// A repeat is added again, so the window runs from an item's latest
    /// sighting. Applies due generations first; a count window starts a new
    /// generation when the current one is full.
    pub fn add(&mut self, item: &[u8], now_ms: u64) -> bool {
        self.advance_to(now_ms);
        let h = HashWidth::Bits64.hash(item);
        let new = !self.has_run(h.a, h.b, self.shape.slices());
        for logical in 0..self.shape.k {
            let pos = self.position(self.physical(logical), h.a, h.b);
            self.bits[pos / 8] |= 1 << (pos % 8);
        }
        self.in_generation = self.in_generation.saturating_add(1);
        self.set_count(self.front, self.count(self.front).saturating_add(1));
        // Count windows end a generation when it is full; time windows only
        // on the clock, so that no item inside the window is ever forgotten.
        if self.window == Window::Count && self.in_generation >= self.shape.generation {
            self.shift();
        }
        new
    }

    /// The filter as bytes (RDB, DUMP): [`Apbf::encode_header`], then the slices.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.encode_header();
        out.extend_from_slice(&self.bits);
        out
    }

    /// Everything but the slices, in [`HEADER_LEN`] bytes.
    pub fn encode_header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN);
        out.extend_from_slice(MAGIC);
        for v in [
            u64::from(self.shape.k),
            u64::from(self.shape.l),
            self.shape.slice_bits,
            self.shape.generation,
            self.error.to_bits(),
            match self.window {
                Window::Count => 0,
                Window::Time { millis } => millis,
            },
            u64::from(self.front),
            self.in_generation,
            self.generation_started_ms,
            self.generations,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// The state's body: the slices, physical order, then the generation counts.
    pub fn bits(&self) -> &[u8] {
        &self.bits
    }

    /// Reads [`Apbf::encode`]'s bytes, checking every field against the others
    /// and the length before allocating anything.
    pub fn decode(data: &[u8]) -> Result<Apbf, &'static str> {
        let (header, bits) = data.split_at(HEADER_LEN.min(data.len()));
        let bytes = Apbf::checked_bytes(header, usize::MAX)?;
        if bits.len() != bytes {
            return Err("slice data has the wrong length");
        }
        Apbf::with_bits(header, bits.to_vec())
    }

    /// A filter with a header's fields and empty slices (slices of more
    /// than `max_bytes` in all are refused before anything is allocated).
    pub fn from_header(header: &[u8], max_bytes: usize) -> Result<Apbf, &'static str> {
        let bytes = Apbf::checked_bytes(header, max_bytes)?;
        let mut bits = Vec::new();
        bits.try_reserve_exact(bytes).map_err(|_| "out of memory")?;
        bits.resize(bytes, 0);
        Apbf::with_bits(header, bits)
    }

    /// The slice bytes a valid header describes, at most `max_bytes`.
    fn checked_bytes(header: &[u8], max_bytes: usize) -> Result<usize, &'static str> {
        if header.len() != HEADER_LEN || &header[..MAGIC.len()] != MAGIC {
            return Err("not an APBF header");
        }
        let field = |i: usize| header_field(header, i);
        let (k, l, slice_bits, generation) = (field(0), field(1), field(2), field(3));
        let error = f64::from_bits(field(4));
        let max = u64::from(MAX_SLICES);
        if k == 0 || l == 0 || k > max || l > max || k + l > max {
            return Err("slice counts out of range");
        }
        if slice_bits == 0 || generation == 0 || !(error > 0.0 && error < 1.0) {
            return Err("sizes out of range");
        }
        let (front, in_generation) = (field(6), field(7));
        // Only count windows bound a generation's insertions.
        if front >= k + l || (field(5) == 0 && in_generation >= generation) {
            return Err("ring position out of range");
        }
        let bytes = slice_bits
            .div_ceil(8)
            .checked_add(8)
            .and_then(|b| b.checked_mul(k + l))
            .ok_or("sizes out of range")?;
        if bytes > max_bytes as u64 {
            return Err("larger than the size limit");
        }
        usize::try_from(bytes).map_err(|_| "sizes out of range")
    }

    /// The filter of a header checked by [`Apbf::checked_bytes`], over `bits`.
    fn with_bits(header: &[u8], bits: Vec<u8>) -> Result<Apbf, &'static str> {
        let field = |i: usize| header_field(header, i);
        let shape =
            ApbfShape { k: field(0) as u32, l: field(1) as u32, slice_bits: field(2), generation: field(3) };
        let window = match field(5) {
            0 => Window::Count,
            millis => Window::Time { millis },
        };
        Ok(Apbf {
            shape,
            error: f64::from_bits(field(4)),
            window,
            bits,
            front: field(6) as u32,
            in_generation: field(7),
            generation_started_ms: field(8),
            generations: field(9),
            modulus: Modulus::new(shape.slice_bits),
        })
    }

    /// Copies `data` into the slices from byte `offset` (chunked loading).
    pub fn load_bits(&mut self, offset: usize, data: &[u8]) -> Result<(), &'static str> {
        let end = offset
            .checked_add(data.len())
            .filter(|&e| e <= self.bits.len())
            .ok_or("chunk beyond the slices")?;
        self.bits[offset..end].copy_from_slice(data);
        Ok(())
    }
}

/// The first bytes of an encoded filter (and of a saved one).
pub const MAGIC: &[u8; 8] = b"BKAPBF01";

/// Field `i` (after the magic) of a header of [`HEADER_LEN`] bytes.
fn header_field(header: &[u8], i: usize) -> u64 {
    let at = MAGIC.len() + 8 * i;
    u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"))
}
/// Bytes of [`Apbf::encode_header`].
pub const HEADER_LEN: usize = 8 + 10 * 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizing_meets_the_rate_with_the_fewest_bits_found() {
        for (error, capacity) in [(0.01, 1000), (0.001, 100_000), (1e-5, 1_000_000), (0.1, 10)] {
            let s = ApbfShape::new(error, capacity).unwrap();
            assert!(s.false_positive_rate() <= error, "{s:?}");
            assert!(s.capacity() >= capacity, "{s:?}");
            let per_item = s.total_bits() as f64 / capacity as f64;
            // Within a small factor of a plain Bloom filter's -log2(p)/ln 2.
            if capacity >= 1000 {
                assert!(per_item < 3.0 * -error.log2() / LN_2, "{s:?}: {per_item} bits per item");
            }
        }
        assert!(ApbfShape::new(0.0, 10).is_none() && ApbfShape::new(0.1, 0).is_none());
    }

    #[test]
    fn skipping_scan_agrees_with_the_plain_one() {
        let mut f = Apbf::new(0.05, 300, Window::Count, 0).unwrap();
        let mut x = 7u64;
        for i in 0..20_000u64 {
            f.add(&i.to_le_bytes(), 0);
            for _ in 0..5 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let (a, b) = (x, x.rotate_left(29) | 1);
                let n = (x >> 40) as u32 % (f.shape.slices() + 1);
                assert_eq!(f.has_run(a, b, n), f.has_run_naive(a, b, n), "a={a} b={b} n={n}");
            }
        }
    }

    #[test]
    fn items_in_window_counts_the_newest_l_generations() {
        let mut f = Apbf::new(0.01, 1000, Window::Count, 0).unwrap();
        let g = f.shape().generation;
        for i in 0..300u64 {
            f.add(&i.to_le_bytes(), 0);
        }
        assert_eq!(f.items_in_window(0), 300);
        for i in 300..10_000u64 {
            f.add(&i.to_le_bytes(), 0);
        }
        // l - 1 full generations and the current one.
        let window = f.items_in_window(0);
        assert!(window <= f.shape().capacity() && window > f.shape().capacity() - g, "{window}");
        let mut t = Apbf::new(0.01, 1000, Window::Time { millis: 60_000 }, 0).unwrap();
        for i in 0..50u64 {
            t.add(&i.to_le_bytes(), i * 100);
        }
        assert_eq!(t.items_in_window(5_000), 50);
        assert_eq!(t.items_in_window(200_000), 0, "all aged out");
    }

    #[test]
    fn encoding_round_trips_and_rejects_damage() {
        let mut f = Apbf::new(0.01, 500, Window::Time { millis: 60_000 }, 1_000).unwrap();
        for i in 0..700u32 {
            f.add(&i.to_le_bytes(), 1_000 + u64::from(i));
        }
        let bytes = f.encode();
        assert_eq!(Apbf::decode(&bytes).unwrap(), f);
        assert!(Apbf::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut bad = bytes.clone();
        bad[8] = 0; // k = 0
        assert!(Apbf::decode(&bad).is_err());
        let mut bad = bytes;
        bad[8 + 6 * 8] = 0xff; // front beyond the ring
        assert!(Apbf::decode(&bad).is_err());
    }
}
