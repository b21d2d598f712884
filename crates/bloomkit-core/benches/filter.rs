//! Core filter speed: insert and lookup ns/op at 1e5 (in cache) and 1e8
//! (about 120 MB, beyond cache) capacity, beside the `fastbloom` crate at the
//! same number of bits and hashes. Run: `cargo bench -p bloomkit-core`.

use std::hint::black_box;
use std::time::Duration;

use bloomkit_core::bf::{Chain, ChainParams};
use bloomkit_core::Limits;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const PROBES: usize = 4096;

fn items(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{prefix}:{i:012}").into_bytes()).collect()
}

fn filled_chain(params: ChainParams, fill: u64) -> Chain {
    let mut chain = Chain::new(params, Limits::NONE).unwrap();
    for i in 0..fill {
        chain.add(&i.to_le_bytes(), Limits::NONE).unwrap();
    }
    chain
}

/// A fastbloom filter of the chain's bits and hashes, holding the same items.
fn filled_fastbloom(chain: &Chain, fill: u64) -> fastbloom::BloomFilter {
    let shape = chain.filters()[0].shape();
    let mut fast = fastbloom::BloomFilter::with_num_bits(shape.bits as usize).hashes(shape.hashes);
    for i in 0..fill {
        fast.insert(&i.to_le_bytes()[..]);
    }
    fast
}

fn bench_capacity(c: &mut Criterion, capacity: u64, label: &str) {
    let params = ChainParams { capacity, error: 0.01, expansion: 2, scaling: true };
    // Half full, as a filter in service is.
    let fill = capacity / 2;
    let mut chain = filled_chain(params, fill);
    let mut fast = filled_fastbloom(&chain, fill);
    let shape = chain.filters()[0].shape();
    let present: Vec<Vec<u8>> =
        (0..PROBES as u64).map(|i| (i * 7919 % fill).to_le_bytes().to_vec()).collect();
    let absent = items("absent", PROBES);

    let mut group = c.benchmark_group(format!("{label} ({} bits, {} hashes)", shape.bits, shape.hashes));
    group.throughput(Throughput::Elements(PROBES as u64));
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_secs(1));
    group.sample_size(20);

    group.bench_function("bloomkit lookup, present", |b| {
        b.iter(|| present.iter().filter(|i| chain.contains(black_box(i))).count())
    });
    group.bench_function("fastbloom lookup, present", |b| {
        b.iter(|| present.iter().filter(|i| fast.contains(black_box(&i[..]))).count())
    });
    group.bench_function("bloomkit lookup, absent", |b| {
        b.iter(|| absent.iter().filter(|i| chain.contains(black_box(i))).count())
    });
    group.bench_function("fastbloom lookup, absent", |b| {
        b.iter(|| absent.iter().filter(|i| fast.contains(black_box(&i[..]))).count())
    });
    group.bench_function("bloomkit batch lookup, present (contains_each)", |b| {
        b.iter(|| {
            let mut n = 0;
            chain.contains_each(&present, |found| n += usize::from(found));
            n
        })
    });
    // Inserts must not make the chain grow (fastbloom never does): each
    // filter is rebuilt, untimed, before its first sub-filter would be full.
    let mut next = 0u64;
    let mut inserted = 0u64;
    let mut insert_bench = |name: &str, mode: u8, group: &mut criterion::BenchmarkGroup<_>| {
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    if inserted + PROBES as u64 > capacity / 2 {
                        chain = filled_chain(params, fill);
                        fast = filled_fastbloom(&chain, fill);
                        inserted = 0;
                    }
                    next += 1;
                    let batch = items(&format!("new{next}"), PROBES);
                    let start = std::time::Instant::now();
                    let n = match mode {
                        0 => batch.iter().filter(|i| chain.add(i, Limits::NONE).unwrap()).count(),
                        1 => {
                            let mut n = 0;
                            chain.add_each(&batch, Limits::NONE, |r| {
                                n += usize::from(r == Ok(true));
                                true
                            });
                            n
                        }
                        _ => batch.iter().filter(|i| !fast.insert(&i[..])).count(),
                    };
                    total += start.elapsed();
                    black_box(n);
                    inserted += PROBES as u64;
                }
                total
            })
        });
    };
    insert_bench("bloomkit insert, new items", 0, &mut group);
    insert_bench("bloomkit batch insert, new items (add_each)", 1, &mut group);
    insert_bench("fastbloom insert, new items", 2, &mut group);
    group.finish();
}

fn filters(c: &mut Criterion) {
    bench_capacity(c, 100_000, "1e5 items, 1%");
    let large = std::env::var("BLOOMKIT_BENCH_LARGE").map_or(100_000_000, |v| v.parse().unwrap());
    bench_capacity(c, large, "1e8 items, 1%");
}

criterion_group!(benches, filters);
criterion_main!(benches);
