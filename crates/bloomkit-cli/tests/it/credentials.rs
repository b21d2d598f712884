//! No output of any subcommand, in any failure, shows a password given in
//! a URL or in `$REDISCLI_AUTH` (issue 43 item 1), against a real server
//! with `requirepass` and ACL users; `$REDISCLI_AUTH` is honoured as
//! redis-cli honours it, and a missing or refused password says where to
//! give one.

use crate::stderr;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use bloomkit_testkit::{Server, TestServer};

/// Every password of the test, as typed and as a URL carries it.
const SECRETS: [&str; 7] = [
    "default-topsecret",
    "admin-topsecret",
    "wrong-topsecret",
    "env-topsecret",
    "p@ss-topsecret",
    "p%40ss-topsecret",
    "ss-topsecret",
];

/// The binary with these environment variables only (no server variable
/// of the caller's), in `dir`.
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: &[u8]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomkit"));
    cmd.args(args)
        .current_dir(dir)
        .env_remove("BLOOMKIT_URL")
        .env_remove("REDIS_URL")
        .env_remove("REDISCLI_AUTH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    bloomkit_testkit::output_within(&mut cmd, stdin, Duration::from_secs(60))
}

/// Runs and checks that nothing printed holds a password; returns the output.
fn clean(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let o = run(dir, args, env, b"a\nb\na\n");
    for stream in [&o.stdout, &o.stderr] {
        let text = String::from_utf8_lossy(stream);
        for secret in SECRETS {
            assert!(!text.contains(secret), "{args:?} {env:?} printed the password '{secret}':\n{text}");
        }
    }
    o
}

/// One run: its arguments and environment.
type Run = (Vec<String>, Vec<(&'static str, &'static str)>);

/// A server whose default user needs `default-topsecret`, an `admin` user
/// with `admin-topsecret` and an `enc` user whose password holds an `@`;
/// with a Bloom filter `f`, a sliding window `w` and an expandable filter `x`.
fn server() -> TestServer {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("BF.ADD f a");
    c.ok("APBF.RESERVE w 0.01 1000 COUNT");
    c.ok("XF.ADD x a");
    c.ok("ACL SETUSER admin on >admin-topsecret ~* &* +@all");
    c.ok("ACL SETUSER enc on >p@ss-topsecret ~* &* +@all");
    // (This connection stays authenticated after the password is set.)
    c.ok("CONFIG SET requirepass default-topsecret");
    s
}

#[test]
fn no_output_shows_a_password() {
    let s = server();
    let port = s.port;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let urls = Urls::new(port);
    let Urls { admin, default, encoded, wrong, none, .. } = &urls;
    let good_env = [("REDISCLI_AUTH", "default-topsecret")];
    let wrong_env = [("REDISCLI_AUTH", "env-topsecret")];

    // What works: the URL's password, an encoded one, $REDISCLI_AUTH alone,
    // the URL's over a wrong $REDISCLI_AUTH, and the environment's URL.
    for url in [admin, default, encoded] {
        let o = clean(d, &["info", "--redis", url, "f"], &[]);
        assert!(o.status.success(), "{url}: {}", stderr(&o));
    }
    let o = clean(d, &["info", "--redis", none, "f"], &good_env);
    assert!(o.status.success(), "$REDISCLI_AUTH is the password when the URL has none: {}", stderr(&o));
    let o = clean(d, &["info", "--redis", admin, "f"], &wrong_env);
    assert!(o.status.success(), "the URL's password wins over $REDISCLI_AUTH: {}", stderr(&o));
    let o = clean(d, &["info", "f"], &[("BLOOMKIT_URL", admin)]);
    assert!(o.status.success(), "{}", stderr(&o));

    // No password, or a wrong one: the message says where a password goes.
    for (url, env) in [(none, &[][..]), (wrong, &[][..]), (none, &wrong_env[..])] {
        let o = clean(d, &["info", "--redis", url, "f"], env);
        assert_eq!(o.status.code(), Some(1), "{url} {env:?}");
        let e = stderr(&o);
        assert!(e.contains("REDISCLI_AUTH") && e.contains("user:password@ before the host"), "{e}");
    }
    let o = clean(d, &["info", "--redis", none, "f"], &[]);
    assert!(stderr(&o).contains("requires a password"), "{}", stderr(&o));
    let o = clean(d, &["info", "--redis", wrong, "f"], &[]);
    assert!(stderr(&o).contains("refused the user name or password"), "{}", stderr(&o));

    // Every subcommand that talks to a server, in every way it can fail.
    let file = d.join("f.bkf");
    let file = file.to_str().unwrap();
    let o = clean(d, &["dump", "--redis", admin, "f", "-o", file], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let x_file = d.join("x.bkf");
    let x_file = x_file.to_str().unwrap();
    assert!(clean(d, &["dump", "--redis", admin, "x", "-o", x_file], &[]).status.success());
    let runs = failing_runs(&urls, file, x_file);
    let mut failures = 0;
    for (args, env) in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = clean(d, &args, env);
        failures += usize::from(!o.status.success());
    }
    assert_eq!(failures, runs.len(), "every run above fails");
    bloomkit_testkit::figure(&format!(
        "credentials: {} failing runs of every subcommand, no password printed",
        runs.len()
    ));
}

/// The server URLs [`no_output_shows_a_password`] tries, each with a
/// password (but `none`): good ones, a wrong one, a refused connection and
/// a malformed port.
struct Urls {
    admin: String,
    default: String,
    encoded: String,
    wrong: String,
    none: String,
    refused: String,
    malformed: String,
}

impl Urls {
    fn new(port: u16) -> Urls {
        Urls {
            admin: format!("redis://admin:admin-topsecret@127.0.0.1:{port}"),
            default: format!("redis://:default-topsecret@127.0.0.1:{port}"),
            encoded: format!("redis://enc:p%40ss-topsecret@127.0.0.1:{port}"),
            wrong: format!("redis://admin:wrong-topsecret@127.0.0.1:{port}"),
            none: format!("redis://127.0.0.1:{port}"),
            refused: "redis://admin:admin-topsecret@127.0.0.1:1".to_string(),
            malformed: format!("redis://admin:admin-topsecret@127.0.0.1:{port}x"),
        }
    }
}

/// Every subcommand that talks to a server, in every way it can fail:
/// credentials refused or missing, no server, good credentials with other
/// failures, and bad arguments that carry a URL. `file` and `x_file` are
/// dumps of `f` and `x`.
fn failing_runs(urls: &Urls, file: &str, x_file: &str) -> Vec<Run> {
    let Urls { admin, default, wrong, none, refused, malformed, .. } = urls;
    let wrong_env = [("REDISCLI_AUTH", "env-topsecret")];
    let mut runs: Vec<Run> = Vec::new();
    let mut add = |args: &[&str], env: &[(&'static str, &'static str)]| {
        runs.push((args.iter().map(|a| a.to_string()).collect(), env.to_vec()));
    };
    for url in [wrong, none, refused, malformed] {
        add(&["info", "--redis", url, "f"], &[]);
        add(&["info", "--redis", url, "f", "--json"], &[]);
        add(&["dump", "--redis", url, "f", "-o", "out.bkf"], &[]);
        add(&["restore", "--redis", url, "g", "-i", file], &[]);
        add(&["copy", "--from", url, "--to", admin, "f"], &[]);
        add(&["copy", "--from", admin, "--to", url, "f", "--replace"], &[]);
        add(&["copy", "--from", url, "--to", admin, "--all"], &[]);
        add(&["copy", "--from", admin, "--to", url, "--all", "--replace"], &[]);
        add(&["dedup", "--redis", url, "--key", "d"], &[]);
        add(&["dedup", "--redis", url, "--key", "d", "--capacity", "1000"], &[]);
        add(&["dedup", "--redis", url, "--bitmap", "--key", "b"], &[]);
        add(&["dedup", "--redis", url, "--window-count", "100", "--key", "dw"], &[]);
        add(&[&format!("--redis={url}"), "info", "f"], &[]);
    }
    for env in [&wrong_env[..], &[("REDIS_URL", "redis://u:wrong-topsecret@127.0.0.1:1")][..]] {
        add(&["info", "--redis", none, "f"], env);
        add(&["dedup", "--redis", none, "--key", "d"], env);
        add(&["info", "f"], env);
    }
    // Good credentials, failures of another kind.
    add(&["info", "--redis", admin, "missing"], &[]);
    add(&["dump", "--redis", admin, "missing", "-o", "out.bkf"], &[]);
    add(&["restore", "--redis", admin, "f", "-i", file], &[]);
    add(&["restore", "--redis", admin, "g", "-i", "no-such-file"], &[]);
    add(&["restore", "--redis", admin, "g", "-i", "Cargo.toml"], &[]);
    add(&["restore", "--redis", admin, "w", "-i", x_file], &[]);
    add(&["copy", "--from", admin, "--to", default, "missing"], &[]);
    add(&["copy", "--from", admin, "--to", default, "f"], &[]);
    add(&["dedup", "--redis", admin, "--key", "w"], &[]);
    add(&["dedup", "--redis", admin, "--key", "x", "--capacity", "1000"], &[]);
    // Bad arguments that carry a URL: mistyped options, a URL where a key
    // or a number goes, a file taken for a server.
    add(&["info", admin], &[]);
    add(&["info", "--redis", admin, admin], &[]);
    add(&["info", "--server", admin, "f"], &[]);
    add(&["dump", "--redis", admin, "--format", admin, "f"], &[]);
    add(&["calc", "-n", admin, "-p", "0.01"], &[]);
    add(&["dedup", "--error-rate", admin], &[]);
    add(&["copy", "--from", admin], &[]);
    add(&["restore", "--redis", admin], &[]);
    add(&["dedup", "--capacity", "10", "--redis", admin, "--state", "s.bkf"], &[]);
    runs
}
