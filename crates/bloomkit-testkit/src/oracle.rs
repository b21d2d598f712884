//! The differential suites' oracle: RedisBloom 2.8.2 and bloomkit side by
//! side on the same redis-server binary, with byte-identical replies required.

use crate::{Conn, Module, Reply, Rng, Server, TestServer};

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

    /// Runs `f(from, to, label)` from RedisBloom to bloomkit, then back;
    /// both servers are emptied after each.
    pub fn in_both_directions(&self, mut f: impl FnMut(&mut Conn, &mut Conn, &str)) {
        for reverse in [false, true] {
            let (mut rb, mut bk) = self.conns();
            if reverse {
                f(&mut bk, &mut rb, "bloomkit -> RedisBloom");
            } else {
                f(&mut rb, &mut bk, "RedisBloom -> bloomkit");
            }
            rb.ok("FLUSHALL");
            bk.ok("FLUSHALL");
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

/// A differential stream's opening: RedisBloom and bloomkit, in RESP3 when
/// asked, with `setup` (commands of words split on spaces) sent to both and
/// their replies compared. Returns the pair, which must outlive the
/// connections, and the connections (RedisBloom's, bloomkit's).
pub fn open_stream(resp3: bool, setup: &[&str]) -> (Pair, Conn, Conn) {
    let pair = Pair::start();
    let (mut rb, mut bk) = pair.conns();
    if resp3 {
        rb.ok("HELLO 3");
        bk.ok("HELLO 3");
    }
    for line in setup {
        let cmd: Vec<Vec<u8>> = line.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        same(&mut rb, &mut bk, &cmd, "setup");
    }
    (pair, rb, bk)
}

/// A stream took both paths: more than one command in twenty was refused,
/// and fewer than `most` (a fraction: numerator, denominator) were.
pub fn assert_both_paths(errors: usize, steps: usize, most: (usize, usize)) {
    assert!(errors > steps / 20, "the stream exercised error paths ({errors} errors)");
    assert!(errors < steps * most.0 / most.1, "the stream exercised success paths ({errors} errors)");
}

/// A stream's seeds: `default`, or with `BLOOMKIT_SEEDS=n` n seeds from
/// `default[0]` on, 1000 apart.
pub fn seeds(default: &[u64]) -> Vec<u64> {
    match std::env::var("BLOOMKIT_SEEDS").ok().and_then(|n| n.parse::<u64>().ok()) {
        Some(n) => (0..n).map(|i| default[0] + 1000 * i).collect(),
        None => default.to_vec(),
    }
}

/// A random item: empty one time in `one_in`, `binary` one time in
/// `one_in`, else one of `item0` to `item{pool - 1}` (a small pool, so
/// that items repeat).
pub fn item(rng: &mut Rng, one_in: usize, binary: &[u8], pool: usize) -> Vec<u8> {
    match rng.below(one_in) {
        0 => Vec::new(),
        1 => binary.to_vec(),
        _ => format!("item{}", rng.below(pool)).into_bytes(),
    }
}

/// Moves `src` from one server to the other by DUMP and RESTORE (as
/// `dst`), which must be accepted; returns the payload.
pub fn dump_and_restore(from: &mut Conn, to: &mut Conn, src: &str, dst: &str, context: &str) -> Vec<u8> {
    let payload = from.call(&["DUMP", src]).as_bytes().to_vec();
    let restored = to.call(&[b"RESTORE".as_slice(), dst.as_bytes(), b"0", &payload]);
    assert_eq!(restored, Reply::Simple("OK".into()), "{context}: RESTORE of {src}'s DUMP");
    payload
}

/// An RDB file written by RedisBloom, loaded by bloomkit: `fill` writes on
/// a RedisBloom server, which then saves; a bloomkit server starts from its
/// `dump.rdb`. Returns (RedisBloom's, bloomkit's, what `fill` returned).
pub fn redisbloom_rdb_in_bloomkit<T>(fill: impl FnOnce(&mut Conn) -> T) -> (TestServer, TestServer, T) {
    let rb = TestServer::start(Server::Redis, &[Module::RedisBloom], &[]);
    let filled = fill(&mut rb.conn());
    rb.conn().ok("SAVE");
    let mut bk = TestServer::with_bloomkit(Server::Redis);
    std::fs::copy(rb.dir().join("dump.rdb"), bk.dir().join("dump.rdb")).expect("copy dump.rdb");
    bk.restart(&[]);
    (rb, bk, filled)
}

/// The random-stream tests of a family whose `run(seed, steps, resp3)`
/// checks a whole stream: `random_streams_resp2` and `random_streams_resp3`,
/// each over its default seeds ([`seeds`]).
#[macro_export]
macro_rules! random_streams {
    ($run:ident, $steps:expr, resp2: [$($resp2:expr),+], resp3: [$($resp3:expr),+]) => {
        #[test]
        fn random_streams_resp2() {
            for seed in $crate::oracle::seeds(&[$($resp2),+]) {
                $run(seed, $steps, false);
            }
        }

        #[test]
        fn random_streams_resp3() {
            for seed in $crate::oracle::seeds(&[$($resp3),+]) {
                $run(seed, $steps, true);
            }
        }
    };
}

/// Replays `chunks` (from a SCANDUMP) into `to` with `command`
/// (`BF.LOADCHUNK`, `CF.LOADCHUNK`) on both servers, replies compared.
pub fn load_chunks_on_both(
    rb: &mut Conn,
    bk: &mut Conn,
    command: &str,
    to: &str,
    chunks: Vec<(i64, Vec<u8>)>,
    context: &str,
) {
    for (iter, data) in chunks {
        let cmd =
            vec![command.as_bytes().to_vec(), to.as_bytes().to_vec(), iter.to_string().into_bytes(), data];
        same(rb, bk, &cmd, &format!("{context}: {command}"));
    }
}
