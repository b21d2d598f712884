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

/// Passwords never show (issue 43): not in an error's message or Debug
/// form, not in a transfer connection's URL or Debug form; a missing or
/// refused password is `Error::Auth`, saying where to give one.
#[test]
fn passwords_never_show_and_auth_errors_say_where_they_go() {
    use bloomkit_client::transfer;
    let server = TestServer::start(Server::Redis, &[], &[]);
    let mut c = server.conn();
    c.ok("ACL SETUSER admin on >admin-topsecret ~* &* +@all");
    c.ok("CONFIG SET requirepass default-topsecret");
    let port = server.port;
    let shown = |e: &Error| format!("{e} {e:?} {:?}", std::error::Error::source(e));
    for url in [
        format!("redis://admin:wrong-topsecret@127.0.0.1:{port}"),
        "redis://admin:admin-topsecret@127.0.0.1:1".to_string(),
        format!("redis://admin:admin-topsecret@127.0.0.1:{port}x"),
        "unix:///nowhere.sock?pass=admin-topsecret".to_string(),
    ] {
        let e = transfer::Server::connect(&url).unwrap_err();
        assert!(!shown(&e).contains("topsecret"), "{url}: {}", shown(&e));
    }
    let e =
        transfer::Server::connect(&format!("redis://admin:wrong-topsecret@127.0.0.1:{port}")).unwrap_err();
    assert!(matches!(e, Error::Auth(_)) && e.to_string().contains("REDISCLI_AUTH"), "{e}");
    // No password: the connection opens, and the first command says NOAUTH.
    let mut s = transfer::Server::connect(&format!("redis://127.0.0.1:{port}")).unwrap();
    let e = transfer::kind(&mut s, "k").unwrap_err();
    assert!(matches!(e, Error::Auth(_)) && e.to_string().contains("requires a password"), "{e}");
    let s = transfer::Server::connect(&format!("redis://admin:admin-topsecret@127.0.0.1:{port}/0")).unwrap();
    assert_eq!(s.url, format!("redis://admin:***@127.0.0.1:{port}/0"));
    assert!(!format!("{s:?}").contains("topsecret"), "{s:?}");
    let info =
        bloomkit_client::connection_info(&format!("redis://admin:admin-topsecret@127.0.0.1:{port}")).unwrap();
    assert!(!format!("{info:?}").contains("topsecret"), "the redis crate hides it too: {info:?}");
}
