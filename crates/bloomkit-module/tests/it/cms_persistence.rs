//! Count-Min Sketches lose nothing across save and restart, AOF replay, AOF
//! rewrite (with and without the RDB preamble) and replication (full sync
//! and the stream), on Redis 7.0 and Valkey 9: `DEBUG DIGEST` stays equal,
//! and so do the answers. Also bloomkit's own additions and fixes: COPY,
//! MEMORY USAGE, WATCH after CMS.INCRBY, INFO counters, the maxmemory guard.

use std::time::Duration;

use bloomkit_testkit::{aof_args, Conn, Module, Reply, Server, TestServer};

const SERVERS: [Server; 2] = [Server::Redis, Server::Valkey];

/// Writes of every kind; returns (key, item, estimate) triples to check.
fn write_everything(c: &mut Conn, tag: &str) -> Vec<(String, String, i64)> {
    let dim = format!("{tag}:dim");
    let prob = format!("{tag}:prob");
    c.ok(&format!("CMS.INITBYDIM {dim} 500 4"));
    c.ok(&format!("CMS.INITBYPROB {prob} 0.002 0.01"));
    for round in 0..20 {
        let mut cmd = vec!["CMS.INCRBY".to_string(), dim.clone()];
        for i in 0..50 {
            cmd.push(format!("{tag}-{i}"));
            cmd.push((round + 1).to_string());
        }
        c.call(&cmd);
    }
    c.call(&["CMS.INCRBY", &dim, "sat", "4294967296"]);
    // A total past 2^63 (INFO shows it negative).
    c.ok(&format!("CMS.INITBYDIM {tag}:huge 100 2"));
    c.call(&["CMS.INCRBY", &format!("{tag}:huge"), "huge", "9223372036854775807", "huge", "9"]);
    let binary = vec![0u8, 1, 2, 255, 13, 10];
    c.call(&[b"CMS.INCRBY".to_vec(), prob.clone().into_bytes(), binary, b"7".to_vec()]);
    c.call(&["CMS.INCRBY", &prob, "p", "11"]);
    let merged = format!("{tag}:merged");
    c.ok(&format!("CMS.INITBYDIM {merged} 500 4"));
    c.ok(&format!("CMS.MERGE {merged} 2 {dim} {dim} WEIGHTS 1 0"));
    c.ok(&format!("COPY {prob} {tag}:copied"));
    let mut expect = Vec::new();
    for (key, item) in
        [(&dim, format!("{tag}-3")), (&dim, "sat".into()), (&prob, "p".into()), (&merged, format!("{tag}-9"))]
    {
        let v = c.call(&["CMS.QUERY", key, &item]).as_array()[0].as_int();
        expect.push((key.clone(), item, v));
    }
    expect.push((format!("{tag}:copied"), "p".into(), 11));
    expect
}

fn assert_answers(c: &mut Conn, expect: &[(String, String, i64)], context: &str) {
    for (key, item, v) in expect {
        let got = c.call(&["CMS.QUERY", key, item]);
        assert_eq!(got.as_array()[0].as_int(), *v, "{context}: {key} {item}");
    }
}

#[test]
fn rdb_save_and_restart() {
    for server in SERVERS {
        let mut s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        let expect = write_everything(&mut c, "r");
        let before = c.digest();
        let info = c.cmd("CMS.INFO r:huge");
        assert!(info.as_array()[5].as_int() < 0, "{server:?}: a count past 2^63 prints signed: {info:?}");
        c.ok("SAVE");
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!(c.digest(), before, "{server:?}");
        assert_eq!(c.cmd("CMS.INFO r:huge"), info, "{server:?}");
        assert_answers(&mut c, &expect, "after RDB restart");
        c.ok("DEBUG RELOAD");
        assert_eq!(c.digest(), before, "{server:?}: DEBUG RELOAD");
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
            let mut expect = write_everything(&mut c, "a");
            let before = c.digest();
            s.restart(&[]);
            let mut c = s.conn();
            assert_eq!(c.digest(), before, "{context}: replayed AOF");
            c.ok("BGREWRITEAOF");
            c.wait_for_aof_rewrite(Duration::from_secs(30));
            expect.extend(write_everything(&mut c, "b"));
            let before = c.digest();
            s.restart(&[]);
            let mut c = s.conn();
            assert_eq!(c.digest(), before, "{context}: rewritten AOF");
            assert_answers(&mut c, &expect, &context);
            if !preamble {
                let text = s.base_aof();
                assert!(text.windows(7).any(|w| w == b"RESTORE"), "{context}: rewrite emits RESTORE");
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
        // The replica's size limit is far smaller: what the primary
        // accepted must still arrive identically.
        let replica_module = Module::Bloomkit(["MAX_FILTER_BYTES", "1024"].map(String::from).to_vec());
        let port = primary.port.to_string();
        let mut replica = TestServer::start(server, &[replica_module], &["--replicaof", "127.0.0.1", &port]);
        let mut r = replica.conn();
        r.wait_for_sync(Duration::from_secs(30));
        let late = write_everything(&mut p, "late");
        // Refused and partly failing writes replicate nothing harmful.
        assert!(p.cmd("CMS.INCRBY late:dim a 1 b -1").is_error());
        assert!(p.cmd("CMS.MERGE late:merged 1 late:prob").is_error());
        assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
        assert_eq!(r.digest(), p.digest(), "{server:?}: full sync then stream");
        assert_answers(&mut r, &early, "full sync");
        assert_answers(&mut r, &late, "replication stream");
        assert_eq!(r.cmd("CMS.INFO late:dim"), p.cmd("CMS.INFO late:dim"), "{server:?}");
        drop(p);
        replica.kill();
    }
}

/// COPY (RedisBloom refuses it), MEMORY USAGE (the real size), DEBUG
/// DIGEST-VALUE, and the `cms` section of `INFO bf`.
#[test]
fn copy_memory_usage_digest_and_info() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("CMS.INITBYDIM a 10 3");
    c.cmd("CMS.INCRBY a x 1 y 2");
    // 32 + 4 * 10 * 3, the key's sds (8) and its dict entry (24).
    assert_eq!(c.cmd("MEMORY USAGE a"), Reply::Int(152 + 8 + 24));
    assert_eq!(c.cmd("COPY a b"), Reply::Int(1));
    let digest = c.call(&["DEBUG", "DIGEST-VALUE", "a"]);
    assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", "b"]), digest);
    c.cmd("CMS.INCRBY b x 1");
    assert_ne!(c.call(&["DEBUG", "DIGEST-VALUE", "b"]), digest, "the copy is independent");
    assert_eq!(c.cmd("CMS.QUERY a x").as_array()[0].as_int(), 1);
    assert_eq!(c.cmd("CMS.QUERY b x").as_array()[0].as_int(), 2);
    c.cmd("CMS.QUERY a x y z");
    c.ok("CMS.MERGE a 1 b");
    assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", "a"]), c.call(&["DEBUG", "DIGEST-VALUE", "b"]));
    assert_eq!(c.info_field("bf", "bf_cms_sketches"), "2");
    assert_eq!(c.info_field("bf", "bf_cms_bytes"), "304");
    assert_eq!(c.info_field("bf", "bf_cms_increments"), "3");
    assert_eq!(c.info_field("bf", "bf_cms_queries"), "5");
    assert_eq!(c.info_field("bf", "bf_cms_merges"), "1");
    c.ok("CONFIG SET bf.max-filter-bytes 1000");
    assert!(c.cmd("CMS.INITBYDIM big 100 3").error_text().contains("bf.max-filter-bytes"));
    assert_eq!(c.info_field("bf", "bf_cms_refused_creations"), "1");
    c.ok("DEL a b");
    assert_eq!(c.info_field("bf", "bf_cms_sketches"), "0");
    assert_eq!(c.info_field("bf", "bf_cms_bytes"), "0");
}

/// CMS.INCRBY changes its key, so a transaction watching it fails (2.8.2
/// opened the key read-only and let EXEC run).
#[test]
fn incrby_invalidates_watch() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    let mut other = s.conn();
    c.ok("CMS.INITBYDIM k 10 2");
    c.ok("WATCH k");
    other.cmd("CMS.INCRBY k a 1");
    c.ok("MULTI");
    c.cmd("CMS.QUERY k a");
    assert_eq!(c.cmd("EXEC"), Reply::Nil, "EXEC must abort");
}

/// Under `maxmemory` (noeviction), a sketch that would pass it is refused
/// before anything is allocated; smaller ones are created.
#[test]
fn creation_past_maxmemory_is_refused() {
    let s = TestServer::start(Server::Redis, &[Module::bloomkit()], &["--maxmemory", "20mb"]);
    let mut c = s.conn();
    let reply = c.cmd("CMS.INITBYDIM big 10000000 1");
    assert_eq!(reply.error_text(), "OOM command not allowed when used memory > 'maxmemory'.");
    assert_eq!(c.cmd("EXISTS big"), Reply::Int(0));
    assert!(c.info_field("bf", "bf_maxmemory_refusals").parse::<u64>().unwrap() >= 1);
    c.ok("CMS.INITBYDIM small 1000 5");
    assert_eq!(c.cmd("CMS.INCRBY small a 1").as_array()[0].as_int(), 1);
}

/// CMS.MERGE declares its sources (a second key spec, counted by
/// numKeys): `COMMAND GETKEYS` lists them on every server, so a cluster that
/// routes by key specs checks their slots too; the weights are not keys.
#[test]
fn merge_declares_its_sources_as_keys() {
    for server in Server::ALL {
        let s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        let keys = |c: &mut Conn, line: &str| -> Vec<Reply> { c.cmd(line).as_array().to_vec() };
        let bulk = |k: &str| Reply::Bulk(k.as_bytes().to_vec());
        assert_eq!(
            keys(&mut c, "COMMAND GETKEYS CMS.MERGE d 2 a b WEIGHTS 1 2"),
            vec![bulk("d"), bulk("a"), bulk("b")],
            "{server:?}"
        );
        assert_eq!(keys(&mut c, "COMMAND GETKEYS CMS.MERGE d 1 a"), vec![bulk("d"), bulk("a")], "{server:?}");
        assert_eq!(keys(&mut c, "COMMAND GETKEYS CMS.QUERY k a b"), vec![bulk("k")], "{server:?}");
    }
}
