//! Top-K sketches lose nothing across save and restart, DEBUG RELOAD, AOF
//! replay, AOF rewrite (with and without the RDB preamble) and replication
//! (full sync, the stream, partial sync), on Redis 7.0 and Valkey 9: with
//! decay 0.9 and many colliding buckets, where RedisBloom's replicas drift,
//! the servers' DEBUG DIGEST stays equal and so do the DUMP bytes.

use crate::topk_support;

use std::time::Duration;

use bloomkit_testkit::{aof_args, drop_link_and_resync, Conn, Module, Reply, Rng, Server, TestServer};
use topk_support::{add_cmd, answers, incrby_cmd, pool};

const SERVERS: [Server; 2] = [Server::Redis, Server::Valkey];

/// Writes of every kind, decay 0.9 on narrow rows (many collisions);
/// returns the keys written.
fn write_everything(c: &mut Conn, tag: &str) -> Vec<String> {
    let key = |name: &str| format!("{tag}:{name}");
    let hot = key("hot");
    c.ok(&format!("TOPK.RESERVE {hot} 8 10 4 0.9"));
    let mut items = pool(80);
    items.push(Vec::new());
    items.push(vec![0, 1, 0, 255]);
    let mut rng = Rng(tag.len() as u64 * 31 + 7);
    for _ in 0..60 {
        let batch: Vec<Vec<u8>> =
            (0..20).map(|_| items[rng.below(items.len()).min(rng.below(items.len()))].clone()).collect();
        assert!(!c.call(&add_cmd(&hot, &batch)).is_error());
    }
    let pairs: Vec<(Vec<u8>, u32)> =
        (0..12).map(|i| (items[rng.below(items.len())].clone(), 1 + i * 9)).collect();
    assert!(!c.call(&incrby_cmd(&hot, &pairs)).is_error());
    // A bad increment mid-way: the pairs before it stay applied.
    let partial = c.call(&["TOPK.INCRBY", &hot, "item3", "40", "item4", "x", "item5", "40"]);
    assert_eq!(partial.as_array().len(), 2);
    c.ok(&format!("TOPK.RESERVE {} 3", key("default")));
    c.ok(&format!("TOPK.ADD {} a b c d a", key("default")));
    c.ok(&format!("TOPK.RESERVE {} 5 20 3 1", key("exact")));
    c.ok(&format!("TOPK.INCRBY {} a 5 b 7 c 100000", key("exact")));
    c.ok(&format!("COPY {hot} {}", key("copied")));
    let dump = c.call(&["DUMP", &hot]).as_bytes().to_vec();
    let restore = [b"RESTORE".to_vec(), key("restored").into_bytes(), b"0".to_vec(), dump];
    assert_eq!(c.call(&restore), Reply::Simple("OK".into()));
    ["hot", "default", "exact", "copied", "restored"].iter().map(|n| key(n)).collect()
}

fn snapshot(c: &mut Conn, keys: &[String]) -> Vec<Reply> {
    let mut items = pool(80);
    items.push(Vec::new());
    items.push(vec![0, 1, 0, 255]);
    let mut out = Vec::new();
    for k in keys {
        out.extend(answers(c, k, &items));
        out.push(c.call(&["DUMP", k]));
        out.push(c.call(&["DEBUG", "DIGEST-VALUE", k]));
    }
    out
}

#[test]
fn rdb_save_restart_and_debug_reload() {
    for server in SERVERS {
        let mut s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        let keys = write_everything(&mut c, "r");
        let before = (c.digest(), snapshot(&mut c, &keys));
        assert_eq!(c.call(&["DUMP", "r:hot"]), c.call(&["DUMP", "r:copied"]), "{server:?}: COPY is exact");
        c.ok("DEBUG RELOAD");
        assert_eq!((c.digest(), snapshot(&mut c, &keys)), before, "{server:?}: DEBUG RELOAD");
        c.ok("SAVE");
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!((c.digest(), snapshot(&mut c, &keys)), before, "{server:?}: restart");
        // And it keeps working the same as a twin that never reloaded.
        let mut twin = TestServer::with_bloomkit(server);
        let mut t = twin.conn();
        write_everything(&mut t, "r");
        for conn in [&mut c, &mut t] {
            write_everything(conn, "more");
            conn.ok("TOPK.ADD r:hot item1 item2 item77 item50");
        }
        assert_eq!(c.digest(), t.digest(), "{server:?}: reloaded and never reloaded agree");
        twin.kill();
    }
}

#[test]
fn aof_replay_rewrite_and_restart() {
    for server in SERVERS {
        for preamble in [false, true] {
            let context = format!("{server:?}, preamble {preamble}");
            let mut s = TestServer::start(server, &[Module::bloomkit()], &aof_args(preamble));
            let mut c = s.conn();
            c.wait_for_aof_rewrite(Duration::from_secs(30));
            let mut keys = write_everything(&mut c, "a");
            let before = (c.digest(), snapshot(&mut c, &keys));
            s.restart(&[]);
            let mut c = s.conn();
            assert_eq!((c.digest(), snapshot(&mut c, &keys)), before, "{context}: replayed AOF");
            c.ok("BGREWRITEAOF");
            c.wait_for_aof_rewrite(Duration::from_secs(30));
            keys.extend(write_everything(&mut c, "b"));
            let before = (c.digest(), snapshot(&mut c, &keys));
            s.restart(&[]);
            let mut c = s.conn();
            assert_eq!((c.digest(), snapshot(&mut c, &keys)), before, "{context}: rewritten AOF");
            if !preamble {
                let text = s.base_aof();
                assert!(text.windows(7).any(|w| w == b"RESTORE"), "{context}: rewrite emits RESTORE");
            }
        }
    }
}

#[test]
fn replicas_end_identical_to_their_primary() {
    for server in SERVERS {
        let primary = TestServer::with_bloomkit(server);
        let mut p = primary.conn();
        let mut keys = write_everything(&mut p, "early");
        // The replica has a far smaller size limit: what the primary
        // accepted must still arrive identically.
        let replica_module = Module::Bloomkit(["MAX_FILTER_BYTES", "1024"].map(String::from).to_vec());
        let port = primary.port.to_string();
        let mut replica = TestServer::start(server, &[replica_module], &["--replicaof", "127.0.0.1", &port]);
        let mut r = replica.conn();
        r.wait_for_sync(Duration::from_secs(30));
        keys.extend(write_everything(&mut p, "late"));
        assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
        assert_eq!(r.digest(), p.digest(), "{server:?}: full sync then stream");
        assert_eq!(snapshot(&mut r, &keys), snapshot(&mut p, &keys), "{server:?}");
        // TOPK.COUNT is a read: replicas answer it (2.8.2 refuses it there).
        assert_eq!(r.cmd("TOPK.COUNT late:exact a b c"), p.cmd("TOPK.COUNT late:exact a b c"));
        assert!(r.cmd("TOPK.ADD late:exact a").error_text().starts_with("READONLY"));

        let more = drop_link_and_resync(
            &mut p,
            &mut r,
            |p| write_everything(p, "after-drop"),
            &format!("{server:?}"),
        );
        assert_eq!(snapshot(&mut r, &more), snapshot(&mut p, &more), "{server:?}: partial sync");
        drop(p);
        replica.kill();
    }
}

/// `INFO bf` counts Top-K sketches in its `topk` section, and `MEMORY
/// USAGE` is RedisBloom's figure plus the server's own overhead for the key.
#[test]
fn info_counters_and_memory_usage() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("TOPK.RESERVE a 1");
    c.ok("TOPK.ADD a x y z");
    c.ok("TOPK.INCRBY a y 5");
    c.ok("TOPK.QUERY a x y");
    assert_eq!(c.info_field("bf", "bf_topk_sketches"), "1");
    assert_eq!(c.info_field("bf", "bf_topk_bytes"), (2088 + 8 * 8 * 7 + 24).to_string());
    assert_eq!(c.info_field("bf", "bf_topk_units_added"), "8");
    // x into the empty slot; y expels x, z expels y, y's 5 expel z.
    assert_eq!(c.info_field("bf", "bf_topk_items_expelled"), "3");
    assert_eq!(c.info_field("bf", "bf_topk_lookups"), "2");
    // Key `a`: 8 bytes of sds and 24 of dict entry, as for RedisBloom.
    assert_eq!(c.cmd("MEMORY USAGE a"), Reply::Int(2088 + 448 + 24 + 8 + 24));
    c.ok("DEL a");
    assert_eq!(c.info_field("bf", "bf_topk_sketches"), "0");
    assert_eq!(c.info_field("bf", "bf_topk_bytes"), "0");
}
