//! bloomkit's CMS.* against the real RedisBloom 2.8.2, on two servers of the
//! same redis-server binary: the same random command streams (valid and
//! not) must get byte-identical replies in RESP2 and RESP3 and leave
//! byte-identical DUMP payloads, and sketches must move between them in
//! both directions (DUMP/RESTORE, RDB files).
//!
//! Deliberate differences (README, "Count-Min Sketch") are kept out of the
//! streams: `MEMORY USAGE`, `COPY`, WATCH after `CMS.INCRBY`, damaged RDB
//! values and sizes past `bf.max-filter-bytes` (`cms_hostile.rs`).
//!
//! More seeds: `BLOOMKIT_SEEDS=50 cargo test -p bloomkit-module --test it cms_differential`.

use bloomkit_testkit::oracle::{self, same, Pair};
use bloomkit_testkit::{Conn, Reply, Rng};

const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "str"];
const WIDTHS: &[&str] = &["8", "8", "8", "16", "1", "3", "0", "-1", "x", "07", "9223372036854775807"];
const DEPTHS: &[&str] = &["2", "2", "2", "3", "1", "0", "-2", "y", "4611686018427387904"];
const ERRORS: &[&str] = &["0.1", "0.5", "0.25", "0.01", "0", "1", "x", "-0.5", "inf", "1e-19", "0.999"];
const PROBS: &[&str] = &["0.5", "0.25", "0.03125", "0.1", "1e-7", "0", "1", "nan", "1e-300", "0.9999"];
const INCREMENTS: &[&str] = &[
    "1",
    "1",
    "2",
    "5",
    "0",
    "100",
    "4294967295",
    "4294967296",
    "2147483648",
    "9223372036854775807",
    "-1",
    "x",
    "07",
    "1.5",
];
const WEIGHTS: &[&str] = &["1", "1", "2", "0", "-1", "3", "x", "-5", "9223372036854775807"];

fn item(rng: &mut Rng) -> Vec<u8> {
    oracle::item(rng, 15, &[0, 255, 10, 13], 40)
}

/// One random command, valid or not.
fn command(rng: &mut Rng) -> Vec<Vec<u8>> {
    let word = |s: &str| s.as_bytes().to_vec();
    let key = word(rng.pick(KEYS));
    let mut cmd: Vec<Vec<u8>> = match rng.below(100) {
        0..=9 => vec![word("CMS.INITBYDIM"), key, word(rng.pick(WIDTHS)), word(rng.pick(DEPTHS))],
        10..=14 => vec![word("cms.initbyprob"), key, word(rng.pick(ERRORS)), word(rng.pick(PROBS))],
        15..=49 => {
            let mut c = vec![word("CMS.INCRBY"), key];
            for _ in 0..1 + rng.below(5) {
                c.push(item(rng));
                c.push(word(rng.pick(INCREMENTS)));
            }
            c
        }
        50..=64 => {
            let mut c = vec![word("CMS.QUERY"), key];
            for _ in 0..1 + rng.below(5) {
                c.push(item(rng));
            }
            c
        }
        65..=82 => {
            let n = 1 + rng.below(3);
            let shown = rng.pick(&["1", "2", "3", "0", "-1", "x"]);
            let numkeys = if rng.chance(80) { n.to_string() } else { shown.to_string() };
            let mut c = vec![word("CMS.MERGE"), key, word(&numkeys)];
            for _ in 0..n {
                c.push(word(rng.pick(KEYS)));
            }
            if rng.chance(50) {
                c.push(word(rng.pick(&["WEIGHTS", "weights", "WEIGHT"])));
                let w = if rng.chance(85) { n } else { rng.below(4) };
                for _ in 0..w {
                    c.push(word(rng.pick(WEIGHTS)));
                }
            }
            c
        }
        83..=92 => vec![word("CMS.INFO"), key],
        _ => vec![word("DEL"), key],
    };
    // Now and then a word too few or too many: arity errors.
    if rng.chance(4) {
        cmd.pop();
    } else if rng.chance(3) {
        cmd.push(word("extra"));
    }
    cmd
}

fn dump(c: &mut Conn, key: &str) -> Reply {
    c.call(&["DUMP", key])
}

/// Runs one stream; returns the number of commands compared.
fn run_stream(seed: u64, steps: usize, resp3: bool) -> usize {
    let (_pair, mut rb, mut bk) = oracle::open_stream(resp3, &["SET str x"]);
    let mut rng = Rng(seed);
    let (mut errors, mut overflows, mut merged) = (0, 0, 0);
    for step in 0..steps {
        let cmd = command(&mut rng);
        let context = format!("seed {seed} step {step}");
        let reply = same(&mut rb, &mut bk, &cmd, &context);
        errors += usize::from(reply.is_error());
        if let Reply::Array(items) = &reply {
            overflows += items.iter().filter(|r| r.is_error()).count();
        }
        merged += usize::from(cmd[0] == b"CMS.MERGE" && reply == Reply::Simple("OK".into()));
        if step % 50 == 0 {
            for key in &KEYS[..4] {
                assert_eq!(dump(&mut rb, key), dump(&mut bk, key), "{context}: DUMP of {key}");
            }
        }
    }
    oracle::assert_both_paths(errors, steps, (9, 10));
    assert!(overflows > 0, "the stream saturated counters");
    assert!(merged > 0, "the stream merged sketches");
    for key in KEYS {
        assert_eq!(dump(&mut rb, key), dump(&mut bk, key), "seed {seed}: final DUMP of {key}");
    }
    steps + 1
}

#[test]
fn random_streams_resp2() {
    let compared: usize = oracle::seeds(&[1, 2, 3]).into_iter().map(|s| run_stream(s, 2500, false)).sum();
    bloomkit_testkit::figure(&format!("cms differential RESP2: {compared} commands compared"));
}

#[test]
fn random_streams_resp3() {
    let compared: usize = oracle::seeds(&[11, 12]).into_iter().map(|s| run_stream(s, 2500, true)).sum();
    bloomkit_testkit::figure(&format!("cms differential RESP3: {compared} commands compared"));
}

/// A sketch with saturated cells, a large total and ordinary counts.
fn fill(c: &mut Conn, key: &str) -> Vec<String> {
    c.ok(&format!("CMS.INITBYPROB {key} 0.001 0.01"));
    let items: Vec<String> = (0..2000).map(|i| format!("u{i}")).collect();
    for (n, chunk) in items.chunks(200).enumerate() {
        let mut cmd = vec!["CMS.INCRBY".to_string(), key.to_string()];
        for item in chunk {
            cmd.push(item.clone());
            cmd.push((n + 1).to_string());
        }
        c.call(&cmd);
    }
    c.call(&["CMS.INCRBY", key, "big", "4294967296", "huge", "9223372036854775807"]);
    items
}

fn query(c: &mut Conn, key: &str, items: &[String]) -> Reply {
    let mut cmd = vec!["CMS.QUERY".to_string(), key.to_string()];
    cmd.extend(items.iter().cloned());
    c.call(&cmd)
}

#[test]
fn dump_restore_both_directions() {
    Pair::start().in_both_directions(|from, to, name| {
        let mut items = fill(from, "src");
        items.extend((0..500).map(|i| format!("never{i}")));
        items.push("big".into());
        let payload = oracle::dump_and_restore(from, to, "src", "dst", name);
        assert_eq!(query(to, "dst", &items), query(from, "src", &items), "{name}: CMS.QUERY");
        assert_eq!(to.call(&["CMS.INFO", "dst"]), from.call(&["CMS.INFO", "src"]), "{name}: CMS.INFO");
        assert_eq!(to.call(&["DUMP", "dst"]).as_bytes(), payload.as_slice(), "{name}: DUMP again");
        // Both keep working the same after the move.
        let more = ["x", "3", "u5", "4294967295", "u7", "1"];
        let a = from.call(&[&["CMS.INCRBY", "src"][..], &more].concat());
        let b = to.call(&[&["CMS.INCRBY", "dst"][..], &more].concat());
        assert_eq!(a, b, "{name}");
        from.ok("CMS.INITBYPROB other 0.001 0.01");
        to.ok("CMS.INITBYPROB other 0.001 0.01");
        let a = from.call(&["CMS.MERGE", "other", "2", "src", "src", "WEIGHTS", "1", "-1"]);
        let b = to.call(&["CMS.MERGE", "other", "2", "dst", "dst", "WEIGHTS", "1", "-1"]);
        assert_eq!(a, b, "{name}: MERGE");
        assert_eq!(from.call(&["DUMP", "src"]), to.call(&["DUMP", "dst"]), "{name}: after more writes");
        assert_eq!(from.call(&["DUMP", "other"]), to.call(&["DUMP", "other"]), "{name}: merged");
    });
}

/// An RDB file written by RedisBloom loads into bloomkit and is served identically.
#[test]
fn redisbloom_rdb_file_loads() {
    let (rb, bk, items) = oracle::redisbloom_rdb_in_bloomkit(|r| {
        let mut items = fill(r, "cms");
        items.push("huge".into());
        r.ok("CMS.INITBYDIM small 1 1");
        r.ok("CMS.INCRBY small a 7");
        items
    });
    let (mut r, mut b) = (rb.conn(), bk.conn());
    assert_eq!(b.cmd("DBSIZE"), Reply::Int(2));
    assert_eq!(query(&mut b, "cms", &items), query(&mut r, "cms", &items));
    for key in ["cms", "small"] {
        assert_eq!(b.call(&["DUMP", key]), r.call(&["DUMP", key]), "{key}");
        assert_eq!(b.call(&["CMS.INFO", key]), r.call(&["CMS.INFO", key]), "{key}");
    }
}
