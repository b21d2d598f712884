//! The connections a filter runs its commands over, blocking and async,
//! single server and cluster: each takes a list of commands and returns
//! their replies in order, with error replies left for the call to read.
//! How many go out at once is each connection's own concern (pipelines,
//! commands in flight), set by what its redis 1.x connection can take.

use redis::{Cmd, Value};

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

/// One command at a time, each following MOVED/ASK while slots move. (The
/// redis crate's sync cluster pipeline returns MOVED as an error after
/// running the other nodes' commands, which cannot be safely retried for
/// adds.) `BlockingCluster` (feature `blocking-cluster`) sends to all nodes at once.
impl Transport for redis::cluster::ClusterConnection {
    fn run(&mut self, cmds: &[&Cmd]) -> redis::RedisResult<Vec<Value>> {
        cmds.iter().map(|c| c.query::<Value>(self)).collect()
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
/// in parallel; answers come back in order.
impl AsyncTransport for redis::cluster_async::ClusterConnection {
    async fn run(&mut self, cmds: &[&Cmd]) -> redis::RedisResult<Vec<Value>> {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        let calls = cmds.iter().map(|c| {
            let mut conn = self.clone();
            async move { c.query_async::<Value>(&mut conn).await }
        });
        stream::iter(calls).buffered(CLUSTER_IN_FLIGHT).try_collect().await
    }
}
