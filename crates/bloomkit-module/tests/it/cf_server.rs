//! Cuckoo filters and the server around them: the `INFO bf` counters and
//! MEMORY USAGE.

use bloomkit_testkit::{Server, TestServer};

/// `INFO bf` counts cuckoo filters apart, and `MEMORY USAGE` is `CF.INFO Size`
/// plus the server's own overhead for the key.
#[test]
fn info_counters_and_memory_usage() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    for line in ["CF.RESERVE a 1000", "CF.INSERT a ITEMS x y z", "CF.DEL a x", "CF.MEXISTS a x y"] {
        c.ok(line);
    }
    let counted = [
        ("bf_cf_filters", "1"),
        ("bf_cf_bytes", "1080"),
        ("bf_cf_items_added", "3"),
        ("bf_cf_items_deleted", "1"),
        ("bf_cf_lookups", "2"),
    ];
    c.assert_info("bf", &counted, "one filter");
    assert!(c.cmd("MEMORY USAGE a").as_int() >= 1080);
    c.ok("DEL a");
    c.assert_info("bf", &[("bf_cf_filters", "0"), ("bf_cf_bytes", "0")], "deleted");
}
