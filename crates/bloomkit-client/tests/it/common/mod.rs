//! Helpers shared by the client's test files.
#![allow(dead_code)] // each test file uses its own subset

use bloomkit_testkit::TestServer;

pub fn connect(server: &TestServer) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap().get_connection().unwrap()
}

/// `n` distinct items `prefix-0`, `prefix-1`, ...
pub fn items(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{prefix}-{i}").into_bytes()).collect()
}

pub fn slices(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|i| i.as_slice()).collect()
}
