//! The t-digest's RDB value, RedisBloom's field for field (encoding
//! version 0, the only one; RedisBloom ignores the version on load and so
//! does this): compression, min, max (doubles); capacity, merged nodes,
//! unmerged nodes, total compressions (signed, written as unsigned
//! opcodes); merged and unmerged weight (doubles); then the merged
//! centroids' means and their weights (doubles). The buffer is never
//! written: saving compresses first, as RedisBloom does.
//!
//! Nothing decoded is trusted: the capacity must be the compression's, the
//! node counts must fit it, weights must be whole and their sum an i64, and the size
//! is compared with the limit before the arrays are allocated.

use super::digest::{capacity_for, size_for, zeroed};
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
    /// Compresses (as RedisBloom's `rdb_save` does, which `TDIGEST.INFO`
    /// shows afterwards), then writes the value.
    pub fn save(&mut self, w: &mut dyn FieldWriter) {
        let _ = self.compress();
        self.save_as_is(w);
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

    /// Reads a value (any encoding version: RedisBloom wrote only 0 and
    /// never checks it), checked before anything is allocated.
    ///
    /// A value of one observation that RedisBloom 2.8.2 saved from its
    /// buffer (no centroid, one unmerged node of weight 1) lost the point's
    /// value in 2.8.2; min and max still hold it, so it comes back here.
    /// Other unmerged counts (which 2.8.2 never writes in practice) load as
    /// RedisBloom loads them: counted, with zeroed nodes.
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
        limits.check(size_for(cap))?;
        let mut means = zeroed::<f64>(cap)?;
        let mut weights = zeroed::<i64>(cap)?;
        // Any mean loads, NaN and infinities included: compressing values
        // near the double range's ends makes them (in RedisBloom too), and a
        // digest's own value must load again (found by the tdigest_codecs fuzzer).
        for m in &mut means[..merged] {
            *m = r.double()?;
        }
        let mut sum = 0i64;
        for x in &mut weights[..merged] {
            *x = weight(r.double()?)?;
            sum = sum.checked_add(*x).ok_or(TdError::BadData)?;
        }
        // The weights need not add up to the merged weight exactly: past
        // 2^53 each was rounded on its way to a double (RedisBloom saves
        // them so), and the sum differs in the last bits.
        let _ = sum;
        let (mut merged, mut unmerged, mut merged_weight, mut unmerged_weight) =
            (merged, unmerged, merged_weight, unmerged_weight);
        if merged == 0 && unmerged == 1 && unmerged_weight == 1 && min == max && min.is_finite() {
            // 2.8.2 lost this point's value; its min and max kept it.
            means[0] = min;
            weights[0] = 1;
        } else if merged == 1 && unmerged == 0 && merged_weight == 1 {
            // bloomkit's form of a lone observation (see `save_as_is`) goes
            // back to the buffer, where RedisBloom keeps it while it is alone.
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
        })
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
        let bytes = saved(&mut t);
        let mut back = load(&bytes).unwrap();
        assert_eq!(back, t);
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
        assert_eq!((t.merged_nodes(), t.unmerged_nodes(), t.total_compressions()), (5, 0, 1));

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
