//! valkey-bloom's data on bloomkit (issue 16): its DUMP payloads, RDB file
//! and AOF directory (fixtures in bloomkit-core/tests/fixtures/valkey-bloom,
//! written by valkey-bloom 1.0 in valkey-server 9.1.2) load; every added
//! item answers present and every probe exactly as valkey-bloom answered;
//! `BF.*` replies and errors are valkey-bloom's; adds continue and survive
//! `DEBUG RELOAD`, an AOF rewrite and a replica's sync; damaged payloads and
//! `BF.LOAD` blobs are refused with the server alive.
//!
//! The DUMP payloads carry RDB version 80 (Valkey 9); for redis-server 7.0
//! they are re-sealed with its own version (the value's bytes are the same).

use std::collections::BTreeMap;
use std::time::Duration;

use bloomkit_core::vbloom::Object;
use bloomkit_core::Limits;
use bloomkit_testkit::hostile::{assert_dump_round_trips, restore_damaged, seal, RdbValue, Watch};
use bloomkit_testkit::{aof_args, aof_commands, per_server, Conn, Module, Reply, Server, TestServer};
use serde_json::Value;

const KEYS: [&str; 3] = ["f1", "f2", "f3"];

fn fixture(name: &str) -> Vec<u8> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../bloomkit-core/tests/fixtures/valkey-bloom");
    std::fs::read(format!("{dir}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn json(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// A DUMP payload valkey-bloom wrote, sealed for `c`'s server (its RDB version).
fn payload_for(c: &mut Conn, hex_payload: &str) -> Vec<u8> {
    let p = hex::decode(hex_payload.trim()).unwrap();
    c.ok("SET rdb-version-probe x");
    let probe = c.cmd("DUMP rdb-version-probe").as_bytes().to_vec();
    c.ok("DEL rdb-version-probe");
    let version = u16::from_le_bytes([probe[probe.len() - 10], probe[probe.len() - 9]]);
    bloomkit_core::common::payload::retarget(&p, version).unwrap()
}

fn payload(c: &mut Conn, key: &str) -> Vec<u8> {
    payload_for(c, &String::from_utf8(fixture(&format!("{key}.dump.hex"))).unwrap())
}

fn restore(c: &mut Conn, key: &str, payload: &[u8]) -> Reply {
    c.call(&[b"RESTORE".to_vec(), key.as_bytes().to_vec(), b"0".to_vec(), payload.to_vec()])
}

fn restore_examples(c: &mut Conn) {
    for key in KEYS {
        let p = payload(c, key);
        assert_eq!(restore(c, key, &p), Reply::Simple("OK".into()), "RESTORE {key}");
    }
}

fn mexists(c: &mut Conn, key: &str, items: &[String]) -> Vec<i64> {
    let mut cmd = vec!["BF.MEXISTS".to_string(), key.to_string()];
    cmd.extend(items.iter().cloned());
    c.call(&cmd).as_array().iter().map(Reply::as_int).collect()
}

/// Every added item present, and the 200 + 20,000 probes exactly as valkey-bloom answered.
fn assert_answers_as_recorded(c: &mut Conn, context: &str) {
    let examples = json("examples.json");
    let extended = json("extended_probes.json");
    let probes: Vec<String> = strings(&examples["probe_items"])
        .into_iter()
        .chain((0..20_000).map(|i| format!("xprobe-{i}")))
        .collect();
    for key in KEYS {
        let items = strings(&examples["items"][key]);
        assert!(
            mexists(c, key, &items).iter().all(|&v| v == 1),
            "{context}: {key}: every added item present"
        );
        let found = mexists(c, key, &probes);
        let fps: Vec<String> =
            probes.iter().zip(found).filter(|(_, v)| *v == 1).map(|(p, _)| p.clone()).collect();
        let mut expected = strings(&examples["false_positives"][key]);
        expected.extend(strings(&extended["false_positives"][key]));
        assert_eq!(fps, expected, "{context}: {key}: the same false positives, no others");
    }
}

fn digests(c: &mut Conn, keys: &[&str]) -> BTreeMap<String, Reply> {
    keys.iter().map(|k| (k.to_string(), c.call(&["DEBUG", "DIGEST-VALUE", k]))).collect()
}

fn dumps(c: &mut Conn, keys: &[&str]) -> BTreeMap<String, Reply> {
    keys.iter().map(|k| (k.to_string(), c.call(&["DUMP", k]))).collect()
}

/// The recorded reply of valkey-bloom, as the RESP2 reply bloomkit must give.
fn recorded(v: &Value) -> Reply {
    match v {
        Value::Null => Reply::Nil,
        Value::Number(n) if n.is_i64() => Reply::Int(n.as_i64().unwrap()),
        Value::Number(n) => Reply::Bulk(n.to_string().into_bytes()),
        Value::String(s) => Reply::Simple(s.clone()),
        Value::Array(a) => Reply::Array(a.iter().map(recorded).collect()),
        other => panic!("{other}"),
    }
}

per_server!(dumps_restore_byte_identical_and_answer_as_valkey_bloom_did);
fn dumps_restore_byte_identical_and_answer_as_valkey_bloom_did(server: Server) {
    let observed = json("observed.json");
    let results = &observed["results"];
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    for key in KEYS {
        let p = payload(&mut c, key);
        assert_eq!(restore(&mut c, key, &p), Reply::Simple("OK".into()), "{server:?} {key}\n{}", s.log());
        assert_eq!(c.call(&["DUMP", key]).as_bytes(), &p[..], "{server:?}: DUMP of restored {key}");
        assert_eq!(c.call(&["TYPE", key]), Reply::Simple(bloomkit_core::vbloom::TYPE_NAME.into()));
        assert_eq!(c.call(&["BF.CARD", key]), recorded(&results[format!("card_{key}")]["ok"]));
        // Valkey 9 formats doubles as valkey-bloom's server did ("0.01"); Redis 7.0 with %.17g.
        if server == Server::Valkey {
            assert_eq!(c.call(&["BF.INFO", key]), recorded(&results[format!("info_{key}")]["ok"]), "{key}");
            for field in [
                "CAPACITY",
                "SIZE",
                "FILTERS",
                "ITEMS",
                "EXPANSION",
                "ERROR",
                "TIGHTENING",
                "MAXSCALEDCAPACITY",
            ] {
                let r = &results[format!("info_{key}_{field}")];
                let expected = match r.get("err") {
                    Some(e) => Reply::Error(format!("ERR {}", e.as_str().unwrap())),
                    None => recorded(&r["ok"]),
                };
                assert_eq!(c.call(&["BF.INFO", key, field]), expected, "BF.INFO {key} {field}");
            }
            let digest = &results["digest_values"][key]["ok"][0];
            assert_eq!(
                c.call(&["DEBUG", "DIGEST-VALUE", key]),
                Reply::Array(vec![Reply::Simple(digest.as_str().unwrap().to_string())]),
                "{key}: valkey-bloom's digest"
            );
        }
    }
    assert_answers_as_recorded(&mut c, &format!("{server:?}"));
    // A fixed-seed object whose filter string the server LZF-compressed.
    let fixed = results["errors"]
        ["fixed seed DUMP fixed1 (bf.bloom-use-random-seed no; BF.ADD fixed1 hello)"]
        .as_str()
        .unwrap();
    let p = payload_for(&mut c, fixed);
    assert_eq!(restore(&mut c, "fixed1", &p), Reply::Simple("OK".into()), "{server:?}");
    assert_eq!(c.cmd("BF.EXISTS fixed1 hello"), Reply::Int(1));
    assert_eq!(c.call(&["DUMP", "fixed1"]).as_bytes(), &p[..], "{server:?}: an LZF string saves the same");
    // COPY makes an equal value.
    assert_eq!(c.cmd("COPY f2 f2copy"), Reply::Int(1));
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE f2copy"), c.cmd("DEBUG DIGEST-VALUE f2"));
    assert!(c.cmd("MEMORY USAGE f2copy").as_int() > 10_000);
}

#[test]
fn the_rdb_file_loads() {
    let mut s = TestServer::with_bloomkit(Server::Valkey);
    std::fs::write(s.dir().join("dump.rdb"), fixture("dump.rdb")).unwrap();
    s.restart(&[]);
    let mut c = s.conn();
    assert_eq!(c.cmd("DBSIZE"), Reply::Int(3), "{}", s.log());
    for key in KEYS {
        let p = payload(&mut c, key);
        assert_eq!(c.call(&["DUMP", key]).as_bytes(), &p[..], "{key}: as valkey-bloom dumped it");
    }
    assert_answers_as_recorded(&mut c, "from dump.rdb");
}

per_server!(the_aof_directory_loads);
fn the_aof_directory_loads(server: Server) {
    let mut s = TestServer::with_bloomkit(server);
    let dir = s.dir().join("appendonlydir");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["appendonly.aof.2.base.aof", "appendonly.aof.2.incr.aof", "appendonly.aof.manifest"] {
        std::fs::write(dir.join(f), fixture(&format!("appendonlydir/{f}"))).unwrap();
    }
    s.restart(&aof_args(false));
    let mut c = s.conn();
    assert_eq!(c.cmd("DBSIZE"), Reply::Int(3), "{server:?}\n{}", s.log());
    for key in KEYS {
        let p = payload(&mut c, key);
        assert_eq!(c.call(&["DUMP", key]).as_bytes(), &p[..], "{server:?} {key}: as valkey-bloom dumped it");
    }
    assert_answers_as_recorded(&mut c, &format!("{server:?} from the AOF"));
}

/// Writes to the example objects that scale f1 and f2 and fill f3; returns
/// the items that must be present.
fn write_more(c: &mut Conn, tag: &str) -> Vec<(String, String)> {
    let mut present = Vec::new();
    for (key, n) in [("f1", 700), ("f2", 3000), ("f3", 40)] {
        let items: Vec<String> = (0..n).map(|i| format!("{tag}-{key}-{i}")).collect();
        let mut cmd = vec!["BF.MADD".to_string(), key.to_string()];
        cmd.extend(items.iter().cloned());
        let reply = c.call(&cmd);
        assert!(reply.as_array().iter().all(|r| matches!(r, Reply::Int(0 | 1))), "{key}: {reply:?}");
        present.extend(items.into_iter().map(|i| (key.to_string(), i)));
    }
    assert_eq!(c.call(&["BF.ADD", "f1", &format!("{tag}-single")]), Reply::Int(1));
    present.push(("f1".into(), format!("{tag}-single")));
    present
}

fn assert_present(c: &mut Conn, present: &[(String, String)], context: &str) {
    for key in KEYS {
        let items: Vec<String> = present.iter().filter(|(k, _)| k == key).map(|(_, i)| i.clone()).collect();
        assert!(mexists(c, key, &items).iter().all(|&v| v == 1), "{context}: {key}");
    }
}

per_server!(adds_continue_as_valkey_bloom_would_and_survive_reload_rewrite_and_sync);
/// Adds on bloomkit give what valkey-bloom's rules give (the core model,
/// itself checked against valkey-bloom's data): the same sub-filters, items
/// and answers.
fn adds_continue_as_valkey_bloom_would_and_survive_reload_rewrite_and_sync(server: Server) {
    let mut s = TestServer::start(server, &[Module::bloomkit()], &aof_args(false));
    let mut c = s.conn();
    c.wait_for_aof_rewrite(Duration::from_secs(30));
    restore_examples(&mut c);
    let present = write_more(&mut c, "a");
    // The model: the same payloads and adds in bloomkit-core.
    for key in KEYS {
        let info = c.call(&["BF.INFO", key]);
        let model = model_after(&present, key);
        let field = |name: &str| {
            let a = info.as_array();
            a[a.iter().position(|r| r == &Reply::Simple(name.into())).unwrap() + 1].clone()
        };
        assert_eq!(field("Number of filters"), Reply::Int(model.filters().len() as i64), "{server:?} {key}");
        assert_eq!(field("Capacity"), Reply::Int(model.capacity() as i64), "{server:?} {key}");
        assert_eq!(field("Size"), Reply::Int(model.size() as i64), "{server:?} {key}");
        assert_eq!(field("Number of items inserted"), Reply::Int(model.items() as i64), "{server:?} {key}");
    }
    assert!(c.cmd("BF.INFO f1 FILTERS").as_int() >= 3, "f1 scaled out");
    assert_present(&mut c, &present, "after adds");
    let before = digests(&mut c, &KEYS);
    let dumped = dumps(&mut c, &KEYS);

    c.ok("DEBUG RELOAD");
    assert_eq!(digests(&mut c, &KEYS), before, "{server:?}: DEBUG RELOAD");
    assert_eq!(dumps(&mut c, &KEYS), dumped, "{server:?}: DEBUG RELOAD");

    // The command log replays, then a rewrite as BF.LOAD replays.
    s.restart(&[]);
    let mut c = s.conn();
    assert_eq!(digests(&mut c, &KEYS), before, "{server:?}: AOF replay");
    c.ok("BGREWRITEAOF");
    c.wait_for_aof_rewrite(Duration::from_secs(30));
    let text = s.base_aof();
    assert_eq!(text.windows(7).filter(|w| w == b"BF.LOAD").count(), 3, "{server:?}: one BF.LOAD per key");
    s.restart(&[]);
    let mut c = s.conn();
    assert_eq!(digests(&mut c, &KEYS), before, "{server:?}: rewritten AOF");
    assert_eq!(dumps(&mut c, &KEYS), dumped, "{server:?}: rewritten AOF");
    assert_present(&mut c, &present, "after the rewrite");

    // A replica's full sync, then the stream: adds, a scale-out, a batch
    // cut short by the primary's limit, a refused non-scaling batch, BF.LOAD.
    let port = s.port.to_string();
    let mut replica = TestServer::start(server, &[Module::bloomkit()], &["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    r.wait_for_sync(Duration::from_secs(30));
    assert_eq!(digests(&mut r, &KEYS), before, "{server:?}: full sync");
    let more = write_more(&mut c, "b");
    c.ok("CONFIG SET bf.max-filter-bytes 300000");
    let items: Vec<String> = (0..200_000).map(|i| format!("cut-{i}")).collect();
    let mut cmd = vec!["BF.MADD".to_string(), "f1".into()];
    cmd.extend(items);
    let reply = c.call(&cmd);
    let last = reply.as_array().last().unwrap().clone();
    assert_eq!(last, Reply::Error("ERR operation exceeds bloom object memory limit".into()), "{server:?}");
    assert!(reply.as_array().len() > 1000, "{server:?}: items before the limit were added");
    let f3_card = c.cmd("BF.CARD f3");
    let batch: Vec<String> = (0..500).map(|i| format!("over-{i}")).collect();
    let mut cmd = vec!["BF.MADD".to_string(), "f3".into()];
    cmd.extend(batch);
    assert_eq!(c.call(&cmd), Reply::Error("ERR non scaling filter is full".into()));
    assert_eq!(c.cmd("BF.CARD f3"), f3_card, "{server:?}: a refused batch adds nothing");
    let blob = aof_blob("f2");
    assert_eq!(c.call(&[b"BF.LOAD".to_vec(), b"loaded".to_vec(), blob]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd("WAIT 1 10000"), Reply::Int(1));
    let keys = ["f1", "f2", "f3", "loaded"];
    assert_eq!(digests(&mut r, &keys), digests(&mut c, &keys), "{server:?}: replica after the stream");
    assert_eq!(dumps(&mut r, &keys), dumps(&mut c, &keys), "{server:?}: replica after the stream");
    assert_present(&mut r, &more, "replica");
    replica.kill();
}

/// The core model of a fixture object after the test's adds (from its
/// `BF.LOAD` blob, the same object as its DUMP: bloomkit-core checks that).
fn model_after(present: &[(String, String)], key: &str) -> Object {
    let mut o = Object::decode_blob(&aof_blob(key), Limits::NONE).unwrap();
    for (k, item) in present {
        if k == key {
            o.add(item.as_bytes(), Limits::at_most(4 << 30)).unwrap();
        }
    }
    o
}

/// The blob of `key` in valkey-bloom's rewritten AOF.
fn aof_blob(key: &str) -> Vec<u8> {
    blobs_in(&fixture("appendonlydir/appendonly.aof.2.base.aof")).remove(key).unwrap()
}

/// The `BF.LOAD key blob` commands of an AOF, by key.
fn blobs_in(aof: &[u8]) -> BTreeMap<String, Vec<u8>> {
    aof_commands(aof)
        .into_iter()
        .filter(|args| args[0] == b"BF.LOAD")
        .map(|args| (String::from_utf8(args[1].clone()).unwrap(), args[2].clone()))
        .collect()
}

/// [`replies_and_errors_are_valkey_bloom_s`]' non-scaling object f3: a batch
/// it cannot take is refused whole, one it can is added, and single adds
/// then fill it until valkey-bloom's recorded error, `recorded_full`.
fn non_scaling_batches(c: &mut Conn, recorded_full: Reply) {
    // A non-scaling object: a batch it cannot take is refused whole; one it can, added.
    assert_eq!(c.cmd("BF.CARD f3"), Reply::Int(100));
    let items =
        |from: usize, n: usize| (from..from + n).map(|i| format!("new-{i}")).collect::<Vec<_>>().join(" ");
    // 150 new items for 100 places (a false positive or two cannot make them fit).
    assert_eq!(
        c.cmd(&format!("BF.MADD f3 {}", items(0, 150))),
        Reply::Error("ERR non scaling filter is full".into())
    );
    assert_eq!(c.cmd("BF.CARD f3"), Reply::Int(100));
    let added: i64 =
        c.cmd(&format!("BF.MADD f3 {}", items(0, 100))).as_array().iter().map(Reply::as_int).sum();
    assert_eq!(c.cmd("BF.CARD f3"), Reply::Int(100 + added));
    let mut i = 1000;
    let full = loop {
        let r = c.call(&["BF.ADD", "f3", &format!("fill-{i}")]);
        if r.is_error() {
            break r;
        }
        i += 1;
    };
    assert_eq!(full, recorded_full);
    assert_eq!(c.cmd("BF.CARD f3"), Reply::Int(200));
}

#[test]
fn replies_and_errors_are_valkey_bloom_s() {
    let observed = json("observed.json");
    let errors = &observed["results"]["errors"];
    let s = TestServer::with_bloomkit(Server::Valkey);
    let mut c = s.conn();
    restore_examples(&mut c);
    c.ok("SET strkey v");
    let err = |text: &str| Reply::Error(text.to_string());
    let recorded_err = |cmd: &str| Reply::Error(format!("ERR {}", errors[cmd]["err"].as_str().unwrap()));
    // On a bloomfltr key, RESERVE checks valkey-bloom's way, then the key is taken.
    for (line, want) in [
        ("BF.RESERVE f1 0.01 100", recorded_err("BF.RESERVE f1 0.01 100")),
        ("BF.RESERVE f1 abc 100", err("ERR bad error rate")),
        ("BF.RESERVE f1 1.5 100", err("ERR (0 < error rate range < 1)")),
        ("BF.RESERVE f1 0.01 -5", err("ERR bad capacity")),
        ("BF.RESERVE f1 0.01 0", err("ERR (capacity should be larger than 0)")),
        ("BF.RESERVE f1 0.01 100 EXPANSION 0", err("ERR bad expansion")),
        ("BF.RESERVE f1 0.01 100 FOO", err("ERROR")),
        ("BF.RESERVE f1 0.01 100 EXPANSION", err("ERROR")),
        (
            "BF.RESERVE f1 0.01 100 NONSCALING EXPANSION 2",
            err("ERR wrong number of arguments for 'bf.reserve' command"),
        ),
        ("BF.INSERT f1 FOO ITEMS a", err("ERR unknown argument received")),
        ("BF.INSERT f1 TIGHTENING 1.0 ITEMS a", err("ERR (0 < tightening ratio range < 1)")),
        ("BF.INSERT f1 SEED short ITEMS a", err("ERR invalid seed")),
        ("BF.INSERT f1 ITEMS", err("ERR wrong number of arguments for 'bf.insert' command")),
        (
            "BF.INSERT f1 NONSCALING VALIDATESCALETO 1000 ITEMS a",
            recorded_err("BF.INSERT e NONSCALING VALIDATESCALETO 1000 ITEMS a"),
        ),
        ("BF.INFO f1 FOO", recorded_err("BF.INFO f1 FOO")),
        ("BF.INFO f3 TIGHTENING", recorded_err("BF.INFO f3 TIGHTENING")),
        ("BF.INFO f3 MAXSCALEDCAPACITY", recorded_err("BF.INFO f3 MAXSCALEDCAPACITY")),
        ("BF.LOAD f1 x", err("BUSYKEY Target key name already exists.")),
        ("BF.LOAD e garbage", recorded_err("BF.LOAD e garbage")),
        ("BF.LOAD strkey x", err("WRONGTYPE Operation against a key holding the wrong kind of value")),
        ("BF.LOAD e", err("ERR wrong number of arguments for 'bf.load' command")),
    ] {
        assert_eq!(c.cmd(line), want, "{line}");
    }
    assert_eq!(c.call(&["BF.LOAD", "e", ""]), err("ERR bloom object decoding failed"));
    assert_eq!(c.cmd("EXISTS e"), Reply::Int(0));
    // Options valkey-bloom accepts on an existing object change nothing but are allowed.
    let seed = "0123456789abcdef0123456789abcdef";
    assert_eq!(
        c.cmd(&format!("BF.INSERT f1 SEED {seed} TIGHTENING 0.9 NOCREATE ITEMS brand-new")),
        Reply::Array(vec![Reply::Int(1)])
    );
    assert_eq!(c.cmd("BF.INSERT f1 CAPACITY 5"), Reply::Array(vec![]));
    // No SCANDUMP/LOADCHUNK in valkey-bloom: a clear error, nothing changed.
    let before = c.cmd("DEBUG DIGEST-VALUE f1");
    for line in ["BF.SCANDUMP f1 0", "BF.LOADCHUNK f1 1 x", "BF.LOADCHUNK f1 2 x"] {
        let reply = c.cmd(line);
        assert!(reply.error_text().contains("valkey-bloom filter (type bloomfltr)"), "{line}: {reply:?}");
    }
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE f1"), before);
    let debug = c.cmd("BF.DEBUG f2");
    assert_eq!(debug.as_array()[0], Reply::Bulk(b"size:4994".to_vec()));
    assert_eq!(
        debug.as_array()[2],
        Reply::Bulk(
            b"bytes:7911 bits:63288 hashes:11 hashwidth:64 capacity:4000 size:3994 ratio:0.0005".to_vec()
        )
    );
    non_scaling_batches(&mut c, recorded_err("BF.INSERT ns ITEMS d (full)"));
    // valkey-bloom answers integers, also in RESP3; and BF.INFO as an array.
    c.ok("HELLO 3");
    assert_eq!(c.cmd("BF.EXISTS f1 f1-item-0"), Reply::Int(1));
    assert_eq!(c.cmd("BF.MEXISTS f1 f1-item-0 nope"), Reply::Array(vec![Reply::Int(1), Reply::Int(0)]));
    assert!(matches!(c.cmd("BF.INFO f3"), Reply::Array(a) if a.len() == 12));
    assert_eq!(c.cmd("BF.INFO f1 ERROR"), Reply::Double("0.01".into()));
}

// ---- hostile input, under the address-space limit ----

/// A damaged value that loaded must be usable and consistent.
fn exercise(c: &mut Conn, key: &str, what: &str) {
    let usable = |r: &Reply| match r {
        Reply::Int(0 | 1) => true,
        Reply::Error(e) => [
            "ERR non scaling filter is full",
            "ERR operation exceeds bloom object memory limit",
            "ERR bloom object reached max number of filters",
            "ERR false positive degrades to 0 on scale out",
            "ERR bad capacity",
        ]
        .contains(&e.as_str()),
        _ => false,
    };
    let add = c.call(&["BF.ADD", key, "probe"]);
    assert!(usable(&add), "{what}: BF.ADD answered {add:?}");
    let madd = c.call(&["BF.MADD", key, "p1", "p2", "p3"]);
    assert!(usable(&madd) || madd.as_array().iter().all(usable), "{what}: BF.MADD answered {madd:?}");
    assert!(matches!(c.call(&["BF.EXISTS", key, "probe"]), Reply::Int(_)), "{what}: BF.EXISTS");
    assert!(matches!(c.call(&["BF.CARD", key]), Reply::Int(_)), "{what}: BF.CARD");
    assert!(c.call(&["BF.INFO", key]).as_array().len() >= 12, "{what}: BF.INFO");
    assert!(c.call(&["BF.DEBUG", key]).as_array()[0].as_bytes().starts_with(b"size:"), "{what}: BF.DEBUG");
    assert!(c.call(&["MEMORY", "USAGE", key]).as_int() > 0, "{what}: MEMORY USAGE");
    assert_dump_round_trips(c, key, what);
}

/// A valkey-bloom payload built by hand: one sub-filter, its fields given.
#[allow(clippy::too_many_arguments)]
fn crafted(
    head: &[u8],
    version: &[u8],
    nfilters: u64,
    expansion: u64,
    fp: f64,
    seed_flag: u64,
    filter: &[u8],
    capacity: u64,
    items: u64,
) -> Vec<u8> {
    let mut v = RdbValue(head.to_vec());
    v.unsigned(nfilters);
    v.unsigned(expansion);
    v.double(fp);
    v.double(0.5);
    v.unsigned(seed_flag);
    v.buffer(filter);
    v.unsigned(capacity);
    v.unsigned(items);
    v.0.push(0);
    v.0.extend_from_slice(version);
    seal(&v.0)
}

fn filter_bytes(len: u64, claimed: u64, k: u32, version: u8) -> Vec<u8> {
    let mut f = vec![version];
    f.extend_from_slice(&claimed.to_le_bytes());
    f.extend_from_slice(&k.to_le_bytes());
    f.extend_from_slice(&[7u8; 32]);
    f.resize(45 + len as usize, 0);
    f
}

per_server!(damaged_payloads_are_refused_with_the_server_alive);
fn damaged_payloads_are_refused_with_the_server_alive(server: Server) {
    let s = TestServer::hostile(server);
    let mut c = s.conn();
    let watch = Watch::new(&mut c);
    for key in ["f1", "f3"] {
        let p = payload(&mut c, key);
        let (refused, loaded) = restore_damaged(&mut c, &watch, &p, &format!("{server:?}-{key}"), exercise);
        bloomkit_testkit::figure(&format!(
            "hostile valkey-bloom, {server:?}: {} damaged {key} payloads, {refused} refused, {loaded} loaded and round-tripped",
            refused + loaded
        ));
    }
    let p = payload(&mut c, "f1");
    let (head, version) = (&p[..10], &p[p.len() - 10..p.len() - 8]);
    let good = filter_bytes(120, 120, 7, 1);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("zero filters", crafted(head, version, 0, 2, 0.01, 1, &good, 100, 1)),
        ("2^40 filters claimed", crafted(head, version, 1 << 40, 2, 0.01, 1, &good, 100, 1)),
        ("expansion 2^40", crafted(head, version, 1, 1 << 40, 0.01, 1, &good, 100, 1)),
        ("error rate 2", crafted(head, version, 1, 2, 2.0, 1, &good, 100, 1)),
        ("error rate NaN", crafted(head, version, 1, 2, f64::NAN, 1, &good, 100, 1)),
        ("seed flag 2", crafted(head, version, 1, 2, 0.01, 2, &good, 100, 1)),
        ("fixed-seed flag, other seed", crafted(head, version, 1, 2, 0.01, 0, &good, 100, 1)),
        ("capacity 0", crafted(head, version, 1, 2, 0.01, 1, &good, 0, 0)),
        ("capacity 2^64-1", crafted(head, version, 1, 2, 0.01, 1, &good, u64::MAX, 0)),
        ("items 2^64-1", crafted(head, version, 1, 2, 0.01, 1, &good, 100, u64::MAX)),
        (
            "bitmap claims 2^60 bytes",
            crafted(head, version, 1, 2, 0.01, 1, &filter_bytes(120, 1 << 60, 7, 1), 100, 1),
        ),
        ("bitmap claims 0 bytes", crafted(head, version, 1, 2, 0.01, 1, &filter_bytes(0, 0, 7, 1), 100, 1)),
        ("zero hashes", crafted(head, version, 1, 2, 0.01, 1, &filter_bytes(120, 120, 0, 1), 100, 1)),
        ("4e9 hashes", crafted(head, version, 1, 2, 0.01, 1, &filter_bytes(120, 120, u32::MAX, 1), 100, 1)),
        ("filter version 2", crafted(head, version, 1, 2, 0.01, 1, &filter_bytes(120, 120, 7, 2), 100, 1)),
        ("header cut", crafted(head, version, 1, 2, 0.01, 1, &good[..30], 100, 1)),
    ];
    for (what, p) in cases {
        let reply = restore(&mut c, "k", &p);
        assert!(reply.error_text().contains("Bad data format"), "{server:?} {what}: {reply:?}");
        assert_eq!(c.cmd("EXISTS k"), Reply::Int(0));
        watch.check(&mut c, what);
    }
    // A valid crafted value loads (the builder is right), and a 120 MB one
    // is refused by RESTORE's limit before its 1 GB claim could matter.
    let ok = crafted(head, version, 1, 2, 0.01, 1, &good, 100, 1);
    assert_eq!(restore(&mut c, "crafted", &ok), Reply::Simple("OK".into()), "{server:?}\n{}", s.log());
    exercise(&mut c, "crafted", "crafted");
    let big = crafted(head, version, 1, 2, 0.01, 1, &filter_bytes(140 << 20, 140 << 20, 7, 1), 100, 1);
    assert!(
        restore(&mut c, "big", &big).error_text().contains("Bad data format"),
        "{server:?}: over the limit"
    );
    watch.check(&mut c, "a value over the limit");
    assert!(s.log().contains("refused a bloomfltr value"), "{server:?}: refusals are logged");
}

per_server!(damaged_bf_load_blobs_are_refused_with_the_server_alive);
fn damaged_bf_load_blobs_are_refused_with_the_server_alive(server: Server) {
    let blob = aof_blob("f1");
    let mut variants: Vec<(String, Vec<u8>)> =
        (0..blob.len()).map(|len| (format!("cut to {len}"), blob[..len].to_vec())).collect();
    for i in 0..blob.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut b = blob.clone();
            b[i] ^= flip;
            variants.push((format!("byte {i} ^ {flip:#x}"), b));
        }
    }
    let with = |at: usize, bytes: &[u8]| {
        let mut b = blob.clone();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        b
    };
    variants.push(("zero filters".into(), with(22, &0u64.to_le_bytes())));
    variants.push(("2^62 filters".into(), with(22, &(1u64 << 62).to_le_bytes())));
    variants.push(("filter length 2^63".into(), with(30, &(1u64 << 63).to_le_bytes())));
    variants.push(("bitmap claims 2^60 bytes".into(), with(39, &(1u64 << 60).to_le_bytes())));
    let refused_texts = [
        "ERR bloom object decoding failed",
        "ERR (0 < error rate range < 1)",
        "ERR bad expansion",
        "ERR operation exceeds bloom object memory limit",
    ];
    let s = TestServer::hostile(server);
    let mut c = s.conn();
    let watch = Watch::new(&mut c);
    let (mut refused, mut accepted) = (0, 0);
    for (n, (what, b)) in variants.iter().enumerate() {
        let key = format!("l{n}");
        match c.call(&[b"BF.LOAD".to_vec(), key.clone().into_bytes(), b.clone()]) {
            Reply::Simple(ok) if ok == "OK" => {
                accepted += 1;
                exercise(&mut c, &key, what);
            }
            Reply::Error(e) => {
                refused += 1;
                assert!(refused_texts.iter().any(|t| e.starts_with(t)), "{server:?} {what}: {e}");
                assert_eq!(c.call(&["EXISTS", &key]), Reply::Int(0), "{what}");
            }
            other => panic!("{server:?} {what}: {other:?}"),
        }
        watch.check(&mut c, what);
    }
    assert!(refused > 0 && accepted > 0, "{server:?}: {refused} refused, {accepted} accepted");
    bloomkit_testkit::figure(&format!(
        "hostile valkey-bloom, {server:?}: {} damaged BF.LOAD blobs, {refused} refused, {accepted} loaded and exercised",
        refused + accepted
    ));
}
