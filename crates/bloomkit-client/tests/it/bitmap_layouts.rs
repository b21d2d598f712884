//! Every bitmap layout against what the other systems' own code wrote, on
//! a real redis-server: the bits bloomkit sets are theirs exactly (`GET`
//! compared bit for bit, and byte for byte where they recorded the string),
//! and bloomkit sees every item their code added with its SETBITs.
//! References: real Guava 31.1 (the RedisBloomFilter pattern), Redisson's
//! own hashing code and Lua scripts, and PHP 8.2 running the BKDR scheme
//! (`bloomkit-core/tests/fixtures/`).

use bloomkit_client::{BitmapLayout, Error, Filter, Layout, Options, RedisFilter};
use bloomkit_core::bitmap::redisson_config_key;
use bloomkit_testkit::{Server, TestServer};
use serde_json::Value;

use crate::common;
use common::connect;

fn fixture(name: &str) -> Value {
    let path = format!("{}/../bloomkit-core/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
}

/// The bits set in a Redis string (SETBIT's order: from the most
/// significant bit of byte 0).
fn set_bits(bytes: &[u8]) -> Vec<u64> {
    (0..bytes.len() as u64 * 8).filter(|&b| bytes[(b / 8) as usize] & (0x80 >> (b % 8)) != 0).collect()
}

fn union(lists: impl IntoIterator<Item = Vec<u64>>) -> Vec<u64> {
    let mut all: Vec<u64> = lists.into_iter().flatten().collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// Shapes whose bitmaps stay small enough for a test server (the vectors'
/// 2^32-bit shapes are checked offset by offset in core's tests).
const MAX_TEST_BITS: u64 = 1 << 27;

/// One case: a layout and shape, the items (bytes as the other side hashes
/// them before its codec), and the offsets the other side set for each.
struct Case {
    what: String,
    layout: BitmapLayout,
    options: Options,
    items: Vec<Vec<u8>>,
    offsets: Vec<Vec<u64>>,
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let raw = fixture("guava-raw-bitmap.json");
    for shape in raw["shapes"].as_array().unwrap() {
        let id = shape["id"].as_str().unwrap();
        let options =
            Options::new(shape["capacity"].as_u64().unwrap(), shape["error_rate"].as_f64().unwrap());
        let items: Vec<Vec<u8>> =
            raw["items"].as_array().unwrap().iter().map(|i| hex(i["utf8_hex"].as_str().unwrap())).collect();
        for (layout, field) in [
            (BitmapLayout::GuavaUnrounded, "raw_indexes"),
            (BitmapLayout::Guava, "guava_bloomfilter_set_bits"),
        ] {
            let offsets = raw["items"].as_array().unwrap().iter().map(|i| u64s(&i[field][id])).collect();
            cases.push(Case {
                what: format!("{} {id}", layout.name()),
                layout,
                options: options.clone(),
                items: items.clone(),
                offsets,
            });
        }
    }
    let redisson = fixture("redisson-bloom.json");
    for shape in redisson["shapes"].as_array().unwrap() {
        if shape["size_bits"].as_u64().unwrap() > MAX_TEST_BITS {
            continue;
        }
        let id = shape["id"].as_str().unwrap();
        let options = Options::new(
            shape["expectedInsertions"].as_u64().unwrap(),
            shape["falseProbability"].as_f64().unwrap(),
        );
        for (layout, codec) in
            [(BitmapLayout::Redisson, "stringcodec"), (BitmapLayout::RedissonKryo5, "kryo5codec_default")]
        {
            let (mut items, mut offsets) = (Vec::new(), Vec::new());
            for item in redisson["items"].as_array().unwrap() {
                let (Some(text), Some(idx)) = (item["text"].as_str(), item[codec]["indexes"].get(id)) else {
                    continue;
                };
                items.push(text.as_bytes().to_vec());
                offsets.push(u64s(idx));
            }
            cases.push(Case {
                what: format!("{} {id}", layout.name()),
                layout,
                options: options.clone(),
                items,
                offsets,
            });
        }
    }
    let php = fixture("php-bkdr-bitmap.json");
    for shape in php["shapes"].as_array().unwrap() {
        let (m, k) = (shape["m"].as_u64().unwrap(), shape["k"].as_u64().unwrap() as u32);
        if m > MAX_TEST_BITS {
            continue;
        }
        let id = format!("m{m}_k{k}");
        let items =
            php["items"].as_array().unwrap().iter().map(|i| hex(i["hex"].as_str().unwrap())).collect();
        let offsets = php["items"].as_array().unwrap().iter().map(|i| u64s(&i["offsets"][&id])).collect();
        cases.push(Case {
            what: format!("php-bkdr {id}"),
            layout: BitmapLayout::PhpBkdr,
            options: Options { shape: Some((m, k)), ..Options::new(1000, 0.01) },
            items,
            offsets,
        });
    }
    cases
}

/// bloomkit's adds set exactly the other side's bits; every layout and
/// every shape the test server can hold.
#[test]
fn adds_set_the_bits_the_other_systems_set() {
    let server = TestServer::start(Server::Redis, &[], &[]);
    let cases = cases();
    let mut seen = std::collections::BTreeSet::new();
    for (n, case) in cases.iter().enumerate() {
        let key = format!("ours:{n}");
        let layout = Layout::bitmap_with(&key, case.layout, case.options.clone()).unwrap();
        let mut filter = RedisFilter::new(connect(&server), layout);
        let refs: Vec<&[u8]> = case.items.iter().map(Vec::as_slice).collect();
        filter.add_many(&refs).unwrap();
        let bytes = server.conn().call(&["GET", &key]).as_bytes().to_vec();
        assert_eq!(set_bits(&bytes), union(case.offsets.clone()), "{}", case.what);
        assert!(filter.contains_many(&refs).unwrap().iter().all(|&b| b), "{}", case.what);
        seen.insert(case.layout.name());
    }
    assert_eq!(seen.len(), BitmapLayout::ALL.len(), "every layout: {seen:?}");
}

/// The other side's SETBITs (one per offset, as its code sends them) are
/// seen by bloomkit: every item present; for Redisson, after its tryInit.
#[test]
fn items_the_other_systems_added_are_present() {
    let server = TestServer::start(Server::Redis, &[], &[]);
    let mut c = server.conn();
    for (n, case) in cases().iter().enumerate() {
        let key = format!("theirs:{n}");
        let layout = Layout::bitmap_with(&key, case.layout, case.options.clone()).unwrap();
        if let Some((config, fields)) = layout.redisson_config() {
            // Redisson's tryInit writes the config before any bit.
            c.call(&[
                "HSET",
                &config,
                "size",
                &fields[0],
                "hashIterations",
                &fields[1],
                "expectedInsertions",
                &fields[2],
                "falseProbability",
                &fields[3],
            ]);
        }
        for offsets in &case.offsets {
            for o in offsets {
                c.call(&["SETBIT", &key, &o.to_string(), "1"]);
            }
        }
        let mut filter = RedisFilter::new(connect(&server), layout);
        let refs: Vec<&[u8]> = case.items.iter().map(Vec::as_slice).collect();
        assert!(filter.contains_many(&refs).unwrap().iter().all(|&b| b), "{}", case.what);
        // Adding them again sets nothing new and reports nothing new.
        assert!(filter.add_many(&refs).unwrap().iter().all(|&new| !new), "{}", case.what);
    }
}

/// Byte for byte what the Java side left in Redis, item by item, with the
/// same answer to "was it new?" for each add: the RedisBloomFilter pattern
/// and Redisson (whose config hash must also be what its tryInit wrote).
#[test]
fn one_by_one_adds_match_the_java_side_in_redis() {
    let server = TestServer::start(Server::Redis, &[], &[]);
    let mut c = server.conn();
    let mut checked = 0;
    for (doc, layout, items_field) in [
        (fixture("guava-raw-bitmap.json"), BitmapLayout::GuavaUnrounded, "utf8_hex"),
        (fixture("redisson-bloom.json"), BitmapLayout::Redisson, "utf8_hex"),
    ] {
        let items: Vec<Vec<u8>> =
            doc["items"].as_array().unwrap().iter().map(|i| hex(i[items_field].as_str().unwrap())).collect();
        for e2e in doc["redis_end_to_end"]["shapes"].as_array().unwrap() {
            let shape = &e2e["shape"];
            let p: f64 = shape["p"].as_str().unwrap().parse().unwrap();
            let key = e2e.get("key").or(e2e.get("bitmap_key")).unwrap().as_str().unwrap();
            let layout =
                Layout::bitmap_with(key, layout, Options::new(shape["n"].as_u64().unwrap(), p)).unwrap();
            let mut filter = RedisFilter::new(connect(&server), layout);
            let news: Vec<bool> = items.iter().map(|i| filter.add(i).unwrap()).collect();
            let want: Vec<bool> = match e2e.get("any_bit_newly_set_per_item") {
                Some(v) => v.as_array().unwrap().iter().map(|b| b.as_bool().unwrap()).collect(),
                None => u64s(&e2e["add_one_by_one_returns"]).iter().map(|&r| r == 1).collect(),
            };
            assert_eq!(news, want, "{key}");
            let bytes = c.call(&["GET", key]).as_bytes().to_vec();
            match e2e["bitmap_hex"].as_str() {
                Some(want) => assert_eq!(bytes, hex(want), "{key}"),
                // The large shapes are recorded by length and bit count.
                None => {
                    assert_eq!(bytes.len() as u64, e2e["bitmap_strlen"].as_u64().unwrap(), "{key}");
                    assert_eq!(set_bits(&bytes).len() as u64, e2e["bitcount"].as_u64().unwrap(), "{key}");
                }
            }
            if let Some(config) = e2e.get("config_hgetall") {
                let got = c.call(&["HGETALL", e2e["config_key"].as_str().unwrap()]);
                let got: Vec<String> = got
                    .as_array()
                    .iter()
                    .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
                    .collect();
                for (field, value) in config.as_object().unwrap() {
                    let at =
                        got.iter().position(|f| f == field).unwrap_or_else(|| panic!("{field} in {got:?}"));
                    assert_eq!(got[at + 1], value.as_str().unwrap(), "{key} {field}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked}");
}

/// Redisson's config: `reserve` writes its four fields as tryInit does and
/// refuses an existing one; a filter opened with other parameters gets a
/// typed error on add and on lookup, and changes nothing.
#[test]
fn redisson_config_is_written_and_checked() {
    let server = TestServer::start(Server::Redis, &[], &[]);
    let mut c = server.conn();
    let doc = fixture("redisson-bloom.json");
    let e2e = &doc["redis_end_to_end"]["shapes"][1];
    let (n, p) = (e2e["shape"]["n"].as_u64().unwrap(), e2e["shape"]["p"].as_str().unwrap().parse().unwrap());
    let mut made = RedisFilter::new(
        connect(&server),
        Layout::bitmap_with("rbf", BitmapLayout::Redisson, Options::new(n, p)).unwrap(),
    );
    made.reserve().unwrap();
    let want = &e2e["config_hgetall"];
    for field in ["size", "hashIterations", "expectedInsertions", "falseProbability"] {
        let got = c.call(&["HGET", &redisson_config_key("rbf"), field]);
        assert_eq!(got.as_bytes(), want[field].as_str().unwrap().as_bytes(), "{field}");
    }
    assert_eq!(c.call(&["EXISTS", "rbf"]).as_int(), 0, "Redisson never sizes the bitmap ahead");
    assert!(matches!(made.reserve(), Err(Error::AlreadyExists(_))));
    made.add(b"x").unwrap();

    let before = c.call(&["GET", "rbf"]).as_bytes().to_vec();
    let mut other = RedisFilter::new(
        connect(&server),
        Layout::bitmap_with("rbf", BitmapLayout::Redisson, Options::new(n * 10, p)).unwrap(),
    );
    let err = other.add(b"y").unwrap_err();
    assert!(matches!(err, Error::ConfigMismatch(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("config has been changed") && text.contains("size"), "{text}");
    assert!(matches!(other.contains(b"x"), Err(Error::ConfigMismatch(_))));
    assert_eq!(c.call(&["GET", "rbf"]).as_bytes(), before, "a refused add sets nothing");
    assert!(made.contains(b"x").unwrap());

    // A missing filter answers "absent" and a first add creates its config.
    let mut fresh = RedisFilter::new(
        connect(&server),
        Layout::bitmap_with("rbf2", BitmapLayout::Redisson, Options::new(n, p)).unwrap(),
    );
    assert!(!fresh.contains(b"x").unwrap());
    assert_eq!(c.call(&["EXISTS", &redisson_config_key("rbf2")]).as_int(), 0, "a lookup writes nothing");
    assert!(fresh.add(b"x").unwrap());
    assert_eq!(
        c.call(&["HGET", &redisson_config_key("rbf2"), "size"]).as_bytes(),
        want["size"].as_str().unwrap().as_bytes()
    );
    // clear removes both keys, as Redisson's delete does.
    fresh.clear().unwrap();
    assert_eq!(c.call(&["EXISTS", "rbf2", &redisson_config_key("rbf2")]).as_int(), 0);

    // Bits whose config is gone (expired, deleted) are not answered from.
    c.call(&["SETBIT", "orphan", "5", "1"]);
    let mut orphan = RedisFilter::new(
        connect(&server),
        Layout::bitmap_with("orphan", BitmapLayout::Redisson, Options::new(n, p)).unwrap(),
    );
    for result in [orphan.contains(b"x"), orphan.add(b"x")] {
        let err = result.unwrap_err();
        assert!(
            matches!(err, Error::ConfigMismatch(_)) && err.to_string().contains("not initialized"),
            "{err}"
        );
    }
    assert_eq!(c.call(&["EXISTS", &redisson_config_key("orphan")]).as_int(), 0, "nothing written");
}

/// With a TTL, a Redisson filter's bitmap expires with its config: the
/// config's remaining time, whether `reserve` or the first add made it,
/// and never when the Java side made the config without one.
#[test]
fn redisson_keys_expire_together() {
    let server = TestServer::start(Server::Redis, &[], &[]);
    let mut c = server.conn();
    let ttl = std::time::Duration::from_secs(600);
    let pttl = |c: &mut bloomkit_testkit::Conn, k: &str| c.call(&["PTTL", k]).as_int();
    for (key, reserve_first) in [("reserved", true), ("added", false)] {
        let mut f = RedisFilter::new(
            connect(&server),
            Layout::bitmap_with(
                key,
                BitmapLayout::Redisson,
                Options { ttl: Some(ttl), ..Options::new(1000, 0.01) },
            )
            .unwrap(),
        );
        if reserve_first {
            f.reserve().unwrap();
        }
        f.add(b"x").unwrap();
        // The same absolute expiry (PEXPIRETIME: read one after the other,
        // remaining times would differ by the time between the reads).
        let at = |c: &mut bloomkit_testkit::Conn, k: &str| c.call(&["PEXPIRETIME", k]).as_int();
        let (bits, config) = (at(&mut c, key), at(&mut c, &redisson_config_key(key)));
        assert!(config > 0 && pttl(&mut c, &redisson_config_key(key)) <= 600_000, "{key}: config {config}");
        assert!((bits - config).abs() <= 1, "{key}: the bitmap expires at {bits}, its config at {config}");
    }
    // The Java side made the config without a TTL: the bitmap gets none either.
    let layout = Layout::bitmap_with(
        "java",
        BitmapLayout::Redisson,
        Options { ttl: Some(ttl), ..Options::new(1000, 0.01) },
    )
    .unwrap();
    let (config, fields) = layout.redisson_config().unwrap();
    c.call(&["HSET", &config, "size", &fields[0], "hashIterations", &fields[1]]);
    RedisFilter::new(connect(&server), layout).add(b"x").unwrap();
    assert_eq!(pttl(&mut c, "java"), -1);
    assert_eq!(pttl(&mut c, &config), -1);
}

/// Layouts that cannot describe a filter say why.
#[test]
fn impossible_layouts_are_refused() {
    let err = Layout::bitmap_with("k", BitmapLayout::PhpBkdr, Options::new(1000, 0.01)).unwrap_err();
    assert!(err.to_string().contains("--bits"), "{err}");
    let err = Layout::bitmap_with(
        "k",
        BitmapLayout::Redisson,
        Options { max_key_bits: 1 << 20, ..Options::new(1_000_000, 0.01) },
    )
    .unwrap_err();
    assert!(err.to_string().contains("one key"), "{err}");
    assert!(Layout::bitmap_with(
        "k",
        BitmapLayout::GuavaUnrounded,
        Options { shape: Some((1 << 31, 3)), ..Options::new(1, 0.5) }
    )
    .is_err());
}
