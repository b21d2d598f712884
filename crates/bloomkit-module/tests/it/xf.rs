//! `XF.*`, bloomkit's expandable filter, against real servers: replies and
//! errors, growth with no false negatives and the rate held, deletes and
//! counts, merges, persistence (RDB, DEBUG RELOAD, AOF replay and rewrite
//! with and without the preamble, DUMP/RESTORE, COPY), replicas that stay
//! byte-identical through doublings, SCANDUMP/LOADCHUNK, keyspace events
//! and counters, and hostile inputs under an address-space limit.
//!
//! Each case runs once per server, as its own test, so that one server's
//! failure does not hide another's.

use std::time::Duration;

use bloomkit_testkit::hostile::{
    assert_dump_round_trips, damaged_headers, load_headers, restore_damaged, Watch,
};
use bloomkit_testkit::{aof_args, Conn, Module, Reply, Server, TestServer};

/// One `#[test]` per server for each case: `fn case(server: Server)`.
macro_rules! per_server {
    ($($case:ident),* $(,)?) => {
        mod redis7 { $( #[test] fn $case() { super::$case(bloomkit_testkit::Server::Redis) } )* }
        mod valkey9 { $( #[test] fn $case() { super::$case(bloomkit_testkit::Server::Valkey) } )* }
    };
}

per_server!(
    commands_answer_and_refuse,
    growth_keeps_every_member_at_the_rate,
    deletes_counts_and_merges,
    persistence_keeps_filters_exactly,
    aof_replay_and_rewrite,
    replicas_stay_byte_identical,
    scandump_and_loadchunk_copy_a_filter,
    hostile_payloads_and_headers,
);

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

fn items(c: &mut Conn, key: &str, prefix: &str, range: std::ops::Range<usize>) {
    let mut start = range.start;
    while start < range.end {
        let end = (start + 500).min(range.end);
        let mut cmd = vec!["XF.MADD".to_string(), key.to_string()];
        cmd.extend((start..end).map(|i| format!("{prefix}{i}")));
        let reply = c.call(&cmd);
        assert!(!reply.is_error() && reply.as_array().iter().all(|r| !r.is_error()), "{reply:?}");
        start = end;
    }
}

/// How many of `prefix{range}` the filter answers 1 for.
fn found(c: &mut Conn, key: &str, prefix: &str, range: std::ops::Range<usize>) -> usize {
    let mut n = 0;
    let mut start = range.start;
    while start < range.end {
        let end = (start + 500).min(range.end);
        let mut cmd = vec!["XF.MEXISTS".to_string(), key.to_string()];
        cmd.extend((start..end).map(|i| format!("{prefix}{i}")));
        n += c.call(&cmd).as_array().iter().filter(|r| r.as_int() == 1).count();
        start = end;
    }
    n
}

fn info(c: &mut Conn, key: &str, field: &str) -> Reply {
    let reply = c.call(&["XF.INFO", key]);
    let fields = reply.as_array();
    let at = fields.iter().position(|f| matches!(f, Reply::Simple(s) if s == field)).expect(field);
    fields[at + 1].clone()
}

/// INFO's "Guaranteed rate": the bound on the false-positive rate now.
fn guaranteed(c: &mut Conn, key: &str) -> f64 {
    match info(c, key, "Guaranteed rate") {
        Reply::Bulk(b) => String::from_utf8(b).unwrap().parse().unwrap(),
        Reply::Double(d) => d.parse().unwrap(),
        other => panic!("{other:?}"),
    }
}

fn commands_answer_and_refuse(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    assert_eq!(c.cmd("XF.RESERVE f 0.01 CAPACITY 100 MAXCAPACITY 100000"), ok());
    assert_eq!(c.cmd("XF.RESERVE f 0.01"), Reply::Error("ERR item exists".into()));
    assert_eq!(c.cmd("XF.ADD f a"), Reply::Int(1));
    assert_eq!(c.cmd("XF.ADD f a"), Reply::Int(0), "probably present: a second occurrence");
    assert_eq!(c.cmd("XF.COUNT f a"), Reply::Int(2));
    assert_eq!(c.cmd("XF.CARD f"), Reply::Int(2));
    assert_eq!(format!("{:?}", c.cmd("XF.MADD f b c a")), "[1, 1, 0]");
    assert_eq!(c.cmd("XF.EXISTS f b"), Reply::Int(1));
    assert_eq!(c.cmd("XF.EXISTS f zzz"), Reply::Int(0));
    assert_eq!(c.cmd("XF.EXISTS missing a"), Reply::Int(0), "a missing key holds nothing");
    assert_eq!(format!("{:?}", c.cmd("XF.MEXISTS f a zzz c")), "[1, 0, 1]");
    assert_eq!(c.cmd("XF.DEL f a"), Reply::Int(1));
    assert_eq!(c.cmd("XF.COUNT f a"), Reply::Int(2), "the MADD added a third");
    assert_eq!(c.cmd("XF.DEL missing a"), Reply::Int(0));
    assert_eq!(c.cmd("XF.COUNT missing a"), Reply::Int(0));
    assert_eq!(c.cmd("XF.CARD missing"), Reply::Int(0));
    // ADD creates with the defaults; INSERT with its options, or not at all.
    assert_eq!(c.cmd("XF.ADD d x"), Reply::Int(1));
    assert_eq!(info(&mut c, "d", "Capacity"), Reply::Int(1000));
    assert_eq!(format!("{:?}", c.cmd("XF.INSERT i ERROR 0.001 CAPACITY 50 ITEMS p q")), "[1, 1]");
    assert_eq!(info(&mut c, "i", "Capacity"), Reply::Int(50));
    let text = |r: Reply| r.error_text().to_string();
    assert!(text(c.cmd("XF.INSERT n NOCREATE ITEMS p")).contains("not found"));
    assert_eq!(c.cmd("EXISTS n"), Reply::Int(0));
    // Errors say what was wrong and what is allowed, and change nothing.
    assert!(text(c.cmd("XF.RESERVE g 2")).contains("error rate must be a number from 1e-9 to 0.5"));
    assert!(text(c.cmd("XF.RESERVE g 0.01 CAPACITY 0")).contains("CAPACITY must be a whole number"));
    assert!(
        text(c.cmd("XF.RESERVE g 0.01 CAPACITY 10 MAXCAPACITY 5")).contains("not be larger than MAXCAPACITY")
    );
    assert!(text(c.cmd("XF.RESERVE g 0.01 SIZE 10")).contains("unknown argument 'SIZE'"));
    assert!(text(c.cmd("XF.ADD f")).contains("wrong number of arguments"));
    assert!(text(c.cmd("XF.MERGE f 2 d")).contains("numkeys"));
    assert!(text(c.cmd("XF.MERGE f 1 nope")).contains("not found"));
    assert_eq!(c.cmd("EXISTS g"), Reply::Int(0));
    c.ok("SET s x");
    assert!(text(c.cmd("XF.ADD s a")).starts_with("WRONGTYPE"));
    assert!(text(c.cmd("XF.EXISTS s a")).starts_with("WRONGTYPE"));
    // MAXCAPACITY stops adds, with the part that ran answered.
    c.ok("XF.RESERVE small 0.01 CAPACITY 2 MAXCAPACITY 3");
    let reply = c.cmd("XF.MADD small a b c d e");
    let answers = reply.as_array();
    assert_eq!(answers.len(), 4, "{reply:?}");
    assert!(answers[3].error_text().contains("MAXCAPACITY of 3"), "{reply:?}");
    assert_eq!(c.cmd("XF.CARD small"), Reply::Int(3));
    // The size limit refuses, before allocating, what it cannot hold.
    let huge = c.cmd("XF.RESERVE huge 0.000000001 CAPACITY 1099511627776");
    assert!(text(huge).contains("bf.max-filter-bytes"));
    assert_eq!(c.cmd("EXISTS huge"), Reply::Int(0));
    // RESP3: booleans, and INFO a map.
    c.ok("HELLO 3");
    assert_eq!(c.cmd("XF.EXISTS f b"), Reply::Bool(true));
    assert!(matches!(c.cmd("XF.INFO f"), Reply::Map(_)));
}

fn growth_keeps_every_member_at_the_rate(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("XF.RESERVE g 0.01 CAPACITY 100");
    let mut sizes = Vec::new();
    let mut added = 0;
    for target in [1_000, 4_000, 16_000, 40_000] {
        items(&mut c, "g", "m", added..target);
        added = target;
        assert_eq!(found(&mut c, "g", "m", 0..added), added, "no false negative at {added} items");
        let false_hits = found(&mut c, "g", "absent", 0..20_000);
        let rate = false_hits as f64 / 20_000.0;
        assert!(rate <= 0.01, "{added} items: measured false-positive rate {rate}");
        let size = info(&mut c, "g", "Size").as_int();
        sizes.push(size as f64 * 8.0 / added as f64);
    }
    assert!(info(&mut c, "g", "Expansions").as_int() >= 8, "grew from 100 to 40,000 by doubling");
    // A sanity bound only: the comparison with RedisBloom's scalable
    // filter, doubling by doubling, is bench/xf.sh's.
    assert!(sizes.iter().all(|&bits| bits < 30.0), "bits per item: {sizes:?}");
    let bound = guaranteed(&mut c, "g");
    assert!(bound <= 0.01, "guaranteed {bound}");
}

fn deletes_counts_and_merges(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("XF.RESERVE a 0.01 CAPACITY 200");
    items(&mut c, "a", "x", 0..6_000);
    for i in (0..6_000).step_by(2) {
        assert_eq!(c.call(&["XF.DEL", "a", &format!("x{i}")]), Reply::Int(1), "x{i}");
    }
    let kept =
        (1..6_000).step_by(2).filter(|i| c.call(&["XF.EXISTS", "a", &format!("x{i}")]) == Reply::Int(1));
    assert_eq!(kept.count(), 3_000, "no false negative among the items kept");
    assert_eq!(c.cmd("XF.CARD a"), Reply::Int(3_000));
    assert!(found(&mut c, "a", "absent", 0..10_000) <= 100, "the rate holds after deletes");
    // Counts: never below the true count.
    for n in 1..=5 {
        for _ in 0..n {
            c.call(&["XF.ADD", "a", &format!("counted{n}")]);
        }
        assert!(c.call(&["XF.COUNT", "a", &format!("counted{n}")]).as_int() >= n as i64);
    }
    // A merge answers 1 for every member of every source.
    c.ok("XF.RESERVE b 0.01 CAPACITY 50");
    items(&mut c, "b", "y", 0..3_000);
    c.ok("XF.MERGE m 2 a b");
    assert_eq!(found(&mut c, "m", "y", 0..3_000), 3_000);
    let kept_in_m =
        (1..6_000).step_by(2).filter(|i| c.call(&["XF.EXISTS", "m", &format!("x{i}")]) == Reply::Int(1));
    assert_eq!(kept_in_m.count(), 3_000, "every member of a");
    // The merge's guarantee is the sum of its sources' (README, "XF"): the
    // rate measured stays within what INFO guarantees.
    let merged_hits = found(&mut c, "m", "absent", 0..20_000);
    let (ga, gb, gm) = (guaranteed(&mut c, "a"), guaranteed(&mut c, "b"), guaranteed(&mut c, "m"));
    assert!(gm <= 2.5 * (ga + gb), "merged bound {gm}, sources {ga} + {gb}");
    assert!((merged_hits as f64) / 20_000.0 <= gm * 1.3 + 0.001, "{merged_hits} of 20000 against {gm}");
    assert_eq!(c.cmd("XF.CARD m").as_int(), c.cmd("XF.CARD a").as_int() + 3_000);
    // Into an existing destination, itself among the sources.
    c.ok("XF.MERGE b 2 b a");
    assert_eq!(found(&mut c, "b", "y", 0..3_000), 3_000);
    assert_eq!(c.cmd("XF.COUNT b y7"), Reply::Int(2), "b counted twice");
}

/// Filters of every state: fresh, grown, mid-doubling, with deletes,
/// merged, copied. Returns the keys.
fn write_everything(c: &mut Conn, tag: &str) -> Vec<String> {
    let keys: Vec<String> =
        ["grown", "fresh", "midway", "merged", "copied"].iter().map(|k| format!("{tag}:{k}")).collect();
    c.ok(&format!("XF.RESERVE {} 0.001 CAPACITY 100", keys[0]));
    items(c, &keys[0], "g", 0..5_000);
    for i in 0..300 {
        c.call(&["XF.DEL", &keys[0], &format!("g{}", i * 7)]);
    }
    c.ok(&format!("XF.RESERVE {} 0.05", keys[1]));
    c.ok(&format!("XF.RESERVE {} 0.01 CAPACITY 64", keys[2]));
    // Add until a doubling is under way, and stop there.
    for i in 0..100_000 {
        c.call(&["XF.ADD", &keys[2], &format!("w{i}")]);
        if info(c, &keys[2], "Expansion progress").as_int() > 0 && i > 1_000 {
            break;
        }
    }
    assert!(info(c, &keys[2], "Expansion progress").as_int() > 0, "a doubling is under way");
    c.ok(&format!("XF.MERGE {} 2 {} {}", keys[3], keys[0], keys[2]));
    c.ok(&format!("COPY {} {}", keys[2], keys[4]));
    c.call(&[b"XF.ADD".to_vec(), keys[1].clone().into_bytes(), vec![0u8, 255, 13, 10]]);
    keys
}

fn answers(c: &mut Conn, keys: &[String]) -> Vec<Reply> {
    let mut out = Vec::new();
    for k in keys {
        out.push(c.call(&["XF.INFO", k]));
        out.push(c.call(&["XF.MEXISTS", k, "g1", "g7", "w3", "w1000", "nope", "g4999"]));
        out.push(c.call(&["XF.COUNT", k, "g1"]));
        out.push(c.call(&["DUMP", k]));
    }
    out
}

fn persistence_keeps_filters_exactly(server: Server) {
    let mut s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    let keys = write_everything(&mut c, "r");
    let (before, replies) = (c.digest(), answers(&mut c, &keys));
    c.ok("SAVE");
    s.restart(&[]);
    let mut c = s.conn();
    assert_eq!(c.digest(), before, "{server:?}: RDB restart");
    assert_eq!(answers(&mut c, &keys), replies, "{server:?}: RDB restart");
    c.ok("DEBUG RELOAD");
    assert_eq!(c.digest(), before, "{server:?}: DEBUG RELOAD");
    for k in &keys {
        assert_dump_round_trips(&mut c, k, "DUMP/RESTORE");
        let copy = format!("{k}-c");
        c.call(&["COPY", k, &copy]);
        assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", k]), c.call(&["DEBUG", "DIGEST-VALUE", &copy]), "COPY");
    }
    // MEMORY USAGE and INFO agree with the filters' sizes.
    let bytes: i64 = keys.iter().map(|k| info(&mut c, k, "Size").as_int()).sum();
    assert!(c.call(&["MEMORY", "USAGE", &keys[0]]).as_int() >= info(&mut c, &keys[0], "Size").as_int());
    let counted: i64 = c.info_field("bf", "bf_xf_bytes").parse().unwrap();
    assert!(counted >= bytes, "INFO counts every filter: {counted} < {bytes}");
}

fn aof_replay_and_rewrite(server: Server) {
    for preamble in [false, true] {
        let context = format!("{server:?}, preamble {preamble}");
        let mut s = TestServer::start(server, &[Module::bloomkit()], &aof_args(preamble));
        let mut c = s.conn();
        c.wait_for_aof_rewrite(Duration::from_secs(30));
        let mut keys = write_everything(&mut c, "a");
        let before = c.digest();
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!(c.digest(), before, "{context}: replayed AOF");
        c.ok("BGREWRITEAOF");
        c.wait_for_aof_rewrite(Duration::from_secs(30));
        keys.extend(write_everything(&mut c, "b"));
        let (before, replies) = (c.digest(), answers(&mut c, &keys));
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!(c.digest(), before, "{context}: rewritten AOF");
        assert_eq!(answers(&mut c, &keys), replies, "{context}");
        if !preamble {
            let text = s.base_aof();
            assert!(text.windows(12).any(|w| w == b"XF.LOADCHUNK"), "{context}: rewrite emits XF.LOADCHUNK");
        }
    }
}

fn replicas_stay_byte_identical(server: Server) {
    let primary = TestServer::with_bloomkit(server);
    let mut p = primary.conn();
    let early = write_everything(&mut p, "early");
    let port = primary.port.to_string();
    let replica = TestServer::start(server, &[Module::bloomkit()], &["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    r.wait_for_sync(Duration::from_secs(30));
    assert_eq!(r.digest(), p.digest(), "{server:?}: full sync (a doubling under way included)");
    // The stream: growth through doublings, deletes, merges, batches cut
    // short by MAXCAPACITY, loads.
    let mut keys = write_everything(&mut p, "late");
    p.ok("XF.RESERVE cut 0.01 CAPACITY 10 MAXCAPACITY 20");
    p.cmd("XF.MADD cut a b c d e f g h i j k l m n o p q r s t u v w x y z");
    for (iter, data) in scandump(&mut p, &early[2]) {
        p.call(&[b"XF.LOADCHUNK".to_vec(), b"loaded".to_vec(), iter.to_string().into_bytes(), data]);
    }
    keys.extend(early);
    keys.extend(["cut".to_string(), "loaded".to_string()]);
    assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
    assert_eq!(r.digest(), p.digest(), "{server:?}: the stream");
    assert_eq!(answers(&mut r, &keys), answers(&mut p, &keys), "{server:?}");
    assert_eq!(r.cmd("XF.CARD cut"), Reply::Int(20));
}

fn scandump(c: &mut Conn, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut chunks = Vec::new();
    let mut iter = 0i64;
    loop {
        let reply = c.call(&["XF.SCANDUMP", key, &iter.to_string()]);
        let next = reply.as_array()[0].as_int();
        if next == 0 {
            return chunks;
        }
        chunks.push((next, reply.as_array()[1].as_bytes().to_vec()));
        iter = next;
    }
}

fn scandump_and_loadchunk_copy_a_filter(server: Server) {
    let from = TestServer::with_bloomkit(server);
    let to = TestServer::with_bloomkit(server);
    let (mut a, mut b) = (from.conn(), to.conn());
    let keys = write_everything(&mut a, "s");
    for k in &keys {
        let chunks = scandump(&mut a, k);
        assert!(chunks.len() >= 2, "a header and slots");
        // Until the last chunk is in, the filter answers as empty and refuses writes.
        for (n, (iter, data)) in chunks.iter().enumerate() {
            let reply = b.call(&[
                b"XF.LOADCHUNK".to_vec(),
                k.clone().into_bytes(),
                iter.to_string().into_bytes(),
                data.clone(),
            ]);
            assert_eq!(reply, ok(), "{k} chunk {n}");
            if n + 1 < chunks.len() {
                assert!(
                    b.call(&["XF.ADD", k, "x"]).error_text().contains("XF.LOADCHUNK"),
                    "{k}: half loaded"
                );
            }
        }
        assert_eq!(b.call(&["DEBUG", "DIGEST-VALUE", k]), a.call(&["DEBUG", "DIGEST-VALUE", k]), "{k}");
        assert_eq!(answers(&mut b, std::slice::from_ref(k)), answers(&mut a, std::slice::from_ref(k)), "{k}");
    }
    // Chunks out of order or from another filter are refused.
    let chunks = scandump(&mut a, &keys[0]);
    b.call(&[b"XF.LOADCHUNK".to_vec(), b"o".to_vec(), b"1".to_vec(), chunks[0].1.clone()]);
    let (iter, data) = &chunks[1];
    let shifted = (iter + 8).to_string().into_bytes();
    let reply = b.call(&[b"XF.LOADCHUNK".to_vec(), b"o".to_vec(), shifted, data.clone()]);
    assert!(reply.is_error(), "a chunk at the wrong place: {reply:?}");
    let reply =
        b.call(&[b"XF.LOADCHUNK".to_vec(), b"o".to_vec(), iter.to_string().into_bytes(), data[1..].to_vec()]);
    assert!(reply.is_error(), "a chunk cut short: {reply:?}");
}

fn hostile_payloads_and_headers(server: Server) {
    let s = TestServer::hostile(server);
    let mut c = s.conn();
    let watch = Watch::new(&mut c);
    c.ok("XF.RESERVE src 0.01 CAPACITY 64");
    items(&mut c, "src", "h", 0..400);
    // Damaged DUMP payloads: refused, or loaded and round-tripping.
    let payload = c.call(&["DUMP", "src"]).as_bytes().to_vec();
    let (refused, loaded) = restore_damaged(&mut c, &watch, &payload, "p", |c, key, what| {
        assert_dump_round_trips(c, key, what);
        c.call(&["XF.ADD", key, "more"]);
        c.call(&["XF.DEL", key, "h1"]);
        c.call(&["XF.MEXISTS", key, "h1", "h2"]);
        c.call(&["DEL", key]);
    });
    assert!(refused > 0, "{server:?}: {refused} refused, {loaded} loaded");
    // Damaged LOADCHUNK headers: refused, or accepted as a filter to load.
    let header = scandump(&mut c, "src")[0].1.clone();
    load_headers(
        &mut c,
        &watch,
        "XF.LOADCHUNK",
        "1",
        damaged_headers(&header),
        |e| {
            e.contains("invalid")
                || e.contains("bf.max-filter-bytes")
                || e.contains("error rate")
                || e.contains("CAPACITY")
        },
        |c, key, _| {
            assert!(c.call(&["XF.ADD", key, "x"]).is_error(), "an unfinished load refuses writes");
            assert_eq!(c.call(&["XF.EXISTS", key, "x"]), Reply::Int(0));
            c.call(&["DEL", key]);
        },
    );
    // Extreme parameters, refused before anything is allocated.
    for line in [
        "XF.RESERVE k 0.000000001 CAPACITY 1099511627776",
        "XF.RESERVE k 0.5 CAPACITY 1099511627776 MAXCAPACITY 1099511627776",
        "XF.RESERVE k 1e-300",
        "XF.RESERVE k nan",
        "XF.INSERT k CAPACITY 99999999999999999999 ITEMS a",
        "XF.SCANDUMP src -1",
        "XF.LOADCHUNK k 0 x",
    ] {
        assert!(c.cmd(line).is_error(), "{line}");
        assert_eq!(c.cmd("EXISTS k"), Reply::Int(0), "{line}");
        watch.check(&mut c, line);
    }
}
