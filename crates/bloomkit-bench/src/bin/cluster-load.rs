//! `bloomkit-cluster-load`: loads and probes one sharded filter in a Redis
//! Cluster through bloomkit-client, as an application would: a
//! `Layout::sharded(.., Over::Module, ..)` run by `RedisFilter` over
//! `BlockingCluster`, so each call is split per shard into `BF.INSERT`s
//! (or `BF.MEXISTS`es) that go to the shards' masters in parallel; with
//! `--over expandable`, `Over::Expandable`: `XF.INSERT ... NX`es (adds
//! answer new only for items not in yet) and `XF.MEXISTS`es, `--capacity`
//! then the whole filter's first size and `--max-capacity` its limit.
//!
//! ```text
//! bloomkit-cluster-load --nodes 127.0.0.1:7000,127.0.0.1:7001 --name big --shards 3 \
//!     --capacity 1000000000 --rate 0.01 [--over module|expandable] MODE \
//!     [--first N --count N --prefix P --threads T]
//! ```
//! Modes:
//! - `reserve`: creates every shard at its per-shard capacity (the client's
//!   `reserve`, one `BF.RESERVE` per shard); prints the shard keys.
//! - `add`: adds items `<prefix><12-digit number>` for the numbers
//!   first..first+count (as `bloomkit-loadgen --sequence`: distinct by
//!   construction), each thread its own stretch and its own cluster
//!   connection, `--call-items` items per `add_many`.
//! - `contains`: the same items through `contains_many`, counting the ones
//!   found (never-added items: the false positives).
//! - `info`: the client's `count` and `info` of the whole filter.
//!
//! Prints one line of `key=value` pairs; progress goes to stderr.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bloomkit_client::redis::cluster::ClusterClient;
use bloomkit_client::{BlockingCluster, Filter, Layout, Options, Over, RedisFilter};

/// Digits of the item number, as bloomkit-loadgen writes `{item}`.
const DIGITS: usize = 12;

struct Args {
    nodes: Vec<String>,
    name: String,
    shards: u32,
    capacity: u64,
    max_capacity: Option<u64>,
    over: Over,
    rate: f64,
    batch_size: usize,
    timeout: Duration,
    mode: String,
    first: u64,
    count: u64,
    prefix: Option<String>,
    threads: usize,
    call_items: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: bloomkit-cluster-load --nodes HOST:PORT[,..] [--name big] [--shards 3] --capacity N \
         [--max-capacity N] [--over module|expandable] [--rate 0.01] [--batch-size 1000] \
         [--timeout-secs 120] reserve|add|contains|info \
         [--first 0] [--count N] [--prefix item:|probe:] [--threads 4] [--call-items 30000]"
    );
    std::process::exit(2)
}

/// A number, accepting 1e9 as well as 1000000000.
fn num<T: std::str::FromStr>(flag: &str, v: String) -> T {
    v.parse().ok().or_else(|| v.parse::<f64>().ok().and_then(|f| f.to_string().parse().ok())).unwrap_or_else(
        || {
            eprintln!("{flag}: not a number: {v}");
            usage()
        },
    )
}

fn parse_args() -> Args {
    let mut a = Args {
        nodes: Vec::new(),
        name: "big".into(),
        shards: 3,
        capacity: 0,
        max_capacity: None,
        over: Over::Module,
        rate: 0.01,
        batch_size: 1000,
        timeout: Duration::from_secs(120),
        mode: String::new(),
        first: 0,
        count: 0,
        prefix: None,
        threads: 4,
        call_items: 30_000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--nodes" => a.nodes = value().split(',').map(|n| format!("redis://{n}/")).collect(),
            "--name" => a.name = value(),
            "--shards" => a.shards = num("--shards", value()),
            "--capacity" => a.capacity = num("--capacity", value()),
            "--max-capacity" => a.max_capacity = Some(num("--max-capacity", value())),
            "--over" => {
                a.over = match value().as_str() {
                    "module" => Over::Module,
                    "expandable" => Over::Expandable,
                    _ => usage(),
                }
            }
            "--rate" => a.rate = num("--rate", value()),
            "--batch-size" => a.batch_size = num("--batch-size", value()),
            "--timeout-secs" => a.timeout = Duration::from_secs(num("--timeout-secs", value())),
            "--first" => a.first = num("--first", value()),
            "--count" => a.count = num("--count", value()),
            "--prefix" => a.prefix = Some(value()),
            "--threads" => a.threads = num::<usize>("--threads", value()).max(1),
            "--call-items" => a.call_items = num::<usize>("--call-items", value()).max(1),
            "reserve" | "add" | "contains" | "info" if a.mode.is_empty() => a.mode = arg,
            _ => usage(),
        }
    }
    if a.nodes.is_empty() || a.capacity == 0 || a.mode.is_empty() {
        usage();
    }
    a
}

fn main() {
    let a = parse_args();
    if let Err(e) = run(&a) {
        eprintln!("bloomkit-cluster-load {}: {e}", a.mode);
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    // No response timeout by default on the cluster client: a master that
    // stops answering would hang the run instead of failing it.
    let client = ClusterClient::builder(a.nodes.clone()).response_timeout(a.timeout).build()?;
    let layout = Layout::sharded(
        a.name.clone(),
        a.shards,
        a.over,
        Options {
            batch_size: a.batch_size,
            max_capacity: a.max_capacity,
            ..Options::new(a.capacity, a.rate)
        },
    )?;
    let connect = || BlockingCluster::connect(&client).map(|conn| RedisFilter::new(conn, layout.clone()));
    match a.mode.as_str() {
        "reserve" => {
            connect()?.reserve()?;
            println!("shards={} keys={}", a.shards, layout.keys().join(","));
        }
        "info" => {
            let mut filter = connect()?;
            let count = filter.count()?.unwrap_or(0);
            let info = filter.info()?;
            println!(
                "count={count} items={} capacity={} bytes={} filters={} shards={} rate={}",
                info.items.unwrap_or(0),
                info.capacity,
                info.bytes,
                info.filters.unwrap_or(0),
                info.shards.unwrap_or(0),
                info.estimated_error_rate.unwrap_or(0.0)
            );
        }
        mode => {
            let add = mode == "add";
            let prefix = a.prefix.clone().unwrap_or_else(|| if add { "item:" } else { "probe:" }.into());
            let done = AtomicU64::new(0);
            let finished = AtomicBool::new(false);
            let start = Instant::now();
            let positives = std::thread::scope(|scope| {
                let threads = a.threads.min(a.count.max(1) as usize);
                let workers: Vec<_> = (0..threads as u64)
                    .map(|t| {
                        // Thread t's own stretch of the numbers.
                        let from = a.first + a.count * t / threads as u64;
                        let to = a.first + a.count * (t + 1) / threads as u64;
                        let (prefix, done, connect) = (&prefix, &done, &connect);
                        scope.spawn(move || -> Result<u64, String> {
                            let mut filter = connect().map_err(|e| e.to_string())?;
                            stretch(&mut filter, add, prefix, from, to, a.call_items, done)
                                .map_err(|e| e.to_string())
                        })
                    })
                    .collect();
                let finished = &finished;
                let reporter = scope.spawn(|| progress(&done, a.count, start, finished));
                let results: Vec<_> =
                    workers.into_iter().map(|w| w.join().expect("worker panicked")).collect();
                finished.store(true, Ordering::Relaxed);
                reporter.thread().unpark();
                reporter.join().expect("reporter panicked");
                results.into_iter().sum::<Result<u64, String>>()
            })?;
            let seconds = start.elapsed().as_secs_f64();
            let (label, rate_label) = if add { ("new", "items_per_s") } else { ("found", "probes_per_s") };
            println!(
                "items={} {label}={positives} seconds={seconds:.3} {rate_label}={:.0} fraction={:.6}",
                a.count,
                a.count as f64 / seconds,
                positives as f64 / a.count.max(1) as f64
            );
        }
    }
    Ok(())
}

/// Adds (or looks up) the items numbered from..to, `call_items` per call;
/// returns how many were new (or found).
fn stretch(
    filter: &mut RedisFilter<BlockingCluster>,
    add: bool,
    prefix: &str,
    from: u64,
    to: u64,
    call_items: usize,
    done: &AtomicU64,
) -> bloomkit_client::Result<u64> {
    use std::io::Write as _;
    let width = prefix.len() + DIGITS;
    let mut bytes = Vec::with_capacity(call_items * width);
    let mut positives = 0;
    let mut next = from;
    while next < to {
        let n = (to - next).min(call_items as u64);
        bytes.clear();
        for i in next..next + n {
            write!(bytes, "{prefix}{i:0DIGITS$}").expect("write to a Vec");
        }
        let items: Vec<&[u8]> = bytes.chunks(width).collect();
        let answers = if add { filter.add_many(&items)? } else { filter.contains_many(&items)? };
        positives += answers.iter().filter(|&&b| b).count() as u64;
        done.fetch_add(n, Ordering::Relaxed);
        next += n;
    }
    Ok(positives)
}

/// A line on stderr every minute: items so far and the rate.
fn progress(done: &AtomicU64, total: u64, start: Instant, finished: &AtomicBool) {
    let mut last = Instant::now();
    while !finished.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(500));
        if last.elapsed() >= Duration::from_secs(60) && !finished.load(Ordering::Relaxed) {
            last = Instant::now();
            let n = done.load(Ordering::Relaxed);
            let s = start.elapsed().as_secs_f64();
            eprintln!(
                "  {n} of {total} ({:.1}%) in {s:.0} s, {:.2}M items/s",
                100.0 * n as f64 / total.max(1) as f64,
                n as f64 / s / 1e6
            );
        }
    }
}
