//! Commands that name several keys on a cluster node: a call whose keys
//! fall in different hash slots is refused with the server's own
//! `CROSSSLOT` error (as `ZUNIONSTORE` with the same keys is) and changes
//! nothing, also inside `MULTI`; the same call with the keys in one slot
//! (hash tags) runs; `COMMAND GETKEYS` lists every key. The multi-key
//! commands are found in what the module registers (`COMMAND INFO` key
//! specs and first/last/step, `COMMAND DOCS` key arguments), so a family's
//! new multi-key command without a case here fails the test.
//!
//! Each server runs a one-node cluster that owns every slot
//! ([`TestCluster::single`]): the sources live on the node, so a refusal
//! is the slot check's alone. Before the merges were registered
//! `getkeys-api`, Redis 7.0 ran cross-slot merges, and Redis 8.2 and
//! Valkey 8.1 and 9.1 answered that the (existing) sources did not exist.

use std::collections::BTreeSet;

use bloomkit_testkit::{per_server, Conn, Module, Reply, Server, TestCluster};

/// A multi-key command: how to make a key it reads, and a call with every
/// option after the keys (`$d` the destination, `$s1` and `$s2` the sources).
struct Case {
    command: &'static str,
    /// Commands that make key `$k` a source holding something.
    make: &'static [&'static str],
    /// Whether the destination must exist before the call (CMS.MERGE
    /// merges into a sketch of the same dimensions).
    needs_destination: bool,
    call: &'static str,
}

const CASES: &[Case] = &[
    Case {
        command: "cms.merge",
        make: &["CMS.INITBYDIM $k 10 2", "CMS.INCRBY $k a 3"],
        needs_destination: true,
        call: "CMS.MERGE $d 2 $s1 $s2 WEIGHTS 1 2",
    },
    Case {
        command: "tdigest.merge",
        make: &["TDIGEST.CREATE $k", "TDIGEST.ADD $k 1 2 3"],
        needs_destination: false,
        call: "TDIGEST.MERGE $d 2 $s1 $s2 COMPRESSION 50 OVERRIDE",
    },
    Case {
        command: "xf.merge",
        make: &["XF.RESERVE $k 0.01", "XF.ADD $k a"],
        needs_destination: false,
        call: "XF.MERGE $d 2 $s1 $s2",
    },
];

fn text(r: &Reply) -> String {
    match r {
        Reply::Simple(s) => s.clone(),
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a string: {other:?}"),
    }
}

/// A RESP2 flat `[name, value, ...]` array as (name, value) pairs.
fn pairs(r: &Reply) -> Vec<(String, Reply)> {
    r.as_array().chunks(2).map(|kv| (text(&kv[0]), kv[1].clone())).collect()
}

fn field(r: &Reply, name: &str) -> Reply {
    pairs(r).into_iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("no {name} in {r:?}")).1
}

/// Whether the command, as registered, may name several keys: by its key
/// specs (more than one, a key count, or a range past one key), by its
/// first/last/step, or by its documented arguments (more than one key
/// argument, or a repeated one).
fn names_several_keys(c: &mut Conn, name: &str) -> bool {
    let info = c.call(&["COMMAND", "INFO", name]);
    let info = info.as_array()[0].as_array();
    let (first, last, step) = (info[3].as_int(), info[4].as_int(), info[5].as_int());
    let legacy = first > 0 && (last < 0 || last > first) && step > 0;
    let specs = info[8].as_array();
    let by_specs = specs.len() > 1
        || specs.iter().any(|spec| {
            let find = field(spec, "find_keys");
            match text(&field(&find, "type")).as_str() {
                "range" => field(&field(&find, "spec"), "lastkey").as_int() != 0,
                _ => true,
            }
        });
    let docs = c.call(&["COMMAND", "DOCS", name]);
    let docs = &pairs(&docs)[0].1;
    let mut keys = Vec::new();
    key_arguments(&field(docs, "arguments"), &mut keys);
    let by_docs = keys.len() > 1 || keys.iter().any(|&multiple| multiple);
    legacy || by_specs || by_docs
}

/// Every key argument of a `COMMAND DOCS` tree, as whether it may repeat
/// (itself or inside a repeated block).
fn key_arguments(args: &Reply, out: &mut Vec<bool>) {
    for arg in args.as_array() {
        let flags: Vec<String> = pairs(arg)
            .into_iter()
            .find(|(k, _)| k == "flags")
            .map(|(_, v)| v.as_array().iter().map(text).collect())
            .unwrap_or_default();
        let multiple = flags.iter().any(|f| f == "multiple");
        if text(&field(arg, "type")) == "key" {
            out.push(multiple);
        }
        if let Some((_, sub)) = pairs(arg).into_iter().find(|(k, _)| k == "arguments") {
            let mut inner = Vec::new();
            key_arguments(&sub, &mut inner);
            out.extend(inner.into_iter().map(|m| m || multiple));
        }
    }
}

fn words(template: &str, keys: &[(&str, &str)]) -> Vec<String> {
    template
        .split(' ')
        .map(|w| keys.iter().find(|(name, _)| *name == w).map_or(w, |(_, key)| key).to_string())
        .collect()
}

fn slot(c: &mut Conn, key: &str) -> i64 {
    c.call(&["CLUSTER", "KEYSLOT", key]).as_int()
}

/// The destination's state: absent, or its value's digest.
fn state(c: &mut Conn, key: &str) -> Reply {
    match c.call(&["EXISTS", key]).as_int() {
        0 => Reply::Nil,
        _ => c.call(&["DEBUG", "DIGEST-VALUE", key]),
    }
}

per_server!(multi_key_commands_are_slot_checked: all);
fn multi_key_commands_are_slot_checked(server: Server) {
    let cluster = TestCluster::single(server, &[Module::bloomkit()]);
    let mut c = cluster.nodes[0].conn();

    let listed: Vec<String> =
        c.call(&["COMMAND", "LIST", "FILTERBY", "MODULE", "bf"]).as_array().iter().map(text).collect();
    assert!(listed.len() > 50, "{server:?}: {listed:?}");
    let several: BTreeSet<String> =
        listed.into_iter().filter(|name| names_several_keys(&mut c, name)).collect();
    let cased: BTreeSet<String> = CASES.iter().map(|case| case.command.to_string()).collect();
    assert_eq!(several, cased, "{server:?}: the multi-key commands and the cases here");

    for case in CASES {
        slot_checked(&mut c, server, case);
    }
}

/// One case of [`multi_key_commands_are_slot_checked`]: the call runs with
/// every key in one slot, and is refused as the server refuses its own
/// multi-key commands (CROSSSLOT, in a transaction too) with keys in
/// other slots; COMMAND GETKEYS lists every key either way.
fn slot_checked(c: &mut Conn, server: Server, case: &Case) {
    let make = |c: &mut Conn, key: &str| {
        for line in case.make {
            let reply = c.call(&words(line, &[("$k", key)]));
            assert!(!reply.is_error(), "{server:?} {line} ({key}): {reply:?}");
        }
    };
    // The destination and the two sources, in the slots of these hash tags.
    let keys = |tags: [&str; 3]| -> Vec<String> {
        tags.iter()
            .zip(["d", "s1", "s2"])
            .map(|(tag, role)| format!("{{{tag}}}:{}:{role}", case.command))
            .collect()
    };
    let call_on =
        |keys: &[String]| words(case.call, &[("$d", &keys[0]), ("$s1", &keys[1]), ("$s2", &keys[2])]);
    let getkeys = |c: &mut Conn, call: &[String]| -> Vec<String> {
        let line: Vec<&str> =
            ["COMMAND", "GETKEYS"].into_iter().chain(call.iter().map(String::as_str)).collect();
        c.call(&line).as_array().iter().map(text).collect()
    };

    // One slot: the call runs and writes the destination; every key is listed.
    let same = keys(["m", "m", "m"]);
    for key in &same[1..] {
        make(c, key);
    }
    if case.needs_destination {
        make(c, &same[0]);
    }
    let call = call_on(&same);
    let before = state(c, &same[0]);
    assert_eq!(c.call(&call), Reply::Simple("OK".into()), "{server:?} {call:?}");
    assert_ne!(state(c, &same[0]), before, "{server:?} {call:?} changed nothing");
    assert_eq!(getkeys(c, &call), same, "{server:?} COMMAND GETKEYS {call:?}");
    // COMMAND INFO's first/last/step name the destination alone, and
    // `movablekeys` tells a client routing by them (redis-py's cluster
    // client) to ask COMMAND GETKEYS instead.
    let info = c.call(&["COMMAND", "INFO", case.command]);
    let info = info.as_array()[0].as_array();
    let range = (info[3].as_int(), info[4].as_int(), info[5].as_int());
    assert_eq!(range, (1, 1, 1), "{server:?} {}: first/last/step", case.command);
    let flags: Vec<String> = info[2].as_array().iter().map(text).collect();
    assert!(flags.iter().any(|f| f == "movablekeys"), "{server:?} {}: {flags:?}", case.command);

    // Other slots of the same node, every key present: the sources'
    // slots differ from the destination's, or only the last source's.
    let slots: BTreeSet<i64> = ["{x}", "{y}", "{z}"].iter().map(|k| slot(c, k)).collect();
    assert_eq!(slots.len(), 3, "{server:?}: three slots");
    for cross in [keys(["x", "y", "y"]), keys(["x", "x", "z"])] {
        for key in &cross {
            if c.call(&["EXISTS", key]).as_int() == 0 {
                make(c, key);
            }
        }
        let call = call_on(&cross);
        // The server's own refusal of a multi-key call over these keys.
        let own = c.call(&["ZUNIONSTORE", &cross[0], "2", &cross[1], &cross[2]]);
        assert!(own.error_text().starts_with("CROSSSLOT"), "{server:?}: ZUNIONSTORE {own:?}");
        let before = state(c, &cross[0]);
        assert_eq!(c.call(&call), own, "{server:?} {call:?}");
        assert_eq!(state(c, &cross[0]), before, "{server:?} {call:?} changed the destination");

        // In a transaction: refused when queued, and the EXEC aborted.
        c.ok("MULTI");
        assert_eq!(c.call(&call), own, "{server:?} MULTI {call:?}");
        let exec = c.cmd("EXEC");
        assert!(exec.error_text().starts_with("EXECABORT"), "{server:?} EXEC: {exec:?}");
        assert_eq!(state(c, &cross[0]), before, "{server:?} MULTI {call:?} changed the destination");

        assert_eq!(getkeys(c, &call), cross, "{server:?} COMMAND GETKEYS {call:?}");
    }
}
