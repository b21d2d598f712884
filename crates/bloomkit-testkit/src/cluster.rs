//! A Redis Cluster of test servers, made and resharded with `redis-cli`,
//! or a one-node cluster of any server.

use std::process::Command;
use std::time::Duration;

use crate::{free_port, output_within, wait_until, Module, Server, TestServer};

/// One cluster-enabled server with these modules. The bus port is chosen
/// too: by default it is the port + 10000, and a server whose port is
/// above 55535 (a fifth of the free ports the kernel hands out here)
/// refuses to start without it.
fn node(server: Server, modules: &[Module]) -> TestServer {
    let bus = free_port().to_string();
    let cluster_args = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "3000",
        "--cluster-port",
        &bus,
    ];
    TestServer::start(server, modules, &cluster_args)
}

/// A Redis Cluster of test servers on loopback, each with the modules
/// loaded: `masters` redis-servers made by `redis-cli --cluster create`
/// ([`TestCluster::start`]), or one node of any server owning every slot
/// ([`TestCluster::single`]).
pub struct TestCluster {
    pub nodes: Vec<TestServer>,
}

impl TestCluster {
    pub fn start(masters: usize, modules: &[Module]) -> TestCluster {
        let nodes: Vec<TestServer> = (0..masters).map(|_| node(Server::Redis, modules)).collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        create.args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        create.args(["--cluster-replicas", "0", "--cluster-yes"]);
        let out = output_within(&mut create, b"", Duration::from_secs(120));
        assert!(out.status.success(), "redis-cli --cluster create: {}", String::from_utf8_lossy(&out.stdout));
        let cluster = TestCluster { nodes };
        cluster.wait_settled();
        cluster
    }

    /// A cluster of one `server` node that owns all 16384 slots (`CLUSTER
    /// ADDSLOTSRANGE`): every key lives on it, so what a cluster refuses
    /// there it refuses for the slots alone, and it costs one server
    /// (`redis-cli --cluster create` wants three masters).
    pub fn single(server: Server, modules: &[Module]) -> TestCluster {
        let cluster = TestCluster { nodes: vec![node(server, modules)] };
        let reply = cluster.nodes[0].conn().cmd("CLUSTER ADDSLOTSRANGE 0 16383");
        assert!(!reply.is_error(), "CLUSTER ADDSLOTSRANGE: {reply:?}");
        cluster.wait_settled();
        cluster
    }

    /// Waits until every node says the cluster is ok and agrees on who owns
    /// all 16384 slots.
    pub fn wait_settled(&self) {
        wait_until("cluster settled", Duration::from_secs(30), || {
            let views: Vec<String> = self
                .nodes
                .iter()
                .map(|n| {
                    let mut c = n.conn();
                    let info = String::from_utf8_lossy(c.cmd("CLUSTER INFO").as_bytes()).into_owned();
                    if !info.contains("cluster_state:ok") {
                        return String::new();
                    }
                    let mut owners: Vec<(i64, i64, i64)> = c
                        .cmd("CLUSTER SLOTS")
                        .as_array()
                        .iter()
                        .map(|r| {
                            let r = r.as_array();
                            (r[0].as_int(), r[1].as_int(), r[2].as_array()[1].as_int())
                        })
                        .collect();
                    owners.sort();
                    format!("{owners:?}")
                })
                .collect();
            !views[0].is_empty() && views.iter().all(|v| v == &views[0])
        });
    }

    /// `redis://` URLs of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| format!("redis://127.0.0.1:{}/", n.port)).collect()
    }

    pub fn node_id(&self, node: usize) -> String {
        String::from_utf8_lossy(self.nodes[node].conn().cmd("CLUSTER MYID").as_bytes()).into_owned()
    }

    /// Moves every slot of node `from` to node `to` with `redis-cli --cluster
    /// reshard` (keys migrate with MIGRATE, so module values go through their
    /// DUMP/RESTORE), then waits for the cluster to agree. A master left with
    /// no slots becomes a replica of `to` (Redis 7's replica migration).
    pub fn move_all_slots(&self, from: usize, to: usize) {
        let slots: i64 = self.nodes[from]
            .conn()
            .cmd("CLUSTER SLOTS")
            .as_array()
            .iter()
            .filter(|r| r.as_array()[2].as_array()[1].as_int() == i64::from(self.nodes[from].port))
            .map(|r| r.as_array()[1].as_int() - r.as_array()[0].as_int() + 1)
            .sum();
        let mut out = Command::new("redis-cli");
        out.args(["--cluster", "reshard", &format!("127.0.0.1:{}", self.nodes[to].port)])
            .args(["--cluster-from", &self.node_id(from), "--cluster-to", &self.node_id(to)])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"]);
        let out = output_within(&mut out, b"", Duration::from_secs(300));
        assert!(
            out.status.success(),
            "reshard: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.wait_settled();
    }
}
