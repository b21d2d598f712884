//! What the cuckoo-filter suites share: a whole `CF.SCANDUMP` and its
//! replay with `CF.LOADCHUNK`.

#![allow(dead_code)]

use bloomkit_testkit::{Conn, Reply};

/// A filter's whole `CF.SCANDUMP`: `(pos, data)` pairs, the header first
/// (under pos 1, as `CF.LOADCHUNK` takes it). None when `key` is not a
/// cuckoo filter; an empty list for one without items (SCANDUMP's quirk).
pub fn cf_scandump(c: &mut Conn, key: &str) -> Option<Vec<(i64, Vec<u8>)>> {
    let mut chunks = Vec::new();
    let mut pos = 0i64;
    loop {
        let reply = c.call(&["CF.SCANDUMP", key, &pos.to_string()]);
        if reply.is_error() {
            return None;
        }
        let next = reply.as_array()[0].as_int();
        if next == 0 {
            return Some(chunks);
        }
        // The header is loaded under pos 1, each chunk under the pos after it.
        let at = if pos == 0 { 1 } else { next };
        chunks.push((at, reply.as_array()[1].as_bytes().to_vec()));
        pos = next;
    }
}

/// Replays `cf_scandump` output into `key`, asserting each chunk is accepted.
pub fn cf_loadchunks(c: &mut Conn, key: &str, chunks: &[(i64, Vec<u8>)]) {
    for (pos, data) in chunks {
        let reply = c.call(&[
            b"CF.LOADCHUNK".to_vec(),
            key.as_bytes().to_vec(),
            pos.to_string().into_bytes(),
            data.clone(),
        ]);
        assert_eq!(reply, Reply::Simple("OK".into()), "CF.LOADCHUNK {key} {pos}");
    }
}

/// `CF.MEXISTS key items...` as a list of answers (0/1 or booleans as ints).
pub fn mexists(c: &mut Conn, key: &str, items: &[String]) -> Vec<i64> {
    let mut cmd = vec!["CF.MEXISTS".to_string(), key.to_string()];
    cmd.extend(items.iter().cloned());
    c.call(&cmd).as_array().iter().map(Reply::as_int).collect()
}

/// `CF.COUNT key item` for each item.
pub fn counts(c: &mut Conn, key: &str, items: &[String]) -> Vec<i64> {
    items.iter().map(|i| c.call(&["CF.COUNT", key, i]).as_int()).collect()
}
