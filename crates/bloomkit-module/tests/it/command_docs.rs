//! `COMMAND DOCS` and `COMMAND INFO` for the module's commands on real
//! servers: BF.INSERT's argument tree as RedisBloom documents it, and for
//! every registered command a summary, since, complexity, an argument tree
//! the handler agrees with (its fewest and its fullest form pass the
//! handler's arity check) and the dont-cache tip where it belongs
//! (`command_info.rs` checks the rest of `COMMAND INFO` at each level).

use std::collections::BTreeMap;

use bloomkit_testkit::{per_server, Conn, Reply, Server, TestServer};

/// Every command the module registers, with its `since`: RedisBloom's
/// command docs for BF.* and CF.* (BF.CARD came in 2.4.4), valkey-bloom's
/// for BF.LOAD, bloomkit's first release for APBF.*.
const SINCE: &[(&str, &str)] = &[
    ("bf.reserve", "1.0.0"),
    ("bf.add", "1.0.0"),
    ("bf.madd", "1.0.0"),
    ("bf.insert", "1.0.0"),
    ("bf.exists", "1.0.0"),
    ("bf.mexists", "1.0.0"),
    ("bf.info", "1.0.0"),
    ("bf.card", "2.4.4"),
    ("bf.debug", "1.0.0"),
    ("bf.scandump", "1.0.0"),
    ("bf.loadchunk", "1.0.0"),
    ("bf.load", "1.0.0"),
    ("cf.reserve", "1.0.0"),
    ("cf.add", "1.0.0"),
    ("cf.addnx", "1.0.0"),
    ("cf.insert", "1.0.0"),
    ("cf.insertnx", "1.0.0"),
    ("cf.exists", "1.0.0"),
    ("cf.mexists", "1.0.0"),
    ("cf.count", "1.0.0"),
    ("cf.del", "1.0.0"),
    ("cf.compact", "1.0.0"),
    ("cf.info", "1.0.0"),
    ("cf.debug", "1.0.0"),
    ("cf.scandump", "1.0.0"),
    ("cf.loadchunk", "1.0.0"),
    ("apbf.reserve", "0.1.0"),
    ("apbf.add", "0.1.0"),
    ("apbf.madd", "0.1.0"),
    ("apbf.exists", "0.1.0"),
    ("apbf.mexists", "0.1.0"),
    ("apbf.info", "0.1.0"),
    ("apbf.scandump", "0.1.0"),
    ("apbf.advance", "0.1.0"),
    ("apbf.loadchunk", "0.1.0"),
    ("cms.initbydim", "2.0.0"),
    ("cms.initbyprob", "2.0.0"),
    ("cms.incrby", "2.0.0"),
    ("cms.query", "2.0.0"),
    ("cms.merge", "2.0.0"),
    ("cms.info", "2.0.0"),
    ("topk.reserve", "2.0.0"),
    ("xf.reserve", "0.1.0"),
    ("xf.add", "0.1.0"),
    ("xf.madd", "0.1.0"),
    ("xf.addnx", "0.2.0"),
    ("xf.maddnx", "0.2.0"),
    ("xf.insert", "0.1.0"),
    ("xf.exists", "0.1.0"),
    ("xf.mexists", "0.1.0"),
    ("xf.del", "0.1.0"),
    ("xf.count", "0.1.0"),
    ("xf.card", "0.1.0"),
    ("xf.merge", "0.1.0"),
    ("xf.info", "0.1.0"),
    ("xf.scandump", "0.1.0"),
    ("xf.loadchunk", "0.1.0"),
    ("xf.keyring", "0.3.0"),
    ("topk.add", "2.0.0"),
    ("topk.incrby", "2.0.0"),
    ("topk.query", "2.0.0"),
    ("topk.count", "2.0.0"),
    ("topk.list", "2.0.0"),
    ("topk.info", "2.0.0"),
    ("tdigest.create", "2.4.0"),
    ("tdigest.reset", "2.4.0"),
    ("tdigest.add", "2.4.0"),
    ("tdigest.merge", "2.4.0"),
    ("tdigest.min", "2.4.0"),
    ("tdigest.max", "2.4.0"),
    ("tdigest.quantile", "2.4.0"),
    ("tdigest.cdf", "2.4.0"),
    ("tdigest.trimmed_mean", "2.4.0"),
    ("tdigest.rank", "2.4.0"),
    ("tdigest.revrank", "2.4.0"),
    ("tdigest.byrank", "2.4.0"),
    ("tdigest.byrevrank", "2.4.0"),
    ("tdigest.info", "2.4.0"),
];

/// The readers bloomkit marks `dont-cache` at `redisbloom-2.8` (RedisBloom
/// 8's, which spells it `dont_cache`, with TOPK.INFO; and bloomkit's own).
const DONT_CACHE: &[&str] = &[
    "bf.info",
    "bf.debug",
    "bf.scandump",
    "cf.info",
    "cf.debug",
    "cf.scandump",
    "apbf.info",
    "apbf.scandump",
    "cms.info",
    "topk.info",
    "tdigest.info",
    "xf.info",
    "xf.scandump",
];

fn text(r: &Reply) -> String {
    match r {
        Reply::Simple(s) => s.clone(),
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a string: {other:?}"),
    }
}

/// A RESP2 flat `[name, value, ...]` array (or a RESP3 map) as name → value.
fn fields(r: &Reply) -> BTreeMap<String, Reply> {
    match r {
        Reply::Map(pairs) => pairs.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        Reply::Array(items) => {
            assert_eq!(items.len() % 2, 0, "odd field list: {r:?}");
            items.chunks(2).map(|kv| (text(&kv[0]), kv[1].clone())).collect()
        }
        other => panic!("not a field list: {other:?}"),
    }
}

/// One node of an argument tree as `COMMAND DOCS` shows it.
#[derive(Debug, Clone, PartialEq)]
struct DocArg {
    name: String,
    kind: String,
    token: Option<String>,
    optional: bool,
    multiple: bool,
    key_spec_index: Option<i64>,
    subargs: Vec<DocArg>,
}

fn doc_args(r: &Reply) -> Vec<DocArg> {
    r.as_array()
        .iter()
        .map(|node| {
            let f = fields(node);
            let flags: Vec<String> =
                f.get("flags").map(|v| v.as_array().iter().map(text).collect()).unwrap_or_default();
            DocArg {
                name: text(&f["name"]),
                kind: text(&f["type"]),
                token: f.get("token").map(text),
                optional: flags.iter().any(|x| x == "optional"),
                multiple: flags.iter().any(|x| x == "multiple"),
                key_spec_index: f.get("key_spec_index").map(Reply::as_int),
                subargs: f.get("arguments").map(doc_args).unwrap_or_default(),
            }
        })
        .collect()
}

/// `COMMAND DOCS name`: the command's fields.
fn docs(c: &mut Conn, name: &str) -> BTreeMap<String, Reply> {
    let reply = c.call(&["COMMAND", "DOCS", name]);
    let all = fields(&reply);
    assert_eq!(all.len(), 1, "COMMAND DOCS {name}: {reply:?}");
    fields(all.get(name).unwrap_or_else(|| panic!("COMMAND DOCS {name}: {reply:?}")))
}

fn leaf(name: &str, kind: &str, token: Option<&str>, optional: bool, multiple: bool) -> DocArg {
    DocArg {
        name: name.into(),
        kind: kind.into(),
        token: token.map(String::from),
        optional,
        multiple,
        key_spec_index: (kind == "key").then_some(0),
        subargs: Vec::new(),
    }
}

per_server!(bf_insert_documents_every_option);
fn bf_insert_documents_every_option(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    let d = docs(&mut c, "bf.insert");
    assert_eq!(text(&d["since"]), "1.0.0", "{server:?}");
    assert_eq!(text(&d["module"]), "bf", "{server:?}");
    let expected = vec![
        leaf("key", "key", None, false, false),
        leaf("capacity", "integer", Some("CAPACITY"), true, false),
        leaf("error", "double", Some("ERROR"), true, false),
        leaf("expansion", "integer", Some("EXPANSION"), true, false),
        leaf("nocreate", "pure-token", Some("NOCREATE"), true, false),
        leaf("nonscaling", "pure-token", Some("NONSCALING"), true, false),
        leaf("items", "pure-token", Some("ITEMS"), false, false),
        leaf("item", "string", None, false, true),
    ];
    assert_eq!(doc_args(&d["arguments"]), expected, "{server:?}");

    // A one-of: BF.INFO's optional single field.
    let info = doc_args(&docs(&mut c, "bf.info")["arguments"]);
    assert_eq!(info.len(), 2);
    assert_eq!((info[1].kind.as_str(), info[1].optional), ("oneof", true), "{info:?}");
    let tokens: Vec<_> = info[1].subargs.iter().map(|a| a.token.clone().unwrap()).collect();
    assert_eq!(tokens, ["CAPACITY", "SIZE", "FILTERS", "ITEMS", "EXPANSION"]);
}

/// The fewest words the tree needs after the command name.
fn min_words(args: &[DocArg]) -> usize {
    args.iter().filter(|a| !a.optional).map(arg_min_words).sum()
}

fn arg_min_words(a: &DocArg) -> usize {
    let own = match a.kind.as_str() {
        "pure-token" => return 1,
        "oneof" => a.subargs.iter().map(arg_min_words).min().expect("a one-of has alternatives"),
        "block" => min_words(&a.subargs),
        _ => 1,
    };
    own + usize::from(a.token.is_some())
}

/// A call the tree allows: every required argument (`full`: every optional
/// one too), one of each `multiple`, a one-of's first alternative, and
/// plausible values (a fresh key, 1, 0.01, "x").
fn words(args: &[DocArg], key: &str, full: bool, out: &mut Vec<String>) {
    for a in args.iter().filter(|a| full || !a.optional) {
        if let Some(token) = &a.token {
            out.push(token.clone());
        }
        match a.kind.as_str() {
            "pure-token" => {}
            "oneof" => words(&a.subargs[..1], key, full, out),
            "block" => words(&a.subargs, key, full, out),
            "key" => out.push(key.to_string()),
            "integer" => out.push("1".into()),
            "double" => out.push("0.01".into()),
            _ => out.push("x".into()),
        }
    }
}

fn is_arity_error(r: &Reply) -> bool {
    r.is_error() && r.error_text().contains("wrong number of arguments")
}

per_server!(every_command_is_documented_and_its_tree_fits_the_handler: all);
fn every_command_is_documented_and_its_tree_fits_the_handler(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    let mut listed: Vec<String> =
        c.call(&["COMMAND", "LIST", "FILTERBY", "MODULE", "bf"]).as_array().iter().map(text).collect();
    listed.sort();
    let mut expected: Vec<String> = SINCE.iter().map(|(n, _)| n.to_string()).collect();
    expected.sort();
    assert_eq!(listed, expected, "{server:?}: the module's commands");

    for &(name, since) in SINCE {
        let d = docs(&mut c, name);
        for field in ["summary", "complexity"] {
            let value = d.get(field).map(text).unwrap_or_default();
            assert!(value.len() > 3, "{server:?} {name}: {field} {value:?}");
        }
        assert_eq!(d.get("since").map(text).as_deref(), Some(since), "{server:?} {name}");
        assert_eq!(d.get("group").map(text).as_deref(), Some("module"), "{server:?} {name}");

        // Every command takes its key first, the one key spec.
        let args = doc_args(d.get("arguments").unwrap_or_else(|| panic!("{server:?} {name}: no arguments")));
        assert_eq!((args[0].kind.as_str(), args[0].key_spec_index), ("key", Some(0)), "{server:?} {name}");

        // COMMAND INFO: name, arity, flags, first, last, step, ACL categories, tips, ...
        let info = c.call(&["COMMAND", "INFO", name]);
        let info = info.as_array()[0].as_array();
        let arity = info[1].as_int();
        let words_needed = min_words(&args) as i64 + 1;
        if arity > 0 {
            assert_eq!(arity, words_needed, "{server:?} {name}: arity {arity}, tree {args:?}");
        } else {
            assert!(-arity <= words_needed, "{server:?} {name}: arity {arity}, tree {args:?}");
        }
        // Redis 8 answers at `redisbloom-8`: the tip spelled as
        // RedisBloom 8 spells it, and none on TOPK.INFO (as there);
        // the other servers at `redisbloom-2.8`, bloomkit's spelling.
        let tips: Vec<String> = info[7].as_array().iter().map(text).collect();
        let want: Vec<String> = match (DONT_CACHE.contains(&name), server) {
            (false, _) => Vec::new(),
            (true, Server::Redis8) if name == "topk.info" => Vec::new(),
            (true, Server::Redis8) => vec!["dont_cache".into()],
            (true, _) => vec!["dont-cache".into()],
        };
        assert_eq!(tips, want, "{server:?} {name}: tips");

        // The handler agrees with the tree: its fewest and its fullest
        // calls get past the arity check (to succeed or to fail on a
        // value), and one word short of the fewest never succeeds.
        for (full, key) in [(false, format!("min:{name}")), (true, format!("full:{name}"))] {
            let mut call = vec![name.to_string()];
            words(&args, &key, full, &mut call);
            let reply = c.call(&call);
            assert!(!is_arity_error(&reply), "{server:?} {call:?}: {reply:?}");
            if !full {
                assert_eq!(call.len() as i64, words_needed, "{server:?} {call:?}");
                call.pop();
                if call.len() > 1 {
                    call[1] = format!("short:{name}");
                }
                let reply = c.call(&call);
                assert!(reply.is_error(), "{server:?} {call:?} was accepted: {reply:?}");
            }
        }
    }
}

fn block(name: &str, optional: bool, multiple: bool, subargs: Vec<DocArg>) -> DocArg {
    DocArg { subargs, ..leaf(name, "block", None, optional, multiple) }
}

per_server!(argument_facts_as_redisbloom_8_declares_them: redis7, redis8);
/// The argument facts RedisBloom 8 declares where bloomkit's trees used to
/// say otherwise, at every level (RedisBloom 2.8.2 documented none):
/// TOPK.INCRBY takes repeated `item increment` pairs, TOPK.RESERVE its
/// three parameters together or none, and t-digest's rank commands date
/// from 2.4.0. And the facts bloomkit keeps because the handlers (and
/// RedisBloom's) take integers where RedisBloom 8 declares doubles:
/// TDIGEST.BYRANK's ranks and CMS.MERGE's weights.
fn argument_facts_as_redisbloom_8_declares_them(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    let pair =
        vec![leaf("item", "string", None, false, false), leaf("increment", "integer", None, false, false)];
    assert_eq!(
        doc_args(&docs(&mut c, "topk.incrby")["arguments"]),
        vec![leaf("key", "key", None, false, false), block("item_increment", false, true, pair)],
        "{server:?}"
    );
    let params = vec![
        leaf("width", "integer", None, false, false),
        leaf("depth", "integer", None, false, false),
        leaf("decay", "double", None, false, false),
    ];
    assert_eq!(
        doc_args(&docs(&mut c, "topk.reserve")["arguments"]),
        vec![
            leaf("key", "key", None, false, false),
            leaf("topk", "integer", None, false, false),
            block("params", true, false, params),
        ],
        "{server:?}"
    );
    for name in ["tdigest.rank", "tdigest.revrank", "tdigest.byrank", "tdigest.byrevrank"] {
        assert_eq!(text(&docs(&mut c, name)["since"]), "2.4.0", "{server:?} {name}");
    }
    // Kept: integers, as the commands parse them.
    assert_eq!(
        doc_args(&docs(&mut c, "tdigest.byrank")["arguments"])[1],
        leaf("rank", "integer", None, false, true)
    );
    let weight = doc_args(&docs(&mut c, "cms.merge")["arguments"]).pop().unwrap();
    assert_eq!(weight, leaf("weight", "integer", Some("WEIGHTS"), true, true), "{server:?}");
    assert!(c.cmd("TDIGEST.CREATE t").as_bytes() == b"OK" && c.cmd("TDIGEST.BYRANK t 1.5").is_error());
    // Two pairs, and all three parameters or none.
    assert!(!c.cmd("TOPK.RESERVE k 3 8 7 0.9").is_error(), "{server:?}");
    assert!(!c.cmd("TOPK.INCRBY k a 1 b 2").is_error(), "{server:?}");
    assert!(c.cmd("TOPK.RESERVE k2 3 8").is_error(), "{server:?}");
}
