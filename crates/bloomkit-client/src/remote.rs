//! Filters on a server, blocking and async: each method runs the
//! operation's [`Call`] (`operations.rs`) over a transport, one round trip
//! at a time, so the two fronts differ only in how they wait.

use std::time::Duration;

use redis::Cmd;

use crate::call::Call;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::operations;
use crate::options::Info;
use crate::transport::{AsyncTransport, Transport};
use crate::{AsyncFilter, Filter};

/// Runs a call to its answer over a blocking transport; `key` names the
/// filter in transport errors.
fn run<C: Transport, T>(conn: &mut C, key: &str, mut call: Call<'_, T>) -> Result<T> {
    loop {
        match call {
            Call::Done(answer) => return answer,
            Call::Send { cmds, then } => {
                let refs: Vec<&Cmd> = cmds.iter().collect();
                call = then(conn.run(&refs).map_err(|e| Error::from_redis(e, key)));
            }
        }
    }
}

/// [`run`] over an async transport.
async fn run_async<C: AsyncTransport, T>(conn: &mut C, key: &str, mut call: Call<'_, T>) -> Result<T> {
    loop {
        match call {
            Call::Done(answer) => return answer,
            Call::Send { cmds, then } => {
                let refs: Vec<&Cmd> = cmds.iter().collect();
                call = then(conn.run(&refs).await.map_err(|e| Error::from_redis(e, key)));
            }
        }
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
        run(&mut self.conn, self.layout.name(), operations::count_of(&self.layout, item))
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn into_connection(self) -> C {
        self.conn
    }

    /// The connection, for commands of the caller's own between the filter's.
    pub fn connection(&mut self) -> &mut C {
        &mut self.conn
    }
}

impl<C: Transport> Filter for RedisFilter<C> {
    fn reserve(&mut self) -> Result<()> {
        run(&mut self.conn, self.layout.name(), operations::reserve(&self.layout))
    }

    fn add_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        run(&mut self.conn, self.layout.name(), operations::add_many(&self.layout, items))
    }

    fn contains_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        run(&mut self.conn, self.layout.name(), operations::contains_many(&self.layout, items))
    }

    fn remove_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        run(&mut self.conn, self.layout.name(), operations::remove_many(&self.layout, items))
    }

    fn count(&mut self) -> Result<Option<u64>> {
        run(&mut self.conn, self.layout.name(), operations::count(&self.layout))
    }

    fn info(&mut self) -> Result<Info> {
        run(&mut self.conn, self.layout.name(), operations::info(&self.layout))
    }

    fn clear(&mut self) -> Result<()> {
        run(&mut self.conn, self.layout.name(), operations::clear(&self.layout))
    }

    fn expire(&mut self, ttl: Duration) -> Result<()> {
        run(&mut self.conn, self.layout.name(), operations::expire(&self.layout, ttl))
    }
}

/// The async twin of [`RedisFilter`]: the same calls through the
/// [`AsyncFilter`] trait (import it). With the async cluster connection,
/// use a multi-thread tokio runtime (see `BlockingCluster`, feature `blocking-cluster`).
///
/// ```no_run
/// use bloomkit_client::{AsyncFilter, AsyncRedisFilter, Layout, Options, Over};
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

    /// See [`RedisFilter::count_of`].
    pub async fn count_of(&mut self, item: &[u8]) -> Result<u64> {
        run_async(&mut self.conn, self.layout.name(), operations::count_of(&self.layout, item)).await
    }

    pub fn into_connection(self) -> C {
        self.conn
    }
}

impl<C: AsyncTransport> AsyncFilter for AsyncRedisFilter<C> {
    async fn reserve(&mut self) -> Result<()> {
        run_async(&mut self.conn, self.layout.name(), operations::reserve(&self.layout)).await
    }

    async fn add_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        run_async(&mut self.conn, self.layout.name(), operations::add_many(&self.layout, items)).await
    }

    async fn contains_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        run_async(&mut self.conn, self.layout.name(), operations::contains_many(&self.layout, items)).await
    }

    async fn remove_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        run_async(&mut self.conn, self.layout.name(), operations::remove_many(&self.layout, items)).await
    }

    async fn count(&mut self) -> Result<Option<u64>> {
        run_async(&mut self.conn, self.layout.name(), operations::count(&self.layout)).await
    }

    async fn info(&mut self) -> Result<Info> {
        run_async(&mut self.conn, self.layout.name(), operations::info(&self.layout)).await
    }

    async fn clear(&mut self) -> Result<()> {
        run_async(&mut self.conn, self.layout.name(), operations::clear(&self.layout)).await
    }

    async fn expire(&mut self, ttl: Duration) -> Result<()> {
        run_async(&mut self.conn, self.layout.name(), operations::expire(&self.layout, ttl)).await
    }
}
