//! A real Redis Cluster of three masters with bloomkit on each: sharded
//! filters place shards on every master and keep working while a master's
//! slots (and the filters in them) move to another; a sharded expandable
//! filter, on Redis 7.0 and Valkey 9.1 clusters with a replica per master,
//! answers every item through slots' migrations (ASK, then MOVED), one of
//! them under a stream of writes, a failover by hand and a master's crash.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bloomkit_client::redis::cluster::ClusterClient;
use bloomkit_client::{
    AsyncFilter, AsyncRedisFilter, BlockingCluster, Filter, Layout, Options, Over, RedisFilter,
};
use bloomkit_testkit::{per_server, wait_until, Module, Reply, Server, TestCluster};

use crate::common;
use common::{items, slices};

/// Every master of [`sharded_filters_span_the_cluster_and_survive_resharding`]'s
/// cluster holds shards of both filters, `{clicks:..}` and `{urls:..}`.
fn every_master_holds_shards(cluster: &TestCluster) {
    for (i, node) in cluster.nodes.iter().enumerate() {
        let mut c = node.conn();
        let keys = c.key_names();
        assert!(keys.iter().any(|k| k.starts_with("{clicks:")), "master {i} has no module shard: {keys:?}");
        assert!(keys.iter().any(|k| k.starts_with("{urls:")), "master {i} has no bitmap shard: {keys:?}");
    }
}

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

    every_master_holds_shards(&cluster);

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

/// Errors and redirections a node has answered so far: `INFO errorstats`
/// (`errorstat_MOVED:count=3`) and `INFO commandstats`' ASKING calls.
fn answered(node: &bloomkit_testkit::TestServer, what: &str) -> u64 {
    let mut c = node.conn();
    let (section, prefix) = match what {
        "ASKING" => ("commandstats", "cmdstat_asking:calls="),
        _ => ("errorstats", ""),
    };
    let text = String::from_utf8_lossy(c.call(&["INFO", section]).as_bytes()).into_owned();
    let prefix = if prefix.is_empty() { format!("errorstat_{what}:count=") } else { prefix.to_string() };
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// The `XF.INSERT`s the masters have run so far.
fn inserts(cluster: &TestCluster) -> u64 {
    cluster
        .masters()
        .into_iter()
        .map(|m| {
            let text =
                String::from_utf8_lossy(cluster.nodes[m].conn().call(&["INFO", "commandstats"]).as_bytes())
                    .into_owned();
            text.lines()
                .find_map(|l| l.strip_prefix("cmdstat_xf.insert:calls="))
                .and_then(|rest| rest.split(',').next())
                .map_or(0, |n| n.parse::<u64>().unwrap())
        })
        .sum()
}

/// Items `prefix-0`... whose adds answered new, as slices.
fn added<'a>(all: &'a [Vec<u8>], answers: &[bool]) -> Vec<&'a [u8]> {
    all.iter().zip(answers).filter(|(_, &new)| new).map(|(i, _)| i.as_slice()).collect()
}

per_server!(expandable_filter_across_a_cluster);

/// One expandable filter over 12 keys of a 3-master cluster (a replica
/// each): adds are add-if-absent per shard (a repeat answers false; the
/// count is the new answers), each call sends one `XF.INSERT ... NX` per
/// shard key, every item is found and the false-positive rate measured
/// stays within the bound the filter reports; removes and counts go to an
/// item's shard. Then every item is still answered, and writes go on,
/// while one shard's slot migrates by hand (ASK while its key has moved
/// and the slot has not, MOVED after), while another's migrates under a
/// stream of adds from a second connection, through a failover by hand
/// (`CLUSTER FAILOVER`), and through the crash of a master (killed, no
/// warning) until its replica takes over: the transport's retries cover
/// the seconds its slots go unserved (connections refused, then
/// CLUSTERDOWN while the cluster is failed).
fn expandable_filter_across_a_cluster(server: Server) {
    let mut cluster = TestCluster::with_replicas(server, 3, 1, &[Module::bloomkit()]);
    // A response timeout, so that a node that stops answering fails the
    // test rather than hanging it.
    let client =
        ClusterClient::builder(cluster.urls()).response_timeout(Duration::from_secs(30)).build().unwrap();
    let options = Options { batch_size: 500, ..Options::new(1000, 0.01) };
    let layout = Layout::sharded("seen", 12, Over::Expandable, options).unwrap();
    let connect = || RedisFilter::new(BlockingCluster::connect(&client).unwrap(), layout.clone());
    let mut seen = connect();

    // Adds: new items answer true, up to the rate (an add-if-absent takes
    // an item that matches for present); repeats false; the count is the
    // new answers, summed over the shards.
    let first = items("first", 30_000);
    let answers = seen.add_many(&slices(&first)).unwrap();
    let mut expected = answers.iter().filter(|&&n| n).count() as u64;
    assert!(expected >= 29_600, "{expected} of 30 000 new items answered new");
    assert!(seen.add_many(&slices(&first)).unwrap().iter().all(|&n| !n), "a repeat answered new");
    assert_eq!(seen.count().unwrap(), Some(expected));
    one_insert_per_shard(&cluster, &mut seen);
    expected = seen.count().unwrap().unwrap();

    rate_within_bound(&cluster, &layout, &mut seen, &first, expected);

    // Removes and counts go to the item's shard.
    let gone: Vec<&[u8]> = added(&first, &answers).into_iter().take(200).collect();
    let back = remove_and_add_back(&mut seen, &gone, &mut expected);
    // From here on, the first items checked are those an add stored (it
    // answered true) and that stay: an item whose add answered false was
    // taken for present by an entry another item stored, and goes when a
    // remove takes that entry (see `Filter::remove`).
    let mut members: Vec<&[u8]> = added(&first, &answers).into_iter().skip(200).collect();
    members.extend(gone.iter().zip(&back).filter(|(_, &n)| n).map(|(i, _)| *i));

    // A slot migrating by hand: its key moved, the slot not yet (ASK),
    // then the slot handed over (MOVED).
    let during = items("migrating", 3000);
    migrate_by_hand(&cluster, &layout, &mut seen, &during, &mut members, &mut expected);

    // Another shard's slot migrates while a second connection streams adds:
    // rounds of adds land while the key is on the target and the slot not
    // yet (ASK), and after (MOVED).
    let streamed = stream_through_a_migration(&cluster, &layout, &connect);
    for (batch, answers) in &streamed {
        expected += answers.iter().filter(|&&n| n).count() as u64;
        members.extend(added(batch, answers));
    }
    assert!(seen.contains_many(&members).unwrap().iter().all(|&p| p), "lost a streamed item");
    assert_eq!(seen.count().unwrap(), Some(expected));

    // A failover by hand (CLUSTER FAILOVER on a replica): the old master
    // answers MOVED once demoted, and writes reaching it meanwhile wait.
    let (old, new, handover, answers) = failover_by_hand(&cluster, &layout, &mut seen, &mut expected);
    members.extend(added(&handover, &answers));
    assert!(seen.contains_many(&members).unwrap().iter().all(|&p| p), "lost items in the handover");
    assert_eq!(seen.count().unwrap(), Some(expected));

    // A master crashes (kill -9): the old master, its replica now, takes
    // over once the others mark it failed, and calls made meanwhile wait
    // for that (connections refused, then CLUSTERDOWN).
    let (after, answers) = crash_a_master(&mut cluster, &mut seen, old, new, &mut expected);
    members.extend(added(&after, &answers));
    assert!(seen.contains_many(&members).unwrap().iter().all(|&p| p), "lost items in the failover");
    assert_eq!(seen.count().unwrap(), Some(expected));
    assert_eq!(seen.info().unwrap().items, Some(expected));
    // The sync cluster connection reads the same filter after all this.
    let mut plain = RedisFilter::new(client.get_connection().unwrap(), layout.clone());
    assert!(plain.contains_many(&members).unwrap().iter().all(|&p| p), "sync connection: lost items");
    assert_eq!(plain.count().unwrap(), Some(expected));
}

/// [`expandable_filter_across_a_cluster`]: every master holds a shard, and
/// a call sends one XF.INSERT per shard key (3000 items over 12 shards, 500
/// a command at most: about 250 each).
fn one_insert_per_shard(cluster: &TestCluster, seen: &mut RedisFilter<BlockingCluster>) {
    for m in cluster.masters() {
        let keys = cluster.nodes[m].conn().cmd("KEYS {seen:*");
        assert!(!keys.as_array().is_empty(), "master {m} holds no shard");
    }
    let before = inserts(cluster);
    seen.add_many(&slices(&items("one-round", 3000))).unwrap();
    assert_eq!(inserts(cluster) - before, 12, "XF.INSERTs for one call of 3000 items over 12 shards");
}

/// [`expandable_filter_across_a_cluster`]: removes and counts go to the
/// item's shard; the items `gone` are removed and added back, `expected`
/// following. Returns the answers of adding them back.
fn remove_and_add_back(
    seen: &mut RedisFilter<BlockingCluster>,
    gone: &[&[u8]],
    expected: &mut u64,
) -> Vec<bool> {
    assert!(seen.remove_many(gone).unwrap().iter().all(|&r| r), "a remove found nothing");
    *expected -= 200;
    assert_eq!(seen.count().unwrap(), Some(*expected));
    let still = seen.contains_many(gone).unwrap().iter().filter(|&&p| p).count();
    assert!(still <= 10, "{still} of 200 removed items still found");
    let back = seen.add_many(gone).unwrap();
    assert!(back.iter().filter(|&&n| n).count() >= 190, "{back:?}");
    *expected += back.iter().filter(|&&n| n).count() as u64;
    assert_eq!(seen.count_of(gone[0]).unwrap(), 1);
    assert_eq!(seen.count().unwrap(), Some(*expected));
    back
}

/// [`expandable_filter_across_a_cluster`]: the first shard's slot migrates
/// by hand while the shard's members are looked up and `during` is added
/// (ASK followed), then is handed over (MOVED followed); `members` and
/// `expected` follow the adds.
fn migrate_by_hand<'a>(
    cluster: &TestCluster,
    layout: &Layout,
    seen: &mut RedisFilter<BlockingCluster>,
    during: &'a [Vec<u8>],
    members: &mut Vec<&'a [u8]>,
    expected: &mut u64,
) {
    let mine: Vec<&[u8]> = members.iter().copied().filter(|i| layout.shard_of(i) == 0).collect();
    let (from, _) = migrate_slot(cluster, layout.shards()[0].name(), |_, to| {
        let asked = answered(&cluster.nodes[to], "ASKING");
        assert!(seen.contains_many(&mine).unwrap().iter().all(|&p| p), "lost items while the slot migrates");
        let answers = seen.add_many(&slices(during)).unwrap();
        *expected += answers.iter().filter(|&&n| n).count() as u64;
        assert!(answered(&cluster.nodes[to], "ASKING") > asked, "no ASK was followed");
        members.extend(added(during, &answers));
    });
    let moved = answered(&cluster.nodes[from], "MOVED");
    assert!(seen.contains_many(members).unwrap().iter().all(|&p| p), "lost items after the slot moved");
    assert!(answered(&cluster.nodes[from], "MOVED") > moved, "no MOVED was followed");
    assert_eq!(seen.count().unwrap(), Some(*expected));
}

/// [`expandable_filter_across_a_cluster`]: the replica of the master of the
/// third shard takes over by hand (`CLUSTER FAILOVER`) while items are
/// added, `expected` following. Returns the old master, the new one, the
/// items and their answers (the caller keeps the members).
fn failover_by_hand(
    cluster: &TestCluster,
    layout: &Layout,
    seen: &mut RedisFilter<BlockingCluster>,
    expected: &mut u64,
) -> (usize, usize, Vec<Vec<u8>>, Vec<bool>) {
    let old = cluster.master_of(layout.shards()[2].name());
    let new = cluster.replicas_of(old)[0];
    cluster.wait_replicated(old);
    cluster.nodes[new].conn().ok("CLUSTER FAILOVER");
    let handover = items("handover", 3000);
    let answers = seen.add_many(&slices(&handover)).unwrap();
    *expected += answers.iter().filter(|&&n| n).count() as u64;
    wait_until("the replica promoted", Duration::from_secs(30), || cluster.masters().contains(&new));
    cluster.wait_settled();
    (old, new, handover, answers)
}

/// [`expandable_filter_across_a_cluster`]: master `new` is killed while
/// items are added, `expected` following, until `old`, its replica, takes
/// over. Returns the items and their answers (the caller keeps the members).
fn crash_a_master(
    cluster: &mut TestCluster,
    seen: &mut RedisFilter<BlockingCluster>,
    old: usize,
    new: usize,
    expected: &mut u64,
) -> (Vec<Vec<u8>>, Vec<bool>) {
    cluster.wait_replicated(new);
    cluster.kill(new);
    let after = items("after-crash", 3000);
    let answers = seen.add_many(&slices(&after)).unwrap();
    *expected += answers.iter().filter(|&&n| n).count() as u64;
    cluster.wait_settled();
    assert!(cluster.masters().contains(&old), "the replica did not take over");
    (after, answers)
}

/// [`expandable_filter_across_a_cluster`]: every item found, the info the
/// shards' sum (`XF.INFO` Size), and the false-positive rate measured
/// within the bound the filter reports.
fn rate_within_bound(
    cluster: &TestCluster,
    layout: &Layout,
    seen: &mut RedisFilter<BlockingCluster>,
    first: &[Vec<u8>],
    expected: u64,
) {
    // Every item found; the rate measured within the bound reported.
    assert!(seen.contains_many(&slices(first)).unwrap().iter().all(|&p| p), "a false negative");
    let info = seen.info().unwrap();
    assert_eq!(
        (info.backend.as_str(), info.shards, info.items),
        ("sharded expandable", Some(12), Some(expected))
    );
    let bound = info.estimated_error_rate.unwrap();
    assert!(bound > 0.0 && bound <= 0.01, "{info:?}");
    let mut size = 0;
    for shard in layout.shards() {
        let node = cluster.master_of(shard.name());
        let reply = cluster.nodes[node].conn().call(&["XF.INFO", shard.name()]);
        let fields = reply.as_array();
        let at = fields.chunks(2).position(|f| f[0] == Reply::Simple("Size".into())).expect("a Size field");
        size += fields[2 * at + 1].as_int() as u64;
    }
    assert_eq!(info.bytes, size, "bytes: the shards' XF.INFO Size, summed");
    let probes = 100_000;
    let positives =
        seen.contains_many(&slices(&items("absent", probes))).unwrap().iter().filter(|&&p| p).count();
    let measured = positives as f64 / probes as f64;
    let sigma = (bound * (1.0 - bound) / probes as f64).sqrt();
    assert!(measured <= bound + 4.0 * sigma, "false-positive rate {measured} above the bound {bound}");
}

/// [`expandable_filter_across_a_cluster`]: a second connection (made by
/// `connect`) streams rounds of adds while a shard's slot migrates, so
/// that some land while the key is on the target and the slot not yet
/// (ASK), and some after (MOVED). Returns each round's items and answers.
fn stream_through_a_migration(
    cluster: &TestCluster,
    layout: &Layout,
    connect: &(impl Fn() -> RedisFilter<BlockingCluster> + Sync),
) -> Vec<(Vec<Vec<u8>>, Vec<bool>)> {
    let rounds = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let wait_rounds = |n: usize| {
        let at = rounds.load(Ordering::SeqCst);
        wait_until("rounds of adds from the writer", Duration::from_secs(60), || {
            rounds.load(Ordering::SeqCst) >= at + n
        });
    };
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut filter = connect();
            let mut batches = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let batch = items(&format!("stream{}", batches.len()), 2000);
                let answers = filter.add_many(&slices(&batch)).unwrap();
                batches.push((batch, answers));
                rounds.fetch_add(1, Ordering::SeqCst);
            }
            batches
        });
        wait_rounds(1);
        migrate_slot(cluster, layout.shards()[1].name(), |_, _| wait_rounds(2));
        wait_rounds(2);
        stop.store(true, Ordering::SeqCst);
        writer.join().unwrap()
    })
}

/// Moves `key`'s slot from its master to another by hand: `IMPORTING` on
/// the target, `MIGRATING` on the source, the key `MIGRATE`d, then
/// `during(from, to)` while clients meet ASK, then the slot given to the
/// target on every master (clients meet MOVED) and the cluster settled.
/// Returns (from, to).
fn migrate_slot(cluster: &TestCluster, key: &str, during: impl FnOnce(usize, usize)) -> (usize, usize) {
    let from = cluster.master_of(key);
    let to = cluster.masters().into_iter().find(|&m| m != from).unwrap();
    let slot = cluster.nodes[from].conn().call(&["CLUSTER", "KEYSLOT", key]).as_int().to_string();
    let (from_id, to_id) = (cluster.node_id(from), cluster.node_id(to));
    cluster.nodes[to].conn().ok(&format!("CLUSTER SETSLOT {slot} IMPORTING {from_id}"));
    cluster.nodes[from].conn().ok(&format!("CLUSTER SETSLOT {slot} MIGRATING {to_id}"));
    let port = cluster.nodes[to].port.to_string();
    let reply =
        cluster.nodes[from].conn().call(&["MIGRATE", "127.0.0.1", &port, "", "0", "10000", "KEYS", key]);
    assert!(!reply.is_error(), "MIGRATE: {reply:?}");
    during(from, to);
    // The target first, then the source, then the rest (as redis-cli does).
    let others = cluster.masters().into_iter().filter(|&m| m != from && m != to);
    for m in [to, from].into_iter().chain(others) {
        cluster.nodes[m].conn().ok(&format!("CLUSTER SETSLOT {slot} NODE {to_id}"));
    }
    cluster.wait_settled();
    (from, to)
}
