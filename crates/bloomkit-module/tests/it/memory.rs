//! `MEMORY USAGE` and `INFO bf`'s bytes say what bloomkit's keys really
//! take, for every type: the growth of `used_memory` per key over thousands
//! of keys (the server's own count of every block its allocator handed out,
//! at the allocator's sizes) is within 5% of `MEMORY USAGE`, and `INFO bf`
//! counts each value's part of it exactly: its bytes follow the values as
//! they are made, grow (scale-outs, heap items, a t-digest's compressed
//! copy), shrink (compaction) and go, back to 0.
//!
//! The keys go into a database whose hash table was first grown past them
//! (`DEBUG POPULATE` until the table has just grown with room to spare), so
//! that no resize lands inside a measurement; the table's size is read
//! before and after (`DEBUG HTSTATS`) and a resize fails the test rather
//! than skewing it. XF's own representation is its rewrite's concern (its
//! `Size` leaves out part of what it holds): its figures are printed, and
//! only its generic part (the value's own block) is held to the others'
//! rules here, through the per-key constant below.

use std::time::Duration;

use bloomkit_testkit::{per_server, wait_until, Conn, Module, Reply, Server, TestServer};

/// Keys per measurement: enough that a few KB of unrelated allocations
/// (a client's buffers) move a per-key figure by less than a byte.
const KEYS: usize = 2500;

/// One type: its `INFO bf` bytes field and what makes a key of it (`{k}`
/// the key). Values of a few hundred bytes and more: the server's own
/// bookkeeping per key varies by a few bytes with its hash table's chains.
struct Case {
    name: &'static str,
    make: &'static [&'static str],
    /// Held to the 5% rule (XF's own part is not bloomkit's generic code's).
    exact: bool,
}

const CASES: &[Case] = &[
    Case { name: "BF", make: &["BF.ADD {k} x"], exact: true },
    Case { name: "BF capacity 1000", make: &["BF.RESERVE {k} 0.01 1000"], exact: true },
    Case { name: "CF", make: &["CF.ADD {k} x"], exact: true },
    Case { name: "CMS", make: &["CMS.INITBYDIM {k} 100 5"], exact: true },
    Case {
        name: "TOPK",
        make: &["TOPK.RESERVE {k} 10", "TOPK.ADD {k} a b c d e f g h i j k l"],
        exact: true,
    },
    Case { name: "TDIGEST", make: &["TDIGEST.CREATE {k}", "TDIGEST.ADD {k} 1 2 3 4 5"], exact: true },
    Case { name: "APBF", make: &["APBF.RESERVE {k} 0.01 100 COUNT"], exact: true },
    Case { name: "XF", make: &["XF.ADD {k} x"], exact: false },
];

/// Every section's bytes, once (BF's `stats` counts valkey-bloom's objects too).
const BYTES_FIELDS: &[&str] = &[
    "bf_bytes",
    "bf_cf_bytes",
    "bf_cms_bytes",
    "bf_topk_bytes",
    "bf_tdigest_bytes",
    "bf_apbf_bytes",
    "bf_xf_bytes",
];

fn counted_bytes(c: &mut Conn) -> i64 {
    BYTES_FIELDS.iter().map(|f| c.info_field("bf", f).parse::<i64>().unwrap()).sum()
}

fn used_memory(c: &mut Conn) -> i64 {
    c.info_field("memory", "used_memory").parse().unwrap()
}

/// The main hash table's size(s) in database 0 (two while it rehashes).
fn table_sizes(c: &mut Conn) -> Vec<u64> {
    let text = String::from_utf8(c.cmd("DEBUG HTSTATS 0").as_bytes().to_vec()).unwrap();
    let main = text.split("[Expires HT]").next().unwrap_or_default();
    main.lines().filter_map(|l| l.split_once("table size:")).map(|(_, n)| n.trim().parse().unwrap()).collect()
}

/// Polls (each lookup moves a rehash on) until the table is not rehashing.
fn rehashed(c: &mut Conn) -> u64 {
    wait_until("the hash table to finish rehashing", Duration::from_secs(30), || {
        c.cmd("EXISTS pad:0");
        table_sizes(c).len() <= 1
    });
    table_sizes(c).first().copied().unwrap_or(0)
}

fn freed(c: &mut Conn) {
    wait_until("the server to finish freeing", Duration::from_secs(30), || {
        c.info_field("memory", "lazyfree_pending_objects") == "0"
    });
}

/// Sends each command of each key, pipelined, and checks every reply, on a
/// connection of its own, gone when this returns.
fn run_for_keys(server: &TestServer, keys: &[String], commands: &[String]) {
    let mut pipe = server.conn();
    let lines: Vec<String> =
        keys.iter().flat_map(|key| commands.iter().map(move |line| line.replace("{k}", key))).collect();
    let commands: Vec<Vec<&str>> = lines.iter().map(|line| line.split(' ').collect()).collect();
    for (command, reply) in commands.iter().zip(pipe.pipeline(&commands)) {
        assert!(!reply.is_error(), "{command:?}: {reply:?}");
    }
}

/// `used_memory` and `INFO bf`'s bytes, read on a new connection once it is
/// the server's only one. A connection's buffers count in `used_memory` and
/// change with what it did (the server resizes them as it goes): every
/// other connection is gone, and this one is new each time, so that its
/// own part is the same in every reading.
fn reading(server: &TestServer) -> (i64, i64) {
    let mut c = server.conn();
    wait_until("the other connections to close", Duration::from_secs(10), || {
        c.info_field("clients", "connected_clients") == "1"
    });
    freed(&mut c);
    (used_memory(&mut c), counted_bytes(&mut c))
}

/// What one measurement saw, per key.
struct PerKey {
    /// `used_memory` growth.
    real: f64,
    memory_usage: f64,
    /// `INFO bf` bytes growth.
    counted: f64,
}

/// Makes `KEYS` keys with `make` (in an emptied database whose table has
/// room for them) and returns their cost per key.
fn measure(server: &TestServer, make: &[&str]) -> PerKey {
    let size = {
        let c = &mut server.conn();
        c.quiet();
        c.ok("FLUSHALL SYNC");
        freed(c);
        assert_eq!(counted_bytes(c), 0, "a flush leaves nothing counted");
        // String keys until the table has just grown with room for the
        // measured keys at three quarters full.
        let (mut size, mut padding) = (rehashed(c), 0usize);
        loop {
            padding += 1000;
            c.ok(&format!("DEBUG POPULATE {padding} pad"));
            let grown = *table_sizes(c).last().unwrap();
            if grown != size && grown as usize * 3 >= (padding + KEYS) * 4 {
                break;
            }
            size = grown;
        }
        rehashed(c)
    };
    let (used_before, counted_before) = reading(server);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("key:{i:08}")).collect();
    let make: Vec<String> = make.iter().map(|s| s.to_string()).collect();
    run_for_keys(server, &keys, &make);
    let (used_after, counted_after) = reading(server);
    let c = &mut server.conn();
    assert_eq!(table_sizes(c), vec![size], "the hash table resized during the measurement");
    let usage: Vec<Vec<&str>> = keys.iter().map(|key| vec!["MEMORY", "USAGE", key, "SAMPLES", "0"]).collect();
    let total: i64 = c.pipeline(&usage).iter().map(Reply::as_int).sum();
    PerKey {
        real: (used_after - used_before) as f64 / KEYS as f64,
        memory_usage: total as f64 / keys.len() as f64,
        counted: (counted_after - counted_before) as f64 / KEYS as f64,
    }
}

fn c_allocator(c: &mut Conn) -> String {
    c.info_field("memory", "mem_allocator")
}

/// Within 5% of `real`.
fn close(figure: f64, real: f64) -> bool {
    (figure / real - 1.0).abs() <= 0.05
}

per_server!(memory_usage_and_info_bytes_are_what_keys_take: all);
fn memory_usage_and_info_bytes_are_what_keys_take(server: Server) {
    let s = TestServer::start(server, &[Module::bloomkit()], &[]);
    let vb =
        TestServer::start(server, &[Module::Bloomkit(vec!["COMPAT".into(), "valkey-bloom".into()])], &[]);
    let mut measured: Vec<(&str, bool, PerKey)> = Vec::new();
    for case in CASES {
        measured.push((case.name, case.exact, measure(&s, case.make)));
    }
    measured.push(("valkey-bloom", true, measure(&vb, &["BF.ADD {k} x"])));
    for (name, exact, m) in &measured {
        eprintln!(
            "{server:?} {name}: real {:.1} bytes a key, MEMORY USAGE {:.1} ({:.3}), INFO bf bytes {:.1}",
            m.real,
            m.memory_usage,
            m.memory_usage / m.real,
            m.counted
        );
        if *exact {
            assert!(
                close(m.memory_usage, m.real),
                "{server:?} {name}: MEMORY USAGE {:.1} for a key that takes {:.1}",
                m.memory_usage,
                m.real
            );
        }
    }
    // INFO's bytes are the value's part of MEMORY USAGE: the rest (the
    // key's name, entry and object) is one constant, to the byte, for every
    // type, XF's generic part included.
    let rest: Vec<f64> = measured.iter().map(|(_, _, m)| m.memory_usage - m.counted).collect();
    let spread =
        rest.iter().cloned().fold(f64::MIN, f64::max) - rest.iter().cloned().fold(f64::MAX, f64::min);
    // libc's malloc may hand out a block up to 31 bytes larger than asked
    // (rather than split off a sliver): on Valkey the server's own blocks
    // for the sampled keys vary by a few bytes; jemalloc's never do.
    let libc = c_allocator(&mut s.conn()).starts_with("libc");
    assert!(
        spread < if libc { 24.0 } else { 1.0 },
        "{server:?}: MEMORY USAGE less INFO bytes differs between types: {rest:?}"
    );
    for conn in [&mut s.conn(), &mut vb.conn()] {
        conn.ok("FLUSHALL SYNC");
        freed(conn);
        assert_eq!(counted_bytes(conn), 0, "{server:?}: bytes left counted");
    }
    for t in [&s, &vb] {
        assert!(!t.log().contains("internal error"), "{server:?}: {}", t.log());
    }
}

/// Writes that change a value's blocks move `INFO bf`'s bytes by what they
/// moved `used_memory` (no key is made or removed meanwhile): scale-outs of
/// both Bloom types and of cuckoo filters, items entering a Top-K heap, a
/// t-digest's compressed copy made by a read and dropped by the next write,
/// cuckoo compaction freeing sub-filters.
fn growth_cases() -> Vec<(&'static str, Vec<String>, Vec<String>)> {
    let items = |n: usize| (0..n).map(|i| format!(" i{i}")).collect::<String>();
    let lines = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        ("BF scale-outs", lines(&["BF.RESERVE {k} 0.01 10"]), vec![format!("BF.MADD {{k}}{}", items(200))]),
        (
            "CF growth",
            lines(&["CF.RESERVE {k} 64 EXPANSION 2"]),
            vec![format!("CF.INSERT {{k}} ITEMS{}", items(400))],
        ),
        (
            "CF compaction",
            // Grown to four sub-filters, then emptied of all but the first
            // ten items: the deletes pass a tenth of the items and
            // compaction frees the emptied newest sub-filters.
            vec![
                "CF.RESERVE {k} 64 EXPANSION 2".to_string(),
                "CF.INSERT {k} ITEMS a b c d e f g h i j".to_string(),
                format!("CF.INSERT {{k}} ITEMS{}", items(300)),
            ],
            (0..300).map(|i| format!("CF.DEL {{k}} i{i}")).collect(),
        ),
        ("TOPK heap items", lines(&["TOPK.RESERVE {k} 20"]), vec![format!("TOPK.ADD {{k}}{}", items(100))]),
        (
            "TDIGEST read copy",
            lines(&["TDIGEST.CREATE {k}", "TDIGEST.ADD {k} 1 2 3 4 5 6 7 8 9 10"]),
            lines(&["TDIGEST.QUANTILE {k} 0.5"]),
        ),
        (
            "TDIGEST copy dropped",
            lines(&[
                "TDIGEST.CREATE {k}",
                "TDIGEST.ADD {k} 1 2 3 4 5 6 7 8 9 10",
                "TDIGEST.QUANTILE {k} 0.5",
            ]),
            lines(&["TDIGEST.ADD {k} 11"]),
        ),
    ]
}

per_server!(writes_move_info_bytes_as_they_move_memory: all);
fn writes_move_info_bytes_as_they_move_memory(server: Server) {
    let s = TestServer::start(server, &[Module::bloomkit()], &[]);
    s.conn().quiet();
    let keys: Vec<String> = (0..500).map(|i| format!("key:{i:08}")).collect();
    for (name, make, write) in growth_cases() {
        s.conn().ok("FLUSHALL SYNC");
        run_for_keys(&s, &keys, &make);
        let (used, counted) = reading(&s);
        run_for_keys(&s, &keys, &write);
        let (used_after, counted_after) = reading(&s);
        let (grew, counted_growth) = (used_after - used, counted_after - counted);
        eprintln!("{server:?} {name}: used_memory moved {grew}, INFO bf bytes {counted_growth}");
        assert!(grew.abs() > 500 * 16, "{server:?} {name}: the writes did not move memory ({grew})");
        assert!(
            (counted_growth - grew).abs() as f64 <= 0.05 * grew.abs() as f64,
            "{server:?} {name}: used_memory moved {grew}, INFO bf bytes {counted_growth}"
        );
    }
    let mut c = s.conn();
    c.ok("FLUSHALL SYNC");
    freed(&mut c);
    assert_eq!(counted_bytes(&mut c), 0, "{server:?}: bytes left counted");
    assert_eq!(c.cmd("PING"), Reply::Simple("PONG".into()));
    assert!(!s.log().contains("internal error"), "{server:?}: {}", s.log());
}
