//! Hostile input to `TOPK.*`, and the places where RedisBloom 2.8.2 breaks
//! the server, the protocol or the data: huge k, width and depth (refused
//! before allocating, or failing softly under an address-space limit);
//! `TOPK.INCRBY` with a bad increment mid-way (2.8.2 sends a shorter array
//! than announced); items with NUL bytes (2.8.2 cuts them); damaged DUMP
//! payloads (2.8.2 asserts). Each ends in an error with its reason, or in a
//! sketch that works and round-trips; the server keeps answering and
//! untouched keys keep their digests.

use bloomkit_testkit::hostile::{self, assert_dump_round_trips, assert_refused, restore_damaged, Watch};
use bloomkit_testkit::{per_server, Conn, Module, Reply, Server, TestServer};

/// The module's bystanders plus a sketch, none of which may change.
const BYSTANDER: [&str; 2] = ["TOPK.RESERVE bystander-topk 3 8 2 0.9", "TOPK.ADD bystander-topk a b c a d"];

fn start(server: Server) -> (TestServer, Conn, Watch) {
    hostile::start_watching(server, "bystander-topk", &BYSTANDER)
}

/// A sketch that works: writes, reads and its own dump.
fn exercise(c: &mut Conn, key: &str, what: &str) {
    let commands = [
        vec!["TOPK.ADD", key, "x", "y", "x"],
        vec!["TOPK.INCRBY", key, "x", "3", "z", "100000"],
        vec!["TOPK.QUERY", key, "x", "zz"],
        vec!["TOPK.COUNT", key, "x", "zz"],
        vec!["TOPK.LIST", key, "WITHCOUNT"],
        vec!["TOPK.INFO", key],
    ];
    hostile::exercise_commands(c, key, what, &commands, |_| false);
}

per_server!(huge_parameters_are_refused_before_allocating);
fn huge_parameters_are_refused_before_allocating(server: Server) {
    let (_s, mut c, watch) = start(server);
    let limit = "ERR Insufficient memory to create topk data structure: the Top-K sketch would take";
    assert_refused(
        &mut c,
        &watch,
        &[
            ("TOPK.RESERVE k 4294967295 4294967295 4294967295 1", limit),
            ("TOPK.RESERVE k 4294967295", limit),
            ("TOPK.RESERVE k 1 100000 100000 0.5", limit),
            // 2.8.2 truncates k to 32 bits; 2^32 aborts it.
            ("TOPK.RESERVE k 4294967296", "TopK: invalid k"),
            ("TOPK.RESERVE k 4294967297 8 7 0.9", "TopK: invalid k"),
            ("TOPK.RESERVE k 18446744073709551616", "TopK: invalid k"),
            ("TOPK.RESERVE k 1 4294967296 1 1", "TopK: invalid width"),
        ],
        "huge parameters",
    );
    watch.check(&mut c, "huge parameters");
    // With the limit lifted, the allocation itself fails under the
    // address-space limit: an error reply, never an abort.
    let lifted = ["TOPK.RESERVE k 1 100000 100000 0.5", "TOPK.RESERVE k 4294967295 1 1 1"];
    for e in hostile::refused_past_the_address_space(&mut c, &watch, &lifted) {
        assert_eq!(e, "ERR Insufficient memory to create topk data structure", "{server:?}");
    }
}

/// 2.8.2 announces one element per pair and stops at a bad increment, so
/// the reply is shorter than its header and the client reads the next
/// reply as its missing elements. Here the header counts what is sent.
#[test]
fn incrby_replies_as_many_elements_as_it_announces() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("TOPK.RESERVE k 2 8 3 1");
    let reply = c.cmd("TOPK.INCRBY k a 1 b x c 1");
    let elements = reply.as_array();
    assert_eq!(elements.len(), 2, "{reply:?}");
    assert_eq!(elements[0], Reply::Nil);
    assert_eq!(
        elements[1].error_text(),
        "TopK: increment must be an integer greater or equal to 0                            and smaller or equal to 100,000"
    );
    // The connection is in step; the pair before the bad one was applied.
    assert_eq!(c.cmd("PING"), Reply::Simple("PONG".into()));
    assert_eq!(c.cmd("TOPK.LIST k WITHCOUNT"), Reply::Array(vec![Reply::Bulk(b"a".to_vec()), Reply::Int(1)]));
    assert_eq!(c.cmd("TOPK.INCRBY k b -1").as_array().len(), 1);
}

/// Items are bytes: replies and the RDB value keep them whole (2.8.2 cuts
/// them at the first NUL), and the empty string stays an item.
#[test]
fn items_are_binary_safe() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("TOPK.RESERVE k 1 8 3 1");
    let nul = b"a\0b".to_vec();
    assert_eq!(c.call(&[b"TOPK.ADD".to_vec(), b"k".to_vec(), nul.clone()]), Reply::Array(vec![Reply::Nil]));
    let expelled = c.call(&[&b"TOPK.INCRBY"[..], b"k", b"", b"5"]);
    assert_eq!(expelled, Reply::Array(vec![Reply::Bulk(nul.clone())]));
    c.ok("DEBUG RELOAD");
    assert_eq!(c.cmd("TOPK.LIST k WITHCOUNT"), Reply::Array(vec![Reply::Bulk(Vec::new()), Reply::Int(5)]));
    assert_eq!(
        c.call(&[&b"TOPK.QUERY"[..], b"k", b"", b"a"]),
        Reply::Array(vec![Reply::Int(1), Reply::Int(0)])
    );
    assert_eq!(c.call(&[b"TOPK.ADD".to_vec(), b"k".to_vec(), nul.clone()]), Reply::Array(vec![Reply::Nil]));
    c.call(&[b"TOPK.INCRBY".to_vec(), b"k".to_vec(), nul.clone(), b"9".to_vec()]);
    c.ok("DEBUG RELOAD");
    assert_eq!(c.cmd("TOPK.LIST k"), Reply::Array(vec![Reply::Bulk(nul.clone())]));
    assert_eq!(c.call(&[b"TOPK.QUERY".to_vec(), b"k".to_vec(), nul]), Reply::Array(vec![Reply::Int(1)]));
}

/// RedisBloom 2.8.2 saves an item cut at its first NUL with the whole
/// length: such a value loads here as the text it holds (as RedisBloom 8
/// loads it), listed, matching no query; 2.8.2 reads past its buffer.
#[test]
fn a_redisbloom_value_with_a_cut_item_loads_safely() {
    let rb = TestServer::start(Server::Redis, &[Module::RedisBloom], &[]);
    let mut r = rb.conn();
    r.ok("TOPK.RESERVE k 2 8 3 1");
    r.call(&[&b"TOPK.INCRBY"[..], b"k", b"ab\0cd", b"4"]);
    r.ok("TOPK.ADD k plain");
    let payload = r.call(&["DUMP", "k"]).as_bytes().to_vec();
    let bk = TestServer::with_bloomkit(Server::Redis);
    let mut b = bk.conn();
    assert_eq!(
        b.call(&[b"RESTORE".to_vec(), b"k".to_vec(), b"0".to_vec(), payload]),
        Reply::Simple("OK".into())
    );
    assert_eq!(b.cmd("TOPK.LIST k WITHCOUNT"), r.cmd("TOPK.LIST k WITHCOUNT"));
    assert_eq!(
        b.call(&[&b"TOPK.QUERY"[..], b"k", b"ab", b"plain"]),
        Reply::Array(vec![Reply::Int(0), Reply::Int(1)])
    );
    assert_dump_round_trips(&mut b, "k", "cut item");
}

per_server!(damaged_dump_payloads_are_refused_or_load_a_working_sketch);
fn damaged_dump_payloads_are_refused_or_load_a_working_sketch(server: Server) {
    let (_s, mut c, watch) = start(server);
    c.ok("TOPK.RESERVE src 3 4 2 0.9");
    c.ok("TOPK.ADD src a b c d a e b a");
    let payload = c.call(&["DUMP", "src"]).as_bytes().to_vec();
    let (refused, loaded) = restore_damaged(&mut c, &watch, &payload, "dmg", exercise);
    watch.check(&mut c, "damaged payloads");
    // RESTORE obeys the size limit.
    hostile::restore_refused_by_the_limit(&mut c, &payload, 2000, &format!("{server:?}"));
    watch.check(&mut c, "size limit");
    bloomkit_testkit::figure(&format!(
        "hostile TOPK, {server:?}: damaged DUMP payloads: {refused} refused, {loaded} loaded a working sketch"
    ));
}
