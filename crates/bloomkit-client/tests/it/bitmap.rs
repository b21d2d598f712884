//! The bitmap backend on a plain redis-server: Guava's bits end to end, and
//! atomic answers under concurrent writers.

use std::sync::atomic::{AtomicU32, Ordering};

use bloomkit_client::{Filter, Layout, Options, RedisFilter};
use bloomkit_testkit::{guava_items, Server, TestServer};
use serde_json::Value;

use crate::common;
use common::connect;

/// The bitmap in Redis after our adds is, bit for bit, the array real Guava
/// 31.1 built from the same items: a Java service doing SETBIT at Guava's
/// positions shares it.
#[test]
fn redis_bitmap_holds_guavas_bits() {
    let server = TestServer::start(Server::Redis, &[], &[]);
    let doc: Value =
        serde_json::from_str(include_str!("../../../bloomkit-core/tests/fixtures/guava-31.1.json")).unwrap();
    for (n, case) in doc["filters"].as_array().unwrap().iter().enumerate() {
        let capacity = case["capacity"].as_u64().unwrap();
        let rate = case["error_rate"].as_f64().unwrap();
        let key = format!("guava:{n}");
        let mut filter =
            RedisFilter::new(connect(&server), Layout::bitmap(&key, Options::new(capacity, rate)).unwrap());
        let items = guava_items(case["items"].as_u64().unwrap() as usize);
        let refs: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        filter.add_many(&refs).unwrap();

        let bytes = server.conn().call(&["GET", &key]).as_bytes().to_vec();
        // SETBIT numbers bits from the most significant bit of byte 0.
        let ours: Vec<u64> = (0..bytes.len() as u64 * 8)
            .filter(|&b| bytes[(b / 8) as usize] & (0x80 >> (b % 8)) != 0)
            .collect();
        let guava: Vec<u64> =
            case["set_bits"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).collect();
        assert_eq!(ours, guava, "n={capacity} p={rate}");
        let info = filter.info().unwrap();
        assert_eq!(info.bits, case["bits"].as_u64());
        assert_eq!(info.hashes.map(u64::from), case["hashes"].as_u64());
    }
}

/// Four writers add the same 20 000 items in different orders and batch
/// sizes: every item is reported new exactly once, in one key (one
/// BITFIELD per batch) and split over keys (one script per batch).
#[test]
fn concurrent_writers_see_each_item_new_once() {
    concurrent_writers(None);
}

#[test]
fn concurrent_writers_on_a_split_bitmap_see_each_item_new_once() {
    concurrent_writers(Some(1 << 18));
}

fn concurrent_writers(max_key_bits: Option<u64>) {
    let server = TestServer::start(Server::Redis, &[], &[]);
    const ITEMS: u32 = 20_000;
    let reported: Vec<AtomicU32> = (0..ITEMS).map(|_| AtomicU32::new(0)).collect();
    std::thread::scope(|s| {
        for writer in 0..4u32 {
            let (server, reported) = (&server, &reported);
            s.spawn(move || {
                let mut options =
                    Options { batch_size: 50 + 75 * writer as usize, ..Options::new(100_000, 1e-4) };
                if let Some(bits) = max_key_bits {
                    options.max_key_bits = bits;
                }
                let layout = Layout::bitmap("race", options).unwrap();
                assert_eq!(layout.keys().len() > 1, max_key_bits.is_some(), "{:?}", layout.keys());
                let mut f = RedisFilter::new(connect(server), layout);
                // Each writer walks the items with its own stride.
                let stride = [1, 7919, 104_729, 15_485_863][writer as usize];
                let order: Vec<u32> =
                    (0..ITEMS).map(|i| ((u64::from(i) * stride) % u64::from(ITEMS)) as u32).collect();
                for chunk in order.chunks(700) {
                    let items: Vec<Vec<u8>> =
                        chunk.iter().map(|i| format!("item:{i}").into_bytes()).collect();
                    let refs: Vec<&[u8]> = items.iter().map(|i| i.as_slice()).collect();
                    for (i, new) in chunk.iter().zip(f.add_many(&refs).unwrap()) {
                        if new {
                            reported[*i as usize].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    let wrong: Vec<(usize, u32)> =
        reported.iter().map(|r| r.load(Ordering::Relaxed)).enumerate().filter(|&(_, n)| n != 1).collect();
    assert!(
        wrong.is_empty(),
        "{} items not reported new exactly once: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(10)]
    );
}

/// Reads go to replicas: lookups use BITFIELD_RO, which a read-only
/// replica serves (BITFIELD would be refused there).
#[test]
fn lookups_work_on_a_read_only_replica() {
    let primary = TestServer::start(Server::Valkey, &[], &[]);
    let port = primary.port.to_string();
    let replica = TestServer::start(Server::Valkey, &[], &["--replicaof", "127.0.0.1", &port]);
    replica.conn().wait_for_sync(std::time::Duration::from_secs(30));
    let layout = || Layout::bitmap("shared", Options::new(10_000, 0.001)).unwrap();
    let mut writer = RedisFilter::new(connect(&primary), layout());
    let items: Vec<Vec<u8>> = (0..500).map(|i| format!("item-{i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
    writer.add_many(&refs).unwrap();
    assert_eq!(primary.conn().cmd("WAIT 1 10000"), bloomkit_testkit::Reply::Int(1));
    let mut reader = RedisFilter::new(connect(&replica), layout());
    assert!(reader.contains_many(&refs).unwrap().iter().all(|&p| p), "every item found on the replica");
    assert!(!reader.contains(b"never added").unwrap());
    assert!(reader.add(b"x").is_err(), "the replica refuses writes, so this read path is the read-only one");
}
