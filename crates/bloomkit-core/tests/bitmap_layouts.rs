//! The bitmap layouts against what the other systems computed: real Guava
//! 31.1 (raw `RedisBloomFilter` pattern indexes and Guava's own bits),
//! Redisson's hashing code (StringCodec and Kryo5Codec bytes) and PHP 8.2
//! running the BKDR scheme's functions.

use bloomkit_core::bitmap::{kryo5_string, redisson_hash, BitmapLayout, BitmapShape};
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn positions(layout: BitmapLayout, shape: BitmapShape, item: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    layout.positions(shape, item, &mut out);
    out
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
}

#[test]
fn guava_unrounded_reproduces_the_java_pattern_and_guava_its_own_bits() {
    let doc = fixture("guava-raw-bitmap.json");
    for shape in doc["shapes"].as_array().unwrap() {
        let (n, p) = (shape["capacity"].as_u64().unwrap(), shape["error_rate"].as_f64().unwrap());
        let raw = BitmapLayout::GuavaUnrounded.shape(n, p).unwrap();
        assert_eq!(raw.bits, shape["raw_m_bits"].as_u64().unwrap(), "{shape}");
        assert_eq!(u64::from(raw.hashes), shape["raw_k"].as_u64().unwrap(), "{shape}");
        let guava = BitmapLayout::Guava.shape(n, p).unwrap();
        assert_eq!(guava.bits, shape["guava_bloomfilter"]["bit_size"].as_u64().unwrap(), "{shape}");
    }
    let mut checked = 0;
    for item in doc["items"].as_array().unwrap() {
        let bytes = hex(item["utf8_hex"].as_str().unwrap());
        for shape in doc["shapes"].as_array().unwrap() {
            let id = shape["id"].as_str().unwrap();
            let (n, p) = (shape["capacity"].as_u64().unwrap(), shape["error_rate"].as_f64().unwrap());
            let raw = BitmapLayout::GuavaUnrounded.shape(n, p).unwrap();
            assert_eq!(
                positions(BitmapLayout::GuavaUnrounded, raw, &bytes),
                u64s(&item["raw_indexes"][id]),
                "{id}"
            );
            let guava = BitmapLayout::Guava.shape(n, p).unwrap();
            let mut ours = positions(BitmapLayout::Guava, guava, &bytes);
            ours.sort_unstable();
            ours.dedup();
            assert_eq!(ours, u64s(&item["guava_bloomfilter_set_bits"][id]), "{id}");
            checked += 1;
        }
    }
    assert!(checked >= 100, "{checked}");
}

#[test]
fn redisson_reproduces_its_hash_and_indexes_for_both_codecs() {
    let doc = fixture("redisson-bloom.json");
    let shapes: Vec<(String, BitmapShape)> = doc["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let (n, p) = (s["expectedInsertions"].as_u64().unwrap(), s["falseProbability"].as_f64().unwrap());
            let shape = BitmapLayout::Redisson.shape(n, p).unwrap();
            assert_eq!(shape.bits, s["size_bits"].as_u64().unwrap(), "{s}");
            assert_eq!(u64::from(shape.hashes), s["hashIterations"].as_u64().unwrap(), "{s}");
            (s["id"].as_str().unwrap().to_string(), shape)
        })
        .collect();
    let mut checked = 0;
    for item in doc["items"].as_array().unwrap() {
        for (codec, bytes_field) in [("stringcodec", "utf8_hex"), ("kryo5codec_default", "encoded_hex")] {
            let Some(c) = item.get(codec).filter(|c| c.is_object()) else { continue };
            let hex_text = c.get(bytes_field).or(item.get(bytes_field)).and_then(Value::as_str).unwrap();
            let bytes = hex(hex_text);
            let [h1, h2] = redisson_hash(&bytes);
            assert_eq!(format!("{h1:#018x}"), c["hash1_u64"].as_str().unwrap(), "{codec} {}", item["name"]);
            assert_eq!(format!("{h2:#018x}"), c["hash2_u64"].as_str().unwrap());
            for (id, shape) in &shapes {
                let Some(expected) = c["indexes"].get(id) else { continue };
                assert_eq!(positions(BitmapLayout::Redisson, *shape, &bytes), u64s(expected), "{codec} {id}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 100, "{checked}");
}

/// Redisson's default codec's bytes for strings, from the text alone.
#[test]
fn kryo5_encodes_strings_as_redisson_does() {
    let doc = fixture("redisson-bloom.json");
    let mut checked = 0;
    for item in doc["items"].as_array().unwrap() {
        let (Some(text), Some(expected)) =
            (item["text"].as_str(), item["kryo5codec_default"].get("encoded_hex").and_then(Value::as_str))
        else {
            continue;
        };
        assert_eq!(kryo5_string(text), hex(expected), "{}", item["name"]);
        checked += 1;
    }
    assert!(checked >= 25, "{checked}");
}

#[test]
fn php_bkdr_reproduces_phps_hashes_and_offsets() {
    let doc = fixture("php-bkdr-bitmap.json");
    let mut checked = 0;
    for item in doc["items"].as_array().unwrap() {
        let bytes = hex(item["hex"].as_str().unwrap());
        for (id, offsets) in item["offsets"].as_object().unwrap() {
            let (m, k) = id.trim_start_matches('m').split_once("_k").unwrap();
            let shape =
                BitmapShape::explicit(BitmapLayout::PhpBkdr, m.parse().unwrap(), k.parse().unwrap()).unwrap();
            assert_eq!(
                positions(BitmapLayout::PhpBkdr, shape, &bytes),
                u64s(offsets),
                "{} {id}",
                item["name"]
            );
            checked += 1;
        }
        // The hashes themselves, with m = 2^32 (no reduction).
        let all = BitmapShape::explicit(BitmapLayout::PhpBkdr, 1 << 32, 24).unwrap();
        assert_eq!(positions(BitmapLayout::PhpBkdr, all, &bytes), u64s(&item["hashes"]), "{}", item["name"]);
    }
    assert!(checked >= 100, "{checked}");
    assert!(BitmapShape::explicit(BitmapLayout::PhpBkdr, (1 << 32) + 1, 3).is_none(), "m at most 2^32");
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}
