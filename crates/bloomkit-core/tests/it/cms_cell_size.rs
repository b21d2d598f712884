//! Redis 8.12's Count-Min Sketch in core, as properties: for every cell
//! size, any sequence of signed increments is exact or refused (a refused
//! one changes nothing), merges are exact or refused, and every sketch
//! round-trips through encoding version 1 and loads at the older levels
//! as the same counts in 4-byte cells, which round-trip through version 0.
//! Damaged version-1 values are refused or load to something that
//! round-trips.

use bloomkit_core::cms::{CellSize, CmsError, CountMinSketch, Dimensions, Rules, Source};
use bloomkit_core::common::dump::PayloadReader;
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::Limits;
use proptest::prelude::*;

fn cell_size() -> impl Strategy<Value = CellSize> {
    prop::sample::select(CellSize::ALL.to_vec())
}

/// Increments near the interesting edges: small, around each cell
/// maximum, and the extremes of i64.
fn increment() -> impl Strategy<Value = i64> {
    prop_oneof![
        -20i64..20,
        prop::sample::select(vec![
            255,
            256,
            -255,
            65535,
            65536,
            4294967295,
            4294967296,
            i64::MAX,
            i64::MIN,
            -1
        ]),
        any::<i64>(),
    ]
}

fn ops() -> impl Strategy<Value = Vec<(u8, i64)>> {
    prop::collection::vec((0u8..12, increment()), 0..60)
}

fn cells(s: &CountMinSketch) -> Vec<u64> {
    (0..s.cells()).map(|i| s.cell(i).unwrap()).collect()
}

fn build(width: u64, depth: u64, cell: CellSize, ops: &[(u8, i64)]) -> CountMinSketch {
    let mut s = CountMinSketch::with_cell_size(Dimensions { width, depth }, cell, Limits::NONE).unwrap();
    for (item, by) in ops {
        let _ = s.add(&[*item], *by);
    }
    s
}

fn save(s: &CountMinSketch, rules: Rules) -> Vec<u8> {
    let mut w = FieldStream::default();
    s.save_with(&mut w, rules);
    w.bytes
}

fn load(bytes: Vec<u8>, encver: i32, rules: Rules) -> Result<CountMinSketch, CmsError> {
    CountMinSketch::load_with(&mut FieldStream { bytes, pos: 0 }, encver, Limits::NONE, rules)
}

/// A sketch at `rules` saves and loads to itself, fields and payload alike.
fn assert_round_trips(s: &CountMinSketch, rules: Rules) {
    let encver = rules.encoding_version();
    let bytes = save(s, rules);
    let back = load(bytes.clone(), encver, rules).expect("its own fields load");
    assert_eq!(&back, s);
    assert_eq!(save(&back, rules), bytes);
    let payload = s.dump_payload_with(rules);
    let mut r = PayloadReader::new(&payload).unwrap();
    assert_eq!(r.type_id & 0x3ff, encver as u64);
    assert_eq!(&CountMinSketch::load_with(&mut r, encver, Limits::NONE, rules).unwrap(), s);
}

proptest! {
    #[test]
    fn increments_are_exact_or_change_nothing(
        cell in cell_size(), width in 1u64..16, depth in 1u64..6, ops in ops(),
    ) {
        let mut s = CountMinSketch::with_cell_size(Dimensions { width, depth }, cell, Limits::NONE).unwrap();
        for (item, by) in ops {
            let before = s.try_clone().unwrap();
            match s.add(&[item], by) {
                Ok(estimate) => {
                    prop_assert_eq!(estimate, s.query(&[item]));
                    prop_assert_eq!(i128::from(s.count()), i128::from(before.count()) + i128::from(by));
                    // Exactly the item's cells moved, each by `by`.
                    let moved: Vec<i128> = cells(&s).iter().zip(cells(&before))
                        .map(|(a, b)| i128::from(*a) - i128::from(b)).filter(|d| *d != 0).collect();
                    prop_assert!(moved.iter().all(|d| *d == i128::from(by)));
                    prop_assert!(by == 0 || moved.len() as u64 == depth);
                }
                Err(e) => {
                    prop_assert!(e == CmsError::IncrbyOverflow || e == CmsError::IncrbyUnderflow);
                    prop_assert_eq!(e == CmsError::IncrbyUnderflow, by < 0);
                    prop_assert_eq!(&s, &before);
                }
            }
            prop_assert!(cells(&s).iter().all(|c| *c <= cell.max()));
            prop_assert!(s.count() <= i64::MAX as u64);
        }
    }

    #[test]
    fn merges_are_exact_or_change_nothing(
        cell in cell_size(), ops_a in ops(), ops_b in ops(), wa in -3i64..4, wb in prop::sample::select(vec![-2i64, 0, 1, 1000, i64::MAX]),
    ) {
        let a = build(8, 3, cell, &ops_a);
        let mut d = build(8, 3, cell, &ops_b);
        let before = d.try_clone().unwrap();
        let result = d.merge(&[(Source::Other(&a), wa), (Source::Destination, wb)]);
        // RedisBloom's arithmetic: signed 64 bits, each product and each
        // sum checked as it is made (the totals read as unsigned first).
        let stepwise = |x: u64, y: u64| -> Option<i64> {
            let p = i64::try_from(i128::from(x) * i128::from(wa)).ok()?;
            let q = i64::try_from(i128::from(y) * i128::from(wb)).ok()?;
            p.checked_add(q)
        };
        let want: Vec<Option<i64>> = cells(&a).iter().zip(cells(&before)).map(|(x, y)| stepwise(*x, y)).collect();
        let total = stepwise(a.count(), before.count());
        let fits = want.iter().all(|c| c.is_some_and(|c| c >= 0 && c as u64 <= cell.max()))
            && total.is_some_and(|t| t >= 0);
        match result {
            Ok(()) => {
                prop_assert!(fits);
                prop_assert_eq!(cells(&d).iter().map(|c| Some(*c as i64)).collect::<Vec<_>>(), want);
                prop_assert_eq!(Some(d.count() as i64), total);
            }
            Err(e) => {
                prop_assert_eq!(e, CmsError::MergeOverflow);
                prop_assert!(!fits);
                prop_assert_eq!(&d, &before);
            }
        }
        let other = CellSize::ALL.into_iter().find(|c| *c != cell).unwrap();
        let mismatched = build(8, 3, other, &[]);
        prop_assert_eq!(d.merge(&[(Source::Other(&mismatched), 1)]), Err(CmsError::CellSizeDiffers));
    }

    #[test]
    fn every_sketch_round_trips_and_loads_at_the_older_levels(
        cell in cell_size(), width in 1u64..16, depth in 1u64..6, ops in ops(),
    ) {
        let s = build(width, depth, cell, &ops);
        assert_round_trips(&s, Rules::CellSized);
        let old = load(save(&s, Rules::CellSized), 1, Rules::Classic).expect("version 1 loads at the older levels");
        prop_assert_eq!(old.cell_size(), CellSize::Four);
        prop_assert_eq!(old.count(), s.count());
        let clamped: Vec<u64> = cells(&s).iter().map(|c| (*c).min(u64::from(u32::MAX))).collect();
        prop_assert_eq!(cells(&old), clamped);
        assert_round_trips(&old, Rules::Classic);
        // Version 0 loads under 8.12's rules as the same 4-byte sketch.
        prop_assert_eq!(load(save(&old, Rules::Classic), 0, Rules::CellSized).unwrap(), old);
    }

    #[test]
    fn damaged_version_1_values_are_refused_or_round_trip(
        cell in cell_size(), ops in ops(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let good = save(&build(5, 3, cell, &ops), Rules::CellSized);
        let mut bad = good.clone();
        for (at, byte) in flips {
            let i = at.index(bad.len());
            bad[i] ^= byte.max(1);
        }
        for rules in [Rules::CellSized, Rules::Classic] {
            if let Ok(s) = CountMinSketch::load_with(&mut FieldStream { bytes: bad.clone(), pos: 0 }, 1, Limits::at_most(1 << 20), rules) {
                prop_assert!(s.count() <= i64::MAX as u64);
                assert_round_trips(&s, rules);
            }
        }
    }
}
