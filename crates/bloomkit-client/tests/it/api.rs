//! The API as redis-rs users expect it (issue 35): the many-item calls
//! take any iterable of byte strings, the async filter is a trait beside
//! the blocking one, and errors keep the redis crate's error as their
//! source, with its kind.

use std::error::Error as _;

use bloomkit_client::{AsyncFilter, AsyncRedisFilter, Error, Filter, Layout, Options, RedisFilter};
use bloomkit_testkit::{Server, TestServer};

use crate::common::connect;

#[test]
fn many_item_calls_take_any_iterable_of_bytes() {
    let server = TestServer::with_bloomkit(Server::Redis);
    let mut f = RedisFilter::new(connect(&server), Layout::module("k", Options::new(1000, 0.001)).unwrap());
    assert_eq!(f.add_many(["a", "b", "a"]).unwrap(), [true, true, false]);
    let owned: Vec<String> = vec!["c".into(), "a".into()];
    assert_eq!(f.add_many(&owned).unwrap(), [true, false]);
    assert_eq!(f.add_many(vec![b"d".to_vec()]).unwrap(), [true]);
    let probes = (0..3).map(|i| ["a", "d", "never"][i]);
    assert_eq!(f.contains_many(probes).unwrap(), [true, true, false]);
    // A borrowed slice of byte slices, as before.
    let slices: Vec<&[u8]> = vec![b"a", b"zz"];
    assert_eq!(f.contains_many(&slices).unwrap(), [true, false]);
    // dyn Filter: the slice forms.
    let dynamic: &mut dyn Filter = &mut f;
    assert_eq!(dynamic.add_slice(&[b"e", b"ff"]).unwrap(), [true, true]);
}

/// Generic code over the async trait, and the futures of a concrete
/// filter sent to another thread (tokio::spawn on a multi-thread runtime).
#[test]
fn the_async_filter_is_a_trait() {
    async fn add_twice<F: AsyncFilter>(f: &mut F) -> bloomkit_client::Result<(Vec<bool>, Vec<bool>)> {
        let first = f.add_many(["x", "y"]).await?;
        Ok((first, f.add_many(vec!["y".to_string(), "z".to_string()]).await?))
    }
    let server = TestServer::with_bloomkit(Server::Valkey);
    let url = format!("redis://127.0.0.1:{}/", server.port);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let answers = runtime
        .block_on(async move {
            let conn = redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap();
            let mut f = AsyncRedisFilter::new(conn, Layout::module("k", Options::new(1000, 0.001)).unwrap());
            tokio::spawn(async move {
                let answers = add_twice(&mut f).await.unwrap();
                assert_eq!(f.count().await.unwrap(), Some(3));
                answers
            })
            .await
        })
        .unwrap();
    assert_eq!(answers, (vec![true, true], vec![false, true]));
}

/// The redis crate's error is the source, and its kind and code are there
/// to ask: no need to read the message.
#[test]
fn errors_keep_the_redis_error() {
    let server = TestServer::with_bloomkit(Server::Redis);
    server.conn().cmd("BF.RESERVE full 0.01 10 NONSCALING");
    let mut f = RedisFilter::new(connect(&server), Layout::module("full", Options::new(10, 0.01)).unwrap());
    let items: Vec<String> = (0..50).map(|i| format!("i{i}")).collect();
    let e = f.add_many(&items).unwrap_err();
    let Error::Server(failure) = &e else { panic!("{e:?}") };
    assert_eq!(failure.code().as_deref(), Some("ERR"), "{e:?}");
    assert!(e.redis_kind().is_some(), "{e:?}");
    let source = e.source().expect("a source").downcast_ref::<redis::RedisError>().expect("a RedisError");
    assert!(source.to_string().contains("non scaling filter is full"), "{source}");

    // The connection's error: kind Io, the redis error as source.
    drop(server);
    let e = f.add(b"x").unwrap_err();
    assert!(matches!(e, Error::Connection(_)), "{e:?}");
    let source = e.source().and_then(|s| s.downcast_ref::<redis::RedisError>()).expect("a RedisError");
    assert!(source.is_io_error() || source.is_connection_dropped(), "{source:?}");
    assert_eq!(e.redis_kind(), Some(source.kind()));
}

/// The library's normal dependencies are what it uses: tokio's
/// multi-thread runtime only behind the `blocking-cluster` feature; tokio
/// itself only with `time` (the async cluster transport's pauses between
/// retries), which the redis crate's `tokio-comp` turns on anyway, so it
/// builds nothing more; tempfile stays, for `LocalFilter::save`'s
/// write-and-rename.
#[test]
fn no_runtime_the_library_does_not_need() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let deps = manifest.split("[dependencies]").nth(1).unwrap().split("\n[").next().unwrap();
    let tokio = deps.lines().find(|l| l.starts_with("tokio")).expect("tokio");
    assert!(tokio.contains("features = [\"time\"]") && !tokio.contains("rt-multi-thread"), "{tokio}");
    let redis = deps.lines().find(|l| l.starts_with("redis")).expect("redis");
    assert!(redis.contains("tokio-comp"), "redis's tokio-comp turns on tokio/time: {redis}");
    assert!(manifest.contains("blocking-cluster = [\"tokio/rt-multi-thread\"]"), "{manifest}");
    let local = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/local.rs")).unwrap();
    assert!(local.contains("tempfile::NamedTempFile"), "tempfile is used by the library");
}
