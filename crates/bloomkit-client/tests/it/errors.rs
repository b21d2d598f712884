//! Each failure is a typed error whose message says what to do.

use std::time::Duration;

use bloomkit_client::{Error, Filter, Layout, Options, RedisFilter};
use bloomkit_testkit::{Server, TestServer};

fn client(server: &TestServer) -> redis::Client {
    redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap()
}

#[test]
fn module_backend_without_module() {
    let server = TestServer::start(Server::Redis, &[], &[]);
    let mut f = RedisFilter::new(
        client(&server).get_connection().unwrap(),
        Layout::module("k", Options::new(100, 0.01)).unwrap(),
    );
    let e = f.add(b"x").unwrap_err();
    assert!(matches!(e, Error::ModuleMissing(_)), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("loadmodule") && text.contains("bitmap backend"), "{text}");
    assert!(matches!(f.contains(b"x"), Err(Error::ModuleMissing(_))));
    assert_eq!(server.conn().cmd("DBSIZE").as_int(), 0);
}

#[test]
fn server_gone_is_a_connection_error() {
    let mut server = TestServer::start(Server::Redis, &[], &[]);
    let mut f = RedisFilter::new(
        client(&server).get_connection().unwrap(),
        Layout::bitmap("k", Options::new(100, 0.01)).unwrap(),
    );
    assert!(f.add(b"x").unwrap());
    server.kill();
    let e = f.add(b"y").unwrap_err();
    assert!(matches!(e, Error::Connection(_)), "{e:?}");
    assert!(e.to_string().contains("check its address and that it is running"), "{e}");
}

#[test]
fn no_answer_in_time_is_a_timeout() {
    let server = TestServer::start(Server::Redis, &[], &[]);
    let conn = client(&server).get_connection().unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut f = RedisFilter::new(conn, Layout::bitmap("k", Options::new(100, 0.01)).unwrap());
    // CLIENT PAUSE holds every other client's commands until it ends.
    let mut admin = server.conn();
    admin.cmd("CLIENT PAUSE 5000 ALL");
    let e = f.add(b"x").unwrap_err();
    admin.cmd("CLIENT UNPAUSE");
    assert!(matches!(e, Error::Timeout(_)), "{e:?}");
    assert!(e.to_string().contains("did not answer in time"), "{e}");
}

#[test]
fn full_non_scaling_filter_is_the_servers_error() {
    let server = TestServer::with_bloomkit(Server::Redis);
    server.conn().cmd("BF.RESERVE full 0.01 10 NONSCALING");
    let mut f = RedisFilter::new(
        client(&server).get_connection().unwrap(),
        Layout::module("full", Options::new(10, 0.01)).unwrap(),
    );
    let items: Vec<Vec<u8>> = (0..50).map(|i| format!("i{i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = items.iter().map(|i| i.as_slice()).collect();
    let e = f.add_many(&refs).unwrap_err();
    assert!(matches!(&e, Error::Server(t) if t.message().contains("non scaling filter is full")), "{e:?}");
}
