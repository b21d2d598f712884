//! Count-Min Sketches and the server around them, bloomkit's own additions
//! and fixes: COPY, MEMORY USAGE, WATCH after CMS.INCRBY, the `INFO bf`
//! counters, the maxmemory guard, MERGE's keys.

use bloomkit_testkit::{per_server, Conn, Module, Reply, Server, TestServer};

/// COPY (RedisBloom refuses it), MEMORY USAGE (the real size), DEBUG
/// DIGEST-VALUE, and the `cms` section of `INFO bf`.
#[test]
fn copy_memory_usage_digest_and_info() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("CMS.INITBYDIM a 10 3");
    c.cmd("CMS.INCRBY a x 1 y 2");
    // What the sketch really takes in jemalloc's size classes (its 32-byte
    // struct and 120 bytes of counters in the 128 class), what the server
    // keeps for a module key beside its name and entry (its object and the
    // module value, 16 bytes each, and the entry's rounding from 24 to 32),
    // the key's sds (8) and its dict entry (24).
    assert_eq!(c.cmd("MEMORY USAGE a"), Reply::Int(32 + 128 + 40 + 8 + 24));
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
    let counted = [
        ("bf_cms_sketches", "2"),
        ("bf_cms_bytes", "320"),
        ("bf_cms_increments", "3"),
        ("bf_cms_queries", "5"),
        ("bf_cms_merges", "1"),
    ];
    c.assert_info("bf", &counted, "two sketches");
    c.ok("CONFIG SET bf.max-filter-bytes 1000");
    assert!(c.cmd("CMS.INITBYDIM big 100 3").error_text().contains("bf.max-filter-bytes"));
    c.assert_info("bf", &[("bf_cms_refused_creations", "1")], "a creation refused");
    c.ok("DEL a b");
    c.assert_info("bf", &[("bf_cms_sketches", "0"), ("bf_cms_bytes", "0")], "deleted");
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

per_server!(merge_declares_its_sources_as_keys: all);
/// CMS.MERGE declares its sources (a second key spec, counted by
/// numKeys): `COMMAND GETKEYS` lists them on every server (clients route by
/// it; the cluster's own slot check is `cluster_keys.rs`'); the weights are
/// not keys.
fn merge_declares_its_sources_as_keys(server: Server) {
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
