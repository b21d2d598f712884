//! `COMMAND INFO` at the RedisBloom 8 levels, against what RedisBloom 8
//! declares (`../shared/vectors/redisbloom-8-command-info.tsv`, measured on
//! Redis 8.2: arity, flags, ACL categories, tips and key-spec flags where
//! it differed from bloomkit's), row by row, in RESP2 and RESP3; every
//! field the table does not list is as bloomkit registers it at
//! `redisbloom-2.8`, except the arity, which RedisBloom 8 gives everywhere.
//! Where bloomkit keeps its own answer ([`KEPT`]) the test asserts that
//! answer and the reason is README's.

use std::collections::BTreeMap;

use bloomkit_testkit::{Conn, Module, Reply, Server, TestServer};

/// The measured table, verbatim: command, field, RedisBloom 8's value.
const MEASURED: &str = "\
bf.add	arity	3
bf.add	acl	['@write', '@bloom']
bf.add	ks	[['RW']]
bf.card	arity	2
bf.card	ks	[['RO']]
bf.debug	arity	2
bf.debug	flags	['readonly', 'module', 'fast']
bf.debug	tips	[b'dont_cache']
bf.debug	ks	[['RO']]
bf.exists	arity	3
bf.exists	acl	['@read', '@bloom']
bf.exists	ks	[['RO']]
bf.info	arity	-2
bf.info	tips	[b'dont_cache']
bf.info	ks	[['RO']]
bf.insert	arity	-4
bf.insert	ks	[['RW']]
bf.loadchunk	arity	4
bf.loadchunk	ks	[['RW']]
bf.madd	arity	-3
bf.madd	ks	[['RW']]
bf.mexists	arity	-3
bf.mexists	ks	[['RO']]
bf.reserve	arity	-4
bf.reserve	acl	['@write', '@fast', '@bloom']
bf.reserve	ks	[['RW']]
bf.scandump	arity	3
bf.scandump	flags	['readonly', 'module', 'fast']
bf.scandump	tips	[b'dont_cache']
bf.scandump	ks	[['RW']]
cf.add	arity	3
cf.add	acl	['@write', '@cuckoo']
cf.add	ks	[['RW']]
cf.addnx	arity	3
cf.addnx	acl	['@write', '@cuckoo']
cf.addnx	ks	[['RW']]
cf.compact	flags	['readonly', 'module', 'fast']
cf.compact	acl	['@read', '@cuckoo']
cf.compact	ks	[['RW', 'access', 'update']]
cf.count	arity	3
cf.count	acl	['@read', '@cuckoo']
cf.count	ks	[['RO']]
cf.debug	arity	2
cf.debug	flags	['readonly', 'module', 'fast']
cf.debug	tips	[b'dont_cache']
cf.debug	ks	[['RO']]
cf.del	arity	3
cf.del	acl	['@write', '@cuckoo']
cf.del	ks	[['RW']]
cf.exists	arity	3
cf.exists	acl	['@read', '@cuckoo']
cf.exists	ks	[['RO']]
cf.info	arity	2
cf.info	tips	[b'dont_cache']
cf.info	ks	[['RO']]
cf.insert	arity	-4
cf.insert	ks	[['RW']]
cf.insertnx	arity	-4
cf.insertnx	ks	[['RW']]
cf.loadchunk	arity	4
cf.loadchunk	ks	[['RW']]
cf.mexists	arity	-3
cf.mexists	ks	[['RO']]
cf.reserve	arity	-3
cf.reserve	acl	['@write', '@fast', '@cuckoo']
cf.reserve	ks	[['RW']]
cf.scandump	arity	3
cf.scandump	flags	['readonly', 'module', 'fast']
cf.scandump	tips	[b'dont_cache']
cf.scandump	ks	[['RW']]
cms.incrby	arity	-4
cms.incrby	ks	[['RW']]
cms.info	arity	2
cms.info	acl	['@read', '@fast', '@cms']
cms.info	tips	[b'dont_cache']
cms.info	ks	[['RO']]
cms.initbydim	arity	4
cms.initbydim	acl	['@write', '@fast', '@cms']
cms.initbydim	ks	[['RW']]
cms.initbyprob	arity	4
cms.initbyprob	acl	['@write', '@fast', '@cms']
cms.initbyprob	ks	[['RW']]
cms.merge	arity	-4
cms.merge	flags	['write', 'denyoom', 'module']
cms.merge	ks	[['RW']]
cms.query	arity	-3
cms.query	ks	[['RO']]
tdigest.add	arity	-3
tdigest.add	ks	[['RW']]
tdigest.byrank	arity	-3
tdigest.byrank	acl	['@read', '@fast', '@tdigest']
tdigest.byrank	ks	[['RO']]
tdigest.byrevrank	arity	-3
tdigest.byrevrank	acl	['@read', '@fast', '@tdigest']
tdigest.byrevrank	ks	[['RO']]
tdigest.cdf	arity	-3
tdigest.cdf	acl	['@read', '@fast', '@tdigest']
tdigest.cdf	ks	[['RO']]
tdigest.create	arity	-2
tdigest.create	acl	['@write', '@fast', '@tdigest']
tdigest.create	ks	[['RW']]
tdigest.info	arity	2
tdigest.info	acl	['@read', '@fast', '@tdigest']
tdigest.info	tips	[b'dont_cache']
tdigest.info	ks	[['RO']]
tdigest.max	arity	2
tdigest.max	acl	['@read', '@fast', '@tdigest']
tdigest.max	ks	[['RO']]
tdigest.merge	arity	-4
tdigest.merge	ks	[['RW'], ['RO']]
tdigest.min	arity	2
tdigest.min	acl	['@read', '@fast', '@tdigest']
tdigest.min	ks	[['RO']]
tdigest.quantile	arity	-3
tdigest.quantile	acl	['@read', '@fast', '@tdigest']
tdigest.quantile	ks	[['RO']]
tdigest.rank	arity	-3
tdigest.rank	acl	['@read', '@fast', '@tdigest']
tdigest.rank	ks	[['RO']]
tdigest.reset	arity	2
tdigest.reset	acl	['@write', '@fast', '@tdigest']
tdigest.reset	ks	[['RW']]
tdigest.revrank	arity	-3
tdigest.revrank	acl	['@read', '@fast', '@tdigest']
tdigest.revrank	ks	[['RO']]
tdigest.trimmed_mean	arity	4
tdigest.trimmed_mean	ks	[['RO']]
topk.add	arity	-3
topk.add	ks	[['RW']]
topk.count	arity	-3
topk.count	ks	[['RO']]
topk.incrby	arity	-4
topk.incrby	ks	[['RW']]
topk.info	arity	2
topk.info	acl	['@read', '@fast', '@topk']
topk.info	tips	[]
topk.info	ks	[['RO']]
topk.list	arity	-2
topk.list	ks	[['RO']]
topk.query	arity	-3
topk.query	ks	[['RO']]
topk.reserve	arity	-3
topk.reserve	acl	['@write', '@fast', '@topk']
topk.reserve	ks	[['RW']]
";

/// Key specs keep `access` (the command reads the key's data) and `insert` /
/// `update` (it writes it): the server's ACL checks a user's `%R~` and
/// `%W~` key patterns by exactly these flags, so RedisBloom 8's bare `RO`
/// and `RW` let a write-only user read a filter and a read-only user change
/// one ([`acl_key_patterns_hold_at_every_level`]).
const KEY_FLAGS: &str = "ACL %R~/%W~ key patterns are checked by access/insert/update";
/// BF.SCANDUMP and CF.SCANDUMP read their key: `RO access`, not `RW` (with
/// which a `%W~` user could dump a filter it may not read).
const SCANDUMP_RO: &str = "a scandump reads its key";
/// CMS.MERGE declares its sources, as TDIGEST.MERGE does in RedisBloom 8 too,
/// so that clients routing by `COMMAND GETKEYS` see them and ACL key
/// patterns apply to them (the cluster's slot check has them from the
/// keys-position request, `cluster_keys.rs`); the server then flags it
/// `movablekeys`.
const MERGE_SOURCES: &str = "cms.merge declares its source keys";
/// CF.COMPACT changes the filter and replicates: RedisBloom 8's `readonly
/// fast` and `@read` would let it run on a read-only replica (diverging
/// from its primary) and for a `+@read` user.
const COMPACT_WRITES: &str = "cf.compact writes";

/// Where bloomkit keeps its own value at the RedisBloom 8 levels: command,
/// field, bloomkit's value, why (README, "Differences from RedisBloom 8").
const KEPT: &[(&str, &str, &str, &str)] = &[
    ("bf.add", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("bf.card", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("bf.debug", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("bf.exists", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("bf.info", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("bf.insert", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("bf.loadchunk", "ks", "[['RW', 'update']]", KEY_FLAGS),
    ("bf.madd", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("bf.mexists", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("bf.reserve", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("bf.scandump", "ks", "[['RO', 'access']]", SCANDUMP_RO),
    ("cf.add", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("cf.addnx", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("cf.compact", "flags", "['write', 'module']", COMPACT_WRITES),
    ("cf.compact", "acl", "['@write', '@cuckoo']", COMPACT_WRITES),
    ("cf.count", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("cf.debug", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("cf.del", "ks", "[['RW', 'update']]", KEY_FLAGS),
    ("cf.exists", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("cf.info", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("cf.insert", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("cf.insertnx", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("cf.loadchunk", "ks", "[['RW', 'update']]", KEY_FLAGS),
    ("cf.mexists", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("cf.reserve", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("cf.scandump", "ks", "[['RO', 'access']]", SCANDUMP_RO),
    ("cms.incrby", "ks", "[['RW', 'update']]", KEY_FLAGS),
    ("cms.info", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("cms.initbydim", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("cms.initbyprob", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("cms.merge", "flags", "['write', 'denyoom', 'module', 'movablekeys']", MERGE_SOURCES),
    ("cms.merge", "ks", "[['RW', 'update'], ['RO', 'access']]", MERGE_SOURCES),
    ("cms.query", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("tdigest.add", "ks", "[['RW', 'update']]", KEY_FLAGS),
    ("tdigest.byrank", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("tdigest.byrevrank", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("tdigest.cdf", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("tdigest.create", "ks", "[['RW', 'insert']]", KEY_FLAGS),
    ("tdigest.info", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("tdigest.max", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("tdigest.merge", "ks", "[['RW', 'insert'], ['RO', 'access']]", KEY_FLAGS),
    ("tdigest.min", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("tdigest.quantile", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("tdigest.rank", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("tdigest.reset", "ks", "[['RW', 'update']]", KEY_FLAGS),
    ("tdigest.revrank", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("tdigest.trimmed_mean", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("topk.add", "ks", "[['RW', 'update']]", KEY_FLAGS),
    ("topk.count", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("topk.incrby", "ks", "[['RW', 'update']]", KEY_FLAGS),
    ("topk.info", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("topk.list", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("topk.query", "ks", "[['RO', 'access']]", KEY_FLAGS),
    ("topk.reserve", "ks", "[['RW', 'insert']]", KEY_FLAGS),
];

fn text(r: &Reply) -> String {
    match r {
        Reply::Simple(s) => s.clone(),
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a string: {other:?}"),
    }
}

/// A list as the table writes it: `['a', 'b']`.
fn list(items: &[Reply]) -> String {
    format!("[{}]", items.iter().map(|i| format!("'{}'", text(i))).collect::<Vec<_>>().join(", "))
}

/// A RESP2 flat `[name, value, ...]` array (or a RESP3 map) as name → value.
fn fields(r: &Reply) -> BTreeMap<String, Reply> {
    match r {
        Reply::Map(pairs) => pairs.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        Reply::Array(items) => items.chunks(2).map(|kv| (text(&kv[0]), kv[1].clone())).collect(),
        other => panic!("not a field list: {other:?}"),
    }
}

/// `COMMAND INFO name`'s fields as the table writes them.
fn info(c: &mut Conn, name: &str) -> BTreeMap<&'static str, String> {
    let reply = c.call(&["COMMAND", "INFO", name]);
    let info = reply.as_array()[0].as_array();
    assert_eq!(text(&info[0]), name);
    let key_specs: Vec<String> =
        info[8].as_array().iter().map(|spec| list(fields(spec)["flags"].as_array())).collect();
    BTreeMap::from([
        ("arity", info[1].as_int().to_string()),
        ("flags", list(info[2].as_array())),
        ("acl", list(info[6].as_array())),
        ("tips", list(info[7].as_array())),
        ("ks", format!("[{}]", key_specs.join(", "))),
    ])
}

/// The table's rows, its bytes (`b'dont_cache'`) written as strings.
fn measured() -> Vec<(&'static str, &'static str, String)> {
    MEASURED
        .lines()
        .map(|line| {
            let mut cols = line.split('\t');
            let (name, field, value) = (cols.next().unwrap(), cols.next().unwrap(), cols.next().unwrap());
            (name, field, value.replace("b'", "'"))
        })
        .collect()
}

/// RedisBloom's commands: every command the table names.
fn redisbloom_commands() -> Vec<&'static str> {
    let mut names: Vec<_> = measured().into_iter().map(|(n, _, _)| n).collect();
    names.dedup();
    names
}

fn server(level: &str) -> TestServer {
    TestServer::start(Server::Redis8, &[Module::Bloomkit(vec!["COMPAT".into(), level.into()])], &[])
}

fn hello(s: &TestServer, protocol: &str) -> Conn {
    let mut c = s.conn();
    assert!(!c.call(&["HELLO", protocol]).is_error());
    c
}

#[test]
fn redisbloom_8_level_declares_what_redisbloom_8_declares() {
    let rb8 = server("redisbloom-8");
    let rb28 = server("redisbloom-2.8");
    let rows = measured();
    for &(name, field, _, _) in KEPT {
        assert!(
            rows.iter().any(|(n, f, _)| (*n, *f) == (name, field)),
            "KEPT {name} {field}: not a measured row"
        );
    }
    for protocol in ["2", "3"] {
        let (mut c, mut old) = (hello(&rb8, protocol), hello(&rb28, protocol));
        for name in redisbloom_commands() {
            let now = info(&mut c, name);
            let before = info(&mut old, name);
            for field in ["arity", "flags", "acl", "tips", "ks"] {
                let row = rows.iter().find(|(n, f, _)| (*n, *f) == (name, field));
                let kept = KEPT.iter().find(|(n, f, _, _)| (*n, *f) == (name, field));
                let want = match (row, kept) {
                    (_, Some((_, _, ours, _))) => ours.to_string(),
                    (Some((_, _, theirs)), None) => theirs.clone(),
                    // Not listed: RedisBloom 8 declares what bloomkit declared
                    // when it was measured, as the 2.8 level still does.
                    (None, None) => before[field].clone(),
                };
                assert_eq!(now[field], want, "RESP{protocol} {name} {field}");
            }
        }
    }
}

fn arity(c: &mut Conn, name: &str) -> i64 {
    info(c, name)["arity"].parse().unwrap()
}

fn wrong_arity(name: &str) -> Reply {
    Reply::Error(format!("ERR wrong number of arguments for '{name}' command"))
}

/// The server now checks RedisBloom 8's arities first: one word too few (and
/// one too many for an exact arity) answer the server's text, the same one
/// RedisBloom 8 answers, whatever the case the name was typed in; at
/// `redisbloom-2.8` the handlers' own checks answer with the same text.
#[test]
fn wrong_counts_answer_as_redisbloom_8() {
    let rb8 = server("redisbloom-8");
    let rb28 = server("redisbloom-2.8");
    let (mut c, mut old) = (rb8.conn(), rb28.conn());
    for name in redisbloom_commands() {
        let n = arity(&mut c, name);
        assert_eq!(arity(&mut old, name), -1, "{name} at redisbloom-2.8");
        let mut counts = vec![n.abs() - 1];
        if n > 0 {
            counts.push(n + 1);
        }
        for count in counts.into_iter().filter(|&k| k >= 1) {
            let mut call = vec![name.to_uppercase()];
            call.extend((1..count).map(|i| format!("{i}")));
            assert_eq!(c.call(&call), wrong_arity(name), "{call:?}");
        }
    }
    assert_eq!(old.call(&["BF.ADD", "k"]), wrong_arity("bf.add"));
    assert_eq!(old.call(&["CMS.INITBYDIM", "k", "10"]), wrong_arity("cms.initbydim"));
    // In a transaction the server refuses it when it is queued, as for RedisBloom 8.
    assert_eq!(c.cmd("MULTI"), Reply::Simple("OK".into()));
    assert_eq!(c.call(&["BF.ADD", "k"]), wrong_arity("bf.add"));
    assert!(c.cmd("EXEC").error_text().starts_with("EXECABORT"));
}

/// ACL key patterns apply to every command at every level: a user who may
/// only read keys cannot change a filter and one who may only write cannot
/// read one (RedisBloom 8's bare key-spec flags would let both through).
#[test]
fn acl_key_patterns_hold_at_every_level() {
    for level in ["redisbloom-8", "redisbloom-2.8"] {
        let s = server(level);
        let mut admin = s.conn();
        for step in [
            "BF.ADD b x",
            "CF.ADD c x",
            "CMS.INITBYDIM m 10 5",
            "CMS.INITBYDIM src 10 5",
            "ACL SETUSER reader on >pw %R~* +@all",
            "ACL SETUSER writer on >pw %W~* +@all",
        ] {
            assert!(!admin.cmd(step).is_error(), "{level} {step}");
        }
        let mut reader = s.conn();
        assert_eq!(reader.cmd("AUTH reader pw"), Reply::Simple("OK".into()));
        let mut writer = s.conn();
        assert_eq!(writer.cmd("AUTH writer pw"), Reply::Simple("OK".into()));
        let denied = |r: &Reply| r.is_error() && r.error_text().starts_with("NOPERM");
        for line in ["BF.ADD b y", "BF.RESERVE b2 0.01 100", "CF.DEL c x", "CF.COMPACT c", "CMS.INCRBY m x 1"]
        {
            assert!(denied(&reader.cmd(line)), "{level} reader {line}");
        }
        for line in
            ["BF.EXISTS b x", "BF.SCANDUMP b 0", "CF.SCANDUMP c 0", "CMS.QUERY m x", "CMS.MERGE m 1 src"]
        {
            assert!(denied(&writer.cmd(line)), "{level} writer {line}");
        }
        assert_eq!(reader.cmd("BF.EXISTS b x"), Reply::Int(1), "{level}");
        assert_eq!(writer.cmd("BF.ADD b y"), Reply::Int(1), "{level}");
    }
}

/// `redisbloom-8.12` answers as `redisbloom-8` but for the Count-Min Sketch,
/// whose creations take `CELL_SIZE` there: "at least 4 words", and the
/// option in their argument trees; at `redisbloom-8` they take exactly 4.
#[test]
fn redisbloom_8_12_level_takes_cell_size() {
    let rb812 = server("redisbloom-8.12");
    let rb8 = server("redisbloom-8");
    for protocol in ["2", "3"] {
        let (mut c, mut old) = (hello(&rb812, protocol), hello(&rb8, protocol));
        for name in redisbloom_commands() {
            let (now, before) = (info(&mut c, name), info(&mut old, name));
            if name.starts_with("cms.initby") {
                assert_eq!((now["arity"].as_str(), before["arity"].as_str()), ("-4", "4"), "{name}");
                for field in ["flags", "acl", "tips", "ks"] {
                    assert_eq!(now[field], before[field], "RESP{protocol} {name} {field}");
                }
            } else {
                assert_eq!(now, before, "RESP{protocol} {name}");
            }
        }
    }
    let (mut c, mut old) = (rb812.conn(), rb8.conn());
    assert_eq!(c.cmd("CMS.INITBYDIM k 10 5 CELL_SIZE 1"), Reply::Simple("OK".into()));
    assert_eq!(c.cmd("CMS.INITBYPROB p 0.01 0.01 CELL_SIZE 8"), Reply::Simple("OK".into()));
    assert_eq!(old.cmd("CMS.INITBYDIM k 10 5 CELL_SIZE 1"), wrong_arity("cms.initbydim"));
    for (name, second) in [("cms.initbydim", "width"), ("cms.initbyprob", "error")] {
        let with = doc_arg_names(&mut c, name);
        assert_eq!(with[1], second, "{name}");
        assert_eq!(with.last().map(String::as_str), Some("cell_size CELL_SIZE optional"), "{name}");
        assert_eq!(doc_arg_names(&mut old, name).len(), 3, "{name} at redisbloom-8");
    }
}

/// A command's top-level arguments in `COMMAND DOCS`: the name, then its
/// token and `optional` where it has them.
fn doc_arg_names(c: &mut Conn, name: &str) -> Vec<String> {
    let reply = c.call(&["COMMAND", "DOCS", name]);
    let docs = fields(&fields(&reply)[name]);
    docs["arguments"]
        .as_array()
        .iter()
        .map(|a| {
            let f = fields(a);
            let mut words = vec![text(&f["name"])];
            words.extend(f.get("token").map(text));
            let flags: Vec<String> =
                f.get("flags").map(|v| v.as_array().iter().map(text).collect()).unwrap_or_default();
            words.extend(flags.into_iter().filter(|x| x == "optional"));
            words.join(" ")
        })
        .collect()
}

/// Every server loads the module at the RedisBloom 8 levels and checks
/// RedisBloom 8's arities (Redis 7.0 and Valkey have the arity in
/// `RedisModule_SetCommandInfo` too); the readers keep answering.
#[test]
fn every_server_takes_redisbloom_8_s_arities() {
    for server in Server::ALL {
        for level in ["redisbloom-8", "redisbloom-8.12"] {
            let s = TestServer::start(server, &[Module::Bloomkit(vec!["COMPAT".into(), level.into()])], &[]);
            let mut c = s.conn();
            assert_eq!(arity(&mut c, "bf.add"), 3, "{server:?} {level}");
            assert_eq!(arity(&mut c, "tdigest.trimmed_mean"), 4, "{server:?} {level}");
            let initbydim = if level == "redisbloom-8" { 4 } else { -4 };
            assert_eq!(arity(&mut c, "cms.initbydim"), initbydim, "{server:?} {level}");
            assert_eq!(c.cmd("BF.ADD k"), wrong_arity("bf.add"), "{server:?} {level}");
            assert_eq!(c.cmd("BF.ADD k x"), Reply::Int(1), "{server:?} {level}");
            assert_eq!(c.cmd("BF.EXISTS k x"), Reply::Int(1), "{server:?} {level}");
            assert_eq!(info(&mut c, "bf.info")["tips"], "['dont_cache']", "{server:?} {level}");
        }
    }
}
