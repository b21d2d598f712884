//! The sliding-window guarantees of `bloomkit_core::apbf`, each on streams
//! with known repeat distances and an explicit clock.

use bloomkit_core::apbf::{Apbf, Window};

fn item(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

/// Allowed measured rate: the configured one plus four standard deviations.
fn ceiling(rate: f64, probes: u64) -> f64 {
    rate + 4.0 * (rate * (1.0 - rate) / probes as f64).sqrt()
}

#[test]
fn count_window_never_forgets_inside_and_forgets_beyond() {
    let (capacity, rate) = (2_000u64, 0.01);
    let mut f = Apbf::new(rate, capacity, Window::Count, 0).unwrap();
    let (k, l, g) = (u64::from(f.shape().k), u64::from(f.shape().l), f.shape().generation);
    // The documented bound: k + l generations after the item's own.
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
    let mut f = Apbf::new(rate, capacity, Window::Count, 0).unwrap();
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

#[test]
fn time_window_with_a_controlled_clock() {
    let window = 600_000; // ten minutes
    let (capacity, rate) = (10_000u64, 0.001);
    let start = 1_700_000_000_000u64;
    let mut f = Apbf::new(rate, capacity, Window::Time { millis: window }, start).unwrap();
    let l = u64::from(f.shape().l);
    // One click a second for an hour; each checked at its window's end.
    for s in 0..3600u64 {
        let now = start + s * 1000;
        assert!(f.add(&item(s), now), "click {s} taken for a repeat");
        if s >= 600 {
            assert!(f.contains(&item(s - 600), now), "click {} forgotten inside the window", s - 600);
            assert!(!f.add(&item(s - 600), now), "a repeat inside the window counted as new");
        }
    }
    // The bound: forgotten once window x (1 + (k + 1)/l) has passed.
    let k = u64::from(f.shape().k);
    let now = start + 3599 * 1000 + (k + l + 1) * window.div_ceil(l);
    let found = (3000..3600).filter(|&s| f.contains(&item(s), now)).count();
    assert!(found as f64 <= 600.0 * ceiling(rate, 600) + 1.0, "{found} of 600 old clicks still found");
    // Reads apply due generations without changing anything.
    let before = f.clone();
    let _ = f.contains(&item(1), now + 10 * window);
    assert_eq!(f, before);
}

#[test]
fn a_replayed_decision_gives_the_same_filter() {
    let start = 5_000;
    let mut primary = Apbf::new(0.01, 1000, Window::Time { millis: 10_000 }, start).unwrap();
    let mut replica = primary.clone();
    let mut now = start;
    for i in 0..5000u64 {
        now += 37;
        // The primary decides with its clock; the replica replays the decision.
        let due = primary.advance_to(now);
        primary.add(&item(i), now);
        if due > 0 {
            replica.advance(due, primary.generation_started_ms());
        }
        // The replica's clock is far behind: it must not matter.
        replica.add(&item(i), 0);
    }
    assert_eq!(primary.encode(), replica.encode());
}
