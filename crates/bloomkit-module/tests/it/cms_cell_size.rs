//! Redis 8.12's Count-Min Sketch (issue 34, item 3; RedisBloom PRs #1063,
//! #1064, #1066) at `bf.compat redisbloom-8.12`, chosen here by the load
//! argument since the newest Redis on hand is 8.2: `CELL_SIZE 1|2|4|8`,
//! negative increments, overflow and underflow refused per item (changing
//! nothing), the `cell_size` field, MERGE's equal-cell-size rule, the total
//! capped at 2^63 - 1, and encoding version 1, byte for byte. The older
//! levels keep writing version 0 and load version 1.

use std::time::Duration;

use bloomkit_core::common::payload::seal;
use bloomkit_testkit::{aof_args, Conn, Module, Reply, Server, TestServer};

const V812: &str = "redisbloom-8.12";

/// Bytes per cell and the most a cell holds.
const SIZES: [(u64, i64); 4] = [(1, 255), (2, 65535), (4, 4294967295), (8, i64::MAX)];

fn module_at(level: &str) -> Module {
    Module::Bloomkit(vec!["COMPAT".into(), level.into()])
}

fn start_at(server: Server, level: &str, extra: &[&str]) -> TestServer {
    TestServer::start(server, &[module_at(level)], extra)
}

fn simple(s: &str) -> Reply {
    Reply::Simple(s.into())
}

fn err(s: &str) -> Reply {
    Reply::Error(s.into())
}

/// `CMS.INFO`'s RESP2 reply at 8.12: four pairs, `cell_size` last.
fn info_812(width: i64, depth: i64, count: i64, cell: u64) -> Reply {
    Reply::Array(vec![
        simple("width"),
        Reply::Int(width),
        simple("depth"),
        Reply::Int(depth),
        simple("count"),
        Reply::Int(count),
        simple("cell_size"),
        Reply::Int(cell as i64),
    ])
}

/// The older levels' three pairs.
fn info_classic(width: i64, depth: i64, count: i64) -> Reply {
    Reply::Array(vec![
        simple("width"),
        Reply::Int(width),
        simple("depth"),
        Reply::Int(depth),
        simple("count"),
        Reply::Int(count),
    ])
}

fn ints(v: &[i64]) -> Reply {
    Reply::Array(v.iter().map(|i| Reply::Int(*i)).collect())
}

fn value_digest(c: &mut Conn, key: &str) -> Reply {
    c.call(&["DEBUG", "DIGEST-VALUE", key])
}

/// The body of Redis 8.12's payload for `CMS.INITBYDIM k 4 2 CELL_SIZE n`
/// then `CMS.INCRBY k foo 3 bar 1` (rdbcompression off), written out from
/// the PR's format: RDB_TYPE_MODULE_2, the 64-bit id of `CMSk-TYPE` at
/// encoding version 1, UINT width, depth, total and cell size, the cells as
/// one string (foo's at 1 and 4 + 2, bar's at 3 and 4 + 1), EOF.
fn v1_body(n: u64) -> Vec<u8> {
    let n = n as usize;
    let mut b = vec![0x07, 0x81, 0x08, 0xc4, 0xa4, 0xf9, 0x36, 0x0f, 0x10, 0x01];
    b.extend_from_slice(&[0x02, 4, 0x02, 2, 0x02, 4, 0x02, n as u8, 0x05]);
    // 6-bit length below 64, else 14-bit (0b01 then 14 bits).
    if 8 * n < 64 {
        b.push(8 * n as u8);
    } else {
        b.extend_from_slice(&[0x40, 8 * n as u8]);
    }
    let mut cells = vec![0u8; 8 * n];
    for (at, v) in [(1, 3), (3, 1), (5, 1), (6, 3)] {
        cells[at * n] = v;
    }
    b.extend_from_slice(&cells);
    b.push(0x00);
    b
}

/// The same sketch at encoding version 0 (4-byte cells), as RedisBloom 2.8 writes it.
fn v0_body() -> Vec<u8> {
    let mut b = vec![0x07, 0x81, 0x08, 0xc4, 0xa4, 0xf9, 0x36, 0x0f, 0x10, 0x00];
    b.extend_from_slice(&[0x02, 4, 0x02, 2, 0x02, 4, 0x05, 32]);
    let mut cells = vec![0u8; 32];
    for (at, v) in [(1, 3), (3, 1), (5, 1), (6, 3)] {
        cells[at * 4] = v;
    }
    b.extend_from_slice(&cells);
    b.push(0x00);
    b
}

/// A whole payload: the body, RDB version 9, CRC-64.
fn payload(body: &[u8]) -> Vec<u8> {
    let mut b = body.to_vec();
    b.extend_from_slice(&9u16.to_le_bytes());
    seal(&b)
}

/// A DUMP's body (without RDB version and CRC), after checking the CRC.
fn dump_body(c: &mut Conn, key: &str) -> Vec<u8> {
    let dump = c.call(&["DUMP", key]).as_bytes().to_vec();
    assert_eq!(seal(&dump[..dump.len() - 8]), dump, "{key}: the CRC covers the payload");
    dump[..dump.len() - 10].to_vec()
}

/// [`every_cell_size_creates_counts_refuses_and_merges`] for SIZES[i],
/// `n` bytes a cell holding at most `max`: made as asked, one cell up to
/// its maximum and down to 0 and not past either, negative increments,
/// merges only with the same cell size.
fn cell_size_counts_refuses_and_merges(c: &mut Conn, server: Server, i: usize, n: u64, max: i64) {
    let ctx = format!("{server:?} CELL_SIZE {n}");
    assert_eq!(c.cmd(&format!("CMS.INFO d{n}")), info_812(20, 5, 0, n), "{ctx}");
    assert_eq!(c.cmd(&format!("CMS.INFO p{n}")), info_812(2000, 7, 0, n), "{ctx}");

    // One cell: the estimate is exact. Up to the maximum, not past it.
    c.ok(&format!("CMS.INITBYDIM one{n} 1 1 CELL_SIZE {n}"));
    let one = format!("one{n}");
    assert_eq!(c.call(&["CMS.INCRBY", &one, "a", &max.to_string()]), ints(&[max]), "{ctx}");
    let before = value_digest(c, &one);
    assert_eq!(
        c.call(&["CMS.INCRBY", &one, "a", "1"]),
        Reply::Array(vec![err("CMS: INCRBY overflow")]),
        "{ctx}"
    );
    assert_eq!(value_digest(c, &one), before, "{ctx}: a refused overflow changes nothing");
    assert_eq!(c.call(&["CMS.INFO", &one]), info_812(1, 1, max, n), "{ctx}");
    // A self-merge past the maximum is refused and changes nothing.
    assert_eq!(c.call(&["CMS.MERGE", &one, "2", &one, &one]), err("CMS: MERGE overflow"), "{ctx}");
    assert_eq!(value_digest(c, &one), before, "{ctx}");
    // All the way down, then not below 0.
    assert_eq!(c.call(&["CMS.INCRBY", &one, "a", &format!("-{max}")]), ints(&[0]), "{ctx}");
    assert_eq!(
        c.call(&["CMS.INCRBY", &one, "a", "-1"]),
        Reply::Array(vec![err("CMS: INCRBY underflow")]),
        "{ctx}"
    );
    assert_eq!(c.call(&["CMS.INFO", &one]), info_812(1, 1, 0, n), "{ctx}");
    if n < 8 {
        // An increment larger than a cell can hold, refused in one shot.
        let past = (max + 1).to_string();
        let reply = c.call(&["CMS.INCRBY", &format!("d{n}"), "big", &past]);
        assert_eq!(reply, Reply::Array(vec![err("CMS: INCRBY overflow")]), "{ctx}");
    }

    // Negative increments; a refused item leaves the others applied.
    let d = format!("d{n}");
    assert_eq!(c.call(&["CMS.INCRBY", &d, "a", "10", "b", "3"]), ints(&[10, 3]), "{ctx}");
    let reply = c.call(&["CMS.INCRBY", &d, "a", "-100", "b", "3", "a", "-4"]);
    assert_eq!(
        reply,
        Reply::Array(vec![err("CMS: INCRBY underflow"), Reply::Int(6), Reply::Int(6)]),
        "{ctx}"
    );
    assert_eq!(c.call(&["CMS.QUERY", &d, "a", "b", "never"]), ints(&[6, 6, 0]), "{ctx}");
    assert_eq!(c.call(&["CMS.INFO", &d]), info_812(20, 5, 12, n), "{ctx}");

    // Merges need the same cell size; the sum stays within it.
    let m = format!("m{n}");
    c.ok(&format!("CMS.INITBYDIM {m} 20 5 CELL_SIZE {n}"));
    c.ok(&format!("CMS.MERGE {m} 2 {d} {d} WEIGHTS 1 2"));
    assert_eq!(c.call(&["CMS.QUERY", &m, "a", "b"]), ints(&[18, 18]), "{ctx}");
    assert_eq!(c.call(&["CMS.INFO", &m]), info_812(20, 5, 36, n), "{ctx}");
    let other = SIZES[(i + 1) % 4].0;
    let before = value_digest(c, &m);
    let reply = c.call(&["CMS.MERGE", &m, "1", &format!("d{other}")]);
    assert_eq!(reply, err("CMS: cell size is not equal"), "{ctx}");
    let reply = c.call(&["CMS.MERGE", &m, "2", &d, &format!("p{n}")]);
    assert_eq!(reply, err("CMS: width/depth is not equal"), "{ctx}: dimensions before cell size");
    assert_eq!(value_digest(c, &m), before, "{ctx}: refused merges change nothing");
}

#[test]
fn every_cell_size_creates_counts_refuses_and_merges() {
    for server in [Server::Redis, Server::Redis8] {
        let s = start_at(server, V812, &[]);
        let mut c = s.conn();
        let shown = c.cmd("CONFIG GET bf.compat");
        assert_eq!(shown.as_array()[1], Reply::Bulk(V812.into()), "{server:?}");
        c.ok("CMS.INITBYDIM default 20 5");
        assert_eq!(c.cmd("CMS.INFO default"), info_812(20, 5, 0, 4), "{server:?}: 4 bytes unless told");
        for (n, _) in SIZES {
            c.ok(&format!("CMS.INITBYDIM d{n} 20 5 CELL_SIZE {n}"));
            c.ok(&format!("CMS.INITBYPROB p{n} 0.001 0.01 cell_size {n}"));
        }
        for (i, (n, max)) in SIZES.into_iter().enumerate() {
            cell_size_counts_refuses_and_merges(&mut c, server, i, n, max);
        }
        // The array is what grows with the cell size (in the allocator's
        // size classes: at least the bytes added, at most a quarter more).
        let usage = |c: &mut Conn, k: &str| c.call(&["MEMORY", "USAGE", k]).as_int();
        let grew = usage(&mut c, "d8") - usage(&mut c, "d1");
        assert!((7 * 100 - 100..=7 * 100 * 5 / 4 + 64).contains(&grew), "{server:?}: {grew}");
        let grew = usage(&mut c, "d4") - usage(&mut c, "d2");
        assert!((2 * 100 - 64..=2 * 100 * 5 / 4 + 64).contains(&grew), "{server:?}: {grew}");
        // RESP3: a map of the same four pairs.
        c.ok("HELLO 3");
        match c.cmd("CMS.INFO d2") {
            Reply::Map(pairs) => {
                let got: Vec<(String, i64)> = pairs
                    .iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k.as_bytes()).into_owned(), v.as_int()))
                    .collect();
                let want = [("width", 20), ("depth", 5), ("count", 12), ("cell_size", 2)];
                assert_eq!(got, want.map(|(k, v)| (k.to_string(), v)), "{server:?}");
            }
            other => panic!("{server:?}: CMS.INFO in RESP3: {other:?}"),
        }
    }
}

#[test]
fn refusals_answer_8_12s_texts_and_change_nothing() {
    let s = start_at(Server::Redis8, V812, &[]);
    let mut c = s.conn();
    for bad in ["0", "3", "5", "6", "7", "9", "16", "-1", "-4", "blah", "4.5"] {
        for line in [
            format!("CMS.INITBYDIM x 20 5 CELL_SIZE {bad}"),
            format!("CMS.INITBYPROB x 0.001 0.01 CELL_SIZE {bad}"),
        ] {
            assert_eq!(c.cmd(&line), err("CMS: CELL_SIZE must be 1, 2, 4 or 8"), "{line}");
        }
    }
    assert_eq!(c.cmd("CMS.INITBYDIM x 20 5 CELLSIZE 1"), err("CMS: unknown argument"));
    assert_eq!(c.cmd("CMS.INITBYPROB x 0.001 0.01 OOR 1"), err("CMS: unknown argument"));
    for line in
        ["CMS.INITBYDIM x 20 5 CELL_SIZE", "CMS.INITBYDIM x 20 5 CELL_SIZE 1 2", "CMS.INITBYDIM x 20 5 1"]
    {
        let reply = c.cmd(line);
        assert!(reply.error_text().contains("wrong number of arguments"), "{line}: {reply:?}");
    }
    // The numbers first, the key before everything.
    assert_eq!(c.cmd("CMS.INITBYDIM x 0 5 CELL_SIZE 3"), err("CMS: invalid width"));
    assert_eq!(c.cmd("CMS.INITBYPROB x 2 0.01 CELL_SIZE 3"), err("CMS: invalid overestimation value"));
    c.ok("SET s v");
    assert_eq!(c.cmd("CMS.INITBYDIM s 20 5 CELL_SIZE 3"), err("CMS: key already exists"));
    assert_eq!(c.cmd("EXISTS x"), Reply::Int(0));

    // Increments are all parsed first; any 64-bit integer is one.
    c.ok("CMS.INITBYDIM k 20 5 CELL_SIZE 2");
    c.ok("CMS.INCRBY k a 5");
    let before = value_digest(&mut c, "k");
    assert_eq!(c.cmd("CMS.INCRBY k a 1 b x"), err("CMS: Cannot parse number"));
    assert_eq!(
        c.cmd("CMS.INCRBY k a -9223372036854775808"),
        Reply::Array(vec![err("CMS: INCRBY underflow")]),
        "i64::MIN is a decrement past anything"
    );
    assert_eq!(value_digest(&mut c, "k"), before);

    // The total is a RESP integer: 2^63 - 1 at most, even with room in the cells.
    c.ok("CMS.INITBYDIM t 100 1 CELL_SIZE 8");
    assert_eq!(c.cmd("CMS.INCRBY t a 9223372036854775807"), ints(&[i64::MAX]));
    let other = (0..1000)
        .map(|i| format!("x{i}"))
        .find(|i| c.call(&["CMS.QUERY", "t", i]) == ints(&[0]))
        .expect("an item in another cell");
    let before = value_digest(&mut c, "t");
    assert_eq!(c.call(&["CMS.INCRBY", "t", &other, "1"]), Reply::Array(vec![err("CMS: INCRBY overflow")]));
    assert_eq!(value_digest(&mut c, "t"), before);
    assert_eq!(c.cmd("CMS.INFO t"), info_812(100, 1, i64::MAX, 8));

    // The level is chosen when the module loads: it cannot be left at run time.
    let reply = c.cmd("CONFIG SET bf.compat redisbloom-8");
    assert!(reply.error_text().contains("redisbloom-8.12 is chosen when the module loads"), "{reply:?}");
    c.ok("CONFIG SET bf.compat redisbloom-8.12");
}

/// The levels before 8.12 answer as their RedisBloom: no CELL_SIZE (an
/// arity error), no negative increments, three INFO pairs; nor can they
/// switch to 8.12 at run time. Redis 8.2 defaults to `redisbloom-8`.
#[test]
fn older_levels_keep_their_commands() {
    for (server, level) in [(Server::Redis8, "redisbloom-8"), (Server::Redis, "redisbloom-2.8")] {
        let s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        assert_eq!(c.cmd("CONFIG GET bf.compat").as_array()[1], Reply::Bulk(level.into()));
        let reply = c.cmd("CMS.INITBYDIM k 20 5 CELL_SIZE 4");
        assert!(reply.error_text().contains("wrong number of arguments"), "{level}: {reply:?}");
        c.ok("CMS.INITBYDIM k 20 5");
        assert_eq!(c.cmd("CMS.INCRBY k a -1"), err("CMS: Number cannot be negative"), "{level}");
        assert_eq!(c.cmd("CMS.INFO k"), info_classic(20, 5, 0), "{level}");
        // Saturating, as 2.8: the total still grows.
        let reply = c.cmd("CMS.INCRBY k a 4294967296");
        assert_eq!(reply, Reply::Array(vec![err("CMS: INCRBY overflow")]), "{level}");
        assert_eq!(c.cmd("CMS.INFO k"), info_classic(20, 5, 4294967296), "{level}");
        let reply = c.cmd("CONFIG SET bf.compat redisbloom-8.12");
        assert!(reply.error_text().contains("chosen when the module loads"), "{level}: {reply:?}");
    }
}

/// DUMP at 8.12 is Redis 8.12's version-1 payload byte for byte (the
/// expected bytes written out by hand from the PR's format), for every
/// cell size, the default 4 included; the hand-built payload restores.
#[test]
fn dumps_are_version_1_byte_for_byte() {
    let s = start_at(Server::Redis8, V812, &[]);
    let mut c = s.conn();
    c.ok("CONFIG SET rdbcompression no");
    for (n, _) in SIZES {
        let key = format!("k{n}");
        c.ok(&format!("CMS.INITBYDIM {key} 4 2 CELL_SIZE {n}"));
        assert_eq!(c.call(&["CMS.INCRBY", &key, "foo", "3", "bar", "1"]), ints(&[3, 1]));
        assert_eq!(dump_body(&mut c, &key), v1_body(n), "CELL_SIZE {n}");
        let copy = format!("copy{n}");
        let restored =
            c.call(&[b"RESTORE".to_vec(), copy.clone().into_bytes(), b"0".to_vec(), payload(&v1_body(n))]);
        assert_eq!(restored, simple("OK"), "CELL_SIZE {n}");
        assert_eq!(value_digest(&mut c, &copy), value_digest(&mut c, &key), "CELL_SIZE {n}");
        assert_eq!(c.call(&["CMS.INFO", &copy]), info_812(4, 2, 4, n));
    }
    c.ok("CMS.INITBYDIM plain 4 2");
    c.ok("CMS.INCRBY plain foo 3 bar 1");
    assert_eq!(dump_body(&mut c, "plain"), v1_body(4), "8.12 writes version 1 for 4-byte cells too");
}

/// A damaged or impossible version-1 payload is refused whole, as Redis
/// 8.12 refuses it; nothing is stored.
#[test]
fn impossible_version_1_payloads_are_refused() {
    let s = start_at(Server::Redis8, V812, &[]);
    let mut c = s.conn();
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut bad_cell = v1_body(1);
    bad_cell[17] = 3;
    cases.push(("cell size 3", bad_cell));
    let mut short = v1_body(2);
    short[19] = 15; // a 15-byte string for 16 bytes of cells
    short.remove(20);
    cases.push(("string one byte short", short));
    let mut huge_total = v1_body(4);
    // The total as a 64-bit UINT (0x81 then 8 bytes big-endian): 2^63.
    huge_total.splice(15..16, [0x81, 0x80, 0, 0, 0, 0, 0, 0, 0]);
    cases.push(("total past 2^63 - 1", huge_total));
    let mut huge_cell = v1_body(8);
    huge_cell[21 + 8 + 7] = 0x80; // cell 1 (foo's, 3) becomes 2^63 + 3
    cases.push(("8-byte cell past 2^63 - 1", huge_cell));
    let mut huge = v1_body(8);
    // Width 2^40 of 8-byte cells: 8 TiB, refused by bf.max-filter-bytes
    // before the counters are read.
    huge.splice(11..12, [0x81, 0, 0, 1, 0, 0, 0, 0, 0]);
    cases.push(("8 TiB of counters", huge));
    let mut zero_width = v1_body(1);
    zero_width[11] = 0;
    cases.push(("width 0", zero_width));
    for (what, body) in cases {
        let reply = c.call(&[b"RESTORE".to_vec(), b"bad".to_vec(), b"0".to_vec(), payload(&body)]);
        assert!(reply.is_error(), "{what}: {reply:?}");
        assert_eq!(c.cmd("EXISTS bad"), Reply::Int(0), "{what}");
    }
    // The intact one loads.
    let reply = c.call(&[b"RESTORE".to_vec(), b"good".to_vec(), b"0".to_vec(), payload(&v1_body(8))]);
    assert_eq!(reply, simple("OK"));
}

/// Version 1 loads at every level. The older levels hold such a sketch in
/// 4-byte cells and write it as version 0, so that their RedisBloom can
/// read what they save; their own 4-byte sketches are version 0 as before.
#[test]
fn version_1_loads_at_every_level_and_older_levels_write_version_0() {
    for (server, level) in [
        (Server::Redis, "redisbloom-2.8"),
        (Server::Redis8, "redisbloom-8"),
        (Server::Valkey, "valkey-bloom"),
        (Server::Redis8, V812),
    ] {
        let s = start_at(server, level, &[]);
        let mut c = s.conn();
        c.ok("CONFIG SET rdbcompression no");
        let old = level != V812;
        for (n, _) in SIZES {
            let key = format!("v{n}");
            let reply =
                c.call(&[b"RESTORE".to_vec(), key.clone().into_bytes(), b"0".to_vec(), payload(&v1_body(n))]);
            assert_eq!(reply, simple("OK"), "{level} CELL_SIZE {n}");
            assert_eq!(c.call(&["CMS.QUERY", &key, "foo", "bar"]), ints(&[3, 1]), "{level} {n}");
            let want_info = if old { info_classic(4, 2, 4) } else { info_812(4, 2, 4, n) };
            assert_eq!(c.call(&["CMS.INFO", &key]), want_info, "{level} {n}");
            let want_dump = if old { v0_body() } else { v1_body(n) };
            assert_eq!(dump_body(&mut c, &key), want_dump, "{level} CELL_SIZE {n}");
        }
        c.ok("CMS.INITBYDIM own 4 2");
        c.ok("CMS.INCRBY own foo 3 bar 1");
        let want_dump = if old { v0_body() } else { v1_body(4) };
        assert_eq!(dump_body(&mut c, "own"), want_dump, "{level}: a sketch made here");
        // And the saved file loads back to the same.
        let before = c.digest();
        c.ok("DEBUG RELOAD");
        assert_eq!(c.digest(), before, "{level}");
        assert_eq!(c.cmd("CMS.QUERY v1 foo bar"), ints(&[3, 1]), "{level}");
    }
}

/// An RDB file a Redis 8.12 level wrote, holding every cell size, starts
/// a server at an older level: the sketches answer in 4-byte cells.
#[test]
fn an_8_12_rdb_file_starts_an_older_level() {
    let mut new = start_at(Server::Redis8, V812, &[]);
    let mut c = new.conn();
    for (n, _) in SIZES {
        c.ok(&format!("CMS.INITBYDIM k{n} 50 4 CELL_SIZE {n}"));
        c.ok(&format!("CMS.INCRBY k{n} a 200 b 7 a -100"));
    }
    c.ok("SAVE");
    let file = new.dir().join("dump.rdb");
    let mut old = start_at(Server::Redis8, "redisbloom-8", &[]);
    old.kill();
    std::fs::copy(&file, old.dir().join("dump.rdb")).unwrap();
    old.restart(&[]);
    let mut o = old.conn();
    for (n, _) in SIZES {
        assert_eq!(o.cmd(&format!("CMS.QUERY k{n} a b")), ints(&[100, 7]), "CELL_SIZE {n}");
        assert_eq!(o.cmd(&format!("CMS.INFO k{n}")), info_classic(50, 4, 107), "CELL_SIZE {n}");
    }
    new.kill();
}

/// Writes at every cell size (negative increments, refusals, merges);
/// returns the queries to check afterwards.
fn write_sizes(c: &mut Conn, tag: &str) -> Vec<(String, Reply)> {
    let mut checks = Vec::new();
    for (n, max) in SIZES {
        let k = format!("{tag}:{n}");
        c.ok(&format!("CMS.INITBYDIM {k} 50 4 CELL_SIZE {n}"));
        c.ok(&format!("CMS.INITBYPROB {k}:p 0.01 0.01 CELL_SIZE {n}"));
        for round in 0..5 {
            let mut cmd = vec!["CMS.INCRBY".to_string(), k.clone()];
            for i in 0..20 {
                cmd.push(format!("i{i}"));
                cmd.push(if round == 3 { "-1".into() } else { (round + i % 3).to_string() });
            }
            c.call(&cmd);
        }
        c.call(&["CMS.INCRBY", &k, "top", &max.to_string(), "top", "1", "none", "-1"]);
        c.ok(&format!("CMS.INITBYDIM {k}:m 50 4 CELL_SIZE {n}"));
        c.ok(&format!("CMS.MERGE {k}:m 2 {k} {k}:m WEIGHTS 0 1"));
        c.ok(&format!("CMS.MERGE {k}:m 1 {k}:m WEIGHTS 1"));
        c.call(&["CMS.INCRBY", &format!("{k}:p"), "x", "9"]);
        for key in [k.clone(), format!("{k}:p"), format!("{k}:m")] {
            let q = c.call(&["CMS.QUERY", &key, "i0", "i1", "i2", "top", "x"]);
            checks.push((key.clone(), q));
            checks.push((format!("INFO {key}"), c.call(&["CMS.INFO", &key])));
        }
    }
    checks
}

fn assert_checks(c: &mut Conn, checks: &[(String, Reply)], context: &str) {
    for (what, want) in checks {
        let got = match what.strip_prefix("INFO ") {
            Some(key) => c.call(&["CMS.INFO", key]),
            None => c.call(&["CMS.QUERY", what, "i0", "i1", "i2", "top", "x"]),
        };
        assert_eq!(&got, want, "{context}: {what}");
    }
}

#[test]
fn every_cell_size_survives_restore_rdb_aof_and_replication() {
    // RESTORE, DEBUG RELOAD, save and restart.
    let mut s = start_at(Server::Redis8, V812, &[]);
    let mut c = s.conn();
    let checks = write_sizes(&mut c, "r");
    for (n, _) in SIZES {
        let k = format!("r:{n}");
        let dump = c.call(&["DUMP", &k]).as_bytes().to_vec();
        let copy = format!("{k}:copy");
        assert_eq!(
            c.call(&[b"RESTORE".to_vec(), copy.clone().into_bytes(), b"0".to_vec(), dump]),
            simple("OK")
        );
        assert_eq!(value_digest(&mut c, &copy), value_digest(&mut c, &k), "RESTORE, CELL_SIZE {n}");
    }
    let before = c.digest();
    c.ok("DEBUG RELOAD");
    assert_eq!(c.digest(), before, "DEBUG RELOAD");
    c.ok("SAVE");
    s.restart(&[]);
    let mut c = s.conn();
    assert_eq!(c.digest(), before, "restart");
    assert_checks(&mut c, &checks, "restart");

    // AOF replay and rewrite, with and without the RDB preamble.
    for preamble in [false, true] {
        let context = format!("preamble {preamble}");
        let mut s = start_at(Server::Redis8, V812, &aof_args(preamble));
        let mut c = s.conn();
        c.wait_for_aof_rewrite(Duration::from_secs(30));
        let mut checks = write_sizes(&mut c, "a");
        let before = c.digest();
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!(c.digest(), before, "{context}: replayed AOF");
        c.ok("BGREWRITEAOF");
        c.wait_for_aof_rewrite(Duration::from_secs(30));
        checks.extend(write_sizes(&mut c, "b"));
        let before = c.digest();
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!(c.digest(), before, "{context}: rewritten AOF");
        assert_checks(&mut c, &checks, &context);
    }

    // Replication: a full sync, then the stream (refused items included).
    let primary = start_at(Server::Redis8, V812, &[]);
    let mut p = primary.conn();
    let early = write_sizes(&mut p, "early");
    let port = primary.port.to_string();
    let mut replica = start_at(Server::Redis8, V812, &["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    r.wait_for_sync(Duration::from_secs(30));
    let late = write_sizes(&mut p, "late");
    assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
    assert_eq!(r.digest(), p.digest(), "full sync then stream");
    assert_checks(&mut r, &early, "full sync");
    assert_checks(&mut r, &late, "replication stream");
    drop(p);
    replica.kill();
}
