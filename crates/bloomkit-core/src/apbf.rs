//! The Age-Partitioned Bloom Filter (Shtul, Baquero and Almeida, 2020,
//! arXiv 2001.03147): dedup over a sliding window.
//!
//! `k + l` slices of `m` bits in a ring. An insertion sets one bit in each
//! of the `k` newest slices; a lookup looks for `k` consecutive slices
//! holding the item's bits. When a generation ends, the oldest slice is
//! cleared and becomes the newest, so an item's bits age by one slice per
//! generation: an item added in a generation is found for sure until `l`
//! more generations have ended, and then fades over `k` more.
//!
//! # When a generation ends
//! - **By volume**, in every window: when it holds `g` adds. No slice then
//!   ever holds more than `k x g` adds, which is what the slices are sized
//!   for, so the false-positive rate stays at or below the configured rate
//!   at every moment, bursts included.
//! - **By the clock**, in time windows: once it has lasted the tick `P`.
//!   Generations due on the clock are applied together when the filter is
//!   next touched (catching up after silence), each counted as lasting `P`.
//!
//! A count window of capacity `C` has `l = C / g` generations. A time
//! window of `W` has `l = 2 l_v - 1` generations, where `l_v = C / g`, and
//! a tick `P = W / l_v`. Why: a generation is lost when `l` younger ones
//! have ended. If an item `x` added less than `W` ago were lost, those `l`
//! generations all began after `x` and ended within less than `W`, so at
//! most `l_v - 1` of them lasted `P` (ended by the clock), and at least
//! `l - (l_v - 1) = l_v` ended by volume, holding `l_v x g >= C` adds: more
//! than `C` adds arrived within the window. Hence the guarantees (each
//! tested in `tests/apbf.rs`, and bursts in the module's tests):
//! - (a) no false negative for an item added within the window while at
//!   most `capacity` adds arrive per window, whatever their timing: bursts,
//!   bursts followed by silence, trickles;
//! - (b) a false-positive rate at or below the configured rate at every
//!   moment (from the sizing below), whatever the timing;
//! - (c) every generation ends within `P`, so an item is found only at the
//!   false-positive rate once `(l + k) x P = W x (2 + (k - 1) / l_v)` has
//!   passed (count windows: `(l + k) x g` adds), and for sure not before `W`;
//! - (d) when more than `capacity` adds arrive within a time window, volume
//!   ends lose the oldest generations early; each generation lost while it
//!   still held adds younger than the window is counted
//!   ([`Apbf::early_losses`], `APBF.INFO`'s `Generations lost early`).
//!
//! No rule over one ring can do much better: an item added just before an
//! older one's window ends must survive a burst of nearly `C` adds (`l_v`
//! volume generations), while the older one must be gone soon after; so
//! the ring needs about `l_v` generations of slack, which is the price of
//! (a) under any timing (about twice the slices of a count window).
//!
//! Time is a parameter (`now_ms`), never read here: the caller's clock
//! decides, so tests control it and a primary's decision can be replayed.

use std::f64::consts::LN_2;

use crate::bloom::{zeroed_bytes, Modulus};
use crate::hash::HashWidth;

/// What the window counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// The last `capacity` insertions.
    Count,
    /// The last `millis` milliseconds.
    Time { millis: u64 },
}

/// What `APBF.RESERVE` asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ApbfParams {
    pub error: f64,
    /// The most adds per window.
    pub capacity: u64,
    pub window: Window,
}

/// The longest time window accepted: ten years, in seconds.
pub const MAX_WINDOW_SECONDS: i64 = 10 * 365 * 86_400;

/// Everything that can go wrong with a sliding-window filter. Reply texts
/// live in [`crate::error`], with every other reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApbfError {
    /// The error rate is not a number strictly between 0 and 1.
    BadErrorRate,
    /// The capacity is not a positive integer.
    BadCapacity,
    /// Neither `COUNT` nor `TIME seconds`.
    BadWindow,
    /// `TIME` seconds not within 1 ..= [`MAX_WINDOW_SECONDS`].
    BadSeconds,
    /// No shape of at most [`MAX_SLICES`] slices meets the rate.
    CannotSize,
    /// The filter would exceed `bf.max-filter-bytes`.
    TooLarge {
        bytes: u64,
        limit: u64,
    },
    OutOfMemory,
    /// `APBF.ADVANCE`'s count or times are not non-negative integers.
    BadAdvance,
    /// A state (RDB, DUMP, LOADCHUNK header, file) that is not valid.
    BadState(&'static str),
    /// A LOADCHUNK chunk that does not fit the filter.
    BadChunk,
}

/// Slice count and sizes chosen for an error rate and a window capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApbfShape {
    /// Slices an insertion sets (and a lookup needs in a row).
    pub k: u32,
    /// Generations an item is found for sure after its own.
    pub l: u32,
    /// Bits per slice.
    pub slice_bits: u64,
    /// Insertions per generation (`g`).
    pub generation: u64,
    /// Generations of `g` adds that make up the capacity (`l_v`).
    pub window_generations: u32,
}

/// Largest `k + l` the sizing considers (and a decoded filter may have).
pub const MAX_SLICES: u32 = 1024;

impl ApbfShape {
    /// The smallest filter whose false-positive rate stays at or below
    /// `error` with `capacity` adds per window. Slices are sized for a fill
    /// of one half once full (`m = k g / ln 2`), as the paper prescribes;
    /// for each `k`, the largest `l_v` meeting the rate is taken, then the
    /// `k` needing the fewest bits. Time windows get their `l_v - 1`
    /// generations of slack (see the module docs).
    pub fn new(error: f64, capacity: u64, window: Window) -> Option<ApbfShape> {
        if !(error > 0.0 && error < 1.0) || capacity == 0 {
            return None;
        }
        let timed = matches!(window, Window::Time { .. });
        let mut best: Option<(u128, ApbfShape)> = None;
        for k in 1..=64u32 {
            let most = if timed { (MAX_SLICES - k).div_ceil(2) } else { MAX_SLICES - k };
            let most = most.min(capacity.min(u64::from(u32::MAX)) as u32);
            if most == 0 {
                continue;
            }
            let fits = |lv: u32| ApbfShape::sized(k, lv, capacity, timed).false_positive_rate() <= error;
            if !fits(1) {
                continue;
            }
            // The rate grows with l_v: the largest l_v that fits, by bisection.
            let (mut lo, mut hi) = (1u32, most);
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
            let shape = ApbfShape::sized(k, lo, capacity, timed);
            let bits = u128::from(shape.slice_bits) * u128::from(shape.slices());
            if best.is_none() || best.is_some_and(|(b, _)| bits < b) {
                best = Some((bits, shape));
            }
        }
        best.map(|(_, s)| s)
    }

    fn sized(k: u32, lv: u32, capacity: u64, timed: bool) -> ApbfShape {
        let generation = capacity.div_ceil(u64::from(lv));
        // Saturates for absurd capacities; `bytes()` then refuses the shape.
        let slice_bits = ((u64::from(k) as f64 * generation as f64) / LN_2).ceil().max(8.0) as u64;
        let l = if timed { 2 * lv - 1 } else { lv };
        ApbfShape { k, l, slice_bits, generation, window_generations: lv }
    }

    pub fn slices(&self) -> u32 {
        self.k + self.l
    }

    pub fn slice_bytes(&self) -> usize {
        self.slice_bits.div_ceil(8) as usize
    }

    pub fn total_bits(&self) -> u64 {
        self.slice_bits.saturating_mul(u64::from(self.slices()))
    }

    /// The size rule, in one place: bytes of the state's body (slices, then
    /// per slice its add count and its latest add time), with checked
    /// arithmetic; `None` when not representable.
    pub fn bytes(&self) -> Option<u64> {
        self.slice_bits.div_ceil(8).checked_add(16)?.checked_mul(u64::from(self.slices()))
    }

    /// Adds remembered for sure: `l_v` generations of `g`.
    pub fn capacity(&self) -> u64 {
        self.generation.saturating_mul(u64::from(self.window_generations))
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
    /// Time windows: the longest a generation lasts (`P`).
    tick_ms: u64,
    /// The state's body: all slices (physical order, `slice_bytes` each),
    /// then one little-endian u64 per slice counting the adds made while it
    /// was the newest (its generation's size), then one per slice with the
    /// time of its generation's latest add (time windows; 0 otherwise).
    bits: Vec<u8>,
    /// Physical index of the newest slice.
    front: u32,
    /// Insertions into the current generation.
    in_generation: u64,
    /// Time windows: when the current generation began.
    generation_started_ms: u64,
    /// Generations completed since creation.
    generations: u64,
    /// The latest time a write was made at (time windows): what a replica
    /// adds at, as told by the primary's `APBF.ADVANCE`.
    clock_ms: u64,
    /// Generations lost while they still held adds younger than the window.
    early_losses: u64,
    /// A first-format state loaded by chunks: its generations are dated
    /// from its counts after each chunk, until the first write.
    undated_v1: bool,
    /// `slice_bits` as a fast divisor: a lookup reduces up to `k + l` hashes.
    modulus: Modulus,
}

impl Apbf {
    /// A new, empty filter, sized and checked against `max_bytes` before
    /// anything is allocated; the allocation itself fails softly.
    pub fn new(params: ApbfParams, now_ms: u64, max_bytes: Option<u64>) -> Result<Apbf, ApbfError> {
        let ApbfParams { error, capacity, window } = params;
        if !(error > 0.0 && error < 1.0) {
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
        let bits = Apbf::allocate(&shape, max_bytes)?;
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
    fn allocate(shape: &ApbfShape, max_bytes: Option<u64>) -> Result<Vec<u8>, ApbfError> {
        let bytes = shape.bytes().ok_or(ApbfError::CannotSize)?;
        if let Some(limit) = max_bytes {
            if bytes > limit {
                return Err(ApbfError::TooLarge { bytes, limit });
            }
        }
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
    fn shift(&mut self, now_ms: u64) {
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

    fn count_at(&self, slice: u32) -> usize {
        self.shape.slice_bytes() * self.shape.slices() as usize + 8 * slice as usize
    }

    fn last_add_at(&self, slice: u32) -> usize {
        self.count_at(slice) + 8 * self.shape.slices() as usize
    }

    fn word(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bits[at..at + 8].try_into().expect("8 bytes"))
    }

    fn set_word(&mut self, at: usize, value: u64) {
        self.bits[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }

    fn count(&self, slice: u32) -> u64 {
        self.word(self.count_at(slice))
    }

    fn set_count(&mut self, slice: u32, value: u64) {
        self.set_word(self.count_at(slice), value);
    }

    fn last_add(&self, slice: u32) -> u64 {
        self.word(self.last_add_at(slice))
    }

    fn set_last_add(&mut self, slice: u32, value: u64) {
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

    /// The filter as bytes (RDB, DUMP): [`Apbf::encode_header`], then the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.encode_header();
        out.extend_from_slice(&self.bits);
        out
    }

    /// Everything but the body, in [`HEADER_LEN`] bytes.
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
            u64::from(self.shape.window_generations),
            self.tick_ms,
            self.clock_ms,
            self.early_losses,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// The state's body: the slices, physical order, then the generation
    /// counts and times.
    pub fn bits(&self) -> &[u8] {
        &self.bits
    }

    /// Reads [`Apbf::encode`]'s bytes (or those of the first format),
    /// checking every field against the others, the length and `max_bytes`
    /// before allocating anything.
    pub fn decode(data: &[u8], max_bytes: Option<u64>) -> Result<Apbf, ApbfError> {
        let (f, header_len) = Apbf::check_state(data, max_bytes)?;
        let mut bits = Vec::new();
        bits.try_reserve_exact(f.state_len()).map_err(|_| ApbfError::OutOfMemory)?;
        bits.extend_from_slice(&data[header_len..]);
        f.with_body(bits)
    }

    /// [`Apbf::decode`] over a buffer it may keep (RDB and DUMP loads), so
    /// that a large filter is not held twice while it loads.
    pub fn decode_owned(mut data: Vec<u8>, max_bytes: Option<u64>) -> Result<Apbf, ApbfError> {
        let (f, header_len) = Apbf::check_state(&data, max_bytes)?;
        data.drain(..header_len);
        f.with_body(data)
    }

    /// The filter a whole state describes, with an empty body, and its
    /// header's length; the body's length is checked.
    fn check_state(data: &[u8], max_bytes: Option<u64>) -> Result<(Apbf, usize), ApbfError> {
        let header_len = Apbf::header_len(data)?;
        let (header, body) = data.split_at(header_len.min(data.len()));
        let f = Apbf::parse_header(header, max_bytes)?;
        let expected = if header_len == HEADER_LEN_V1 { f.last_add_at(0) } else { f.state_len() };
        if body.len() != expected {
            return Err(ApbfError::BadState("the body has the wrong length"));
        }
        Ok((f, header_len))
    }

    /// Bytes of the body, from the shape (checked when the header was).
    fn state_len(&self) -> usize {
        self.shape.bytes().unwrap_or(0) as usize
    }

    /// Takes a checked body (a first-format one lacks the add times).
    fn with_body(mut self, mut bits: Vec<u8>) -> Result<Apbf, ApbfError> {
        let first_format = bits.len() < self.state_len();
        if first_format {
            bits.try_reserve_exact(self.state_len() - bits.len()).map_err(|_| ApbfError::OutOfMemory)?;
            bits.resize(self.state_len(), 0);
        }
        self.bits = bits;
        if first_format {
            self.date_v1_generations();
        }
        self.undated_v1 = false;
        Ok(self)
    }

    /// The length of the header `data` starts with, from its magic.
    pub fn header_len(data: &[u8]) -> Result<usize, ApbfError> {
        match data.get(..MAGIC.len()) {
            Some(m) if m == MAGIC => Ok(HEADER_LEN),
            Some(m) if m == MAGIC_V1 => Ok(HEADER_LEN_V1),
            _ => Err(ApbfError::BadState("not a sliding-window filter state")),
        }
    }

    /// A filter with a header's fields and an empty body, checked and
    /// compared with `max_bytes` before anything is allocated. Takes the
    /// header of either format: a first-format filter keeps its shape (one
    /// generation of slack, ticks of `W / l`), gaining volume ends.
    pub fn from_header(header: &[u8], max_bytes: Option<u64>) -> Result<Apbf, ApbfError> {
        let mut f = Apbf::parse_header(header, max_bytes)?;
        f.bits = Apbf::allocate(&f.shape, max_bytes)?;
        Ok(f)
    }

    /// Every check of a header, with no body allocated.
    fn parse_header(header: &[u8], max_bytes: Option<u64>) -> Result<Apbf, ApbfError> {
        let bad = ApbfError::BadState;
        let v1 = match Apbf::header_len(header)? {
            len if len != header.len() => return Err(bad("the header has the wrong length")),
            len => len == HEADER_LEN_V1,
        };
        let field = |i: usize| u64::from_le_bytes(header[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"));
        let (k, l, slice_bits, generation) = (field(0), field(1), field(2), field(3));
        let error = f64::from_bits(field(4));
        let max = u64::from(MAX_SLICES);
        if k == 0 || l == 0 || k > max || l > max || k + l > max {
            return Err(bad("slice counts out of range"));
        }
        if slice_bits == 0 || generation == 0 || !(error > 0.0 && error < 1.0) {
            return Err(bad("sizes out of range"));
        }
        let window = match field(5) {
            0 => Window::Count,
            millis => Window::Time { millis },
        };
        let (front, in_generation) = (field(6), field(7));
        // The first format let time windows grow a generation without bound.
        if front >= k + l || (!(v1 && window != Window::Count) && in_generation >= generation) {
            return Err(bad("ring position out of range"));
        }
        let (window_generations, tick_ms, clock_ms, early_losses) = if v1 {
            let tick = match window {
                Window::Count => 0,
                Window::Time { millis } => millis.div_ceil(l),
            };
            (l, tick, field(8), 0)
        } else {
            (field(10), field(11), field(12), field(13))
        };
        let timed = window != Window::Count;
        if window_generations == 0 || window_generations > l || (timed != (tick_ms > 0)) {
            return Err(bad("window generations or tick out of range"));
        }
        // Times travel in replication as signed 64-bit integers.
        if field(8) > i64::MAX as u64 || clock_ms > i64::MAX as u64 {
            return Err(bad("times out of range"));
        }
        let shape = ApbfShape {
            k: k as u32,
            l: l as u32,
            slice_bits,
            generation,
            window_generations: window_generations as u32,
        };
        let bytes = shape.bytes().filter(|&b| usize::try_from(b).is_ok()).ok_or(bad("sizes out of range"))?;
        if let Some(limit) = max_bytes {
            if bytes > limit {
                return Err(ApbfError::TooLarge { bytes, limit });
            }
        }
        Ok(Apbf {
            shape,
            error,
            window,
            tick_ms,
            bits: Vec::new(),
            front: front as u32,
            in_generation,
            generation_started_ms: field(8),
            generations: field(9),
            clock_ms,
            early_losses,
            undated_v1: v1 && window != Window::Count,
            modulus: Modulus::new(slice_bits),
        })
    }

    /// A first-format time window kept no add times: each generation's is
    /// taken as the latest it can have been (its end, or for the current
    /// one a tick after its start).
    fn date_v1_generations(&mut self) {
        if self.window == Window::Count {
            return;
        }
        for j in 0..self.shape.slices() {
            let p = self.physical(j);
            if self.count(p) > 0 {
                let ago = u64::from(j.saturating_sub(1)).saturating_mul(self.tick_ms);
                let ended = self.generation_started_ms.saturating_sub(ago);
                // The current generation: the latest its adds can have been
                // made at before the first format's clock ended it.
                let current = self.generation_started_ms.saturating_add(self.tick_ms.saturating_sub(1));
                let at = if j == 0 { current } else { ended };
                self.set_last_add(p, at);
            }
        }
    }

    /// One step of `APBF.SCANDUMP`, the inverse of `APBF.LOADCHUNK`: iter 0
    /// is the header (next: 1); iter `1 + offset` is the body from `offset`,
    /// at most [`crate::dump::MAX_CHUNK`] bytes (next: 1 + its end); past
    /// the body, `(0, [])`. Each `(iter, data)` loads with
    /// `APBF.LOADCHUNK key iter data`.
    pub fn scan_chunk(&self, iter: u64) -> (u64, std::borrow::Cow<'_, [u8]>) {
        if iter == 0 {
            return (1, std::borrow::Cow::Owned(self.encode_header()));
        }
        let start = usize::try_from(iter - 1).unwrap_or(usize::MAX);
        if start >= self.bits.len() {
            return (0, std::borrow::Cow::Borrowed(&[]));
        }
        let end = start.saturating_add(crate::dump::MAX_CHUNK as usize).min(self.bits.len());
        (1 + end as u64, std::borrow::Cow::Borrowed(&self.bits[start..end]))
    }

    /// Copies `data` into the body from byte `offset` (chunked loading).
    pub fn load_bits(&mut self, offset: u64, data: &[u8]) -> Result<(), ApbfError> {
        let start = usize::try_from(offset).map_err(|_| ApbfError::BadChunk)?;
        let end =
            start.checked_add(data.len()).filter(|&e| e <= self.bits.len()).ok_or(ApbfError::BadChunk)?;
        self.bits[start..end].copy_from_slice(data);
        if self.undated_v1 {
            self.date_v1_generations();
        }
        Ok(())
    }
}

/// The length of the body that follows a header of either format (what
/// `APBF.SCANDUMP` sends and a state file holds after it), checked.
pub fn state_body_len(header: &[u8]) -> Result<u64, ApbfError> {
    let f = Apbf::parse_header(header, None)?;
    Ok(if header.len() == HEADER_LEN_V1 { f.last_add_at(0) } else { f.state_len() } as u64)
}

/// The first bytes of an encoded filter (and of a saved one).
pub const MAGIC: &[u8; 8] = b"BKAPBF02";
/// The first format (bloomkit 0.1 before burst-safe windows): read, never written.
pub const MAGIC_V1: &[u8; 8] = b"BKAPBF01";
/// Bytes of [`Apbf::encode_header`].
pub const HEADER_LEN: usize = 8 + 14 * 8;
/// Bytes of a first-format header.
pub const HEADER_LEN_V1: usize = 8 + 10 * 8;

#[cfg(test)]
mod tests {
    use super::*;

    fn new(error: f64, capacity: u64, window: Window, now: u64) -> Apbf {
        Apbf::new(ApbfParams { error, capacity, window }, now, None).unwrap()
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
        match Apbf::new(huge, 0, Some(4 << 30)) {
            Err(ApbfError::TooLarge { bytes, limit }) => assert!(bytes > limit, "{bytes}"),
            other => panic!("{other:?}"),
        }
        let absurd =
            ApbfParams { error: 1e-300, capacity: i64::MAX as u64, window: Window::Time { millis: 1000 } };
        assert!(matches!(
            Apbf::new(absurd, 0, Some(1 << 50)),
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

    #[test]
    fn encoding_round_trips_and_rejects_damage() {
        let mut f = new(0.01, 500, Window::Time { millis: 60_000 }, 1_000);
        for i in 0..700u32 {
            f.add(&i.to_le_bytes(), 1_000 + u64::from(i));
        }
        let bytes = f.encode();
        assert_eq!(Apbf::decode(&bytes, None).unwrap(), f);
        assert_eq!(f.try_clone().unwrap(), f);
        assert!(Apbf::decode(&bytes[..bytes.len() - 1], None).is_err());
        assert!(matches!(
            Apbf::decode(&bytes, Some(bytes.len() as u64 / 2)),
            Err(ApbfError::TooLarge { .. })
        ));
        let mut bad = bytes.clone();
        bad[8] = 0; // k = 0
        assert!(Apbf::decode(&bad, None).is_err());
        let mut bad = bytes.clone();
        bad[8 + 6 * 8] = 0xff; // front beyond the ring
        assert!(Apbf::decode(&bad, None).is_err());
        let mut bad = bytes;
        bad[8 + 11 * 8..8 + 12 * 8].fill(0); // a time window without a tick
        assert!(Apbf::decode(&bad, None).is_err());
    }

    #[test]
    fn scan_chunks_load_back_into_the_same_filter() {
        let mut f = new(0.01, 300, Window::Time { millis: 60_000 }, 5);
        for i in 0..500u32 {
            f.add(&i.to_le_bytes(), 5 + u64::from(i));
        }
        let (next, header) = f.scan_chunk(0);
        let mut g = Apbf::from_header(&header, None).unwrap();
        let mut iter = next;
        loop {
            let (next, data) = f.scan_chunk(iter);
            if next == 0 {
                break;
            }
            g.load_bits(iter - 1, &data).unwrap();
            iter = next;
        }
        assert_eq!(g, f);
        assert_eq!(f.scan_chunk(u64::MAX).0, 0);
    }

    /// A state of the first format (as written by bloomkit before volume
    /// ends) still loads, keeps its answers, and gains volume ends.
    #[test]
    fn first_format_states_load() {
        let mut f = new(0.01, 500, Window::Time { millis: 60_000 }, 1_000);
        for i in 0..300u32 {
            f.add(&i.to_le_bytes(), 1_000 + u64::from(i));
        }
        // Rebuild the first format's bytes: the old magic, ten fields, and
        // a body without the add times.
        let v2 = f.encode();
        let mut v1 = MAGIC_V1.to_vec();
        v1.extend_from_slice(&v2[8..8 + 10 * 8]);
        let body = &v2[HEADER_LEN..];
        v1.extend_from_slice(&body[..body.len() - 8 * f.shape().slices() as usize]);
        let old = Apbf::decode(&v1, None).unwrap();
        for i in 0..300u32 {
            assert!(old.contains(&i.to_le_bytes(), 2_000));
        }
        assert!(Apbf::from_header(&v1[..HEADER_LEN_V1], None).is_ok());
    }
}
