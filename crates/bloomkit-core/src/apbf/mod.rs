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

use crate::common::sizing::is_rate;
use std::f64::consts::LN_2;

pub mod args;
pub mod errors;
pub mod filter;
pub mod state;

/// The data type's name: nine characters, as the server requires; never
/// changes once released.
pub const TYPE_NAME: &str = "bkit-apbf";

pub use errors::ApbfError;
pub use filter::Apbf;
pub use state::{state_body_len, HEADER_LEN, HEADER_LEN_V1, MAGIC, MAGIC_V1};

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

/// The largest `l_v` in `1..=most` that `fits`, which `l_v = 1` does: the
/// rate grows with `l_v`, so by bisection.
pub(super) fn largest_fitting(most: u32, fits: impl Fn(u32) -> bool) -> u32 {
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
    lo
}

impl ApbfShape {
    /// The smallest filter whose false-positive rate stays at or below
    /// `error` with `capacity` adds per window. Slices are sized for a fill
    /// of one half once full (`m = k g / ln 2`), as the paper prescribes;
    /// for each `k`, the largest `l_v` meeting the rate is taken, then the
    /// `k` needing the fewest bits. Time windows get their `l_v - 1`
    /// generations of slack (see the module docs).
    ///
    /// Fast enough for a command (`APBF.RESERVE` sizes on the server, and a
    /// replica sizes again): a `k` is skipped when no `l_v` could give it
    /// fewer bits than the best found ([`ApbfShape::fewest_bits`]), and a
    /// rate is summed only until it passes `error`. Each only skips work
    /// whose answer is known, so the shape is the one every release
    /// chooses (8.8 ms a reserve before, in the release build).
    pub fn new(error: f64, capacity: u64, window: Window) -> Option<ApbfShape> {
        if !is_rate(error) || capacity == 0 {
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
            // Past 2^50 items a slice's bits saturate in `sized` and the
            // floor's floats lose their last bits: no skipping there.
            let floor = || ApbfShape::fewest_bits(k, most, capacity);
            if capacity < 1 << 50 && best.is_some_and(|(b, _)| floor() >= b as f64) {
                continue;
            }
            let fits = |lv: u32| ApbfShape::sized(k, lv, capacity, timed).fits(error);
            if !fits(1) {
                continue;
            }
            let shape = ApbfShape::sized(k, largest_fitting(most, fits), capacity, timed);
            let bits = u128::from(shape.slice_bits) * u128::from(shape.slices());
            if best.is_none() || best.is_some_and(|(b, _)| bits < b) {
                best = Some((bits, shape));
            }
        }
        best.map(|(_, s)| s)
    }

    /// A floor under the bits of every shape of `k` hashes and `l_v` at
    /// most `most`: `slice_bits >= k g / ln 2` with `g >= capacity / l_v`,
    /// and `k + l >= k + l_v`, so `bits >= (k capacity / ln 2)(1 + k /
    /// l_v) >= (k capacity / ln 2)(1 + k / most)`; a thousandth below that,
    /// for the rounding of floats. A `k` whose floor is the best found or
    /// more cannot replace it (only fewer bits do).
    fn fewest_bits(k: u32, most: u32, capacity: u64) -> f64 {
        let k = f64::from(k);
        k * capacity as f64 / LN_2 * (1.0 + k / f64::from(most)) * 0.999
    }

    pub(super) fn sized(k: u32, lv: u32, capacity: u64, timed: bool) -> ApbfShape {
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
        self.rate_past(f64::INFINITY)
    }

    /// Whether the rate is at most `error`.
    fn fits(&self, error: f64) -> bool {
        self.rate_past(error) <= error
    }

    /// [`ApbfShape::false_positive_rate`], its sum stopped once past
    /// `limit` (its terms are never negative: a sum past it stays past it).
    fn rate_past(&self, limit: f64) -> f64 {
        let k = self.k as usize;
        let fill = |i: usize| {
            let inserted = (i.min(k - 1) + 1) as f64 * self.generation as f64;
            1.0 - (-inserted / self.slice_bits as f64).exp()
        };
        // run[j]: probability that the current run of set bits is j (< k)
        // and no run of k has occurred yet. Two rows, reused.
        let (mut run, mut next) = (vec![0.0f64; k], vec![0.0f64; k]);
        run[0] = 1.0;
        let mut hit = 0.0;
        for i in 0..self.slices() as usize {
            let p = fill(i);
            next.fill(0.0);
            for (j, &q) in run.iter().enumerate() {
                next[0] += q * (1.0 - p);
                if j + 1 == k {
                    hit += q * p;
                } else {
                    next[j + 1] += q * p;
                }
            }
            std::mem::swap(&mut run, &mut next);
            if hit > limit {
                break;
            }
        }
        hit
    }
}
