//! A RedisBloom user's whole keyspace moves to bloomkit: an RDB file that
//! the real RedisBloom 2.8.2 wrote, with keys of all five of its types (and
//! a plain key beside them), loads into bloomkit on Redis 7.0 and Valkey 9,
//! and every key answers as it did; `bloomkit copy --all` moves the same
//! keys from a live RedisBloom server.

use std::process::Command;

use bloomkit_testkit::{Conn, Module, Reply, Server, TestServer};

/// The keys, one or two of each type, filled by commands both modules take.
/// Top-K uses decay 1, where RedisBloom's answers do not depend on its random
/// draws (README: how bloomkit keeps Top-K replicas identical).
const SETUP: &[&str] = &[
    "BF.RESERVE bf 0.01 100",
    "BF.MADD bf alpha beta gamma delta",
    "BF.INSERT bf-scaled CAPACITY 10 ITEMS a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "CF.RESERVE cf 64",
    "CF.ADD cf alpha",
    "CF.ADD cf alpha",
    "CF.ADD cf beta",
    "CMS.INITBYDIM cms 64 4",
    "CMS.INCRBY cms alpha 5 beta 3 gamma 1",
    "CMS.INITBYPROB cms-prob 0.01 0.01",
    "CMS.INCRBY cms-prob alpha 1000",
    "TOPK.RESERVE topk 3 16 4 1",
    "TOPK.ADD topk a b a c a d b e a",
    "TOPK.INCRBY topk z 7 y 2",
    "TDIGEST.CREATE td COMPRESSION 50",
    "TDIGEST.ADD td 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 100 250",
    "TDIGEST.CREATE td-empty",
    "SET plain hello",
];

/// The questions asked before and after: every read command of every type.
const QUESTIONS: &[&str] = &[
    "TYPE bf",
    "TYPE cf",
    "TYPE cms",
    "TYPE topk",
    "TYPE td",
    "BF.MEXISTS bf alpha beta gamma delta epsilon zeta",
    "BF.CARD bf",
    "BF.INFO bf",
    "BF.INFO bf-scaled",
    "BF.MEXISTS bf-scaled a m z 1 2 3",
    "CF.COUNT cf alpha",
    "CF.MEXISTS cf alpha beta gamma",
    "CF.INFO cf",
    "CMS.QUERY cms alpha beta gamma delta",
    "CMS.INFO cms",
    "CMS.QUERY cms-prob alpha beta",
    "CMS.INFO cms-prob",
    "TOPK.LIST topk WITHCOUNT",
    "TOPK.QUERY topk a b c z y q",
    "TOPK.COUNT topk a b z",
    "TOPK.INFO topk",
    "TDIGEST.QUANTILE td 0 0.1 0.5 0.9 0.99 1",
    "TDIGEST.CDF td 0 5 10.5 99 300",
    "TDIGEST.RANK td 1 10 100",
    "TDIGEST.BYRANK td 0 5 21",
    "TDIGEST.TRIMMED_MEAN td 0.1 0.9",
    "TDIGEST.MIN td",
    "TDIGEST.MAX td",
    "TDIGEST.INFO td",
    "TDIGEST.INFO td-empty",
    "TDIGEST.MIN td-empty",
    "GET plain",
];

/// The answers, each double as its value: servers print doubles their own
/// way (Redis 7.0 with 17 digits, Valkey the shortest text that reads back).
fn answers(c: &mut Conn) -> Vec<Reply> {
    QUESTIONS.iter().map(|q| as_values(c.cmd(q))).collect()
}

fn as_values(r: Reply) -> Reply {
    match r {
        Reply::Bulk(b) => match std::str::from_utf8(&b).ok().and_then(|t| t.parse::<f64>().ok()) {
            Some(x) if b.iter().any(|c| matches!(c, b'.' | b'e' | b'n' | b'i')) => {
                Reply::Double(format!("{x:?}"))
            }
            _ => Reply::Bulk(b),
        },
        Reply::Array(items) => Reply::Array(items.into_iter().map(as_values).collect()),
        other => other,
    }
}

fn assert_same(want: &[Reply], got: &[Reply], what: &str) {
    for ((q, w), g) in QUESTIONS.iter().zip(want).zip(got) {
        assert!(!w.is_error(), "RedisBloom refused {q}: {w:?}");
        assert_eq!(g, w, "{what}: {q}");
    }
}

/// A RedisBloom 2.8.2 server holding the keys, saved (saving compresses the
/// t-digests, so the answers are taken after it).
fn redisbloom_server() -> (TestServer, Vec<Reply>) {
    let rb = TestServer::start(Server::Redis, &[Module::RedisBloom], &[]);
    let mut c = rb.conn();
    for line in SETUP {
        let reply = c.cmd(line);
        assert!(!reply.is_error(), "RedisBloom: {line}: {reply:?}");
    }
    c.ok("SAVE");
    let want = answers(&mut c);
    (rb, want)
}

#[test]
fn a_redisbloom_rdb_file_of_every_type_loads_whole() {
    let (rb, want) = redisbloom_server();
    for server in [Server::Redis, Server::Valkey] {
        let mut bk = TestServer::with_bloomkit(server);
        std::fs::copy(rb.dir().join("dump.rdb"), bk.dir().join("dump.rdb")).unwrap();
        bk.restart(&[]);
        let mut c = bk.conn();
        assert_eq!(c.cmd("DBSIZE"), Reply::Int(9), "{server:?}: every key loaded");
        assert_same(&want, &answers(&mut c), &format!("{server:?} after loading RedisBloom's RDB file"));
        // And they survive bloomkit's own save and load.
        c.ok("DEBUG RELOAD");
        assert_same(&want, &answers(&mut c), &format!("{server:?} after DEBUG RELOAD"));
    }
}

#[test]
fn copy_all_moves_a_redisbloom_keyspace() {
    let (rb, want) = redisbloom_server();
    let bk = TestServer::with_bloomkit(Server::Redis);
    let url = |s: &TestServer| format!("redis://127.0.0.1:{}", s.port);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomkit"));
    cmd.args(["copy", "--from", &url(&rb), "--to", &url(&bk), "--all"]);
    let out = bloomkit_testkit::output_within(&mut cmd, b"", std::time::Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("1 other key left alone"), "{stderr}");
    let mut c = bk.conn();
    assert_eq!(c.cmd("EXISTS plain"), Reply::Int(0), "only filters and sketches are copied");
    c.ok("SET plain hello");
    assert_same(&want, &answers(&mut c), "after bloomkit copy --all");
    // `info` describes each sketch by its INFO command.
    for (key, kind, field) in
        [("cms", "Count-Min Sketch", "width"), ("topk", "Top-K", "k"), ("td", "t-digest", "compression")]
    {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomkit"));
        cmd.args(["info", "--redis", &url(&bk), key, "--json"]);
        let out = bloomkit_testkit::output_within(&mut cmd, b"", std::time::Duration::from_secs(60));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(info["kind"], kind, "{info}");
        assert!(info[field].as_i64().unwrap() > 0, "{key}: {info}");
    }
    // A pattern narrows it; existing keys are refused without --replace.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomkit"));
    cmd.args(["copy", "--from", &url(&rb), "--to", &url(&bk), "--all", "--match", "td*"]);
    let out = bloomkit_testkit::output_within(&mut cmd, b"", std::time::Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("0 of 2 copied") && stderr.contains("already exists"), "{stderr}");
}
