//! The measured false-positive rate of cuckoo filters filled to their
//! capacity stays within its bound: a lookup compares one 8-bit
//! fingerprint (255 values) with the `2 x bucket_size` slots of its two
//! buckets in each sub-filter, so the rate is at most
//! `sum over sub-filters of 2 x bucket_size x fill / 255`, and so at most
//! the configured `2 x bucket_size / 255` per sub-filter. Default
//! parameters (20 kick-outs), as `CF.RESERVE` makes them.

use bloomkit_core::cf::{CuckooFilter, CuckooParams, Lookup};
use bloomkit_core::Limits;

fn measure(capacity: u64, bucket_size: u16) -> (f64, f64, usize) {
    let params = CuckooParams { capacity, bucket_size, max_iterations: 20, expansion: 1 };
    let mut f = CuckooFilter::new(params, Limits::NONE).unwrap();
    for i in 0..capacity {
        f.insert(&Lookup::new(format!("member{i}").as_bytes()), Limits::NONE).unwrap();
    }
    assert!(
        (0..capacity).all(|i| f.contains(&Lookup::new(format!("member{i}").as_bytes()))),
        "no false negatives"
    );
    let bound: f64 = f
        .filters()
        .iter()
        .map(|s| {
            let fill = s.bytes().iter().filter(|&&b| b != 0).count() as f64 / s.bytes().len() as f64;
            2.0 * f64::from(bucket_size) * fill / 255.0
        })
        .sum();
    let probes = 1_000_000u64;
    let hits = (0..probes).filter(|i| f.contains(&Lookup::new(format!("other{i}").as_bytes()))).count();
    (hits as f64 / probes as f64, bound, f.filters().len())
}

#[test]
fn false_positive_rate_at_capacity_is_within_the_bound() {
    for (capacity, bucket_size) in [(100_000u64, 2u16), (100_000, 4), (50_000, 1), (60_000, 8)] {
        let (rate, bound, filters) = measure(capacity, bucket_size);
        // One million probes: a standard deviation below 0.013 percentage points.
        assert!(
            rate <= bound * 1.05 + 0.0005,
            "capacity {capacity}, bucket size {bucket_size}: {rate} > {bound}"
        );
        assert!(rate >= bound * 0.8, "the measurement measures something: {rate} vs {bound}");
        let configured = 2.0 * f64::from(bucket_size) / 255.0 * filters as f64;
        assert!(rate <= configured, "capacity {capacity}, bucket size {bucket_size}: {rate} > {configured}");
        bloomkit_testkit::figure(&format!(
            "cuckoo FP rate at capacity {capacity}, bucket size {bucket_size}: measured {:.3}%, bound at its fill {:.3}%, configured bound {:.3}% ({filters} sub-filters)",
            rate * 100.0,
            bound * 100.0,
            200.0 * f64::from(bucket_size) / 255.0 * filters as f64
        ));
    }
}
