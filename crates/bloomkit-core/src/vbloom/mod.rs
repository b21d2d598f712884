//! valkey-bloom's filters (data type `bloomfltr`, encoding version 1), so
//! that a Valkey user can switch to bloomkit on the same data directory and
//! every filter answers as before, and can switch back.
//!
//! An [`Object`] is a list of sub-filters, oldest first, each one serialized
//! as the `bloomfilter` crate (3.x) lays it out:
//!
//! ```text
//! u8 version = 1 | u64 LE bitmap bytes L | u32 LE k | [32] seed | L bytes of bits
//! ```
//!
//! Bit `b` is byte `b / 8`, mask `1 << (b % 8)`. An item's bits come from
//! two SipHash-1-3 hashes of its bytes (as Rust's `Hash for [u8]` feeds
//! them: an 8-byte little-endian length, then the bytes), keyed by the two
//! halves of the seed: `h0`, `h1`, then `(h0 + i*h1 mod 2^64) mod P` for
//! `i >= 2`, each taken modulo `8L`. Every sub-filter of an object shares the
//! first one's seed: a scale-out copies it, so replicas and AOF replays that
//! apply the same writes to the same object make the same sub-filters.
//!
//! The formats around it: the RDB value ([`Object::load`], [`Object::save`])
//! and the `BF.LOAD` blob of valkey-bloom's AOF rewrite
//! ([`Object::decode_blob`], [`Object::encode_blob`]). Replies, error texts,
//! sizing, scaling and `BF.INFO` figures are valkey-bloom 1.0's, as observed
//! (`tests/valkey_bloom.rs` checks them against the data it wrote).
//!
//! Everything read is checked, and every size computed with checked
//! arithmetic and compared with the limit, before anything is allocated.

use std::f64::consts::LN_2;

use crate::bf::MAX_HASHES;
use crate::common::memory::Limits;

pub mod args;
pub mod errors;
pub mod formats;
pub mod object;

pub use args::{parse_insert, parse_reserve, Creation, InfoField, Insert, VbDefaults};
pub use errors::ValkeyError;
pub use object::{Filter, Object};

/// A value that does not describe a valid object, and why.
fn bad(why: &'static str) -> ValkeyError {
    ValkeyError::BadData(why)
}

/// The registered type name: valkey-bloom's, so that its RDB files and DUMP payloads load.
pub const TYPE_NAME: &str = "bloomfltr";
/// The encoding version valkey-bloom writes and bloomkit reads and writes.
pub const ENCODING_VERSION: i32 = 1;
/// The seed of objects made with `bf.bloom-use-random-seed no`.
pub const FIXED_SEED: [u8; 32] = [
    0x59, 0x0f, 0xf5, 0x22, 0xea, 0x78, 0x11, 0xda, 0xa7, 0x14, 0xd8, 0x09, 0x3b, 0x3e, 0x7b, 0xd9, 0x1d,
    0x89, 0x8a, 0x73, 0x3e, 0x98, 0x88, 0x87, 0x30, 0x7f, 0x97, 0xcd, 0x28, 0x07, 0x33, 0x83,
];
/// valkey-bloom's default `bf.bloom-memory-usage-limit`: the size an
/// object may reach, which `BF.INFO … MAXSCALEDCAPACITY` is computed
/// against. The module passes the configured value (never above
/// `bf.max-filter-bytes`) as the [`Limits`] of every `bloomfltr` operation.
pub const MEMORY_LIMIT: u64 = 128 << 20;
/// valkey-bloom's cap on an object's sub-filter count.
pub const MAX_FILTERS: u64 = i32::MAX as u64;
/// The first byte of a `BF.LOAD` blob.
pub const BLOB_VERSION: u8 = 1;
/// The first byte of a serialized sub-filter.
const FILTER_VERSION: u8 = 1;
/// Bytes before the bits of a serialized sub-filter.
pub const FILTER_HEADER: usize = 45;
/// The largest prime below 2^64: hashes after the second are reduced by it.
const PRIME: u64 = 0xFFFF_FFFF_FFFF_FFC5;
/// The Rust struct sizes valkey-bloom counts in `BF.INFO Size` and `MEMORY
/// USAGE` (x86-64): the object, one pointer per slot of its filter vector,
/// and each sub-filter's bookkeeping before its bits.
const OBJECT_BYTES: u64 = 48;
const SLOT_BYTES: u64 = 8;
const FILTER_BYTES: u64 = 208;

/// valkey-bloom's own defaults ([`VbDefaults::VALKEY_BLOOM`]).
const DEFAULT_CAPACITY: i64 = 100;
const DEFAULT_FP_RATE: f64 = 0.01;
const DEFAULT_TIGHTENING: f64 = 0.5;
const DEFAULT_EXPANSION: u32 = 2;

/// The size an object may reach: the module's limit for `bloomfltr`
/// objects (valkey-bloom's `bf.bloom-memory-usage-limit`, capped by
/// `bf.max-filter-bytes`); none while replaying what was accepted once.
pub fn object_limit(limits: Limits) -> Option<u64> {
    limits.max_bytes
}

/// Checks that an object growing from `before` to `after` bytes stays
/// within the limit (`ERR operation exceeds bloom object memory limit`) and
/// what the server has left under `maxmemory`.
fn check_growth(limits: Limits, before: u64, after: Option<u64>) -> Result<(), ValkeyError> {
    let Some(after) = after else {
        return match limits.max_bytes {
            Some(_) => Err(ValkeyError::MemoryLimit),
            None => Ok(()),
        };
    };
    limits.check_growth(before, after).map_err(|e| match e.bound {
        crate::common::memory::Bound::Filter => ValkeyError::MemoryLimit,
        crate::common::memory::Bound::Memory => ValkeyError::OverMaxmemory,
    })
}

/// The `bloomfilter` crate's `compute_bitmap_size`: bytes of bits for a
/// capacity and error rate (the same float operations, so the same bytes);
/// `None` where the size is not representable.
pub fn bitmap_bytes(capacity: u64, fp_rate: f64) -> Option<u64> {
    let l = ((capacity as f64) * fp_rate.ln() / (-8.0 * (LN_2 * LN_2))).ceil();
    (l.is_finite() && l >= 1.0 && l <= (u64::MAX / 8) as f64).then_some(l as u64)
}

/// The crate's `optimal_k_num`: `max(1, round(m / n * ln 2))`.
fn hashes_for(bits: u64, capacity: u64) -> u32 {
    let k = (bits as f64 / capacity as f64 * 2f64.ln()).round();
    (k as u32).max(1)
}

/// valkey-bloom's `calculate_fp_rate`: the rate of sub-filter `n` (from 0),
/// refused once it is no longer a normal positive double.
fn rate_of(fp_rate: f64, n: u64, tightening: f64) -> Result<f64, ValkeyError> {
    let n = i32::try_from(n).map_err(|_| ValkeyError::FpReachesZero)?;
    match fp_rate * tightening.powi(n) {
        x if x > f64::MIN_POSITIVE => Ok(x),
        _ => Err(ValkeyError::FpReachesZero),
    }
}

/// The slots Rust's `Vec` has after growing to `len` from a capacity of 1
/// (how valkey-bloom builds objects and loads them from RDB).
fn grown_slots(len: u64) -> u64 {
    if len <= 1 {
        1
    } else {
        len.max(4).next_power_of_two()
    }
}

/// How many sub-filters [`scaled_capacity`] walks at most, so that one
/// command's work is bounded whatever the limits (an expansion of 1 and a
/// tightening ratio near 1 take one step per ~217 bytes of limit: 2^50
/// bytes of `bf.max-filter-bytes` would be 5 * 10^12 steps). At
/// valkey-bloom's default limit an object holds at most 620,000
/// sub-filters, well within it, so its answers are valkey-bloom's.
const MAX_SCALE_STEPS: u64 = 1 << 20;

/// valkey-bloom's `calculate_max_scaled_capacity`: walks the sub-filters a
/// scaling object would get; with `target`, succeeds once the capacity
/// reaches it, else returns what the limit and the rate allow.
fn scaled_capacity(
    capacity: u64,
    fp_rate: f64,
    target: Option<u64>,
    tightening: f64,
    expansion: u32,
    limits: Limits,
) -> Result<u64, ValkeyError> {
    let limit = limits.max_bytes.unwrap_or(MEMORY_LIMIT);
    let (mut filter_capacity, mut total, mut n, mut data) = (capacity, 0u64, 0u64, 0u64);
    while target.is_none_or(|t| total < t) {
        if n >= MAX_SCALE_STEPS {
            return target.map_or(Ok(total), |_| Err(ValkeyError::ValidateScaleToTooLarge));
        }
        let Ok(fp) = rate_of(fp_rate, n, tightening) else {
            return target.map_or(Ok(total), |_| Err(ValkeyError::ValidateScaleToFpZero));
        };
        let slots = if n == 0 { 1 } else { (n + 1).max(4).next_power_of_two() };
        let filter = bitmap_bytes(filter_capacity, fp).and_then(|b| b.checked_add(FILTER_BYTES));
        let size = filter.and_then(|f| accounted_size(slots, data.checked_add(f)?));
        match (filter, size) {
            (Some(f), Some(s)) if s <= limit => data += f,
            _ => return target.map_or(Ok(total), |_| Err(ValkeyError::ValidateScaleToTooLarge)),
        }
        total = total.saturating_add(filter_capacity);
        filter_capacity = filter_capacity
            .checked_mul(u64::from(expansion))
            .filter(|c| *c <= i64::MAX as u64)
            .ok_or(ValkeyError::BadCapacity)?;
        n += 1;
    }
    Ok(total)
}

/// The `Size` of an object with `slots` vector slots and sub-filters
/// accounting `data` bytes.
fn accounted_size(slots: u64, data: u64) -> Option<u64> {
    SLOT_BYTES.checked_mul(slots)?.checked_add(OBJECT_BYTES)?.checked_add(data)
}

#[cfg(test)]
pub(super) mod tests {
    use super::object::*;
    use super::*;

    pub(in crate::vbloom) fn object(capacity: u64, fp: f64, expansion: u32) -> Object {
        let f = Filter::new(capacity, fp, &FIXED_SEED).unwrap();
        Object { expansion, fp_rate: fp, tightening: 0.5, seed_random: false, filters: vec![f], slots: 1 }
    }

    #[test]
    fn sizes_like_the_bloomfilter_crate() {
        // BF.INFO of valkey-bloom: capacity 100 at 0.01 takes 120 bytes, capacity 2 takes 3.
        assert_eq!(bitmap_bytes(100, 0.01), Some(120));
        assert_eq!(bitmap_bytes(2, 0.01), Some(3));
        assert_eq!(hashes_for(960, 100), 7);
        assert_eq!(object(100, 0.01, 2).size(), 384);
        assert_eq!(object(2, 0.01, 0).size(), 267);
        assert_eq!(bitmap_bytes(u64::MAX, 1e-300), None);
    }

    #[test]
    fn relocate_offers_every_buffer_once_and_resumes() {
        use crate::common::memory::TestMover;
        let mut o = object(4, 0.01, 2);
        for i in 0..100u32 {
            o.add(&i.to_le_bytes(), Limits::NONE).unwrap();
        }
        let n = o.filters().len();
        let blob = o.encode_blob().unwrap();
        let mut mover = TestMover::new(2);
        let calls = mover.run(|from, to| o.relocate(from, to));
        assert_eq!(mover.moved_from.len(), n + 1);
        assert_eq!(calls, (n + 1).div_ceil(2));
        assert_eq!(o.encode_blob().unwrap(), blob);
        assert!((0..100u32).all(|i| o.contains(&i.to_le_bytes())));
    }

    #[test]
    fn scales_with_the_first_seed_and_counts_items() {
        let mut o = object(4, 0.01, 2);
        let limits = Limits::NONE;
        let added = (0..40u32).filter(|i| o.add(&i.to_le_bytes(), limits).unwrap()).count() as u64;
        assert_eq!(o.items(), added);
        let caps: Vec<u64> = o.filters().iter().map(Filter::capacity).collect();
        assert_eq!(&caps[..4], &[4, 8, 16, 32]);
        assert!(o.filters().iter().all(|f| f.seed() == FIXED_SEED));
        assert!(o.filters()[..o.filters().len() - 1].iter().all(|f| f.items() == f.capacity()));
        assert_eq!(o.slots, 4);
        for i in 0..40u32 {
            assert!(o.contains(&i.to_le_bytes()));
        }
    }

    #[test]
    fn non_scaling_batches_are_all_or_nothing() {
        let mut o = object(2, 0.01, 0);
        assert_eq!(o.check_room(&[b"a", b"b", b"c"]), Err(ValkeyError::NonScalingFull));
        assert_eq!(o.check_room(&[b"a", b"a", b"b"]), Ok(()));
        assert_eq!(o.add(b"a", Limits::NONE), Ok(true));
        assert_eq!(o.add(b"b", Limits::NONE), Ok(true));
        assert_eq!(o.add(b"c", Limits::NONE), Err(ValkeyError::NonScalingFull));
        assert_eq!(o.add(b"a", Limits::NONE), Ok(false));
    }

    #[test]
    fn the_limit_refuses_a_scale_out_and_changes_nothing() {
        let mut o = object(100, 0.01, 2);
        let limits = Limits::at_most(700);
        let mut refused = None;
        for i in 0..400u32 {
            if let Err(e) = o.add(&i.to_le_bytes(), limits) {
                refused = Some(e);
                break;
            }
        }
        assert_eq!(refused, Some(ValkeyError::MemoryLimit));
        assert_eq!(o.filters().len(), 1);
    }

    #[test]
    fn max_scaled_capacity_matches_valkey_bloom() {
        // BF.INFO f1 / f2 MAXSCALEDCAPACITY on valkey-bloom 1.0 (128 MiB limit).
        let limits = Limits::at_most(MEMORY_LIMIT);
        assert_eq!(scaled_capacity(100, 0.01, None, 0.5, 2, limits), Ok(26_214_300));
        assert_eq!(scaled_capacity(1000, 0.001, None, 0.5, 4, limits), Ok(21_845_000));
    }

    #[test]
    fn scaling_walks_are_bounded_whatever_the_limit() {
        // Expansion 1, tightening near 1: one step per sub-filter, and the
        // largest limit would allow billions of them.
        let limits = Limits::at_most(1 << 50);
        assert_eq!(
            scaled_capacity(1, 0.5, Some(u64::MAX), 0.999_999_999, 1, limits),
            Err(ValkeyError::ValidateScaleToTooLarge)
        );
        assert_eq!(scaled_capacity(1, 0.5, None, 0.999_999_999, 1, limits), Ok(MAX_SCALE_STEPS));
    }

    #[test]
    fn arguments_follow_valkey_bloom() {
        let argv = |s: &str| s.split(' ').map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
        let limits = Limits::at_most(MEMORY_LIMIT);
        let d = VbDefaults::VALKEY_BLOOM;
        let reserve = |s: &str| parse_reserve(&argv(s), &d);
        assert_eq!(reserve("BF.RESERVE k 0.01 100 FOO").unwrap_err(), ValkeyError::Syntax);
        assert_eq!(
            reserve("BF.RESERVE k 0.01 100 NONSCALING EXPANSION 2").unwrap_err(),
            ValkeyError::WrongArity
        );
        assert_eq!(reserve("BF.RESERVE k 0.01 -5").unwrap_err(), ValkeyError::BadCapacity);
        assert_eq!(reserve("BF.RESERVE k 1.5 5").unwrap_err(), ValkeyError::ErrorRateRange);
        let c = reserve("BF.RESERVE k 0.001 5 expansion 3").unwrap();
        assert_eq!((c.capacity, c.fp_rate, c.expansion, c.tightening, c.seed), (5, 0.001, 3, 0.5, None));
        assert_eq!(reserve("BF.RESERVE k 0.01 5 NONSCALING").unwrap().expansion, 0);
        let fixed = VbDefaults { random_seed: false, ..d };
        assert_eq!(parse_reserve(&argv("BF.RESERVE k 0.01 5"), &fixed).unwrap().seed, Some(FIXED_SEED));

        let insert = |s: &str| parse_insert(&argv(s), &d, limits);
        let i =
            insert("BF.INSERT k SEED 0123456789abcdef0123456789abcdef TIGHTENING 0.25 ITEMS a b").unwrap();
        assert_eq!(i.items_from, 7);
        assert_eq!(i.creation.seed, Some(*b"0123456789abcdef0123456789abcdef"));
        assert_eq!(i.creation.tightening, 0.25);
        let i = insert("BF.INSERT k NOCREATE").unwrap();
        assert_eq!((i.nocreate, i.items_from), (true, 3));
        assert_eq!(insert("BF.INSERT k").unwrap().items_from, 2);
        assert_eq!(insert("BF.INSERT k ITEMS").unwrap_err(), ValkeyError::WrongArity);
        assert_eq!(insert("BF.INSERT k SEED x ITEMS a").unwrap_err(), ValkeyError::InvalidSeed);
        assert_eq!(
            insert("BF.INSERT k NONSCALING VALIDATESCALETO 1000 ITEMS a").unwrap_err(),
            ValkeyError::NonScalingAndValidateScaleTo
        );
        let too_large = "BF.INSERT k CAPACITY 100 ERROR 0.5 VALIDATESCALETO 100000000000 ITEMS a";
        assert_eq!(insert(too_large).unwrap_err(), ValkeyError::ValidateScaleToTooLarge);
        // A replica (no limits) does not check what its primary checked.
        assert!(parse_insert(&argv(too_large), &d, Limits::NONE).is_ok());
        assert_eq!(
            insert("BF.INSERT k CAPACITY 10 ERROR 0.5 TIGHTENING 0.0001 EXPANSION 1 VALIDATESCALETO 100000 ITEMS a")
                .unwrap_err(),
            ValkeyError::ValidateScaleToFpZero
        );
    }
}
