//! t-digests lose nothing across save and restart, DEBUG RELOAD, AOF replay
//! and rewrite, and replication (full and partial sync), on Redis 7.0 and
//! Valkey 9: the shared suite (`bloomkit_testkit::persistence`) with the
//! t-digest's fixture; the servers' DEBUG DIGEST stays equal, and so do the
//! answers.
//!
//! Reads and DUMP never change a digest; they owe RedisBloom's compression
//! to the next write, which makes it and announces it (`TDIGEST.CDF key 0`
//! ahead of the write) to replicas and the AOF. Where a compression
//! happens decides later answers; the streams here mix reads with writes,
//! so that a replica or a replayed AOF that compressed elsewhere would show.

use std::time::Duration;

use bloomkit_testkit::persistence::{Family, Written};
use bloomkit_testkit::{aof_args, per_server, Conn, Module, Reply, Server, TestServer};

/// The keys a write makes under its tag, and those that later writes add to.
const KEYS: [&str; 7] = ["0", "1", "2", "m", "one", "reset", "copied"];
const GROWING: [&str; 5] = ["0", "1", "2", "m", "copied"];

struct Tdigest;

impl Family for Tdigest {
    const REWRITE_COMMAND: &'static str = "RESTORE";

    /// Writes of every kind with compressing reads and DUMPs between them.
    fn write(c: &mut Conn, tag: &str) -> Written {
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
        let mut written = Written::keys(&KEYS.map(|k| format!("{tag}:{k}")));
        // One observation is kept.
        written.expect(
            &["TDIGEST.QUANTILE", &format!("{tag}:one"), "0.5"],
            Reply::Array(vec![Reply::Bulk(b"42".to_vec())]),
        );
        written
    }

    fn answers(c: &mut Conn, key: &str) -> Vec<Reply> {
        vec![
            c.call(&["TDIGEST.INFO", key]),
            c.call(&["TDIGEST.QUANTILE", key, "0", "0.1", "0.5", "0.9", "1"]),
            c.call(&["TDIGEST.CDF", key, "3", "25", "49"]),
        ]
    }

    /// Reads first: they owe compressions, which the next writes make and
    /// log ahead of themselves. After a rewrite (which saves compressed
    /// digests while the live ones keep their buffers, each owing that
    /// compression to its next write) the server and a restart from the new
    /// AOF must go on from the same point.
    fn settle(c: &mut Conn, written: &Written) {
        for key in &written.keys {
            Tdigest::answers(c, key);
        }
        for key in written.keys.iter().filter(|k| GROWING.iter().any(|g| k.ends_with(&format!(":{g}")))) {
            c.ok(&format!("TDIGEST.ADD {key} 7 8 9 10"));
        }
    }

    fn replica_module() -> Module {
        Module::bloomkit()
    }

    fn before_replica(p: &mut Conn, _written: &Written) {
        for key in GROWING {
            p.ok(&format!("TDIGEST.CDF early:{key} 0"));
        }
    }

    /// Reads and DUMPs on the replica must not change it; an ADD cut short
    /// by an overflow reaches the replica as the part that ran.
    fn stream(p: &mut Conn, r: &mut Conn, context: &str) -> Written {
        for key in ["0", "1", "2"] {
            p.ok(&format!("TDIGEST.ADD late:{key} 1 2 3 4 5 6 7 8 9"));
            // The replica has what the primary wrote before it is read.
            assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1), "{context}");
            r.ok(&format!("TDIGEST.QUANTILE late:{key} 0.5"));
            r.ok(&format!("DUMP late:{key}"));
        }
        p.ok("TDIGEST.CREATE big COMPRESSION 10");
        p.ok("TDIGEST.ADD big 1");
        for _ in 0..64 {
            p.call(&["TDIGEST.MERGE", "big", "2", "big", "big"]);
        }
        p.ok("TDIGEST.ADD big 5 6 7");
        Written::keys(&["big"])
    }

    fn promoted(r: &mut Conn, _context: &str) {
        r.ok("TDIGEST.ADD late:m 1");
    }
}

bloomkit_testkit::persistence_suite!(Tdigest);

per_server!(snapshots_of_buffered_digests_stay_identical);
/// Issue 31's divergence: a full sync, or an AOF rewrite, taken while a
/// digest holds unmerged values wrote its compressed form; the primary
/// kept its buffer, and answered 19.603070175438599 where the replica or a
/// restart answered 18.321402483564647 forever after. A snapshot now
/// counts as a read: the primary's next write makes that compression and
/// announces it, so the replica, a restart from the rewritten AOF and the
/// primary answer the same, and hold the same values, from then on.
fn snapshots_of_buffered_digests_stay_identical(server: Server) {
    let first: Vec<String> = (0..100).map(|i| ((i * i) % 97).to_string()).collect();
    let later: Vec<String> = (0..60).map(|i| ((i * 7) % 13).to_string()).collect();
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

per_server!(memory_usage_is_the_same_after_a_save_and_restart);
/// RedisBloom's `test_save_load`: a digest with its buffer full of values,
/// saved (SAVE, in the server's own process) and restarted, comes back
/// compressed with the same `MEMORY USAGE`, minimum and maximum: the save
/// writes the compressed form without keeping a copy of it.
fn memory_usage_is_the_same_after_a_save_and_restart(server: Server) {
    let mut s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("TDIGEST.CREATE t");
    for _ in 0..100 {
        c.ok("TDIGEST.ADD t 1.0");
    }
    c.ok("SAVE");
    let before = c.cmd("MEMORY USAGE t");
    let (min, max) = (c.cmd("TDIGEST.MIN t"), c.cmd("TDIGEST.MAX t"));
    s.restart(&[]);
    let mut c = s.conn();
    let info = c.cmd("TDIGEST.INFO t");
    let fields = info.as_array();
    let at = fields.iter().position(|f| matches!(f, Reply::Simple(n) if n == "Merged weight")).unwrap();
    assert_eq!(fields[at + 1].as_int(), 100, "saved compressed: {info:?}");
    assert_eq!(c.cmd("MEMORY USAGE t"), before);
    assert_eq!((c.cmd("TDIGEST.MIN t"), c.cmd("TDIGEST.MAX t")), (min, max));
}
