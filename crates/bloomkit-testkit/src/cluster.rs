//! A Redis Cluster of test servers, made and resharded with `redis-cli`,
//! with replicas to fail over to, or a one-node cluster of any server.

use std::process::Command;
use std::time::Duration;

use crate::{free_port, output_within, wait_until, Conn, Module, Server, TestServer};

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
    /// `masters` redis-servers (Redis 7.0), no replicas.
    pub fn start(masters: usize, modules: &[Module]) -> TestCluster {
        TestCluster::with_replicas(Server::Redis, masters, 0, modules)
    }

    /// `masters` masters of `server`, each with `replicas` replicas, made by
    /// `redis-cli --cluster create --cluster-replicas`; returns once every
    /// node agrees on the slots and every replica has synced, so that a
    /// master can be failed over ([`TestCluster::kill`]) from the start.
    /// `nodes` lists masters and replicas in the order `redis-cli` was
    /// given them; which is which: [`TestCluster::masters`].
    pub fn with_replicas(server: Server, masters: usize, replicas: usize, modules: &[Module]) -> TestCluster {
        let nodes: Vec<TestServer> = (0..masters * (1 + replicas)).map(|_| node(server, modules)).collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        create.args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        create.args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
        let out = output_within(&mut create, b"", Duration::from_secs(120));
        assert!(out.status.success(), "redis-cli --cluster create: {}", String::from_utf8_lossy(&out.stdout));
        let cluster = TestCluster { nodes };
        cluster.wait_settled();
        if replicas > 0 {
            wait_until("every replica synced", Duration::from_secs(60), || {
                let masters = cluster.masters();
                cluster.nodes.iter().enumerate().filter(|(i, _)| !masters.contains(i)).all(|(_, n)| {
                    let mut c = n.conn();
                    c.info_field("replication", "role") == "slave"
                        && c.info_field("replication", "master_link_status") == "up"
                        && c.info_field("replication", "master_sync_in_progress") == "0"
                })
            });
        }
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

    /// Waits until every node that is up says the cluster is ok and agrees
    /// on who owns all 16384 slots (a node killed by [`TestCluster::kill`]
    /// is left out).
    pub fn wait_settled(&self) {
        wait_until("cluster settled", Duration::from_secs(60), || {
            let views: Vec<String> = self
                .nodes
                .iter()
                .filter_map(|n| Conn::connect(n.port).ok())
                .map(|mut c| {
                    let Ok(info) = c.try_call(&["CLUSTER", "INFO"]) else { return String::new() };
                    if !String::from_utf8_lossy(info.as_bytes()).contains("cluster_state:ok") {
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
                    let covered: i64 = owners.iter().map(|o| o.1 - o.0 + 1).sum();
                    if covered != 16384 {
                        return String::new();
                    }
                    format!("{owners:?}")
                })
                .collect();
            !views.is_empty() && !views[0].is_empty() && views.iter().all(|v| v == &views[0])
        });
    }

    /// The nodes that are masters owning slots now, by index in `nodes`,
    /// as the first live node sees it.
    pub fn masters(&self) -> Vec<usize> {
        let mut c = self.live_conn();
        let ports: Vec<i64> = c
            .cmd("CLUSTER SLOTS")
            .as_array()
            .iter()
            .map(|r| r.as_array()[2].as_array()[1].as_int())
            .collect();
        (0..self.nodes.len()).filter(|&i| ports.contains(&i64::from(self.nodes[i].port))).collect()
    }

    /// The node that is the master of `key`'s slot now.
    pub fn master_of(&self, key: &str) -> usize {
        let mut c = self.live_conn();
        let slot = c.call(&["CLUSTER", "KEYSLOT", key]).as_int();
        let port = c
            .cmd("CLUSTER SLOTS")
            .as_array()
            .iter()
            .map(|r| r.as_array())
            .find(|r| r[0].as_int() <= slot && slot <= r[1].as_int())
            .map(|r| r[2].as_array()[1].as_int())
            .unwrap_or_else(|| panic!("no node serves slot {slot}"));
        self.nodes.iter().position(|n| i64::from(n.port) == port).expect("a node of this cluster")
    }

    /// The replicas of master `node`, by index, as `node` lists them.
    pub fn replicas_of(&self, node: usize) -> Vec<usize> {
        let mut c = self.nodes[node].conn();
        let count: usize = c.info_field("replication", "connected_slaves").parse().unwrap();
        (0..count)
            .map(|i| {
                let line = c.info_field("replication", &format!("slave{i}"));
                let port: u16 = line
                    .split(',')
                    .find_map(|f| f.strip_prefix("port="))
                    .and_then(|p| p.parse().ok())
                    .unwrap_or_else(|| panic!("a port in {line}"));
                self.nodes.iter().position(|n| n.port == port).expect("a node of this cluster")
            })
            .collect()
    }

    /// Polls until every replica of master `node` has acknowledged all its
    /// master has written (their offsets equal the master's): a failover
    /// then loses nothing that was answered.
    pub fn wait_replicated(&self, node: usize) {
        let mut c = self.nodes[node].conn();
        wait_until("the replicas caught up", Duration::from_secs(60), || {
            let offset = c.info_field("replication", "master_repl_offset");
            let count: usize = c.info_field("replication", "connected_slaves").parse().unwrap();
            count > 0
                && (0..count).all(|i| {
                    c.info_field("replication", &format!("slave{i}"))
                        .split(',')
                        .any(|f| f.strip_prefix("offset=") == Some(offset.as_str()))
                })
        });
    }

    /// Stops node `node` abruptly (kill -9), as a crash would: its replicas
    /// take over once the others have marked it failed (the cluster's node
    /// timeout, 3 s here), and until then its slots are unserved.
    pub fn kill(&mut self, node: usize) {
        self.nodes[node].kill();
    }

    /// A connection to the first node that answers.
    fn live_conn(&self) -> Conn {
        self.nodes.iter().find_map(|n| Conn::connect(n.port).ok()).expect("a node that is up")
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
