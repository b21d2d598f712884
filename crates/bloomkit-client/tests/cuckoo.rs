//! The cuckoo backend (`CF.*`) against bloomkit on Redis 7.0 and Valkey 9
//! and against RedisBloom 2.8.2: adds, lookups, removes and counts agree,
//! sync and async, and the other backends refuse to remove.

use bloomkit_client::{AsyncRedisFilter, Error, Filter, Layout, Options, RedisFilter};
use bloomkit_testkit::{Module, Server, TestServer};

mod common;
use common::{connect, items, slices};

fn exercise(server: &TestServer, what: &str) {
    let added = items("cf", 5000);
    let mut f = RedisFilter::new(connect(server), Layout::cuckoo("c", Options::new(10_000, 0.01)).unwrap());
    assert_eq!(f.count().unwrap(), Some(0), "{what}: a missing filter holds nothing");
    assert_eq!(f.remove(b"nothing").unwrap(), false, "{what}: removing from a missing filter");
    assert!(f.add_many(&slices(&added)).unwrap().iter().all(|&new| new), "{what}: all new");
    assert!(f.add_many(&slices(&added)).unwrap().iter().all(|&new| !new), "{what}: none new twice");
    assert!(f.contains_many(&slices(&added)).unwrap().iter().all(|&b| b), "{what}: all present");
    assert_eq!(f.count().unwrap(), Some(5000), "{what}");
    assert_eq!(f.count_of(&added[0]).unwrap(), 1, "{what}");

    let (gone, kept) = added.split_at(2500);
    assert!(f.remove_many(&slices(gone)).unwrap().iter().all(|&b| b), "{what}: each removed once");
    assert!(f.remove_many(&slices(gone)).unwrap().iter().filter(|&&b| b).count() < 100, "{what}: not twice");
    assert!(f.contains_many(&slices(kept)).unwrap().iter().all(|&b| b), "{what}: the others stay");
    let still = f.contains_many(&slices(gone)).unwrap().iter().filter(|&&b| b).count();
    assert!(still < 250, "{what}: {still} of 2500 removed items still answer present");
    let info = f.info().unwrap();
    assert_eq!(info.backend, "cuckoo");
    assert!(info.items.is_some_and(|n| n <= 2500) && info.capacity >= 10_000, "{what}: {info:?}");

    // The async filter runs the same plans.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        let mut a = AsyncRedisFilter::new(conn, Layout::cuckoo("c", Options::new(10_000, 0.01)).unwrap());
        assert!(
            a.remove_many(&slices(&kept[..10])).await.unwrap().iter().all(|&b| b),
            "{what}: async remove"
        );
        assert_eq!(a.count().await.unwrap(), Some(2490 - 2500 + info.items.unwrap()), "{what}");
    });
}

#[test]
fn cuckoo_filters_add_remove_and_count_on_every_server() {
    for server in [Server::Redis, Server::Valkey] {
        let s = TestServer::start(server, &[Module::bloomkit()], &[]);
        exercise(&s, &format!("bloomkit on {server:?}"));
    }
    let s = TestServer::start(Server::Redis, &[Module::RedisBloom], &[]);
    exercise(&s, "RedisBloom 2.8.2");
}

#[test]
fn only_cuckoo_filters_remove() {
    let s = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let mut bloom = RedisFilter::new(connect(&s), Layout::module("b", Options::new(100, 0.01)).unwrap());
    bloom.add(b"x").unwrap();
    assert!(matches!(bloom.remove(b"x"), Err(Error::Unsupported(_))));
    assert!(matches!(bloom.count_of(b"x"), Err(Error::Unsupported(_))));
    let mut local = bloomkit_client::LocalFilter::new(Options::new(100, 0.01)).unwrap();
    assert!(matches!(local.remove(b"x"), Err(Error::Unsupported(_))));
}
