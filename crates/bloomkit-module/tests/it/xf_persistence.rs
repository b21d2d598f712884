//! XF filters lose nothing across save and restart, DEBUG RELOAD, AOF
//! replay and rewrite (with and without the preamble), DUMP/RESTORE, COPY,
//! and replicas stay byte-identical through growth: the shared suite
//! (`bloomkit_testkit::persistence`) with XF's fixture (`xf_support`), a
//! chunked load under way among its keys. Then issue 40's reproductions: a
//! chunked load across BGREWRITEAOF, a full sync and DEBUG RELOAD; refused
//! writes that must change nothing on the primary nor its replica; and a
//! stream of merges of filters of every capacity and rate with a replica
//! and an AOF, checked at every step.

use std::time::{Duration, Instant};

use crate::xf_support;

use bloomkit_testkit::aof::aof_args;
use bloomkit_testkit::persistence::{Family, Written};
use bloomkit_testkit::{per_server, wait_until, Conn, Module, Reply, Server, TestServer};
use xf_support::{block_chunks, info, items, load, scandump};

const DEADLINE: Duration = Duration::from_secs(30);

/// XF's fixture with its own hooks.
struct XfPersistence;

impl Family for XfPersistence {
    const REWRITE_COMMAND: &'static str = xf_support::Xf::REWRITE_COMMAND;

    fn write(c: &mut Conn, tag: &str) -> Written {
        xf_support::Xf::write(c, tag)
    }

    fn answers(c: &mut Conn, key: &str) -> Vec<Reply> {
        xf_support::Xf::answers(c, key)
    }

    fn replica_module() -> Module {
        Module::bloomkit()
    }

    /// MEMORY USAGE and INFO agree with the filters' sizes.
    fn after_reload(_server: Server, c: &mut Conn, written: &Written, context: &str) {
        let keys = &written.keys;
        let bytes: i64 = keys.iter().map(|k| info(c, k, "Size").as_int()).sum();
        assert!(
            c.call(&["MEMORY", "USAGE", &keys[0]]).as_int() >= info(c, &keys[0], "Size").as_int(),
            "{context}"
        );
        let counted: i64 = c.info_field("bf", "bf_xf_bytes").parse().unwrap();
        assert!(counted >= bytes, "{context}: INFO counts every filter: {counted} < {bytes}");
    }

    /// The stream: batches refused whole by MAXCAPACITY (nothing sent),
    /// a batch answered without storing at it, and loads (the growth
    /// through doublings, deletes and merges are the `late` writes).
    fn stream(p: &mut Conn, _r: &mut Conn, context: &str) -> Written {
        p.ok("XF.RESERVE cut 0.01 CAPACITY 10 MAXCAPACITY 20");
        let all = "a b c d e f g h i j k l m n o p q r s t u v w x y z";
        assert!(p.cmd(&format!("XF.MADD cut {all}")).is_error(), "{context}: 26 items past MAXCAPACITY 20");
        assert!(p.cmd("XF.INSERT gone MAXCAPACITY 2 ITEMS a b c d e").is_error(), "{context}");
        p.cmd(&format!("XF.MADD cut {}", &all[..39]));
        p.cmd("XF.MADDNX cut a b zz");
        p.cmd("XF.MADD cut a b");
        let chunks = scandump(p, "early:grown");
        load(p, "loaded", &chunks);
        // The load under way since the fixture went to the replica by full
        // sync: the rest of its blocks continue it on both.
        Written::keys(&["cut", "loaded"])
    }

    fn after_stream(_p: &mut Conn, r: &mut Conn, context: &str) {
        assert_eq!(r.cmd("XF.CARD cut"), Reply::Int(20), "{context}");
        assert_eq!(r.cmd("EXISTS gone"), Reply::Int(0), "{context}");
    }
}

bloomkit_testkit::persistence_suite!(XfPersistence);

/// An 800-item source's header and blocks, one chunk per block.
fn source_chunks(c: &mut Conn, key: &str) -> Vec<(i64, Vec<u8>)> {
    c.ok(&format!("XF.RESERVE {key} 0.01 CAPACITY 64"));
    items(c, key, "i", 0..800);
    let pieces = block_chunks(&scandump(c, key));
    assert!(pieces.len() >= 3, "a header and at least two blocks");
    pieces
}

fn card(c: &mut Conn, key: &str) -> i64 {
    c.call(&["XF.CARD", key]).as_int()
}

per_server!(a_chunked_load_survives_an_aof_rewrite);
/// Issue 40, item 3: the header before BGREWRITEAOF, the rest after; every
/// acknowledged chunk survives the restart.
fn a_chunked_load_survives_an_aof_rewrite(server: Server) {
    for preamble in [false, true] {
        let mut s = TestServer::start(server, &[Module::bloomkit()], &aof_args(preamble));
        let mut c = s.conn();
        c.wait_for_aof_rewrite(DEADLINE);
        let pieces = source_chunks(&mut c, "src");
        load(&mut c, "dst", &pieces[..2]);
        c.ok("BGREWRITEAOF");
        c.wait_for_aof_rewrite(DEADLINE);
        load(&mut c, "dst", &pieces[2..]);
        assert_eq!(card(&mut c, "dst"), 800);
        let digest = c.cmd("DEBUG DIGEST-VALUE dst");
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!(card(&mut c, "dst"), 800, "preamble {preamble}: acknowledged chunks lost");
        assert_eq!(c.cmd("DEBUG DIGEST-VALUE dst"), digest, "preamble {preamble}");
        // A load left under way restarts under way, and continues.
        load(&mut c, "half", &pieces[..2]);
        c.ok("BGREWRITEAOF");
        c.wait_for_aof_rewrite(DEADLINE);
        s.restart(&[]);
        let mut c = s.conn();
        load(&mut c, "half", &pieces[2..]);
        assert_eq!(c.cmd("DEBUG DIGEST-VALUE half"), c.cmd("DEBUG DIGEST-VALUE src"), "preamble {preamble}");
    }
}

per_server!(a_chunked_load_spans_a_full_sync_and_a_reload);
/// Issue 40, item 4: a replica attaching mid-load gets the load under way
/// and takes the next chunks; DEBUG RELOAD mid-load keeps it going.
fn a_chunked_load_spans_a_full_sync_and_a_reload(server: Server) {
    let primary = TestServer::with_bloomkit(server);
    let mut p = primary.conn();
    let pieces = source_chunks(&mut p, "src");
    load(&mut p, "dst", &pieces[..2]);
    let port = primary.port.to_string();
    let replica = TestServer::start(server, &[Module::bloomkit()], &["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    r.wait_for_sync(DEADLINE);
    load(&mut p, "dst", &pieces[2..3]);
    p.ok("DEBUG RELOAD");
    load(&mut p, "dst", &pieces[3..]);
    assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
    assert_eq!(card(&mut p, "dst"), 800);
    assert_eq!(card(&mut r, "dst"), 800, "the replica lost the load");
    assert_eq!(r.cmd("DEBUG DIGEST-VALUE dst"), p.cmd("DEBUG DIGEST-VALUE dst"));
    assert_eq!(p.cmd("DEBUG DIGEST-VALUE dst"), p.cmd("DEBUG DIGEST-VALUE src"));
    assert!(!replica.log().contains("sending an error to its master"), "{}", replica.log());
}

per_server!(refused_writes_change_nothing_anywhere);
/// Issue 40, item 2: adds refused at MAXCAPACITY and at the size limit
/// leave the primary's bytes as they were, and its replica identical.
fn refused_writes_change_nothing_anywhere(server: Server) {
    let primary = TestServer::with_bloomkit(server);
    let mut p = primary.conn();
    let port = primary.port.to_string();
    let replica = TestServer::start(server, &[Module::bloomkit()], &["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    r.wait_for_sync(DEADLINE);
    p.ok("XF.RESERVE k 0.01 CAPACITY 1000 MAXCAPACITY 2000");
    items(&mut p, "k", "a", 0..2000);
    let before = p.cmd("DEBUG DIGEST-VALUE k");
    for i in 0..300 {
        let reply = p.call(&["XF.ADD", "k", &format!("new{i}")]);
        assert!(reply.is_error() || reply == Reply::Int(0), "{reply:?}");
        p.call(&["XF.MADD", "k", &format!("more{i}"), "a5"]);
    }
    assert_eq!(p.cmd("DEBUG DIGEST-VALUE k"), before, "a refused add changed the filter");
    // The size limit, on the primary only (replicas skip limits).
    p.ok("XF.RESERVE s 0.01");
    p.ok("CONFIG SET bf.max-filter-bytes 20000");
    let mut i = 0;
    while !p.call(&["XF.ADD", "s", &format!("s{i}")]).is_error() {
        i += 1;
        assert!(i < 100_000);
    }
    // At the limit, items that fit where the filter has room are stored;
    // a refused one (its block would have to grow) changes nothing.
    let mut refusals = 0;
    for j in 0..200 {
        for cmd in [
            vec!["XF.ADD".to_string(), "s".into(), format!("t{j}")],
            vec!["XF.ADDNX".into(), "s".into(), format!("v{j}")],
        ] {
            let before = p.cmd("DEBUG DIGEST-VALUE s");
            if p.call(&cmd).is_error() {
                refusals += 1;
                assert_eq!(p.cmd("DEBUG DIGEST-VALUE s"), before, "{cmd:?}");
            }
        }
    }
    assert!(refusals > 0);
    // Batches are all or nothing (issue 47): one refused add, even after
    // items that fitted in place, leaves the count and the bytes as they were.
    let batch_refusals = refused_batches(&mut p, "s", "w");
    assert!(batch_refusals > 0, "no batch met the size limit");
    // The same at maxmemory (noeviction), on a filter that grows by batches.
    p.ok("CONFIG SET bf.max-filter-bytes 8589934592");
    p.ok("XF.RESERVE m 0.01");
    let used: u64 = p.info_field("memory", "used_memory").parse().unwrap();
    p.ok(&format!("CONFIG SET maxmemory {}", used + (256 << 10)));
    let batch_refusals = refused_batches(&mut p, "m", "x");
    p.ok("CONFIG SET maxmemory 0");
    assert!(batch_refusals > 0, "no batch met maxmemory");
    // A replica never refuses a merge its primary did, whatever its own limit.
    r.ok("CONFIG SET bf.xf-max-merge-entries 1");
    p.ok("XF.MERGE km 1 k");
    assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
    for k in ["k", "s", "m", "km"] {
        assert_eq!(r.call(&["DEBUG", "DIGEST-VALUE", k]), p.call(&["DEBUG", "DIGEST-VALUE", k]), "{k}");
    }
}

/// A primary with an AOF (its first rewrite done; `preamble`: with the RDB
/// preamble) and a replica in sync, with a connection to each.
fn primary_with_aof_and_replica(server: Server, preamble: bool) -> (TestServer, Conn, TestServer, Conn) {
    let primary = TestServer::start(server, &[Module::bloomkit()], &aof_args(preamble));
    let mut p = primary.conn();
    p.wait_for_aof_rewrite(DEADLINE);
    let port = primary.port.to_string();
    let replica = TestServer::start(server, &[Module::bloomkit()], &["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    r.wait_for_sync(DEADLINE);
    (primary, p, replica, r)
}

per_server!(a_crowded_key_refuses_alike_in_every_way_of_sending);
/// Issue 47: a key refuses new items at a limit alike when they come alone,
/// in batches, inside MULTI, from a script and after a pause of writes, and
/// the refusals change nothing on the primary, on its replica or in its AOF.
/// The limit here is a block's bound: items crafted for the key's known
/// SEED to share their first hash bit fall in one half of its top block,
/// which no split spreads, so the block takes them up to `max_entries` and
/// then refuses every new item of that half (a spent rate, the other such
/// limit, refuses through the same path; core's tests reach it). Only the
/// bound's refusal is accepted here: a crowd of this shape meets the bound
/// with its rate unspent (0.88% of 1% in `bench/xf-crafted.sh`'s run).
fn a_crowded_key_refuses_alike_in_every_way_of_sending(server: Server) {
    use bloomkit_core::xf::{Seed, XfFilter, XfParams};
    let (primary, mut p, _replica, mut r) = primary_with_aof_and_replica(server, false);
    p.ok("XF.RESERVE k 0.01 CAPACITY 100 SEED 00000000000000000000000000000000");
    let params = XfParams { error_rate: 0.01, capacity: 100, max_capacity: 1 << 36 };
    let probe = XfFilter::with_seed(params, Seed([0, 0]), bloomkit_core::Limits::NONE).unwrap();
    // Items whose hash starts with a 0 bit, tagged.
    let low = |tag: &'static str| {
        let probe = probe.try_clone().expect("a copy of the probe");
        (0u64..)
            .map(move |i| format!("{tag}{i}"))
            .filter(move |item| probe.hash(item.as_bytes()).0 >> 127 == 0)
    };
    let refused = |reply: &Reply| reply.is_error() && reply.error_text().contains("fall on the same place");
    let mut crowd = low("c");
    let mut full = false;
    for _ in 0..100 {
        let mut batch = vec!["XF.MADD".to_string(), "k".into()];
        batch.extend(crowd.by_ref().take(100));
        if p.call(&batch).is_error() {
            // The block is nearly full: the rest one at a time, to its bound.
            full = batch[2..].iter().any(|item| refused(&p.call(&["XF.ADD", "k", item])));
            break;
        }
    }
    assert!(full, "the crafted items never filled their block");
    let before = p.call(&["DEBUG", "DIGEST-VALUE", "k"]);
    let card = p.call(&["XF.CARD", "k"]);
    let mut fresh = low("n");
    let mut next = move || fresh.next().expect("endless");
    // Each way of sending: a refusal, or 0 for an item that is a false
    // positive of the crowded key (stored nowhere either).
    let mut refusals = 0;
    let mut count = |reply: &Reply, what: &str| {
        assert!(refused(reply) || *reply == Reply::Int(0), "{what}: {reply:?}");
        refusals += usize::from(refused(reply));
    };
    for _ in 0..10 {
        count(&p.call(&["XF.ADD", "k", &next()]), "XF.ADD");
        count(&p.call(&["XF.ADDNX", "k", &next()]), "XF.ADDNX");
        let batch = p.call(&["XF.MADD", "k", &next(), &next()]);
        let whole = batch.is_error() && batch.error_text().contains("nothing of the batch was stored");
        assert!(whole || batch == Reply::Array(vec![Reply::Int(0); 2]), "XF.MADD: {batch:?}");
        p.ok("MULTI");
        p.call(&["XF.ADD", "k", &next()]);
        p.call(&["XF.CARD", "k"]);
        let exec = p.cmd("EXEC");
        count(&exec.as_array()[0], "XF.ADD in MULTI");
        assert_eq!(exec.as_array()[1], card, "the count after a refusal in MULTI");
        let script = "return redis.call('XF.ADD', KEYS[1], ARGV[1])";
        count(&p.call(&["EVAL", script, "1", "k", &next()]), "XF.ADD from a script");
    }
    // Paused writes: the add waits, then is refused like any other.
    let mut w = primary.conn();
    p.ok("CLIENT PAUSE 60000 WRITE");
    w.send(&["XF.ADD", "k", &next()]).unwrap();
    wait_until("the writer to be paused", DEADLINE, || p.info_field("clients", "blocked_clients") == "1");
    p.ok("CLIENT UNPAUSE");
    count(&w.read_raw().unwrap().1, "XF.ADD after a pause");
    // At most 1% of new items are false positives: fewer than 30 refusals
    // of 41 has a probability below 1e-13.
    assert!(refusals >= 30, "only {refusals} of 41 new items were refused by a crowded key");
    assert_eq!(p.call(&["DEBUG", "DIGEST-VALUE", "k"]), before, "a refusal changed the key");
    assert_eq!(p.call(&["WAIT", "1", "10000"]), Reply::Int(1));
    assert_eq!(r.call(&["DEBUG", "DIGEST-VALUE", "k"]), before, "the replica differs");
    p.ok("DEBUG LOADAOF");
    assert_eq!(p.call(&["DEBUG", "DIGEST-VALUE", "k"]), before, "the AOF replayed something else");
}

/// Sends batches of 500 new items to `key` until a few have been refused
/// (at most 400 batches): each refusal must leave `XF.CARD` and the value's
/// digest as they were. How many were refused.
fn refused_batches(p: &mut Conn, key: &str, prefix: &str) -> usize {
    let mut refusals = 0;
    for j in 0..400 {
        let (card, digest) = (p.call(&["XF.CARD", key]), p.call(&["DEBUG", "DIGEST-VALUE", key]));
        let mut cmd = vec!["XF.MADD".to_string(), key.into()];
        cmd.extend((0..500).map(|n| format!("{prefix}{j}-{n}")));
        let reply = p.call(&cmd);
        if reply.is_error() {
            assert!(reply.error_text().contains("nothing of the batch was stored"), "{reply:?}");
            assert_eq!(p.call(&["XF.CARD", key]), card, "{key}: a refused batch changed the count");
            assert_eq!(
                p.call(&["DEBUG", "DIGEST-VALUE", key]),
                digest,
                "{key}: a refused batch changed the filter"
            );
            refusals += 1;
            if refusals == 5 {
                break;
            }
        }
    }
    refusals
}

per_server!(merges_of_every_shape_stay_identical);
/// Issue 40, item 1: filters of different capacities and rates merged
/// again and again (the reported sequence, then a random stream), with a
/// replica and an AOF: none fails with a crafted-items
/// error, the replica and a restart from the AOF match at every check.
fn merges_of_every_shape_stay_identical(server: Server) {
    let (mut primary, mut p, _replica, mut r) = primary_with_aof_and_replica(server, true);
    p.ok("XF.RESERVE h 0.5 CAPACITY 64");
    items(&mut p, "h", "h", 0..200);
    p.ok("XF.RESERVE g 0.05 CAPACITY 10");
    items(&mut p, "g", "g", 0..3_000);
    p.ok("XF.RESERVE o 0.001 CAPACITY 777");
    items(&mut p, "o", "o", 0..900);
    let mut slowest = Duration::ZERO;
    let mut merge = |p: &mut Conn, line: &str| {
        let t = Instant::now();
        let reply = p.cmd(line);
        slowest = slowest.max(t.elapsed());
        let text = if reply.is_error() { reply.error_text().to_string() } else { String::new() };
        // Refusals a random stream of merges meets: a rate above the highest
        // allowed; keys merged into themselves double their counts (copies
        // count once in the rate since 0.3, so the rate no longer stops
        // them), until a merge reads more than bf.xf-max-merge-entries or a
        // block's copies pass what its stored form counts.
        let allowed = ["highest allowed", "bf.xf-max-merge-entries", "fall on the same place"];
        assert!(text.is_empty() || allowed.iter().any(|a| text.contains(a)), "{line}: {text}");
    };
    merge(&mut p, "XF.MERGE gm 2 g o RAISERATE");
    for src in ["h", "h", "gm", "g", "h", "gm", "gm", "h"] {
        merge(&mut p, &format!("XF.MERGE d 1 {src} RAISERATE"));
    }
    // A random stream over keys of other capacities and rates.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let keys: Vec<String> = (0..8).map(|i| format!("x{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        let rate = [0.5, 0.05, 0.01, 0.001][i % 4];
        let cap = [10, 64, 777, 5000][(i / 2) % 4];
        p.ok(&format!("XF.RESERVE {k} {rate} CAPACITY {cap}"));
        items(&mut p, k, k, 0..(200 + 700 * i));
    }
    // 75 merges in CI, 150 in the long form: keys that grow by merging
    // into themselves make the later merges the costly ones (150 took 14 s
    // with the debug module, 75 take 8; CI runs it six times with the seed
    // sweep). 75 still meet both refusals such a stream meets, the merge
    // size limit and too many entries on one place, under the suite's
    // secret and each of the sweep's four (14-37 of the second).
    for step in 0..bloomkit_testkit::lean_or_long(75, 150) {
        let dest = &keys[(next() % 8) as usize];
        let n = 1 + next() % 3;
        let srcs: Vec<&String> = (0..n).map(|_| &keys[(next() % 8) as usize]).collect();
        let line = format!(
            "XF.MERGE {dest} {n} {} RAISERATE",
            srcs.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
        );
        merge(&mut p, &line);
        if step % 5 == 0 {
            items(&mut p, dest, &format!("s{step}"), 0..50);
        }
    }
    // How long the slowest took is a figure, not a pass mark: a timed
    // assertion fails on a loaded machine (a merge's cost is measured in
    // bench/, against a reference in the same run).
    bloomkit_testkit::figure(&format!(
        "XF merges of every shape: the slowest took {slowest:?} (debug build)"
    ));
    assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
    assert_eq!(r.digest(), p.digest(), "the replica after the merges");
    let digest = p.digest();
    primary.restart(&[]);
    let mut p = primary.conn();
    assert_eq!(p.digest(), digest, "the AOF after the merges");
}
