//! The crate's examples, run as built against real servers.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use bloomkit_testkit::{Module, Server, TestServer};

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/examples-<hash> -> target/<profile>/examples/<name>
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join("examples").join(name);
    assert!(path.exists(), "{} missing: build with `cargo build --workspace --all-targets`", path.display());
    path
}

fn run(server: &TestServer, input: &str) -> (String, String) {
    let mut cmd = Command::new(example("click_dedup"));
    cmd.arg(format!("redis://127.0.0.1:{}/", server.port));
    let out = bloomkit_testkit::output_within(&mut cmd, input.as_bytes(), Duration::from_secs(60));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn click_dedup_with_and_without_module() {
    let clicks = "c1\nc2\nc1\nc3\nc2\n";
    for (server, backend) in [
        (TestServer::start(Server::Redis, &[Module::bloomkit()], &[]), "module"),
        (TestServer::start(Server::Valkey, &[], &[]), "bitmap"),
    ] {
        let (stdout, stderr) = run(&server, clicks);
        assert_eq!(stdout, "c1\nc2\nc3\n");
        assert!(stderr.contains(&format!("backend {backend}: 3 new of 5 clicks")), "{stderr}");
        // A second run remembers the first.
        let (stdout, _) = run(&server, "c3\nc4\n");
        assert_eq!(stdout, "c4\n");
    }
}
