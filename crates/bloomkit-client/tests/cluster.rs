//! A real Redis Cluster of three masters with bloomkit on each: sharded
//! filters place shards on every master and keep working while a master's
//! slots (and the filters in them) move to another.

use bloomkit_client::{AsyncRedisFilter, BlockingCluster, Filter, Layout, Options, Over, RedisFilter};
use bloomkit_testkit::{Module, TestCluster};

fn items(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{prefix}{i}").into_bytes()).collect()
}

fn slices(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|i| i.as_slice()).collect()
}

#[test]
fn sharded_filters_span_the_cluster_and_survive_resharding() {
    let cluster = TestCluster::start(3, &[Module::bloomkit()]);
    let client = redis::cluster::ClusterClient::new(cluster.urls()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();

    let options = Options::new(60_000, 0.001).batch_size(500);
    let mut module = RedisFilter::new(
        BlockingCluster::connect(&client).unwrap(),
        Layout::sharded("clicks", 12, Over::Module, options.clone()).unwrap(),
    );
    let mut bitmap = AsyncRedisFilter::new(
        runtime.block_on(client.get_async_connection()).unwrap(),
        Layout::sharded("urls", 12, Over::Bitmap, options).unwrap(),
    );
    let first = items("first-", 30_000);
    assert!(module.add_many(&slices(&first)).unwrap().iter().all(|&n| n), "module: every first item new");
    let new = runtime.block_on(bitmap.add_many(&slices(&first))).unwrap();
    assert!(new.iter().filter(|&&n| !n).count() <= 3, "bitmap: first items new up to false positives");

    // Every master holds shards of both filters.
    for (i, node) in cluster.nodes.iter().enumerate() {
        let mut c = node.conn();
        let keys: Vec<String> = c
            .cmd("KEYS *")
            .as_array()
            .iter()
            .map(|k| String::from_utf8_lossy(k.as_bytes()).into_owned())
            .collect();
        assert!(keys.iter().any(|k| k.starts_with("{clicks:")), "master {i} has no module shard: {keys:?}");
        assert!(keys.iter().any(|k| k.starts_with("{urls:")), "master {i} has no bitmap shard: {keys:?}");
    }

    // Move all of master 0's slots, with their filters, to master 1.
    cluster.move_all_slots(0, 1);
    assert_eq!(cluster.nodes[0].conn().cmd("DBSIZE").as_int(), 0, "master 0 still holds keys");

    // Both filters still answer for everything added and keep adding.
    assert!(
        module.contains_many(&slices(&first)).unwrap().iter().all(|&p| p),
        "module: lost items after resharding"
    );
    assert!(
        runtime.block_on(bitmap.contains_many(&slices(&first))).unwrap().iter().all(|&p| p),
        "bitmap: lost items"
    );
    let second = items("second-", 10_000);
    assert!(module.add_many(&slices(&second)).unwrap().iter().all(|&n| n));
    assert!(module.add_many(&slices(&first[..100])).unwrap().iter().all(|&n| !n));
    assert_eq!(module.count().unwrap(), Some(40_000));
    let info = module.info().unwrap();
    assert_eq!((info.items, info.shards), (Some(40_000), Some(12)));
    runtime.block_on(bitmap.add_many(&slices(&second))).unwrap();
    assert!(runtime.block_on(bitmap.contains_many(&slices(&second))).unwrap().iter().all(|&p| p));
    let estimated = runtime.block_on(bitmap.info()).unwrap().estimated_items.unwrap();
    assert!((38_000.0..42_000.0).contains(&estimated), "{estimated}");

    // The plain sync cluster connection works too, through the move.
    let mut plain = RedisFilter::new(client.get_connection().unwrap(), module.layout().clone());
    assert!(plain.contains_many(&slices(&second)).unwrap().iter().all(|&p| p));
    cluster.move_all_slots(1, 2);
    assert!(plain.contains_many(&slices(&first)).unwrap().iter().all(|&p| p), "plain sync: lost items");
    assert!(plain.add_many(&slices(&items("third-", 1000))).unwrap().iter().all(|&n| n));
    assert_eq!(plain.count().unwrap(), Some(41_000));
}
