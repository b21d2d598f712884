//! The bitmap layouts of Bloom filters other systems keep in plain Redis
//! strings, one `SETBIT` per position, so that bloomkit can share their
//! bits: each layout is its sizing rule and its index derivation.
//!
//! - [`BitmapLayout::Guava`]: Guava's `BloomFilter` (MURMUR128_MITZ_64), the
//!   bit count rounded up to whole longs ([`guava`]).
//! - [`BitmapLayout::GuavaUnrounded`]: the widely copied Java
//!   "RedisBloomFilter" pattern: Guava's sizing and hashing, but the bit
//!   count `(int)(-n ln p / ln² 2)` as is (a Java int: it saturates at
//!   2^31 - 1), so its positions differ from Guava's whenever `m % 64 != 0`.
//! - [`BitmapLayout::Redisson`]: Redisson's `RBloomFilter`: HighwayHash-128
//!   with a fixed key over the codec's bytes, positions adding `h2` and `h1`
//!   in turn, `m = (long)(-n ln p / ln² 2)` (at most 2^32 - 2), its
//!   parameters in the hash [`redisson_config_key`]. Items are hashed as
//!   `StringCodec` encodes them (UTF-8); [`BitmapLayout::RedissonKryo5`] as
//!   Redisson's default `Kryo5Codec` encodes a `String`.
//! - [`BitmapLayout::PhpBkdr`]: the PHP BKDR scheme: `k` BKDR hashes with
//!   seeds 31, 131, 1313, ... over the item's bytes, modulo an explicit `m`
//!   (at most 2^32), with PHP's integer-to-float arithmetic reproduced.
//!
//! References (`tests/fixtures/`): positions computed by real Guava 31.1,
//! Redisson's own hashing code and PHP 8.2 (`tests/bitmap_layouts.rs`).

use std::f64::consts::LN_2;

use highway::{HighwayHash, HighwayHasher, Key};

pub mod guava;

use crate::common::sizing::is_rate;
use guava::GuavaShape;

/// Which system's bitmap layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitmapLayout {
    Guava,
    GuavaUnrounded,
    Redisson,
    RedissonKryo5,
    PhpBkdr,
}

impl BitmapLayout {
    pub const ALL: [BitmapLayout; 5] = [
        BitmapLayout::Guava,
        BitmapLayout::GuavaUnrounded,
        BitmapLayout::Redisson,
        BitmapLayout::RedissonKryo5,
        BitmapLayout::PhpBkdr,
    ];

    /// The name used on the command line and in bitmap files.
    pub fn name(self) -> &'static str {
        match self {
            BitmapLayout::Guava => "guava",
            BitmapLayout::GuavaUnrounded => "guava-unrounded",
            BitmapLayout::Redisson => "redisson",
            BitmapLayout::RedissonKryo5 => "redisson-kryo5",
            BitmapLayout::PhpBkdr => "php-bkdr",
        }
    }

    /// Every name, for help texts and errors.
    pub fn names() -> String {
        BitmapLayout::ALL.map(BitmapLayout::name).join(", ")
    }

    /// Whether the bitmap may spread over several keys. Only bloomkit's own
    /// `guava` layout does (beyond Redis's 512 MiB strings); the other
    /// systems keep one key, so their layouts must too.
    pub fn may_split(self) -> bool {
        self == BitmapLayout::Guava
    }

    /// Whether the layout is sized from a capacity and an error rate; the
    /// PHP scheme is only ever given its bits and hashes.
    pub fn sized_by_capacity(self) -> bool {
        self != BitmapLayout::PhpBkdr
    }

    /// Redisson keeps its parameters beside the bitmap and checks them on
    /// every add and lookup.
    pub fn is_redisson(self) -> bool {
        matches!(self, BitmapLayout::Redisson | BitmapLayout::RedissonKryo5)
    }

    /// The most hashes the layout's own code takes: Guava's serial form
    /// keeps k in one byte; for the others, a bound far above any sane
    /// filter (k = 30 is a rate of 1e-9) that keeps one item's work small.
    pub fn max_hashes(self) -> u32 {
        match self {
            BitmapLayout::Guava | BitmapLayout::GuavaUnrounded => guava::MAX_HASHES,
            _ => 1024,
        }
    }

    pub fn from_name(name: &str) -> Option<BitmapLayout> {
        BitmapLayout::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The bit and hash counts this layout derives from a capacity and an
    /// error rate; `None` where the layout's own code refuses them, and
    /// always for `PhpBkdr`, which is given its bits and hashes.
    pub fn shape(self, capacity: u64, error_rate: f64) -> Option<BitmapShape> {
        if !is_rate(error_rate) {
            return None;
        }
        let n = capacity.max(1) as f64;
        let raw = -n * error_rate.ln() / (LN_2 * LN_2);
        let hashes_for = |bits: u64| ((bits as f64 / n * LN_2 + 0.5).floor() as u32).max(1);
        match self {
            BitmapLayout::Guava => {
                GuavaShape::new(capacity, error_rate).map(|g| BitmapShape { bits: g.bits, hashes: g.hashes })
            }
            BitmapLayout::GuavaUnrounded => {
                // (int) of a double: truncation, saturating at Integer.MAX_VALUE.
                let bits = raw.min(f64::from(i32::MAX)) as u64;
                (bits > 0).then(|| BitmapShape { bits, hashes: hashes_for(bits) })
            }
            BitmapLayout::Redisson | BitmapLayout::RedissonKryo5 => {
                let bits = raw as u64;
                (bits > 0 && bits <= REDISSON_MAX_BITS)
                    .then(|| BitmapShape { bits, hashes: hashes_for(bits) })
            }
            BitmapLayout::PhpBkdr => None,
        }
    }

    /// The largest bit count the layout's own code allows.
    pub fn max_bits(self) -> u64 {
        match self {
            BitmapLayout::Guava => u64::MAX / 2,
            BitmapLayout::GuavaUnrounded => i32::MAX as u64,
            BitmapLayout::Redisson | BitmapLayout::RedissonKryo5 => REDISSON_MAX_BITS,
            BitmapLayout::PhpBkdr => 1 << 32,
        }
    }

    /// Appends the positions of `item` (its bytes as the other system hashes
    /// them: UTF-8 for a Java or PHP string) to `out`, in the order the
    /// other system sets them.
    pub fn positions(self, shape: BitmapShape, item: &[u8], out: &mut Vec<u64>) {
        let (m, k) = (shape.bits, shape.hashes);
        match self {
            // One loop for both: only the modulus differs (Guava's rounded
            // array, or the pattern's bit count as is).
            BitmapLayout::Guava | BitmapLayout::GuavaUnrounded => {
                out.extend(GuavaShape { bits: m, hashes: k }.positions(item));
            }
            BitmapLayout::Redisson => redisson_positions(redisson_hash(item), shape, out),
            BitmapLayout::RedissonKryo5 => {
                // A Java String holds text: bytes that are not UTF-8 are
                // taken as the replacement characters Java would decode.
                let text = String::from_utf8_lossy(item);
                redisson_positions(redisson_hash(&kryo5_string(&text)), shape, out)
            }
            BitmapLayout::PhpBkdr => {
                for i in 0..k {
                    out.push(php_bkdr(item, php_seed(i)) % m);
                }
            }
        }
    }
}

/// `RedissonBloomFilter.hash`: `h1`, then `h2` and `h1` added in turn.
fn redisson_positions([h1, h2]: [u64; 2], shape: BitmapShape, out: &mut Vec<u64>) {
    let mut acc = h1;
    for i in 0..shape.hashes {
        out.push((acc & i64::MAX as u64) % shape.bits);
        acc = acc.wrapping_add(if i % 2 == 0 { h2 } else { h1 });
    }
}

/// Bits and hashes of a bitmap filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitmapShape {
    pub bits: u64,
    pub hashes: u32,
}

impl BitmapShape {
    /// An explicitly chosen shape (`--bits M --hashes K`), checked against
    /// the layout's limits; Guava's bit count is rounded up to whole longs,
    /// as its array holds them.
    pub fn explicit(layout: BitmapLayout, bits: u64, hashes: u32) -> Option<BitmapShape> {
        let bits = if layout == BitmapLayout::Guava { bits.checked_next_multiple_of(64)? } else { bits };
        (bits > 0 && bits <= layout.max_bits() && (1..=layout.max_hashes()).contains(&hashes))
            .then_some(BitmapShape { bits, hashes })
    }
}

/// A bitmap filter's layout and shape: everything needed to find an item's bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitmapSpec {
    pub layout: BitmapLayout,
    pub shape: BitmapShape,
}

impl BitmapSpec {
    /// The shape the layout's own code derives from a capacity and an error rate.
    pub fn sized(layout: BitmapLayout, capacity: u64, error_rate: f64) -> Result<BitmapSpec, BitmapError> {
        if !layout.sized_by_capacity() {
            return Err(BitmapError::NeedsExplicitShape(layout));
        }
        let shape = layout.shape(capacity, error_rate).ok_or(BitmapError::NoShape {
            layout,
            capacity,
            error_rate,
        })?;
        if shape.hashes > layout.max_hashes() {
            return Err(BitmapError::Hashes { layout, hashes: shape.hashes });
        }
        Ok(BitmapSpec { layout, shape })
    }

    /// An explicitly given shape.
    pub fn explicit(layout: BitmapLayout, bits: u64, hashes: u32) -> Result<BitmapSpec, BitmapError> {
        if !(1..=layout.max_hashes()).contains(&hashes) {
            return Err(BitmapError::Hashes { layout, hashes });
        }
        let shape = BitmapShape::explicit(layout, bits, hashes).ok_or(BitmapError::Bits { layout, bits })?;
        Ok(BitmapSpec { layout, shape })
    }

    /// Appends the positions of `item` to `out` (see [`BitmapLayout::positions`]).
    #[inline]
    pub fn positions(&self, item: &[u8], out: &mut Vec<u64>) {
        self.layout.positions(self.shape, item, out)
    }
}

/// Why a bitmap layout cannot describe a filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BitmapError {
    NeedsExplicitShape(BitmapLayout),
    NoShape { layout: BitmapLayout, capacity: u64, error_rate: f64 },
    Bits { layout: BitmapLayout, bits: u64 },
    Hashes { layout: BitmapLayout, hashes: u32 },
}

impl std::fmt::Display for BitmapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            BitmapError::NeedsExplicitShape(l) => write!(
                f,
                "the {} layout is not sized from a capacity and an error rate: give its bits and \
                 hashes (--bits M --hashes K) as its PHP code has them",
                l.name()
            ),
            BitmapError::NoShape { layout, capacity, error_rate } => write!(
                f,
                "the {} layout cannot hold capacity {capacity} at error rate {error_rate}: it needs an \
                 error rate strictly between 0 and 1 and at most {} bits",
                layout.name(),
                layout.max_bits()
            ),
            BitmapError::Bits { layout, bits } => write!(
                f,
                "{bits} bits is outside the {} layout's range: 1 to {}",
                layout.name(),
                layout.max_bits()
            ),
            BitmapError::Hashes { layout, hashes } => write!(
                f,
                "{hashes} hashes is outside the {} layout's range: 1 to {}",
                layout.name(),
                layout.max_hashes()
            ),
        }
    }
}

impl std::error::Error for BitmapError {}

/// Redisson's `suffixName(name, "config")`: the key of the hash that holds
/// a filter's parameters, in the bitmap's hash slot.
pub fn redisson_config_key(name: &str) -> String {
    if name.contains('{') {
        format!("{name}:config")
    } else {
        format!("{{{name}}}:config")
    }
}

/// Java's `Double.toString`, as Redisson writes `falseProbability` into the
/// config hash: the shortest digits that read back as the same double, in
/// plain notation from 10^-3 up to 10^7 (`0.01`, `12.5`), else as
/// `d.dddE±n` (`1.0E-4`), always with a digit after the point.
pub fn java_double_to_string(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let sign = if value < 0.0 { "-" } else { "" };
    let sci = format!("{:e}", value.abs());
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-3..7).contains(&exp) {
        let body = if exp < 0 {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        } else {
            let int_len = exp as usize + 1;
            let padded = format!("{digits:0<int_len$}");
            let (int, frac) = padded.split_at(int_len);
            format!("{int}.{}", if frac.is_empty() { "0" } else { frac })
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1);
        format!("{sign}{first}.{}E{exp}", if rest.is_empty() { "0" } else { rest })
    }
}

/// `RedissonBloomFilter.getMaxSize()`: `Integer.MAX_VALUE * 2L`.
pub const REDISSON_MAX_BITS: u64 = (i32::MAX as u64) * 2;

/// Redisson's fixed HighwayHash key.
const REDISSON_KEY: [u64; 4] =
    [0x9e3779b97f4a7c15, 0xf39cc0605cedc834, 0x1082276bf3a27251, 0xf86c6a11d0c18e95];

/// Redisson's `Hash.hash128`: HighwayHash-128 with its key.
pub fn redisson_hash(bytes: &[u8]) -> [u64; 2] {
    let mut h = HighwayHasher::new(Key(REDISSON_KEY));
    h.append(bytes);
    h.finalize128()
}

/// A string as Redisson's default codec (`Kryo5Codec`, Kryo 5) encodes it,
/// the bytes its `RBloomFilter` hashes: the class id varint `0x03`, then
/// `Output.writeString`: 2 to 32 ASCII characters as their bytes with the
/// last one's high bit set; otherwise the character count + 1 as a varint
/// whose first byte carries a flag (`0x80`, `0x40` if more follow, 6 bits),
/// then each UTF-16 code unit in one to three bytes (surrogates separately).
pub fn kryo5_string(text: &str) -> Vec<u8> {
    let units: Vec<u16> = text.encode_utf16().collect();
    let mut out = vec![0x03];
    if (2..=32).contains(&units.len()) && units.iter().all(|&c| c <= 0x7F) {
        out.extend(units.iter().map(|&c| c as u8));
        *out.last_mut().expect("at least two characters") |= 0x80;
        return out;
    }
    let value = units.len() as u64 + 1;
    let more = value >> 6 != 0;
    out.push(0x80 | if more { 0x40 } else { 0 } | (value & 0x3F) as u8);
    let mut rest = value >> 6;
    while rest != 0 {
        let byte = (rest & 0x7F) as u8;
        rest >>= 7;
        out.push(if rest != 0 { byte | 0x80 } else { byte });
    }
    for c in units {
        match c {
            0..=0x7F => out.push(c as u8),
            0x80..=0x7FF => out.extend([0xC0 | (c >> 6) as u8, 0x80 | (c & 0x3F) as u8]),
            _ => {
                out.extend([0xE0 | (c >> 12) as u8, 0x80 | ((c >> 6) & 0x3F) as u8, 0x80 | (c & 0x3F) as u8])
            }
        }
    }
    out
}

/// A PHP number: an int, or a float once arithmetic overflowed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum PhpNumber {
    Int(i64),
    Float(f64),
}

/// `getBKDRHashSeed(i)`: 31 for 0, else the digits 1,3,1,3,... (`i + 2` of
/// them) built digit by digit as PHP builds them, promoting to float on
/// overflow (so seeds from i = 18 on carry PHP's own rounding).
fn php_seed(i: u32) -> PhpNumber {
    if i == 0 {
        return PhpNumber::Int(31);
    }
    let mut seed = PhpNumber::Int(0);
    for d in 0..i + 2 {
        let digit = if d % 2 == 0 { 1 } else { 3 };
        seed = match seed {
            PhpNumber::Int(s) => match s.checked_mul(10).and_then(|p| p.checked_add(digit)) {
                Some(v) => PhpNumber::Int(v),
                None => PhpNumber::Float(s as f64 * 10.0 + digit as f64),
            },
            PhpNumber::Float(s) => PhpNumber::Float(s * 10.0 + digit as f64),
        };
    }
    seed
}

/// PHP's conversion of a float to an int (`zend_dval_to_lval`): truncation
/// within range, modular arithmetic beyond it, 0 for NaN and infinities.
fn php_float_to_int(d: f64) -> i64 {
    if !d.is_finite() {
        return 0;
    }
    if d >= -(2f64.powi(63)) && d < 2f64.powi(63) {
        return d as i64;
    }
    let two_64 = 2f64.powi(64);
    let mut m = d % two_64;
    if m < 0.0 {
        m += two_64;
    }
    if m >= 2f64.powi(63) {
        m -= two_64;
    }
    m as i64
}

/// `BKDRHash(str, seed)`: `hash = ((floatval(hash * seed) & 0x7FFFFFFF) +
/// ord(byte)) & 0x7FFFFFFF` over the bytes, with PHP's arithmetic: an int
/// product when it fits, else a float one.
fn php_bkdr(item: &[u8], seed: PhpNumber) -> u64 {
    let mut hash: i64 = 0;
    for &byte in item {
        let product = match seed {
            PhpNumber::Int(s) => match hash.checked_mul(s) {
                Some(p) => p as f64,
                None => hash as f64 * s as f64,
            },
            PhpNumber::Float(s) => hash as f64 * s,
        };
        hash = ((php_float_to_int(product) & 0x7FFF_FFFF) + i64::from(byte)) & 0x7FFF_FFFF;
    }
    hash as u64
}
