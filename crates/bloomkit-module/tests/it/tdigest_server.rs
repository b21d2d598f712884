//! t-digests and the server around them: the `INFO bf` counters, MEMORY
//! USAGE, COPY, MERGE's keys; the maxmemory guard refuses a digest
//! that would pass `maxmemory` before allocating it, and active defrag (on
//! Redis 8.2, built with Redis's jemalloc) moves digests' node arrays
//! without changing any answer or digest.

use std::time::{Duration, Instant};

use bloomkit_testkit::{per_server, Conn, Module, Reply, Rng, Server, TestServer};

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

per_server!(creations_past_maxmemory_are_refused);
fn creations_past_maxmemory_are_refused(server: Server) {
    let s = TestServer::start(server, &[Module::bloomkit()], &["--maxmemory", "20mb"]);
    let mut c = s.conn();
    c.ok("TDIGEST.CREATE small");
    c.ok("TDIGEST.ADD small 1 2 3");
    // 2 000 000 -> 12 000 010 nodes, 192 MB: under bf.max-filter-bytes, over the memory left.
    for line in ["TDIGEST.CREATE big COMPRESSION 2000000", "TDIGEST.MERGE big 1 small COMPRESSION 2000000"] {
        assert_eq!(c.cmd(line), Reply::Error(OOM.into()), "{server:?}: {line}");
        assert_eq!(c.cmd("EXISTS big"), Reply::Int(0), "{server:?}: {line}");
    }
    assert_eq!(c.info_field("bf", "bf_maxmemory_refusals"), "2", "{server:?}");
    c.ok("CONFIG SET bf.maxmemory-guard no");
    c.ok("TDIGEST.CREATE fits COMPRESSION 1000");
}

fn defrag_field(c: &mut Conn, name: &str) -> u64 {
    c.info_field("bf", &format!("bf_defrag_{name}")).parse().unwrap()
}

fn observe(c: &mut Conn, keys: &[String]) -> Vec<Reply> {
    let mut out = Vec::new();
    for key in keys {
        out.push(c.call(&["DEBUG", "DIGEST-VALUE", key]));
        out.push(c.call(&["TDIGEST.QUANTILE", key, "0.1", "0.5", "0.9"]));
        out.push(c.call(&["TDIGEST.INFO", key]));
    }
    out
}

#[test]
fn active_defrag_moves_digests_and_changes_nothing() {
    let s = TestServer::start(Server::Redis8, &[Module::bloomkit()], &[]);
    let mut c = s.conn();
    assert!(c.info_field("memory", "mem_allocator").starts_with("jemalloc"));
    let mut rng = Rng(0x7d16);
    let mut keys = Vec::new();
    let mut garbage = Vec::new();
    for round in 0..1500 {
        for g in 0..8 {
            let key = format!("s:{round}:{g}");
            c.call(&["SET", &key, &"x".repeat(1 + rng.below(400))]);
            garbage.push(key);
        }
        let key = format!("td:{round}");
        c.ok(&format!("TDIGEST.CREATE {key} COMPRESSION {}", 1 + rng.below(8)));
        let values: Vec<String> = (0..1 + rng.below(30)).map(|_| rng.below(1000).to_string()).collect();
        c.ok(&format!("TDIGEST.ADD {key} {}", values.join(" ")));
        keys.push(key);
    }
    for chunk in garbage.chunks(500) {
        let mut cmd = vec!["DEL".to_string()];
        cmd.extend(chunk.iter().cloned());
        c.call(&cmd);
    }
    // The first look compresses the digests (QUANTILE does); the second is the reference.
    observe(&mut c, &keys);
    let before = observe(&mut c, &keys);
    c.start_active_defrag();
    let end = Instant::now() + Duration::from_secs(120);
    while defrag_field(&mut c, "tdigest_hits") == 0 {
        assert!(Instant::now() < end, "no t-digest was moved within 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    c.ok("CONFIG SET activedefrag no");
    let after = observe(&mut c, &keys);
    assert!(before == after, "a digest changed under defrag");
    c.ok("FLUSHALL");
    assert_eq!(c.cmd("PING"), Reply::Simple("PONG".into()));
}

/// `INFO bf` counts t-digests at what they really take (the compressed
/// copy a read keeps included, until the next write drops it), and `MEMORY
/// USAGE` is that plus what the server keeps for the key; a COPY is an
/// independent value; MERGE's sources are declared keys.
#[test]
fn info_counters_memory_usage_and_copy() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    for line in ["TDIGEST.CREATE a", "TDIGEST.ADD a 1 2 3", "TDIGEST.QUANTILE a 0.5"] {
        c.ok(line);
    }
    // In jemalloc's size classes: the struct (128) and
    // two arrays of 610 nodes (4880 bytes in the 5120 class); RedisBloom's
    // figure is 8 + 16 x 610 = 9768.
    let digest = 128 + 2 * 5120;
    let read_bytes: i64 = c.info_field("bf", "bf_tdigest_bytes").parse().unwrap();
    assert!(
        read_bytes > digest && read_bytes < digest + 400,
        "the read's compressed copy of 3 nodes is counted: {read_bytes}"
    );
    let counted = [
        ("bf_tdigest_digests", "1"),
        ("bf_tdigest_observations_added", "3"),
        ("bf_tdigest_queries", "1"),
        // The read owes its compression; the next write makes and sends it.
        ("bf_tdigest_compressions_replicated", "0"),
    ];
    c.assert_info("bf", &counted, "a digest read");
    c.ok("TDIGEST.ADD a 4");
    let digest_bytes = digest.to_string();
    let counted = [
        ("bf_tdigest_bytes", digest_bytes.as_str()),
        ("bf_tdigest_compressions_replicated", "1"),
        ("bf_tdigest_observations_added", "4"),
    ];
    c.assert_info("bf", &counted, "the next write, which drops the copy");
    // What the server keeps for a module key beside its name and entry (40),
    // key `a`'s sds (8) and its dict entry (24).
    assert_eq!(c.cmd("MEMORY USAGE a").as_int(), digest + 40 + 8 + 24);
    c.ok("COPY a b");
    assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", "a"]), c.call(&["DEBUG", "DIGEST-VALUE", "b"]));
    c.ok("TDIGEST.ADD b 4");
    assert_ne!(c.call(&["DEBUG", "DIGEST-VALUE", "a"]), c.call(&["DEBUG", "DIGEST-VALUE", "b"]));
    c.ok("DEL a b");
    c.assert_info("bf", &[("bf_tdigest_digests", "0")], "deleted");
    // MERGE's sources are declared keys (ACL key patterns, clients' routing;
    // the cluster's own slot check is `cluster_keys.rs`').
    let keys = c.cmd("COMMAND GETKEYS TDIGEST.MERGE d 2 a b COMPRESSION 5");
    assert_eq!(format!("{keys:?}"), r#"["d", "a", "b"]"#);
    c.assert_info("bf", &[("bf_tdigest_bytes", "0")], "deleted");
}
