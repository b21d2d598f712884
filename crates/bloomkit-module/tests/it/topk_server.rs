//! Top-K sketches and the server around them: COPY (RedisBloom has none),
//! DEBUG DIGEST-VALUE, the `INFO bf` counters and MEMORY USAGE, the maxmemory guard, command flags and ACL
//! categories, and active defrag on redis-server 8.2.

use crate::topk_support;

use std::time::{Duration, Instant};

use bloomkit_testkit::{per_server, Conn, Module, Reply, Rng, Server, TestServer};
use topk_support::{add_cmd, answers, pool};

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

#[test]
fn copy_makes_an_independent_sketch() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("TOPK.RESERVE src 5 16 3 0.9");
    let items = pool(40);
    c.call(&add_cmd("src", &items));
    c.call(&add_cmd("src", &items[..10]));
    assert_eq!(c.cmd("COPY src dst"), Reply::Int(1));
    assert_eq!(answers(&mut c, "dst", &items), answers(&mut c, "src", &items));
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE dst"), c.cmd("DEBUG DIGEST-VALUE src"));
    assert_eq!(c.cmd("DUMP dst"), c.cmd("DUMP src"));
    // Writes to the copy leave the original alone, and the same writes to
    // both leave them equal again (the draws are part of the copy).
    let before = c.cmd("DEBUG DIGEST-VALUE src");
    c.call(&add_cmd("dst", &items[..5]));
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE src"), before);
    assert_ne!(c.cmd("DEBUG DIGEST-VALUE dst"), before);
    c.call(&add_cmd("src", &items[..5]));
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE dst"), c.cmd("DEBUG DIGEST-VALUE src"));
    assert_eq!(c.cmd("INFO bf").as_bytes().windows(18).filter(|w| w == b"bf_topk_sketches:2").count(), 1);
}

#[test]
fn digests_tell_sketches_apart() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("TOPK.RESERVE a 3 8 2 1");
    c.ok("TOPK.RESERVE b 3 8 2 1");
    let same = c.cmd("DEBUG DIGEST-VALUE a");
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE b"), same);
    c.ok("TOPK.ADD a x");
    assert_ne!(c.cmd("DEBUG DIGEST-VALUE a"), same);
    c.ok("TOPK.ADD b x");
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE a"), c.cmd("DEBUG DIGEST-VALUE b"));
    c.ok("TOPK.RESERVE c 3 8 2 0.5");
    assert_ne!(c.cmd("DEBUG DIGEST-VALUE c"), same, "the decay counts");
    // An empty-string item is not an empty slot.
    c.call(&[&b"TOPK.ADD"[..], b"b", b""]);
    assert_ne!(c.cmd("DEBUG DIGEST-VALUE a"), c.cmd("DEBUG DIGEST-VALUE b"));
}

per_server!(creations_past_maxmemory_are_refused);
fn creations_past_maxmemory_are_refused(server: Server) {
    let s = TestServer::start(server, &[Module::bloomkit()], &["--maxmemory", "20mb"]);
    let mut c = s.conn();
    let before: u64 = c.info_field("memory", "used_memory").parse().unwrap();
    // 80 MB of buckets, 24 MB of heap: under bf.max-filter-bytes.
    for line in ["TOPK.RESERVE big 10 10000 1000 0.9", "TOPK.RESERVE big 1000000 8 7 0.9"] {
        assert_eq!(c.cmd(line), Reply::Error(OOM.into()), "{server:?}: {line}");
        assert_eq!(c.cmd("EXISTS big"), Reply::Int(0));
    }
    let after: u64 = c.info_field("memory", "used_memory").parse().unwrap();
    assert!(after < before + (1 << 20), "{server:?}: nothing was allocated");
    assert_eq!(c.info_field("bf", "bf_maxmemory_refusals"), "2");
    c.ok("TOPK.RESERVE small 10 100 5 0.9");
    c.ok("CONFIG SET bf.maxmemory-guard no");
    c.ok("TOPK.RESERVE big 10 10000 100 0.9");
}

per_server!(flags_and_acl_categories: redis7, redis8, valkey9);
/// RedisBloom's flags, except TOPK.COUNT, a read (as in RedisBloom 8).
fn flags_and_acl_categories(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    for (name, flag) in [
        ("topk.reserve", "write"),
        ("topk.add", "write"),
        ("topk.incrby", "write"),
        ("topk.count", "readonly"),
        ("topk.query", "readonly"),
        ("topk.list", "readonly"),
        ("topk.info", "readonly"),
    ] {
        let info = c.call(&["COMMAND", "INFO", name]);
        let flags = &info.as_array()[0].as_array()[2];
        let flags: Vec<String> = match flags {
            Reply::Array(f) => f.iter().map(|f| format!("{f:?}")).collect(),
            other => panic!("{other:?}"),
        };
        assert!(flags.iter().any(|f| f.contains(flag)), "{server:?} {name}: {flags:?}");
        assert!(!flags.iter().any(|f| f.contains("fast")), "{server:?} {name}: {flags:?}");
    }
    if server != Server::Redis {
        let cat = c.cmd("ACL CAT topk");
        assert_eq!(cat.as_array().len(), 7, "{server:?}: {cat:?}");
        c.ok("ACL SETUSER reader on nopass +@read ~*");
        c.ok("TOPK.RESERVE t 2");
        let mut r = s.conn();
        r.ok("AUTH reader x");
        assert!(!r.cmd("TOPK.COUNT t a").is_error(), "{server:?}");
        assert!(r.cmd("TOPK.ADD t a").error_text().starts_with("NOPERM"), "{server:?}");
    }
}

fn line(text: &str) -> Vec<Vec<u8>> {
    text.split(' ').map(|p| p.as_bytes().to_vec()).collect()
}

/// Active defrag moves sketches' blocks (the value, buckets, heap, items)
/// on redis-server 8.2, the server built with Redis's jemalloc, and every
/// answer and digest stays the same.
#[test]
fn active_defrag_moves_sketches_and_changes_nothing() {
    let s = TestServer::with_bloomkit(Server::Redis8);
    let mut c = s.conn();
    let mut rng = Rng(0xdef7a6);
    let mut commands = Vec::new();
    let mut strings = Vec::new();
    let rounds = 2000;
    for round in 0..rounds {
        for i in 0..8 {
            let key = format!("s:{round}:{i}");
            commands.push(vec![b"SET".to_vec(), key.clone().into_bytes(), vec![b'x'; 1 + rng.below(500)]]);
            strings.push(key);
        }
        commands.push(line(&format!(
            "TOPK.RESERVE t:{round} {} {} 3 0.9",
            2 + rng.below(10),
            4 + rng.below(60)
        )));
        commands.push(line(&format!("TOPK.ADD t:{round} a{round} b{round} c a{round} d{round}")));
    }
    assert!(c.pipeline(&commands).iter().all(|r| !r.is_error()));
    let dels: Vec<_> = strings.iter().filter(|_| rng.chance(90)).map(|k| line(&format!("DEL {k}"))).collect();
    c.pipeline(&dels);
    let probe = |c: &mut Conn| {
        let cmds: Vec<_> = (0..rounds).map(|r| line(&format!("TOPK.LIST t:{r} WITHCOUNT"))).collect();
        let digests: Vec<_> = (0..rounds).map(|r| line(&format!("DEBUG DIGEST-VALUE t:{r}"))).collect();
        (c.pipeline(&cmds), c.pipeline(&digests), c.digest())
    };
    let before = probe(&mut c);
    c.start_active_defrag();
    let end = Instant::now() + Duration::from_secs(60);
    while c.info_field("bf", "bf_defrag_topk_hits").parse::<u64>().unwrap() < 100 {
        assert!(Instant::now() < end, "no Top-K block moved within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    c.ok("CONFIG SET activedefrag no");
    assert!(before == probe(&mut c), "a sketch answers differently after defrag");
    // Moved blocks are written to and freed like any other.
    let writes: Vec<_> = (0..rounds).map(|r| line(&format!("TOPK.ADD t:{r} e f g a{r}"))).collect();
    assert!(c.pipeline(&writes).iter().all(|r| !r.is_error()));
    c.ok("FLUSHALL");
    assert_eq!(c.cmd("PING"), Reply::Simple("PONG".into()));
}

/// `INFO bf` counts Top-K sketches in its `topk` section at what they
/// really take, and `MEMORY USAGE` is that plus what the server keeps for
/// the key.
#[test]
fn info_counters_and_memory_usage() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    for line in ["TOPK.RESERVE a 1", "TOPK.ADD a x y z", "TOPK.INCRBY a y 5", "TOPK.QUERY a x y"] {
        c.ok(line);
    }
    // In jemalloc's size classes: the struct (112), the decay table (2048),
    // 8 x 7 buckets (448), one heap slot (24 in the 32 class) and the item
    // it holds (8); RedisBloom's figure is 2088 + 448 + 24.
    let bytes = (112 + 2048 + 448 + 32 + 8).to_string();
    // x into the empty slot; y expels x, z expels y, y's 5 expel z.
    let counted = [
        ("bf_topk_sketches", "1"),
        ("bf_topk_bytes", bytes.as_str()),
        ("bf_topk_units_added", "8"),
        ("bf_topk_items_expelled", "3"),
        ("bf_topk_lookups", "2"),
    ];
    c.assert_info("bf", &counted, "one sketch");
    // What the server keeps for a module key beside its name and entry (its
    // object and the module value, 16 bytes each, and the entry's rounding
    // to 32), then key `a`'s 8 bytes of sds and 24 of dict entry.
    assert_eq!(c.cmd("MEMORY USAGE a"), Reply::Int(112 + 2048 + 448 + 32 + 8 + 40 + 8 + 24));
    c.ok("DEL a");
    c.assert_info("bf", &[("bf_topk_sketches", "0"), ("bf_topk_bytes", "0")], "deleted");
}
