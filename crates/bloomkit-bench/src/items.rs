//! The random items of the in-process XF benchmarks (`xf-inproc`,
//! `xf-instructions`), one definition for both so that their figures are
//! of the same items. Included by path: the bench crate has no library.

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `n` random items of stream `stream` (items of two streams never meet but
/// with probability n^2 / 2^64).
pub fn items(stream: u64, n: u64) -> Vec<u64> {
    (0..n).map(|i| splitmix(splitmix(stream) ^ i)).collect()
}
