//! The expandable filter grown from 1,000 items: at every doubling of the
//! item count, bits per item (beside RedisBloom's scalable filter grown the
//! same way, computed with bloomkit's copy of its sizing), the
//! false-positive rate measured on 100,000 never-added items, the rate
//! guaranteed, fingerprint lengths, cache lines per lookup, and the slowest
//! single insert (growth is incremental: no insert should stall).
//!
//!   cargo run --release -p bloomkit-core --example xf_growth -- [N] [ERROR_RATE...]
//!
//! N defaults to 2,000,000, the rates to 0.01 and 0.001.

use std::time::{Duration, Instant};

use bloomkit_core::bf::{Chain, ChainParams};
use bloomkit_core::xf::XfFilter;
use bloomkit_core::Limits;

const START: u64 = 1000;
const PROBES: u64 = 100_000;

fn member(i: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k
}

fn stranger(i: u64) -> [u8; 9] {
    let mut k = member(i);
    k[8] = 1;
    k
}

fn run(n: u64, error: f64) {
    println!("\nerror rate {error}, grown from {START} to {n} items");
    println!(
        "{:>11} {:>9} {:>9} {:>6} {:>10} {:>10} {:>5} {:>7} {:>6} {:>6} {:>9} {:>9}",
        "items",
        "xf_bits",
        "rb_bits",
        "ratio",
        "fpr",
        "bound",
        "exp",
        "fp_new",
        "fp_old",
        "lines",
        "max_lines",
        "worst_bits"
    );
    let mut f = XfFilter::new(error, START, 1 << 36, Limits::NONE).expect("a filter");
    let mut rb =
        Chain::new(ChainParams { capacity: START, error, expansion: 2, scaling: true }, Limits::NONE)
            .expect("a chain");
    let mut next = 2 * START;
    let mut slowest = Duration::ZERO;
    let mut slow = Vec::new();
    let mut worst_bits = 0f64;
    let (mut sum_ratio, mut points) = (0.0, 0u32);
    for i in 0..n {
        let item = member(i);
        let before = (f.is_migrating(), f.expansions());
        let t = Instant::now();
        f.insert(&item, Limits::NONE).expect("insert");
        let took = t.elapsed();
        slowest = slowest.max(took);
        if took > Duration::from_millis(1) {
            slow.push((took, i, before, (f.is_migrating(), f.expansions())));
        }
        rb.add(&item, Limits::NONE).expect("rb add");
        let count = i + 1;
        if count >= 2 * START {
            worst_bits = worst_bits.max(f.size_bytes() as f64 * 8.0 / count as f64);
        }
        if count == next || count == n {
            let fp = (0..PROBES).filter(|&j| f.contains(&stranger(j * 7919 + count))).count();
            let info = f.info();
            let bits = f.size_bytes() as f64 * 8.0 / count as f64;
            let rb_bits = rb.size_bytes() as f64 * 8.0 / count as f64;
            let sample = 20_000u64.min(count);
            let (mut lines, mut max_lines) = (0u64, 0u64);
            for j in 0..sample {
                let c = f.lookup_cost(&member(j * (count / sample)));
                let d = f.lookup_cost(&stranger(j));
                lines += c.cache_lines + d.cache_lines;
                max_lines = max_lines.max(c.cache_lines).max(d.cache_lines);
            }
            println!(
                "{:>11} {:>9.2} {:>9.2} {:>6.3} {:>10.6} {:>10.6} {:>5} {:>7} {:>6} {:>6.2} {:>9} {:>9.2}",
                count,
                bits,
                rb_bits,
                bits / rb_bits,
                fp as f64 / PROBES as f64,
                info.guaranteed_rate,
                info.expansions,
                info.newest_fingerprint_bits,
                info.oldest_fingerprint_bits,
                lines as f64 / (2 * sample) as f64,
                max_lines,
                worst_bits
            );
            if count == next {
                sum_ratio += bits / rb_bits;
                points += 1;
                next *= 2;
            }
        }
    }
    println!(
        "mean xf/rb bits ratio over the doublings: {:.3}; slowest insert: {:?}; inserts over 1 ms: {}",
        sum_ratio / f64::from(points),
        slowest,
        slow.len()
    );
    slow.sort();
    for (took, i, before, after) in slow.iter().rev().take(5) {
        println!("  {took:?} at insert {i}: (migrating, expansions) {before:?} -> {after:?}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = args.first().and_then(|a| a.replace('_', "").parse::<f64>().ok()).unwrap_or(2e6) as u64;
    let rates: Vec<f64> = args.iter().skip(1).filter_map(|a| a.parse().ok()).collect();
    for error in if rates.is_empty() { vec![0.01, 0.001] } else { rates } {
        run(n, error);
    }
}
