//! A real Redis Cluster of three masters with bloomkit on each: sharded
//! filters place shards on every master and keep working while a master's
//! slots (and the filters in them) move to another.

use bloomkit_client::{
    AsyncFilter, AsyncRedisFilter, BlockingCluster, Filter, Layout, Options, Over, RedisFilter,
};
use bloomkit_testkit::{Module, TestCluster};

use crate::common;
use common::{items, slices};

#[test]
fn sharded_filters_span_the_cluster_and_survive_resharding() {
    let cluster = TestCluster::start(3, &[Module::bloomkit()]);
    let client = redis::cluster::ClusterClient::new(cluster.urls()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();

    let options = Options { batch_size: 500, ..Options::new(60_000, 0.001) };
    let mut module = RedisFilter::new(
        BlockingCluster::connect(&client).unwrap(),
        Layout::sharded("clicks", 12, Over::Module, options.clone()).unwrap(),
    );
    let mut bitmap = AsyncRedisFilter::new(
        runtime.block_on(client.get_async_connection()).unwrap(),
        Layout::sharded("urls", 12, Over::Bitmap, options).unwrap(),
    );
    let first = items("first", 30_000);
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

    // The parallel transports answer for everything they added.
    assert!(module.contains_many(&slices(&first)).unwrap().iter().all(|&p| p), "module: lost items");
    assert!(
        runtime.block_on(bitmap.contains_many(&slices(&first))).unwrap().iter().all(|&p| p),
        "bitmap: lost items"
    );
    let estimated = runtime.block_on(bitmap.info()).unwrap().estimated_items.unwrap();
    assert!((28_500.0..31_500.0).contains(&estimated), "{estimated}");
    let module_layout = module.layout().clone();
    let bitmap_layout = bitmap.layout().clone();
    drop((module, bitmap));

    // Through slot moves, on the async cluster connection (redis 1.x): every
    // call has a deadline, so a connection that hangs after its node became
    // a replica fails the test instead of stalling it. (redis 0.32's did, now
    // and then; scripts/reshard-soak.sh runs it 15 times, 30 reshards.)
    let deadline = std::time::Duration::from_secs(60);
    let mut module =
        AsyncRedisFilter::new(runtime.block_on(client.get_async_connection()).unwrap(), module_layout);
    let mut bitmap =
        AsyncRedisFilter::new(runtime.block_on(client.get_async_connection()).unwrap(), bitmap_layout);
    let second = items("second", 10_000);
    let mut added = 30_000;
    for (from, to) in [(0, 1), (1, 2)] {
        // Move all of one master's slots, with their filters, to another:
        // the emptied master becomes a replica of `to`.
        cluster.move_all_slots(from, to);
        let found: Vec<bool> =
            block_within(&runtime, deadline, "module lookups", module.contains_many(&slices(&first)))
                .unwrap();
        assert!(found.iter().all(|&p| p), "module: lost items after a move");
        let found: Vec<bool> =
            block_within(&runtime, deadline, "bitmap lookups", bitmap.contains_many(&slices(&first)))
                .unwrap();
        assert!(found.iter().all(|&p| p), "bitmap: lost items after a move");
        let batch = &second[(to - 1) * 5000..to * 5000];
        let new: Vec<bool> =
            block_within(&runtime, deadline, "module adds", module.add_many(&slices(batch))).unwrap();
        assert!(new.iter().all(|&n| n));
        let new: Vec<bool> =
            block_within(&runtime, deadline, "module repeats", module.add_many(&slices(&first[..100])))
                .unwrap();
        assert!(new.iter().all(|&n| !n));
        block_within(&runtime, deadline, "bitmap adds", bitmap.add_many(&slices(batch))).unwrap();
        let found: Vec<bool> =
            block_within(&runtime, deadline, "bitmap lookups", bitmap.contains_many(&slices(batch))).unwrap();
        assert!(found.iter().all(|&p| p));
        added += 5000;
        assert_eq!(block_within(&runtime, deadline, "count", module.count()).unwrap(), Some(added));
    }
    // The sync cluster connection follows the moves too.
    let mut module = RedisFilter::new(client.get_connection().unwrap(), module.layout().clone());
    let info = module.info().unwrap();
    assert_eq!((info.items, info.shards), (Some(40_000), Some(12)));
}

/// Runs a future with a deadline; past it the test fails, naming the call.
fn block_within<T>(
    runtime: &tokio::runtime::Runtime,
    deadline: std::time::Duration,
    what: &str,
    f: impl std::future::Future<Output = T>,
) -> T {
    runtime
        .block_on(async { tokio::time::timeout(deadline, f).await })
        .unwrap_or_else(|_| panic!("{what}: the async cluster connection hung for {deadline:?}"))
}
