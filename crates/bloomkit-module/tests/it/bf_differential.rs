//! bloomkit against the real RedisBloom 2.8.2, on two servers of the same
//! redis-server binary: the same command streams must get byte-identical
//! replies, and data must move between them in both directions.
//!
//! Deliberate differences (README, "Compatibility") are kept out of the
//! generated streams and tested on their own in `commands.rs`.

use bloomkit_testkit::oracle::{self, same, Pair};
use bloomkit_testkit::{Conn, Reply, Rng, Server, TestServer};

const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "str"];
const ERROR_RATES: &[&str] = &[
    "0.01", "0.1", "0.001", "0.5", "0.05", "1e-3", "0", "1", "-1", "abc", "inf", "nan", "0x10", " 0.1",
    "0.3", "4.9e-324",
];
const CAPACITIES: &[&str] = &["1", "2", "5", "10", "50", "100", "0", "-3", "x", "1.5", "007", "+7", "3"];
const EXPANSIONS: &[&str] = &["1", "2", "3", "4", "0", "-1", "x", "10"];
const INFO_FIELDS: &[&str] =
    &["CAPACITY", "size", "Filters", "ITEMS", "expansion", "capacityX", "cap", "bogus", ""];

fn item(rng: &mut Rng) -> Vec<u8> {
    oracle::item(rng, 10, &[0, 255, 10, 13], 60)
}

/// One random command, valid or not.
fn command(rng: &mut Rng) -> Vec<Vec<u8>> {
    let key = rng.pick(KEYS).as_bytes().to_vec();
    let words = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    let mut cmd: Vec<Vec<u8>>;
    match rng.below(100) {
        0..=9 => {
            cmd = words(&["BF.RESERVE"]);
            cmd.push(key);
            cmd.push(rng.pick(ERROR_RATES).into());
            cmd.push(rng.pick(CAPACITIES).into());
            push_reserve_options(rng, &mut cmd);
        }
        10..=29 => {
            cmd = words(&["BF.ADD"]);
            cmd.push(key);
            for _ in 0..[1, 1, 1, 1, 0, 2][rng.below(6)] {
                cmd.push(item(rng));
            }
        }
        30..=44 => {
            cmd = words(&["BF.MADD"]);
            cmd.push(key);
            push_items(rng, &mut cmd, 8);
        }
        45..=59 => {
            cmd = words(&["BF.INSERT"]);
            cmd.push(key);
            push_insert_options(rng, &mut cmd);
            if rng.chance(90) {
                cmd.push(rng.pick(&["ITEMS", "items", "Ifoo"]).into());
            }
            push_items(rng, &mut cmd, 6);
        }
        60..=69 => {
            cmd = words(&[rng.pick(&["BF.EXISTS", "BF.MEXISTS"])]);
            cmd.push(key);
            push_items(rng, &mut cmd, 5);
        }
        70..=77 => {
            cmd = words(&["BF.INFO"]);
            cmd.push(key);
            if rng.chance(60) {
                cmd.push(rng.pick(INFO_FIELDS).into());
            }
            if rng.chance(5) {
                cmd.push(b"extra".to_vec());
            }
        }
        78..=81 => {
            cmd = words(&[rng.pick(&["BF.CARD", "BF.DEBUG"])]);
            cmd.push(key);
            if rng.chance(5) {
                cmd.push(b"extra".to_vec());
            }
        }
        82..=89 => {
            cmd = words(&["BF.SCANDUMP"]);
            cmd.push(key);
            cmd.push(
                rng.pick(&["0", "1", "2", "9", "17", "100", "145", "-1", "x", "99999999999999999999"]).into(),
            );
        }
        90..=95 => {
            cmd = words(&["BF.LOADCHUNK"]);
            cmd.push(key);
            cmd.push(rng.pick(&["0", "1", "3", "5", "9", "-2", "x", "100", "1000"]).into());
            let len = rng.below(6);
            cmd.push((0..len).map(|_| rng.next() as u8).collect());
        }
        _ => {
            cmd = words(&["DEL"]);
            cmd.push(key);
        }
    }
    cmd
}

/// Up to `below - 1` random items (the count drawn first).
fn push_items(rng: &mut Rng, cmd: &mut Vec<Vec<u8>>, below: usize) {
    for _ in 0..rng.below(below) {
        cmd.push(item(rng));
    }
}

/// BF.RESERVE's options after the capacity, valid or not: up to four,
/// EXPANSION mostly with a value. Apart from [`command`] so that it reads
/// on one screen; the random draws are in the same order.
fn push_reserve_options(rng: &mut Rng, cmd: &mut Vec<Vec<u8>>) {
    for _ in 0..rng.below(5) {
        let w = rng.pick(&["EXPANSION", "NONSCALING", "expansion", "nonscaling", "foo", "EXPANSIONX"]);
        cmd.push(w.into());
        if w.eq_ignore_ascii_case("expansion") && rng.chance(80) {
            cmd.push(rng.pick(EXPANSIONS).into());
        }
    }
}

/// BF.INSERT's options before ITEMS, valid or not (misspelt and
/// abbreviated names too), each with a value where its first letters
/// ask for one. Apart from [`command`], same random draws in the same order.
fn push_insert_options(rng: &mut Rng, cmd: &mut Vec<Vec<u8>>) {
    for _ in 0..rng.below(4) {
        let w = rng.pick(&[
            "CAPACITY",
            "ERROR",
            "EXPANSION",
            "NOCREATE",
            "NONSCALING",
            "Cx",
            "ERR",
            "E",
            "N",
            "NOPE",
            "X",
            "",
            "cap",
            "Ezz",
        ]);
        cmd.push(w.into());
        let first = w.as_bytes().first().map(u8::to_ascii_lowercase);
        if matches!(first, Some(b'c')) {
            cmd.push(rng.pick(CAPACITIES).into());
        } else if matches!(first, Some(b'e')) {
            let value = if w.len() > 1 && w.as_bytes()[1].eq_ignore_ascii_case(&b'r') {
                rng.pick(ERROR_RATES)
            } else {
                rng.pick(EXPANSIONS)
            };
            cmd.push(value.into());
        }
    }
}

fn run_stream(seed: u64, steps: usize, resp3: bool) {
    let (_pair, mut rb, mut bk) = oracle::open_stream(resp3, &["SET str x"]);
    let mut rng = Rng(seed);
    let mut errors = 0;
    for step in 0..steps {
        let cmd = command(&mut rng);
        let reply = same(&mut rb, &mut bk, &cmd, &format!("seed {seed} step {step}"));
        errors += usize::from(reply.is_error());
        // Now and then, move a filter through SCANDUMP/LOADCHUNK on both sides.
        if step % 97 == 0 {
            let from = KEYS[rng.below(4)];
            if let Some(chunks) = bk.scandump(from) {
                assert_eq!(rb.scandump(from), Some(chunks.clone()), "seed {seed}: SCANDUMP of {from}");
                // The header comes first, under iterator 1.
                let (to, context) = (format!("copy{step}"), format!("seed {seed} step {step}"));
                oracle::load_chunks_on_both(&mut rb, &mut bk, "BF.LOADCHUNK", &to, chunks, &context);
            }
        }
    }
    oracle::assert_both_paths(errors, steps, (9, 10));
    // The final states agree byte for byte.
    for key in KEYS {
        assert_eq!(rb.scandump(key), bk.scandump(key), "seed {seed}: final state of {key}");
    }
}

bloomkit_testkit::random_streams!(run_stream, 2500, resp2: [1, 2, 3], resp3: [11, 12]);

/// Fills a scaled filter with the same items on a server.
fn fill(c: &mut Conn, key: &str) -> Vec<String> {
    c.ok(&format!("BF.RESERVE {key} 0.01 100 EXPANSION 2"));
    let items: Vec<String> = (0..1500).map(|i| format!("u{i}")).collect();
    let mut cmd = vec!["BF.MADD".to_string(), key.to_string()];
    cmd.extend(items.iter().cloned());
    c.call(&cmd);
    items
}

fn assert_all_present(c: &mut Conn, key: &str, items: &[String]) {
    let mut cmd = vec!["BF.MEXISTS".to_string(), key.to_string()];
    cmd.extend(items.iter().cloned());
    let reply = c.call(&cmd);
    assert!(reply.as_array().iter().all(|r| r.as_int() == 1), "every item present in {key}");
}

#[test]
fn dump_restore_both_directions() {
    Pair::start().in_both_directions(|from, to, name| {
        let items = fill(from, "src");
        oracle::dump_and_restore(from, to, "src", "dst", name);
        assert_all_present(to, "dst", &items);
        assert_eq!(from.scandump("src"), to.scandump("dst"), "{name}: identical filter");
        assert_eq!(from.call(&["BF.INFO", "src"]), to.call(&["BF.INFO", "dst"]), "{name}");
    });
}

#[test]
fn scandump_loadchunk_both_directions() {
    Pair::start().in_both_directions(|from, to, name| {
        let items = fill(from, "src");
        let chunks = from.scandump("src").unwrap();
        to.loadchunks("dst", &chunks);
        assert_all_present(to, "dst", &items);
        assert_eq!(to.scandump("dst"), Some(chunks), "{name}");
        // Both keep working the same after the move.
        let more: Vec<Vec<u8>> =
            ["BF.MADD", "dst", "new1", "new2", "u5"].iter().map(|s| s.as_bytes().to_vec()).collect();
        assert_eq!(to.call(&more), from.call(&["BF.MADD", "src", "new1", "new2", "u5"]), "{name}");
    });
}

/// The DUMP payloads captured from RedisBloom 2.8.2 restore into bloomkit as
/// the filters they were.
#[test]
fn captured_dump_payloads_restore() {
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("../../../bloomkit-core/tests/fixtures/redisbloom-2.8.2.json"))
            .unwrap();
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    for case in doc["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let key = case["key"].as_str().unwrap();
        let payload = hex::decode(case["dump_payload_hex"].as_str().unwrap()).unwrap();
        let reply = c.call(&[b"RESTORE".to_vec(), key.as_bytes().to_vec(), b"0".to_vec(), payload]);
        assert_eq!(reply, Reply::Simple("OK".into()), "{name}");
        let items: Vec<Vec<u8>> = case["items_hex"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| hex::decode(h.as_str().unwrap()).unwrap())
            .collect();
        for item in &items {
            assert_eq!(
                c.call(&[b"BF.EXISTS".to_vec(), key.as_bytes().to_vec(), item.clone()]),
                Reply::Int(1),
                "{name}"
            );
        }
        let expected_debug: Vec<Reply> = case["debug"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| Reply::Bulk(l.as_str().unwrap().as_bytes().to_vec()))
            .collect();
        assert_eq!(c.call(&["BF.DEBUG", key]), Reply::Array(expected_debug), "{name}");
        // RedisBloom's MEMORY USAGE is its `Size` formula; bloomkit's, what
        // the filter and key really take (tests/it/memory.rs), never less.
        let (ours, theirs) =
            (c.call(&["MEMORY", "USAGE", key]).as_int(), case["memory_usage"].as_i64().unwrap());
        assert!(
            ours >= theirs && ours <= theirs + theirs / 4 + 128,
            "{name}: MEMORY USAGE {ours}, RedisBloom {theirs}"
        );
        let chunks = c.scandump(key).unwrap();
        let expected: Vec<(i64, Vec<u8>)> = case["scandump"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["iter"].as_i64().unwrap(), hex::decode(c["hex"].as_str().unwrap()).unwrap()))
            .filter(|(iter, _)| *iter != 0)
            .collect();
        assert_eq!(chunks, expected, "{name}: SCANDUMP after RESTORE");
    }
}
