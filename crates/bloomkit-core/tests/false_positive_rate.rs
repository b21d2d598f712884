//! Measured false-positive rates against the configured rate.
//!
//! Margin: a measured rate p̂ over N independent absent probes has standard
//! deviation sqrt(p(1-p)/N); we allow p̂ <= p + 4σ, so a correct filter fails
//! by chance with probability below 1e-4, while a filter whose rate is off by
//! even 10% (e.g. one hash too few, or sizing off by a bit per item) fails.

use bloomkit_core::blocked::BlockedFilter;
use bloomkit_core::{Chain, ChainParams, Limits};

const PROBES: u64 = 400_000;

fn measured_rate(chain: &Chain) -> f64 {
    let hits = (0..PROBES).filter(|i| chain.contains(format!("absent:{i}").as_bytes())).count();
    hits as f64 / PROBES as f64
}

fn fill(params: ChainParams, items: u64) -> Chain {
    let mut chain = Chain::new(params, Limits::NONE).unwrap();
    for i in 0..items {
        chain.add(format!("present:{i}").as_bytes(), Limits::NONE).unwrap();
    }
    chain
}

fn assert_within(measured: f64, configured: f64, what: &str) {
    let sigma = (configured * (1.0 - configured) / PROBES as f64).sqrt();
    assert!(
        measured <= configured + 4.0 * sigma,
        "{what}: measured {measured:.5} > configured {configured} + 4σ ({:.5})",
        4.0 * sigma
    );
}

#[test]
fn scaling_filter_at_full_capacity() {
    for error in [0.01, 0.001] {
        let chain = fill(ChainParams { capacity: 20_000, error, expansion: 2, scaling: true }, 20_000);
        assert_eq!(chain.filters().len(), 1);
        assert_within(measured_rate(&chain), error, &format!("error {error}, 1x"));
    }
}

#[test]
fn scaling_filter_grown_to_8x_capacity() {
    let error = 0.01;
    let chain = fill(ChainParams { capacity: 10_000, error, expansion: 2, scaling: true }, 80_000);
    assert!(chain.filters().len() >= 4, "the chain scaled");
    assert_within(measured_rate(&chain), error, "8x capacity");
}

#[test]
fn non_scaling_filter_at_full_capacity() {
    let error = 0.01;
    let chain = fill(ChainParams { capacity: 20_000, error, expansion: 2, scaling: false }, 20_000);
    assert_within(measured_rate(&chain), error, "non-scaling, 1x");
}

#[test]
fn no_false_negatives() {
    let chain = fill(ChainParams { capacity: 1000, error: 0.01, expansion: 2, scaling: true }, 10_000);
    for i in 0..10_000 {
        assert!(chain.contains(format!("present:{i}").as_bytes()));
    }
}

fn fill_blocked(capacity: u64, error: f64, items: u64) -> BlockedFilter {
    let mut f = BlockedFilter::new(capacity, error).unwrap();
    let keys: Vec<String> = (0..items).map(|i| format!("present:{i}")).collect();
    let mut new = 0u64;
    f.add_each(&keys, |n| new += u64::from(n)).unwrap();
    assert!(new as f64 >= items as f64 * (1.0 - 2.0 * error) - 50.0, "{new} of {items} reported new");
    f
}

#[test]
fn blocked_filter_at_capacity_and_grown_to_8x() {
    for (error, times) in [(0.01, 1), (0.001, 1), (0.01, 8)] {
        let f = fill_blocked(20_000, error, 20_000 * times);
        let hits = (0..PROBES).filter(|i| f.contains(format!("absent:{i}").as_bytes())).count();
        assert_within(hits as f64 / PROBES as f64, error, &format!("blocked, error {error}, {times}x"));
        for i in (0..20_000 * times).step_by(7) {
            assert!(f.contains(format!("present:{i}").as_bytes()), "a false negative");
        }
    }
}
