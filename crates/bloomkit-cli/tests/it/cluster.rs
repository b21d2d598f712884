//! The CLI given a Redis Cluster node's address: `dedup` keeps a sharded
//! expandable filter over the masters, `info --shards` reads each shard on
//! its node and adds them up, and `copy --shards` moves the shards from a
//! cluster to one server and to another cluster. Real clusters of three
//! masters with bloomkit, the real binary.

use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::time::Duration;

use bloomkit_testkit::{Module, Server, TestCluster, TestServer};

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomkit"));
    cmd.args(args).env_remove("BLOOMKIT_URL").env_remove("REDIS_URL");
    bloomkit_testkit::output_within(&mut cmd, stdin, Duration::from_secs(120))
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), String::from_utf8_lossy(&o.stderr));
    o
}

fn json(o: Output) -> serde_json::Value {
    serde_json::from_slice(&ok(o).stdout).unwrap()
}

/// 20 000 lines: 8 000 distinct, most more than once, in a scattered order.
fn input() -> (Vec<u8>, usize) {
    let mut lines = Vec::new();
    for i in 0..20_000u64 {
        let n = (i * 7919) % 8_000;
        lines.extend_from_slice(format!("line-{n}\n").as_bytes());
    }
    (lines, 8_000)
}

#[test]
fn dedup_info_and_copy_of_a_sharded_filter_on_a_cluster() {
    let cluster = TestCluster::start(3, &[Module::bloomkit()]);
    let url = cluster.urls()[1].clone();
    let (lines, distinct) = input();

    // dedup on a cluster: a sharded XF over 12 keys (the default).
    let first = ok(run(&["dedup", "--redis", &url, "--key", "seen"], &lines));
    let written: BTreeSet<&[u8]> = first.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    assert_eq!(first.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count(), distinct);
    assert_eq!(written.len(), distinct, "each distinct line once");
    let again = ok(run(&["dedup", "--redis", &url, "--key", "seen"], &lines));
    assert!(again.stdout.is_empty(), "a second run wrote {} bytes", again.stdout.len());
    for m in 0..3 {
        let keys = cluster.nodes[m].conn().cmd("KEYS {seen:*");
        assert!(!keys.as_array().is_empty(), "master {m} holds no shard");
    }
    // A filter in one key, or one with a capacity, is not what dedup makes
    // on a cluster: a usage error that says so.
    let refused = run(&["dedup", "--redis", &url, "--capacity", "1000"], b"a\n");
    assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("sharded expandable filter"));

    // info --shards: each shard on its node, and the whole.
    let info = json(run(&["info", "--redis", &url, "seen", "--shards", "12", "--json"], b""));
    assert_eq!(info["kind"], "sharded expandable filter");
    assert_eq!(info["items"], distinct as u64, "{info}");
    assert_eq!(info["cluster"], true);
    let shards = info["per_shard"].as_array().unwrap();
    assert_eq!(shards.len(), 12);
    let nodes: BTreeSet<&str> = shards.iter().map(|s| s["node"].as_str().unwrap()).collect();
    assert_eq!(nodes.len(), 3, "shards on every master: {nodes:?}");
    let size: u64 = shards.iter().map(|s| s["size"].as_u64().unwrap()).sum();
    assert_eq!(info["size"], size);
    let worst = shards.iter().map(|s| s["guaranteed_rate"].as_f64().unwrap()).fold(0.0, f64::max);
    assert_eq!(info["guaranteed_rate"], worst);
    let text =
        String::from_utf8(ok(run(&["info", "--redis", &url, "seen", "--shards", "12"], b"")).stdout).unwrap();
    assert!(text.contains("{seen:11}") && text.contains("sharded expandable filter"), "{text}");

    // copy --shards to one server: the same keys there, read the same way;
    // dedup --shards there goes on with the filter.
    let single = TestServer::with_bloomkit(Server::Redis);
    let single_url = format!("redis://127.0.0.1:{}", single.port);
    ok(run(&["copy", "--from", &url, "--to", &single_url, "seen", "--shards", "12"], b""));
    let there = json(run(&["info", "--redis", &single_url, "seen", "--shards", "12", "--json"], b""));
    assert_eq!((there["items"].clone(), there["cluster"].clone()), (info["items"].clone(), false.into()));
    let resumed = ok(run(&["dedup", "--redis", &single_url, "--key", "seen", "--shards", "12"], &lines));
    assert!(resumed.stdout.is_empty(), "the copied filter lost lines");

    // And to another cluster, from that server.
    let other = TestCluster::start(3, &[Module::bloomkit()]);
    let other_url = other.urls()[0].clone();
    ok(run(&["copy", "--from", &single_url, "--to", &other_url, "seen", "--shards", "12"], b""));
    let moved = json(run(&["info", "--redis", &other_url, "seen", "--shards", "12", "--json"], b""));
    assert_eq!(moved["items"], distinct as u64);
    let resumed = ok(run(&["dedup", "--redis", &other_url, "--key", "seen"], &lines));
    assert!(resumed.stdout.is_empty(), "the filter copied to a cluster lost lines");
}
