//! The merging t-digest as t-digest-c 9dcd73d8 computes it (RedisBloom
//! 2.8.2): the same operations in the same order on IEEE doubles, so that
//! every answer is the same double, bit for bit. Only the one-observation
//! case differs on purpose (see [`TDigest::compress`]).

use std::f64::consts::PI;

use super::errors::TdError;
use super::*;
use crate::common::memory::{slice_block, HeapBlocks, Limits, Relocate};

/// One digest: centroids (merged, sorted, at the front of the arrays) and
/// the buffer of points added since the last compression after them.
///
/// # Reads never write
///
/// RedisBloom compresses a digest's buffer whenever it answers an estimate
/// or saves it. Here the estimates read [`TDigest::estimates`]: the digest
/// itself when its buffer is empty, else a compressed copy kept until the
/// next write. The value (what saves, digests and replicas see) changes
/// only on writes. To keep RedisBloom's answers, a read or a save on a
/// primary records that a compression is *owed* ([`TDigest::owe_compression`]):
/// the next write pays it in place first ([`TDigest::settle`]), and the
/// server announces it to its replicas and AOF inside that write. The same
/// holds after a snapshot (fork) taken while the buffer held values, which
/// wrote the compressed form: see [`TDigest::owes_compression`].
#[derive(Debug)]
pub struct TDigest {
    pub(super) compression: f64,
    pub(super) cap: usize,
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) merged_nodes: usize,
    pub(super) unmerged_nodes: usize,
    pub(super) total_compressions: i64,
    pub(super) merged_weight: i64,
    pub(super) unmerged_weight: i64,
    /// `cap` nodes each, boxed slices (a vector's spare word would take the
    /// struct from 128 bytes to 144, a size class up).
    pub(super) means: Box<[f64]>,
    pub(super) weights: Box<[i64]>,
    /// Not part of the value (not saved, compared or digested): the
    /// compressed copy the estimates read while the buffer holds values.
    pub(super) view: Option<Box<TDigest>>,
    /// Not part of the value: a read or save asked for a compression that
    /// the next write must make (and announce) first.
    pub(super) owed: bool,
    /// Not part of the value: the next write must announce a compression
    /// (made in place, a no-op on an empty buffer) even if none is owed.
    pub(super) announce: bool,
    /// Not part of the value: the snapshot epoch of the last write.
    pub(super) epoch: u64,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<TDigest>() == 128);

/// Equal values: the fields that are saved and answered from.
impl PartialEq for TDigest {
    fn eq(&self, other: &TDigest) -> bool {
        let n = self.merged_nodes + self.unmerged_nodes;
        self.compression.to_bits() == other.compression.to_bits()
            && self.cap == other.cap
            && self.min.to_bits() == other.min.to_bits()
            && self.max.to_bits() == other.max.to_bits()
            && self.merged_nodes == other.merged_nodes
            && self.unmerged_nodes == other.unmerged_nodes
            && self.total_compressions == other.total_compressions
            && self.merged_weight == other.merged_weight
            && self.unmerged_weight == other.unmerged_weight
            && self.means[..n].iter().map(|m| m.to_bits()).eq(other.means[..n].iter().map(|m| m.to_bits()))
            && self.weights[..n] == other.weights[..n]
    }
}

/// The largest total weight a digest keeps: 2^53, past which a weight no
/// longer survives its trip through a double (RDB values store weights as
/// doubles), so a DUMP would no longer restore exactly.
pub const MAX_WEIGHT: i64 = 1 << 53;

/// C's `fmax`-free `__td_max`/`__td_min` macros: the second operand wins ties and NaN.
#[inline]
fn c_max(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}
#[inline]
fn c_min(a: f64, b: f64) -> f64 {
    if a < b {
        a
    } else {
        b
    }
}

fn weighted_average_sorted(x1: f64, w1: f64, x2: f64, w2: f64) -> f64 {
    let x = (x1 * w1 + x2 * w2) / (w1 + w2);
    c_max(x1, c_min(x, x2))
}

fn weighted_average(x1: f64, w1: f64, x2: f64, w2: f64) -> f64 {
    if x1 <= x2 {
        weighted_average_sorted(x1, w1, x2, w2)
    } else {
        weighted_average_sorted(x2, w2, x1, w1)
    }
}

/// The digest's node capacity for a compression: `6 * floor(c) + 10`,
/// `None` when it would not fit RedisBloom's `int`.
pub fn capacity_for(compression: f64) -> Option<usize> {
    if !compression.is_finite() || compression < 1.0 || compression > MAX_COMPRESSION as f64 {
        return None;
    }
    Some(6 * compression.floor() as usize + 10)
}

/// What a digest of `cap` nodes takes, as RedisBloom counts it (`MEMORY
/// USAGE`, `TDIGEST.INFO`'s "Memory usage", and the size limit).
pub fn size_for(cap: usize) -> u64 {
    FIXED_BYTES + NODE_BYTES * cap as u64
}

/// A zeroed array, or `AllocationFailed` instead of an abort.
pub(super) fn zeroed<T: Clone + Default>(n: usize) -> Result<Box<[T]>, TdError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| TdError::AllocationFailed)?;
    v.resize(n, T::default());
    Ok(v.into_boxed_slice())
}

/// The first `n` of `nodes`, in a block of their size (shrunk in place).
fn keep_first<T>(nodes: Box<[T]>, n: usize) -> Box<[T]> {
    let mut v = nodes.into_vec();
    v.truncate(n);
    v.into_boxed_slice()
}

/// Exactly t-digest-c's quicksort of `means[start..=end]` (weights move
/// with their means): a two-element range is swapped when out of order;
/// otherwise the middle element is the pivot of a Lomuto partition
/// (strictly-less elements to the left). The order it leaves equal means
/// in decides how weighted duplicates merge, so it is reproduced exactly;
/// the two sub-ranges are independent, so an explicit stack (the larger
/// range pushed, the smaller done first) gives the same result without
/// deep recursion.
fn quicksort(means: &mut [f64], weights: &mut [i64]) {
    if means.len() < 2 {
        return;
    }
    let mut stack: Vec<(usize, usize)> = vec![(0, means.len() - 1)];
    while let Some((start, end)) = stack.pop() {
        if start >= end {
            continue;
        }
        if end - start == 1 {
            if means[start] > means[end] {
                means.swap(start, end);
                weights.swap(start, end);
            }
            continue;
        }
        let pivot_idx = start + (end - start) / 2;
        let pivot = means[pivot_idx];
        means.swap(pivot_idx, end);
        weights.swap(pivot_idx, end);
        // `i` is one past the last element found smaller than the pivot.
        let mut i = start;
        for j in start..end {
            if means[j] < pivot {
                means.swap(i, j);
                weights.swap(i, j);
                i += 1;
            }
        }
        means.swap(i, end);
        weights.swap(i, end);
        let p = i;
        let left = (p > start).then(|| (start, p - 1));
        let right = (p < end).then(|| (p + 1, end));
        let len = |r: Option<(usize, usize)>| r.map_or(0, |(s, e)| e - s + 1);
        // Pushed last is done first: the smaller range, so the stack stays short.
        if len(left) >= len(right) {
            stack.extend(left);
            stack.extend(right);
        } else {
            stack.extend(right);
            stack.extend(left);
        }
    }
}

/// An integer in the order of a non-NaN double (`-0.0` just below `0.0`).
#[inline(always)]
fn order_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Sorts the nodes into the order [`quicksort`] leaves them in, faster
/// where it can: the first `sorted` nodes (the centroids, already in order
/// after a compression) are merged with the buffer, sorted by itself.
///
/// Any two sorts of the same nodes put them in the same order except among
/// equal means, and there [`quicksort`]'s order decides how the weights
/// line up. So the fast result is kept only when every run of equal means
/// holds identical nodes (the same bits, the same weight), where any order
/// is the same arrays; otherwise (different weights on one mean, or `-0.0`
/// beside `0.0`), and for a NaN mean, the nodes are sorted by [`quicksort`]
/// from their original order.
fn sort_nodes(means: &mut [f64], weights: &mut [i64], sorted: usize) {
    if !sort_nodes_fast(means, weights, sorted) {
        quicksort(means, weights);
    }
}

/// [`sort_nodes`]'s fast path: false, with nothing changed, where its
/// result might differ from [`quicksort`]'s.
fn sort_nodes_fast(means: &mut [f64], weights: &mut [i64], sorted: usize) -> bool {
    let n = means.len();
    if n < 2 || means.iter().any(|m| m.is_nan()) {
        return false;
    }
    let sorted = sorted.min(n);
    let prefix =
        if means[..sorted].windows(2).all(|w| order_key(w[0]) <= order_key(w[1])) { sorted } else { 0 };
    // Two centroids on one mean with different weights (a long stream's
    // extremes end that way) make the result ambiguous: known before sorting.
    let tie = |p: &[f64], q: &[i64]| p[0] == p[1] && (p[0].to_bits() != p[1].to_bits() || q[0] != q[1]);
    if means[..prefix].windows(2).zip(weights[..prefix].windows(2)).any(|(p, q)| tie(p, q)) {
        return false;
    }
    let mut tail: Vec<(u64, f64, i64)> =
        means[prefix..].iter().zip(&weights[prefix..]).map(|(&m, &w)| (order_key(m), m, w)).collect();
    tail.sort_unstable_by_key(|node| node.0);
    let mut out: Vec<(f64, i64)> = Vec::with_capacity(n);
    let (mut i, mut j) = (0, 0);
    while i < prefix && j < tail.len() {
        if order_key(means[i]) <= tail[j].0 {
            out.push((means[i], weights[i]));
            i += 1;
        } else {
            out.push((tail[j].1, tail[j].2));
            j += 1;
        }
    }
    out.extend(means[i..prefix].iter().copied().zip(weights[i..prefix].iter().copied()));
    out.extend(tail[j..].iter().map(|&(_, m, w)| (m, w)));
    let ambiguous = out
        .windows(2)
        .any(|p| p[0].0 == p[1].0 && (p[0].0.to_bits() != p[1].0.to_bits() || p[0].1 != p[1].1));
    if ambiguous {
        return false;
    }
    for ((m, w), (mean, weight)) in means.iter_mut().zip(weights.iter_mut()).zip(out) {
        *m = mean;
        *w = weight;
    }
    true
}

/// `(double)x` of C for a `long long`.
#[inline]
fn d(x: i64) -> f64 {
    x as f64
}

/// C's `(long long)x` on x86-64: NaN and values out of range become `i64::MIN`.
pub fn c_to_i64(x: f64) -> i64 {
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// RedisBloom's `_halfRoundDown`: the nearest integer, halves toward zero.
fn half_round_down(f: f64) -> f64 {
    let int_part = f.trunc();
    let frac = f - int_part;
    if frac.abs() <= 0.5 {
        return int_part;
    }
    if int_part >= 0.0 {
        int_part + 1.0
    } else {
        int_part - 1.0
    }
}

/// The walk position QUANTILE's values share: the weight left of node
/// `pos` (plus half of it), and `pos`.
struct Cursor {
    weight_so_far: f64,
    pos: usize,
}

/// The node arrays, and the compressed copy reads keep (with its own).
impl HeapBlocks for TDigest {
    fn heap_blocks(&self, each: &mut dyn FnMut(*const u8, usize)) {
        slice_block(&self.means, each);
        slice_block(&self.weights, each);
        if let Some(view) = &self.view {
            each((&**view as *const TDigest).cast(), std::mem::size_of::<TDigest>());
            view.heap_blocks(each);
        }
    }
}

impl TDigest {
    /// An empty digest of this compression, checked against the limit
    /// before anything is allocated.
    pub fn new(compression: f64, limits: Limits) -> Result<TDigest, TdError> {
        let cap = capacity_for(compression).ok_or(TdError::AllocationFailed)?;
        limits.check(size_for(cap))?;
        Ok(TDigest {
            compression,
            cap,
            min: f64::MAX,
            max: -f64::MAX,
            merged_nodes: 0,
            unmerged_nodes: 0,
            total_compressions: 0,
            merged_weight: 0,
            unmerged_weight: 0,
            means: zeroed(cap)?,
            weights: zeroed(cap)?,
            view: None,
            owed: false,
            announce: false,
            epoch: 0,
        })
    }

    /// A copy (COPY, and reads on a replica), failing softly.
    pub fn try_clone(&self) -> Result<TDigest, TdError> {
        let mut means = Vec::new();
        means.try_reserve_exact(self.cap).map_err(|_| TdError::AllocationFailed)?;
        means.extend_from_slice(&self.means);
        let means = means.into_boxed_slice();
        let mut weights = Vec::new();
        weights.try_reserve_exact(self.cap).map_err(|_| TdError::AllocationFailed)?;
        weights.extend_from_slice(&self.weights);
        let weights = weights.into_boxed_slice();
        Ok(TDigest {
            compression: self.compression,
            cap: self.cap,
            min: self.min,
            max: self.max,
            merged_nodes: self.merged_nodes,
            unmerged_nodes: self.unmerged_nodes,
            total_compressions: self.total_compressions,
            merged_weight: self.merged_weight,
            unmerged_weight: self.unmerged_weight,
            means,
            weights,
            view: None,
            owed: self.owed,
            announce: self.announce,
            epoch: self.epoch,
        })
    }

    /// What the estimates read: this digest when compressing would change
    /// nothing, else its compressed copy, made once and kept until the next
    /// write. The digest's value never changes here.
    pub fn estimates(&mut self) -> Result<&TDigest, TdError> {
        if self.compress_changes_nothing() {
            return Ok(self);
        }
        if self.view.is_none() {
            let mut copy = self.try_clone()?;
            copy.compress()?;
            // Only read from now on: it keeps its nodes and no room for more
            // (a compressed digest of the default compression holds about a
            // tenth of its capacity), so that a digest read after a write
            // costs little beyond itself.
            let n = copy.merged_nodes + copy.unmerged_nodes;
            copy.means = keep_first(std::mem::take(&mut copy.means), n);
            copy.weights = keep_first(std::mem::take(&mut copy.weights), n);
            self.view = Some(Box::new(copy));
        }
        Ok(self.view.as_deref().unwrap_or(self))
    }

    /// The copy [`TDigest::estimates`] made, if it is current; else this digest.
    pub fn estimated(&self) -> &TDigest {
        match &self.view {
            Some(v) if !self.compress_changes_nothing() => v,
            _ => self,
        }
    }

    /// True when [`TDigest::compress`] would leave the value as it is: an
    /// empty buffer, or a lone observation (which stays in the buffer).
    fn compress_changes_nothing(&self) -> bool {
        self.unmerged_nodes == 0 || d(self.merged_weight) + d(self.unmerged_weight) <= 1.0
    }

    /// Records that a compression is owed: RedisBloom would have compressed
    /// the value here (an estimate, a save). Nothing else changes.
    pub fn owe_compression(&mut self) {
        if !self.compress_changes_nothing() {
            self.owed = true;
        }
    }

    /// Records that the next write must announce a compression even when
    /// none is owed: a value just loaded (a restart from an RDB file) may be
    /// followed by replicas that still hold the buffer it was saved from;
    /// told, they compress theirs. Estimates and INFO are not affected.
    pub fn owe_announcement(&mut self) {
        self.announce = true;
    }

    /// A write replayed from the AOF or the primary's stream: that history
    /// already holds every announcement, so none is due for the load.
    pub fn follow_stream(&mut self) {
        self.announce = false;
    }

    /// True when the next write must first compress (and announce it): a
    /// read or save owed one, or a snapshot was taken (`snapshot_epoch`
    /// passed the epoch of the last write) while the buffer held values, so
    /// the snapshot holds the compressed form.
    pub fn owes_compression(&self, snapshot_epoch: u64) -> bool {
        self.owed || (!self.compress_changes_nothing() && self.epoch < snapshot_epoch)
    }

    /// Before a write: pays an owed compression in place; `Ok(true)` when
    /// one was owed or an announcement was due (the caller then announces
    /// the compression to whoever follows this value).
    pub fn settle(&mut self, snapshot_epoch: u64) -> Result<bool, TdError> {
        let due = self.owes_compression(snapshot_epoch) || self.announce;
        if due {
            match self.view.take() {
                // The compressed copy a read made is exactly what compressing
                // makes here: take it rather than compress a second time.
                Some(v) if !self.compress_changes_nothing() => self.adopt(*v),
                _ => self.compress()?,
            }
            self.owed = false;
            self.announce = false;
        }
        self.epoch = snapshot_epoch;
        Ok(due)
    }

    /// Takes the value of `v`, a compressed copy of this digest made by
    /// [`TDigest::estimates`] since the last write: its nodes are copied
    /// into this digest's arrays, which keep their room for the buffer.
    fn adopt(&mut self, v: TDigest) {
        debug_assert!(v.unmerged_nodes == 0 || v.compress_changes_nothing());
        let TDigest {
            min,
            max,
            merged_nodes,
            unmerged_nodes,
            total_compressions,
            merged_weight,
            unmerged_weight,
            means,
            weights,
            ..
        } = v;
        self.min = min;
        self.max = max;
        self.merged_nodes = merged_nodes;
        self.unmerged_nodes = unmerged_nodes;
        self.total_compressions = total_compressions;
        self.merged_weight = merged_weight;
        self.unmerged_weight = unmerged_weight;
        let n = merged_nodes + unmerged_nodes;
        self.means[..n].copy_from_slice(&means[..n]);
        self.weights[..n].copy_from_slice(&weights[..n]);
    }

    pub fn compression(&self) -> f64 {
        self.compression
    }
    pub fn capacity(&self) -> usize {
        self.cap
    }
    pub fn min(&self) -> f64 {
        self.min
    }
    pub fn max(&self) -> f64 {
        self.max
    }
    pub fn merged_nodes(&self) -> usize {
        self.merged_nodes
    }
    pub fn unmerged_nodes(&self) -> usize {
        self.unmerged_nodes
    }
    pub fn merged_weight(&self) -> i64 {
        self.merged_weight
    }
    pub fn unmerged_weight(&self) -> i64 {
        self.unmerged_weight
    }
    pub fn total_compressions(&self) -> i64 {
        self.total_compressions
    }
    /// Observations: merged plus unmerged weight.
    pub fn size(&self) -> i64 {
        self.merged_weight.wrapping_add(self.unmerged_weight)
    }
    /// `MEMORY USAGE` and INFO's "Memory usage": `8 + 16 * cap`.
    pub fn size_bytes(&self) -> u64 {
        size_for(self.cap)
    }
    /// The nodes in use (centroids, then the buffer): means and weights.
    pub fn nodes(&self) -> (&[f64], &[i64]) {
        let n = self.merged_nodes + self.unmerged_nodes;
        (&self.means[..n], &self.weights[..n])
    }

    /// Offers the two node arrays to active defrag, from buffer `from` on.
    pub fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize> {
        for next in from..2 {
            if next > from && to.should_stop() {
                return Some(next);
            }
            match next {
                0 => to.slice(&mut self.means),
                _ => to.slice(&mut self.weights),
            }
        }
        None
    }

    /// `TDIGEST.RESET`: empty, with the same compression and capacity.
    pub fn reset(&mut self) {
        self.view = None;
        self.owed = false;
        self.announce = false;
        self.min = f64::MAX;
        self.max = -f64::MAX;
        self.merged_nodes = 0;
        self.merged_weight = 0;
        self.unmerged_nodes = 0;
        self.unmerged_weight = 0;
        self.total_compressions = 0;
    }

    /// Adds `weight` observations of `mean` (t-digest-c's `td_add`):
    /// compresses first when the arrays are full; `Overflow` when a weight
    /// would overflow, with nothing added.
    pub fn add(&mut self, mean: f64, weight: i64) -> Result<(), TdError> {
        if self.merged_nodes + self.unmerged_nodes >= self.cap.saturating_sub(1) {
            self.compress()?;
        }
        let pos = self.merged_nodes + self.unmerged_nodes;
        if pos >= self.cap {
            return Err(TdError::Overflow);
        }
        let new_unmerged = self.unmerged_weight.checked_add(weight).ok_or(TdError::Overflow)?;
        let new_total = new_unmerged.checked_add(self.merged_weight).ok_or(TdError::Overflow)?;
        if weight < 0 || new_total > MAX_WEIGHT {
            return Err(TdError::Overflow);
        }
        // t-digest-c also refuses a total whose double, or whose
        // `2 * pi * total * log(total)`, is infinite. Neither can be: a
        // 64-bit integer's double is finite, and with the total at most
        // 2^53 the product is finite (or NaN, for a total of at most 0,
        // which only a loaded value could hold, and which is not infinite
        // either). So that check, a logarithm per value, is not made.
        self.view = None;
        if mean < self.min {
            self.min = mean;
        }
        if mean > self.max {
            self.max = mean;
        }
        self.means[pos] = mean;
        self.weights[pos] = weight;
        self.unmerged_nodes += 1;
        self.unmerged_weight = new_unmerged;
        Ok(())
    }

    /// Merges the buffer into the centroids (t-digest-c's `td_compress`),
    /// exactly: with a total weight of at most 1 it sorts and stops, leaving
    /// a lone observation in the buffer, as 2.8.2 does (so that INFO and
    /// every later state stay RedisBloom's). The estimates then answer from
    /// that point ([`TDigest::single`]) where 2.8.2 answers NaN.
    pub fn compress(&mut self) -> Result<(), TdError> {
        if self.unmerged_nodes == 0 {
            return Ok(());
        }
        self.view = None;
        let n = self.merged_nodes + self.unmerged_nodes;
        sort_nodes(&mut self.means[..n], &mut self.weights[..n], self.merged_nodes);
        let total = d(self.merged_weight) + d(self.unmerged_weight);
        if d(self.unmerged_weight) == f64::INFINITY || total == f64::INFINITY {
            return Err(TdError::Overflow);
        }
        if total <= 1.0 {
            return Ok(());
        }
        let denom = 2.0 * PI * total * total.ln();
        if denom == f64::INFINITY {
            return Err(TdError::Overflow);
        }
        let normalizer = self.compression / denom;
        if normalizer == f64::INFINITY {
            return Err(TdError::Overflow);
        }
        let (means, weights) = (&mut self.means, &mut self.weights);
        let mut cur = 0usize;
        let mut weight_so_far = 0.0f64;
        for i in 1..n {
            let proposed = d(weights[cur]) + d(weights[i]);
            let z = proposed * normalizer;
            let q0 = weight_so_far / total;
            let q2 = (weight_so_far + proposed) / total;
            if z <= q0 * (1.0 - q0) && z <= q2 * (1.0 - q2) {
                weights[cur] = weights[cur].wrapping_add(weights[i]);
                let delta = means[i] - means[cur];
                let weighted_delta = (delta * d(weights[i])) / d(weights[cur]);
                means[cur] += weighted_delta;
            } else {
                weight_so_far += d(weights[cur]);
                cur += 1;
                weights[cur] = weights[i];
                means[cur] = means[i];
            }
            if cur != i {
                weights[i] = 0;
                means[i] = 0.0;
            }
        }
        self.merged_nodes = cur + 1;
        self.merged_weight = total as i64;
        self.unmerged_nodes = 0;
        self.unmerged_weight = 0;
        self.total_compressions = self.total_compressions.wrapping_add(1);
        Ok(())
    }

    /// The one observation of a digest that holds exactly one, still in
    /// the buffer (where 2.8.2's compression leaves it): bloomkit's
    /// estimates answer with it, as t-digest-c does for one centroid.
    pub fn single(&self) -> Option<f64> {
        (self.merged_nodes == 0 && self.unmerged_nodes == 1 && self.size() == 1 && self.weights[0] == 1)
            .then_some(self.means[0])
    }

    /// Merged centroids for the estimates: the digest's own, or its one
    /// buffered observation as one centroid (see [`TDigest::single`]).
    fn estimate_nodes(&self) -> usize {
        if self.single().is_some() {
            1
        } else {
            self.merged_nodes
        }
    }

    /// Pours `from`'s nodes into `self` (t-digest-c's `td_merge`): `self`
    /// is compressed first; `from` is read through its estimates (its
    /// compressed form, as RedisBloom compresses a source), unchanged.
    pub fn merge_from(&mut self, from: &mut TDigest) -> Result<(), TdError> {
        from.estimates()?;
        self.merge_compressed(from.estimated())
    }

    /// [`TDigest::merge_from`] of a source already read through
    /// [`TDigest::estimates`] (`from.estimated()`).
    pub fn merge_compressed(&mut self, from: &TDigest) -> Result<(), TdError> {
        self.compress()?;
        let n = from.merged_nodes + from.unmerged_nodes;
        for i in 0..n {
            self.add(from.means[i], from.weights[i])?;
        }
        Ok(())
    }

    /// The fraction of observations at or below `x` (`td_cdf`). Like every
    /// estimate below, it reads a digest whose buffer compressing would not
    /// change: call it on [`TDigest::estimates`].
    pub fn cdf(&self, x: f64) -> f64 {
        debug_assert!(self.compress_changes_nothing(), "estimates read a compressed digest");
        self.cdf_compressed(x)
    }

    fn cdf_compressed(&self, val: f64) -> f64 {
        let n = self.estimate_nodes();
        if n == 0 {
            return f64::NAN;
        }
        if val < self.min {
            return 0.0;
        }
        if val > self.max {
            return 1.0;
        }
        if n == 1 {
            let width = self.max - self.min;
            return if val - self.min <= width { 0.5 } else { (val - self.min) / width };
        }
        let (m, w) = (&self.means, &self.weights);
        let mw = d(self.merged_weight);
        let left_mean = m[0];
        let left_weight = d(w[0]);
        if val < left_mean {
            let width = left_mean - self.min;
            if width > 0.0 {
                if val == self.min {
                    return 0.5 / mw;
                }
                return (1.0 + (val - self.min) / width * (left_weight / 2.0 - 1.0)) / mw;
            }
            return 0.0;
        }
        let right_mean = m[n - 1];
        let right_weight = d(w[n - 1]);
        if val > right_mean {
            let width = self.max - right_mean;
            if width > 0.0 {
                if val == self.max {
                    return 1.0 - 0.5 / mw;
                }
                let dq = (1.0 + (self.max - val) / width * (right_weight / 2.0 - 1.0)) / mw;
                return 1.0 - dq;
            }
            return 1.0;
        }
        let mut so = 0.0f64;
        let mut it = 0usize;
        while it + 1 < n {
            if m[it] == val {
                let mut dw = 0.0f64;
                while it < n && m[it] == val {
                    dw += d(w[it]);
                    it += 1;
                }
                return (so + dw / 2.0) / mw;
            } else if m[it] <= val && val < m[it + 1] {
                let (left, right) = ((m[it], d(w[it])), (m[it + 1], d(w[it + 1])));
                return cdf_between(so, left, right, val) / mw;
            } else {
                so += d(w[it]);
            }
            it += 1;
        }
        1.0 - 0.5 / mw
    }

    /// t-digest-c's `td_internal_iterate_centroids_to_index`.
    fn at_index(&self, index: f64, left_weight: f64, cursor: &mut Cursor) -> f64 {
        let (m, w) = (&self.means, &self.weights);
        let n = self.merged_nodes;
        if left_weight > 1.0 && index < left_weight / 2.0 {
            return self.min + (index - 1.0) / (left_weight / 2.0 - 1.0) * (m[0] - self.min);
        }
        if index > d(self.merged_weight.wrapping_sub(1)) {
            return self.max;
        }
        let right_weight = d(w[n - 1]);
        let right_mean = m[n - 1];
        let mw = d(self.merged_weight);
        if right_weight > 1.0 && mw - index <= right_weight / 2.0 {
            return self.max - (mw - index - 1.0) / (right_weight / 2.0 - 1.0) * (self.max - right_mean);
        }
        while cursor.pos + 1 < n {
            let i = cursor.pos;
            let nw = d(w[i]);
            let nwn = d(w[i + 1]);
            let nm = m[i];
            let nmn = m[i + 1];
            let dw = (nw + nwn) / 2.0;
            if cursor.weight_so_far + dw > index {
                let mut left_unit = 0.0;
                if nw == 1.0 {
                    if index - cursor.weight_so_far < 0.5 {
                        return nm;
                    }
                    left_unit = 0.5;
                }
                let mut right_unit = 0.0;
                if nwn == 1.0 {
                    if cursor.weight_so_far + dw - index <= 0.5 {
                        return nmn;
                    }
                    right_unit = 0.5;
                }
                let z1 = index - cursor.weight_so_far - left_unit;
                let z2 = cursor.weight_so_far + dw - index - right_unit;
                return weighted_average(nm, z2, nmn, z1);
            }
            cursor.weight_so_far += dw;
            cursor.pos += 1;
        }
        let z1 = index - mw - right_weight / 2.0;
        let z2 = right_weight / 2.0 - z1;
        weighted_average(right_mean, z1, self.max, z2)
    }

    /// One quantile (`td_quantile`, what BYRANK uses).
    // C's comparisons, kept: a NaN `q` passes them.
    #[allow(clippy::manual_range_contains)]
    pub fn quantile(&self, q: f64) -> f64 {
        debug_assert!(self.compress_changes_nothing(), "estimates read a compressed digest");
        if q < 0.0 || q > 1.0 || self.estimate_nodes() == 0 {
            return f64::NAN;
        }
        if self.estimate_nodes() == 1 {
            return self.means[0];
        }
        let index = q * d(self.merged_weight);
        if index < 1.0 {
            return self.min;
        }
        let left_weight = d(self.weights[0]);
        let mut cursor = Cursor { weight_so_far: left_weight / 2.0, pos: 0 };
        self.at_index(index, left_weight, &mut cursor)
    }

    /// Several quantiles walked with one cursor (`td_quantiles`).
    #[allow(clippy::manual_range_contains)]
    fn quantiles_run(&self, qs: &[f64], out: &mut Vec<f64>) {
        let n = self.estimate_nodes();
        if n == 0 {
            out.extend(qs.iter().map(|_| f64::NAN));
            return;
        }
        if n == 1 {
            out.extend(qs.iter().map(|&q| if q < 0.0 || q > 1.0 { f64::NAN } else { self.means[0] }));
            return;
        }
        let left_weight = d(self.weights[0]);
        let mut cursor = Cursor { weight_so_far: left_weight / 2.0, pos: 0 };
        for &q in qs {
            let index = q * d(self.merged_weight);
            out.push(self.at_index(index, left_weight, &mut cursor));
        }
    }

    /// `TDIGEST.QUANTILE`: the list split into non-decreasing runs, each
    /// walked with a fresh cursor, as RedisBloom does.
    pub fn quantiles(&self, qs: &[f64]) -> Vec<f64> {
        debug_assert!(self.compress_changes_nothing(), "estimates read a compressed digest");
        let mut out = Vec::with_capacity(qs.len());
        let mut start = 0;
        while start < qs.len() {
            let mut end = start;
            while end + 1 < qs.len() && qs[end] <= qs[end + 1] {
                end += 1;
            }
            self.quantiles_run(&qs[start..=end], &mut out);
            start = end + 1;
        }
        out
    }

    /// `TDIGEST.TRIMMED_MEAN` (`td_trimmed_mean`).
    pub fn trimmed_mean(&self, low: f64, high: f64) -> f64 {
        debug_assert!(self.compress_changes_nothing(), "estimates read a compressed digest");
        if self.estimate_nodes() == 0 || !(0.0..=1.0).contains(&low) || !(0.0..=1.0).contains(&high) {
            return f64::NAN;
        }
        if self.estimate_nodes() == 1 {
            return self.means[0];
        }
        let mw = d(self.merged_weight);
        let leftmost = (mw * low).floor();
        let rightmost = (mw * high).ceil();
        let mut count_done = 0.0f64;
        let mut sum = 0.0f64;
        let mut count = 0.0f64;
        for i in 0..self.merged_nodes {
            let nw = d(self.weights[i]);
            let mut add = nw;
            add -= c_min(c_max(0.0, leftmost - count_done), add);
            add = c_min(c_max(0.0, rightmost - count_done), add);
            count_done += nw;
            sum += self.means[i] * add;
            count += add;
            if count_done >= rightmost {
                break;
            }
        }
        sum / count
    }

    /// `TDIGEST.MIN`: NaN when empty.
    pub fn min_reply(&self) -> f64 {
        if self.size() > 0 {
            self.min
        } else {
            f64::NAN
        }
    }

    /// `TDIGEST.MAX`: NaN when empty.
    pub fn max_reply(&self) -> f64 {
        if self.size() > 0 {
            self.max
        } else {
            f64::NAN
        }
    }

    /// `TDIGEST.RANK` (or `REVRANK` with `reverse`) of one value, on a
    /// compressed digest.
    pub fn rank(&self, v: f64, reverse: bool) -> i64 {
        self.rank_without_estimates(v, reverse).unwrap_or_else(|| {
            let size = d(self.size());
            let c = self.cdf(v) * size;
            let r = if reverse { (size - c.round()).round() } else { half_round_down(c) };
            c_to_i64(r)
        })
    }

    /// The ranks RANK answers without the centroids (an empty digest, a
    /// value outside `[min, max]`): RedisBloom compresses only for the others.
    pub fn rank_without_estimates(&self, v: f64, reverse: bool) -> Option<i64> {
        let size = d(self.size());
        let r = if size == 0.0 {
            -2.0
        } else if v < self.min {
            if reverse {
                size
            } else {
                -1.0
            }
        } else if v > self.max {
            if reverse {
                -1.0
            } else {
                size
            }
        } else {
            return None;
        };
        Some(c_to_i64(r))
    }

    /// `TDIGEST.BYRANK` (or `BYREVRANK` with `reverse`) of one rank, on a
    /// compressed digest.
    pub fn by_rank(&self, rank: i64, reverse: bool) -> f64 {
        self.by_rank_without_estimates(rank, reverse).unwrap_or_else(|| {
            let (size, input) = (d(self.size()), d(rank));
            let r = if reverse { size - input - 1.0 } else { input };
            self.quantile(r / size)
        })
    }

    /// The values BYRANK answers without the centroids (an empty digest,
    /// rank 0, a rank past the size): RedisBloom compresses only for the others.
    pub fn by_rank_without_estimates(&self, rank: i64, reverse: bool) -> Option<f64> {
        let size = d(self.size());
        let input = d(rank);
        if size == 0.0 {
            Some(f64::NAN)
        } else if input == 0.0 {
            Some(if reverse { self.max } else { self.min })
        } else if input >= size {
            Some(if reverse { f64::NEG_INFINITY } else { f64::INFINITY })
        } else {
            None
        }
    }
}

/// The weight below `val` (times the total) between two neighbouring
/// centroids `left` and `right` (mean, weight), `so` the weight before
/// `left`: interpolated, a singleton's weight kept at its mean
/// (t-digest-c's `td_cdf` between centroids).
fn cdf_between(so: f64, (nm, nw): (f64, f64), (nmn, nwn): (f64, f64), val: f64) -> f64 {
    if nmn - nm > 0.0 {
        let mut left_excluded = 0.0;
        let mut right_excluded = 0.0;
        if nw == 1.0 {
            if nwn == 1.0 {
                return so + 1.0;
            }
            left_excluded = 0.5;
        } else if nwn == 1.0 {
            right_excluded = 0.5;
        }
        let dw = (nw + nwn) / 2.0;
        let dw_no_singleton = dw - left_excluded - right_excluded;
        let base = so + nw / 2.0 + left_excluded;
        return base + dw_no_singleton * (val - nm) / (nmn - nm);
    }
    so + (nw + nwn) / 2.0
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn digest(compression: f64, values: &[f64]) -> TDigest {
        let mut t = TDigest::new(compression, Limits::NONE).unwrap();
        for &v in values {
            t.add(v, 1).unwrap();
        }
        t
    }

    fn range(n: usize) -> Vec<f64> {
        (1..=n).map(|i| i as f64).collect()
    }

    /// COMPAT-SKETCHES.md's second vector: compression 1, values 1..20.
    #[test]
    fn compression_one_twenty_values() {
        let mut t = digest(1.0, &range(20));
        assert_eq!((t.merged_nodes, t.unmerged_nodes), (3, 5));
        assert_eq!((t.merged_weight, t.unmerged_weight, t.total_compressions), (15, 5, 1));
        assert_eq!(t.size_bytes(), 264);
        t.compress().unwrap();
        let (m, w) = t.nodes();
        assert_eq!(m, &[1.0, 10.0, 19.0, 20.0]);
        assert_eq!(w, &[1, 17, 1, 1]);
        assert_eq!(t.total_compressions, 2);
        let q = t.quantiles(&[0.0, 0.1, 0.5, 0.9, 1.0]);
        assert_eq!(q, vec![1.0, 2.0588235294117645, 10.529411764705882, 19.0, 20.0]);
        assert_eq!(t.cdf(5.0), 0.23888888888888887);
        assert_eq!(t.cdf(10.5), 0.49861111111111106);
        assert_eq!(t.trimmed_mean(0.1, 0.9), 10.0);
        assert_eq!((t.rank(5.0, false), t.rank(10.5, false)), (5, 10));
        assert_eq!((t.rank(5.0, true), t.rank(10.5, true)), (15, 10));
        assert_eq!(t.by_rank(3, false), 3.1176470588235294);
        assert_eq!(t.by_rank(10, false), 10.529411764705882);
        assert_eq!(t.by_rank(3, true), 16.88235294117647);
        assert_eq!(t.by_rank(10, true), 9.470588235294118);
    }

    #[test]
    fn a_single_observation_answers_its_value() {
        let mut t = digest(100.0, &[42.5]);
        assert_eq!(t.quantiles(&[0.0, 0.5, 1.0]), vec![42.5; 3]);
        assert_eq!(t.total_compressions, 0, "no compression counted, as RedisBloom");
        assert_eq!((t.merged_nodes, t.unmerged_nodes, t.unmerged_weight), (0, 1, 1), "2.8.2's state");
        assert_eq!(t.cdf(42.5), 0.5);
        assert_eq!(t.trimmed_mean(0.0, 1.0), 42.5);
        assert_eq!(t.rank(42.5, false), 0);
        assert_eq!(t.rank(42.5, true), 0, "round(1 - round(0.5))");
        // A second value joins as in RedisBloom: both sort, then merge.
        t.add(1.0, 1).unwrap();
        t.compress().unwrap();
        assert_eq!(t.nodes().0, &[1.0, 42.5]);
        assert_eq!(t.total_compressions, 1);
    }

    /// Estimates read a compressed copy; the value changes only on writes,
    /// and a write pays what reads owe, exactly as RedisBloom's read would have.
    #[test]
    fn reads_never_write_and_owe_redisbloom_compression() {
        let values: Vec<f64> = (0..100).map(|i| ((i * i) % 97) as f64).collect();
        let mut t = digest(20.0, &values);
        let mut redisbloom = t.try_clone().unwrap();
        let before = t.try_clone().unwrap();
        let q = t.estimates().unwrap().quantile(0.5);
        assert_eq!(t, before, "an estimate changed the value");
        assert!(!t.owes_compression(0), "owing is the caller's choice (primaries owe)");
        redisbloom.compress().unwrap();
        assert_eq!(redisbloom.quantile(0.5), q, "the answer RedisBloom gives");
        t.owe_compression();
        assert!(t.owes_compression(0));
        assert_eq!(t.estimated(), &redisbloom, "INFO shows RedisBloom's compressed digest");
        assert!(t.settle(0).unwrap(), "a write pays it");
        assert_eq!(t, redisbloom);
        assert!(!t.settle(0).unwrap(), "once");
        // A snapshot (fork) taken while the buffer held values: owed too.
        t.settle(3).unwrap();
        t.add(5.0, 1).unwrap();
        assert!(!t.owes_compression(3));
        assert!(t.owes_compression(4), "the snapshot wrote the compressed form");
        // A loaded value announces once, even with nothing to compress.
        let mut fresh = digest(20.0, &[]);
        fresh.owe_announcement();
        assert!(!fresh.owes_compression(9), "INFO is not affected");
        assert!(fresh.settle(9).unwrap());
        fresh.owe_announcement();
        fresh.follow_stream();
        assert!(!fresh.settle(9).unwrap(), "a replayed write carries its own announcements");
    }

    #[test]
    fn empty_answers() {
        let t = digest(10.0, &[]);
        assert!(t.quantile(0.5).is_nan());
        assert!(t.cdf(1.0).is_nan());
        assert!(t.trimmed_mean(0.1, 0.9).is_nan());
        assert_eq!(t.rank(1.0, false), -2);
        assert!(t.by_rank(0, false).is_nan());
        assert!(t.min_reply().is_nan());
    }

    #[test]
    fn quicksort_keeps_lomuto_tie_order() {
        // Equal means: the weights end in the order the partitions leave them.
        let mut m = vec![5.0, 5.0, 5.0, 5.0, 5.0];
        let mut w = vec![1, 2, 3, 4, 5];
        quicksort(&mut m, &mut w);
        // pivot idx 2 -> end: [1,2,5,4,3]; nothing smaller; swap(0,4): [3,2,5,4,1], p=0;
        // then [1..4]: pivot idx 2 (w 5) -> end: [3,2,1,4,5]; swap(1,4): [3,5,1,4,2];
        // then [2..4]: pivot 3 -> swap(3,4): [3,5,1,2,4]; swap(2,4): [3,5,4,2,1]; then [3..4] equal.
        assert_eq!(w, vec![3, 5, 4, 2, 1]);
        let mut m: Vec<f64> = (0..2000).map(|i| ((i * 7919) % 2000) as f64).collect();
        let mut w = vec![1; 2000];
        quicksort(&mut m, &mut w);
        assert!(m.windows(2).all(|p| p[0] <= p[1]));
        // All-equal input of many elements: no deep recursion.
        let mut m = vec![1.0; 20000];
        let mut w: Vec<i64> = (0..20000).collect();
        quicksort(&mut m, &mut w);
    }

    /// The fast sort leaves the nodes exactly as the quicksort does: sorted
    /// prefixes or not, ties of identical nodes, ties of different weights,
    /// -0.0 beside 0.0, NaN, infinities.
    #[test]
    fn sort_nodes_equals_quicksort() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            state >> 33
        };
        let mut fast_paths = 0;
        for case in 0..3000 {
            let n = (next() % 700) as usize;
            let spread = [3, 50, 1000, 1 << 30][case % 4];
            let mut means: Vec<f64> = (0..n)
                .map(|_| match next() % 200 {
                    0 => -0.0,
                    1 => 0.0,
                    2 if case % 50 == 0 => f64::NAN,
                    3 => f64::INFINITY,
                    4 => -f64::INFINITY,
                    _ => (next() % spread) as f64 / 4.0 - (spread / 8) as f64,
                })
                .collect();
            let weights: Vec<i64> =
                (0..n).map(|_| if case % 3 == 0 { 1 + (next() % 3) as i64 } else { 1 }).collect();
            let sorted = if n > 0 { (next() as usize) % n } else { 0 };
            if case % 2 == 0 {
                // A prefix in order, as compressions leave it (or not quite).
                means[..sorted].sort_by(|a, b| a.total_cmp(b));
                if case % 10 == 0 && sorted > 2 {
                    means.swap(0, sorted - 1);
                }
            }
            let (mut qm, mut qw) = (means.clone(), weights.clone());
            quicksort(&mut qm, &mut qw);
            let (mut fm, mut fw) = (means.clone(), weights.clone());
            let (mut probe_m, mut probe_w) = (means.clone(), weights.clone());
            fast_paths += usize::from(sort_nodes_fast(&mut probe_m, &mut probe_w, sorted));
            sort_nodes(&mut fm, &mut fw, sorted);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!((bits(&fm), &fw), (bits(&qm), &qw), "case {case}: n {n}, sorted {sorted}");
        }
        assert!(fast_paths > 500, "the fast path ran {fast_paths} times");
    }

    #[test]
    fn overflow_is_refused() {
        let mut t = digest(10.0, &[1.0]);
        assert_eq!(t.add(2.0, i64::MAX), Err(TdError::Overflow));
        assert_eq!(t.size(), 1);
    }

    #[test]
    fn c_cast() {
        assert_eq!(c_to_i64(f64::NAN), i64::MIN);
        assert_eq!(c_to_i64(1e300), i64::MIN);
        assert_eq!(c_to_i64(-3.9), -3);
        assert_eq!(half_round_down(2.5), 2.0);
        assert_eq!(half_round_down(2.5000001), 3.0);
        assert_eq!(half_round_down(-2.7), -3.0);
    }
}
