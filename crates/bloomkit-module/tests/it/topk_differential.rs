//! bloomkit's TOPK.* against the real RedisBloom 2.8.2, on two servers of
//! the same redis-server binary: the same command streams must get
//! byte-identical replies and leave the same DUMP fields (RedisBloom's
//! pointer bytes aside), and sketches must move between them in both
//! directions (DUMP/RESTORE, RDB files).
//!
//! RedisBloom decays colliding buckets with `rand()`, bloomkit with draws
//! decided by the sketch (README, "Top-K"). So the exact streams use decay
//! 1 (every draw decays), or a width where the items never collide; decay
//! 0.9 on colliding buckets is compared statistically. Deliberate
//! differences (items with NUL bytes, `TOPK.INCRBY`'s array length after a
//! bad increment that is not last, `k` above 2^32 - 1) are kept out of the
//! streams and tested in `topk_hostile.rs`.

use crate::topk_support;

use bloomkit_core::common::hash::murmur2_32;
use bloomkit_testkit::oracle::{self, same, Pair};
use bloomkit_testkit::{Conn, Reply, Rng};
use topk_support::{add_cmd, answers, fields, incrby_cmd, pool};

/// Keys reserved with decay 1 (any shape), the wide key whose items never
/// collide (decay 0.8), the key made with the defaults (decay 0.9, width 8)
/// that only ever sees one item, and a string.
const KEYS: &[&str] = &["k0", "k1", "k2", "wide", "solo", "str"];
const POOL: usize = 24;

/// The wide key's width: one where no two pool items share a bucket in any
/// of its 3 rows; 100 000 under `BLOOMKIT_LONG_TESTS=1`, where each
/// comparison of its DUMP fields (a 2.4 MB sketch) takes a tenth of a second.
fn wide_width() -> u32 {
    bloomkit_testkit::lean_or_long(448, 100_000)
}

/// A small pool: heaps fill, buckets collide, items come back.
fn item(rng: &mut Rng) -> Vec<u8> {
    oracle::item(rng, 20, &[255, 10, 13, 1], POOL)
}

fn word(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// One random command, valid or not.
fn command(rng: &mut Rng) -> Vec<Vec<u8>> {
    let key = rng.pick(KEYS);
    let mut cmd: Vec<Vec<u8>>;
    match rng.below(100) {
        0..=7 => {
            cmd = reserve(rng, key);
        }
        8..=39 => {
            cmd = vec![word(rng.pick(&["TOPK.ADD", "topk.add"])), word(key)];
            for _ in 0..[1, 1, 2, 3, 5, 0, 8][rng.below(7)] {
                cmd.push(item(rng));
            }
        }
        40..=59 => {
            cmd = vec![word("TOPK.INCRBY"), word(key)];
            let pairs = [1, 1, 2, 3, 4, 0][rng.below(6)];
            for p in 0..pairs {
                cmd.push(item(rng));
                // A bad increment only last: RedisBloom 2.8.2 breaks the
                // protocol otherwise (topk_hostile.rs).
                let last = p + 1 == pairs;
                let n = if last && rng.chance(15) {
                    rng.pick(&["100001", "-1", "x", "1.5", "", "+3"])
                } else {
                    rng.pick(&["1", "1", "2", "3", "5", "0", "10", "100", "1000", "100000"])
                };
                cmd.push(word(n));
            }
            if rng.chance(5) {
                cmd.push(item(rng)); // an odd count
            }
        }
        60..=74 => {
            cmd = vec![word(rng.pick(&["TOPK.QUERY", "TOPK.COUNT"])), word(key)];
            for _ in 0..[1, 2, 4, 8, 0][rng.below(5)] {
                cmd.push(item(rng));
            }
        }
        75..=88 => {
            cmd = vec![word("TOPK.LIST"), word(key)];
            if rng.chance(60) {
                cmd.push(word(rng.pick(&[
                    "WITHCOUNT",
                    "withcount",
                    "with",
                    "",
                    "W",
                    "x",
                    "WITHCOUNTS",
                    "count",
                ])));
            }
            if rng.chance(5) {
                cmd.push(word("extra"));
            }
        }
        89..=95 => {
            cmd = vec![word("TOPK.INFO"), word(key)];
            if rng.chance(10) {
                cmd.push(word("extra"));
            }
        }
        _ => {
            // The decay-1 keys come and go; the others stay.
            let k = rng.pick(&["k0", "k1", "k2"]);
            cmd = vec![word("DEL"), word(k)];
        }
    }
    cmd
}

/// A TOPK.RESERVE, valid or not, with none to all four of its
/// arguments. Apart from [`command`] so that it reads on one screen;
/// the random draws are in the same order.
fn reserve(rng: &mut Rng, key: &str) -> Vec<Vec<u8>> {
    let mut cmd = vec![word("TOPK.RESERVE"), word(key)];
    let k = rng.pick(&["1", "2", "3", "5", "10", "0", "-1", "x", "07", "4294967295"]);
    let width = rng.pick(&["1", "2", "3", "8", "30", "0", "x", "4294967296"]);
    let depth = rng.pick(&["1", "2", "4", "7", "0", "-2", "4294967296"]);
    let decay = rng.pick(&["1", "1.0", "1e0", "0", "-0.5", "1.5", "x", "inf", "nan", "0.9"]);
    // k = 2^32 - 1 only with a width that is refused: no 100 GB sketch.
    let width = if k == "4294967295" { "0" } else { width };
    match rng.below(10) {
        0 => {}
        1 => cmd.push(word(if k == "4294967295" { "0" } else { k })),
        2 => cmd.extend([k, "8", "3"].map(word)),
        _ => cmd.extend([k, width, depth, decay].map(word)),
    }
    // A valid RESERVE with a decay below 1 (0.9, or the defaults)
    // goes to a key that exists and refuses it: only `wide` and
    // `solo`, made by `setup`, have such decays.
    let below_one = (cmd.len() == 6 && decay == "0.9") || cmd.len() == 3;
    if below_one {
        cmd[1] = word("str");
    }
    cmd
}

fn run_stream(seed: u64, steps: usize, resp3: bool) -> (usize, usize) {
    let wide = format!("TOPK.RESERVE wide 6 {} 3 0.8", wide_width());
    let (_pair, mut rb, mut bk) = oracle::open_stream(resp3, &["SET str x", &wide, "TOPK.RESERVE solo 3"]);
    let mut rng = Rng(seed);
    let (mut errors, mut expelled) = (0, 0);
    for step in 0..steps {
        let mut cmd = command(&mut rng);
        if cmd[1] == b"solo" && (cmd[0].eq_ignore_ascii_case(b"TOPK.ADD") || cmd[0] == b"TOPK.INCRBY") {
            let incr = cmd[0] == b"TOPK.INCRBY";
            for (i, arg) in cmd.iter_mut().enumerate().skip(2) {
                if !incr || i % 2 == 0 {
                    *arg = word("only");
                }
            }
        }
        let context = format!("seed {seed} step {step}");
        let reply = same(&mut rb, &mut bk, &cmd, &context);
        errors += usize::from(reply.is_error());
        if let Reply::Array(items) = &reply {
            if cmd[0].eq_ignore_ascii_case(b"TOPK.ADD") || cmd[0] == b"TOPK.INCRBY" {
                expelled += items.iter().filter(|r| matches!(r, Reply::Bulk(_))).count();
            }
        }
        if step % 97 == 0 {
            for key in &KEYS[..5] {
                assert_eq!(fields(&mut rb, key), fields(&mut bk, key), "{context}: DUMP fields of {key}");
            }
        }
    }
    for key in KEYS {
        assert_eq!(fields(&mut rb, key), fields(&mut bk, key), "seed {seed}: final DUMP fields of {key}");
        assert_eq!(rb.call(&["TYPE", key]), bk.call(&["TYPE", key]));
    }
    (errors, expelled)
}

#[test]
fn the_wide_keys_items_never_collide() {
    // What makes the decay-0.8 key exact: no two pool items share a bucket.
    let mut items = pool(POOL);
    items.push(Vec::new());
    items.push(vec![255, 10, 13, 1]);
    for width in [448, 100_000] {
        for row in 0..3 {
            let mut cols: Vec<u32> = items.iter().map(|i| murmur2_32(i, row) % width).collect();
            cols.sort_unstable();
            cols.dedup();
            assert_eq!(cols.len(), items.len(), "width {width}, row {row}");
        }
    }
}

fn check_stream_counts(steps: usize, (errors, expelled): (usize, usize)) {
    oracle::assert_both_paths(errors, steps, (9, 10));
    assert!(expelled > 20, "the stream expelled items from heaps ({expelled})");
}

#[test]
fn random_streams_resp2() {
    for seed in oracle::seeds(&[1, 2]) {
        check_stream_counts(2500, run_stream(seed, 2500, false));
    }
}

#[test]
fn random_streams_resp3() {
    for seed in oracle::seeds(&[11]) {
        check_stream_counts(2500, run_stream(seed, 2500, true));
    }
}

/// Fills a sketch with decay 1 and many collisions; returns the items.
fn fill(c: &mut Conn, key: &str) -> Vec<Vec<u8>> {
    c.ok(&format!("TOPK.RESERVE {key} 10 12 4 1"));
    let items = pool(60);
    let mut rng = Rng(7);
    for _ in 0..40 {
        let batch: Vec<Vec<u8>> = (0..25).map(|_| items[rng.below(60).min(rng.below(60))].clone()).collect();
        assert!(!c.call(&add_cmd(key, &batch)).is_error());
    }
    let pairs: Vec<(Vec<u8>, u32)> = (0..10).map(|i| (items[i * 3].clone(), 3 + i as u32 * 7)).collect();
    assert!(!c.call(&incrby_cmd(key, &pairs)).is_error());
    items
}

#[test]
fn dump_restore_both_directions() {
    Pair::start().in_both_directions(|from, to, name| {
        let items = fill(from, "src");
        oracle::dump_and_restore(from, to, "src", "dst", name);
        assert_eq!(answers(to, "dst", &items), answers(from, "src", &items), "{name}: every answer");
        assert_eq!(fields(to, "dst"), fields(from, "src"), "{name}: fields");
    });
}

/// RedisBloom 2.8.2 leaves the decay table zero after a load, so its
/// restored copy never decays again; bloomkit's does, as the original does.
#[test]
fn a_restored_sketch_keeps_decaying_like_the_original() {
    let pair = Pair::start();
    let (mut rb, mut bk) = pair.conns();
    let items = fill(&mut rb, "src");
    let payload = rb.call(&["DUMP", "src"]).as_bytes().to_vec();
    bk.ok("SELECT 0");
    assert!(!bk.call(&[b"RESTORE".to_vec(), b"src".to_vec(), b"0".to_vec(), payload]).is_error());
    let mut rng = Rng(99);
    for step in 0..200 {
        let batch: Vec<Vec<u8>> = (0..5).map(|_| items[rng.below(60)].clone()).collect();
        same(&mut rb, &mut bk, &add_cmd("src", &batch), &format!("step {step}"));
    }
    assert_eq!(answers(&mut bk, "src", &items), answers(&mut rb, "src", &items));
    assert_eq!(fields(&mut bk, "src"), fields(&mut rb, "src"));
}

/// An RDB file written by RedisBloom loads into bloomkit and is served
/// identically.
#[test]
fn redisbloom_rdb_file_loads() {
    let (rb, bk, items) = oracle::redisbloom_rdb_in_bloomkit(|r| {
        let items = fill(r, "tk");
        r.ok("TOPK.RESERVE tk-default 3");
        r.ok("TOPK.ADD tk-default a");
        r.ok("TOPK.RESERVE tk-empty 4 8 2 0.5");
        r.ok("TOPK.RESERVE tk-blank 2 8 2 1");
        r.call(&[&b"TOPK.ADD"[..], b"tk-blank", b""]);
        items
    });
    let (mut r, mut b) = (rb.conn(), bk.conn());
    assert_eq!(b.cmd("DBSIZE"), Reply::Int(4));
    assert_eq!(answers(&mut b, "tk", &items), answers(&mut r, "tk", &items));
    for key in ["tk", "tk-default", "tk-empty", "tk-blank"] {
        assert_eq!(fields(&mut b, key), fields(&mut r, key), "{key}");
        assert!(!b.call(&["DEBUG", "DIGEST-VALUE", key]).is_error(), "{key}");
    }
    // The empty-string item is still one (2.8.2 itself would list it as nil
    // after a reload).
    assert_eq!(b.cmd("TOPK.LIST tk-blank"), Reply::Array(vec![Reply::Bulk(Vec::new())]));
}

/// Decay 0.9 on a skewed stream with many collisions: the draws differ, the
/// findings must not. Both find the same heavy hitters, with counts close
/// to the truth.
#[test]
fn decay_below_one_finds_the_same_heavy_hitters() {
    let pair = Pair::start();
    let (mut rb, mut bk) = pair.conns();
    let heavy: [(&str, usize); 5] = [("h0", 3000), ("h1", 2000), ("h2", 1400), ("h3", 1000), ("h4", 700)];
    let mut stream: Vec<Vec<u8>> = Vec::new();
    for (item, n) in heavy {
        stream.extend(std::iter::repeat_n(item.as_bytes().to_vec(), n));
    }
    let mut rng = Rng(5);
    for _ in 0..12_000 {
        stream.push(format!("t{}", rng.below(4000)).into_bytes());
    }
    for i in (1..stream.len()).rev() {
        stream.swap(i, rng.below(i + 1));
    }
    for c in [&mut rb, &mut bk] {
        c.ok("TOPK.RESERVE hh 10 64 4 0.9");
        for batch in stream.chunks(200) {
            assert!(!c.call(&add_cmd("hh", batch)).is_error());
        }
    }
    for (name, c) in [("RedisBloom", &mut rb), ("bloomkit", &mut bk)] {
        let list = c.cmd("TOPK.LIST hh WITHCOUNT");
        let list = list.as_array();
        let top: Vec<(String, i64)> = list
            .chunks(2)
            .take(5)
            .map(|p| (String::from_utf8_lossy(p[0].as_bytes()).into_owned(), p[1].as_int()))
            .collect();
        for (i, (item, truth)) in heavy.iter().enumerate() {
            assert_eq!(top[i].0, *item, "{name}: rank {i} in {top:?}");
            let count = top[i].1 as f64;
            assert!(
                (count - *truth as f64).abs() <= 0.1 * *truth as f64,
                "{name}: {item} counted {count}, truly {truth}"
            );
        }
    }
}
