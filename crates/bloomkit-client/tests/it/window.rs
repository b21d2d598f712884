//! The window option: the module's APBF.* filters and the local one answer
//! "seen within the window" through the same Filter API.

use std::time::Duration;

use bloomkit_client::{Error, Filter, Layout, LocalFilter, Options, Over, RedisFilter, Window};
use bloomkit_testkit::{Server, TestServer};

use crate::common;
use common::{connect, items, slices};

/// A count window of 1000: the last 1000 items are remembered, much older
/// ones are forgotten, repeats inside are not new.
fn count_window(f: &mut dyn Filter) {
    let stream = items("click", 6000);
    let new = f.add_slice(&slices(&stream[..3000])).unwrap();
    // 1% of 3000 plus four standard deviations.
    assert!(new.iter().filter(|&&n| !n).count() <= 52, "new items taken for repeats");
    assert!(
        f.contains_slice(&slices(&stream[2000..3000])).unwrap().iter().all(|&p| p),
        "forgot inside the window"
    );
    assert!(
        f.add_slice(&slices(&stream[2500..2600])).unwrap().iter().all(|&n| !n),
        "a repeat inside counted as new"
    );
    f.add_slice(&slices(&stream[3000..])).unwrap();
    let old = f.contains_slice(&slices(&stream[..1000])).unwrap().iter().filter(|&&p| p).count();
    assert!(old <= 30, "{old} of 1000 old items still found");
    assert_eq!(f.count().unwrap(), None, "a window has no total count");
    assert!(f.info().unwrap().capacity >= 1000);
}

#[test]
fn module_count_window_created_on_first_write() {
    let server = TestServer::with_bloomkit(Server::Redis);
    let conn = connect(&server);
    let options = Options { window: Some(Window::Count), batch_size: 250, ..Options::new(1000, 0.01) };
    let mut f = RedisFilter::new(conn, Layout::module("w", options).unwrap());
    count_window(&mut f);
    assert_eq!(server.conn().cmd("TYPE w").as_bytes(), bloomkit_core::apbf::TYPE_NAME.as_bytes());
    assert!(matches!(f.reserve(), Err(Error::AlreadyExists(_))));
}

#[test]
fn local_count_window_and_its_file() {
    let mut f =
        LocalFilter::new(Options { window: Some(Window::Count), ..Options::new(1000, 0.01) }).unwrap();
    count_window(&mut f);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.bkf");
    f.save(&path).unwrap();
    let mut again = LocalFilter::open(&path).unwrap();
    assert_eq!(again.window().unwrap().encode(), f.window().unwrap().encode());
    assert!(again.contains(b"click-5999").unwrap());
    again.clear().unwrap();
    assert!(!again.contains(b"click-5999").unwrap());
}

#[test]
fn module_time_window_follows_the_servers_clock() {
    let server = TestServer::with_test_hooks(Server::Valkey);
    let conn = connect(&server);
    let options =
        Options { window: Some(Window::Time(Duration::from_secs(600))), ..Options::new(10_000, 0.001) };
    let mut f = RedisFilter::new(conn, Layout::module("clicks", options).unwrap());
    assert!(f.add(b"c1").unwrap());
    let mut raw = server.conn();
    raw.ok("CONFIG SET bf.apbf-clock-offset-ms 599000");
    assert!(!f.add(b"c1").unwrap(), "a repeat 9:59 later");
    raw.ok("CONFIG SET bf.apbf-clock-offset-ms 2000000");
    assert!(f.add(b"c1").unwrap(), "new again long after its window");
}

#[test]
fn windows_need_the_module_or_local_backend() {
    let options = Options { window: Some(Window::Count), ..Options::new(1000, 0.01) };
    assert!(matches!(Layout::bitmap("b", options.clone()), Err(Error::InvalidOptions(_))));
    assert!(matches!(Layout::sharded("s", 2, Over::Module, options), Err(Error::InvalidOptions(_))));
}
