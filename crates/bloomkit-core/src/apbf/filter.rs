//! The sliding-window filter itself: slices in a ring, adds and lookups,
//! generations ended by volume and by the clock (see [`crate::apbf`] for
//! the design and its guarantees).

use super::*;
use crate::common::hash::HashWidth;
use crate::common::memory::{vec_block, zeroed_bytes, HeapBlocks, Limits, Modulus, Relocate};
use crate::common::sizing::is_rate;

/// An age-partitioned Bloom filter.
#[derive(Clone, Debug, PartialEq)]
pub struct Apbf {
    pub(super) shape: ApbfShape,
    pub(super) error: f64,
    pub(super) window: Window,
    /// Time windows: the longest a generation lasts (`P`).
    pub(super) tick_ms: u64,
    /// The state's body: all slices (physical order, `slice_bytes` each),
    /// then one little-endian u64 per slice counting the adds made while it
    /// was the newest (its generation's size), then one per slice with the
    /// time of its generation's latest add (time windows; 0 otherwise).
    pub(super) bits: Vec<u8>,
    /// Physical index of the newest slice.
    pub(super) front: u32,
    /// Insertions into the current generation.
    pub(super) in_generation: u64,
    /// Time windows: when the current generation began.
    pub(super) generation_started_ms: u64,
    /// Generations completed since creation.
    pub(super) generations: u64,
    /// The latest time a write was made at (time windows): what a replica
    /// adds at, as told by the primary's `APBF.ADVANCE`.
    pub(super) clock_ms: u64,
    /// Generations lost while they still held adds younger than the window.
    pub(super) early_losses: u64,
    /// A first-format state loaded by chunks: its generations are dated
    /// from its counts after each chunk, until the first write.
    pub(super) undated_v1: bool,
    /// `slice_bits` as a fast divisor: a lookup reduces up to `k + l` hashes.
    pub(super) modulus: Modulus,
}

/// The state's body: every slice and its counts.
impl HeapBlocks for Apbf {
    fn heap_blocks(&self, each: &mut dyn FnMut(*const u8, usize)) {
        vec_block(&self.bits, each);
    }
}

impl Apbf {
    /// A new, empty filter, sized and checked against `max_bytes` before
    /// anything is allocated; the allocation itself fails softly.
    pub fn new(params: ApbfParams, now_ms: u64, limits: Limits) -> Result<Apbf, ApbfError> {
        let ApbfParams { error, capacity, window } = params;
        if !is_rate(error) {
            return Err(ApbfError::BadErrorRate);
        }
        if capacity == 0 {
            return Err(ApbfError::BadCapacity);
        }
        if matches!(window, Window::Time { millis: 0 }) {
            return Err(ApbfError::BadSeconds);
        }
        let shape = ApbfShape::new(error, capacity, window).ok_or(ApbfError::CannotSize)?;
        let tick_ms = match window {
            Window::Count => 0,
            // Rounded up: l_v - 1 ticks always last less than the window... at
            // least W (l_v - 1) / l_v; the proof needs only P >= W / l_v.
            Window::Time { millis } => millis.div_ceil(u64::from(shape.window_generations)),
        };
        let bits = Apbf::allocate(&shape, limits)?;
        Ok(Apbf {
            shape,
            error,
            window,
            tick_ms,
            bits,
            front: 0,
            in_generation: 0,
            generation_started_ms: now_ms,
            generations: 0,
            clock_ms: now_ms,
            early_losses: 0,
            undated_v1: false,
            modulus: Modulus::new(shape.slice_bits),
        })
    }

    /// Zeroed state for a shape: the size is computed and compared with
    /// the limit first, and a failed allocation is an error, not an abort.
    pub(super) fn allocate(shape: &ApbfShape, limits: Limits) -> Result<Vec<u8>, ApbfError> {
        let bytes = shape.bytes().ok_or(ApbfError::CannotSize)?;
        limits.check(bytes)?;
        zeroed_bytes(bytes).map(Vec::from).map_err(|_| ApbfError::OutOfMemory)
    }

    /// A copy (COPY), failing softly when memory is short.
    pub fn try_clone(&self) -> Result<Apbf, ApbfError> {
        let mut bits = Vec::new();
        bits.try_reserve_exact(self.bits.len()).map_err(|_| ApbfError::OutOfMemory)?;
        bits.extend_from_slice(&self.bits);
        Ok(Apbf { bits, modulus: Modulus::new(self.shape.slice_bits), ..*self })
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

    /// Time windows: the longest a generation lasts, in milliseconds.
    pub fn tick_ms(&self) -> Option<u64> {
        match self.window {
            Window::Count => None,
            Window::Time { .. } => Some(self.tick_ms),
        }
    }

    pub fn generations(&self) -> u64 {
        self.generations
    }

    /// Generations lost while they still held adds younger than the window
    /// (time windows): each means more than `capacity` adds arrived within
    /// a window, and some were forgotten early.
    pub fn early_losses(&self) -> u64 {
        self.early_losses
    }

    /// Offers the filter's one buffer (its slices and counts) to `to`, for
    /// a server's active defragmentation, when `from` is 0; never asks to
    /// resume (`None`), as there is nothing after it. The filter itself is
    /// the caller's to move.
    pub fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize> {
        if from == 0 {
            to.vec(&mut self.bits);
        }
        None
    }

    /// Bytes of the state's body (slices, generation counts and times).
    pub fn bytes(&self) -> usize {
        self.bits.len()
    }

    /// Forgets everything; the window starts again at `now_ms`.
    pub fn clear(&mut self, now_ms: u64) {
        self.bits.fill(0);
        self.front = 0;
        self.in_generation = 0;
        self.generation_started_ms = now_ms;
        self.generations = 0;
        self.clock_ms = now_ms;
        self.early_losses = 0;
    }

    /// When the current generation began (time windows).
    pub fn generation_started_ms(&self) -> u64 {
        self.generation_started_ms
    }

    /// The time of the latest write (time windows): a replica's adds use it.
    pub fn clock_ms(&self) -> u64 {
        self.clock_ms
    }

    /// Generations that ended on the clock by `now_ms` but were not applied yet.
    pub fn due_generations(&self, now_ms: u64) -> u64 {
        match self.tick_ms() {
            None => 0,
            Some(tick) => now_ms.saturating_sub(self.generation_started_ms) / tick.max(1),
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
            let started = self.generation_started_ms.saturating_add(due.saturating_mul(self.tick_ms));
            self.advance(due, started, now_ms);
        }
        self.clock_ms = self.clock_ms.max(now_ms);
        due
    }

    /// Ends `n` generations on the clock, the last starting at `started_ms`,
    /// as decided at `now_ms`: the replayable form of a time decision.
    pub fn advance(&mut self, n: u64, started_ms: u64, now_ms: u64) {
        self.undated_v1 = false;
        let slices = u64::from(self.shape.slices());
        for i in 0..n.min(slices) {
            // Shift i (of n) ended a generation at started - (n - 1 - i) ticks:
            // the time its losses are judged at, as a lookup then would have.
            let ended = started_ms.saturating_sub((n - 1 - i).saturating_mul(self.tick_ms));
            self.shift(ended);
        }
        // Beyond a whole ring, further generations only count.
        self.generations = self.generations.saturating_add(n.saturating_sub(slices));
        self.generation_started_ms = started_ms;
        self.clock_ms = self.clock_ms.max(now_ms);
    }

    /// Ends the current generation at `now_ms` (the time it ended).
    pub(super) fn shift(&mut self, now_ms: u64) {
        let slices = self.shape.slices();
        // The generation `l` old loses its guarantee now: early if it still
        // holds adds younger than the window.
        if let Window::Time { millis } = self.window {
            let leaving = self.physical(self.shape.l);
            if self.count(leaving) > 0 && self.last_add(leaving).saturating_add(millis) > now_ms {
                self.early_losses = self.early_losses.saturating_add(1);
            }
        }
        self.front = (self.front + slices - 1) % slices;
        let size = self.shape.slice_bytes();
        let start = self.front as usize * size;
        self.bits[start..start + size].fill(0);
        self.set_count(self.front, 0);
        self.set_last_add(self.front, 0);
        self.in_generation = 0;
        self.generations = self.generations.saturating_add(1);
    }

    pub(super) fn count_at(&self, slice: u32) -> usize {
        self.shape.slice_bytes() * self.shape.slices() as usize + 8 * slice as usize
    }

    pub(super) fn last_add_at(&self, slice: u32) -> usize {
        self.count_at(slice) + 8 * self.shape.slices() as usize
    }

    pub(super) fn word(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bits[at..at + 8].try_into().expect("8 bytes"))
    }

    pub(super) fn set_word(&mut self, at: usize, value: u64) {
        self.bits[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }

    pub(super) fn count(&self, slice: u32) -> u64 {
        self.word(self.count_at(slice))
    }

    pub(super) fn set_count(&mut self, slice: u32, value: u64) {
        self.set_word(self.count_at(slice), value);
    }

    pub(super) fn last_add(&self, slice: u32) -> u64 {
        self.word(self.last_add_at(slice))
    }

    pub(super) fn set_last_add(&mut self, slice: u32, value: u64) {
        self.set_word(self.last_add_at(slice), value);
    }

    /// Adds within the window as of `now_ms`. Count windows: those of the
    /// `l` newest generations. Time windows: those of the generations still
    /// remembered for sure whose latest add is younger than the window
    /// (generations due by then count as ended).
    pub fn items_in_window(&self, now_ms: u64) -> u64 {
        let due = self.due_generations(now_ms);
        let l = u64::from(self.shape.l);
        let newest = match self.window {
            Window::Count => l,
            Window::Time { .. } => (l + 1).saturating_sub(due),
        };
        (0..newest as u32)
            .map(|j| self.physical(j))
            .filter(|&p| match self.window {
                Window::Count => true,
                Window::Time { millis } => self.last_add(p).saturating_add(millis) > now_ms,
            })
            .map(|p| self.count(p))
            .fold(0u64, u64::saturating_add)
    }

    #[inline]
    pub(super) fn physical(&self, logical: u32) -> u32 {
        (self.front + logical) % self.shape.slices()
    }

    #[inline]
    pub(super) fn position(&self, slice: u32, a: u64, b: u64) -> usize {
        let bit = self.modulus.reduce(a.wrapping_add(u64::from(slice).wrapping_mul(b)));
        slice as usize * self.shape.slice_bytes() * 8 + bit as usize
    }

    #[inline]
    pub(super) fn get(&self, pos: usize) -> bool {
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
    pub(super) fn has_run(&self, a: u64, b: u64, n: u32) -> bool {
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
    pub(super) fn has_run_naive(&self, a: u64, b: u64, n: u32) -> bool {
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
    /// sighting. Applies generations due on the clock first, and ends the
    /// current generation once it holds `g` adds, in every kind of window.
    pub fn add(&mut self, item: &[u8], now_ms: u64) -> bool {
        self.undated_v1 = false;
        let timed = self.window != Window::Count;
        if timed {
            self.advance_to(now_ms);
        }
        let h = HashWidth::Bits64.hash(item);
        let new = !self.has_run(h.a, h.b, self.shape.slices());
        for logical in 0..self.shape.k {
            let pos = self.position(self.physical(logical), h.a, h.b);
            self.bits[pos / 8] |= 1 << (pos % 8);
        }
        self.in_generation = self.in_generation.saturating_add(1);
        self.set_count(self.front, self.count(self.front).saturating_add(1));
        if timed {
            self.set_last_add(self.front, now_ms);
        }
        if self.in_generation >= self.shape.generation {
            self.shift(now_ms);
            if timed {
                self.generation_started_ms = now_ms;
            }
        }
        new
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn relocate_moves_the_one_buffer() {
        use crate::common::memory::TestMover;
        let mut f = new(0.01, 1000, Window::Count, 0);
        for i in 0..500u32 {
            f.add(&i.to_le_bytes(), 0);
        }
        let copy = f.clone();
        let mut mover = TestMover::new(1);
        assert_eq!(mover.run(|from, to| f.relocate(from, to)), 1);
        assert_eq!(mover.moved_from.len(), 1);
        assert_eq!(f, copy);
        assert!((0..500u32).all(|i| f.contains(&i.to_le_bytes(), 0)));
    }

    pub(in crate::apbf) fn new(error: f64, capacity: u64, window: Window, now: u64) -> Apbf {
        Apbf::new(ApbfParams { error, capacity, window }, now, Limits::NONE).unwrap()
    }

    /// The rate as it was first written (a row per slice, summed whole),
    /// apart from the code under test.
    fn rate_the_long_way(s: &ApbfShape) -> f64 {
        let k = s.k as usize;
        let fill = |i: usize| {
            let inserted = (i.min(k - 1) + 1) as f64 * s.generation as f64;
            1.0 - (-inserted / s.slice_bits as f64).exp()
        };
        let mut run = vec![0.0f64; k];
        run[0] = 1.0;
        let mut hit = 0.0;
        for i in 0..s.slices() as usize {
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

    /// The sizing as it was first written (every `k`, every rate summed
    /// whole, by the shapes and the bisection the sizing still uses): what
    /// `ApbfShape::new` must still choose, since a replica of another
    /// release sizes the same `APBF.RESERVE` again.
    fn sized_the_long_way(error: f64, capacity: u64, window: Window) -> Option<ApbfShape> {
        let timed = matches!(window, Window::Time { .. });
        let mut best: Option<(u128, ApbfShape)> = None;
        for k in 1..=64u32 {
            let most = if timed { (MAX_SLICES - k).div_ceil(2) } else { MAX_SLICES - k };
            let most = most.min(capacity.min(u64::from(u32::MAX)) as u32);
            let shape = |lv: u32| ApbfShape::sized(k, lv, capacity, timed);
            let fits = |lv: u32| rate_the_long_way(&shape(lv)) <= error;
            if most == 0 || !fits(1) {
                continue;
            }
            let s = shape(largest_fitting(most, fits));
            let bits = u128::from(s.slice_bits) * u128::from(s.slices());
            if best.is_none_or(|(b, _)| bits < b) {
                best = Some((bits, s));
            }
        }
        best.map(|(_, s)| s)
    }

    #[test]
    fn sizing_chooses_the_shape_the_long_way_chose() {
        for window in [Window::Count, Window::Time { millis: 60_000 }] {
            for error in [0.5, 0.1, 0.01, 1e-4, 1e-7] {
                for capacity in [1, 3, 100, 12_345, 10_000_000, 1 << 40, 1 << 52] {
                    let shape = ApbfShape::new(error, capacity, window);
                    assert_eq!(
                        shape,
                        sized_the_long_way(error, capacity, window),
                        "{error} {capacity} {window:?}"
                    );
                    if let Some(s) = shape {
                        assert_eq!(s.false_positive_rate(), rate_the_long_way(&s), "{s:?}");
                    }
                }
            }
        }
        // Shapes as the sizing of 120f96c chose them (APBF.INFO's slices,
        // hashes and generation on its module).
        let s = ApbfShape::new(0.001, 1_000_000, Window::Count).unwrap();
        assert_eq!((s.slices(), s.k, s.generation), (155, 16, 7195), "{s:?}");
        let s = ApbfShape::new(1e-9, 1_000_000, Window::Count).unwrap();
        assert_eq!((s.slices(), s.k), (615, 38), "{s:?}");
        let s = ApbfShape::new(0.001, 1_000_000, Window::Time { millis: 3_600_000 }).unwrap();
        assert_eq!((s.slices(), s.k), (155, 16), "{s:?}");
    }

    #[test]
    fn sizing_meets_the_rate_with_the_fewest_bits_found() {
        for window in [Window::Count, Window::Time { millis: 60_000 }] {
            for (error, capacity) in [(0.01, 1000), (0.001, 100_000), (1e-5, 1_000_000), (0.1, 10)] {
                let s = ApbfShape::new(error, capacity, window).unwrap();
                assert!(s.false_positive_rate() <= error, "{s:?}");
                assert!(s.capacity() >= capacity, "{s:?}");
                let lv = s.window_generations;
                assert_eq!(s.l, if window == Window::Count { lv } else { 2 * lv - 1 }, "{s:?}");
                let per_item = s.total_bits() as f64 / capacity as f64;
                // Within a small factor of a plain Bloom filter's -log2(p)/ln 2
                // (time windows carry about twice the slices).
                let factor = if window == Window::Count { 3.0 } else { 5.0 };
                if capacity >= 1000 {
                    assert!(per_item < factor * -error.log2() / LN_2, "{s:?}: {per_item} bits per item");
                }
            }
        }
        assert!(ApbfShape::new(0.0, 10, Window::Count).is_none());
        assert!(ApbfShape::new(0.1, 0, Window::Count).is_none());
    }

    #[test]
    fn sizes_are_checked_before_anything_is_allocated() {
        let huge = ApbfParams { error: 0.01, capacity: 1_000_000_000_000, window: Window::Count };
        match Apbf::new(huge, 0, Limits::at_most(4 << 30)) {
            Err(ApbfError::TooLarge { bytes, limit }) => assert!(bytes > limit, "{bytes}"),
            other => panic!("{other:?}"),
        }
        let absurd =
            ApbfParams { error: 1e-300, capacity: i64::MAX as u64, window: Window::Time { millis: 1000 } };
        assert!(matches!(
            Apbf::new(absurd, 0, Limits::at_most(1 << 50)),
            Err(ApbfError::TooLarge { .. } | ApbfError::CannotSize)
        ));
        // A header that claims slices beyond the address space is refused
        // before allocation, with or without a limit.
        let mut header = new(0.01, 100, Window::Count, 0).encode_header();
        header[8 + 16..8 + 24].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
        assert!(Apbf::from_header(&header, None).is_err());
        assert!(Apbf::from_header(&header, Some(1 << 30)).is_err());
    }

    #[test]
    fn skipping_scan_agrees_with_the_plain_one() {
        let mut f = new(0.05, 300, Window::Count, 0);
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
    fn items_in_window_counts_what_is_remembered() {
        let mut f = new(0.01, 1000, Window::Count, 0);
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
        let mut t = new(0.01, 1000, Window::Time { millis: 60_000 }, 0);
        for i in 0..50u64 {
            t.add(&i.to_le_bytes(), i * 100);
        }
        assert_eq!(t.items_in_window(5_000), 50);
        assert_eq!(t.items_in_window(200_000), 0, "all aged out");
    }
}
