//! Cuckoo filters lose nothing across save and restart, AOF replay, AOF
//! rewrite and replication (full and partial sync), on Redis 7.0 and
//! Valkey 9: the servers' DEBUG DIGEST stays equal, and so do the answers.

use crate::cf_support;

use std::time::Duration;

use bloomkit_testkit::{aof_args, drop_link_and_resync, Conn, Module, Reply, Server, TestServer};
use cf_support::{cf_loadchunks, cf_scandump, mexists};

const SERVERS: [Server; 2] = [Server::Redis, Server::Valkey];

/// Writes of every kind; returns (key, item) pairs that must stay present.
fn write_everything(c: &mut Conn, tag: &str) -> Vec<(String, String)> {
    let mut present = Vec::new();
    let grown = format!("{tag}:grown");
    c.ok(&format!("CF.RESERVE {grown} 64 BUCKETSIZE 2 MAXITERATIONS 10 EXPANSION 2"));
    for i in 0..400 {
        let item = format!("{tag}-{i}");
        c.call(&["CF.ADD", &grown, &item]);
        present.push((grown.clone(), item));
    }
    // Deletes (with the compaction they trigger) and explicit compaction.
    for i in 0..60 {
        c.call(&["CF.DEL", &grown, &format!("{tag}-{i}")]);
    }
    present.drain(..60);
    c.ok(&format!("CF.COMPACT {grown}"));
    let fixed = format!("{tag}:fixed");
    c.ok(&format!("CF.RESERVE {fixed} 100 BUCKETSIZE 4 EXPANSION 0"));
    let items: Vec<String> = (0..80).map(|i| format!("f{i}")).collect();
    let mut insert = vec!["CF.INSERTNX".to_string(), fixed.clone(), "ITEMS".to_string()];
    insert.extend(items.iter().cloned());
    c.call(&insert);
    present.extend(items.iter().map(|i| (fixed.clone(), i.clone())));
    // Created by each write command, from defaults.
    c.ok(&format!("CF.ADD {tag}:implicit-add x"));
    c.ok(&format!("CF.ADDNX {tag}:implicit-addnx x"));
    c.ok(&format!("CF.INSERT {tag}:implicit-insert CAPACITY 20 ITEMS a b c a"));
    for key in ["implicit-add", "implicit-addnx"] {
        present.push((format!("{tag}:{key}"), "x".into()));
    }
    present.push((format!("{tag}:implicit-insert"), "c".into()));
    let binary = vec![0u8, 1, 2, 255, 13, 10];
    c.call(&[b"CF.ADD".to_vec(), grown.clone().into_bytes(), binary]);
    // A copy made with LOADCHUNK, and one with COPY.
    let chunks = cf_scandump(c, &grown).unwrap();
    cf_loadchunks(c, &format!("{tag}:chunked"), &chunks);
    present.push((format!("{tag}:chunked"), format!("{tag}-77")));
    c.ok(&format!("COPY {grown} {tag}:copied"));
    present.push((format!("{tag}:copied"), format!("{tag}-78")));
    present
}

fn assert_present(c: &mut Conn, present: &[(String, String)], context: &str) {
    for (key, item) in present {
        assert_eq!(c.call(&["CF.EXISTS", key, item]).as_int(), 1, "{context}: {key} {item}");
    }
}

#[test]
fn rdb_save_and_restart() {
    for server in SERVERS {
        let mut s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        let present = write_everything(&mut c, "r");
        let before = c.digest();
        let info = c.cmd("CF.INFO r:grown");
        c.ok("SAVE");
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!(c.digest(), before, "{server:?}");
        assert_eq!(c.cmd("CF.INFO r:grown"), info, "{server:?}");
        assert_present(&mut c, &present, "after RDB restart");
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
            let mut present = write_everything(&mut c, "a");
            let before = c.digest();
            s.restart(&[]);
            let mut c = s.conn();
            assert_eq!(c.digest(), before, "{context}: replayed AOF");
            c.ok("BGREWRITEAOF");
            c.wait_for_aof_rewrite(Duration::from_secs(30));
            present.extend(write_everything(&mut c, "b"));
            let before = c.digest();
            s.restart(&[]);
            let mut c = s.conn();
            assert_eq!(c.digest(), before, "{context}: rewritten AOF");
            assert_present(&mut c, &present, &context);
            if !preamble {
                let text = s.base_aof();
                assert!(
                    text.windows(12).any(|w| w == b"CF.LOADCHUNK"),
                    "{context}: rewrite emits CF.LOADCHUNK"
                );
            }
        }
    }
}

#[test]
fn replicas_answer_exactly_like_their_primary() {
    for server in SERVERS {
        let primary = TestServer::with_bloomkit(server);
        let mut p = primary.conn();
        let early = write_everything(&mut p, "early");
        // The replica has a far smaller size limit: what the primary
        // accepted must still arrive identically.
        let replica_module = Module::Bloomkit(["MAX_FILTER_BYTES", "1024"].map(String::from).to_vec());
        let port = primary.port.to_string();
        let mut replica = TestServer::start(server, &[replica_module], &["--replicaof", "127.0.0.1", &port]);
        let mut r = replica.conn();
        r.wait_for_sync(Duration::from_secs(30));
        let late = write_everything(&mut p, "late");
        p.ok("CF.RESERVE big 100000");
        p.ok("CF.ADD big a");
        // A batch cut short by the primary's limit reaches the replica as
        // the part that ran, not as the whole command.
        p.ok("CONFIG SET bf.max-filter-bytes 2000");
        p.ok("CF.RESERVE capped 64 BUCKETSIZE 1 MAXITERATIONS 1 EXPANSION 4");
        let mut cmd = vec!["CF.INSERT".to_string(), "capped".into(), "ITEMS".into()];
        cmd.extend((0..3000).map(|i| format!("c{i}")));
        let answers = p.call(&cmd);
        assert!(answers.as_array().last().unwrap().is_error(), "{server:?}: the batch hit the limit");
        p.ok("CONFIG SET bf.max-filter-bytes 4294967296");
        assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
        assert_eq!(r.digest(), p.digest(), "{server:?}: full sync then stream");
        assert_eq!(r.cmd("CF.DEBUG capped"), p.cmd("CF.DEBUG capped"), "{server:?}");
        assert_present(&mut r, &early, "full sync");
        assert_present(&mut r, &late, "replication stream");

        // Partial resync after a dropped link.
        let more = drop_link_and_resync(
            &mut p,
            &mut r,
            |p| write_everything(p, "after-drop"),
            &format!("{server:?}"),
        );
        assert_present(&mut r, &more, "partial sync");

        let probe: Vec<String> = (0..500).map(|i| format!("late-{i}")).collect();
        assert_eq!(mexists(&mut r, "late:grown", &probe), mexists(&mut p, "late:grown", &probe));
        assert_eq!(r.cmd("CF.INFO late:implicit-add"), p.cmd("CF.INFO late:implicit-add"));
        r.ok("REPLICAOF NO ONE");
        assert_eq!(r.cmd("CF.ADDNX late:grown late-300").as_int(), 0);
        assert_eq!(r.cmd("CF.ADD late:grown brand-new").as_int(), 1);
        drop(p);
        replica.kill();
    }
}

/// `INFO bf` counts cuckoo filters apart, and `MEMORY USAGE` is `CF.INFO Size`
/// plus the server's own overhead for the key.
#[test]
fn info_counters_and_memory_usage() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("CF.RESERVE a 1000");
    c.ok("CF.INSERT a ITEMS x y z");
    c.ok("CF.DEL a x");
    c.ok("CF.MEXISTS a x y");
    assert_eq!(c.info_field("bf", "bf_cf_filters"), "1");
    assert_eq!(c.info_field("bf", "bf_cf_bytes"), "1080");
    assert_eq!(c.info_field("bf", "bf_cf_items_added"), "3");
    assert_eq!(c.info_field("bf", "bf_cf_items_deleted"), "1");
    assert_eq!(c.info_field("bf", "bf_cf_lookups"), "2");
    assert!(c.cmd("MEMORY USAGE a").as_int() >= 1080);
    c.ok("DEL a");
    assert_eq!(c.info_field("bf", "bf_cf_filters"), "0");
    assert_eq!(c.info_field("bf", "bf_cf_bytes"), "0");
}
