//! The expandable filter grown from its start to N items, sampled at 16
//! points per doubling of the item count (not only where a structure is at
//! its best): bits per item beside RedisBloom's scalable filter grown the
//! same way (bloomkit's copy of its sizing, rounded to the allocator's
//! classes as both filters are in a server),
//! the false-positive rate on never-added items, the rate guaranteed, cache
//! lines per lookup, and the slowest single insert. Ends with the mean and
//! the worst of each, and the highest bits per item over the lowest past
//! 10,000 items.
//!
//!   cargo run --release -p bloomkit-core --example xf_growth -- [N] [START] [ERROR_RATE...]
//!
//! N defaults to 2,000,000, START (the filters' starting capacity) to
//! 1,000, the rates to 0.01 and 0.001.

use std::time::{Duration, Instant};

use bloomkit_core::bf::{Chain, ChainParams};
use bloomkit_core::common::memory::alloc_class;
use bloomkit_core::xf::XfFilter;
use bloomkit_core::Limits;

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

/// What RedisBloom's chain holds in the server's allocator: each
/// sub-filter's bit array and the links array rounded to jemalloc's size
/// classes, and the chain itself (what `used_memory` grows by; its own
/// `MEMORY USAGE` leaves the rounding out): a 32-byte chain and 64-byte links.
fn rb_real_bytes(rb: &Chain) -> u64 {
    let links = rb.filters().len() as u64;
    rb.filters().iter().map(|f| alloc_class(f.shape().bytes)).sum::<u64>() + alloc_class(64 * links) + 32
}

/// The counts sampled: 16 per doubling from `start`.
fn points(start: u64, n: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut base = start as f64;
    while base < n as f64 {
        for k in 1..=16 {
            let c = (base * 2f64.powf(k as f64 / 16.0)).round() as u64;
            if c <= n && out.last() != Some(&c) {
                out.push(c);
            }
        }
        base *= 2.0;
    }
    out
}

/// One row of the table at `i` items: the measured rate (returned), the
/// bound, and the cache lines lookups read.
fn print_point(f: &XfFilter, i: u64, bits: f64, rb_bits: f64) -> f64 {
    let probes = 50_000u64;
    let fp = (0..probes).filter(|&j| f.contains(&stranger(j * 7919 + i))).count() as f64 / probes as f64;
    let info = f.info();
    let (mut lines, mut max_lines) = (0u64, 0u64);
    for j in 0..4000u64 {
        let c = f.lookup_cost(&member(j * (i / 4000).max(1) % i)).cache_lines;
        lines += c;
        max_lines = max_lines.max(c);
    }
    println!(
        "{:>10} {:>8.2} {:>8.2} {:>6.3} {:>9.5} {:>9.5} {:>7} {:>6.2} {:>6}",
        i,
        bits,
        rb_bits,
        bits / rb_bits,
        fp,
        info.guaranteed_rate,
        info.blocks,
        lines as f64 / 4000.0,
        max_lines
    );
    fp
}

fn run(n: u64, start: u64, error: f64) {
    println!("\nerror rate {error}, grown from {start} to {n} items, 16 points per doubling");
    println!(
        "{:>10} {:>8} {:>8} {:>6} {:>9} {:>9} {:>7} {:>6} {:>6}",
        "items", "xf_bits", "rb_bits", "ratio", "fpr", "bound", "blocks", "lines", "max_ln"
    );
    let mut f = XfFilter::new(error, start, 1 << 36, Limits::NONE).expect("a filter");
    let mut rb =
        Chain::new(ChainParams { capacity: start, error, expansion: 2, scaling: true }, Limits::NONE)
            .expect("a chain");
    let mut slowest = Duration::ZERO;
    let (mut sum_ratio, mut worst_ratio, mut count_points) = (0.0f64, 0.0f64, 0u32);
    let mut worst_ratio_past = 0.0f64;
    let (mut lo_bits, mut hi_bits) = (f64::MAX, 0f64);
    let (mut sum_xf, mut sum_rb) = (0.0, 0.0);
    let mut worst_fpr = 0f64;
    let mut i = 0u64;
    for point in points(start, n) {
        while i < point {
            let blocks_before = f.block_count();
            let t = Instant::now();
            f.insert(&member(i), Limits::NONE).expect("insert");
            let took = t.elapsed();
            if took > Duration::from_millis(2) {
                eprintln!("slow insert: {took:?} at {i}, blocks {blocks_before} -> {}", f.block_count());
            }
            slowest = slowest.max(took);
            rb.add(&member(i), Limits::NONE).expect("rb add");
            i += 1;
        }
        let bits = f.size_bytes() as f64 * 8.0 / i as f64;
        let rb_bits = rb_real_bytes(&rb) as f64 * 8.0 / i as f64;
        let ratio = bits / rb_bits;
        sum_ratio += ratio;
        worst_ratio = worst_ratio.max(ratio);
        sum_xf += bits;
        sum_rb += rb_bits;
        count_points += 1;
        if i >= 10_000 {
            worst_ratio_past = worst_ratio_past.max(ratio);
            lo_bits = lo_bits.min(bits);
            hi_bits = hi_bits.max(bits);
        }
        // Every fourth point: the rate and the lookups.
        if count_points % 4 == 0 || i == n {
            worst_fpr = worst_fpr.max(print_point(&f, i, bits, rb_bits));
        }
    }
    let (used, alloc, rest) = f.breakdown();
    println!(
        "bytes: blocks in use {used}, blocks allocated {alloc} ({:.3}), the rest {rest}",
        alloc as f64 / used as f64
    );
    println!(
        "points {count_points}: mean XF bits {:.2}, mean RB bits {:.2}, ratio of means {:.3}, mean ratio {:.3}, \
         worst ratio {:.3}; past 10,000: worst ratio {:.3}, highest/lowest XF bits {:.2}/{:.2} = {:.3}; worst fpr {:.5}; slowest insert {:?}",
        sum_xf / f64::from(count_points),
        sum_rb / f64::from(count_points),
        sum_xf / sum_rb,
        sum_ratio / f64::from(count_points),
        worst_ratio,
        worst_ratio_past,
        hi_bits,
        lo_bits,
        hi_bits / lo_bits,
        worst_fpr,
        slowest
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = args.first().and_then(|a| a.parse().ok()).unwrap_or(2_000_000);
    let start = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rates: Vec<f64> = args.iter().skip(2).filter_map(|a| a.parse().ok()).collect();
    for rate in if rates.is_empty() { vec![0.01, 0.001] } else { rates } {
        run(n, start, rate);
    }
}
