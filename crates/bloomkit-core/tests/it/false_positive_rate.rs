//! Measured false-positive rates against the rate each filter's own
//! parameters predict, and those predictions against the configured rate.
//!
//! The prediction is the compound rate of the sub-filters, from each one's
//! bits `m`, hashes `k` and items `n`: `1 - Π(1 - (1 - e^(-kn/m))^k)` (for
//! the blocked filter, its Poisson mixture over block loads). A scaling
//! filter's first sub-filter is built at half the configured rate, so at 1x
//! capacity it predicts about half of it: comparing with the configured
//! rate would let a filter that lost its tightening pass.
//!
//! Margin: a measured rate p̂ over N independent absent probes has standard
//! deviation σ = sqrt(p(1-p)/N); we require |p̂ - p| <= 4σ (a correct filter
//! fails by chance with probability below 1e-4) and take N >= 1600 / p, so
//! that 4σ < p/10: a filter whose rate is off by 10% (one hash too few, a bit
//! per item lost, the tightening dropped) fails.

use bloomkit_core::bf::{Chain, ChainParams};
use bloomkit_core::common::sizing::false_positive_rate;
use bloomkit_core::local::BlockedFilter;
use bloomkit_core::Limits;

/// Probes enough to see a 10% error in `rate` (and at least 400 000).
fn probes_for(rate: f64) -> u64 {
    ((1600.0 / rate).ceil() as u64).max(400_000)
}

fn measured_rate(contains: impl Fn(&[u8]) -> bool, probes: u64) -> f64 {
    let hits = (0..probes).filter(|i| contains(format!("absent:{i}").as_bytes())).count();
    hits as f64 / probes as f64
}

/// The compound rate a chain's parameters predict.
fn predicted_rate(chain: &Chain) -> f64 {
    let miss: f64 = chain
        .filters()
        .iter()
        .map(|f| {
            let m = if f.shape().bits != 0 { f.shape().bits } else { 1u64 << f.shape().n2 };
            1.0 - false_positive_rate(m as f64, f64::from(f.shape().hashes), f.items as f64)
        })
        .product();
    1.0 - miss
}

fn fill(params: ChainParams, items: u64) -> Chain {
    let mut chain = Chain::new(params, Limits::NONE).unwrap();
    for i in 0..items {
        chain.add(format!("present:{i}").as_bytes(), Limits::NONE).unwrap();
    }
    chain
}

/// Measured within 4σ of the prediction, and the prediction within the configured rate.
fn assert_rate(contains: impl Fn(&[u8]) -> bool, predicted: f64, configured: f64, what: &str) {
    assert!(
        predicted <= configured,
        "{what}: the design predicts {predicted:.5} above the configured {configured}"
    );
    let probes = probes_for(predicted);
    let measured = measured_rate(contains, probes);
    let sigma = (predicted * (1.0 - predicted) / probes as f64).sqrt();
    assert!(4.0 * sigma < predicted / 10.0, "{what}: too few probes to see a 10% error");
    assert!(
        (measured - predicted).abs() <= 4.0 * sigma,
        "{what}: measured {measured:.6} over {probes} probes, predicted {predicted:.6} ± {:.6} (4σ)",
        4.0 * sigma
    );
}

fn assert_chain(chain: &Chain, configured: f64, what: &str) {
    assert_rate(|item| chain.contains(item), predicted_rate(chain), configured, what);
}

#[test]
fn scaling_filter_at_full_capacity() {
    for error in [0.01, 0.001] {
        let chain = fill(ChainParams { capacity: 20_000, error, expansion: 2, scaling: true }, 20_000);
        assert_eq!(chain.filters().len(), 1);
        // The first sub-filter is built at half the rate: about half is what it predicts.
        let predicted = predicted_rate(&chain);
        assert!(predicted < 0.6 * error, "error {error}: predicted {predicted}");
        assert_chain(&chain, error, &format!("error {error}, 1x"));
    }
}

#[test]
fn scaling_filter_grown_to_8x_capacity() {
    let error = 0.01;
    let chain = fill(ChainParams { capacity: 10_000, error, expansion: 2, scaling: true }, 80_000);
    assert!(chain.filters().len() >= 4, "the chain scaled");
    assert_chain(&chain, error, "8x capacity");
}

#[test]
fn non_scaling_filter_at_full_capacity() {
    let error = 0.01;
    let chain = fill(ChainParams { capacity: 20_000, error, expansion: 2, scaling: false }, 20_000);
    assert_chain(&chain, error, "non-scaling, 1x");
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
        let what = format!("blocked, error {error}, {times}x");
        assert_rate(|item| f.contains(item), f.estimated_false_positive_rate(), error, &what);
        for i in (0..20_000 * times).step_by(7) {
            assert!(f.contains(format!("present:{i}").as_bytes()), "a false negative");
        }
    }
}
