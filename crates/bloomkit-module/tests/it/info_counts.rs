//! `INFO bf` counts what the keyspace holds at every moment, for every
//! family: a value leaves its counters when its key leaves (DEL, UNLINK,
//! expiry, eviction, an overwrite, RESTORE REPLACE, FLUSHALL sync or async,
//! FLUSHDB sync, a replica emptying itself for a full sync), also under
//! every lazy-free setting and for values large enough that their memory
//! is returned on a background thread, and stays counted across MOVE,
//! RENAME, SWAPDB, COPY and DEBUG RELOAD (MOVE and RENAME unlink the old
//! name without freeing the value). Objects and bytes both: every case ends
//! with nothing counted.

use std::time::Duration;

use bloomkit_testkit::{wait_until, Conn, Module, Reply, Server, TestServer};

/// Each family's objects fields, and a command that makes a value of it.
/// Under `bf.compat valkey-bloom`, BF.ADD makes valkey-bloom's objects,
/// counted in BF's section and in valkey-bloom's own.
pub fn families(valkey_bloom: bool) -> Vec<(&'static [&'static str], &'static str)> {
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

/// Every bytes field, one per section: BF's `stats` (both BF types) and
/// valkey-bloom's own, cuckoo, cms, topk, tdigest, apbf, xf.
const BYTES_FIELDS: &[&str] = &[
    "bf_bytes",
    "bf_bloom_total_memory_bytes",
    "bf_cf_bytes",
    "bf_cms_bytes",
    "bf_topk_bytes",
    "bf_tdigest_bytes",
    "bf_apbf_bytes",
    "bf_xf_bytes",
];

/// A server with bloomkit, and which `bf.compat` it runs.
struct Fixture {
    server: TestServer,
    c: Conn,
    valkey_bloom: bool,
}

impl Fixture {
    fn start(server: Server, valkey_bloom: bool) -> Fixture {
        Fixture::start_with(server, valkey_bloom, &[])
    }

    fn start_with(server: Server, valkey_bloom: bool, extra: &[&str]) -> Fixture {
        let args = if valkey_bloom { vec!["COMPAT".to_string(), "valkey-bloom".to_string()] } else { vec![] };
        let s = TestServer::start(server, &[Module::Bloomkit(args)], extra);
        let c = s.conn();
        Fixture { server: s, c, valkey_bloom }
    }

    /// Every objects field of every family.
    fn counts(&mut self) -> Vec<u64> {
        counts(&mut self.c, self.valkey_bloom)
    }

    /// Every bytes field (see [`BYTES_FIELDS`]).
    fn bytes(&mut self) -> Vec<u64> {
        BYTES_FIELDS.iter().map(|f| self.c.info_field("bf", f).parse().unwrap()).collect()
    }

    /// Nothing counted, and no slip in the counting logged (a counter that
    /// would have gone below 0 is a panic in debug builds, caught and logged).
    fn assert_nothing_counted(&mut self, context: &str) {
        assert_eq!(self.counts(), self.each_is(0), "{context}: objects");
        assert_eq!(self.bytes(), vec![0; BYTES_FIELDS.len()], "{context}: bytes");
        let log = self.server.log();
        assert!(!log.contains("internal error"), "{context}: the server logged an internal error:\n{log}");
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

/// Every objects field of every family, on `c`'s server.
fn counts(c: &mut Conn, valkey_bloom: bool) -> Vec<u64> {
    let fields: Vec<&str> = families(valkey_bloom).iter().flat_map(|(f, _)| f.iter().copied()).collect();
    fields.iter().map(|f| c.info_field("bf", f).parse().unwrap()).collect()
}

/// The same values' bytes on another server or after a reload: the same,
/// but for what libc's malloc adds to a block now and then (it hands out a
/// block up to 31 bytes larger than asked rather than split off a sliver;
/// the counts follow what each block really is) and what a loaded value
/// holds differently (a state read whole keeps its header's room).
fn about_the_same(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(&x, &y)| x.abs_diff(y) <= 128 + y / 20)
}

/// Large values of four families (1 to 4 MB): the server frees them on its
/// main thread and bloomkit returns their memory on a thread of its own.
const LARGE: &[&str] = &[
    "BF.RESERVE {} 0.001 2000000",
    "CF.RESERVE {} 2000000",
    "CMS.INITBYDIM {} 100000 10",
    "APBF.RESERVE {} 0.01 1000000 COUNT",
];

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
    // The issue's case: right after an async FLUSHALL, every time, with
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

    // Background flushes one after the other, of one database and of all,
    // with values made in between: each value leaves once, from the right
    // counters (the server frees them in the order the flushes came).
    for round in 0..20 {
        f.c.ok("SELECT 1");
        for k in 0..20 {
            f.make(&format!("one{round}-{k}"));
        }
        f.c.ok("FLUSHDB ASYNC");
        f.c.ok("SELECT 0");
        f.make(&format!("all{round}"));
        f.c.ok("FLUSHALL ASYNC");
        assert_eq!(f.counts(), f.each_is(0), "{server:?}: right after FLUSHALL ASYNC, round {round}");
        f.make(&format!("kept{round}"));
        f.c.ok("SELECT 2");
        f.make(&format!("later{round}"));
        f.c.ok("FLUSHDB ASYNC");
        f.c.ok("SELECT 0");
        let want = f.each_is(1);
        wait_until("the later database's values to be freed", Duration::from_secs(10), || f.counts() == want);
        f.c.ok("FLUSHALL SYNC");
    }
    f.assert_nothing_counted(&format!("{server:?}: after the background flushes"));
}

/// [`lazy_frees_restores_and_evictions`]' eviction: values of every family,
/// then a limit below what they take; the counts are what the keyspace
/// still holds of each family right after.
fn evict_and_count(f: &mut Fixture, server: Server) {
    // Eviction: values of every family, then a limit below what they take;
    // the next command evicts until the server is under it.
    for k in 0..40 {
        f.make(&format!("e{k}"));
    }
    let used: u64 = f.c.info_field("memory", "used_memory").parse().unwrap();
    f.c.ok("CONFIG SET maxmemory-policy allkeys-random");
    f.c.ok(&format!("CONFIG SET maxmemory {}", used - 150_000));
    f.c.ok("PING");
    f.c.ok("CONFIG SET maxmemory 0");
    let evicted: u64 = f.c.info_field("stats", "evicted_keys").parse().unwrap();
    assert!(evicted > 0, "{server:?}: nothing was evicted");
    // What is left of each family, counted from the keyspace.
    let mut left = vec![0u64; families(f.valkey_bloom).len()];
    let keys = f.c.cmd("KEYS *");
    for key in keys.as_array() {
        let key = String::from_utf8(key.as_bytes().to_vec()).unwrap();
        let family: usize = key.rsplit(':').next().unwrap().parse().unwrap();
        left[family] += 1;
    }
    let want: Vec<u64> = families(f.valkey_bloom)
        .iter()
        .zip(&left)
        .flat_map(|((fields, _), n)| vec![*n; fields.len()])
        .collect();
    assert_eq!(f.counts(), want, "{server:?}: after eviction");
}

/// Every lazy-free setting on, large values among the small: deletes,
/// overwrites, RENAME over a key, RESTORE (and REPLACE), DEBUG RELOAD,
/// expiry and eviction each leave the counts exact, right after.
fn lazy_frees_restores_and_evictions(server: Server, valkey_bloom: bool) {
    let mut f = Fixture::start(server, valkey_bloom);
    for setting in ["user-del", "server-del", "expire", "eviction", "user-flush"] {
        f.c.ok(&format!("CONFIG SET lazyfree-lazy-{setting} yes"));
    }
    f.make("a");
    f.make("b");
    f.make("c");
    let large_fields = ["bf_filters", "bf_cf_filters", "bf_cms_sketches", "bf_apbf_filters"];
    let large_counts = |c: &mut Conn| -> Vec<u64> {
        large_fields.iter().map(|field| c.info_field("bf", field).parse().unwrap()).collect()
    };
    let before_large = large_counts(&mut f.c);
    for (i, make) in LARGE.iter().enumerate() {
        f.c.ok(&make.replace("{}", &format!("large:{i}")));
    }
    let with_large: Vec<u64> = before_large.iter().map(|n| n + 1).collect();
    assert_eq!(large_counts(&mut f.c), with_large, "{server:?}: large values made");
    f.c.ok("UNLINK large:0 large:1");
    f.c.ok("DEL large:2");
    f.c.ok("SET large:3 overwritten");
    assert_eq!(large_counts(&mut f.c), before_large, "{server:?}: right after the large values left");
    f.c.ok("DEL large:3");
    assert_eq!(f.counts(), f.each_is(3), "{server:?}: made");

    f.each("DEL {}", "a");
    assert_eq!(f.counts(), f.each_is(2), "{server:?}: after DEL");
    // RENAME over an existing key frees the key it replaces.
    for (b, c) in f.names("b").into_iter().zip(f.names("c")) {
        f.c.ok(&format!("RENAME {b} {c}"));
    }
    assert_eq!(f.counts(), f.each_is(1), "{server:?}: after RENAME over a key");
    // RESTORE makes a value; RESTORE REPLACE frees the one it replaces.
    for key in f.names("c") {
        let payload = f.c.call(&["DUMP", key.as_str()]).as_bytes().to_vec();
        assert_eq!(
            f.c.call(&[b"RESTORE".to_vec(), format!("{key}:r").into_bytes(), b"0".to_vec(), payload.clone()]),
            Reply::Simple("OK".into())
        );
        assert_eq!(
            f.c.call(&[
                b"RESTORE".to_vec(),
                key.clone().into_bytes(),
                b"0".to_vec(),
                payload,
                b"REPLACE".to_vec()
            ]),
            Reply::Simple("OK".into())
        );
    }
    assert_eq!(f.counts(), f.each_is(2), "{server:?}: after RESTORE and RESTORE REPLACE");
    let bytes = f.bytes();
    f.c.ok("DEBUG RELOAD");
    assert_eq!(f.counts(), f.each_is(2), "{server:?}: after DEBUG RELOAD");
    assert!(
        about_the_same(&f.bytes(), &bytes),
        "{server:?}: bytes after DEBUG RELOAD: {:?}, {bytes:?}",
        f.bytes()
    );
    f.each("PEXPIRE {}:r 1", "c");
    let keys = f.names("c");
    let c = &mut f.c;
    wait_until("the keys to expire", Duration::from_secs(10), || {
        keys.iter().all(|k| c.cmd(&format!("EXISTS {k}:r")) == Reply::Int(0))
    });
    assert_eq!(f.counts(), f.each_is(1), "{server:?}: after expiry");

    evict_and_count(&mut f, server);
    f.c.ok("FLUSHALL");
    f.assert_nothing_counted(&format!("{server:?}: at the end"));
}

/// A replica emptying itself for a full sync (in the background with
/// `replica-lazy-flush yes`, or loading into a temporary database with
/// `repl-diskless-load swapdb`) counts its old values out and the
/// primary's in.
fn replica_full_sync_empties_the_counts(server: Server, valkey_bloom: bool) {
    let mut primary = Fixture::start(server, valkey_bloom);
    primary.make("p");
    for (lazy, load) in [("no", "disabled"), ("yes", "disabled"), ("yes", "swapdb"), ("no", "swapdb")] {
        let mut replica = Fixture::start_with(
            server,
            valkey_bloom,
            &["--replica-lazy-flush", lazy, "--repl-diskless-load", load],
        );
        replica.make("own1");
        replica.make("own2");
        assert_eq!(replica.counts(), replica.each_is(2));
        let port = primary.server.port.to_string();
        replica.c.ok(&format!("REPLICAOF 127.0.0.1 {port}"));
        replica.c.wait_for_sync(Duration::from_secs(30));
        let want = replica.each_is(1);
        let context = format!("{server:?}: replica-lazy-flush {lazy}, repl-diskless-load {load}");
        wait_until(&context, Duration::from_secs(10), || replica.counts() == want);
        let (theirs, ours) = (primary.bytes(), replica.bytes());
        assert!(about_the_same(&ours, &theirs), "{context}: bytes {ours:?}, the primary's {theirs:?}");
        replica.c.ok("REPLICAOF NO ONE");
        replica.c.ok("FLUSHALL");
        replica.assert_nothing_counted(&context);
    }
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

per_server!(
    moves_renames_copies_and_deletes,
    flushes,
    lazy_frees_restores_and_evictions,
    replica_full_sync_empties_the_counts
);
