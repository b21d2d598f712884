//! Settings no one is left guessing about: a setting that would do nothing
//! at the level in force is refused, saying which setting to add; two names
//! of one setting given two values stop the start instead of one being
//! silently dropped.

use std::time::Duration;

use bloomkit_testkit::{
    bloomkit_module, free_port, output_within, server_binary, Module, Reply, Server, TestServer,
};

fn conf(lines: &[&str]) -> String {
    format!(
        "port {}\nsave \"\"\nloadmodule {}\n{}\n",
        free_port(),
        bloomkit_module().display(),
        lines.join("\n")
    )
}

/// Starts `server` from a configuration file holding `lines` after the module's.
fn start(server: Server, lines: &[&str]) -> TestServer {
    TestServer::start_with_config(server, &conf(lines))
}

/// Starts `server` from such a file, expects it to refuse, and gives its output.
fn refused(server: Server, lines: &[&str]) -> String {
    let dir = std::env::temp_dir().join(format!("bloomkit-conf-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("server.conf");
    std::fs::write(&path, conf(lines)).unwrap();
    let mut cmd = std::process::Command::new(server_binary(server));
    cmd.arg(&path).current_dir(&dir);
    let out = output_within(&mut cmd, b"", Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "{server:?} started with {lines:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// valkey-bloom's settings for the filters `bf.compat valkey-bloom` creates
/// stop a start under another level, naming the line to add; under that
/// level, and for the two that govern valkey-bloom's objects at every
/// level, they start.
#[test]
fn valkey_bloom_creation_settings_need_their_level() {
    for server in [Server::Valkey, Server::Redis] {
        for line in [
            "bf.bloom-fp-rate 0.001",
            "bf.bloom-capacity 5000",
            "bf.bloom-expansion 4",
            "bf.bloom-tightening-ratio 0.25",
            "bf.bloom-use-random-seed no",
        ] {
            let out = refused(server, &[line]);
            let name = line.split(' ').next().unwrap();
            assert!(
                out.contains(name) && out.contains("add `bf.compat valkey-bloom`"),
                "{server:?} {line}: {out}"
            );
            let s = start(server, &[line, "bf.compat valkey-bloom"]);
            let mut c = s.conn();
            let value = line.split(' ').nth(1).unwrap();
            assert_eq!(
                c.call(&["CONFIG", "GET", name]).as_array()[1].as_bytes(),
                value.as_bytes(),
                "{server:?}"
            );
        }
        // Values equal to valkey-bloom's defaults change nothing: they start.
        start(server, &["bf.bloom-fp-rate 0.01", "bf.bloom-capacity 100"]);
        // These two govern valkey-bloom's objects under every level.
        let s = start(server, &["bf.bloom-memory-usage-limit 1000000", "bf.bloom-defrag-enabled no"]);
        let mut c = s.conn();
        assert!(!c.cmd("CONFIG SET bf.bloom-memory-usage-limit 2000000").is_error(), "{server:?}");
        let refused = c.cmd("CONFIG SET bf.bloom-fp-rate 0.001");
        assert!(
            refused.is_error() && refused.error_text().contains("add `bf.compat valkey-bloom`"),
            "{server:?}: {refused:?}"
        );
        assert_eq!(c.call(&["CONFIG", "GET", "bf.bloom-fp-rate"]).as_array()[1].as_bytes(), b"0.01");
    }
    // Load arguments obey the same rule.
    let mut cmd = std::process::Command::new(server_binary(Server::Valkey));
    cmd.args(["--port", &free_port().to_string(), "--save", ""])
        .arg("--loadmodule")
        .arg(bloomkit_module())
        .args(["bf.bloom-fp-rate", "0.001"]);
    let out = output_within(&mut cmd, b"", Duration::from_secs(30));
    assert!(!out.status.success(), "started with bf.bloom-fp-rate as a load argument");
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("add `bf.compat valkey-bloom`"), "{out}");
    let s = TestServer::start(
        Server::Valkey,
        &[Module::Bloomkit(vec![
            "COMPAT".into(),
            "valkey-bloom".into(),
            "bf.bloom-fp-rate".into(),
            "0.001".into(),
        ])],
        &[],
    );
    assert_eq!(s.conn().call(&["CONFIG", "GET", "bf.bloom-fp-rate"]).as_array()[1].as_bytes(), b"0.001");
}

/// On Redis 8, `bf-error-rate` (RedisBloom 8's) and `bf.error-rate`
/// (bloomkit's) are one config with two names: `CONFIG REWRITE` writes each
/// setting once, under RedisBloom 8's name, whichever name the file or
/// CONFIG SET used, and what it writes starts again with the values. A file
/// naming both (as an earlier bloomkit's CONFIG REWRITE wrote them) starts
/// when they agree (two configs for that run, and a log line saying to
/// delete one) and stops the start, naming both, when they do not.
#[test]
fn each_setting_is_written_once_and_two_names_never_disagree_silently() {
    let out = refused(Server::Redis8, &["bf.error-rate 0.02", "bf-error-rate 0.05"]);
    assert!(
        out.contains("sets bf.error-rate and bf-error-rate, two names of one setting, to different values")
            && out.contains("keep one line"),
        "{out}"
    );
    let s = start(Server::Redis8, &["bf.error-rate 0.05", "\"bf-error-rate\" 0.05"]);
    let mut c = s.conn();
    assert_eq!(c.call(&["CONFIG", "GET", "bf-error-rate"]).as_array()[1].as_bytes(), b"0.05");
    assert_eq!(c.call(&["CONFIG", "GET", "bf.error-rate"]).as_array()[1].as_bytes(), b"0.05");
    drop(c);
    let log = s.log();
    assert!(
        log.contains("names both bf-error-rate and bf.error-rate") && log.contains("delete one line"),
        "{log}"
    );
    drop(s);

    let s = start(Server::Redis8, &["bf.error-rate 0.05", "bf-expansion-factor 4"]);
    let mut c = s.conn();
    assert_eq!(c.call(&["CONFIG", "GET", "bf-error-rate"]).as_array()[1].as_bytes(), b"0.05");
    assert_eq!(c.call(&["CONFIG", "GET", "bf.error-rate"]).as_array()[1].as_bytes(), b"0.05");
    c.ok("CONFIG SET bf.initial-size 700");
    assert_eq!(c.call(&["CONFIG", "GET", "bf-initial-size"]).as_array()[1].as_bytes(), b"700");
    c.ok("CONFIG REWRITE");
    let written = s.config_file().unwrap();
    drop(c);
    drop(s);
    let ours: Vec<&str> = written.lines().filter(|l| l.starts_with("bf")).collect();
    for setting in ["error-rate", "initial-size", "expansion-factor"] {
        let named: Vec<&&str> = ours.iter().filter(|l| l.contains(setting)).collect();
        assert_eq!(named.len(), 1, "{setting} in {written}");
        assert!(named[0].starts_with(&format!("bf-{setting} ")), "{named:?}");
    }
    let s = start(Server::Redis8, &ours);
    let mut c = s.conn();
    for (name, value) in [("bf.error-rate", "0.05"), ("bf-initial-size", "700"), ("bf.expansion-factor", "4")]
    {
        assert_eq!(c.call(&["CONFIG", "GET", name]).as_array()[1].as_bytes(), value.as_bytes(), "{name}");
    }
    drop(c);
    drop(s);

    // RedisBloom 8 keeps a rate above 0.25 as 0.25 (the first sub-filter
    // gets half); RedisBloom 2.8 does not,
    // and under its level on Redis 8 neither name caps it.
    for (level, answer, ratio) in
        [("redisbloom-8", "0.25", "ratio:0.125"), ("redisbloom-2.8", "0.5", "ratio:0.25")]
    {
        let s = start(Server::Redis8, &[&format!("bf.compat {level}"), "bf.error-rate 0.5"]);
        let mut c = s.conn();
        for name in ["bf-error-rate", "bf.error-rate"] {
            assert_eq!(
                c.call(&["CONFIG", "GET", name]).as_array()[1].as_bytes(),
                answer.as_bytes(),
                "{level}"
            );
        }
        c.ok("BF.ADD k a");
        let debug = c.call(&["BF.DEBUG", "k"]);
        assert!(format!("{debug:?}").contains(ratio), "{level}: {debug:?}");
    }

    // Servers without RedisBloom 8's names keep two configs (`bf.error-rate`,
    // `bf.bf-error-rate`): different values in the file stop the start.
    let out = refused(Server::Redis, &["bf.error-rate 0.02", "bf.bf-error-rate 0.05"]);
    assert!(out.contains("two names of one setting") && out.contains("keep one line"), "{out}");
}

/// A configuration file whose `loadmodule` line carries `args`.
fn conf_with_args(args: &str, lines: &[&str]) -> String {
    format!(
        "port {}\nsave \"\"\nloadmodule {} {args}\n{}\n",
        free_port(),
        bloomkit_module().display(),
        lines.join("\n")
    )
}

/// `bf.apbf-clock-offset-ms` moves APBF's clock: a test hook, out of reach
/// of `CONFIG SET`, load arguments and configuration files on a server
/// whose module was not loaded with `TEST_HOOKS yes` (issue 43 item 5);
/// a file naming it at its default still starts, and `TEST_HOOKS` is no
/// config that `CONFIG SET` could turn on.
#[test]
fn the_clock_hook_needs_test_hooks() {
    for server in [Server::Redis, Server::Redis8, Server::Valkey] {
        let s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        let set = c.cmd("CONFIG SET bf.apbf-clock-offset-ms 600000");
        assert!(set.error_text().contains("TEST_HOOKS yes"), "{server:?}: {set:?}");
        assert_eq!(c.cmd("CONFIG GET bf.apbf-clock-offset-ms").as_array()[1].as_bytes(), b"0");
        assert!(c.cmd("CONFIG SET bf.test-hooks yes").is_error(), "{server:?}");
        let out = refused(server, &["bf.apbf-clock-offset-ms 600000"]);
        assert!(
            out.contains("bf.apbf-clock-offset-ms is a test hook") && out.contains("TEST_HOOKS yes"),
            "{out}"
        );
        drop(start(server, &["bf.apbf-clock-offset-ms 0"]));

        // Loaded with TEST_HOOKS yes, the hook moves a time window's clock.
        let s = TestServer::start_with_config(server, &conf_with_args("TEST_HOOKS yes", &[]));
        let mut c = s.conn();
        c.ok("APBF.RESERVE t 0.01 1000 TIME 60");
        assert_eq!(c.cmd("APBF.ADD t a"), Reply::Int(1));
        c.ok("CONFIG SET bf.apbf-clock-offset-ms 600000");
        assert_eq!(c.cmd("APBF.ADD t a"), Reply::Int(1), "{server:?}: ten minutes later, past its window");
    }
}

/// One server log line at load: bloomkit's release, the level and whether
/// it is the server's default, and each setting moved off its default,
/// named once (issue 43 item 7).
#[test]
fn the_load_line_says_what_the_module_runs_with() {
    let version = env!("CARGO_PKG_VERSION");
    let line = |s: &TestServer| {
        let log = s.log();
        log.lines()
            .find(|l| l.contains(&format!("bloomkit {version} loaded")))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("{:?}: no load line in the log:\n{log}", s.server))
    };
    let s = TestServer::with_bloomkit(Server::Redis);
    let l = line(&s);
    assert!(l.contains("bf.compat redisbloom-2.8 (this server's default)"), "{l}");
    assert!(l.contains("every setting at its default") && l.contains("20802"), "{l}");
    assert!(!l.contains("TEST_HOOKS"), "{l}");

    let args = ["MAX_FILTER_BYTES", "1073741824", "ERROR_RATE", "0.001", "COMPAT", "redisbloom-8"];
    let s = TestServer::start(Server::Redis, &[Module::Bloomkit(args.map(String::from).to_vec())], &[]);
    let l = line(&s);
    assert!(l.contains("bf.compat redisbloom-8 (chosen)"), "{l}");
    assert!(l.contains("bf.max-filter-bytes 1073741824") && l.contains("error-rate 0.001"), "{l}");
    assert_eq!(l.matches("error-rate").count(), 1, "two names of one setting, said once: {l}");
    assert!(!l.contains("huge-pages") && !l.contains("cf-bucket-size"), "only what moved: {l}");

    let s = TestServer::with_test_hooks(Server::Redis);
    assert!(line(&s).contains("TEST_HOOKS yes: test hooks can be set"), "{}", line(&s));

    let s = start(Server::Redis8, &["cf-bucket-size 4"]);
    let l = line(&s);
    assert!(
        l.contains("bf.compat redisbloom-8 (this server's default)") && l.contains("cf-bucket-size 4"),
        "{l}"
    );
}
