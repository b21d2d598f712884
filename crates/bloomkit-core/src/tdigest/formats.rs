//! The t-digest's RDB value, RedisBloom's field for field (encoding
//! version 0, the only one; RedisBloom ignores the version on load and so
//! does this): compression, min, max (doubles); capacity, merged nodes,
//! unmerged nodes, total compressions (signed, written as unsigned
//! opcodes); merged and unmerged weight (doubles); then the merged
//! centroids' means and their weights (doubles). The buffer is never
//! written: what is saved is the compressed form, as RedisBloom saves it,
//! read from [`TDigest::estimates`] so that saving changes no value.
//!
//! Nothing decoded is trusted, and only what a digest can be loads, so
//! that every accepted value saves back to bytes that load to the same
//! digest: the capacity must be the compression's, the node counts must
//! fit it, every weight must be whole and at least 1, the centroids'
//! weights must add up to the merged weight exactly, at most 2^53
//! ([`MAX_WEIGHT`]), and a buffer is accepted only in 2.8.2's form of a
//! single observation. The size is compared with the limit before the
//! arrays are allocated.

use super::digest::{capacity_for, size_for, zeroed, MAX_WEIGHT};
use super::errors::TdError;
use super::TDigest;
use crate::common::dump::{own_type_id, PayloadWriter};
use crate::common::fields::{FieldReader, FieldWriter};
use crate::common::memory::Limits;

/// 2^63 as a double: whole weights are below it.
const I64_LIMIT: f64 = 9_223_372_036_854_775_808.0;

/// A stored weight: a whole, non-negative double below 2^63.
fn weight(v: f64) -> Result<i64, TdError> {
    if (0.0..I64_LIMIT).contains(&v) && v.fract() == 0.0 {
        Ok(v as i64)
    } else {
        Err(TdError::BadData)
    }
}

fn count(v: u64, at_most: usize) -> Result<usize, TdError> {
    usize::try_from(v).ok().filter(|&n| n <= at_most).ok_or(TdError::BadData)
}

impl TDigest {
    /// Writes the compressed form, as RedisBloom's `rdb_save` does, from
    /// [`TDigest::estimates`]: the value does not change, and the
    /// compression RedisBloom would have made is owed to the next write
    /// (see [`TDigest::owe_compression`]). Only when the copy cannot be
    /// allocated is the value compressed in place, and that announced at
    /// the next write too.
    ///
    /// A copy made for the save alone is dropped after it: a `SAVE` (in the
    /// server's own process) leaves the digest's memory as it was, so that
    /// `MEMORY USAGE` is the same before and after a save and reload
    /// (RedisBloom's `test_save_load`). A copy reads made is kept.
    pub fn save(&mut self, w: &mut dyn FieldWriter) {
        let read_before = self.view.is_some();
        if self.estimates().is_err() {
            let _ = self.compress();
            self.owe_announcement();
        } else {
            self.owe_compression();
        }
        self.estimated().save_as_is(w);
        if !read_before {
            self.view = None;
        }
    }

    /// Writes the value as it is (the caller compressed it, or wants a
    /// copy's fields).
    ///
    /// A lone observation still in the buffer (which 2.8.2 saves as an
    /// unmerged count without its value, losing it) is written as one
    /// centroid of weight 1, which RedisBloom loads and answers with.
    pub fn save_as_is(&self, w: &mut dyn FieldWriter) {
        let single = self.single().is_some();
        let (merged, unmerged) = if single { (1, 0) } else { (self.merged_nodes, self.unmerged_nodes) };
        let (mw, uw) = if single { (1, 0) } else { (self.merged_weight, self.unmerged_weight) };
        w.double(self.compression);
        w.double(self.min);
        w.double(self.max);
        w.unsigned(self.cap as u64);
        w.unsigned(merged as u64);
        w.unsigned(unmerged as u64);
        w.unsigned(self.total_compressions as u64);
        w.double(mw as f64);
        w.double(uw as f64);
        for &m in &self.means[..merged] {
            w.double(m);
        }
        for &x in &self.weights[..merged] {
            w.double(x as f64);
        }
    }

    /// Reads a value of encoding version 0 (the module passes its
    /// version: see [`TDigest::load_version`]), checked before anything is
    /// allocated.
    ///
    /// A value of one observation that RedisBloom 2.8.2 saved from its
    /// buffer (no centroid, one unmerged node of weight 1) lost the point's
    /// value in 2.8.2; min and max still hold it, so it comes back here.
    /// Any other buffer is refused: RedisBloom saves compressed values, and
    /// a buffer's nodes are not in the value (2.8.2 would load them as
    /// zeros, which answer differently once copied).
    ///
    /// A loaded digest owes an announcement to its next write (see
    /// [`TDigest::owe_announcement`]): replicas that kept the buffer this
    /// value was saved from then compress theirs at the same point.
    pub fn load(r: &mut dyn FieldReader, limits: Limits) -> Result<TDigest, TdError> {
        let compression = r.double()?;
        let min = r.double()?;
        let max = r.double()?;
        let cap = r.unsigned()?;
        let merged = r.unsigned()?;
        let unmerged = r.unsigned()?;
        let total_compressions = r.unsigned()? as i64;
        let merged_weight = weight(r.double()?)?;
        let unmerged_weight = weight(r.double()?)?;
        let expected = capacity_for(compression).filter(|_| compression.fract() == 0.0);
        let cap = match expected {
            Some(c) if c as u64 == cap => c,
            _ => return Err(TdError::BadData),
        };
        let merged = count(merged, cap)?;
        let unmerged = count(unmerged, cap - merged)?;
        if min.is_nan() || max.is_nan() || merged_weight.checked_add(unmerged_weight).is_none() {
            return Err(TdError::BadData);
        }
        if unmerged == 0 && unmerged_weight != 0 {
            return Err(TdError::BadData);
        }
        let lost_single =
            merged == 0 && unmerged == 1 && unmerged_weight == 1 && min == max && min.is_finite();
        if unmerged != 0 && !lost_single {
            return Err(TdError::BadData);
        }
        if merged_weight > MAX_WEIGHT || (merged == 0) != (merged_weight == 0) {
            return Err(TdError::BadData);
        }
        limits.check(size_for(cap))?;
        let (mut means, mut weights) = read_centroids(r, cap, merged, merged_weight)?;
        let (mut merged, mut unmerged, mut merged_weight, mut unmerged_weight) =
            (merged, unmerged, merged_weight, unmerged_weight);
        if lost_single {
            // 2.8.2 lost this point's value; its min and max kept it.
            means[0] = min;
            weights[0] = 1;
        } else if merged == 1 && merged_weight == 1 {
            // bloomkit's form of a lone observation (see `save_as_is`) goes
            // back to the buffer, where RedisBloom keeps it while it is
            // alone. Only the form `save_as_is` writes: one point, which is
            // the digest's min and max.
            if means[0] != min || means[0] != max {
                return Err(TdError::BadData);
            }
            (merged, unmerged, merged_weight, unmerged_weight) = (0, 1, 0, 1);
        }
        Ok(TDigest {
            compression,
            cap,
            min,
            max,
            merged_nodes: merged,
            unmerged_nodes: unmerged,
            total_compressions,
            merged_weight,
            unmerged_weight,
            means,
            weights,
            view: None,
            owed: false,
            announce: true,
            epoch: 0,
        })
    }

    /// [`TDigest::load`] of a value saved at `encoding_version`: RedisBloom
    /// has only written version 0, and a later version's fields are unknown
    /// here, so anything else is refused rather than misread.
    pub fn load_version(
        r: &mut dyn FieldReader,
        encoding_version: i32,
        limits: Limits,
    ) -> Result<TDigest, TdError> {
        if encoding_version != super::ENCODING_VERSION {
            return Err(TdError::BadData);
        }
        TDigest::load(r, limits)
    }
}

/// The module type id RedisBloom's `TDIS-TYPE` has in RDB files and DUMP payloads.
pub const MODULE_ID: u64 = own_type_id(super::TYPE_NAME, super::ENCODING_VERSION);

impl TDigest {
    /// The `DUMP` payload of this digest as it is (compress first for
    /// RedisBloom's), sealed with `rdb_version` (what `RESTORE` in a
    /// rewritten AOF reads).
    pub fn dump_payload(&self, rdb_version: u16) -> Vec<u8> {
        let mut w = PayloadWriter::new(MODULE_ID);
        self.save_as_is(&mut w);
        w.finish_for(rdb_version)
    }
}

/// Means and weights, in arrays of the digest's capacity.
type Centroids = (Box<[f64]>, Box<[i64]>);

/// The centroids of a loaded value, in arrays of `cap`: `merged` means,
/// then as many weights, which must add up to `merged_weight`.
fn read_centroids(
    r: &mut dyn FieldReader,
    cap: usize,
    merged: usize,
    merged_weight: i64,
) -> Result<Centroids, TdError> {
    let mut means = zeroed::<f64>(cap)?;
    let mut weights = zeroed::<i64>(cap)?;
    // Any mean loads, NaN and infinities included: compressing values
    // near the double range's ends makes them (in RedisBloom too), and a
    // digest's own value must load again (found by the tdigest_codecs fuzzer).
    for m in &mut means[..merged] {
        *m = r.double()?;
    }
    // Each weight is at least 1 (every centroid holds an observation),
    // and below 2^53 they add up exactly.
    let mut sum = 0i64;
    for x in &mut weights[..merged] {
        *x = weight(r.double()?)?;
        if *x == 0 {
            return Err(TdError::BadData);
        }
        sum = sum.checked_add(*x).ok_or(TdError::BadData)?;
    }
    if sum != merged_weight {
        return Err(TdError::BadData);
    }
    Ok((means, weights))
}

impl crate::common::value::FamilyValue for TDigest {
    const TYPE_NAME: &'static str = super::TYPE_NAME;
    const ENCODING_VERSION: i32 = super::ENCODING_VERSION;
    type Error = TdError;

    fn load(r: &mut dyn FieldReader, how: crate::common::value::Loading) -> Result<TDigest, TdError> {
        TDigest::load_version(r, how.encver, how.limits)
    }
    fn save(&mut self, w: &mut dyn FieldWriter) {
        TDigest::save(self, w)
    }
    fn size_bytes(&self) -> u64 {
        TDigest::size_bytes(self)
    }
    fn try_clone(&self) -> Result<TDigest, TdError> {
        TDigest::try_clone(self)
    }
    fn relocate(&mut self, from: usize, to: &mut impl crate::common::memory::Relocate) -> Option<usize> {
        TDigest::relocate(self, from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::fields::FieldStream;
    use crate::tdigest::digest::tests::digest;

    fn saved(t: &mut TDigest) -> Vec<u8> {
        let mut w = FieldStream::default();
        t.save(&mut w);
        w.bytes
    }

    fn load(bytes: &[u8]) -> Result<TDigest, TdError> {
        TDigest::load(&mut FieldStream { bytes: bytes.to_vec(), pos: 0 }, Limits::NONE)
    }

    #[test]
    fn round_trip_and_truncations() {
        let values: Vec<f64> = (0..500).map(|i| ((i * 37) % 101) as f64 / 3.0).collect();
        let mut t = digest(20.0, &values);
        let before = t.try_clone().unwrap();
        let bytes = saved(&mut t);
        assert_eq!(t, before, "saving changes no value");
        assert!(t.owes_compression(0), "it owes RedisBloom's compression to the next write");
        let mut back = load(&bytes).unwrap();
        assert_eq!(&back, t.estimates().unwrap(), "what loads is the compressed form");
        assert_eq!(saved(&mut back), bytes);
        for len in 0..bytes.len() {
            assert!(load(&bytes[..len]).is_err(), "length {len}");
        }
    }

    /// Found by the tdigest_codecs fuzzer: values near the ends of the
    /// double range merge into infinite and NaN means; the digest's own
    /// value must load again.
    #[test]
    fn extreme_values_save_and_load() {
        let mut t = digest(1.0, &[1.7e308, -1.7e308, 1.7e308, -1.7e308, 1.0e308, 1.7e308, -1.7e308, 5.0]);
        for v in [1.7e308, -1.7e308, 1.7e308, -1.7e308, 1.7e308, 1.7e308, -1.7e308, 1.7e308, -1.7e308] {
            t.add(v, 1).unwrap();
        }
        let bytes = saved(&mut t);
        assert!(t.nodes().0.iter().any(|m| !m.is_finite()), "the case this test is about");
        let mut back = load(&bytes).unwrap();
        assert_eq!(saved(&mut back), bytes);
    }

    #[test]
    fn damaged_values_are_refused() {
        let mut t = digest(10.0, &[1.0, 2.0, 3.0]);
        let bytes = saved(&mut t);
        // Each field is a tag byte then 8 bytes.
        let with = |field: usize, v: [u8; 8]| {
            let mut b = bytes.clone();
            b[field * 9 + 1..field * 9 + 9].copy_from_slice(&v);
            load(&b)
        };
        assert!(with(0, 0.5f64.to_le_bytes()).is_err(), "compression below 1");
        assert!(with(0, 10.5f64.to_le_bytes()).is_err(), "fractional compression");
        assert!(with(0, f64::NAN.to_le_bytes()).is_err());
        assert!(with(0, 1e300f64.to_le_bytes()).is_err(), "capacity past int");
        assert!(with(3, 1000u64.to_le_bytes()).is_err(), "capacity not the compression's");
        assert!(with(4, 71u64.to_le_bytes()).is_err(), "merged nodes past the capacity");
        assert!(with(5, 68u64.to_le_bytes()).is_err(), "unmerged past what is left");
        assert!(with(7, f64::INFINITY.to_le_bytes()).is_err(), "infinite weight");
        assert!(with(7, (-3.0f64).to_le_bytes()).is_err(), "negative weight");
        assert!(with(1, f64::NAN.to_le_bytes()).is_err(), "NaN min");
        assert!(with(9, f64::NAN.to_le_bytes()).is_ok(), "a NaN mean loads (values near the ends make them)");
        assert!(with(12, 1.5f64.to_le_bytes()).is_err(), "fractional weight");
        let huge = TDigest::load(&mut FieldStream { bytes: bytes.clone(), pos: 0 }, Limits::at_most(100));
        assert!(matches!(huge, Err(TdError::TooLarge { bytes: 1128, limit: 100 })));
    }

    /// COMPAT-SKETCHES.md's vectors, the RDB fields of their DUMP payloads.
    #[test]
    fn redisbloom_dump_vectors() {
        let mut t = digest(10.0, &[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((t.merged_nodes(), t.unmerged_nodes(), t.total_compressions()), (0, 5, 0));
        let payload = hex("07814c3212f9360f100004000000000000244004000000000000f03f04000000000000144002404602050200020104000000000000144004000000000000000004000000000000f03f04000000000000004004000000000000084004000000000000104004000000000000144004000000000000f03f04000000000000f03f04000000000000f03f04000000000000f03f04000000000000f03f000a00c8d3f0a85862e443");
        assert_eq!(rdb_fields(&payload), saved(&mut t));
        assert_eq!((t.merged_nodes(), t.unmerged_nodes(), t.total_compressions()), (0, 5, 0), "unchanged");
        let e = t.estimates().unwrap();
        assert_eq!((e.merged_nodes(), e.unmerged_nodes(), e.total_compressions()), (5, 0, 1), "RedisBloom's");
        t.settle(0).unwrap();
        assert_eq!(
            (t.merged_nodes(), t.unmerged_nodes(), t.total_compressions()),
            (5, 0, 1),
            "paid at a write"
        );

        let mut t2 = digest(1.0, &(1..=20).map(f64::from).collect::<Vec<_>>());
        let payload = hex("07814c3212f9360f100004000000000000f03f04000000000000f03f040000000000003440021002040200020204000000000000344004000000000000000004000000000000f03f04000000000000244004000000000000334004000000000000344004000000000000f03f04000000000000314004000000000000f03f04000000000000f03f000a003a953ca4b6a857ca");
        assert_eq!(rdb_fields(&payload), saved(&mut t2));

        let mut empty = TDigest::new(1.0, Limits::NONE).unwrap();
        let payload = hex("07814c3212f9360f100004000000000000f03f04ffffffffffffef7f04ffffffffffffefff0210020002000200040000000000000000040000000000000000000a003a5211657fc6e7b7");
        assert_eq!(rdb_fields(&payload), saved(&mut empty));
        assert_eq!(empty.dump_payload(10), payload, "the whole payload, CRC included");
        let back = load(&rdb_fields(&payload)).unwrap();
        assert_eq!(back, empty);
        assert_eq!(MODULE_ID, 0x4c3212f9360f1000);
    }

    /// A RedisBloom 2.8.2 value of one observation (merged 0, unmerged 1):
    /// the point comes back from min/max.
    #[test]
    fn a_lost_single_point_comes_back() {
        let mut w = FieldStream::default();
        let f: &mut dyn FieldWriter = &mut w;
        f.double(100.0);
        f.double(7.25);
        f.double(7.25);
        for v in [610u64, 0, 1, 0] {
            f.unsigned(v);
        }
        f.double(0.0);
        f.double(1.0);
        let mut t = load(&w.bytes).unwrap();
        assert_eq!((t.merged_nodes(), t.unmerged_nodes(), t.size()), (0, 1, 1));
        assert_eq!(t.quantile(0.5), 7.25);
        // Saved again, it is a centroid, which RedisBloom loads and answers.
        let bytes = saved(&mut t);
        assert_eq!(&bytes[4 * 9 + 1..4 * 9 + 9], &1u64.to_le_bytes(), "one merged node");
        let back = load(&bytes).unwrap();
        assert_eq!(back, t, "loaded back in 2.8.2's live form");
    }

    /// The fields of a value, written by hand: compression, min, max,
    /// capacity, merged, unmerged, total compressions, merged and unmerged
    /// weight, then means and weights.
    fn fields(head: (f64, f64, f64), counts: [u64; 4], weights: (f64, f64), nodes: &[(f64, f64)]) -> Vec<u8> {
        let mut w = FieldStream::default();
        let f: &mut dyn FieldWriter = &mut w;
        f.double(head.0);
        f.double(head.1);
        f.double(head.2);
        for v in counts {
            f.unsigned(v);
        }
        f.double(weights.0);
        f.double(weights.1);
        for &(m, _) in nodes {
            f.double(m);
        }
        for &(_, x) in nodes {
            f.double(x);
        }
        w.bytes
    }

    /// Issue 31's findings: values that loaded but answered differently
    /// once copied are refused; what RedisBloom writes still loads.
    #[test]
    fn only_values_that_round_trip_load() {
        let c10 = |counts, weights, nodes: &[(f64, f64)]| fields((10.0, 1.0, 9.0), counts, weights, nodes);
        // A centroid list that adds up: loads.
        assert!(load(&c10([70, 2, 0, 1], (5.0, 0.0), &[(1.0, 2.0), (9.0, 3.0)])).is_ok());
        // An unmerged node (its value is never saved: it loaded as zeros).
        assert!(load(&c10([70, 2, 1, 1], (5.0, 1.0), &[(1.0, 2.0), (9.0, 3.0)])).is_err());
        // A centroid of weight 0.
        assert!(load(&c10([70, 2, 0, 1], (5.0, 0.0), &[(1.0, 5.0), (9.0, 0.0)])).is_err());
        // Weights that do not add up to the merged weight.
        assert!(load(&c10([70, 2, 0, 1], (6.0, 0.0), &[(1.0, 2.0), (9.0, 3.0)])).is_err());
        // A merged weight past 2^53, where doubles stop being exact.
        let big = (1u64 << 53) as f64;
        assert!(load(&c10([70, 2, 0, 1], (big + 2.0, 0.0), &[(1.0, big), (9.0, 2.0)])).is_err());
        // bloomkit's one-observation form: weight 1, the point is min and max.
        let one = |m: f64, x: f64| fields((10.0, 7.25, 7.25), [70, 1, 0, 0], (x, 0.0), &[(m, x)]);
        let t = load(&one(7.25, 1.0)).unwrap();
        assert_eq!(t.single(), Some(7.25));
        assert!(load(&one(7.25, 2.0)).is_ok(), "two observations of 7.25: a centroid");
        assert!(load(&one(3.0, 1.0)).is_err(), "a point that is not the min and max");
        // 2.8.2's lost single point, and only that shape of buffer.
        let lost = |n: u64, uw: f64| fields((10.0, 7.25, 7.25), [70, 0, n, 0], (0.0, uw), &[]);
        assert!(load(&lost(1, 1.0)).is_ok());
        assert!(load(&lost(2, 1.0)).is_err(), "the single form grown by extra nodes");
        assert!(load(&lost(1, 2.0)).is_err());
    }

    /// Every value that loads saves back to bytes that load to the same
    /// digest, which answers the same (what the fuzzer checks at random).
    #[test]
    fn accepted_values_round_trip() {
        let mut t = digest(5.0, &(0..97).map(|i| ((i * i) % 31) as f64).collect::<Vec<_>>());
        for _ in 0..3 {
            let bytes = saved(&mut t);
            let mut back = load(&bytes).unwrap();
            assert_eq!(saved(&mut back), bytes);
            let (a, b) = (t.estimates().unwrap(), back.estimates().unwrap());
            assert_eq!(a.quantiles(&[0.1, 0.5, 0.9]), b.quantiles(&[0.1, 0.5, 0.9]));
            assert_eq!(a.cdf(10.0), b.cdf(10.0));
            t.add(3.5, 1).unwrap();
        }
    }

    /// `TDIGEST.MERGE d 2 d d` doubles the weight: past 2^53 it is refused,
    /// never rounded, so every DUMP still restores exactly.
    #[test]
    fn self_merges_stop_at_exact_weights() {
        let mut t = digest(10.0, &[1.0, 2.0, 3.0]);
        let mut refused = false;
        for _ in 0..80 {
            let mut merged = TDigest::new(10.0, Limits::NONE).unwrap();
            t.estimates().unwrap();
            let src = t.estimated();
            if merged.merge_compressed(src).and_then(|_| merged.merge_compressed(src)).is_err() {
                refused = true;
                break;
            }
            t = merged;
            let bytes = saved(&mut t);
            let mut back = load(&bytes).unwrap();
            assert_eq!(saved(&mut back), bytes, "weight {}", t.size());
        }
        assert!(refused, "the doubling was refused before 2^53");
        assert!(t.size() <= 1 << 53);
    }

    /// The module-value fields of a DUMP payload (type byte, 9-byte module
    /// id, opcodes, EOF, version, CRC) as a [`FieldStream`].
    fn rdb_fields(payload: &[u8]) -> Vec<u8> {
        let body = &payload[10..payload.len() - 11];
        let mut out = Vec::new();
        let mut i = 0;
        while i < body.len() {
            match body[i] {
                4 => {
                    out.push(b'D');
                    out.extend_from_slice(&body[i + 1..i + 9]);
                    i += 9;
                }
                2 => {
                    // RDB length encoding: 6-bit, 14-bit, or 0x81 + 8 bytes.
                    let (v, n) = match body[i + 1] >> 6 {
                        0 => (u64::from(body[i + 1] & 0x3f), 1),
                        1 => ((u64::from(body[i + 1] & 0x3f) << 8) | u64::from(body[i + 2]), 2),
                        _ => (u64::from_be_bytes(body[i + 2..i + 10].try_into().unwrap()), 9),
                    };
                    out.push(b'U');
                    out.extend_from_slice(&v.to_le_bytes());
                    i += 1 + n;
                }
                op => panic!("opcode {op}"),
            }
        }
        out
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }
}
