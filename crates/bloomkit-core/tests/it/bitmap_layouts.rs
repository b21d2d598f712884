//! The bitmap layouts against what the other systems computed: real Guava
//! 31.1 (raw `RedisBloomFilter` pattern indexes and Guava's own bits),
//! Redisson's hashing code (StringCodec and Kryo5Codec bytes) and PHP 8.2
//! running the BKDR scheme's functions.

use bloomkit_core::bitmap::guava::{swap_bit_order, SerialError, SerialHeader, SERIAL_HEADER_LEN};
use bloomkit_core::bitmap::{
    java_double_to_string, kryo5_string, redisson_config_key, redisson_hash, BitmapError, BitmapLayout,
    BitmapShape, BitmapSpec,
};
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
        // The layout does the encoding itself, from the item's UTF-8.
        for (id, want) in item["kryo5codec_default"]["indexes"].as_object().unwrap() {
            let s = doc["shapes"].as_array().unwrap().iter().find(|s| s["id"] == id.as_str()).unwrap();
            let (n, p) = (s["expectedInsertions"].as_u64().unwrap(), s["falseProbability"].as_f64().unwrap());
            let spec = BitmapSpec::sized(BitmapLayout::RedissonKryo5, n, p).unwrap();
            let mut got = Vec::new();
            spec.positions(text.as_bytes(), &mut got);
            assert_eq!(got, u64s(want), "{} {id}", item["name"]);
        }
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

/// The config hash's text: Java's `Double.toString` and `String.valueOf`,
/// and the key beside the bitmap.
#[test]
fn redisson_config_is_written_as_java_writes_it() {
    let doc = fixture("redisson-bloom.json");
    let mut checked = 0;
    for case in doc["sizing"]["cases"].as_array().unwrap() {
        let fields = &case["config_hash_written"]["since_3.30.0 (Lua HSET, values via Object.toString)"];
        let Some(p) = fields["falseProbability"].as_str() else { continue };
        let parsed: f64 = p.parse().unwrap();
        assert_eq!(java_double_to_string(parsed), p, "{case}");
        assert_eq!(java_double_to_string(parsed), case["falseProbability_java_toString"].as_str().unwrap());
        let n = case["expectedInsertions"].as_u64().unwrap();
        if let Ok(spec) = BitmapSpec::sized(BitmapLayout::Redisson, n, parsed) {
            assert_eq!(spec.shape.bits.to_string(), fields["size"].as_str().unwrap(), "{case}");
            assert_eq!(spec.shape.hashes.to_string(), fields["hashIterations"].as_str().unwrap(), "{case}");
        }
        checked += 1;
    }
    assert!(checked >= 5, "{checked}");
    for (value, java) in
        [(1e-4, "1.0E-4"), (0.5, "0.5"), (1e7, "1.0E7"), (1234567.0, "1234567.0"), (0.001, "0.001")]
    {
        assert_eq!(java_double_to_string(value), java);
    }
    for (name, key) in doc["redis_layout"]["config_key_examples"].as_object().unwrap() {
        assert_eq!(redisson_config_key(name), key.as_str().unwrap());
    }
}

#[test]
fn specs_refuse_what_the_layouts_cannot_hold() {
    assert_eq!(
        BitmapSpec::sized(BitmapLayout::PhpBkdr, 1000, 0.01),
        Err(BitmapError::NeedsExplicitShape(BitmapLayout::PhpBkdr))
    );
    assert!(matches!(
        BitmapSpec::sized(BitmapLayout::Redisson, 10_000_000_000, 0.01),
        Err(BitmapError::NoShape { .. })
    ));
    assert!(matches!(BitmapSpec::explicit(BitmapLayout::Guava, 64, 256), Err(BitmapError::Hashes { .. })));
    assert!(matches!(
        BitmapSpec::explicit(BitmapLayout::GuavaUnrounded, 1 << 31, 3),
        Err(BitmapError::Bits { .. })
    ));
    assert_eq!(BitmapSpec::explicit(BitmapLayout::Guava, 100, 3).unwrap().shape.bits, 128);
    assert_eq!(BitmapSpec::explicit(BitmapLayout::GuavaUnrounded, 100, 3).unwrap().shape.bits, 100);
    for layout in BitmapLayout::ALL {
        assert_eq!(BitmapLayout::from_name(layout.name()), Some(layout));
    }
}

/// Guava's serial form: the examples real Guava wrote read back with their
/// bits in Redis order, and what `readFrom` refuses is refused.
#[test]
fn guava_serial_form_reads_as_guava_wrote_it() {
    let doc = fixture("guava-serialized.json");
    let mut read = 0;
    for ex in doc["examples"].as_array().unwrap() {
        let bytes = hex(ex["serialized_hex"].as_str().unwrap());
        let header = SerialHeader::parse(bytes[..SERIAL_HEADER_LEN].try_into().unwrap());
        if ex["parsed"]["strategy_ordinal"] == 0 {
            assert_eq!(header, Err(SerialError::LegacyStrategy), "{}", ex["name"]);
            continue;
        }
        let header = header.unwrap();
        assert_eq!(u64::from(header.hashes), ex["parsed"]["num_hash_functions"].as_u64().unwrap());
        assert_eq!(header.body_len() as usize, bytes.len() - SERIAL_HEADER_LEN);
        assert_eq!(header.to_bytes(), bytes[..SERIAL_HEADER_LEN], "writes what it read");
        let mut body = bytes[SERIAL_HEADER_LEN..].to_vec();
        swap_bit_order(&mut body);
        assert_eq!(body, hex(ex["redis_bitmap_hex_same_bits"].as_str().unwrap()), "{}", ex["name"]);
        // The items' positions are the set bits, and nothing else is set.
        let spec = BitmapSpec::explicit(BitmapLayout::Guava, header.shape().bits, header.hashes).unwrap();
        let mut set = Vec::new();
        for item in ex["items_utf8_hex"].as_array().unwrap() {
            spec.positions(&hex(item.as_str().unwrap()), &mut set);
        }
        set.sort_unstable();
        set.dedup();
        assert_eq!(set, u64s(&ex["set_bits"]), "{}", ex["name"]);
        swap_bit_order(&mut body);
        assert_eq!(body, bytes[SERIAL_HEADER_LEN..], "the swap is its own inverse");
        read += 1;
    }
    assert!(read >= 3, "{read}");
    let mut refused = 0;
    for case in doc["readFrom_cases_guava_31_1"].as_array().unwrap() {
        let bytes = hex(case["input_hex"].as_str().unwrap());
        let Ok(head) = <[u8; SERIAL_HEADER_LEN]>::try_from(bytes.get(..SERIAL_HEADER_LEN).unwrap_or(&[]))
        else {
            continue; // shorter than a header: the reader's EOF
        };
        let ok = case["result"] == "ok";
        // A good header over a body cut short fails in the reader, not here.
        let cut_short = case["result"].as_str().unwrap().starts_with("java.io.EOFException");
        assert_eq!(SerialHeader::parse(&head).is_ok(), ok || cut_short, "{case}");
        refused += usize::from(!ok);
    }
    assert!(refused >= 3, "{refused}");
}
