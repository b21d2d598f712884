//! XF's and qfilter's operations, each in a function of its own, for
//! `bench/xf-instructions.sh` to run under Callgrind, which counts the
//! instructions executed inside each function (`--toggle-collect`).
//!
//! Why instructions: this shared machine's timings move by 30% between runs
//! of the same binary, so a change of 5% to XF's hot paths cannot be told
//! from the noise in time; the instructions an operation executes are the
//! same on every run, and where both filters are cache-resident their ratio
//! says how much more work XF does per item (in time the ratio is smaller:
//! both wait on memory alike, `bench/xf-inproc.sh`).
//!
//! The operations, in order, on `ITEMS` items: inserted one by one; each
//! looked up (hits); as many never added looked up (misses); the hits and
//! the misses again in batches of 100 as `XF.MEXISTS` takes them (qfilter:
//! one by one). XF hashes through SipHash-1-3 keyed with a fixed seed (the
//! same run every time), qfilter through its own hasher, each by its
//! `Hash` path. Each count is printed too, so that no work is optimised
//! away.

use std::hint::black_box;

#[path = "../items.rs"]
mod items;
use items::items;

use bloomkit_core::common::memory::Limits;
use bloomkit_core::xf::{Seed, XfDefaults, XfFilter, XfHash, XfParams};

const BATCH: usize = 100;

#[inline(never)]
fn xf_insert(f: &mut XfFilter, items: &[u64]) {
    for &x in items {
        f.insert_hash(f.hash_of(&x), Limits::NONE).expect("XF refused an insert without limits");
    }
}

#[inline(always)]
fn xf_lookup(f: &XfFilter, items: &[u64]) -> usize {
    items.iter().filter(|&x| f.contains_hash(f.hash_of(black_box(x)))).count()
}

#[inline(always)]
fn xf_batch(f: &XfFilter, items: &[u64]) -> usize {
    let (mut hashes, mut n) = ([XfHash(0); BATCH], 0);
    for chunk in items.chunks(BATCH) {
        for (h, x) in hashes.iter_mut().zip(chunk) {
            *h = f.hash_of(black_box(x));
        }
        f.contains_each(&hashes[..chunk.len()], |b| n += usize::from(b));
    }
    n
}

fn xf(rate: f64, added: &[u64], absent: &[u64]) -> [usize; 4] {
    let params = XfParams { error_rate: rate, ..XfDefaults::BLOOMKIT.params() };
    let mut f = XfFilter::with_seed(params, Seed([1, 2]), Limits::NONE).expect("XF with its defaults");
    xf_insert(&mut f, added);
    [xf_hit(&f, added), xf_miss(&f, absent), xf_hit_x100(&f, added), xf_miss_x100(&f, absent)]
}

// One function per operation, which is what Callgrind counts in; each
// body differs by a constant, or the compiler would make them one.
#[inline(never)]
fn xf_hit(f: &XfFilter, items: &[u64]) -> usize {
    black_box(0);
    xf_lookup(f, items)
}

#[inline(never)]
fn xf_miss(f: &XfFilter, items: &[u64]) -> usize {
    black_box(1);
    xf_lookup(f, items)
}

#[inline(never)]
fn xf_hit_x100(f: &XfFilter, items: &[u64]) -> usize {
    black_box(2);
    xf_batch(f, items)
}

#[inline(never)]
fn xf_miss_x100(f: &XfFilter, items: &[u64]) -> usize {
    black_box(3);
    xf_batch(f, items)
}

#[inline(never)]
fn qfilter_insert(f: &mut qfilter::Filter, items: &[u64]) {
    for &x in items {
        f.insert(x).expect("qfilter refused an insert below its maximum");
    }
}

#[inline(always)]
fn qfilter_lookup(f: &qfilter::Filter, items: &[u64]) -> usize {
    items.iter().filter(|&&x| f.contains(black_box(x))).count()
}

fn qfilter(rate: f64, added: &[u64], absent: &[u64]) -> [usize; 4] {
    let mut f = qfilter::Filter::new_resizeable(100, added.len() as u64, rate).expect("qfilter parameters");
    qfilter_insert(&mut f, added);
    [
        qfilter_hit(&f, added),
        qfilter_miss(&f, absent),
        qfilter_hit_x100(&f, added),
        qfilter_miss_x100(&f, absent),
    ]
}

// qfilter has no batch path: its batch functions look up one by one.
#[inline(never)]
fn qfilter_hit(f: &qfilter::Filter, items: &[u64]) -> usize {
    black_box(4);
    qfilter_lookup(f, items)
}

#[inline(never)]
fn qfilter_miss(f: &qfilter::Filter, items: &[u64]) -> usize {
    black_box(5);
    qfilter_lookup(f, items)
}

#[inline(never)]
fn qfilter_hit_x100(f: &qfilter::Filter, items: &[u64]) -> usize {
    black_box(6);
    qfilter_lookup(f, items)
}

#[inline(never)]
fn qfilter_miss_x100(f: &qfilter::Filter, items: &[u64]) -> usize {
    black_box(7);
    qfilter_lookup(f, items)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: xf-instructions xf|qfilter RATE ITEMS, or xf-instructions kernel";
    if args == ["kernel"] {
        println!("{}", bloomkit_core::xf::Kernel::get().name());
        return;
    }
    let [row, rate, n] = args.as_slice() else {
        eprintln!("{usage}");
        std::process::exit(2)
    };
    let (Ok(rate), Ok(n)) = (rate.parse::<f64>(), n.parse::<u64>()) else {
        eprintln!("{usage}");
        std::process::exit(2)
    };
    let (added, absent) = (items(1, n), items(2, n));
    let found = match row.as_str() {
        "xf" => xf(rate, &added, &absent),
        "qfilter" => qfilter(rate, &added, &absent),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2)
        }
    };
    println!("{found:?}");
}
