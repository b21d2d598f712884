//! Filters on a server, sync and async: each call runs a [`Layout`]'s
//! commands through a transport and reads the replies.

use std::time::Duration;

use redis::{Cmd, Value};

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::options::Info;
use crate::plan::{check, integer, Plan};
use crate::Filter;

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
/// adds.) [`BlockingCluster`] sends to all nodes at once.
impl Transport for redis::cluster::ClusterConnection {
    fn run(&mut self, cmds: &[&Cmd]) -> redis::RedisResult<Vec<Value>> {
        cmds.iter().map(|c| c.query::<Value>(self)).collect()
    }
}

/// A blocking transport over the async cluster connection: the commands of
/// a call are in flight together (up to [`CLUSTER_IN_FLIGHT`]), so the
/// nodes holding a batch's shards work in parallel, and each command
/// follows MOVED/ASK on its own. A response timeout on the `ClusterClient`
/// turns a connection that stops answering into [`Error::Timeout`].
pub struct BlockingCluster {
    runtime: tokio::runtime::Runtime,
    conn: redis::cluster_async::ClusterConnection,
}

impl BlockingCluster {
    pub fn connect(client: &redis::cluster::ClusterClient) -> redis::RedisResult<BlockingCluster> {
        // A worker thread of its own, so that the connection's background
        // task runs while the caller blocks.
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
        let conn = runtime.block_on(client.get_async_connection())?;
        Ok(BlockingCluster { runtime, conn })
    }
}

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

/// A filter on a Redis or Valkey server (or cluster), over a blocking connection.
///
/// ```no_run
/// use bloomkit_client::{Filter, Layout, Options, RedisFilter};
///
/// let conn = redis::Client::open("redis://127.0.0.1/")?.get_connection()?;
/// let layout = Layout::bitmap("seen:urls", Options::new(10_000_000, 0.001))?;
/// let mut seen = RedisFilter::new(conn, layout);
/// let new = seen.add_many(&[b"https://a.example/".as_slice(), b"https://b.example/"])?;
/// assert_eq!(new.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisFilter<C> {
    conn: C,
    layout: Layout,
}

impl<C: Transport> RedisFilter<C> {
    pub fn new(conn: C, layout: Layout) -> RedisFilter<C> {
        RedisFilter { conn, layout }
    }

    /// How many copies of the item a cuckoo filter may hold (`CF.COUNT`:
    /// exact for items added, possibly more through shared fingerprints).
    pub fn count_of(&mut self, item: &[u8]) -> Result<u64> {
        if !self.layout.removes() {
            return Err(Error::Unsupported(
                "counting copies of an item: only cuckoo filters (Layout::cuckoo) can",
            ));
        }
        let replies = self.run(&[&self.layout.count_of(item)])?;
        match replies.first() {
            Some(v) => Ok(integer(v, self.layout.name())?.max(0) as u64),
            None => Err(Error::Protocol("no reply to CF.COUNT".into())),
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn into_connection(self) -> C {
        self.conn
    }

    fn run(&mut self, cmds: &[&Cmd]) -> Result<Vec<Value>> {
        self.conn.run(cmds).map_err(|e| Error::from_redis(e, self.layout.name()))
    }

    fn run_plan(&mut self, plan: Plan) -> Result<Vec<bool>> {
        let cmds: Vec<&Cmd> = plan.commands().collect();
        let replies = self.run(&cmds)?;
        plan.answers(replies, self.layout.name())
    }

    fn run_all(&mut self, cmds: Vec<Cmd>) -> Result<Vec<Value>> {
        let refs: Vec<&Cmd> = cmds.iter().collect();
        let replies = self.run(&refs)?;
        replies.iter().try_for_each(|r| check(r, self.layout.name()))?;
        Ok(replies)
    }
}

impl<C: Transport> Filter for RedisFilter<C> {
    fn reserve(&mut self) -> Result<()> {
        self.run_all(self.layout.reserve()).map(drop)
    }

    fn add_many(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        let plan = self.layout.add_plan(items);
        match self.run_plan(plan) {
            // Nothing was written: create the window filter, then add.
            Err(Error::NotFound(_)) if self.layout.is_window() => {
                match self.reserve() {
                    Ok(()) | Err(Error::AlreadyExists(_)) => {}
                    Err(e) => return Err(e),
                }
                let plan = self.layout.add_plan(items);
                self.run_plan(plan)
            }
            other => other,
        }
    }

    fn contains_many(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        let plan = self.layout.contains_plan(items);
        self.run_plan(plan)
    }

    fn remove_many(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        if !self.layout.removes() {
            return Err(Error::Unsupported("removing items: only cuckoo filters (Layout::cuckoo) can"));
        }
        match self.run_plan(self.layout.remove_plan(items)) {
            Err(Error::NotFound(_)) => Ok(vec![false; items.len()]),
            other => other,
        }
    }

    fn count(&mut self) -> Result<Option<u64>> {
        if self.layout.removes() {
            return match self.info() {
                Ok(info) => Ok(info.items),
                Err(Error::NotFound(_)) => Ok(Some(0)),
                Err(e) => Err(e),
            };
        }
        let Some(cmds) = self.layout.count() else { return Ok(None) };
        let replies = self.run_all(cmds)?;
        sum(&replies, self.layout.name()).map(Some)
    }

    fn info(&mut self) -> Result<Info> {
        let layout = self.layout.clone();
        let parts = layout
            .info_parts()
            .into_iter()
            .map(|part| {
                let replies = self.run(&part.info().iter().collect::<Vec<_>>());
                replies.and_then(|r| part.read_info(r))
            })
            .collect();
        layout.combine_info(parts)
    }

    fn clear(&mut self) -> Result<()> {
        self.run_all(self.layout.clear()).map(drop)
    }

    fn expire(&mut self, ttl: Duration) -> Result<()> {
        self.run_all(self.layout.expire(ttl)).map(drop)
    }
}

fn sum(replies: &[Value], key: &str) -> Result<u64> {
    replies.iter().try_fold(0u64, |acc, r| Ok(acc + integer(r, key)? as u64))
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

/// The async twin of [`RedisFilter`], with the same methods. With the
/// async cluster connection, use a multi-thread tokio runtime (see
/// [`BlockingCluster`]).
///
/// ```no_run
/// use bloomkit_client::{AsyncRedisFilter, Layout, Options, Over};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::cluster::ClusterClient::new(vec!["redis://127.0.0.1:7000/"])?;
/// let conn = client.get_async_connection().await?;
/// let layout = Layout::sharded("clicks", 12, Over::Module, Options::new(1_000_000_000, 0.001))?;
/// let mut clicks = AsyncRedisFilter::new(conn, layout);
/// let new = clicks.add(b"click-42").await?;
/// # Ok(()) }
/// ```
pub struct AsyncRedisFilter<C> {
    conn: C,
    layout: Layout,
}

impl<C: AsyncTransport> AsyncRedisFilter<C> {
    pub fn new(conn: C, layout: Layout) -> AsyncRedisFilter<C> {
        AsyncRedisFilter { conn, layout }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    async fn run(&mut self, cmds: &[&Cmd]) -> Result<Vec<Value>> {
        self.conn.run(cmds).await.map_err(|e| Error::from_redis(e, self.layout.name()))
    }

    async fn run_plan(&mut self, plan: Plan) -> Result<Vec<bool>> {
        let cmds: Vec<&Cmd> = plan.commands().collect();
        let replies = self.run(&cmds).await?;
        plan.answers(replies, self.layout.name())
    }

    async fn run_all(&mut self, cmds: Vec<Cmd>) -> Result<Vec<Value>> {
        let refs: Vec<&Cmd> = cmds.iter().collect();
        let replies = self.run(&refs).await?;
        replies.iter().try_for_each(|r| check(r, self.layout.name()))?;
        Ok(replies)
    }

    /// See [`Filter::reserve`].
    pub async fn reserve(&mut self) -> Result<()> {
        self.run_all(self.layout.reserve()).await.map(drop)
    }

    /// See [`Filter::add`].
    pub async fn add(&mut self, item: &[u8]) -> Result<bool> {
        Ok(self.add_many(&[item]).await?[0])
    }

    /// See [`Filter::add_many`].
    pub async fn add_many(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        let plan = self.layout.add_plan(items);
        match self.run_plan(plan).await {
            // Nothing was written: create the window filter, then add.
            Err(Error::NotFound(_)) if self.layout.is_window() => {
                match self.reserve().await {
                    Ok(()) | Err(Error::AlreadyExists(_)) => {}
                    Err(e) => return Err(e),
                }
                let plan = self.layout.add_plan(items);
                self.run_plan(plan).await
            }
            other => other,
        }
    }

    /// See [`Filter::contains`].
    pub async fn contains(&mut self, item: &[u8]) -> Result<bool> {
        Ok(self.contains_many(&[item]).await?[0])
    }

    /// See [`Filter::contains_many`].
    pub async fn contains_many(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        let plan = self.layout.contains_plan(items);
        self.run_plan(plan).await
    }

    /// See [`Filter::remove_many`].
    pub async fn remove_many(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        if !self.layout.removes() {
            return Err(Error::Unsupported("removing items: only cuckoo filters (Layout::cuckoo) can"));
        }
        match self.run_plan(self.layout.remove_plan(items)).await {
            Err(Error::NotFound(_)) => Ok(vec![false; items.len()]),
            other => other,
        }
    }

    /// See [`Filter::count`].
    pub async fn count(&mut self) -> Result<Option<u64>> {
        if self.layout.removes() {
            return match self.info().await {
                Ok(info) => Ok(info.items),
                Err(Error::NotFound(_)) => Ok(Some(0)),
                Err(e) => Err(e),
            };
        }
        let Some(cmds) = self.layout.count() else { return Ok(None) };
        let replies = self.run_all(cmds).await?;
        sum(&replies, self.layout.name()).map(Some)
    }

    /// See [`Filter::info`].
    pub async fn info(&mut self) -> Result<Info> {
        let layout = self.layout.clone();
        let mut parts = Vec::new();
        for part in layout.info_parts() {
            let replies = self.run(&part.info().iter().collect::<Vec<_>>()).await;
            parts.push(replies.and_then(|r| part.read_info(r)));
        }
        layout.combine_info(parts)
    }

    /// See [`Filter::clear`].
    pub async fn clear(&mut self) -> Result<()> {
        self.run_all(self.layout.clear()).await.map(drop)
    }

    /// See [`Filter::expire`].
    pub async fn expire(&mut self, ttl: Duration) -> Result<()> {
        self.run_all(self.layout.expire(ttl)).await.map(drop)
    }
}
