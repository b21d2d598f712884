//! bloomkit's TDIGEST.* against the real RedisBloom 2.8.2, on two servers of
//! the same redis-server binary: the same command streams must get
//! byte-identical replies (every double printed by the server from the same
//! bits) and leave byte-identical DUMP payloads, and digests must move
//! between them in both directions (DUMP/RESTORE, RDB files).
//!
//! One deliberate difference (README, "t-digest"): a digest of exactly one
//! observation answers with that value where 2.8.2 answers NaN, and saves
//! it as a centroid. While a key holds one observation its estimates, INFO
//! and DUMP are not compared here; `single_observation_is_answered` checks
//! bloomkit's answers, and the streams check that the two agree again once
//! more values arrive.
//!
//! `BLOOMKIT_SEEDS=n` runs n seeds per protocol instead of the default few
//! (`bloomkit_testkit::oracle::seeds`).

use bloomkit_testkit::oracle::{self, same, show, Pair};
use bloomkit_testkit::{Conn, Reply, Rng};

const KEYS: &[&str] = &["t0", "t1", "t2", "t3", "str"];
const COMPRESSIONS: &[&str] = &["1", "2", "3", "5", "10", "20", "100", "0", "-1", "x", "1.5", "007", "300"];

fn value(rng: &mut Rng) -> String {
    match rng.below(100) {
        0 => rng.pick(&["nan", "inf", "-inf", "x", "", "1e400"]).to_string(),
        1 => rng.pick(&["1e300", "-1e300", "0.1", "-0", "1e-300", "0x10"]).to_string(),
        2..=15 => format!("{}", rng.below(1000) as f64 / 7.0),
        16..=22 => format!("-{}", rng.below(30)),
        // A small pool: duplicates, which merge into weighted centroids.
        _ => format!("{}", rng.below(40)),
    }
}

fn fraction(rng: &mut Rng) -> String {
    match rng.below(20) {
        0 => rng.pick(&["-0.1", "1.1", "x", "nan", "inf"]).to_string(),
        1 => rng.pick(&["0", "1", "0.5"]).to_string(),
        _ => format!("{}", rng.below(1001) as f64 / 1000.0),
    }
}

fn rank(rng: &mut Rng) -> String {
    match rng.below(20) {
        0 => rng.pick(&["-1", "x", "1.5", "9223372036854775807"]).to_string(),
        _ => rng.below(120).to_string(),
    }
}

/// One random command, valid or not; the keys it reads or writes.
fn command(rng: &mut Rng) -> Vec<Vec<u8>> {
    let key = rng.pick(KEYS).to_string();
    let mut cmd: Vec<String>;
    let many = |rng: &mut Rng, f: fn(&mut Rng) -> String, cmd: &mut Vec<String>| {
        for _ in 0..[1, 1, 2, 3, 5, 0][rng.below(6)] {
            cmd.push(f(rng));
        }
    };
    match rng.below(101) {
        0..=7 => {
            cmd = vec!["TDIGEST.CREATE".into(), key];
            match rng.below(10) {
                0 => {}
                1 => cmd.extend([rng.pick(COMPRESSIONS).to_string(), "COMPRESSION".into()]),
                2 => cmd.push("COMPRESSION".into()),
                3 => cmd.extend(["foo".into(), rng.pick(COMPRESSIONS).to_string()]),
                _ => cmd.extend([
                    rng.pick(&["COMPRESSION", "compression"]).into(),
                    rng.pick(COMPRESSIONS).into(),
                ]),
            }
        }
        8..=37 => {
            cmd = vec![rng.pick(&["TDIGEST.ADD", "tdigest.add"]).into(), key];
            for _ in 0..[1, 2, 3, 5, 8, 13, 0][rng.below(7)] {
                cmd.push(value(rng));
            }
        }
        38..=39 => cmd = vec!["TDIGEST.RESET".into(), key],
        40..=47 => {
            cmd = vec!["TDIGEST.MERGE".into(), key];
            push_merge_args(rng, &mut cmd);
        }
        48..=52 => cmd = vec![rng.pick(&["TDIGEST.MIN", "TDIGEST.MAX"]).into(), key],
        53..=62 => {
            cmd = vec!["TDIGEST.QUANTILE".into(), key];
            many(rng, fraction, &mut cmd);
        }
        63..=70 => {
            cmd = vec!["TDIGEST.CDF".into(), key];
            many(rng, value, &mut cmd);
        }
        71..=76 => {
            cmd = vec!["TDIGEST.TRIMMED_MEAN".into(), key];
            for _ in 0..[2, 2, 2, 1, 3][rng.below(5)] {
                cmd.push(fraction(rng));
            }
        }
        77..=84 => {
            cmd = vec![rng.pick(&["TDIGEST.RANK", "TDIGEST.REVRANK"]).into(), key];
            many(rng, value, &mut cmd);
        }
        85..=91 => {
            cmd = vec![rng.pick(&["TDIGEST.BYRANK", "TDIGEST.BYREVRANK"]).into(), key];
            many(rng, rank, &mut cmd);
        }
        92..=96 => {
            cmd = vec!["TDIGEST.INFO".into(), key];
            if rng.chance(5) {
                cmd.push("extra".into());
            }
        }
        97..=99 => {
            // Recreate: DEL then CREATE with a small compression (full buffers, many merges).
            cmd = vec!["TDIGEST.CREATE".into(), key, "COMPRESSION".into(), rng.pick(&["1", "2", "5"]).into()];
        }
        _ => cmd = vec!["DEL".into(), key],
    }
    cmd.into_iter().map(String::into_bytes).collect()
}

/// TDIGEST.MERGE's arguments after the destination, valid or not: the
/// source count (sometimes wrong), the sources, then options. Apart from
/// [`command`] so that it reads on one screen; same random draws in the same order.
fn push_merge_args(rng: &mut Rng, cmd: &mut Vec<String>) {
    let n = [1, 1, 2, 3, 0][rng.below(5)];
    cmd.push(if rng.chance(5) { rng.pick(&["x", "-1", "5"]).into() } else { n.to_string() });
    for _ in 0..n {
        cmd.push(rng.pick(KEYS).into());
    }
    for _ in 0..rng.below(3) {
        match rng.below(6) {
            0..=2 => cmd.extend(["COMPRESSION".into(), rng.pick(COMPRESSIONS).into()]),
            3 => cmd.push("OVERRIDE".into()),
            4 => cmd.push("override".into()),
            _ => cmd.push("foo".into()),
        }
    }
}

/// Field `i` (0-based) of a key's TDIGEST.INFO (0 for anything but a digest).
fn info(c: &mut Conn, key: &[u8], i: usize) -> i64 {
    field_of(&c.call(&[b"TDIGEST.INFO".to_vec(), key.to_vec()]), i)
}

/// Field `i` (0-based) of a TDIGEST.INFO reply (0 for an error).
fn field_of(reply: &Reply, i: usize) -> i64 {
    match reply {
        Reply::Array(a) => a[2 * i + 1].as_int(),
        Reply::Map(m) => m[i].1.as_int(),
        _ => 0,
    }
}

/// Observations in a key as bloomkit counts them (0 for anything but a digest).
fn observations(c: &mut Conn, key: &[u8]) -> i64 {
    info(c, key, 6)
}

/// [`observations`] from a TDIGEST.INFO reply.
fn observations_in(reply: &Reply) -> i64 {
    field_of(reply, 6)
}

/// Whether `cmd`'s reply may differ because a key it reads holds exactly one
/// observation (the deliberate difference).
fn one_observation_involved(bk: &mut Conn, cmd: &[Vec<u8>]) -> bool {
    let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
    let estimates =
        ["TDIGEST.QUANTILE", "TDIGEST.CDF", "TDIGEST.TRIMMED_MEAN", "TDIGEST.RANK", "TDIGEST.REVRANK"];
    cmd.len() > 1 && estimates.contains(&name.as_str()) && observations(bk, &cmd[1]) == 1
}

fn dump(c: &mut Conn, key: &str) -> Reply {
    c.call(&["DUMP", key])
}

/// Runs one stream; returns (commands compared, errors).
fn run_stream(seed: u64, steps: usize, resp3: bool) -> (usize, usize) {
    let (_pair, mut rb, mut bk) = oracle::open_stream(resp3, &["SET str x"]);
    let mut rng = Rng(seed);
    let (mut compared, mut errors, mut doubles, mut merged_weighted) = (0, 0, 0, 0);
    for step in 0..steps {
        let cmd = command(&mut rng);
        let context = format!("seed {seed} step {step}");

        if one_observation_involved(&mut bk, &cmd) {
            let a = rb.call(&cmd);
            let b = bk.call(&cmd);
            assert_eq!(a.is_error(), b.is_error(), "{context}: {} -> {a:?} / {b:?}", show(&cmd));
            continue;
        }
        let reply = same(&mut rb, &mut bk, &cmd, &context);
        // Reads leave bloomkit's digests unchanged and owe RedisBloom's
        // compression to the next write (README, "t-digest"): INFO, which
        // shows it, must still match after every command, for every key
        // but those of one observation. Pipelined: bloomkit's INFO of
        // every key (a read: asked once, it says what a second asking
        // would), then RedisBloom's of the keys compared; one at a time,
        // these were 15 of a step's 18 round trips.
        let infos: Vec<Vec<Vec<u8>>> =
            KEYS.iter().map(|key| vec![b"TDIGEST.INFO".to_vec(), key.as_bytes().to_vec()]).collect();
        let bk_infos = bk.pipeline_raw(&infos);
        let checked: Vec<usize> = (0..KEYS.len()).filter(|&i| observations_in(&bk_infos[i].1) != 1).collect();
        let rb_infos = rb.pipeline_raw(&checked.iter().map(|&i| infos[i].clone()).collect::<Vec<_>>());
        for (&i, (raw_rb, reply_rb)) in checked.iter().zip(rb_infos) {
            let (raw_bk, reply_bk) = &bk_infos[i];
            assert!(
                raw_rb == *raw_bk,
                "{context}: INFO {} after {}: replies differ\n RedisBloom: {reply_rb:?}\n bloomkit:   {reply_bk:?}",
                KEYS[i],
                show(&cmd)
            );
        }
        compared += 1;
        errors += usize::from(reply.is_error());
        if let Reply::Array(items) = &reply {
            doubles += items.iter().filter(|r| matches!(r, Reply::Bulk(_) | Reply::Double(_))).count();
        }
        if step % 50 == 0 {
            for key in &KEYS[..4] {
                if observations(&mut bk, key.as_bytes()) == 1 {
                    continue;
                }
                assert_eq!(dump(&mut rb, key), dump(&mut bk, key), "{context}: DUMP of {key}");
                // Centroids of weight above 1: merged nodes fewer than their weight.
                if info(&mut bk, key.as_bytes(), 2) > 0
                    && info(&mut bk, key.as_bytes(), 4) > info(&mut bk, key.as_bytes(), 2)
                {
                    merged_weighted += 1;
                }
            }
        }
    }
    oracle::assert_both_paths(errors, steps, (2, 3));
    assert!(doubles > steps / 5, "the stream compared many doubles ({doubles})");
    assert!(merged_weighted > 0, "the stream built digests with centroids");
    eprintln!("seed {seed}: {compared} commands compared, {errors} errors, {doubles} doubles");
    for key in &KEYS[..4] {
        if observations(&mut bk, key.as_bytes()) != 1 {
            assert_eq!(dump(&mut rb, key), dump(&mut bk, key), "seed {seed}: final DUMP of {key}");
        }
    }
    (compared, errors)
}

#[test]
fn random_streams_resp2() {
    for seed in oracle::seeds(&[1, 2]) {
        run_stream(seed, 3000, false);
    }
}

#[test]
fn random_streams_resp3() {
    for seed in oracle::seeds(&[101]) {
        run_stream(seed, 3000, true);
    }
}

/// A digest with weighted centroids and a full buffer on one server.
fn fill(c: &mut Conn, key: &str, compression: u32, seed: u64) {
    c.ok(&format!("TDIGEST.CREATE {key} COMPRESSION {compression}"));
    let mut rng = Rng(seed);
    for _ in 0..40 {
        let mut cmd = vec!["TDIGEST.ADD".to_string(), key.to_string()];
        for _ in 0..25 {
            cmd.push(format!("{}", rng.below(500) as f64 / 3.0));
        }
        c.call(&cmd);
    }
}

/// Every estimate a client can ask for, on a few probes.
fn answers(c: &mut Conn, key: &str) -> Vec<Reply> {
    let mut out = Vec::new();
    for cmd in [
        "TDIGEST.INFO",
        "TDIGEST.MIN",
        "TDIGEST.MAX",
        "TDIGEST.QUANTILE 0 0.01 0.1 0.25 0.5 0.75 0.9 0.99 1",
        "TDIGEST.CDF -1 0 1.5 20 50.25 100 166.3 200",
        "TDIGEST.TRIMMED_MEAN 0.1 0.9",
        "TDIGEST.RANK 0 10 50 100 166 1000",
        "TDIGEST.REVRANK 0 10 50 100 166 1000",
        "TDIGEST.BYRANK 0 1 10 100 500 999 1000",
        "TDIGEST.BYREVRANK 0 1 10 100 500 999 1000",
        "TDIGEST.INFO",
    ] {
        let mut words: Vec<&str> = cmd.split(' ').collect();
        words.insert(1, key);
        out.push(c.call(&words));
    }
    out
}

#[test]
fn dump_restore_both_directions() {
    Pair::start().in_both_directions(|from, to, name| {
        for (compression, seed) in [(100, 1), (5, 2), (1, 3)] {
            fill(from, "src", compression, seed);
            let payload = oracle::dump_and_restore(from, to, "src", "dst", name);
            assert_eq!(to.call(&["DUMP", "dst"]).as_bytes(), payload.as_slice(), "{name}: DUMP again");
            assert_eq!(answers(from, "src"), answers(to, "dst"), "{name}: compression {compression}");
            // TDIGEST.INFO's "Memory usage" is RedisBloom's figure on both
            // sides (MEMORY USAGE is what each module says it takes).
            assert_eq!(memory_figure(from, "src"), memory_figure(to, "dst"), "{name}");
            // Both keep working the same after the move.
            from.ok("TDIGEST.ADD src 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22");
            to.ok("TDIGEST.ADD dst 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22");
            assert_eq!(answers(from, "src"), answers(to, "dst"), "{name}: after more adds");
            assert_eq!(from.call(&["DUMP", "src"]), to.call(&["DUMP", "dst"]), "{name}: after more adds");
            from.ok("DEL src");
            to.ok("DEL dst");
        }
    });
}

/// Merges: weighted duplicates sorted and merged, sources compressed, the
/// destination replaced; the same on both.
#[test]
fn merges_agree() {
    let pair = Pair::start();
    let (mut rb, mut bk) = pair.conns();
    for c in [&mut rb, &mut bk] {
        fill(c, "a", 3, 7);
        fill(c, "b", 50, 8);
        c.ok("TDIGEST.CREATE c COMPRESSION 1");
        c.ok("TDIGEST.ADD c 5 5 5 5 5 5 5 5 1 9");
    }
    for line in [
        "TDIGEST.MERGE m 2 a b",
        "TDIGEST.MERGE m 3 m a c",
        "TDIGEST.MERGE m 2 c c COMPRESSION 2",
        "TDIGEST.MERGE m 1 b OVERRIDE",
        "TDIGEST.MERGE m 4 a m m c",
        "TDIGEST.MERGE n 2 m m COMPRESSION 1 OVERRIDE",
        "TDIGEST.MERGE n 1 zz",
        "TDIGEST.MERGE n 1 n",
    ] {
        let cmd: Vec<Vec<u8>> = line.split(' ').map(|s| s.as_bytes().to_vec()).collect();
        same(&mut rb, &mut bk, &cmd, line);
        for key in ["a", "b", "c", "m", "n"] {
            assert_eq!(answers(&mut rb, key), answers(&mut bk, key), "{line}: {key}");
            assert_eq!(dump(&mut rb, key), dump(&mut bk, key), "{line}: {key}");
        }
    }
}

/// bloomkit's deliberate difference: one observation is answered with its
/// value, saved as a centroid that RedisBloom loads and answers with too.
#[test]
fn single_observation_is_answered() {
    let pair = Pair::start();
    let (mut rb, mut bk) = pair.conns();
    bk.ok("TDIGEST.CREATE s");
    bk.ok("TDIGEST.ADD s 42.5");
    let text = |r: &Reply| format!("{r:?}");
    assert_eq!(text(&bk.cmd("TDIGEST.QUANTILE s 0 0.5 1")), "[\"42.5\", \"42.5\", \"42.5\"]");
    assert_eq!(text(&bk.cmd("TDIGEST.CDF s 42.5 1 100")), "[\"0.5\", \"0\", \"1\"]");
    assert_eq!(text(&bk.cmd("TDIGEST.TRIMMED_MEAN s 0.1 0.9")), "\"42.5\"");
    assert_eq!(text(&bk.cmd("TDIGEST.RANK s 42.5")), "[0]");
    let payload = bk.call(&["DUMP", "s"]).as_bytes().to_vec();
    rb.call(&[b"RESTORE".to_vec(), b"s".to_vec(), b"0".to_vec(), payload]);
    assert_eq!(text(&rb.cmd("TDIGEST.QUANTILE s 0.5")), "[\"42.5\"]", "RedisBloom answers our centroid");
    // A RedisBloom value that lost its one point (merged 0, unmerged 1)
    // loads here with the point back (min and max kept it).
    rb.ok("TDIGEST.CREATE lost");
    rb.ok("TDIGEST.ADD lost 7.25");
    assert_eq!(text(&rb.cmd("TDIGEST.QUANTILE lost 0.5")), "[\"nan\"]", "2.8.2's defect");
    let payload = rb.call(&["DUMP", "lost"]).as_bytes().to_vec();
    assert_eq!(
        bk.call(&[b"RESTORE".to_vec(), b"lost".to_vec(), b"0".to_vec(), payload]),
        Reply::Simple("OK".into())
    );
    assert_eq!(text(&bk.cmd("TDIGEST.QUANTILE lost 0.5")), "[\"7.25\"]");
    bk.ok("TDIGEST.ADD lost 10 20");
    assert_eq!(text(&bk.cmd("TDIGEST.QUANTILE lost 0 1")), "[\"7.25\", \"20\"]");
}

/// An RDB file written by RedisBloom loads into bloomkit and is served identically.
#[test]
fn redisbloom_rdb_file_loads() {
    let (rb, bk, ()) = oracle::redisbloom_rdb_in_bloomkit(|r| {
        fill(r, "big", 100, 11);
        fill(r, "small", 2, 12);
        r.ok("TDIGEST.CREATE empty COMPRESSION 7");
    });
    let (mut r, mut b) = (rb.conn(), bk.conn());
    assert_eq!(b.cmd("DBSIZE"), Reply::Int(3));
    for key in ["big", "small", "empty"] {
        assert_eq!(b.call(&["DUMP", key]), r.call(&["DUMP", key]), "{key}");
        assert_eq!(answers(&mut b, key), answers(&mut r, key), "{key}");
        assert_eq!(memory_figure(&mut b, key), memory_figure(&mut r, key), "{key}");
        assert!(!b.call(&["DEBUG", "DIGEST-VALUE", key]).is_error(), "{key}");
    }
}

/// `TDIGEST.INFO`'s "Memory usage": RedisBloom's figure, which bloomkit
/// keeps (its MEMORY USAGE is what the digest really takes).
fn memory_figure(c: &mut Conn, key: &str) -> Reply {
    let pairs: Vec<(Reply, Reply)> = match c.call(&["TDIGEST.INFO", key]) {
        Reply::Array(a) => a.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect(),
        Reply::Map(m) => m,
        other => panic!("TDIGEST.INFO: {other:?}"),
    };
    pairs.into_iter().find(|(k, _)| k.as_bytes() == b"Memory usage").expect("Memory usage").1
}
