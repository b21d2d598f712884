//! What the Top-K suites share: a sketch's decoded DUMP fields, and reads
//! that cover every answer a client can get from a sketch.

#![allow(dead_code)]

use bloomkit_core::topk::{Bucket, Slot, TopK, TopkParams};
use bloomkit_core::Limits;
use bloomkit_testkit::{Conn, Reply};

/// A sketch's fields from its DUMP payload, pointer bytes (and so the draw
/// counter) left out: RedisBloom writes live addresses there.
#[derive(Debug, PartialEq)]
pub struct Fields {
    pub params: TopkParams,
    pub buckets: Vec<Bucket>,
    pub heap: Vec<Slot>,
}

pub fn decode(payload: &[u8]) -> TopK {
    TopK::from_payload(payload, Limits::NONE).expect("a TopK-TYPE payload")
}

/// The decoded DUMP of `key`, or None when it is missing or not a sketch.
pub fn fields(c: &mut Conn, key: &str) -> Option<Fields> {
    match c.call(&["DUMP", key]) {
        Reply::Bulk(p)
            if p.first() == Some(&7) && p.get(2..10) == Some(&0x4e8a_4af9_360f_1000u64.to_be_bytes()) =>
        {
            let t = decode(&p);
            Some(Fields { params: t.params(), buckets: t.buckets().to_vec(), heap: t.heap().to_vec() })
        }
        _ => None,
    }
}

/// Every read a client has of `key` for these items: LIST (with and
/// without counts), QUERY, COUNT, INFO.
pub fn answers(c: &mut Conn, key: &str, items: &[Vec<u8>]) -> Vec<Reply> {
    let with = |cmd: &str| {
        let mut v = vec![cmd.as_bytes().to_vec(), key.as_bytes().to_vec()];
        v.extend(items.iter().cloned());
        v
    };
    vec![
        c.call(&["TOPK.LIST", key]),
        c.call(&["TOPK.LIST", key, "WITHCOUNT"]),
        c.call(&with("TOPK.QUERY")),
        c.call(&with("TOPK.COUNT")),
        c.call(&["TOPK.INFO", key]),
    ]
}

/// The pool of items the streams draw from.
pub fn pool(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("item{i}").into_bytes()).collect()
}

/// `TOPK.ADD key items...` as a command.
pub fn add_cmd(key: &str, items: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut v = vec![b"TOPK.ADD".to_vec(), key.as_bytes().to_vec()];
    v.extend(items.iter().cloned());
    v
}

/// `TOPK.INCRBY key item n ...` as a command.
pub fn incrby_cmd(key: &str, pairs: &[(Vec<u8>, u32)]) -> Vec<Vec<u8>> {
    let mut v = vec![b"TOPK.INCRBY".to_vec(), key.as_bytes().to_vec()];
    for (item, n) in pairs {
        v.push(item.clone());
        v.push(n.to_string().into_bytes());
    }
    v
}
