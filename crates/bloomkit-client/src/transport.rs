//! The connections a filter runs its commands over, blocking and async,
//! single server and cluster: each takes a list of commands and returns
//! their replies in order, with error replies left for the call to read.
//! How many go out at once is each connection's own concern (pipelines,
//! commands in flight), set by what its redis 1.x connection can take.

use std::time::{Duration, Instant};

use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

/// A connection that runs a list of commands and returns their replies in
/// order (or the first error).
pub trait Transport {
    fn run(&mut self, cmds: &[&Cmd]) -> redis::RedisResult<Vec<Value>>;
}

/// One pipeline: one round trip for the whole list, encoded straight from
/// the commands, with error replies left in place for the plan to read.
impl Transport for redis::Connection {
    fn run(&mut self, cmds: &[&Cmd]) -> redis::RedisResult<Vec<Value>> {
        let mut packed = Vec::new();
        for c in cmds {
            c.write_packed_command(&mut packed);
        }
        redis::ConnectionLike::req_packed_commands(self, &packed, 0, cmds.len())
    }
}

/// How long a call on a cluster keeps sending a command again while the
/// cluster refuses it for the moment ([`in_transition`]): a failover takes
/// the cluster's node timeout (15 s by default) before a replica is
/// elected, and a failed election is retried after twice that.
pub const CLUSTER_RETRY_WINDOW: Duration = Duration::from_secs(60);

/// Whether a cluster connection's error is one a cluster in transition
/// answers, after the redis crate's own retries gave up: a node that is
/// gone (its connection refused or dropped) or has no connection yet, a
/// cluster down or a master down while a failover runs, a node loading,
/// a write that reached a node just demoted (READONLY), and redirections
/// the crate did not follow to the end (MOVED, ASK; TRYAGAIN, which only
/// commands of several keys get). Sent again, such a command reaches the
/// node that serves its slot once the cluster has settled. A response
/// timeout is not one: a node that stops answering stays an error.
///
/// Every one of these but a dropped connection refuses the command before
/// running it. A command whose connection dropped after it was sent may
/// have run; the crate sends it again too, so an add whose reply was lost
/// that way answers `false` for the items its first send stored.
pub(crate) fn in_transition(e: &RedisError) -> bool {
    if e.is_timeout() {
        return false;
    }
    matches!(
        e.kind(),
        ErrorKind::Io
            | ErrorKind::ClusterConnectionNotFound
            | ErrorKind::Server(
                ServerErrorKind::Moved
                    | ServerErrorKind::Ask
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::BusyLoading
                    | ServerErrorKind::ReadOnly
            )
    )
}

/// The pause before sending a command again for the `attempt`th time: from
/// 50 ms, doubling, at most a second.
fn retry_pause(attempt: u32) -> Duration {
    Duration::from_millis(50u64.saturating_mul(1 << attempt.min(5))).min(Duration::from_secs(1))
}

/// One command at a time, each following MOVED/ASK while slots move. (The
/// redis crate's sync cluster pipeline returns MOVED as an error after
/// running the other nodes' commands, which cannot be safely retried for
/// adds.) `BlockingCluster` (feature `blocking-cluster`) sends to all nodes
/// at once. A command the cluster refuses for the moment ([`in_transition`])
/// is sent again, for up to [`CLUSTER_RETRY_WINDOW`], through any node: the
/// crate keeps sending to the address its slot map names, which is a dead
/// master's until something refreshes the map, and a node that does not
/// serve the slot answers MOVED, which does.
impl Transport for redis::cluster::ClusterConnection {
    fn run(&mut self, cmds: &[&Cmd]) -> RedisResult<Vec<Value>> {
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        let mut replies = Vec::with_capacity(cmds.len());
        for c in cmds {
            let deadline = Instant::now() + CLUSTER_RETRY_WINDOW;
            let mut reply = c.query::<Value>(self);
            let mut attempt = 0;
            while matches!(&reply, Err(e) if in_transition(e)) && Instant::now() < deadline {
                std::thread::sleep(retry_pause(attempt));
                attempt += 1;
                let anywhere = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
                reply = self.route_command(c, anywhere);
            }
            replies.push(reply?);
        }
        Ok(replies)
    }
}

/// A blocking transport over the async cluster connection: the commands of
/// a call are in flight together (up to [`CLUSTER_IN_FLIGHT`]), so the
/// nodes holding a batch's shards work in parallel, and each command
/// follows MOVED/ASK on its own. A response timeout on the `ClusterClient`
/// turns a connection that stops answering into [`crate::Error::Timeout`].
/// Needs the `blocking-cluster` feature (it brings tokio's multi-thread runtime).
#[cfg(feature = "blocking-cluster")]
pub struct BlockingCluster {
    runtime: tokio::runtime::Runtime,
    conn: redis::cluster_async::ClusterConnection,
}

#[cfg(feature = "blocking-cluster")]
impl BlockingCluster {
    pub fn connect(client: &redis::cluster::ClusterClient) -> redis::RedisResult<BlockingCluster> {
        // A worker thread of its own, so that the connection's background
        // task runs while the caller blocks.
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
        let conn = runtime.block_on(client.get_async_connection())?;
        Ok(BlockingCluster { runtime, conn })
    }
}

#[cfg(feature = "blocking-cluster")]
impl Transport for BlockingCluster {
    fn run(&mut self, cmds: &[&Cmd]) -> redis::RedisResult<Vec<Value>> {
        self.runtime.block_on(AsyncTransport::run(&mut self.conn, cmds))
    }
}

impl<T: Transport + ?Sized> Transport for &mut T {
    fn run(&mut self, cmds: &[&Cmd]) -> redis::RedisResult<Vec<Value>> {
        (**self).run(cmds)
    }
}

/// An async connection that runs a list of commands.
#[allow(async_fn_in_trait)]
pub trait AsyncTransport {
    async fn run(&mut self, cmds: &[&Cmd]) -> redis::RedisResult<Vec<Value>>;
}

/// Commands per pipeline on a multiplexed connection. redis 1.x gives
/// async connections a response timeout of 500 ms by default, which a
/// call's whole pipeline (100 batches of 1000 items) can exceed; pipelines
/// of 16 batches answer in a few milliseconds.
pub const PIPELINE_COMMANDS: usize = 16;

/// Pipelines of at most [`PIPELINE_COMMANDS`] on a multiplexed connection.
impl AsyncTransport for redis::aio::MultiplexedConnection {
    async fn run(&mut self, cmds: &[&Cmd]) -> redis::RedisResult<Vec<Value>> {
        let mut out = Vec::with_capacity(cmds.len());
        for group in cmds.chunks(PIPELINE_COMMANDS) {
            let mut pipe = redis::pipe();
            for c in group {
                pipe.add_command((*c).clone());
            }
            out.extend(pipe.query_async::<Vec<Value>>(self).await?);
        }
        Ok(out)
    }
}

/// Commands of one call in flight together on the async cluster
/// connection. redis 1.8's connection hangs when many commands are
/// redirected at once while slots move: with the 60 commands of a
/// 30 000-item call in flight, every run of `tests/cluster.rs` stalled at
/// its first reshard; with 8, thirty reshards in a row went through.
pub const CLUSTER_IN_FLIGHT: usize = 8;

/// The commands of a call, up to [`CLUSTER_IN_FLIGHT`] at once: the async
/// cluster connection routes each to its node, so the shards' nodes work
/// in parallel (commands for one node go down its one connection back to
/// back, a pipeline); answers come back in order.
///
/// A command the cluster refused for the moment ([`in_transition`]) is
/// sent again, one at a time, for up to [`CLUSTER_RETRY_WINDOW`]: through a
/// failover (the crate's own retries end within milliseconds while a dead
/// master's connection is refused, seconds before a replica takes over),
/// and through a slot's migration, where redis 1.8 loses redirections when
/// several commands are in flight: it sends `ASKING` to the importing node
/// as a request of its own, so another command on that connection can take
/// the flag first, and the redirected command, answered MOVED, goes back
/// to the source and is asked again until its retries run out (seen in
/// `tests/it/cluster.rs`: `Ask: 2055 127.0.0.1:...` after 16 rounds).
impl AsyncTransport for redis::cluster_async::ClusterConnection {
    async fn run(&mut self, cmds: &[&Cmd]) -> RedisResult<Vec<Value>> {
        use futures_util::stream::{self, StreamExt};
        let calls = cmds.iter().map(|c| {
            let mut conn = self.clone();
            async move { c.query_async::<Value>(&mut conn).await }
        });
        let mut replies: Vec<RedisResult<Value>> =
            stream::iter(calls).buffered(CLUSTER_IN_FLIGHT).collect().await;
        let deadline = Instant::now() + CLUSTER_RETRY_WINDOW;
        let mut attempt = 0;
        loop {
            let refused: Vec<usize> =
                (0..replies.len()).filter(|&i| matches!(&replies[i], Err(e) if in_transition(e))).collect();
            if refused.is_empty() || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(retry_pause(attempt)).await;
            attempt += 1;
            for i in refused {
                replies[i] = cmds[i].query_async::<Value>(self).await;
            }
        }
        replies.into_iter().collect()
    }
}
