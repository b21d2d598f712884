//! `INFO bf` counts what the keyspace holds at every moment, for every
//! family: a value leaves its counters when its key leaves (DEL, UNLINK,
//! expiry, an overwrite, FLUSHALL sync or async, FLUSHDB sync), not when a
//! background thread frees it later, and stays counted across MOVE, RENAME,
//! SWAPDB and COPY (MOVE and RENAME unlink the old name on some servers).

use std::time::Duration;

use bloomkit_testkit::{wait_until, Conn, Module, Reply, Server, TestServer};

/// Each family's objects fields, and a command that makes a value of it.
/// Under `bf.compat valkey-bloom`, BF.ADD makes valkey-bloom's objects,
/// counted in BF's section and in valkey-bloom's own.
fn families(valkey_bloom: bool) -> Vec<(&'static [&'static str], &'static str)> {
    vec![
        (if valkey_bloom { &["bf_filters", "bf_bloom_num_objects"] } else { &["bf_filters"] }, "BF.ADD {} x"),
        (&["bf_cf_filters"], "CF.ADD {} x"),
        (&["bf_cms_sketches"], "CMS.INITBYDIM {} 10 2"),
        (&["bf_topk_sketches"], "TOPK.RESERVE {} 3"),
        (&["bf_tdigest_digests"], "TDIGEST.CREATE {}"),
        (&["bf_apbf_filters"], "APBF.RESERVE {} 0.01 100 COUNT"),
        (&["bf_xf_filters"], "XF.ADD {} x"),
    ]
}

/// A server with bloomkit, and which `bf.compat` it runs.
struct Fixture {
    _server: TestServer,
    c: Conn,
    valkey_bloom: bool,
}

impl Fixture {
    fn start(server: Server, valkey_bloom: bool) -> Fixture {
        let args = if valkey_bloom { vec!["COMPAT".to_string(), "valkey-bloom".to_string()] } else { vec![] };
        let s = TestServer::start(server, &[Module::Bloomkit(args)], &[]);
        let c = s.conn();
        Fixture { _server: s, c, valkey_bloom }
    }

    /// Every objects field of every family.
    fn counts(&mut self) -> Vec<u64> {
        let fields: Vec<&str> =
            families(self.valkey_bloom).iter().flat_map(|(f, _)| f.iter().copied()).collect();
        fields.iter().map(|f| self.c.info_field("bf", f).parse().unwrap()).collect()
    }

    /// `k` values of every family.
    fn each_is(&self, k: u64) -> Vec<u64> {
        vec![k; families(self.valkey_bloom).iter().map(|(f, _)| f.len()).sum()]
    }

    fn make(&mut self, name: &str) {
        for (i, (_, create)) in families(self.valkey_bloom).iter().enumerate() {
            self.c.ok(&create.replace("{}", &format!("{name}:{i}")));
        }
    }

    fn names(&self, name: &str) -> Vec<String> {
        (0..families(self.valkey_bloom).len()).map(|i| format!("{name}:{i}")).collect()
    }

    fn each(&mut self, line: &str, name: &str) {
        for key in self.names(name) {
            let line = line.replace("{}", &key);
            assert!(!self.c.cmd(&line).is_error(), "{line}");
        }
    }
}

fn moves_renames_copies_and_deletes(server: Server, valkey_bloom: bool) {
    let mut f = Fixture::start(server, valkey_bloom);
    f.make("a");
    f.make("b");
    assert_eq!(f.counts(), f.each_is(2), "{server:?}: made");
    f.each("MOVE {} 1", "a");
    assert_eq!(f.counts(), f.each_is(2), "{server:?}: after MOVE");
    f.c.ok("SELECT 1");
    f.each("RENAME {} {}:renamed", "a");
    assert_eq!(f.counts(), f.each_is(2), "{server:?}: after RENAME");
    f.c.ok("SELECT 0");
    f.each("COPY {} {}:copy", "b");
    assert_eq!(f.counts(), f.each_is(3), "{server:?}: after COPY");
    f.each("SET {}:copy overwritten", "b");
    assert_eq!(f.counts(), f.each_is(2), "{server:?}: after SET over the copies");
    f.each("UNLINK {}", "b");
    assert_eq!(f.counts(), f.each_is(1), "{server:?}: right after UNLINK");
    f.c.ok("SWAPDB 0 1");
    assert_eq!(f.counts(), f.each_is(1), "{server:?}: after SWAPDB");
    // db 0 now holds the renamed keys: they expire.
    f.each("PEXPIRE {}:renamed 1", "a");
    // EXISTS deletes an expired key it meets (DBSIZE may still count one
    // the server has not reclaimed yet).
    let keys = f.names("a");
    let c = &mut f.c;
    wait_until("the keys to expire", Duration::from_secs(10), || {
        keys.iter().all(|k| c.cmd(&format!("EXISTS {k}:renamed")) == Reply::Int(0))
    });
    assert_eq!(f.counts(), f.each_is(0), "{server:?}: after expiry");
}

fn flushes(server: Server, valkey_bloom: bool) {
    let mut f = Fixture::start(server, valkey_bloom);
    f.make("kept");
    f.c.ok("SELECT 1");
    f.make("flushed");
    // One database flushed in the background leaves the counters as its
    // values are freed (finding them at once would walk the database).
    f.c.ok("FLUSHDB ASYNC");
    let want = f.each_is(1);
    wait_until("the flushed database's values to be freed", Duration::from_secs(10), || f.counts() == want);
    f.make("flushed");
    f.c.ok("FLUSHDB SYNC");
    assert_eq!(f.counts(), f.each_is(1), "{server:?}: after FLUSHDB SYNC");
    // The case: right after an async FLUSHALL, every time, with
    // values large enough that the server frees them on its background thread.
    for round in 0..300 {
        for k in 0..10 {
            f.c.ok(&format!("BF.RESERVE big:{k} 0.001 200000"));
        }
        if round % 30 == 0 {
            f.make(&format!("r{round}"));
        }
        f.c.ok("FLUSHALL ASYNC");
        assert_eq!(f.counts(), f.each_is(0), "{server:?}: right after FLUSHALL ASYNC, round {round}");
    }
    f.make("again");
    f.c.ok("FLUSHALL SYNC");
    assert_eq!(f.counts(), f.each_is(0), "{server:?}: after FLUSHALL SYNC");
    assert_eq!(f.c.info_field("bf", "bf_bytes"), "0", "{server:?}: no bytes left counted");
}

/// One test per server and level, so that each result stands alone.
macro_rules! per_server {
    ($($name:ident),*) => {$(
        mod $name {
            use super::*;
            #[test]
            fn redis7() { super::$name(Server::Redis, false) }
            #[test]
            fn redis8() { super::$name(Server::Redis8, false) }
            #[test]
            fn valkey8() { super::$name(Server::Valkey8, false) }
            #[test]
            fn valkey9() { super::$name(Server::Valkey, false) }
            #[test]
            fn valkey9_valkey_bloom() { super::$name(Server::Valkey, true) }
        }
    )*};
}

per_server!(moves_renames_copies_and_deletes, flushes);
