//! Where a server's keys live: one server, or the masters of a Redis
//! Cluster. [`Place::open`] finds out over the one connection it opens
//! (`INFO cluster`), and then reaches each key on the node that serves its
//! slot, so the CLI's `info`, `copy` and `dedup` read and write a sharded
//! filter's keys (`{KEY:0}`, `{KEY:1}`, ...) wherever they are, and a
//! filter on one server runs over that same connection
//! ([`Place::into_filter`]).
//!
//! The slot map is read once (`CLUSTER SLOTS`): transfers assume no slot
//! moves while they run (one that does answers MOVED and fails that key;
//! a copy leaves the destination key as it was). Filters on a cluster run
//! over the cluster connection, which follows MOVED and ASK.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use redis::Value;

use crate::error::{Error, Result};
use crate::transfer::{self, Server};
#[cfg(feature = "blocking-cluster")]
use crate::{Filter, Layout, RedisFilter};

/// The default number of shards of a sharded filter made on a cluster:
/// several per master of a small cluster, so that the keys spread evenly,
/// and masters can be added later and take some.
pub const DEFAULT_SHARDS: u32 = 12;

/// The key of shard `shard` of the sharded filter `name`: its own hash tag,
/// so that the shards spread over a cluster's slots.
pub fn shard_key(name: &str, shard: u32) -> String {
    format!("{{{name}:{shard}}}")
}

/// The keys of a sharded filter, as [`crate::Layout::sharded`] names them.
pub fn shard_keys(name: &str, shards: u32) -> Vec<String> {
    (0..shards).map(|s| shard_key(name, s)).collect()
}

/// A connection to a server, or, when it is a cluster node, to each
/// master a key is asked for.
pub enum Place {
    Single(Server),
    Cluster(Nodes),
}

impl Place {
    /// Connects to `url` and asks whether it runs in cluster mode, over one
    /// connection that stays the server's (or the cluster's seed). A server
    /// that answers no `INFO` (an ACL user without it) is taken for a
    /// single one.
    pub fn open(url: &str) -> Result<Place> {
        let mut con = transfer::connect(url)?;
        let info: String = redis::cmd("INFO").arg("cluster").query(&mut con).unwrap_or_default();
        Ok(if info.lines().any(|l| l.trim() == "cluster_enabled:1") {
            Place::Cluster(Nodes::open(url, con)?)
        } else {
            Place::Single(Server::over(con, url)?)
        })
    }

    /// The connection that reaches `key`: the server, or the master of
    /// `key`'s slot.
    pub fn server_for(&mut self, key: &str) -> Result<&mut Server> {
        match self {
            Place::Single(server) => Ok(server),
            Place::Cluster(nodes) => nodes.server_for(key),
        }
    }

    /// The server, or a connection to every master (for SCAN).
    pub fn masters(&mut self) -> Result<Vec<&mut Server>> {
        match self {
            Place::Single(server) => Ok(vec![server]),
            Place::Cluster(nodes) => {
                let urls: Vec<String> =
                    nodes.slots.iter().map(|(_, _, h, p)| with_address(&nodes.seed, h, *p)).collect();
                for url in urls {
                    nodes.open_server(&url)?;
                }
                Ok(nodes.servers.values_mut().collect())
            }
        }
    }

    /// [`Server::interrupt_on`] for every connection, those opened later too.
    pub fn interrupt_on(&mut self, flag: Arc<AtomicBool>) {
        match self {
            Place::Single(server) => server.interrupt_on(flag),
            Place::Cluster(nodes) => nodes.interrupt = Some(flag),
        }
    }

    /// [`Server::drop_ttls`] for every connection, those opened later too.
    pub fn drop_ttls(&mut self) {
        match self {
            Place::Single(server) => server.drop_ttls(),
            Place::Cluster(nodes) => nodes.drop_ttls = true,
        }
    }

    /// The address given, as messages show it (its password hidden).
    pub fn url(&self) -> &str {
        match self {
            Place::Single(server) => &server.url,
            Place::Cluster(nodes) => &nodes.shown,
        }
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Place::Cluster(_))
    }

    /// The address of the node that serves `key`, as messages show it.
    pub fn node_of(&mut self, key: &str) -> Result<String> {
        match self {
            Place::Single(server) => Ok(server.url.clone()),
            Place::Cluster(nodes) => Ok(crate::redact_url(&nodes.node_for(key)?)),
        }
    }

    /// A filter of `layout` here: over this place's own connection on one
    /// server, over a cluster connection (every master at once, following
    /// MOVED and ASK) on a cluster.
    #[cfg(feature = "blocking-cluster")]
    pub fn into_filter(self, layout: Layout) -> Result<Box<dyn Filter>> {
        Ok(match self {
            Place::Single(server) => Box::new(RedisFilter::new(server, layout)),
            Place::Cluster(nodes) => Box::new(RedisFilter::new(nodes.cluster_connection()?, layout)),
        })
    }
}

/// A cluster's masters by slot, and a connection to each one asked for.
pub struct Nodes {
    /// The address given (a URL), to which each node's address is applied
    /// (its scheme, user and password kept).
    seed: String,
    shown: String,
    seed_con: redis::Connection,
    /// (first slot, last slot, host, port) of each range.
    slots: Vec<(i64, i64, String, u16)>,
    servers: HashMap<String, Server>,
    /// Settings for each connection opened.
    interrupt: Option<Arc<AtomicBool>>,
    drop_ttls: bool,
}

impl Nodes {
    fn open(url: &str, mut seed_con: redis::Connection) -> Result<Nodes> {
        let seed = crate::server_url(url)?;
        let shown = crate::redact_url(&seed);
        let reply: Value =
            redis::cmd("CLUSTER").arg("SLOTS").query(&mut seed_con).map_err(|e| Error::from_redis(e, ""))?;
        let Value::Array(ranges) = reply else {
            return Err(Error::Protocol(format!("{shown}: CLUSTER SLOTS answered no array")));
        };
        let slots = ranges.iter().map(|r| slot_range(r, &host_of(&seed))).collect::<Option<Vec<_>>>();
        let Some(slots) = slots else {
            return Err(Error::Protocol(format!("{shown}: CLUSTER SLOTS answered a range that is not one")));
        };
        if slots.is_empty() {
            return Err(Error::Transfer(format!(
                "{shown}: the cluster serves no slots (CLUSTER SLOTS is empty)"
            )));
        }
        Ok(Nodes { seed, shown, seed_con, slots, servers: HashMap::new(), interrupt: None, drop_ttls: false })
    }

    /// The URL of the master that serves `key`'s slot, with the address's
    /// credentials (for connections, never for messages: [`Place::node_of`]).
    fn node_for(&mut self, key: &str) -> Result<String> {
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.seed_con)
            .map_err(|e| Error::from_redis(e, key))?;
        let (_, _, host, port) =
            self.slots.iter().find(|(first, last, _, _)| (*first..=*last).contains(&slot)).ok_or_else(
                || Error::Transfer(format!("{}: no node serves slot {slot} (of key '{key}')", self.shown)),
            )?;
        Ok(with_address(&self.seed, host, *port))
    }

    fn server_for(&mut self, key: &str) -> Result<&mut Server> {
        let url = self.node_for(key)?;
        self.open_server(&url)
    }

    fn open_server(&mut self, url: &str) -> Result<&mut Server> {
        if !self.servers.contains_key(url) {
            let mut server = Server::connect(url)?;
            if let Some(flag) = &self.interrupt {
                server.interrupt_on(flag.clone());
            }
            if self.drop_ttls {
                server.drop_ttls();
            }
            self.servers.insert(url.to_string(), server);
        }
        Ok(self.servers.get_mut(url).expect("just inserted"))
    }

    /// A cluster connection (every node at once, following MOVED and ASK)
    /// with the address's credentials.
    #[cfg(feature = "blocking-cluster")]
    fn cluster_connection(&self) -> Result<crate::BlockingCluster> {
        let client = redis::cluster::ClusterClient::builder(vec![crate::connection_info(&self.seed)?])
            .response_timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|e| Error::from_redis(e, ""))?;
        crate::BlockingCluster::connect(&client).map_err(|e| Error::Transfer(format!("{}: {e}", self.shown)))
    }
}

/// One range of a `CLUSTER SLOTS` answer: (first, last, master's host,
/// port); an empty host is the node's own, the one reached (`seed_host`).
/// `None`: not a range (a port out of range, a field missing).
fn slot_range(range: &Value, seed_host: &str) -> Option<(i64, i64, String, u16)> {
    let Value::Array(r) = range else { return None };
    let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(master))) =
        (r.first(), r.get(1), r.get(2))
    else {
        return None;
    };
    let host = match master.first() {
        Some(Value::BulkString(h)) if !h.is_empty() && h.as_slice() != b"?" => {
            String::from_utf8_lossy(h).into_owned()
        }
        _ => seed_host.to_string(),
    };
    let port = match master.get(1) {
        Some(Value::Int(p)) => u16::try_from(*p).ok()?,
        _ => return None,
    };
    Some((*first, *last, host, port))
}

/// The host of a URL (`redis://user:pass@host:port/0` -> `host`).
fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.split('?').next().unwrap_or(rest);
    let after_user = rest.rfind('@').map_or(rest, |at| &rest[at + 1..]);
    let authority = after_user.split('/').next().unwrap_or(after_user);
    match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6).to_string(),
        None => authority.split(':').next().unwrap_or(authority).to_string(),
    }
}

/// `url` with its host and port replaced, its scheme, user, password,
/// database and query kept.
fn with_address(url: &str, host: &str, port: u16) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("redis", url));
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, format!("?{q}")),
        None => (rest, String::new()),
    };
    let (userinfo, after_user) = match rest.rfind('@') {
        Some(at) => (&rest[..=at], &rest[at + 1..]),
        None => ("", rest),
    };
    let path = after_user.find('/').map_or("", |i| &after_user[i..]);
    let host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
    format!("{scheme}://{userinfo}{host}:{port}{path}{query}")
}

#[cfg(test)]
mod tests {
    use super::{host_of, shard_keys, with_address};

    #[test]
    fn node_addresses_keep_the_credentials() {
        assert_eq!(with_address("redis://127.0.0.1:7000", "10.0.0.2", 7001), "redis://10.0.0.2:7001");
        assert_eq!(
            with_address("rediss://u:p@ss/w@h:1/0?protocol=resp3", "n", 2),
            "rediss://u:p@ss/w@n:2/0?protocol=resp3"
        );
        assert_eq!(with_address("redis://h:1", "::1", 3), "redis://[::1]:3");
        assert_eq!(host_of("redis://u:p@host:1/0"), "host");
        assert_eq!(host_of("redis://[::1]:7000"), "::1");
        assert_eq!(shard_keys("seen", 2), ["{seen:0}", "{seen:1}"]);
    }
}
