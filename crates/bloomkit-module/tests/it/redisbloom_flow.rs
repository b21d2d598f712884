//! RedisBloom's own flow tests that RedisBloom 8 passes on Redis 8.2, run
//! against bloomkit on every server and level (issue 43 item 9). Their
//! crafted inputs are rebuilt here from what each field means, not copied:
//!
//! - `test_overall.py::test_arbitrary_offset`: a `BF.LOADCHUNK` header of one
//!   full sub-filter (capacity 0x1_4874_DDF3_1811, one byte of bits); the
//!   next `BF.ADD` needs a sub-filter of hundreds of terabytes and must fail
//!   with RedisBloom's `problem inserting into filter` (RedisBloom 8, whose
//!   allocation fails; RedisBloom 2.8.2 crashes the server), and a chunk at
//!   an offset no sub-filter holds with `invalid offset`.
//! - `test_cuckoo.py::test_number_of_buckets_does_not_overflow`: a
//!   `CF.LOADCHUNK` header of 2^32 buckets of one slot (4 GiB; RedisBloom
//!   2.8.2 keeps bucket counts in 32 bits and crashes), then `CF.INSERT` of
//!   ten copies of one item must answer, not fail.

use bloomkit_testkit::{per_server, Reply, Server, TestServer};

/// The item count and capacity of the crafted Bloom filter.
const HUGE: u64 = 0x0001_4874_DDF3_1811;

/// RedisBloom's SCANDUMP header: the chain (items, filters, options,
/// growth), then each link (bytes, bits, items, error, bits per entry,
/// hashes, capacity, n2).
fn bloom_header() -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&HUGE.to_le_bytes());
    for field in [1u32, 1, 1] {
        h.extend_from_slice(&field.to_le_bytes()); // one filter, NOROUND, growth 1
    }
    h.extend_from_slice(&1u64.to_le_bytes());
    h.extend_from_slice(&8u64.to_le_bytes());
    h.extend_from_slice(&HUGE.to_le_bytes());
    h.extend_from_slice(&0.1f64.to_le_bytes());
    h.extend_from_slice(&0.1f64.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&HUGE.to_le_bytes());
    h.push(0);
    h
}

per_server!(arbitrary_offset: all);
fn arbitrary_offset(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    assert_eq!(
        c.call(&[b"BF.LOADCHUNK".as_slice(), b"k", b"1", &bloom_header()]),
        Reply::Simple("OK".into())
    );
    let add = c.cmd("BF.ADD k 1");
    let text = add.error_text();
    assert!(text.contains("problem inserting into filter"), "{server:?}: {add:?}");
    // And then why, in bloomkit's words.
    assert!(text.contains("bf.max-filter-bytes"), "{server:?}: {text}");
    assert_eq!(c.cmd("BF.INFO k FILTERS"), Reply::Array(vec![Reply::Int(1)]), "{server:?}: nothing grew");
    assert_eq!(c.cmd("BF.CARD k").as_int() as u64, HUGE, "{server:?}: nothing was added");
    let chunk = c.cmd("BF.LOADCHUNK k 71752852194637 HELLO");
    assert!(chunk.error_text().contains("invalid offset"), "{server:?}: {chunk:?}");
    assert_eq!(c.cmd("PING"), Reply::Simple("PONG".into()));
}

/// `CF.LOADCHUNK`'s header: items, buckets, deletes, filters, then bucket
/// size, max iterations and expansion.
fn cuckoo_header() -> Vec<u8> {
    let mut h = Vec::new();
    for field in [0u64, 1 << 32, 0, 1] {
        h.extend_from_slice(&field.to_le_bytes());
    }
    for field in [1u16, 1, 1] {
        h.extend_from_slice(&field.to_le_bytes());
    }
    h
}

per_server!(number_of_buckets_does_not_overflow: all);
fn number_of_buckets_does_not_overflow(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    assert_eq!(
        c.call(&[b"CF.LOADCHUNK".as_slice(), b"cf", b"1", &cuckoo_header()]),
        Reply::Simple("OK".into())
    );
    let info = c.cmd("CF.INFO cf");
    let buckets =
        info.as_array().chunks(2).find(|p| p[0].as_bytes() == b"Number of buckets").map(|p| p[1].as_int());
    assert_eq!(buckets, Some(1 << 32), "{server:?}: {info:?}");
    let insert = c.cmd("CF.INSERT cf ITEMS 1 1 1 1 1 1 1 1 1 1");
    let answers = match &insert {
        Reply::Array(a) => a,
        other => panic!("{server:?}: CF.INSERT must answer an array, not {other:?}"),
    };
    // One slot per bucket: two copies fit (the item's two buckets); the
    // third needs a second 4 GiB sub-filter, past the limit (RedisBloom 8
    // allocates it, and three more, lazily: 20 GiB for ten copies).
    assert_eq!(&answers[..2], &[Reply::Int(1), Reply::Int(1)], "{server:?}: {insert:?}");
    assert!(answers[2].error_text().contains("bf.max-filter-bytes"), "{server:?}: {insert:?}");
    assert_eq!(c.cmd("CF.COUNT cf 1"), Reply::Int(2), "{server:?}");
    assert_eq!(c.cmd("CF.EXISTS cf 1"), Reply::Int(1), "{server:?}");
    assert_eq!(c.cmd("CF.EXISTS cf 2"), Reply::Int(0), "{server:?}");
}
