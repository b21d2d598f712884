//! `Layout::moving`: a per-user flow moved from an old filter (a `BF.*`
//! key, a bitmap, a cuckoo filter) to an `XF.*` key under a new prefix,
//! reading both in one round trip while the old key lives out its TTL.

use std::time::Duration;

use bloomkit_client::{AsyncFilter, AsyncRedisFilter, Error, Filter, Layout, Options, RedisFilter, Window};
use bloomkit_testkit::{Module, Server, TestServer};

use crate::common::{connect, items, slices};

/// The new key's options: a 30-day lifetime set again by every write.
fn new_options() -> Options {
    Options { ttl: Some(Duration::from_secs(30 * 86_400)), refresh_ttl: true, ..Options::new(100, 0.001) }
}

/// Moving from `old` (already holding `old-0..499`): what a caller sees
/// before, during and after the old key is gone.
fn moves_from(s: &TestServer, old: Layout) {
    let new_key = format!("new:{}", old.name());
    let mut before = RedisFilter::new(connect(s), old.clone());
    before.add_slice(&slices(&items("old", 500))).unwrap();
    let layout =
        Layout::moving(old.clone(), Layout::expandable(new_key.clone(), new_options()).unwrap()).unwrap();
    assert_eq!(layout.keys()[0], new_key, "the new key first");
    let mut f = RedisFilter::new(connect(s), layout);

    // Before any write the new key does not exist: the old one answers.
    assert!(f.contains_slice(&slices(&items("old", 500))).unwrap().iter().all(|&p| p), "{old:?}");
    assert_eq!(s.conn().call(&["EXISTS", &new_key]).as_int(), 0, "a read creates nothing");

    // A request of 50 candidates, half seen in the old key: only the fresh
    // ones are new, and all of them now live in the new key.
    let mut batch = items("old", 25);
    batch.extend(items("fresh", 25));
    let new = f.add_slice(&slices(&batch)).unwrap();
    assert_eq!(new, [vec![false; 25], vec![true; 25]].concat(), "{old:?}");
    let in_new = s.conn().call(&[&["XF.MEXISTS", new_key.as_str()][..], &to_str(&batch)].concat());
    assert!(in_new.as_array().iter().all(|r| r.as_int() == 1), "{in_new:?}");
    let ttl = s.conn().call(&["PTTL", &new_key]).as_int();
    assert!(ttl > 29 * 86_400_000, "the new key's lifetime: {ttl} ms");
    assert!(!f.add(b"fresh-3").unwrap(), "seen in the new key");

    // Info and counts are the new key's.
    let info = f.info().unwrap();
    assert_eq!((info.backend.as_str(), info.items), ("expandable", Some(50)));
    assert_eq!(f.count().unwrap(), Some(50));

    // The old key expires: what came back lives on, the rest is forgotten.
    s.conn().call(&[&["DEL"][..], &old.keys().iter().map(String::as_str).collect::<Vec<_>>()].concat());
    assert!(f.contains_slice(&slices(&items("old", 25))).unwrap().iter().all(|&p| p));
    let forgotten = f.contains_slice(&slices(&items("old", 500)[400..])).unwrap();
    assert!(forgotten.iter().filter(|&&p| p).count() < 5, "{forgotten:?}");
    f.clear().unwrap();
    assert_eq!(s.conn().call(&["EXISTS", &new_key]).as_int(), 0);
}

fn to_str(items: &[Vec<u8>]) -> Vec<&str> {
    items.iter().map(|i| std::str::from_utf8(i).unwrap()).collect()
}

#[test]
fn a_flow_moves_from_bloom_bitmap_and_cuckoo_keys_to_xf() {
    let s = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let old = Options::new(100_000, 0.01);
    moves_from(&s, Layout::module("seen:u1", old.clone()).unwrap());
    moves_from(&s, Layout::bitmap("seen:u2", old.clone()).unwrap());
    moves_from(&s, Layout::cuckoo("seen:u3", old.clone()).unwrap());
    moves_from(&s, Layout::expandable("seen:u4", old).unwrap());
}

#[test]
fn removes_and_counts_reach_the_old_key_where_it_has_them() {
    let s = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let to = || Layout::expandable("new:u", new_options()).unwrap();
    for (old, removes) in [
        (Layout::cuckoo("old:c", Options::new(1000, 0.01)).unwrap(), true),
        (Layout::module("old:b", Options::new(1000, 0.01)).unwrap(), false),
    ] {
        RedisFilter::new(connect(&s), old.clone()).add(b"x").unwrap();
        let mut f = RedisFilter::new(connect(&s), Layout::moving(old.clone(), to()).unwrap());
        assert!(f.contains(b"x").unwrap());
        s.conn().call(&["XF.ADD", "new:u", "x"]);
        // One copy in each key where both count; the new key's alone for BF.
        assert_eq!(f.count_of(b"x").unwrap(), if removes { 2 } else { 1 }, "{old:?}");
        assert!(f.remove(b"x").unwrap());
        // A Bloom filter cannot forget: the item reads as present until
        // its key expires. A cuckoo filter lost its copy too.
        assert_eq!(f.contains(b"x").unwrap(), !removes, "{old:?}");
        f.clear().unwrap();
    }
}

#[test]
fn moving_filters_are_checked_and_answer_alike_async() {
    let a = || Layout::module("a", Options::new(100, 0.01)).unwrap();
    let b = || Layout::expandable("b", Options::new(100, 0.01)).unwrap();
    let twice = Layout::moving(a(), Layout::module("a", Options::new(100, 0.01)).unwrap());
    assert!(matches!(&twice, Err(Error::InvalidOptions(m)) if m.contains("\"a\"")), "{twice:?}");
    let nested = Layout::moving(
        Layout::moving(a(), b()).unwrap(),
        Layout::expandable("c", Options::new(100, 0.01)).unwrap(),
    );
    assert!(matches!(nested, Err(Error::InvalidOptions(_))));

    let s = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    RedisFilter::new(connect(&s), a()).add(b"old").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", s.port)).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        let mut f = AsyncRedisFilter::new(conn, Layout::moving(a(), b()).unwrap());
        assert_eq!(f.add_many(["old", "new"]).await.unwrap(), [false, true]);
        assert_eq!(f.contains_many(["old", "new", "none"]).await.unwrap(), [true, true, false]);
    });
}

/// `expire` gives the new key its lifetime and leaves the old one's; a
/// sliding window as the new filter is created by the first add (the add
/// that finds it missing creates it and adds again).
#[test]
fn expire_leaves_the_old_key_and_a_new_window_is_created() {
    let s = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let old = Layout::module("old:w", Options::new(1000, 0.01)).unwrap();
    RedisFilter::new(connect(&s), old.clone()).add(b"x").unwrap();
    let window = Options { window: Some(Window::Count), ..Options::new(1000, 0.01) };
    let mut f =
        RedisFilter::new(connect(&s), Layout::moving(old, Layout::module("new:w", window).unwrap()).unwrap());
    assert_eq!(f.add_many(["x", "y"]).unwrap(), [false, true]);
    assert_eq!(
        s.conn().call(&["TYPE", "new:w"]).as_bytes(),
        bloomkit_core::apbf::TYPE_NAME.as_bytes(),
        "the window was created"
    );
    assert!(f.contains(b"x").unwrap() && f.contains(b"y").unwrap());
    f.expire(Duration::from_secs(3600)).unwrap();
    assert!(s.conn().call(&["PTTL", "new:w"]).as_int() > 3_000_000);
    assert_eq!(s.conn().call(&["PTTL", "old:w"]).as_int(), -1, "the old key keeps its lifetime");
}
