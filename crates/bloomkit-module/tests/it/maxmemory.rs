//! Under `maxmemory`, creating or growing a filter of any type that would
//! take `used_memory` past it is refused before anything is allocated, with
//! the server's own OOM text (RedisBloom accepts it, after which every write
//! fails); `bf.maxmemory-guard no` turns the guard off, `INFO bf` counts the
//! refusals, and replicas and AOF replays of a primary without `maxmemory`
//! still load everything.

use std::time::Duration;

use bloomkit_core::apbf::{Apbf, ApbfParams, Window};
use bloomkit_testkit::{aof_args, per_server, wait_until, Conn, Module, Reply, Server, TestServer};

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

fn used_memory(c: &mut Conn) -> u64 {
    c.info_field("memory", "used_memory").parse().unwrap()
}

fn refusals(c: &mut Conn) -> u64 {
    c.info_field("bf", "bf_maxmemory_refusals").parse().unwrap()
}

per_server!(creations_and_scale_outs_past_maxmemory_are_refused);
fn creations_and_scale_outs_past_maxmemory_are_refused(server: Server) {
    let s = TestServer::start(server, &[Module::bloomkit()], &["--maxmemory", "20mb"]);
    let mut c = s.conn();
    let before = used_memory(&mut c);
    // 180 MB, well under bf.max-filter-bytes: refused for the server's memory.
    for (line, key) in [
        ("BF.RESERVE big 0.001 100000000", "big"),
        ("BF.INSERT big CAPACITY 100000000 ERROR 0.001 ITEMS a", "big"),
        ("CF.RESERVE big 100000000", "big"),
        ("CF.INSERT big CAPACITY 100000000 ITEMS a", "big"),
        ("APBF.RESERVE big 0.001 10000000 COUNT", "big"),
    ] {
        assert_eq!(c.cmd(line), Reply::Error(OOM.into()), "{server:?}: {line}");
        assert_eq!(c.call(&["EXISTS", key]), Reply::Int(0), "{server:?}: {line}");
    }
    assert!(used_memory(&mut c) < before + (1 << 20), "{server:?}: nothing was allocated");
    assert_eq!(refusals(&mut c), 5, "{server:?}");

    // A scale-out past it: the first sub-filter (100 000 items, 120 KB)
    // fits, the next (1024 times larger, 160 MB) would not; what was
    // added stays.
    c.ok("BF.RESERVE grows 0.01 100000 EXPANSION 1024");
    let mut refused_at = None;
    'batches: for batch in 0..200 {
        let mut args = vec!["BF.MADD".to_string(), "grows".to_string()];
        args.extend((0..1000).map(|i| format!("item-{batch}-{i}")));
        for (i, reply) in c.call(&args).as_array().iter().enumerate() {
            if let Reply::Error(e) = reply {
                assert_eq!(e, OOM, "{server:?}");
                refused_at = Some(batch * 1000 + i);
                break 'batches;
            }
        }
    }
    let refused_at = refused_at.expect("the scale-out was refused");
    // Refused when the first sub-filter was full (adds answered 0 for
    // false positives did not fill it).
    assert!((100_000..=101_000).contains(&refused_at), "{server:?}: refused at item {refused_at}");
    assert_eq!(c.cmd("BF.CARD grows"), Reply::Int(100_000), "{server:?}");
    assert_eq!(c.cmd("BF.INFO grows FILTERS"), Reply::Array(vec![Reply::Int(1)]), "{server:?}");
    assert_eq!(c.cmd("BF.EXISTS grows item-0-0"), Reply::Int(1));
    assert_eq!(refusals(&mut c), 6, "{server:?}");

    // A cuckoo filter's growth too: 1 KB, then 32 MB.
    c.ok("CF.RESERVE cgrows 1000 EXPANSION 32768");
    let mut refused = false;
    for batch in 0..20 {
        let mut args = vec!["CF.INSERT".to_string(), "cgrows".to_string(), "ITEMS".to_string()];
        args.extend((0..200).map(|i| format!("c-{batch}-{i}")));
        if c.call(&args).as_array().iter().any(|r| r == &Reply::Error(OOM.into())) {
            refused = true;
            break;
        }
    }
    assert!(refused, "{server:?}: the cuckoo filter's growth was refused");

    // The guard off: the server's own rule only (used_memory below maxmemory now).
    c.ok("CONFIG SET bf.maxmemory-guard no");
    c.ok("BF.RESERVE accepted 0.001 10000000");
    assert!(used_memory(&mut c) > 20 << 20, "{server:?}: the 18 MB filter was allocated");
    c.ok("DEL accepted");
}

per_server!(replicas_and_aof_replays_never_refuse);
/// A replica with a small `maxmemory`, and a restart with one, load what a
/// primary without it accepted: nothing replicated or replayed is refused.
fn replicas_and_aof_replays_never_refuse(server: Server) {
    let mut primary = TestServer::start(server, &[Module::bloomkit()], &aof_args(false));
    let port = primary.port.to_string();
    let replica = TestServer::start(
        server,
        &[Module::bloomkit()],
        // Replicas ignore maxmemory by default; with `replica-ignore-maxmemory
        // no` the server itself refuses the primary's writes once over it.
        &["--replicaof", "127.0.0.1", &port, "--maxmemory", "5mb"],
    );
    let mut r = replica.conn();
    r.wait_for_sync(Duration::from_secs(30));
    let mut p = primary.conn();
    p.ok("BF.RESERVE big 0.001 5000000");
    p.ok("CF.RESERVE cbig 4000000");
    p.ok("APBF.RESERVE wbig 0.001 1000000 COUNT");
    let mut args = vec!["BF.MADD".to_string(), "big".to_string()];
    args.extend((0..1000).map(|i| format!("x{i}")));
    p.call(&args);
    let digest = p.digest();
    wait_until("the replica holds the primary's data", Duration::from_secs(60), || r.digest() == digest);
    assert_eq!(r.info_field("bf", "bf_maxmemory_refusals"), "0", "{server:?}");
    // The same AOF replayed under a maxmemory far below what it holds.
    p.ok("CONFIG SET appendfsync always");
    primary.restart(&["--maxmemory", "5mb"]);
    let mut p = primary.conn();
    assert_eq!(p.digest(), digest, "{server:?}: the AOF replay loaded everything");
    assert_eq!(p.cmd("BF.EXISTS big x7"), Reply::Int(1));
}

per_server!(a_batch_cut_short_replicates_what_it_did);
/// A batch the primary's maxmemory cut short reaches a replica (which has
/// no such limit) and the AOF as what it did, not as the whole command:
/// replica and replay end where the primary ended.
fn a_batch_cut_short_replicates_what_it_did(server: Server) {
    let mut args = aof_args(false);
    args.extend(["--maxmemory", "20mb"]);
    let mut primary = TestServer::start(server, &[Module::bloomkit()], &args);
    let port = primary.port.to_string();
    let replica = TestServer::start(server, &[Module::bloomkit()], &["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    r.wait_for_sync(Duration::from_secs(30));
    let mut p = primary.conn();
    p.ok("BF.RESERVE grows 0.01 100000 EXPANSION 1024");
    let mut cut = false;
    for batch in 0..120 {
        let mut args = vec!["BF.MADD".to_string(), "grows".to_string()];
        args.extend((0..1000).map(|i| format!("item-{batch}-{i}")));
        if p.call(&args).as_array().iter().any(Reply::is_error) {
            cut = true;
            break;
        }
    }
    assert!(cut, "{server:?}: a batch was cut short");
    let digest = p.digest();
    wait_until("the replica holds the primary's data", Duration::from_secs(60), || r.digest() == digest);
    assert_eq!(r.cmd("BF.INFO grows FILTERS"), Reply::Array(vec![Reply::Int(1)]), "{server:?}");
    primary.restart(&["--maxmemory", "0"]);
    assert_eq!(primary.conn().digest(), digest, "{server:?}: the AOF replays to the same filter");
}

per_server!(eviction_policies_make_room_themselves);
/// Under an eviction policy the server makes room itself, as it does for
/// RedisBloom's filters: bloomkit refuses nothing there. Switching the
/// policy to noeviction at run time turns the guard on at once.
fn eviction_policies_make_room_themselves(server: Server) {
    let s = TestServer::start(
        server,
        &[Module::bloomkit()],
        &["--maxmemory", "20mb", "--maxmemory-policy", "allkeys-lru"],
    );
    let mut c = s.conn();
    let value = "v".repeat(100_000);
    for i in 0..150 {
        c.call(&["SET", &format!("s{i}"), &value]);
    }
    // About 9.6 MB on top of about 15 MB of strings: evicted for, not refused.
    let before = used_memory(&mut c);
    c.ok("BF.RESERVE big 0.01 8000000");
    assert_eq!(refusals(&mut c), 0, "{server:?}");
    c.ok("DEL big");
    // The filter's memory goes back on a thread of bloomkit's, and evicted
    // strings on Valkey's lazy-free thread: measured before they are back,
    // used_memory still holds them, the loop below adds no strings and the
    // refusal it prepares never comes (seen once on a loaded machine).
    wait_until("the filter and the evicted strings freed", Duration::from_secs(30), || {
        c.info_field("memory", "lazyfree_pending_objects") == "0" && used_memory(&mut c) < before
    });
    c.ok("CONFIG SET maxmemory-policy noeviction");
    // Strings up to 12 MB, then the same filter would pass 20 MB: refused by the guard.
    let mut i = 1000;
    while used_memory(&mut c) < 12 << 20 {
        c.call(&["SET", &format!("s{i}"), &value]);
        i += 1;
    }
    assert_eq!(c.cmd("BF.RESERVE big 0.01 8000000"), Reply::Error(OOM.into()), "{server:?}");
    assert_eq!(refusals(&mut c), 1, "{server:?}");
    // A sliding-window filter's state loaded by its header obeys the guard too.
    // About 16 MB of state, more than the 8 MB left.
    let params = ApbfParams { error: 0.001, capacity: 5_000_000, window: Window::Count };
    let header = Apbf::new(params, 0, bloomkit_core::Limits::NONE).unwrap().encode_header();
    let reply = c.call(&[b"APBF.LOADCHUNK".to_vec(), b"w".to_vec(), b"0".to_vec(), header]);
    assert_eq!(reply, Reply::Error(OOM.into()), "{server:?}");
    assert_eq!(c.cmd("EXISTS w"), Reply::Int(0));
}
