//! TTLs go with keys (issue 43 item 2): `copy`, `copy --all` and `dump |
//! restore` give every kind of key the TTL it had left, the file format
//! records it (files without it, older ones included, restore as before),
//! and `--no-ttl` drops it.

use crate::stderr;
use std::process::{Command, Output};
use std::time::Duration;

use bloomkit_testkit::{Conn, Module, Reply, Server, TestServer};

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomkit"));
    cmd.args(args).env_remove("BLOOMKIT_URL").env_remove("REDIS_URL").env_remove("REDISCLI_AUTH");
    bloomkit_testkit::output_within(&mut cmd, stdin, Duration::from_secs(120))
}

fn ok(args: &[&str], stdin: &[u8]) -> Output {
    let o = run(args, stdin);
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

/// A day, the TTL of a daily dedup key.
const DAY: i64 = 86_400;

/// One key of every kind bloomkit moves, each expiring in a day but `still`.
fn keys(c: &mut Conn) -> Vec<&'static str> {
    for line in [
        "BF.ADD bf a",
        "CF.ADD cf a",
        "CF.RESERVE cf-empty 1000",
        "XF.ADD xf a",
        "APBF.RESERVE apbf 0.01 100 COUNT",
        "CMS.INITBYDIM cms 10 2",
        "TOPK.RESERVE topk 3",
        "TDIGEST.CREATE td",
        "BF.ADD still a",
    ] {
        c.ok(line);
    }
    let expiring = vec!["bf", "cf", "cf-empty", "xf", "apbf", "cms", "topk", "td"];
    for key in &expiring {
        assert_eq!(c.call(&["EXPIRE", key, &DAY.to_string()]), Reply::Int(1));
    }
    expiring
}

/// The key's TTL is a day, less the seconds the test took.
fn assert_day(c: &mut Conn, key: &str, what: &str) {
    let ttl = c.call(&["TTL", key]).as_int();
    assert!((DAY - 60..=DAY).contains(&ttl), "{what}: '{key}' has TTL {ttl}");
}

fn assert_none(c: &mut Conn, key: &str, what: &str) {
    assert_eq!(c.call(&["TTL", key]), Reply::Int(-1), "{what}: '{key}' has a TTL");
}

#[test]
fn copy_and_dump_restore_carry_ttls_of_every_kind() {
    // Valkey 9 to Redis 7.0, as migrations go; a valkey-bloom filter too.
    let from = TestServer::start(
        Server::Valkey,
        &[Module::Bloomkit(vec!["COMPAT".into(), "valkey-bloom".into()])],
        &[],
    );
    let to = TestServer::with_bloomkit(Server::Redis);
    let (f, t) = (format!("redis://127.0.0.1:{}", from.port), format!("redis://127.0.0.1:{}", to.port));
    let (mut a, mut b) = (from.conn(), to.conn());
    let mut expiring = keys(&mut a);
    a.ok("BF.ADD vb a"); // valkey-bloom's type at this level
    a.ok("EXPIRE vb 86400");
    expiring.push("vb");

    // copy, key by key: each keeps its TTL, and says so.
    for key in &expiring {
        let o = ok(&["copy", "--from", &f, "--to", &t, key], b"");
        assert!(stderr(&o).contains("TTL 86"), "{key}: {}", stderr(&o));
        assert_day(&mut b, key, "copy");
    }
    ok(&["copy", "--from", &f, "--to", &t, "still"], b"");
    assert_none(&mut b, "still", "copy of a key without a TTL");
    // --no-ttl drops them; copy --all carries them all.
    ok(&["copy", "--from", &f, "--to", &t, "--replace", "--no-ttl", "bf"], b"");
    assert_none(&mut b, "bf", "copy --no-ttl");
    b.ok("FLUSHALL");
    ok(&["copy", "--from", &f, "--to", &t, "--all"], b"");
    for key in &expiring {
        assert_day(&mut b, key, "copy --all");
    }
    assert_none(&mut b, "still", "copy --all");

    // dump | restore, through files: the file records when the key expires.
    let dir = tempfile::tempdir().unwrap();
    b.ok("FLUSHALL");
    for key in expiring.iter().chain(&["still"]) {
        let file = dir.path().join(format!("{key}.bkf"));
        let file = file.to_str().unwrap();
        let o = ok(&["dump", "--redis", &f, key, "-o", file], b"");
        let bytes = std::fs::read(file).unwrap();
        if *key == "still" {
            assert!(!bytes.starts_with(b"BKEXPIRE"), "a key without a TTL: the file is as before");
            ok(&["restore", "--redis", &t, key, "-i", file], b"");
            assert_none(&mut b, key, "restore of a file without a TTL");
            continue;
        }
        assert!(bytes.starts_with(b"BKEXPIRE"), "{key}: the file records the TTL");
        assert!(stderr(&o).contains("recorded in the file"), "{key}: {}", stderr(&o));
        let o = ok(&["restore", "--redis", &t, key, "-i", file], b"");
        assert!(stderr(&o).contains("expires in 86"), "{key}: {}", stderr(&o));
        assert_day(&mut b, key, "dump and restore");
        ok(&["restore", "--redis", &t, key, "-i", file, "--replace", "--no-ttl"], b"");
        assert_none(&mut b, key, "restore --no-ttl");
        assert_eq!(b.call(&["TYPE", key]), a.call(&["TYPE", key]), "{key}");
    }
    // A bitmap filter (plain strings, given its parameters) carries its TTL too.
    let bitmap = ["--bitmap", "--capacity", "1000", "--error-rate", "0.01"];
    ok(&[&["dedup", "--redis", &f, "--key", "bits"][..], &bitmap[..]].concat(), b"a\nb\n");
    a.ok("EXPIRE bits 86400");
    ok(&[&["copy", "--from", &f, "--to", &t, "bits"][..], &bitmap[..]].concat(), b"");
    assert_day(&mut b, "bits", "copy of a bitmap");
    let bits_file = dir.path().join("bits.bkf");
    let bits_file = bits_file.to_str().unwrap();
    ok(&[&["dump", "--redis", &f, "bits", "-o", bits_file][..], &bitmap[..]].concat(), b"");
    ok(&["restore", "--redis", &t, "bits2", "-i", bits_file], b"");
    assert_day(&mut b, "bits2", "dump and restore of a bitmap");
    // dump --no-ttl writes the file as before.
    let file = dir.path().join("no-ttl.bkf");
    let o = ok(&["dump", "--redis", &f, "bf", "-o", file.to_str().unwrap(), "--no-ttl"], b"");
    assert!(!std::fs::read(&file).unwrap().starts_with(b"BKEXPIRE"), "{}", stderr(&o));
}

#[test]
fn files_old_and_expired() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let url = format!("redis://127.0.0.1:{}", s.port);
    let mut c = s.conn();
    c.ok("BF.ADD bf a");
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.bkf");
    // A file as bloomkit wrote it before TTLs (BLOOMKIT...), of a key that had one.
    c.ok("EXPIRE bf 86400");
    ok(&["dump", "--redis", &url, "bf", "-o", old.to_str().unwrap(), "--no-ttl"], b"");
    let bare = std::fs::read(&old).unwrap();
    assert!(bare.starts_with(b"BLOOMKIT"));
    ok(&["restore", "--redis", &url, "from-old", "-i", old.to_str().unwrap()], b"");
    assert_none(&mut c, "from-old", "an old file");
    // A file whose key expired an hour ago is refused, and restores with --no-ttl.
    let past = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
        - 3_600_000;
    let mut expired = bloomkit_client::transfer::expiry_record(past).to_vec();
    expired.extend_from_slice(&bare);
    let file = dir.path().join("expired.bkf");
    std::fs::write(&file, &expired).unwrap();
    let o = run(&["restore", "--redis", &url, "late", "-i", file.to_str().unwrap()], b"");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("expired 3600s ago") && stderr(&o).contains("--no-ttl"), "{}", stderr(&o));
    assert_eq!(c.cmd("EXISTS late"), Reply::Int(0), "nothing written");
    ok(&["restore", "--redis", &url, "late", "-i", file.to_str().unwrap(), "--no-ttl"], b"");
    assert_none(&mut c, "late", "--no-ttl");
    // A damaged record is refused.
    expired[10] ^= 1;
    std::fs::write(&file, &expired).unwrap();
    let o = run(&["restore", "--redis", &url, "damaged", "-i", file.to_str().unwrap()], b"");
    assert!(stderr(&o).contains("expiry record") && stderr(&o).contains("damaged"), "{}", stderr(&o));
    // A dump with a TTL is a state file dedup reads (a filter in process does not expire).
    let with_ttl = dir.path().join("ttl.bkf");
    ok(&["dump", "--redis", &url, "bf", "-o", with_ttl.to_str().unwrap()], b"");
    let o = ok(&["dedup", "--state", with_ttl.to_str().unwrap()], b"a\nb\n");
    assert_eq!(o.stdout, b"b\n", "the state held 'a'");
    // Guava's format has no place for a TTL: the summary says it is lost.
    c.ok("SETBIT g 63 1");
    c.ok("EXPIRE g 600");
    let guava = dir.path().join("g.bin");
    let o = ok(
        &["dump", "--redis", &url, "g", "--bitmap", "--format", "guava", "-o", guava.to_str().unwrap()],
        b"",
    );
    assert!(stderr(&o).contains("is not in the file: Guava's format has no place for it"), "{}", stderr(&o));
}

/// `copy --all` of many small keys (issue 51 item 3): per-user filters of
/// every family, of 1 to 50 items, with and without TTLs, go whole a
/// batch at a time; each lands byte for byte with the TTL it had left, a
/// key that exists at the destination is refused (and replaced with
/// `--replace`), and a large key still goes chunk by chunk.
#[test]
fn copy_all_moves_many_small_keys_whole() {
    let a = TestServer::with_bloomkit(Server::Redis);
    let b = TestServer::with_bloomkit(Server::Redis);
    let (mut c, mut d) = (a.conn(), b.conn());
    let n = 1_500;
    for i in 0..n {
        let key = format!("u:{i}");
        let mut cmd = match i % 3 {
            0 => vec!["XF.MADD".to_string(), key.clone()],
            1 => vec!["BF.INSERT".to_string(), key.clone(), "CAPACITY".into(), "100".into(), "ITEMS".into()],
            _ => vec!["CF.INSERT".to_string(), key.clone(), "CAPACITY".into(), "100".into(), "ITEMS".into()],
        };
        cmd.extend((0..1 + i % 50).map(|j| format!("item{j}")));
        assert!(!c.call(&cmd).is_error(), "{cmd:?}");
        if i % 2 == 0 {
            c.call(&["EXPIRE", &key, &(DAY + i as i64).to_string()]);
        }
    }
    c.ok("BF.RESERVE large 0.001 1000000");
    d.ok("XF.ADD u:7 taken");
    let (url_a, url_b) = (format!("redis://127.0.0.1:{}", a.port), format!("redis://127.0.0.1:{}", b.port));
    let out = run(&["copy", "--from", &url_a, "--to", &url_b, "--all"], b"");
    let text = stderr(&out);
    assert!(!out.status.success() && text.contains("u:7"), "the existing key is refused: {text}");
    assert!(text.contains(&format!("{} small keys copied whole", n - 1)), "{text}");
    assert!(text.contains("large (Bloom filter): done"), "the large key chunk by chunk: {text}");
    for i in (0..n).filter(|&i| i != 7) {
        let key = format!("u:{i}");
        let digest = |c: &mut Conn| c.call(&["DEBUG", "DIGEST-VALUE", &key]);
        assert_eq!(digest(&mut d), digest(&mut c), "{key}");
        let (want, got) = (c.call(&["TTL", &key]).as_int(), d.call(&["TTL", &key]).as_int());
        assert!((want - got).abs() <= 1 && (want == -1) == (got == -1), "{key}: TTL {got}, source {want}");
    }
    let out = ok(&["copy", "--from", &url_a, "--to", &url_b, "--all", "--replace"], b"");
    assert!(stderr(&out).contains(&format!("{n} small keys copied whole")), "{}", stderr(&out));
    assert_eq!(d.call(&["DEBUG", "DIGEST-VALUE", "u:7"]), c.call(&["DEBUG", "DIGEST-VALUE", "u:7"]));
}
