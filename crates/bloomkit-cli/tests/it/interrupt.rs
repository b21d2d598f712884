//! Signals sent to the real binary midway through a transfer or a dedup,
//! and what is left afterwards on the server and on disk: a SIGINT or
//! SIGTERM leaves nothing staged and no partial file, and `dedup --state`
//! saves every line it wrote; a SIGKILL leaves a staging key that `info`
//! reports and the next transfer into that key removes.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use bloomkit_testkit::{Conn, Server, TestServer};

/// Polls `done` until it holds, failing the test after `within`.
fn until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < end, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The binary, started with piped standard streams, its standard output
/// and error drained by threads (returned by [`finish`]).
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: std::thread::JoinHandle<Vec<u8>>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
    /// What has reached standard output so far.
    seen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

fn start(args: &[&str]) -> Running {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bloomkit"))
        .args(args)
        .env_remove("BLOOMKIT_URL")
        .env_remove("REDIS_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start bloomkit");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut out = child.stdout.take().unwrap();
    let seen_out = seen.clone();
    let stdout = std::thread::spawn(move || {
        let mut buf = [0u8; 1 << 16];
        loop {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen_out.lock().unwrap().extend_from_slice(&buf[..n]),
            }
        }
        seen_out.lock().unwrap().clone()
    });
    let mut err = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf);
        buf
    });
    Running { stdin: child.stdin.take(), child, stdout, stderr, seen }
}

impl Running {
    fn signal(&self, name: &str) {
        let status = Command::new("kill").arg(format!("-{name}")).arg(self.child.id().to_string()).status();
        assert!(status.unwrap().success(), "kill -{name}");
    }

    /// Waits for the exit (two minutes at most); exit code, stdout, stderr.
    fn finish(mut self) -> (Option<i32>, Vec<u8>, String) {
        drop(self.stdin.take());
        self.finish_with_stdin_open()
    }

    /// As [`Running::finish`], with standard input still open until the exit:
    /// the signal alone must stop the command (an end of input right after
    /// it would race the signal's delivery on a busy machine).
    fn finish_with_stdin_open(mut self) -> (Option<i32>, Vec<u8>, String) {
        let status = bloomkit_testkit::wait_within(&mut self.child, Duration::from_secs(120))
            .expect("bloomkit exits after the signal");
        drop(self.stdin.take());
        let out = self.stdout.join().unwrap();
        let err = String::from_utf8_lossy(&self.stderr.join().unwrap()).into_owned();
        (status.code(), out, err)
    }
}

fn url(s: &TestServer) -> String {
    format!("redis://127.0.0.1:{}", s.port)
}

fn exists(c: &mut Conn, key: &str) -> bool {
    c.call(&["EXISTS", key]).as_int() == 1
}

/// The keys whose name contains `part`.
fn keys_with(c: &mut Conn, part: &str) -> Vec<String> {
    let pattern = format!("*{part}*");
    c.call(&["KEYS", pattern.as_str()])
        .as_array()
        .iter()
        .map(|k| String::from_utf8_lossy(k.as_bytes()).into_owned())
        .collect()
}

/// A Bloom filter file of about 40 MB (three 16 MiB chunks), dumped by the CLI.
fn big_filter_file(s: &TestServer, dir: &std::path::Path) -> Vec<u8> {
    let mut c = s.conn();
    c.ok("BF.RESERVE big 0.0001 20000000 NONSCALING");
    c.ok("BF.ADD big one");
    let file = dir.join("big.bkf");
    let out = Command::new(env!("CARGO_BIN_EXE_bloomkit"))
        .args(["dump", "--redis", &url(s), "big", "-o", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read(&file).unwrap()
}

/// SIGINT while `restore` waits for the rest of its input (fed through a
/// pipe, stopped halfway): the staging key holding the first half is
/// removed, the key is not created, and the exit status is 130.
/// SIGTERM does the same with 143.
#[test]
fn restore_interrupted_removes_its_staging_key() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let dir = tempfile::tempdir().unwrap();
    let file = big_filter_file(&s, dir.path());
    let mut c = s.conn();
    for (signal, status) in [("INT", 130), ("TERM", 143)] {
        let mut run = start(&["restore", "--redis", &url(&s), "copy"]);
        run.stdin.as_mut().unwrap().write_all(&file[..file.len() / 2]).unwrap();
        let staging = format!("{{copy}}:bloomkit-staging:{}", run.child.id());
        until("the staging key appears", Duration::from_secs(60), || exists(&mut c, &staging));
        run.signal(signal);
        let (code, _, stderr) = run.finish_with_stdin_open();
        assert_eq!(code, Some(status), "SIG{signal}: {stderr}");
        assert!(stderr.contains("interrupted") && stderr.contains("staging key was removed"), "{stderr}");
        assert!(!exists(&mut c, &staging), "SIG{signal} left {staging}");
        assert!(keys_with(&mut c, "bloomkit-staging").is_empty(), "nothing staged is left");
        assert!(!exists(&mut c, "copy"), "a half-restored filter must not appear");
    }
    // The same file, whole, restores.
    let mut run = start(&["restore", "--redis", &url(&s), "copy", "-i", "-"]);
    run.stdin.as_mut().unwrap().write_all(&file).unwrap();
    let (code, _, stderr) = run.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(c.cmd("BF.EXISTS copy one").as_int(), 1);
}

/// SIGKILL gives no chance to clean up: the staging key stays (with its
/// one-hour TTL), `info` reports it, and the next restore into the key,
/// once the staging key has been idle for a few seconds (its transfer is
/// gone), removes it and says so.
#[test]
fn a_killed_restore_is_cleaned_up_by_the_next() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let dir = tempfile::tempdir().unwrap();
    let file = big_filter_file(&s, dir.path());
    let mut c = s.conn();
    let mut run = start(&["restore", "--redis", &url(&s), "copy"]);
    run.stdin.as_mut().unwrap().write_all(&file[..file.len() / 2]).unwrap();
    let staging = format!("{{copy}}:bloomkit-staging:{}", run.child.id());
    until("the staging key appears", Duration::from_secs(60), || exists(&mut c, &staging));
    run.signal("KILL");
    let (code, _, _) = run.finish();
    assert_eq!(code, None, "killed by the signal");
    assert!(exists(&mut c, &staging), "SIGKILL leaves the staging key");
    let ttl = c.call(&["TTL", staging.as_str()]).as_int();
    assert!(ttl > 0 && ttl <= 3600, "a safety TTL: {ttl}");

    let info = Command::new(env!("CARGO_BIN_EXE_bloomkit"))
        .args(["info", "--redis", &url(&s), "copy", "--json"])
        .output()
        .unwrap();
    assert!(info.status.success(), "{}", String::from_utf8_lossy(&info.stderr));
    let json: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(json["leftover_staging_keys"][0]["key"], staging.as_str(), "{json}");
    let said = String::from_utf8_lossy(&info.stderr);
    assert!(said.contains(&staging) && said.contains("interrupted"), "{said}");

    // Idle long enough to be a dead transfer's.
    until("the staging key is idle", Duration::from_secs(30), || {
        c.call(&["OBJECT", "IDLETIME", staging.as_str()]).as_int() >= 5
    });
    let mut run = start(&["restore", "--redis", &url(&s), "copy"]);
    run.stdin.as_mut().unwrap().write_all(&file).unwrap();
    let (code, _, stderr) = run.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains(&format!("removed '{staging}'")), "{stderr}");
    assert!(!exists(&mut c, &staging));
    assert!(keys_with(&mut c, "bloomkit-staging").is_empty(), "no staging key and no list of them left");
    assert_eq!(c.cmd("BF.EXISTS copy one").as_int(), 1);
}

/// SIGTERM during `copy`: the destination is held (CLIENT PAUSE WRITE)
/// once the staging key appears, so the signal lands mid-load; the copy
/// stops at its next command, removes the staging key and exits 143.
#[test]
fn copy_interrupted_removes_its_staging_key() {
    let a = TestServer::with_bloomkit(Server::Redis);
    let b = TestServer::with_bloomkit(Server::Redis);
    let mut src = a.conn();
    src.ok("BF.RESERVE big 0.0001 20000000 NONSCALING");
    src.ok("BF.ADD big one");
    let mut dst = b.conn();
    let run = start(&["copy", "--from", &url(&a), "--to", &url(&b), "big"]);
    let staging = format!("{{big}}:bloomkit-staging:{}", run.child.id());
    until("the staging key appears", Duration::from_secs(60), || exists(&mut dst, &staging));
    dst.ok("CLIENT PAUSE 1000 WRITE");
    run.signal("TERM");
    let (code, _, stderr) = run.finish();
    assert_eq!(code, Some(143), "{stderr}");
    assert!(stderr.contains("interrupted") && stderr.contains("staging key was removed"), "{stderr}");
    assert!(!exists(&mut dst, &staging));
    assert!(!exists(&mut dst, "big"));
    assert!(keys_with(&mut dst, "bloomkit-staging").is_empty());
}

/// SIGINT during `dump -o FILE`: the source is held (CLIENT PAUSE ALL) once
/// the temporary file exists; the dump stops, removes it, and FILE is
/// never created.
#[test]
fn dump_interrupted_leaves_no_file() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("BF.RESERVE big 0.0001 20000000 NONSCALING");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.bkf");
    let run = start(&["dump", "--redis", &url(&s), "big", "-o", file.to_str().unwrap()]);
    let tmp = dir.path().join(format!("big.tmp-{}", run.child.id()));
    until("the temporary file appears", Duration::from_secs(60), || tmp.exists());
    c.ok("CLIENT PAUSE 1000 ALL");
    run.signal("INT");
    let (code, _, stderr) = run.finish();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("interrupted") && stderr.contains("partial file was removed"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "the dump left {left:?}");
}

/// SIGINT while `dedup --state` waits for more input: it saves the state
/// with every line it wrote, says so, and exits 130; the next run over the
/// whole input writes exactly the lines the first did not.
#[test]
fn dedup_state_is_saved_on_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("seen.bkf");
    let lines: Vec<String> = (0..100_000).map(|i| format!("line-{i:08}-{}", "x".repeat(20))).collect();
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let half = input.len() / 2;
    let mut run = start(&["dedup", "--state", state.to_str().unwrap(), "--capacity", "1M"]);
    run.stdin.as_mut().unwrap().write_all(&input.as_bytes()[..half]).unwrap();
    // Output is buffered: wait until some of it has come out.
    let seen = run.seen.clone();
    until("dedup writes", Duration::from_secs(60), || !seen.lock().unwrap().is_empty());
    run.signal("INT");
    // Standard input stays open until the exit: closing it right after the
    // signal let the reader reach the end of the input first on a busy
    // machine (a fresh clone's CI: exit 0, every line of the first half
    // read, where the signal's 130 was due).
    let (code, first, stderr) = run.finish_with_stdin_open();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("interrupted") && stderr.contains("holds every line written"), "{stderr}");
    assert!(state.exists(), "the state was saved");
    let first: Vec<&[u8]> = first.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    assert!(!first.is_empty());

    let out = bloomkit_testkit::output_within(
        Command::new(env!("CARGO_BIN_EXE_bloomkit")).args(["dedup", "--state", state.to_str().unwrap()]),
        input.as_bytes(),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let second: Vec<&[u8]> = out.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    let firsts: std::collections::HashSet<&[u8]> = first.iter().copied().collect();
    assert!(second.iter().all(|l| !firsts.contains(l)), "a line written before the signal came out again");
    // (At 1e-6, a false positive among 100 000 lines is unlikely; allow one.)
    assert!(first.len() + second.len() + 1 >= lines.len(), "{} + {}", first.len(), second.len());
}

/// A dump killed outright (SIGKILL) leaves its partial file; the next dump
/// to the same file, finding its process gone, removes it and says so.
#[test]
fn a_killed_dump_is_cleaned_up_by_the_next() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("BF.RESERVE big 0.0001 20000000 NONSCALING");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.bkf");
    let run = start(&["dump", "--redis", &url(&s), "big", "-o", file.to_str().unwrap()]);
    let tmp = dir.path().join(format!("big.tmp-{}", run.child.id()));
    until("the temporary file appears", Duration::from_secs(60), || tmp.exists());
    c.ok("CLIENT PAUSE 1000 ALL");
    run.signal("KILL");
    let (code, _, _) = run.finish();
    assert_eq!(code, None);
    assert!(tmp.exists(), "SIGKILL leaves the partial file");
    let again = bloomkit_testkit::output_within(
        Command::new(env!("CARGO_BIN_EXE_bloomkit")).args([
            "dump",
            "--redis",
            &url(&s),
            "big",
            "-o",
            file.to_str().unwrap(),
        ]),
        b"",
        Duration::from_secs(120),
    );
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("removed {}", tmp.display())), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["big.bkf"], "only the dump is left");
}
