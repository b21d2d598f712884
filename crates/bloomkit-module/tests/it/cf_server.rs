//! Cuckoo filters and the server around them: the `INFO bf` counters and
//! MEMORY USAGE.

use bloomkit_testkit::{Server, TestServer};

/// `INFO bf` counts cuckoo filters apart, at what they really take, and
/// `MEMORY USAGE` is at least `CF.INFO Size` (RedisBloom's figure).
#[test]
fn info_counters_and_memory_usage() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    for line in ["CF.RESERVE a 1000", "CF.INSERT a ITEMS x y z", "CF.DEL a x", "CF.MEXISTS a x y"] {
        c.ok(line);
    }
    let counted = [
        ("bf_cf_filters", "1"),
        // In jemalloc's size classes: the 40-byte struct in the 48 class,
        // its one sub-filter's 16 bytes and its 1024 bytes of buckets
        // (`CF.INFO Size` says 1080, RedisBloom's figure).
        ("bf_cf_bytes", "1088"),
        ("bf_cf_items_added", "3"),
        ("bf_cf_items_deleted", "1"),
        ("bf_cf_lookups", "2"),
    ];
    c.assert_info("bf", &counted, "one filter");
    assert!(c.cmd("MEMORY USAGE a").as_int() >= 1080);
    c.ok("DEL a");
    c.assert_info("bf", &[("bf_cf_filters", "0"), ("bf_cf_bytes", "0")], "deleted");
}
