//! What the XF suites share: batched adds and lookups, INFO fields, a
//! whole `XF.SCANDUMP`, and the persistence fixture (filters of every state).

#![allow(dead_code)]

use bloomkit_testkit::persistence::{Family, Written};
use bloomkit_testkit::{Conn, Reply};

pub fn ok() -> Reply {
    Reply::Simple("OK".into())
}

pub fn items(c: &mut Conn, key: &str, prefix: &str, range: std::ops::Range<usize>) {
    let mut start = range.start;
    while start < range.end {
        let end = (start + 500).min(range.end);
        let mut cmd = vec!["XF.MADD".to_string(), key.to_string()];
        cmd.extend((start..end).map(|i| format!("{prefix}{i}")));
        let reply = c.call(&cmd);
        assert!(!reply.is_error() && reply.as_array().iter().all(|r| !r.is_error()), "{reply:?}");
        start = end;
    }
}

/// How many of `prefix{range}` the filter answers 1 for.
pub fn found(c: &mut Conn, key: &str, prefix: &str, range: std::ops::Range<usize>) -> usize {
    let mut n = 0;
    let mut start = range.start;
    while start < range.end {
        let end = (start + 500).min(range.end);
        let mut cmd = vec!["XF.MEXISTS".to_string(), key.to_string()];
        cmd.extend((start..end).map(|i| format!("{prefix}{i}")));
        n += c.call(&cmd).as_array().iter().filter(|r| r.as_int() == 1).count();
        start = end;
    }
    n
}

pub fn info(c: &mut Conn, key: &str, field: &str) -> Reply {
    let reply = c.call(&["XF.INFO", key]);
    let fields = reply.as_array();
    let at = fields.iter().position(|f| matches!(f, Reply::Simple(s) if s == field)).expect(field);
    fields[at + 1].clone()
}

/// INFO's "Guaranteed rate": the bound on the false-positive rate now.
pub fn guaranteed(c: &mut Conn, key: &str) -> f64 {
    match info(c, key, "Guaranteed rate") {
        Reply::Bulk(b) => String::from_utf8(b).unwrap().parse().unwrap(),
        Reply::Double(d) => d.parse().unwrap(),
        other => panic!("{other:?}"),
    }
}

/// A filter's whole `XF.SCANDUMP`: `(iter, data)` pairs, the header first.
pub fn scandump(c: &mut Conn, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut chunks = Vec::new();
    let mut iter = 0i64;
    loop {
        let reply = c.call(&["XF.SCANDUMP", key, &iter.to_string()]);
        let next = reply.as_array()[0].as_int();
        if next == 0 {
            return chunks;
        }
        chunks.push((next, reply.as_array()[1].as_bytes().to_vec()));
        iter = next;
    }
}

/// Filters of every state: fresh, grown, mid-doubling, with deletes,
/// merged, copied.
pub struct Xf;

impl Family for Xf {
    const REWRITE_COMMAND: &'static str = "XF.LOADCHUNK";

    fn write(c: &mut Conn, tag: &str) -> Written {
        let keys: Vec<String> =
            ["grown", "fresh", "midway", "merged", "copied"].iter().map(|k| format!("{tag}:{k}")).collect();
        c.ok(&format!("XF.RESERVE {} 0.001 CAPACITY 100", keys[0]));
        items(c, &keys[0], "g", 0..5_000);
        for i in 0..300 {
            c.call(&["XF.DEL", &keys[0], &format!("g{}", i * 7)]);
        }
        c.ok(&format!("XF.RESERVE {} 0.05", keys[1]));
        c.ok(&format!("XF.RESERVE {} 0.01 CAPACITY 64", keys[2]));
        // Add until a doubling is under way past the first thousand items,
        // and stop there: the first thousand in batches, then one at a time.
        items(c, &keys[2], "w", 0..1_001);
        for i in 1_001..100_000 {
            c.call(&["XF.ADD", &keys[2], &format!("w{i}")]);
            if info(c, &keys[2], "Expansion progress").as_int() > 0 {
                break;
            }
        }
        assert!(info(c, &keys[2], "Expansion progress").as_int() > 0, "a doubling is under way");
        c.ok(&format!("XF.MERGE {} 2 {} {}", keys[3], keys[0], keys[2]));
        c.ok(&format!("COPY {} {}", keys[2], keys[4]));
        c.call(&[b"XF.ADD".to_vec(), keys[1].clone().into_bytes(), vec![0u8, 255, 13, 10]]);
        Written::keys(&keys)
    }

    fn answers(c: &mut Conn, key: &str) -> Vec<Reply> {
        vec![
            c.call(&["XF.INFO", key]),
            c.call(&["XF.MEXISTS", key, "g1", "g7", "w3", "w1000", "nope", "g4999"]),
            c.call(&["XF.COUNT", key, "g1"]),
        ]
    }
}
