//! The differential suites' oracle: RedisBloom 2.8.2 and bloomkit side by
//! side on the same redis-server binary, with byte-identical replies required.

use crate::{Conn, Module, Reply, Server, TestServer};

/// RedisBloom and bloomkit, each in its own server of the same binary.
pub struct Pair {
    pub redisbloom: TestServer,
    pub bloomkit: TestServer,
}

impl Pair {
    pub fn start() -> Pair {
        Pair {
            redisbloom: TestServer::start(Server::Redis, &[Module::RedisBloom], &[]),
            bloomkit: TestServer::start(Server::Redis, &[Module::bloomkit()], &[]),
        }
    }

    /// New connections: (RedisBloom, bloomkit).
    pub fn conns(&self) -> (Conn, Conn) {
        (self.redisbloom.conn(), self.bloomkit.conn())
    }

    /// Runs `f(from, to, label)` from RedisBloom to bloomkit, then back.
    pub fn in_both_directions(&self, mut f: impl FnMut(&mut Conn, &mut Conn, &str)) {
        for reverse in [false, true] {
            let (mut rb, mut bk) = self.conns();
            if reverse {
                f(&mut bk, &mut rb, "bloomkit -> RedisBloom");
            } else {
                f(&mut rb, &mut bk, "RedisBloom -> bloomkit");
            }
        }
    }
}

/// A command as text, for messages.
pub fn show(cmd: &[Vec<u8>]) -> String {
    cmd.iter().map(|a| format!("{:?}", String::from_utf8_lossy(a))).collect::<Vec<_>>().join(" ")
}

/// Sends `cmd` to both and insists on byte-identical replies; returns bloomkit's.
pub fn same(rb: &mut Conn, bk: &mut Conn, cmd: &[Vec<u8>], context: &str) -> Reply {
    let (raw_rb, reply_rb) = rb
        .call_raw(cmd)
        .unwrap_or_else(|e| panic!("{context}: RedisBloom did not answer {}: {e}", show(cmd)));
    let (raw_bk, reply_bk) =
        bk.call_raw(cmd).unwrap_or_else(|e| panic!("{context}: bloomkit did not answer {}: {e}", show(cmd)));
    assert!(
        raw_rb == raw_bk,
        "{context}: replies differ for {}\n RedisBloom: {reply_rb:?}\n bloomkit:   {reply_bk:?}",
        show(cmd)
    );
    reply_bk
}
