//! How many bits and hashes a filter gets, by RedisBloom's rules, plus the
//! textbook formulas that `bloomkit calc` and the bitmap backend size with.

/// ln(2)^2, the constant RedisBloom divides by (the same literal, so the same bits).
const LN2_SQUARED: f64 = 0.480453013918201;
const LN2: f64 = std::f64::consts::LN_2;

/// Chain options, as stored in RDB and SCANDUMP headers.
pub mod options {
    /// Size exactly to `capacity x bpe` bits instead of the next power of two.
    pub const NOROUND: u32 = 1;
    /// Capacity is a log2 bit count (RedisBloom's internal use; honoured on load).
    pub const ENTS_IS_BITS: u32 = 2;
    /// Hash with MurmurHash64A instead of 32-bit MurmurHash2.
    pub const FORCE64: u32 = 4;
    /// The chain never grows: a full filter refuses new items.
    pub const NO_SCALING: u32 = 8;
    /// What `BF.*` commands create.
    pub const DEFAULT: u32 = FORCE64 | NOROUND;
    /// Every option a filter may carry; a stored value with any other bit is corrupt.
    pub const KNOWN: u32 = NOROUND | ENTS_IS_BITS | FORCE64 | NO_SCALING;
}

/// Whether `x` is a rate: strictly between 0 and 1 (NaN is not). Every
/// error rate, false-positive rate and ratio a command or a stored value
/// gives is held to this one rule.
pub fn is_rate(x: f64) -> bool {
    x > 0.0 && x < 1.0
}

/// Bits per element for an error rate: `-ln(p) / ln(2)^2`.
pub fn bits_per_entry(error: f64) -> f64 {
    (error.ln() / LN2_SQUARED).abs()
}

/// The shape of one sub-filter, computed from its capacity and error rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Items the sub-filter is meant to hold (RedisBloom's `entries`).
    pub capacity: u64,
    pub error: f64,
    pub bpe: f64,
    pub hashes: u32,
    /// Bits addressed when `n2 == 0`; always `bytes * 8` for new filters.
    pub bits: u64,
    pub bytes: u64,
    /// log2 of the modulus for power-of-two filters, 0 otherwise.
    pub n2: u8,
}

impl Shape {
    /// RedisBloom's `bloom_init`: `None` where it would refuse (capacity 0,
    /// error outside (0, 1), or a size that does not fit in 64 bits).
    pub fn new(capacity: u64, error: f64, chain_options: u32) -> Option<Shape> {
        if capacity < 1 || !is_rate(error) {
            return None;
        }
        let bpe = bits_per_entry(error);
        let mut capacity = capacity;
        let mut n2 = 0u8;
        let raw_bits: f64;
        if chain_options & options::ENTS_IS_BITS != 0 {
            if capacity > 63 {
                return None;
            }
            n2 = capacity as u8;
            raw_bits = (1u64 << n2) as f64;
            capacity = (raw_bits / bpe) as u64;
        } else if chain_options & options::NOROUND != 0 {
            raw_bits = (capacity as f64 * bpe).floor();
        } else {
            let exact = capacity as f64 * bpe;
            let log2 = exact.log2().floor();
            if log2.is_nan() || log2 >= 63.0 {
                return None;
            }
            n2 = log2 as u8 + 1;
            raw_bits = (1u64 << n2) as f64;
            // A power of two leaves room for more items: RedisBloom counts them.
            let spare_items = ((raw_bits - exact) as u64 as f64 / bpe) as u64;
            capacity = capacity.checked_add(spare_items)?;
        }
        if raw_bits.is_nan() || raw_bits >= 1.8e19 {
            return None;
        }
        let raw_bits = raw_bits as u64;
        let words = raw_bits / 64 + u64::from(!raw_bits.is_multiple_of(64));
        let bytes = words.max(1).checked_mul(8)?;
        let hashes = (LN2 * bpe).ceil();
        if !(hashes >= 1.0 && hashes < u32::MAX as f64) {
            return None;
        }
        Some(Shape { capacity, error, bpe, hashes: hashes as u32, bits: bytes * 8, bytes, n2 })
    }
}

/// Textbook sizing: bits for `n` items at false-positive rate `p`.
pub fn optimal_bits(n: f64, p: f64) -> f64 {
    (-n * p.ln() / LN2_SQUARED).ceil()
}

/// Textbook sizing: hash count minimising the false-positive rate for `m/n`.
pub fn optimal_hashes(bits_per_item: f64) -> f64 {
    (bits_per_item * LN2).round().max(1.0)
}

/// Expected false-positive rate of `m` bits, `k` hashes and `n` items.
/// (`-expm1` keeps the fill exact when it is tiny; the rate itself may
/// underflow to 0: see [`log10_false_positive_rate`].)
pub fn false_positive_rate(m: f64, k: f64, n: f64) -> f64 {
    (-(-k * n / m).exp_m1()).powf(k)
}

/// The base-10 logarithm of [`false_positive_rate`], which stays finite
/// where the rate itself underflows (a near-empty filter with many hashes
/// is at 1e-40, or 1e-400); `-inf` for an empty filter.
pub fn log10_false_positive_rate(m: f64, k: f64, n: f64) -> f64 {
    k * (-(-k * n / m).exp_m1()).log10()
}

/// The base-10 logarithm of `1 - Π(1 - p_i)`, the rate of filters probed
/// one after another, from each one's base-10 logarithm; exact where the
/// rates are representable, their sum (which it tends to) where they are not.
pub fn log10_combined_rate(log10_rates: &[f64]) -> f64 {
    let max = log10_rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return max;
    }
    if max > -300.0 {
        // 1 - Π(1 - p) through ln_1p/exp_m1: exact for tiny rates too.
        let log_miss: f64 = log10_rates.iter().map(|l| (-(10f64.powf(*l))).ln_1p()).sum();
        let rate = -log_miss.exp_m1();
        if rate > 0.0 {
            return rate.log10();
        }
    }
    // Σ 10^l = 10^max x Σ 10^(l - max)
    max + log10_rates.iter().map(|l| 10f64.powf(l - max)).sum::<f64>().log10()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_log_space_do_not_underflow() {
        // One item in a large array with many hashes: far below f64's range.
        let l = log10_false_positive_rate(1e6, 500.0, 1.0);
        assert!(l.is_finite() && l < -400.0, "{l}");
        assert_eq!(log10_false_positive_rate(1e6, 7.0, 0.0), f64::NEG_INFINITY);
        let p = false_positive_rate(9585.0, 7.0, 1000.0);
        assert!((log10_false_positive_rate(9585.0, 7.0, 1000.0) - p.log10()).abs() < 1e-12);
        assert!((log10_combined_rate(&[-2.0, -3.0]) - (1.0 - 0.99 * 0.999f64).log10()).abs() < 1e-12);
        assert!((log10_combined_rate(&[-500.0, -500.0]) - (-500.0 + 2f64.log10())).abs() < 1e-9);
        assert!((log10_combined_rate(&[-16.0]) + 16.0).abs() < 1e-12, "a tiny rate is not rounded");
        assert_eq!(log10_combined_rate(&[f64::NEG_INFINITY]), f64::NEG_INFINITY);
    }

    #[test]
    fn matches_redisbloom_default_filter() {
        // BF.DEBUG of a default filter: bytes:144 bits:1152 hashes:8 capacity:100 ratio:0.005
        let s = Shape::new(100, 0.005, options::DEFAULT).unwrap();
        assert_eq!((s.bytes, s.bits, s.hashes, s.capacity), (144, 1152, 8, 100));
        let s = Shape::new(50, 0.000001 / 2.0, options::DEFAULT).unwrap();
        assert_eq!((s.bytes, s.bits, s.hashes), (192, 1536, 21));
        let s = Shape::new(10, 0.05, options::DEFAULT).unwrap();
        assert_eq!((s.bytes, s.hashes), (8, 5));
    }

    #[test]
    fn refuses_what_redisbloom_refuses() {
        assert!(Shape::new(0, 0.01, options::DEFAULT).is_none());
        assert!(Shape::new(10, 0.0, options::DEFAULT).is_none());
        assert!(Shape::new(10, 1.0, options::DEFAULT).is_none());
        assert!(Shape::new(10, f64::NAN, options::DEFAULT).is_none());
        assert!(Shape::new(u64::MAX, 1e-300, options::DEFAULT).is_none());
    }

    #[test]
    fn power_of_two_filters_round_up_and_count_spare_room() {
        let s = Shape::new(100, 0.01, 0).unwrap();
        assert_eq!(s.bits, 1024);
        assert_eq!(s.n2, 10);
        assert!(s.capacity > 100);
    }
}
