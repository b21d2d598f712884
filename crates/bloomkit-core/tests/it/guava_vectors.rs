//! Real Guava 31.1 (tests/fixtures/guava-31.1.json, made by
//! scripts/guava-vectors.sh) against `bloomkit_core::bitmap::guava`: the same hash
//! halves, the same sizes and hash counts, and the same set bits after the
//! same insertions, so a Java service and bloomkit can share one bitmap.

use std::collections::BTreeSet;

use bloomkit_testkit::guava_items;
use serde_json::Value;
use {bloomkit_core::bitmap::guava::GuavaShape, bloomkit_core::common::hash::murmur3_128};

fn fixture() -> Value {
    serde_json::from_str(include_str!("../fixtures/guava-31.1.json")).unwrap()
}

fn hex_u64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap(), 16).unwrap()
}

#[test]
fn murmur3_128_halves_match_guava() {
    let doc = fixture();
    let cases = doc["hashes"].as_array().unwrap();
    let ours = guava_items(cases.len());
    for (case, item) in cases.iter().zip(&ours) {
        assert_eq!(case["item"].as_str().unwrap(), item, "fixture and test disagree on the items");
        let (h1, h2) = murmur3_128(item.as_bytes());
        assert_eq!((h1, h2), (hex_u64(&case["h1"]), hex_u64(&case["h2"])), "item {item:?}");
    }
}

#[test]
fn filters_set_the_bits_guava_sets() {
    for case in fixture()["filters"].as_array().unwrap() {
        let capacity = case["capacity"].as_u64().unwrap();
        let error_rate = case["error_rate"].as_f64().unwrap();
        assert_eq!(case["strategy"].as_u64(), Some(1), "MURMUR128_MITZ_64 is Guava's strategy 1");
        let shape = GuavaShape::new(capacity, error_rate).unwrap();
        assert_eq!(shape.bits, case["bits"].as_u64().unwrap(), "bits for n={capacity} p={error_rate}");
        assert_eq!(u64::from(shape.hashes), case["hashes"].as_u64().unwrap(), "hashes for n={capacity}");

        let mut set = BTreeSet::new();
        for item in guava_items(case["items"].as_u64().unwrap() as usize) {
            set.extend(shape.positions(item.as_bytes()));
        }
        let guava: BTreeSet<u64> =
            case["set_bits"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).collect();
        assert_eq!(set, guava, "set bits for n={capacity} p={error_rate}");

        // Guava's answers for items never added, false positives included.
        for (i, expected) in case["absent_probes_contained"].as_array().unwrap().iter().enumerate() {
            let probe = format!("absent-{i}");
            let ours = shape.positions(probe.as_bytes()).all(|b| set.contains(&b));
            assert_eq!(ours, expected.as_u64() == Some(1), "probe {probe:?} for n={capacity}");
        }
    }
}
