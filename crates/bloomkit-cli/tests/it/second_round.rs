//! What a new user tripped on, second round (issue 43), each held by a test
//! against the real binary and real servers: dedup growing past its
//! capacity, messages that name the type a key holds, sizes for people,
//! and a closed pipe that must not lose a state file silently.

use crate::stderr;
use std::process::{Command, Output};
use std::time::Duration;

/// The binary, with no server variable from the caller's environment.
fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomkit"));
    cmd.args(args).env_remove("BLOOMKIT_URL").env_remove("REDIS_URL").env_remove("REDISCLI_AUTH");
    bloomkit_testkit::output_within(&mut cmd, stdin, Duration::from_secs(300))
}

/// `dedup --capacity 100000` on 2.1 million distinct lines grows past its
/// capacity, as `--help` says, instead of stopping after 1.5 million with
/// "out of memory growing the filter" (the fifth part's rate, 3.1e-8, had
/// no shape: the sizing searched only hash counts near `bits x ln 2`).
#[test]
fn dedup_grows_far_past_its_capacity() {
    let lines = 2_100_000u64;
    let mut input = Vec::with_capacity(lines as usize * 32);
    for i in 0..lines {
        input.extend_from_slice(format!("https://example.com/p/{i}?q={}\n", i * 7919 % 1_000_003).as_bytes());
    }
    let o = run(&["dedup", "--capacity", "100000", "--count"], &input);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let unique: u64 =
        out.split(", ").nth(1).and_then(|u| u.trim_end_matches(" unique").parse().ok()).unwrap();
    // At most 1e-6 per line: about 2 expected false positives; 12 is far out.
    assert!(unique >= lines - 12, "{unique} of {lines} distinct lines written: {out}");
    bloomkit_testkit::figure(&format!(
        "dedup --capacity 100000 over {lines} distinct lines: {}",
        stderr(&o).trim()
    ));
}

/// A filter that cannot be made says why, and that the value is the
/// problem (exit 2): no "out of memory" for a rate no shape reaches.
#[test]
fn a_filter_that_cannot_be_made_says_why() {
    let o = run(&["dedup", "--capacity", "1000", "--error-rate", "1e-300"], b"a\n");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("error rate 1e-300") && e.contains("bits per item") && !e.contains("memory"), "{e}");
}

/// A key of another type is named, with what to do: an expandable filter
/// under `--capacity` (README: "holds a hash"), a window, a string.
#[test]
fn dedup_names_the_type_a_key_holds() {
    let s = bloomkit_testkit::TestServer::with_bloomkit(bloomkit_testkit::Server::Redis);
    let url = format!("redis://127.0.0.1:{}", s.port);
    let mut c = s.conn();
    c.ok("XF.ADD x a");
    c.ok("APBF.RESERVE w 0.01 100 COUNT");
    c.ok("HSET h f v");
    for (args, holds, to_do) in [
        (
            vec!["--key", "x", "--capacity", "100000"],
            "holds an expandable filter (XF)",
            "leave out --capacity",
        ),
        (vec!["--key", "w"], "holds a sliding-window filter (APBF)", "Bloom or expandable filter"),
        (vec!["--key", "h", "--capacity", "100"], "holds a hash", "keeps a Bloom filter there"),
        (
            vec!["--key", "x", "--window-count", "100"],
            "holds an expandable filter (XF)",
            "sliding-window filter",
        ),
    ] {
        let mut all = vec!["dedup", "--redis", &url];
        all.extend(&args);
        let o = run(&all, b"a\nb\n");
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let e = stderr(&o);
        assert!(e.contains(holds) && e.contains(to_do), "{args:?}: {e}");
        assert!(o.stdout.is_empty(), "{args:?}: nothing read or written");
    }
    assert_eq!(c.cmd("XF.CARD x").as_int(), 1, "the key is as it was");
}

/// `info` prints every family's size for people, with the exact bytes
/// beside it, as it prints a Bloom filter's (JSON keeps the integer).
#[test]
fn info_sizes_are_for_people() {
    let s = bloomkit_testkit::TestServer::with_bloomkit(bloomkit_testkit::Server::Redis);
    let url = format!("redis://127.0.0.1:{}", s.port);
    let mut c = s.conn();
    c.ok("XF.RESERVE x 0.01 CAPACITY 100000");
    c.ok("APBF.RESERVE w 0.001 100000 TIME 600");
    c.ok("CF.RESERVE cf 100000");
    for key in ["x", "w", "cf"] {
        let o = run(&["info", "--redis", &url, key], b"");
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        let size = out.lines().find(|l| l.starts_with("size ")).unwrap_or_else(|| panic!("{key}: {out}"));
        assert!(size.contains("KiB (") && size.ends_with(" bytes)"), "{key}: {size}");
        let o = run(&["info", "--redis", &url, key, "--json"], b"");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(v["size"].is_u64(), "{key}: {v}");
    }
}

/// `dedup --state s file | head -3`: the reader went away, so the state
/// (which would remember lines nobody received) is not saved, and dedup
/// says so and fails, instead of ending with status 0 and no state.
#[test]
fn a_closed_pipe_never_loses_a_state_file_silently() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let lines: String = (0..300_000).map(|i| format!("line-{i}\n")).collect();
    std::fs::write(&input, lines).unwrap();
    let state = dir.path().join("s.bkf");
    let bin = env!("CARGO_BIN_EXE_bloomkit");
    let line = format!(
        "{bin} dedup --state {} {} | head -n 3; echo status=${{PIPESTATUS[0]}}",
        state.display(),
        input.display()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &line]).env_remove("BLOOMKIT_URL").env_remove("REDIS_URL");
    let o = bloomkit_testkit::output_within(&mut cmd, b"", Duration::from_secs(120));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("line-0\nline-1\nline-2\n") && out.contains("status=1"), "{out}");
    let e = stderr(&o);
    assert!(e.contains("standard output was closed") && e.contains("was NOT updated"), "{e}");
    assert!(!state.exists(), "no state was saved");
    // Read whole, the same run saves its state, and a rerun writes nothing.
    let whole = run(&["dedup", "--state", state.to_str().unwrap(), input.to_str().unwrap(), "--count"], b"");
    assert!(whole.status.success() && state.exists(), "{}", stderr(&whole));
}

/// Restoring or copying into a server without the module names the module
/// to load, for every type (issue 43: BF and CF dumps said "Parse error at 1
/// invalid utf-8 sequence", an XF dump "the expandable filter file is
/// damaged"), and changes nothing there.
#[test]
fn a_server_without_the_module_is_named_for_every_type() {
    use bloomkit_testkit::{Module, Server, TestServer};
    let with = TestServer::start(
        Server::Redis,
        &[Module::Bloomkit(vec!["COMPAT".into(), "valkey-bloom".into()])],
        &[],
    );
    let plain = TestServer::start(Server::Redis, &[], &[]);
    let (from, to) =
        (format!("redis://127.0.0.1:{}", with.port), format!("redis://127.0.0.1:{}", plain.port));
    let mut c = with.conn();
    for line in [
        "BF.ADD vb a", // valkey-bloom's type under this level
        "CF.ADD cf a",
        "CF.RESERVE cf-empty 1000",
        "XF.ADD xf a",
        "APBF.RESERVE apbf 0.01 100 COUNT",
        "CMS.INITBYDIM cms 10 2",
        "TOPK.RESERVE topk 3",
        "TDIGEST.CREATE td",
    ] {
        c.ok(line);
    }
    // A RedisBloom Bloom filter: bloomkit's type at a RedisBloom level.
    let rb = TestServer::with_bloomkit(Server::Redis);
    rb.conn().ok("BF.ADD bf a");
    let rb_url = format!("redis://127.0.0.1:{}", rb.port);
    let dir = tempfile::tempdir().unwrap();
    let keys = [
        ("bf", &rb_url, "or RedisBloom"),
        ("vb", &from, "or valkey-bloom"),
        ("cf", &from, "or RedisBloom"),
        ("cf-empty", &from, "or RedisBloom"),
        ("xf", &from, "no other module has it"),
        ("apbf", &from, "no other module has it"),
        ("cms", &from, "or RedisBloom"),
        ("topk", &from, "or RedisBloom"),
        ("td", &from, "or RedisBloom"),
    ];
    for (key, source, others) in keys {
        let file = dir.path().join(format!("{key}.bkf"));
        let file = file.to_str().unwrap();
        let o = run(&["dump", "--redis", source, key, "-o", file], b"");
        assert!(o.status.success(), "{key}: {}", stderr(&o));
        for args in [
            vec!["restore", "--redis", &to, key, "-i", file],
            vec!["copy", "--from", source, "--to", &to, key],
        ] {
            let o = run(&args, b"");
            assert_eq!(o.status.code(), Some(1), "{args:?}");
            let e = stderr(&o);
            assert!(e.contains("load bloomkit's module") && e.contains(others), "{args:?}: {e}");
            assert!(!e.contains("utf-8") && !e.contains("damaged"), "{args:?}: {e}");
        }
    }
    assert_eq!(
        plain.conn().cmd("DBSIZE").as_int(),
        0,
        "nothing was written to the server without the module"
    );
}
