//! What a new user tripped on (issue 35), each held by a test against the
//! real binary: where the server comes from, `-` as a standard stream,
//! closed pipes, terminals, JSON numbers, columns, plurals, one error
//! style, `-V` on subcommands.

use crate::stderr;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use bloomkit_testkit::{Server, TestServer};

/// The binary with these environment variables (and no other server
/// variable from the caller's environment), run in `dir`.
fn run_in(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: &[u8]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomkit"));
    cmd.args(args).current_dir(dir).env_remove("BLOOMKIT_URL").env_remove("REDIS_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    bloomkit_testkit::output_within(&mut cmd, stdin, Duration::from_secs(120))
}

fn run(args: &[&str], env: &[(&str, &str)], stdin: &[u8]) -> Output {
    run_in(&std::env::temp_dir(), args, env, stdin)
}

/// A shell line, for pipes and pseudo-terminals.
fn shell(line: &str, stdin: &[u8]) -> Output {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", line]).env_remove("BLOOMKIT_URL").env_remove("REDIS_URL");
    bloomkit_testkit::output_within(&mut cmd, stdin, Duration::from_secs(120))
}

/// Every command takes its server from --redis, else $BLOOMKIT_URL, else
/// $REDIS_URL, as a URL or as host:port, host or :port; with none, the
/// error names all three.
#[test]
fn the_server_comes_from_the_option_or_the_environment() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let url = format!("redis://127.0.0.1:{}", s.port);
    let host_port = format!("127.0.0.1:{}", s.port);
    let port_only = format!(":{}", s.port);
    let dead = "redis://127.0.0.1:1";
    let mut c = s.conn();
    c.ok("BF.ADD f a");
    let items = |o: &Output| {
        assert!(o.status.success(), "{}", stderr(o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["items"].as_u64()
    };
    let info = ["info", "f", "--json"];
    assert_eq!(items(&run(&info, &[("BLOOMKIT_URL", &url)], b"")), Some(1));
    assert_eq!(items(&run(&info, &[("REDIS_URL", &url)], b"")), Some(1));
    assert_eq!(items(&run(&info, &[("BLOOMKIT_URL", &url), ("REDIS_URL", dead)], b"")), Some(1));
    assert_eq!(items(&run(&info, &[("BLOOMKIT_URL", &host_port)], b"")), Some(1));
    for given in [&url, &host_port, &port_only] {
        let o = run(&["info", "--redis", given, "f", "--json"], &[("BLOOMKIT_URL", dead)], b"");
        assert_eq!(items(&o), Some(1), "--redis {given} wins over the environment");
    }
    // None given: exit 2, naming every source.
    let o = run(&info, &[], b"");
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("--redis") && e.contains("BLOOMKIT_URL") && e.contains("REDIS_URL"), "{e}");
    // A malformed address says which source it came from and what is accepted.
    let o = run(&info, &[("BLOOMKIT_URL", "127.0.0.1:http")], b"");
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("$BLOOMKIT_URL") && e.contains("host:port"), "{e}");

    // dedup runs in process unless asked for a server: --key implies one.
    let o = run(&["dedup", "--key", "seen"], &[("BLOOMKIT_URL", &host_port)], b"x\ny\nx\n");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, b"x\ny\n");
    assert_eq!(
        c.cmd("TYPE seen").as_bytes(),
        bloomkit_core::xf::TYPE_NAME.as_bytes(),
        "the filter is on the server"
    );
    let o = run(&["dedup", "--redis"], &[("REDIS_URL", &url)], b"x\n");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(c.cmd("EXISTS bloomkit:dedup").as_int(), 1, "--redis alone takes the environment's");
    // `--redis FILE` is not read as a server.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.txt"), "x\n").unwrap();
    let o = run_in(dir.path(), &["dedup", "--redis", "in.txt"], &[("REDIS_URL", &url)], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("it is a file here"), "{}", stderr(&o));
    // copy: --to from the environment.
    let other = TestServer::with_bloomkit(Server::Valkey);
    let o = run(&["copy", "--from", &host_port, "f"], &[("BLOOMKIT_URL", &format!(":{}", other.port))], b"");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(other.conn().cmd("BF.EXISTS f a").as_int(), 1);
}

/// `-` is standard output for `dump -o` and standard input for `restore
/// -i` and `dedup`; no file named `-` appears.
#[test]
fn a_dash_is_a_standard_stream() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let url = format!("redis://127.0.0.1:{}", s.port);
    let mut c = s.conn();
    c.ok("BF.ADD f a");
    let dir = tempfile::tempdir().unwrap();
    let dump = run_in(dir.path(), &["dump", "--redis", &url, "f", "-o", "-"], &[], b"");
    assert!(dump.status.success(), "{}", stderr(&dump));
    assert!(dump.stdout.starts_with(b"BLOOMKIT"), "the dump went to standard output");
    assert!(stderr(&dump).contains("to standard output"), "{}", stderr(&dump));
    let restore = run_in(dir.path(), &["restore", "--redis", &url, "g", "-i", "-"], &[], &dump.stdout);
    assert!(restore.status.success(), "{}", stderr(&restore));
    assert_eq!(c.cmd("BF.EXISTS g a").as_int(), 1);
    let dedup = run_in(dir.path(), &["dedup", "-"], &[], b"q\nq\nr\n");
    assert_eq!(dedup.stdout, b"q\nr\n");
    assert!(!dir.path().join("-").exists(), "a file named '-' was written");
    let o = run_in(dir.path(), &["dedup", "--state", "-"], &[], b"q\n");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// A reader that goes away (`| head`) ends a command quietly with status
/// 0, whether or not standard error goes down the same closed pipe: never
/// "Broken pipe", never a panic.
#[test]
fn a_closed_pipe_ends_quietly() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let url = format!("redis://127.0.0.1:{}", s.port);
    s.conn().ok("BF.RESERVE big 0.001 10000000");
    let bin = env!("CARGO_BIN_EXE_bloomkit");
    let lines: String = (0..300_000).map(|i| format!("line {i}\n")).collect();
    for line in [
        format!("{bin} dump --redis {url} big | head -c 100 >/dev/null; echo status=${{PIPESTATUS[0]}}"),
        format!("{bin} dump --redis {url} big 2>&1 | head -c 100 >/dev/null; echo status=${{PIPESTATUS[0]}}"),
        format!("{bin} dedup 2>&1 | head -n 1 >/dev/null; echo status=${{PIPESTATUS[0]}}"),
        format!("{bin} calc -n 1e9 --table --bits-per-item 5,6,7,8,9,10 2>&1 | head -n 1 >/dev/null; echo status=${{PIPESTATUS[0]}}"),
    ] {
        let o = shell(&line, lines.as_bytes());
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(out.trim(), "status=0", "{line}: {}", stderr(&o));
        assert!(o.stderr.is_empty(), "{line}: {}", stderr(&o));
    }
    // With standard error still open, nothing is said about the pipe.
    let o = shell(&format!("{bin} dump --redis {url} big | head -c 100 >/dev/null"), b"");
    assert!(!stderr(&o).contains("Broken pipe") && !stderr(&o).contains("error"), "{}", stderr(&o));
}

/// On a terminal (util-linux's `script`): `dedup` and `restore` reading
/// the terminal say so on standard error; dedup's counts start on a line
/// of their own, the progress bar cleared first.
#[test]
fn terminals_get_a_hint_and_a_clean_line() {
    let bin = env!("CARGO_BIN_EXE_bloomkit");
    let on_terminal = |command: &str, typed: &[u8]| {
        let mut cmd = Command::new("script");
        cmd.args(["-qfec", command, "/dev/null"]).env_remove("BLOOMKIT_URL").env_remove("REDIS_URL");
        let out = bloomkit_testkit::output_within(&mut cmd, typed, Duration::from_secs(120));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Lines typed, then Ctrl-D.
    let screen = on_terminal(&format!("{bin} dedup --count"), b"a\nb\na\n\x04");
    assert!(screen.contains("reading lines from standard input, which is a terminal"), "{screen}");
    assert!(screen.contains("3 lines, 2 unique, 1 duplicate\r\n"), "{screen}");
    let screen = on_terminal(&format!("{bin} restore --redis 127.0.0.1:1 k"), b"\x04");
    assert!(screen.contains("reading the filter file from standard input, which is a terminal"), "{screen}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lines.txt");
    let text: String = (0..2_000_000).map(|i| format!("line-{i}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let screen = on_terminal(&format!("{bin} dedup --count {}", file.display()), b"");
    let counts = screen.lines().find(|l| l.contains(" unique, ")).expect("the counts");
    // What the terminal shows of that line: the text after the last
    // carriage return or escape sequence (erase line, cursor up).
    let mut shown = counts.rsplit('\r').find(|part| !part.is_empty()).unwrap_or(counts);
    if let Some(at) = shown.rfind("\x1b[") {
        let rest = &shown[at + 2..];
        shown = &rest[rest.find(|c: char| c.is_ascii_alphabetic()).map_or(0, |i| i + 1)..];
    }
    let tail = &counts[counts.len().saturating_sub(300)..];
    assert!(shown.starts_with("2000000 lines"), "the counts share a line with the bar: ...{tail:?}");
}

/// JSON counts are integers; the table's columns hold for any rate; one
/// error prefix; plurals; `-V` on subcommands.
#[test]
fn output_people_read_and_scripts_parse() {
    let o = run(&["calc", "-m", "512MiB", "-n", "1e8"], &[], b"");
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(!text.contains("0.0000"), "rates in short form: {text}");
    // The longest name, then one space: every value starts there.
    let at = text.lines().map(|l| l.find(" lookups").map_or(0, |i| i + " lookups ".len())).max().unwrap();
    assert!(at > 0, "{text}");
    for line in text.lines() {
        let b = line.as_bytes();
        assert!(b[at - 1] == b' ' && b[at] != b' ', "every value starts in column {at}:\n{text}");
    }
    assert!(text.contains("BF.RESERVE key 1.092e-9 100000000"), "{text}");
    let o = run(&["calc", "-n", "1e6", "-p", "0.01", "--json"], &[], b"");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["hashes"].to_string(), "7");
    assert_eq!(v["bytes"].to_string(), "1198133");

    // One error style, clap's usage errors included.
    for args in [&["dedup", "--bogus"][..], &["info", "--redis", "redis://127.0.0.1:1", "k"], &["calc"]] {
        let o = run(args, &[], b"");
        assert!(stderr(&o).starts_with("bloomkit: error: "), "{args:?}: {}", stderr(&o));
    }

    let o = run(&["dedup"], &[], b"a\na\n");
    let e = stderr(&o);
    assert!(e.contains("2 lines read, 1 written, 1 duplicate,"), "{e}");
    assert!(e.contains(" KiB (") || e.contains(" MiB ("), "human sizes with the exact bytes: {e}");
    let o = run(&["dedup"], &[], b"a\n");
    assert!(stderr(&o).contains("1 line read, 1 written, 0 duplicates,"), "{}", stderr(&o));

    for command in ["dedup", "dump", "calc", "copy"] {
        let o = run(&[command, "-V"], &[], b"");
        assert!(o.status.success(), "{command} -V: {}", stderr(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains(env!("CARGO_PKG_VERSION")));
    }
}

/// Each subcommand's manual page has a SYNOPSIS with option values,
/// DESCRIPTION, OPTIONS, EXAMPLES (the README's command lines), EXIT
/// STATUS and SIGNALS; `dump --help` names every kind of key dump handles.
#[test]
fn manual_pages_match_the_binary() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    for command in ["calc", "dedup", "dump", "restore", "copy", "info", "completions", "man"] {
        let o = run(&["man", command], &[], b"");
        assert!(o.status.success(), "{}", stderr(&o));
        let page = String::from_utf8(o.stdout).unwrap();
        for section in ["SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES", "\"EXIT STATUS\"", "SIGNALS"] {
            assert!(page.contains(&format!("\n.SH {section}\n")), "{command}: no {section}\n{page}");
        }
        assert_eq!(page.matches(".ds Aq").count(), 2, "{command}: one preamble");
        for status in ["0", "1", "2", "130, 143"] {
            assert!(page.contains(&format!(".TP\n\\fB{status}\\fR")), "{command}: exit status {status}");
        }
    }
    let dump = String::from_utf8(run(&["man", "dump"], &[], b"").stdout).unwrap();
    assert!(dump.contains("[\\fB\\-\\-redis\\fR \\fIURL\\fR]"), "the synopsis shows values: {dump}");
    assert!(dump.contains("[\\fB\\-o\\fR|\\fB\\-\\-output\\fR \\fIFILE\\fR]"), "{dump}");
    // The README's table rows are examples on the pages.
    let dedup = String::from_utf8(run(&["man", "dedup"], &[], b"").stdout).unwrap();
    for example in ["bloomkit dedup --state seen.bkf", "bloomkit dedup --window 10m"] {
        assert!(readme.contains(example), "README shows {example}");
        assert!(dedup.contains(&example.replace('-', "\\-")), "the page shows {example}");
    }
    let help = String::from_utf8(run(&["dump", "--help"], &[], b"").stdout).unwrap();
    for kind in [
        "Bloom",
        "cuckoo",
        "expandable",
        "sliding-window",
        "valkey-bloom",
        "Count-Min",
        "Top-K",
        "t-digest",
        "bitmap",
    ] {
        assert!(help.contains(kind), "dump --help names {kind}:\n{help}");
    }
}
