//! The cuckoo backend (`CF.*`) against bloomkit on Redis 7.0 and Valkey 9
//! and against RedisBloom 2.8.2: adds, lookups, removes and counts agree,
//! sync and async, and the other backends refuse to remove.

use bloomkit_client::{AsyncFilter, AsyncRedisFilter, Error, Filter, Layout, Options, RedisFilter};
use bloomkit_testkit::{Module, Server, TestServer};

use crate::common;
use common::{connect, items, slices};

fn exercise(server: &TestServer, what: &str) {
    let added = items("cf", 5000);
    let mut f = RedisFilter::new(connect(server), Layout::cuckoo("c", Options::new(10_000, 0.01)).unwrap());
    assert_eq!(f.count().unwrap(), Some(0), "{what}: a missing filter holds nothing");
    assert!(!f.remove(b"nothing").unwrap(), "{what}: removing from a missing filter");
    // An 8-bit fingerprint already in an item's buckets makes it "not new"
    // (and not stored): about 1% here, the filter's false-positive rate.
    let news = f.add_many(&slices(&added)).unwrap();
    let new: Vec<Vec<u8>> = added.iter().zip(&news).filter(|(_, &n)| n).map(|(i, _)| i.clone()).collect();
    assert!(new.len() >= 4900, "{what}: {} of 5000 new", new.len());
    assert!(f.add_many(&slices(&added)).unwrap().iter().all(|&new| !new), "{what}: none new twice");
    assert!(f.contains_many(&slices(&added)).unwrap().iter().all(|&b| b), "{what}: all present");
    assert_eq!(f.count().unwrap(), Some(new.len() as u64), "{what}");
    assert_eq!(f.count_of(&new[0]).unwrap(), 1, "{what}");

    // Removing the new items of the first half leaves the others: no two
    // new items share a fingerprint in a bucket.
    let (gone, kept) = new.split_at(new.len() / 2);
    assert!(f.remove_many(&slices(gone)).unwrap().iter().all(|&b| b), "{what}: each removed once");
    assert!(f.remove_many(&slices(gone)).unwrap().iter().filter(|&&b| b).count() < 100, "{what}: not twice");
    assert!(f.contains_many(&slices(kept)).unwrap().iter().all(|&b| b), "{what}: the others stay");
    let still = f.contains_many(&slices(gone)).unwrap().iter().filter(|&&b| b).count();
    assert!(still < gone.len() / 10, "{what}: {still} of {} removed items still answer present", gone.len());
    let info = f.info().unwrap();
    assert_eq!(info.backend, "cuckoo");
    assert_eq!(info.items, Some(kept.len() as u64), "{what}: {info:?}");
    assert!(info.capacity >= 10_000, "{what}: {info:?}");

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
        assert_eq!(a.count().await.unwrap(), Some(kept.len() as u64 - 10), "{what}");
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
