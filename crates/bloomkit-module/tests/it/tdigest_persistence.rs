//! t-digests lose nothing across save and restart, AOF replay and rewrite,
//! and replication, on Redis 7.0 and Valkey 9: the servers' DEBUG DIGEST
//! stays equal, and so do the answers.
//!
//! Reads and DUMP never change a digest; they owe RedisBloom's compression
//! to the next write, which makes it and announces it (`TDIGEST.CDF key 0`
//! ahead of the write) to replicas and the AOF. Where a compression
//! happens decides later answers; the streams here mix reads with writes,
//! so that a replica or a replayed AOF that compressed elsewhere would show.

use std::time::Duration;

use bloomkit_testkit::{aof_args, drop_link_and_resync, Conn, Module, Reply, Server, TestServer};

const SERVERS: [Server; 2] = [Server::Redis, Server::Valkey];

/// Writes of every kind with compressing reads and DUMPs between them.
fn write_everything(c: &mut Conn, tag: &str) {
    for (i, compression) in [1, 5, 100].into_iter().enumerate() {
        let key = format!("{tag}:{i}");
        c.ok(&format!("TDIGEST.CREATE {key} COMPRESSION {compression}"));
        for round in 0..30 {
            let values: Vec<String> = (0..7).map(|j| ((round * 13 + j * 7) % 50).to_string()).collect();
            c.ok(&format!("TDIGEST.ADD {key} {}", values.join(" ")));
            match round % 6 {
                0 => c.ok(&format!("TDIGEST.QUANTILE {key} 0.5")),
                1 => c.ok(&format!("DUMP {key}")),
                2 => c.ok(&format!("TDIGEST.RANK {key} 20")),
                3 => c.ok(&format!("TDIGEST.BYRANK {key} 3")),
                4 => c.ok(&format!("TDIGEST.TRIMMED_MEAN {key} 0.1 0.9")),
                _ => c.ok(&format!("TDIGEST.CDF {key} 7")),
            };
        }
    }
    c.ok(&format!("TDIGEST.MERGE {tag}:m 3 {tag}:0 {tag}:1 {tag}:2"));
    c.ok(&format!("TDIGEST.ADD {tag}:m 1 2 3"));
    c.ok(&format!("TDIGEST.CREATE {tag}:one"));
    c.ok(&format!("TDIGEST.ADD {tag}:one 42"));
    c.ok(&format!("TDIGEST.CREATE {tag}:reset COMPRESSION 3"));
    c.ok(&format!("TDIGEST.ADD {tag}:reset 1 2 3"));
    c.ok(&format!("TDIGEST.RESET {tag}:reset"));
    c.ok(&format!("COPY {tag}:m {tag}:copied"));
}

fn answers(c: &mut Conn, tag: &str) -> Vec<Reply> {
    let mut out = Vec::new();
    for key in ["0", "1", "2", "m", "one", "reset", "copied"] {
        let key = format!("{tag}:{key}");
        out.push(c.call(&["TDIGEST.INFO", &key]));
        out.push(c.call(&["TDIGEST.QUANTILE", &key, "0", "0.1", "0.5", "0.9", "1"]));
        out.push(c.call(&["TDIGEST.CDF", &key, "3", "25", "49"]));
    }
    out
}

#[test]
fn save_and_restart() {
    for server in SERVERS {
        let mut s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        write_everything(&mut c, "r");
        // SAVE compresses the live digests (as RedisBloom's does): the
        // digest to compare is taken after it.
        c.ok("SAVE");
        let before = c.digest();
        let info = c.cmd("TDIGEST.INFO r:m");
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!(c.digest(), before, "{server:?}");
        assert_eq!(c.cmd("TDIGEST.INFO r:m"), info, "{server:?}");
        c.ok("DEBUG RELOAD");
        assert_eq!(c.digest(), before, "{server:?}: DEBUG RELOAD");
        let text = format!("{:?}", c.cmd("TDIGEST.QUANTILE r:one 0.5"));
        assert_eq!(text, "[\"42\"]", "{server:?}: one observation kept");
    }
}

#[test]
fn aof_replay_and_rewrite() {
    for server in SERVERS {
        for preamble in [false, true] {
            let context = format!("{server:?}, preamble {preamble}");
            let mut s = TestServer::start(server, &[Module::bloomkit()], &aof_args(preamble));
            let mut c = s.conn();
            c.wait_for_aof_rewrite(Duration::from_secs(30));
            write_everything(&mut c, "a");
            // Reads first: they owe compressions, which the next writes
            // make and log ahead of themselves.
            answers(&mut c, "a");
            for key in ["0", "1", "2", "m", "copied"] {
                c.ok(&format!("TDIGEST.ADD a:{key} 7"));
            }
            let replies = answers(&mut c, "a");
            let before = c.digest();
            s.restart(&[]);
            let mut c = s.conn();
            assert_eq!(c.digest(), before, "{context}: replayed AOF (owed compressions announced there)");
            assert_eq!(answers(&mut c, "a"), replies, "{context}");
            // A rewrite saves compressed digests, as RedisBloom's does,
            // while the live ones keep their buffers: each owes that
            // compression to its next write, so the server and a restart
            // from the new AOF go on from the same point.
            c.ok("BGREWRITEAOF");
            c.wait_for_aof_rewrite(Duration::from_secs(30));
            write_everything(&mut c, "b");
            for key in ["0", "1", "2", "m", "copied"] {
                c.ok(&format!("TDIGEST.ADD a:{key} 8 9 10"));
            }
            let before = c.digest();
            let replies = answers(&mut c, "a");
            s.restart(&[]);
            let mut c = s.conn();
            assert_eq!(c.digest(), before, "{context}: rewritten AOF");
            assert_eq!(answers(&mut c, "a"), replies, "{context}: rewritten AOF, INFO included");
            if !preamble {
                let text = s.base_aof();
                assert!(text.windows(7).any(|w| w == b"RESTORE"), "{context}: rewrite emits RESTORE");
            }
        }
    }
}

#[test]
fn replicas_stay_identical() {
    for server in SERVERS {
        let primary = TestServer::with_bloomkit(server);
        let mut p = primary.conn();
        write_everything(&mut p, "early");
        for key in ["0", "1", "2", "m", "copied"] {
            p.ok(&format!("TDIGEST.CDF early:{key} 0"));
        }
        let port = primary.port.to_string();
        let mut replica =
            TestServer::start(server, &[Module::bloomkit()], &["--replicaof", "127.0.0.1", &port]);
        let mut r = replica.conn();
        r.wait_for_sync(Duration::from_secs(30));
        assert_eq!(r.digest(), p.digest(), "{server:?}: full sync");
        // The stream: writes, compressing reads and DUMPs on the primary;
        // reads and DUMPs on the replica that must not change it.
        write_everything(&mut p, "late");
        for key in ["0", "1", "2"] {
            p.ok(&format!("TDIGEST.ADD late:{key} 1 2 3 4 5 6 7 8 9"));
            // The replica has what the primary wrote before it is read.
            assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1), "{server:?}");
            r.ok(&format!("TDIGEST.QUANTILE late:{key} 0.5"));
            r.ok(&format!("DUMP late:{key}"));
        }
        // An ADD cut short by an overflow reaches the replica as the part that ran.
        p.ok("TDIGEST.CREATE big COMPRESSION 10");
        p.ok("TDIGEST.ADD big 1");
        for _ in 0..64 {
            p.call(&["TDIGEST.MERGE", "big", "2", "big", "big"]);
        }
        let cut = p.cmd("TDIGEST.ADD big 5 6 7");
        assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
        assert_eq!(r.digest(), p.digest(), "{server:?}: stream ({cut:?})");
        assert_eq!(answers(&mut r, "late"), answers(&mut p, "late"), "{server:?}");
        assert_eq!(r.cmd("TDIGEST.INFO big"), p.cmd("TDIGEST.INFO big"), "{server:?}");

        drop_link_and_resync(&mut p, &mut r, |p| write_everything(p, "after-drop"), &format!("{server:?}"));
        r.ok("REPLICAOF NO ONE");
        r.ok("TDIGEST.ADD late:m 1");
        drop(p);
        replica.kill();
    }
}

/// `INFO bf` counts t-digests, and `MEMORY USAGE` is `8 + 16 * capacity`
/// plus the server's overhead for the key, as for RedisBloom.
#[test]
fn info_counters_and_memory_usage() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("TDIGEST.CREATE a");
    c.ok("TDIGEST.ADD a 1 2 3");
    c.ok("TDIGEST.QUANTILE a 0.5");
    assert_eq!(c.info_field("bf", "bf_tdigest_digests"), "1");
    assert_eq!(c.info_field("bf", "bf_tdigest_bytes"), "9768");
    assert_eq!(c.info_field("bf", "bf_tdigest_observations_added"), "3");
    assert_eq!(c.info_field("bf", "bf_tdigest_queries"), "1");
    // The read owes its compression; the next write makes and sends it.
    assert_eq!(c.info_field("bf", "bf_tdigest_compressions_replicated"), "0");
    c.ok("TDIGEST.ADD a 4");
    assert_eq!(c.info_field("bf", "bf_tdigest_compressions_replicated"), "1");
    assert_eq!(c.info_field("bf", "bf_tdigest_observations_added"), "4");
    assert_eq!(c.cmd("MEMORY USAGE a").as_int(), 9768 + 8 + 24);
    c.ok("COPY a b");
    assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", "a"]), c.call(&["DEBUG", "DIGEST-VALUE", "b"]));
    c.ok("TDIGEST.ADD b 4");
    assert_ne!(c.call(&["DEBUG", "DIGEST-VALUE", "a"]), c.call(&["DEBUG", "DIGEST-VALUE", "b"]));
    c.ok("DEL a b");
    assert_eq!(c.info_field("bf", "bf_tdigest_digests"), "0");
    // MERGE's sources are declared keys (cluster routing, cross-slot checks).
    let keys = c.cmd("COMMAND GETKEYS TDIGEST.MERGE d 2 a b COMPRESSION 5");
    assert_eq!(format!("{keys:?}"), r#"["d", "a", "b"]"#);
    assert_eq!(c.info_field("bf", "bf_tdigest_bytes"), "0");
}

/// Issue 31's divergence: a full sync, or an AOF rewrite, taken while a
/// digest holds unmerged values wrote its compressed form; the primary
/// kept its buffer, and answered 19.603070175438599 where the replica or a
/// restart answered 18.321402483564647 forever after. A snapshot now
/// counts as a read: the primary's next write makes that compression and
/// announces it, so the replica, a restart from the rewritten AOF and the
/// primary answer the same, and hold the same values, from then on.
#[test]
fn snapshots_of_buffered_digests_stay_identical() {
    let first: Vec<String> = (0..100).map(|i| ((i * i) % 97).to_string()).collect();
    let later: Vec<String> = (0..60).map(|i| ((i * 7) % 13).to_string()).collect();
    for server in SERVERS {
        // Full sync.
        let primary = TestServer::with_bloomkit(server);
        let mut p = primary.conn();
        p.ok("TDIGEST.CREATE td COMPRESSION 20");
        p.ok(&format!("TDIGEST.ADD td {}", first.join(" ")));
        assert!(format!("{:?}", p.cmd("TDIGEST.INFO td")).contains(r#""Unmerged nodes", 100"#), "{server:?}");
        let port = primary.port.to_string();
        let replica = TestServer::start(server, &[Module::bloomkit()], &["--replicaof", "127.0.0.1", &port]);
        let mut r = replica.conn();
        r.wait_for_sync(Duration::from_secs(30));
        assert_eq!(r.digest(), p.digest(), "{server:?}: right after the full sync");
        p.ok(&format!("TDIGEST.ADD td {}", later.join(" ")));
        assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
        // INFO first: after a read, a primary's INFO shows the compression
        // the read owes (as RedisBloom's), which its replicas get with the
        // next write.
        assert_eq!(r.cmd("TDIGEST.INFO td"), p.cmd("TDIGEST.INFO td"), "{server:?}");
        let q = p.cmd("TDIGEST.QUANTILE td 0.5");
        assert_eq!(
            format!("{q:?}"),
            r#"["18.321402483564647"]"#,
            "{server:?}: compressed where the snapshot was"
        );
        assert_eq!(r.cmd("TDIGEST.QUANTILE td 0.5"), q, "{server:?}: the replica");
        assert_eq!(r.call(&["DUMP", "td"]), p.call(&["DUMP", "td"]), "{server:?}");
        assert_eq!(r.digest(), p.digest(), "{server:?}");
        p.ok("TDIGEST.ADD td 1");
        assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
        assert_eq!(
            r.cmd("TDIGEST.INFO td"),
            p.cmd("TDIGEST.INFO td"),
            "{server:?}: the owed compression arrived"
        );
        assert_eq!(r.digest(), p.digest(), "{server:?}");

        // AOF rewrite (with and without the RDB preamble), then a restart.
        for preamble in [false, true] {
            let context = format!("{server:?}, preamble {preamble}");
            let mut s = TestServer::start(server, &[Module::bloomkit()], &aof_args(preamble));
            let mut c = s.conn();
            c.wait_for_aof_rewrite(Duration::from_secs(30));
            c.ok("TDIGEST.CREATE td COMPRESSION 20");
            c.ok(&format!("TDIGEST.ADD td {}", first.join(" ")));
            c.ok("BGREWRITEAOF");
            c.wait_for_aof_rewrite(Duration::from_secs(30));
            c.ok(&format!("TDIGEST.ADD td {}", later.join(" ")));
            let info = c.cmd("TDIGEST.INFO td");
            let (q, dump, digest) = (c.cmd("TDIGEST.QUANTILE td 0.5"), c.call(&["DUMP", "td"]), c.digest());
            assert_eq!(
                format!("{q:?}"),
                r#"["18.321402483564647"]"#,
                "{context}: compressed where the rewrite was"
            );
            s.restart(&[]);
            let mut c = s.conn();
            assert_eq!(c.cmd("TDIGEST.INFO td"), info, "{context}");
            assert_eq!(c.cmd("TDIGEST.QUANTILE td 0.5"), q, "{context}: after the restart");
            assert_eq!(c.call(&["DUMP", "td"]), dump, "{context}");
            assert_eq!(c.digest(), digest, "{context}");
        }
    }
}
