//! The sliding-window guarantees of `bloomkit_core::apbf` (its module docs
//! number them (a) to (d)), each on streams with known repeat distances and
//! an explicit clock: even arrivals, bursts, bursts followed by silence,
//! trickles followed by bursts, and random clumps.

use std::collections::VecDeque;

use bloomkit_core::apbf::{Apbf, ApbfParams, Window};
use bloomkit_testkit::Rng;

fn item(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

fn filter(error: f64, capacity: u64, window: Window, now: u64) -> Apbf {
    Apbf::new(ApbfParams { error, capacity, window }, now, bloomkit_core::Limits::NONE).unwrap()
}

/// Allowed measured rate: the configured one plus four standard deviations.
fn ceiling(rate: f64, probes: u64) -> f64 {
    rate + 4.0 * (rate * (1.0 - rate) / probes as f64).sqrt()
}

/// The false-positive rate measured on `probes` never-added items.
fn measured_rate(f: &Apbf, probes: u64, now: u64) -> f64 {
    let hits = (0..probes).filter(|i| f.contains(&item((1 << 50) + i), now)).count();
    hits as f64 / probes as f64
}

#[test]
fn count_window_never_forgets_inside_and_forgets_beyond() {
    let (capacity, rate) = (2_000u64, 0.01);
    let mut f = filter(rate, capacity, Window::Count, 0);
    let (k, l, g) = (u64::from(f.shape().k), u64::from(f.shape().l), f.shape().generation);
    // The documented bound: l + k generations after the item's own.
    let bound = (k + l + 1) * g;
    let (mut old_hits, mut old_probes) = (0u64, 0u64);
    for i in 0..40 * capacity {
        f.add(&item(i), 0);
        // Inside the window, at the edge and a few distances: always there.
        for d in [1, 2, capacity / 3, capacity - 1, capacity] {
            if i + 1 >= d {
                let j = i + 1 - d;
                assert!(f.contains(&item(j), 0), "item {j} forgotten {d} insertions later");
            }
        }
        // Far beyond the window: only false positives.
        if i > bound && i % 7 == 0 {
            old_probes += 1;
            old_hits += u64::from(f.contains(&item(i - bound - 1), 0));
        }
    }
    let measured = old_hits as f64 / old_probes as f64;
    assert!(measured <= ceiling(rate, old_probes), "old items still found at {measured}");
}

#[test]
fn false_positive_rate_holds_in_steady_state() {
    let (capacity, rate) = (5_000u64, 0.01);
    let mut f = filter(rate, capacity, Window::Count, 0);
    let g = f.shape().generation;
    let (mut hits, mut probes) = (0u64, 0u64);
    let mut absent = 1u64 << 40;
    for i in 0..20 * capacity {
        f.add(&item(i), 0);
        // Probe at the worst moment of each generation (just before it
        // ends) and at a few others, over many windows.
        if i >= 2 * capacity && (i % g == g - 2 || i % 997 == 0) {
            for _ in 0..200 {
                probes += 1;
                hits += u64::from(f.contains(&item(absent), 0));
                absent += 1;
            }
        }
    }
    let measured = hits as f64 / probes as f64;
    assert!(probes > 100_000);
    assert!(measured <= ceiling(rate, probes), "false-positive rate {measured} over {probes} probes");
}

/// When an item is found only at the false-positive rate: (c), `(l + k)` ticks.
fn forget_bound_ms(f: &Apbf) -> u64 {
    u64::from(f.shape().l + f.shape().k) * f.tick_ms().unwrap()
}

#[test]
fn time_window_with_a_controlled_clock() {
    let window = 600_000; // ten minutes
    let (capacity, rate) = (10_000u64, 0.001);
    let start = 1_700_000_000_000u64;
    let mut f = filter(rate, capacity, Window::Time { millis: window }, start);
    // The stated bound: W x (2 + (k - 1) / l_v), within a tick.
    let (k, lv) = (u64::from(f.shape().k), u64::from(f.shape().window_generations));
    // (The tick is rounded up to whole milliseconds.)
    assert!(forget_bound_ms(&f) <= window * (2 * lv + k - 1) / lv + 2 * lv + k, "{:?}", f.shape());
    // One click a second for an hour; each checked at its window's end.
    for s in 0..3600u64 {
        let now = start + s * 1000;
        assert!(f.add(&item(s), now), "click {s} taken for a repeat");
        if s >= 600 {
            assert!(f.contains(&item(s - 599), now), "click {} forgotten inside the window", s - 599);
            assert!(!f.add(&item(s - 599), now), "a repeat inside the window counted as new");
        }
    }
    let now = start + 3599 * 1000 + forget_bound_ms(&f);
    let found = (3000..3600).filter(|&s| f.contains(&item(s), now)).count();
    assert!(found as f64 <= 600.0 * ceiling(rate, 600) + 1.0, "{found} of 600 old clicks still found");
    assert_eq!(f.early_losses(), 0, "an even stream below capacity loses nothing early");
    // Reads apply due generations without changing anything.
    let before = f.clone();
    let _ = f.contains(&item(1), now + 10 * window);
    assert_eq!(f, before);
}

/// (a) and (b) under the burst the issue reported: a whole window's
/// capacity within one second, then probes at the configured rate.
#[test]
fn a_burst_of_a_whole_capacity_keeps_the_rate_and_every_item() {
    let (capacity, rate, window) = (20_000u64, 0.001, 600_000u64);
    let start = 1_000_000;
    let mut f = filter(rate, capacity, Window::Time { millis: window }, start);
    let repeats = (0..capacity).filter(|&i| !f.add(&item(i), start + i / 20)).count() as u64;
    assert!(
        repeats as f64 <= capacity as f64 * ceiling(rate, capacity),
        "{repeats} new items taken for repeats"
    );
    let now = start + 1000;
    assert!((0..capacity).all(|i| f.contains(&item(i), now)), "a burst item was forgotten");
    let probes = 200_000;
    let rate_now = measured_rate(&f, probes, now);
    assert!(rate_now <= ceiling(rate, probes), "false-positive rate {rate_now} after the burst");
    assert_eq!(f.early_losses(), 0);
    assert_eq!(f.items_in_window(now), capacity);
}

/// A burst, then silence: every item found until its window ends, and
/// only at the false-positive rate after the stated bound.
#[test]
fn a_burst_followed_by_silence() {
    let (capacity, rate, window) = (5_000u64, 0.01, 60_000u64);
    let start = 7_000_000;
    let mut f = filter(rate, capacity, Window::Time { millis: window }, start);
    for i in 0..capacity {
        f.add(&item(i), start);
    }
    for t in [1, window / 2, window - 1] {
        let missing = (0..capacity).filter(|&i| !f.contains(&item(i), start + t)).count();
        assert_eq!(missing, 0, "{missing} burst items forgotten {t} ms after the burst");
    }
    // Adds after the silence apply the clock and must not forget early.
    let later = start + window - 1;
    f.add(b"after the silence", later);
    assert!((0..capacity).all(|i| f.contains(&item(i), later)));
    let gone = start + forget_bound_ms(&f);
    let found = (0..capacity).filter(|&i| f.contains(&item(i), gone)).count() as u64;
    assert!(found as f64 <= capacity as f64 * ceiling(rate, capacity), "{found} still found after the bound");
    f.add(b"x", gone);
    assert_eq!(f.items_in_window(gone), 1);
}

/// The hard case for a clock: a trickle that spreads over many ticks, then
/// a burst that fills the rest of the capacity. Nothing inside the window
/// may be lost.
#[test]
fn a_trickle_then_a_burst() {
    let (capacity, rate, window) = (4_000u64, 0.01, 100_000u64);
    let start = 0;
    let mut f = filter(rate, capacity, Window::Time { millis: window }, start);
    let tick = f.tick_ms().unwrap();
    // One add per tick over most of a window: as many generations as ticks.
    let trickle: Vec<u64> = (0..window / tick - 1).collect();
    for &i in &trickle {
        f.add(&item(i), start + i * tick);
    }
    let now = start + (window / tick - 1) * tick;
    for i in 0..capacity - trickle.len() as u64 {
        f.add(&item(1 << 32 | i), now);
    }
    for &i in &trickle {
        assert!(f.contains(&item(i), now), "trickle item {i} (age {} ms) forgotten", now - i * tick);
    }
    assert!((0..capacity - trickle.len() as u64).all(|i| f.contains(&item(1 << 32 | i), now)));
    assert!(measured_rate(&f, 100_000, now) <= ceiling(rate, 100_000));
    assert_eq!(f.early_losses(), 0);
}

/// (d): three times the capacity within a window. The newest `capacity`
/// are all found, the rate holds, and the losses are counted.
#[test]
fn more_than_capacity_forgets_the_oldest_early_and_says_so() {
    let (capacity, rate, window) = (5_000u64, 0.01, 60_000u64);
    let mut f = filter(rate, capacity, Window::Time { millis: window }, 0);
    let total = 3 * capacity;
    for i in 0..total {
        f.add(&item(i), i); // 15 s in all
    }
    let now = total;
    assert!((total - capacity..total).all(|i| f.contains(&item(i), now)), "a recent item was lost");
    assert!(measured_rate(&f, 100_000, now) <= ceiling(rate, 100_000));
    assert!(f.early_losses() > 0, "the early losses are counted");
    assert!(f.items_in_window(now) >= capacity && f.items_in_window(now) < total);
}

/// (a) whatever the timing: random clumps, gaps and trickles, never more
/// than `capacity` adds in any window; every add younger than the window
/// is found at every step, and nothing is counted as lost early.
#[test]
fn random_timings_within_capacity_never_forget_inside_the_window() {
    for seed in 1..=6u64 {
        let mut rng = Rng(seed);
        let capacity = 300 + rng.below64(1500);
        let window = 10_000 + rng.below64(50_000);
        let mut f = filter(0.01, capacity, Window::Time { millis: window }, 0);
        let mut recent: VecDeque<(u64, u64)> = VecDeque::new(); // (time, item)
        let mut now = 0u64;
        let mut next_item = 0u64;
        for _ in 0..4_000 {
            // A gap: none, short, about a tick, or long silence.
            now += match rng.below64(4) {
                0 => 0,
                1 => rng.below64(50),
                2 => rng.below64(2 * f.tick_ms().unwrap()),
                _ => rng.below64(2 * window),
            };
            while recent.front().is_some_and(|&(t, _)| t + window <= now) {
                recent.pop_front();
            }
            // A clump that keeps the window at or below capacity.
            let room = capacity - recent.len() as u64;
            let clump = if room == 0 { 0 } else { 1 + rng.below64(room.min(capacity / 3).max(1)) };
            for _ in 0..clump {
                f.add(&item(next_item), now);
                recent.push_back((now, next_item));
                next_item += 1;
            }
            let probe = now + rng.below64(window);
            for &(t, i) in &recent {
                if t + window > probe {
                    assert!(f.contains(&item(i), probe), "seed {seed}: item {i} of {t} lost at {probe}");
                }
            }
        }
        assert_eq!(f.early_losses(), 0, "seed {seed}");
    }
}

#[test]
fn a_replayed_decision_gives_the_same_filter() {
    let start = 5_000;
    let mut primary = filter(0.01, 1000, Window::Time { millis: 10_000 }, start);
    let mut replica = primary.clone();
    let mut now = start;
    for i in 0..5000u64 {
        now += if i % 500 < 400 { 1 } else { 97 }; // bursts and pauses
                                                   // The primary decides with its clock; the replica replays the
                                                   // decision and adds at the primary's time.
        let due = primary.advance_to(now);
        replica.advance(due, primary.generation_started_ms(), now);
        primary.add(&item(i), now);
        replica.add(&item(i), replica.clock_ms());
    }
    assert_eq!(primary.encode(), replica.encode());
}

/// (d) after a silence: generations caught up on the clock are judged at
/// the times they ended, so losses of a window that had outrun its
/// capacity are counted even when the filter is next touched much later.
#[test]
fn losses_during_a_silence_are_counted_when_caught_up() {
    let (capacity, window) = (3_000u64, 60_000u64);
    let mut f = filter(0.01, capacity, Window::Time { millis: window }, 0);
    for i in 0..3 * capacity {
        f.add(&item(i), 1_000);
    }
    let at_burst = f.early_losses();
    assert!(at_burst > 0);
    f.add(b"after the silence", 1_000 + 2 * window);
    assert!(
        f.early_losses() > at_burst,
        "generations lost early during the silence were not counted ({at_burst} before and after)"
    );
}

/// A state of the first format (`BKAPBF01`), made as bloomkit wrote it:
/// one generation of slack, a tick of W / l, a time window's current
/// generation allowed past `g` adds. It decodes whole and by chunks (an old
/// AOF's LOADCHUNKs) to the same filter, answers for its items, dates its
/// generations, and gains volume ends.
#[test]
fn first_format_states_load_whole_and_by_chunks() {
    let (window, started) = (60_000u64, 5_000_000u64);
    // A count filter's shape has l = l_v, as the first format's time windows did.
    let mut model = filter(0.01, 500, Window::Count, 0);
    for i in 0..700u64 {
        model.add(&item(i), 0);
    }
    let v2 = model.encode();
    let s = *model.shape();
    let field = |i: usize| u64::from_le_bytes(v2[8 + 8 * i..16 + 8 * i].try_into().unwrap());
    let mut v1 = b"BKAPBF01".to_vec();
    for (i, v) in [
        field(0),
        field(1),
        field(2),
        field(3),
        field(4),
        window,
        field(6),
        s.generation + 5,
        started,
        field(9),
    ]
    .into_iter()
    .enumerate()
    {
        let _ = i;
        v1.extend_from_slice(&v.to_le_bytes());
    }
    let body = &v2[bloomkit_core::apbf::HEADER_LEN..];
    v1.extend_from_slice(&body[..body.len() - 8 * s.slices() as usize]);

    let whole = Apbf::decode(&v1, None).unwrap();
    assert_eq!(whole.tick_ms(), Some(window.div_ceil(u64::from(s.l))));
    let mut chunked = Apbf::from_header(&v1[..bloomkit_core::apbf::HEADER_LEN_V1], None).unwrap();
    for (n, chunk) in v1[bloomkit_core::apbf::HEADER_LEN_V1..].chunks(100).enumerate() {
        chunked.load_bits(100 * n as u64, chunk).unwrap();
    }
    assert_eq!(chunked.encode(), whole.encode(), "whole and by chunks: the same filter, dated alike");
    let now = started + 1;
    for i in 700 - capacity_of(&whole)..700 {
        assert!(whole.contains(&item(i), now), "item {i} of the first-format state");
    }
    assert!(whole.items_in_window(now) > 0, "generations were dated");
    // The over-full current generation ends by volume at the next add.
    let mut f = whole;
    let before = f.generations();
    f.add(b"next", now);
    assert_eq!(f.generations(), before + 1);
}

fn capacity_of(f: &Apbf) -> u64 {
    f.shape().capacity().min(700)
}
