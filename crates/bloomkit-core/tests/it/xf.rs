//! The expandable filter's guarantees, each measured: no false negative
//! ever (mid-doubling and after deletes of other items included), the
//! false-positive rate at or below the configured rate at every doubling,
//! bits per item at every doubling below RedisBloom's grown filter, a
//! bounded number of cache lines per lookup whatever the growth, counts
//! never below the truth, merges that keep every member, and decoders that
//! refuse damage and round-trip whatever they accept.
//!
//! Runs in debug in CI, so growth is measured to 256,000 items here; the
//! example `xf_growth` takes it to 2 million and beyond in release.

use std::collections::HashMap;

use bloomkit_core::bf::{Chain, ChainParams};
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::xf::filter::fingerprint_bits;
use bloomkit_core::xf::{XfError, XfFilter, XfParams};
use bloomkit_core::Limits;
use proptest::prelude::*;

const NONE: Limits = Limits::NONE;

fn member(i: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k
}

fn stranger(i: u64) -> [u8; 9] {
    let mut k = member(i);
    k[8] = 0xee;
    k
}

fn fpr(f: &XfFilter, probes: u64, salt: u64) -> f64 {
    (0..probes).filter(|&j| f.contains(&stranger(j.wrapping_mul(0x9e37_79b9) ^ salt))).count() as f64
        / probes as f64
}

fn saved(f: &XfFilter) -> Vec<u8> {
    let mut w = FieldStream::default();
    f.save(&mut w);
    w.bytes
}

fn load(bytes: Vec<u8>) -> Result<XfFilter, XfError> {
    XfFilter::load(&mut FieldStream { bytes, pos: 0 }, 0, NONE)
}

/// Grows from 1,000 to 256,000 items and checks, at every doubling of the
/// items: the rate on 100,000 never-added items, the guaranteed rate, bits
/// per item (at most `max_bits`, and below RedisBloom's grown filter), and
/// the cache lines lookups read.
fn grow_and_measure(error: f64, max_bits: f64) {
    let mut f = XfFilter::new(error, 1000, 1 << 36, NONE).unwrap();
    let mut rb =
        Chain::new(ChainParams { capacity: 1000, error, expansion: 2, scaling: true }, NONE).unwrap();
    let mut next = 2000u64;
    let mut mean_lines = vec![];
    for i in 0..256_000u64 {
        f.insert(&member(i), NONE).unwrap();
        rb.add(&member(i), NONE).unwrap();
        let n = i + 1;
        if n != next {
            continue;
        }
        next *= 2;
        let rate = fpr(&f, 100_000, n);
        let info = f.info();
        assert!(rate <= error, "{n} items: measured rate {rate} above {error}");
        assert!(info.guaranteed_rate <= error, "{n} items: guaranteed {}", info.guaranteed_rate);
        let bits = f.size_bytes() as f64 * 8.0 / n as f64;
        let rb_bits = rb.size_bytes() as f64 * 8.0 / n as f64;
        assert!(bits <= max_bits && bits < rb_bits, "{n} items: {bits} bits/item (RedisBloom {rb_bits})");
        // Lookups of members and of strangers.
        let (mut lines, mut most) = (0u64, 0u64);
        for j in 0..4000u64 {
            for c in [f.lookup_cost(&member(j * (n / 4000))), f.lookup_cost(&stranger(j))] {
                lines += c.cache_lines;
                most = most.max(c.cache_lines);
            }
        }
        // The run index: the index entry, 64 slots' occupied bits and the
        // runs of at most 64 quotients, whatever the clusters' lengths.
        let mean = lines as f64 / 8000.0;
        assert!(mean <= 4.0, "{n} items: {mean} cache lines per lookup");
        assert!(most <= 12, "{n} items: a lookup read {most} cache lines");
        mean_lines.push(mean);
    }
    // Constant whatever the growth: the last doubling reads no more than the first few.
    let early = mean_lines[..3].iter().cloned().fold(0.0, f64::max);
    assert!(*mean_lines.last().unwrap() <= early * 1.6 + 1.0, "{mean_lines:?}");
    for i in (0..256_000u64).step_by(7) {
        assert!(f.contains(&member(i)));
    }
}

#[test]
fn one_percent_holds_at_every_doubling() {
    grow_and_measure(0.01, 17.0);
}

#[test]
fn a_tenth_of_a_percent_holds_at_every_doubling() {
    grow_and_measure(0.001, 21.5);
}

#[test]
fn no_member_is_missed_at_any_moment_of_a_doubling() {
    let mut f = XfFilter::new(0.01, 500, 1 << 30, NONE).unwrap();
    let mut checked_mid = 0;
    for i in 0..6000u64 {
        f.insert(&member(i), NONE).unwrap();
        if f.is_migrating() {
            checked_mid += 1;
            for j in 0..=i {
                assert!(f.contains(&member(j)), "{j} missed after insert {i}, mid-doubling");
            }
        }
    }
    assert!(checked_mid > 50, "the test saw {checked_mid} inserts mid-doubling");
    // A doubling driven only by the timer's steps, then finished.
    while f.migrate_step(3).unwrap() {
        assert!((0..6000u64).step_by(11).all(|j| f.contains(&member(j))));
    }
}

#[test]
fn deleting_half_keeps_the_other_half_and_the_rate() {
    for error in [0.01, 0.001] {
        let mut f = XfFilter::new(error, 1000, 1 << 30, NONE).unwrap();
        let n = 60_000u64;
        for i in 0..n {
            f.insert(&member(i), NONE).unwrap();
        }
        for i in (0..n).step_by(2) {
            assert_eq!(f.delete(&member(i)), Ok(true), "{i}");
        }
        assert_eq!(f.items(), n / 2);
        for i in (1..n).step_by(2) {
            assert!(f.contains(&member(i)), "{i} lost to a delete of another item");
        }
        assert!(fpr(&f, 100_000, 7) <= error);
        // The deleted are strangers now: found at most at the rate.
        let back = (0..n).step_by(2).filter(|&i| f.contains(&member(i))).count() as f64 / (n / 2) as f64;
        assert!(back <= error, "deleted items still found: {back}");
        assert!(f.guaranteed_rate() <= error);
    }
}

#[test]
fn merges_keep_every_member_and_the_rate() {
    // Same capacities (one size family: exact, whatever the growth of
    // each), and sizes of other families (each entry covered by at most two
    // coarser ones: members kept, the rate bound reported).
    for (ca, cb) in [(1000u64, 1000u64), (5000, 5000), (1000, 3000), (100, 50_000)] {
        let mut a = XfFilter::new(0.01, ca, 1 << 30, NONE).unwrap();
        let mut b = XfFilter::new(0.01, cb, 1 << 30, NONE).unwrap();
        for i in 0..20_000u64 {
            a.insert(&member(i), NONE).unwrap();
        }
        // The second source grown further: its entries are one size larger.
        for i in 0..(20_000 + ca * 3) {
            b.insert(&member(i + 10_000_000), NONE).unwrap();
        }
        let bound = a.guaranteed_rate() + b.guaranteed_rate();
        a.merge_from(&b, NONE).unwrap();
        for i in 0..20_000u64 {
            assert!(a.contains(&member(i)) && a.contains(&member(i + 10_000_000)), "{ca}/{cb}: {i}");
        }
        assert_eq!(a.items(), 40_000 + ca * 3);
        let rate = fpr(&a, 100_000, 3);
        if ca == cb {
            // One family: the merge is exact, the bound the sum of both, the rate kept.
            assert!(a.guaranteed_rate() <= bound * 1.000_001, "{} > {bound}", a.guaranteed_rate());
            assert!(rate <= 0.01, "{ca}/{cb}: merged rate {rate}");
        }
        assert!(rate <= a.guaranteed_rate() * 1.3 + 0.001, "{ca}/{cb}: {rate} vs {}", a.guaranteed_rate());
        // And the merged filter keeps working and saves.
        let back = load(saved(&a)).unwrap();
        assert_eq!(saved(&back), saved(&a));
    }
}

#[derive(Clone, Debug)]
enum Op {
    Add(u16),
    Del(u16),
    Step(u8),
    Reload,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u16..400).prop_map(Op::Add),
        2 => (0u16..400).prop_map(Op::Del),
        1 => any::<u8>().prop_map(Op::Step),
        1 => Just(Op::Reload),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Against a multiset: members are always found, counts never below the
    /// truth, card exact, through growth, timer steps, deletes of members
    /// (never of strangers, which may remove another item's entry) and
    /// save/load at any moment.
    #[test]
    fn model_check(ops in prop::collection::vec(op(), 1..700)) {
        let mut f = XfFilter::new(0.05, 16, 1 << 20, NONE).unwrap();
        let mut model: HashMap<u16, u64> = HashMap::new();
        for o in ops {
            match o {
                Op::Add(i) => {
                    let was = f.insert(&i.to_le_bytes(), NONE).unwrap();
                    if model.get(&i).copied().unwrap_or(0) > 0 {
                        prop_assert!(!was, "an item in reported new");
                    }
                    *model.entry(i).or_default() += 1;
                }
                Op::Del(i) => {
                    if model.get(&i).copied().unwrap_or(0) > 0 {
                        prop_assert_eq!(f.delete(&i.to_le_bytes()), Ok(true));
                        *model.get_mut(&i).unwrap() -= 1;
                    }
                }
                Op::Step(b) => {
                    f.migrate_step(u64::from(b)).unwrap();
                }
                Op::Reload => {
                    let bytes = saved(&f);
                    f = load(bytes.clone()).unwrap();
                    prop_assert_eq!(saved(&f), bytes);
                }
            }
            let true_items: u64 = model.values().sum();
            prop_assert_eq!(f.items(), true_items);
            for (&i, &n) in &model {
                prop_assert!(f.count(&i.to_le_bytes()) >= n, "count of {} below {}", i, n);
                if n > 0 {
                    prop_assert!(f.contains(&i.to_le_bytes()), "{} missed", i);
                }
            }
        }
    }

    /// Whatever bytes decode, as RDB fields, a DUMP payload or a SCANDUMP
    /// header, save to the same bytes and work.
    #[test]
    fn accepted_input_round_trips(mut bytes in prop::collection::vec(any::<u8>(), 0..400), seed in 0u64..1000) {
        let mut f = XfFilter::new(0.01, 40, 1 << 20, NONE).unwrap();
        for i in 0..(seed % 90) {
            f.insert(&member(i), NONE).unwrap();
        }
        // Half the cases: a real value with random damage.
        if seed % 2 == 0 {
            let mut real = saved(&f);
            for (k, b) in bytes.iter().enumerate().take(8) {
                let at = (usize::from(*b) * 131 + k * 977) % real.len();
                real[at] ^= 1 << (k % 8);
            }
            bytes = real;
        }
        if let Ok(g) = load(bytes.clone()) {
            prop_assert_eq!(saved(&g), bytes.clone());
            let mut g = g;
            let _ = g.insert(b"x", Limits::at_most(1 << 20));
            let _ = g.delete(b"x");
        }
        let _ = XfFilter::from_payload(&bytes, Limits::at_most(1 << 20));
        if let Ok(mut h) = XfFilter::from_header(&bytes, Limits::at_most(1 << 20)) {
            let _ = h.load_chunk(1 + 8, &bytes[..8.min(bytes.len())]);
            let _ = h.contains(b"x");
        }
    }
}

#[test]
fn decoders_refuse_truncation_and_check_sizes_first() {
    let mut f = XfFilter::new(0.01, 100, 1 << 20, NONE).unwrap();
    for i in 0..110u64 {
        f.insert(&member(i), NONE).unwrap();
    }
    assert!(f.is_migrating(), "a value with two tables");
    let bytes = saved(&f);
    for len in 0..bytes.len() {
        assert!(load(bytes[..len].to_vec()).is_err(), "{len}");
    }
    let payload = f.dump_payload();
    assert_eq!(saved(&XfFilter::from_payload(&payload, NONE).unwrap()), bytes);
    for len in 0..payload.len() {
        assert!(XfFilter::from_payload(&payload[..len], NONE).is_err());
    }
    // A header claiming a huge filter is refused by the limit, before allocating.
    let (_, header) = f.chunks().next().unwrap();
    let mut big = header.clone();
    let huge = XfParams { error_rate: 0.01, capacity: 1 << 40, max_capacity: 1 << 40 };
    big[16..24].copy_from_slice(&huge.capacity.to_le_bytes());
    big[24..32].copy_from_slice(&huge.max_capacity.to_le_bytes());
    big[32..40].copy_from_slice(&0u64.to_le_bytes()); // items
    big[40..48].copy_from_slice(&0u64.to_le_bytes()); // level
    let bits = fingerprint_bits(0.01, 0, huge.horizon(), 0.0);
    big[48..56].copy_from_slice(&u64::from(bits).to_le_bytes());
    big[56..72].copy_from_slice(&[0; 16]); // no doubling under way
    assert!(matches!(XfFilter::from_header(&big, Limits::at_most(1 << 20)), Err(XfError::TooLarge { .. })));
    // The first table's fingerprint length must be the schedule's.
    let mut odd = header;
    odd[48] ^= 1;
    assert!(matches!(XfFilter::from_header(&odd, NONE), Err(XfError::BadData(_))));
}

#[test]
fn scandump_chunks_rebuild_the_filter() {
    let mut f = XfFilter::new(0.001, 1000, 1 << 30, NONE).unwrap();
    for i in 0..300_000u64 {
        f.insert(&member(i), NONE).unwrap();
    }
    let mut chunks = f.chunks();
    let (iter, header) = chunks.next().unwrap();
    assert_eq!(iter, 1);
    let mut copy = XfFilter::from_header(&header, NONE).unwrap();
    let mut n = 0;
    for (iter, data) in chunks {
        assert!(data.len() as u64 <= bloomkit_core::xf::CHUNK_BYTES);
        assert!(!copy.contains(&member(0)), "answers as empty until the last chunk");
        copy.load_chunk(iter, &data).unwrap();
        n += 1;
    }
    assert!(n >= 2);
    assert_eq!(saved(&copy), saved(&f));
    assert!((0..300_000u64).step_by(13).all(|i| copy.contains(&member(i))));
}
