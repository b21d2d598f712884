//! What the XF suites share: batched adds and lookups, INFO fields, a
//! whole `XF.SCANDUMP` (and its chunks cut block by block, as a client may
//! send them), and the persistence fixture (filters of every state, a
//! chunked load under way among them).

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

/// A SCANDUMP's data chunks cut into one chunk per block, with the
/// iterators LOADCHUNK expects (the directory slot after each block, plus
/// one): the smallest pieces a load can take, so that a fixture can stop a
/// load after any block.
pub fn block_chunks(chunks: &[(i64, Vec<u8>)]) -> Vec<(i64, Vec<u8>)> {
    let header = &chunks[0].1;
    let depth = u64::from_le_bytes(header[8 + 8 * 8..8 + 9 * 8].try_into().unwrap()) as u32;
    let mut out = vec![chunks[0].clone()];
    let mut slot = 0u64;
    for (_, data) in &chunks[1..] {
        let mut at = 0;
        for (len, block_depth) in bloomkit_core::xf::formats::chunk_blocks(data).unwrap() {
            slot += 1u64 << (depth - block_depth);
            out.push(((slot + 1) as i64, data[at..at + len].to_vec()));
            at += len;
        }
    }
    out
}

/// Sends `chunks` (as [`scandump`] or [`block_chunks`] give them) to `key`.
pub fn load(c: &mut Conn, key: &str, chunks: &[(i64, Vec<u8>)]) {
    for (iter, data) in chunks {
        let reply = c.call(&[
            b"XF.LOADCHUNK".to_vec(),
            key.as_bytes().to_vec(),
            iter.to_string().into_bytes(),
            data.clone(),
        ]);
        assert_eq!(reply, ok(), "{key} at {iter}");
    }
}

/// Filters of every state: fresh, grown with deletes, a chunked load under
/// way (three blocks of eight in), merged, and a copy of the load under way.
pub struct Xf;

impl Family for Xf {
    const REWRITE_COMMAND: &'static str = "XF.LOADCHUNK";

    fn write(c: &mut Conn, tag: &str) -> Written {
        let keys: Vec<String> =
            ["grown", "fresh", "loading", "merged", "copied"].iter().map(|k| format!("{tag}:{k}")).collect();
        c.ok(&format!("XF.RESERVE {} 0.001 CAPACITY 100", keys[0]));
        items(c, &keys[0], "g", 0..5_000);
        for i in 0..300 {
            c.call(&["XF.DEL", &keys[0], &format!("g{}", i * 7)]);
        }
        c.ok(&format!("XF.RESERVE {} 0.05", keys[1]));
        // A load under way: the source's header and its first three blocks.
        let source = format!("{tag}:source");
        c.ok(&format!("XF.RESERVE {source} 0.01 CAPACITY 64"));
        items(c, &source, "w", 0..3_000);
        let pieces = block_chunks(&scandump(c, &source));
        assert!(pieces.len() >= 5, "a header and blocks: {}", pieces.len());
        load(c, &keys[2], &pieces[..4]);
        assert!(c.call(&["XF.ADD", &keys[2], "x"]).error_text().contains("XF.LOADCHUNK"));
        c.call(&["DEL", &source]);
        c.ok(&format!("XF.MERGE {} 1 {}", keys[3], keys[0]));
        c.ok(&format!("XF.ADDNX {} w1", keys[3]));
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
