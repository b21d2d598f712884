//! Properties of the cuckoo filter over random parameters and random
//! sequences of inserts, deletes and compactions: no false negatives for
//! items added and not deleted, counts that cover every live copy, and
//! codecs (SCANDUMP, RDB) that reproduce the filter exactly.

use std::collections::HashMap;

use bloomkit_core::cf::{CuckooFilter, CuckooParams, Insert, Lookup};
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::Limits;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Add(u8),
    AddNx(u8),
    Del(u8),
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<u8>().prop_map(Op::Add),
        2 => any::<u8>().prop_map(Op::AddNx),
        3 => any::<u8>().prop_map(Op::Del),
        1 => Just(Op::Compact),
    ]
}

fn params() -> impl Strategy<Value = CuckooParams> {
    (4u64..200, 1u16..6, 1u16..30, prop_oneof![Just(0u16), Just(1), Just(2), Just(3), Just(4)]).prop_map(
        |(capacity, bucket_size, max_iterations, expansion)| CuckooParams {
            capacity: capacity.max(2 * u64::from(bucket_size)),
            bucket_size,
            max_iterations,
            expansion,
        },
    )
}

fn item(i: u8) -> Vec<u8> {
    format!("item-{}", i % 64).into_bytes()
}

fn snapshot(f: &CuckooFilter) -> Vec<u8> {
    let mut all = f.encode_header().to_vec();
    for s in f.filters() {
        all.extend_from_slice(s.bytes());
    }
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn live_items_are_always_found(p in params(), ops in prop::collection::vec(op(), 1..400)) {
        let mut f = CuckooFilter::new(p, Limits::NONE).unwrap();
        let mut live: HashMap<Vec<u8>, u64> = HashMap::new();
        for op in ops {
            match op {
                Op::Add(i) | Op::AddNx(i) => {
                    let it = item(i);
                    let l = Lookup::new(&it);
                    let before = snapshot(&f);
                    let outcome = if matches!(op, Op::Add(_)) { f.insert(&l, Limits::NONE) } else { f.insert_unique(&l, Limits::NONE) };
                    match outcome {
                        Ok(Insert::Inserted) => *live.entry(it).or_default() += 1,
                        Ok(Insert::Exists) => prop_assert!(f.contains(&l)),
                        Ok(Insert::Full) => prop_assert_eq!(snapshot(&f), before, "a refused insert changes nothing"),
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    }
                }
                Op::Del(i) => {
                    let it = item(i);
                    // Only live items: deleting a never-added item may remove
                    // another's fingerprint, as in any cuckoo filter.
                    if let Some(n) = live.get_mut(&it) {
                        prop_assert!(f.delete(&Lookup::new(&it)));
                        *n -= 1;
                        if *n == 0 {
                            live.remove(&it);
                        }
                    }
                }
                Op::Compact => f.compact(true),
            }
            for (it, n) in &live {
                let l = Lookup::new(it);
                prop_assert!(f.contains(&l), "false negative");
                prop_assert!(f.count(&l) >= *n, "count below live copies");
            }
        }
        prop_assert_eq!(f.items(), live.values().sum::<u64>());
        // Both codecs reproduce the filter exactly.
        let mut copy = CuckooFilter::from_header(&f.encode_header(), Limits::NONE).unwrap();
        for (pos, data) in f.chunks() {
            copy.load_chunk(pos, data).unwrap();
        }
        prop_assert_eq!(snapshot(&copy), snapshot(&f));
        let mut w = FieldStream::default();
        f.save(&mut w);
        let loaded = CuckooFilter::load(&mut FieldStream { bytes: w.bytes, pos: 0 }, 4, Limits::NONE).unwrap();
        prop_assert_eq!(snapshot(&loaded), snapshot(&f));
        prop_assert_eq!(loaded.size_bytes(), f.size_bytes());
    }

    #[test]
    fn any_header_is_refused_or_works(bytes in prop::collection::vec(any::<u8>(), 38)) {
        let limits = Limits::at_most(1 << 20);
        if let Ok(mut f) = CuckooFilter::from_header(&bytes, limits) {
            for i in 0..20u8 {
                let _ = f.insert(&Lookup::new(&item(i)), limits);
            }
            prop_assert!(f.size_bytes() <= 1 << 20, "growth stays within the limit");
            prop_assert_eq!(CuckooFilter::from_header(&f.encode_header(), Limits::NONE).unwrap().encode_header(), f.encode_header());
        }
    }
}
