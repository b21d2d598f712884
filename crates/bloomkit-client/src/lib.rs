//! One Bloom filter API over six backends.
//!
//! - **Module** ([`Layout::module`]): `BF.*` commands, for bloomkit,
//!   RedisBloom or valkey-bloom on the server.
//! - **Bitmap** ([`Layout::bitmap`]): plain Redis strings, for servers that
//!   cannot load a module. Sized and hashed as Guava's `BloomFilter`
//!   (MURMUR128_MITZ_64 over UTF-8), so a Java service doing the same
//!   `SETBIT`s shares the bitmap; [`Layout::bitmap_with`] takes the other
//!   layouts in production ([`BitmapLayout`]: the Java RedisBloomFilter
//!   pattern, Redisson's `RBloomFilter`, the PHP BKDR scheme). Each batch is one atomic `BITFIELD` (a
//!   script when split over keys): with concurrent writers, an item is
//!   reported new exactly once. Filters above
//!   Redis's 512 MiB string limit are split over keys in one hash slot.
//! - **Cuckoo** ([`Layout::cuckoo`]): `CF.*` commands, for filters whose
//!   items must also be removed ([`Filter::remove`]).
//! - **Expandable** ([`Layout::expandable`], in process
//!   [`LocalFilter::expandable`]): bloomkit's `XF.*` filter, which grows
//!   from any start at its error rate (no capacity to guess), and removes
//!   and counts items.
//! - **Sharded** ([`Layout::sharded`]): one logical filter over N module,
//!   bitmap or expandable filters ([`Over`]), each in its own hash slot, so
//!   a Redis Cluster spreads them over its masters; a batch's commands are
//!   grouped per shard (one command per shard key and batch) and the nodes
//!   work in parallel.
//! - **Local** ([`LocalFilter`]): the same filter in process, saved to a
//!   file holding the bytes of its SCANDUMP.
//!
//! The server backends are a [`Layout`] (which commands, how to read their
//! replies) run by [`RedisFilter`] over a blocking connection or
//! [`AsyncRedisFilter`] over an async one; both accept single servers and
//! clusters. Every call is split into commands of at most
//! [`Options::batch_size`] items, so one call never holds the server long.
//!
//! ```no_run
//! use bloomkit_client::redis;
//! use bloomkit_client::{Filter, Layout, Options, RedisFilter};
//!
//! let conn = redis::Client::open(bloomkit_client::default_url())?.get_connection()?;
//! let layout = Layout::module("clicks:2026-11-22", Options::new(1_000_000, 0.001))?;
//! let mut clicks = RedisFilter::new(conn, layout);
//! let new = clicks.add_many(&[b"c1".as_slice(), b"c2", b"c1"])?;
//! assert_eq!(new, [true, true, false]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod call;
mod credentials;
mod error;
mod layout;
mod local;
mod operations;
mod options;
mod place;
mod plan;
mod remote;
pub mod transfer;
mod transport;

use std::time::Duration;

/// Whose bitmap layout a [`Layout::bitmap_with`] filter shares bits with.
pub use bloomkit_core::bitmap::BitmapLayout;
pub use credentials::{connection_info, redact_text, redact_url, AUTH_VARIABLE};
pub use error::{Error, Failure, Result};
pub use layout::{has_hash_tag, Layout, Over};
pub use local::LocalFilter;
pub use options::{Info, Options, Window, MAX_STRING_BITS};
pub use place::{shard_key, shard_keys, Nodes, Place, DEFAULT_SHARDS};
pub use remote::{AsyncRedisFilter, RedisFilter};

#[cfg(feature = "blocking-cluster")]
pub use transport::BlockingCluster;
pub use transport::{AsyncTransport, Transport, CLUSTER_IN_FLIGHT, CLUSTER_RETRY_WINDOW};

/// The environment variable that names the server for the examples, the
/// README's snippets and `scripts/run-server.sh`'s hint.
pub const URL_VARIABLE: &str = "BLOOMKIT_URL";

/// The server the examples talk to: `$BLOOMKIT_URL`, or a server on this
/// machine's default port.
pub fn default_url() -> String {
    std::env::var(URL_VARIABLE).unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_string())
}

/// A server address as a URL the `redis` crate opens. URLs
/// (`redis://`, `rediss://`, `unix://`, `redis+unix://`) pass through;
/// the forms `redis-cli` users type are accepted too: `host:port`, `host`
/// (port 6379), `:port` (on 127.0.0.1), each with an optional `/db`, and
/// `[::1]:port` for IPv6. Anything else is [`Error::InvalidUrl`], which
/// shows the address with its password hidden ([`redact_url`]).
pub fn server_url(address: &str) -> Result<String> {
    let invalid = || Error::InvalidUrl(redact_url(address.trim()));
    let address = address.trim();
    if address.contains("://") {
        return Ok(address.to_string());
    }
    if address.is_empty() || address.contains(|c: char| c.is_whitespace() || c == '@') {
        return Err(invalid());
    }
    let (hostport, db) = match address.split_once('/') {
        Some((hp, db)) => {
            db.parse::<u32>().map_err(|_| invalid())?;
            (hp, Some(db))
        }
        None => (address, None),
    };
    let (host, port) = if let Some(rest) = hostport.strip_prefix('[') {
        // [IPv6]:port
        let (host, after) = rest.split_once(']').ok_or_else(invalid)?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(invalid)?),
        };
        (format!("[{host}]"), port)
    } else {
        match hostport.split_once(':') {
            Some((_, p)) if p.contains(':') => return Err(invalid()),
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (hostport.to_string(), None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(invalid)?,
        None => 6379,
    };
    let host = if host.is_empty() { "127.0.0.1".to_string() } else { host };
    Ok(match db {
        Some(db) => format!("redis://{host}:{port}/{db}"),
        None => format!("redis://{host}:{port}"),
    })
}

/// The `redis` crate this client is built on (1.x): use it through here, so
/// that your connections are always of the version the filters take.
pub use redis;

/// The README's code, compiled by `cargo test --doc` so that its client
/// snippet keeps compiling as pasted.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// Collects items given as any iterable of byte strings (`&[&[u8]]`,
/// `Vec<String>`, `["a", "b"]`, an iterator of `Vec<u8>` ...) and hands
/// their bytes to `f` as one slice, which is what every backend sends.
fn with_items<I, T>(items: I, f: impl FnOnce(&[&[u8]]) -> T) -> T
where
    I: IntoIterator,
    I::Item: AsRef<[u8]>,
{
    let owned: Vec<I::Item> = items.into_iter().collect();
    let refs: Vec<&[u8]> = owned.iter().map(AsRef::as_ref).collect();
    f(&refs)
}

/// What every backend does. Items are bytes; a Java `String` is its UTF-8.
///
/// The many-item calls take any iterable of byte strings, as redis-rs's
/// commands take any `ToRedisArgs`: `add_many(["a", "b"])`,
/// `add_many(&lines)` with `lines: Vec<String>`, `add_many(&[b"x".as_slice()])`.
/// Backends implement the `*_slice` forms (one slice of byte slices), which
/// keep the trait usable as `dyn Filter` (call those on one), and take
/// array literals of byte strings of different lengths (`&[b"a", b"bc"]`),
/// which a generic parameter cannot coerce.
pub trait Filter {
    /// Creates the filter now, with its options; fails with
    /// [`Error::AlreadyExists`] if it is there. Optional: writes create it too.
    fn reserve(&mut self) -> Result<()>;

    /// Adds one item; `true` if it was new (not seen before, up to the
    /// false-positive rate).
    fn add(&mut self, item: &[u8]) -> Result<bool> {
        Ok(self.add_slice(&[item])?[0])
    }

    /// Adds items in order; answer i is `true` if item i was new. An item
    /// repeated within the call is new at most once.
    fn add_many<I>(&mut self, items: I) -> Result<Vec<bool>>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
        Self: Sized,
    {
        with_items(items, |items| self.add_slice(items))
    }

    /// [`Filter::add_many`] over one slice: what backends implement.
    fn add_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>>;

    /// Whether the item may have been added (never `false` for one that was).
    fn contains(&mut self, item: &[u8]) -> Result<bool> {
        Ok(self.contains_slice(&[item])?[0])
    }

    /// [`Filter::contains`] for each item, in order.
    fn contains_many<I>(&mut self, items: I) -> Result<Vec<bool>>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
        Self: Sized,
    {
        with_items(items, |items| self.contains_slice(items))
    }

    /// [`Filter::contains_many`] over one slice: what backends implement.
    fn contains_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>>;

    /// Removes one copy of the item; `true` if one was there. Only cuckoo
    /// and expandable filters ([`Layout::cuckoo`], [`Layout::expandable`],
    /// [`LocalFilter::expandable`]) can; the others answer
    /// [`Error::Unsupported`]. Remove only items whose `add` answered
    /// `true`: an add answered `false` stored nothing (its fingerprint was
    /// there already, another item's perhaps), and removing it would
    /// remove that other item's fingerprint.
    fn remove(&mut self, item: &[u8]) -> Result<bool> {
        Ok(self.remove_slice(&[item])?[0])
    }

    /// [`Filter::remove`] for each item, in order.
    fn remove_many<I>(&mut self, items: I) -> Result<Vec<bool>>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
        Self: Sized,
    {
        with_items(items, |items| self.remove_slice(items))
    }

    /// [`Filter::remove_many`] over one slice: what backends implement.
    fn remove_slice(&mut self, _items: &[&[u8]]) -> Result<Vec<bool>> {
        Err(Error::Unsupported(
            "removing items: only cuckoo and expandable filters (Layout::cuckoo, Layout::expandable) can",
        ))
    }

    /// Items added, where the backend counts them (not the bitmap backend;
    /// its [`Info::estimated_items`] estimates them).
    fn count(&mut self) -> Result<Option<u64>>;

    fn info(&mut self) -> Result<Info>;

    /// Removes the filter and everything in it.
    fn clear(&mut self) -> Result<()>;

    /// Sets the lifetime of the filter's keys from now.
    fn expire(&mut self, ttl: Duration) -> Result<()>;
}

/// [`Filter`] over an async connection ([`AsyncRedisFilter`]): the same
/// calls, each a future. Written with `async fn`, so a generic caller
/// cannot require the futures to be `Send`; on a concrete
/// `AsyncRedisFilter<C>` they are `Send` whenever `C` is, so
/// `tokio::spawn` takes them.
#[allow(async_fn_in_trait)]
pub trait AsyncFilter {
    /// See [`Filter::reserve`].
    async fn reserve(&mut self) -> Result<()>;

    /// See [`Filter::add`].
    async fn add(&mut self, item: &[u8]) -> Result<bool> {
        Ok(self.add_slice(&[item]).await?[0])
    }

    /// See [`Filter::add_many`].
    async fn add_many<I>(&mut self, items: I) -> Result<Vec<bool>>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let owned: Vec<I::Item> = items.into_iter().collect();
        let refs: Vec<&[u8]> = owned.iter().map(AsRef::as_ref).collect();
        self.add_slice(&refs).await
    }

    /// See [`Filter::add_slice`].
    async fn add_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>>;

    /// See [`Filter::contains`].
    async fn contains(&mut self, item: &[u8]) -> Result<bool> {
        Ok(self.contains_slice(&[item]).await?[0])
    }

    /// See [`Filter::contains_many`].
    async fn contains_many<I>(&mut self, items: I) -> Result<Vec<bool>>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let owned: Vec<I::Item> = items.into_iter().collect();
        let refs: Vec<&[u8]> = owned.iter().map(AsRef::as_ref).collect();
        self.contains_slice(&refs).await
    }

    /// See [`Filter::contains_slice`].
    async fn contains_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>>;

    /// See [`Filter::remove`].
    async fn remove(&mut self, item: &[u8]) -> Result<bool> {
        Ok(self.remove_slice(&[item]).await?[0])
    }

    /// See [`Filter::remove_many`].
    async fn remove_many<I>(&mut self, items: I) -> Result<Vec<bool>>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let owned: Vec<I::Item> = items.into_iter().collect();
        let refs: Vec<&[u8]> = owned.iter().map(AsRef::as_ref).collect();
        self.remove_slice(&refs).await
    }

    /// See [`Filter::remove_slice`].
    async fn remove_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>>;

    /// See [`Filter::count`].
    async fn count(&mut self) -> Result<Option<u64>>;

    /// See [`Filter::info`].
    async fn info(&mut self) -> Result<Info>;

    /// See [`Filter::clear`].
    async fn clear(&mut self) -> Result<()>;

    /// See [`Filter::expire`].
    async fn expire(&mut self, ttl: Duration) -> Result<()>;
}

#[cfg(test)]
mod url_tests {
    use super::server_url;

    #[test]
    fn addresses_as_redis_cli_users_type_them() {
        assert_eq!(server_url("127.0.0.1:18401").unwrap(), "redis://127.0.0.1:18401");
        assert_eq!(server_url("cache.local").unwrap(), "redis://cache.local:6379");
        assert_eq!(server_url(":7000").unwrap(), "redis://127.0.0.1:7000");
        assert_eq!(server_url("h:7000/2").unwrap(), "redis://h:7000/2");
        assert_eq!(server_url("[::1]:7000").unwrap(), "redis://[::1]:7000");
        assert_eq!(server_url("rediss://u:p@h:1/0").unwrap(), "rediss://u:p@h:1/0");
        for bad in ["", "h:port", "h:0", "h:70000", "::1", "not a url", "h:1/x", "u:p@h:1"] {
            assert!(server_url(bad).is_err(), "{bad:?} accepted");
        }
    }
}
