//! Typed parsing of `TDIGEST.*` arguments, with RedisBloom 2.8.2's rules
//! and order of checks. The module checks the arity and looks the key up
//! first, as RedisBloom does; these read what follows.
//!
//! Arguments are the whole argv, command name included, unless a function
//! says it takes only the values.

use super::errors::TdError;
use super::DEFAULT_COMPRESSION;
use crate::common::parse::{eq_ignore_case, parse_double, parse_long_long};

/// A double argument, read as the server's `string2d` reads it
/// ([`parse_double`]), plain decimals (`-?digits[.digits]`, the values a
/// client usually sends) without a copy or a call to `strtod`.
#[inline]
fn double(s: &[u8]) -> Option<f64> {
    match plain_decimal(s) {
        Some(x) => Some(x),
        None => parse_double(s),
    }
}

/// Powers of ten that a double holds exactly.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    1e19, 1e20, 1e21, 1e22,
];

/// `-?digits[.digits]` of at most 19 digits and point whose digits, read
/// as one integer, are at most 2^53: that integer and the power of ten
/// (at most 10^17) are exact doubles, so one IEEE division rounds the decimal exactly
/// as a correctly rounded `strtod` does (Clinger's fast path). `None` for
/// anything else (exponents, `+`, a bare `.`, more digits, hex, `inf`):
/// the caller then asks `strtod`.
#[inline]
fn plain_decimal(s: &[u8]) -> Option<f64> {
    let (negative, body) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    // At most 19 characters: at most 19 digits, below 10^19 < 2^64, so
    // the integer below cannot overflow.
    if body.is_empty() || body.len() > 19 {
        return None;
    }
    let mut mantissa = 0u64;
    let mut point = None;
    for (i, &c) in body.iter().enumerate() {
        let digit = c.wrapping_sub(b'0');
        if digit < 10 {
            mantissa = mantissa * 10 + u64::from(digit);
        } else if c == b'.' && point.is_none() && i > 0 && i + 1 < body.len() {
            // One point, with digits on both sides.
            point = Some(i);
        } else {
            return None;
        }
    }
    if mantissa > 1 << 53 {
        return None;
    }
    // At most 17 fraction digits: always in the table.
    let power = EXACT_POWERS_OF_TEN[point.map_or(0, |p| body.len() - p - 1)];
    let magnitude = mantissa as f64 / power;
    Some(if negative { -magnitude } else { magnitude })
}

/// A compression value: an integer above zero.
pub fn parse_compression(word: &[u8]) -> Result<i64, TdError> {
    let c = parse_long_long(word).ok_or(TdError::CompressionParse)?;
    if c <= 0 {
        return Err(TdError::CompressionNotPositive);
    }
    Ok(c)
}

/// `TDIGEST.CREATE key [COMPRESSION c]` (argv of 2 or 4, checked by the
/// caller): the keyword may be either of the last two arguments, the value
/// is always the last one, as in RedisBloom.
pub fn parse_create<A: AsRef<[u8]>>(argv: &[A]) -> Result<i64, TdError> {
    match argv.len() {
        2 => Ok(DEFAULT_COMPRESSION),
        4 => {
            if !argv[2..].iter().any(|a| eq_ignore_case(a.as_ref(), "COMPRESSION")) {
                return Err(TdError::WrongKeyword);
            }
            parse_compression(argv[3].as_ref())
        }
        _ => Err(TdError::WrongArity),
    }
}

/// A parsed `TDIGEST.MERGE destination numkeys source... [COMPRESSION c] [OVERRIDE]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merge {
    pub numkeys: usize,
    pub compression: Option<i64>,
    pub overwrite: bool,
}

/// The arguments of `TDIGEST.MERGE` after the destination's type check
/// (argv of at least 4, checked by the caller): numkeys, then the options
/// after the sources, where unknown words are ignored once a keyword is
/// found (RedisBloom's order of checks).
pub fn parse_merge<A: AsRef<[u8]>>(argv: &[A]) -> Result<Merge, TdError> {
    let numkeys = parse_long_long(argv[2].as_ref()).ok_or(TdError::NumkeysParse)?;
    if numkeys <= 0 {
        return Err(TdError::NumkeysNotPositive);
    }
    if numkeys > argv.len() as i64 - 3 {
        return Err(TdError::WrongArity);
    }
    let numkeys = numkeys as usize;
    let rest = &argv[3 + numkeys..];
    let find = |word: &str| rest.iter().position(|a| eq_ignore_case(a.as_ref(), word));
    let mut compression = None;
    let mut overwrite = false;
    if !rest.is_empty() {
        let at = find("COMPRESSION");
        if let Some(at) = at {
            let value = rest.get(at + 1).ok_or(TdError::WrongArity)?;
            compression = Some(parse_compression(value.as_ref())?);
        }
        overwrite = find("OVERRIDE").is_some();
        if at.is_none() && !overwrite {
            return Err(TdError::WrongKeyword);
        }
    }
    Ok(Merge { numkeys, compression, overwrite })
}

/// `TDIGEST.ADD`'s values (argv after the key): every one parsed before
/// any is added.
pub fn parse_add_values<A: AsRef<[u8]>>(values: &[A]) -> Result<Vec<f64>, TdError> {
    let mut out = vec![0.0; values.len()];
    parse_add_values_into(values, &mut out)?;
    Ok(out)
}

/// [`parse_add_values`] into `out` (as long as `values`): the caller
/// chooses where they live.
pub fn parse_add_values_into<A: AsRef<[u8]>>(values: &[A], out: &mut [f64]) -> Result<(), TdError> {
    for (v, o) in values.iter().zip(out) {
        let x = double(v.as_ref()).ok_or(TdError::ValParse)?;
        if !x.is_finite() {
            return Err(TdError::ValNotFinite);
        }
        *o = x;
    }
    Ok(())
}

/// `TDIGEST.QUANTILE`'s fractions (argv after the key), each in [0, 1].
pub fn parse_quantiles<A: AsRef<[u8]>>(values: &[A]) -> Result<Vec<f64>, TdError> {
    let mut out = vec![0.0; values.len()];
    parse_quantiles_into(values, &mut out)?;
    Ok(out)
}

/// [`parse_quantiles`] into `out` (as long as `values`).
pub fn parse_quantiles_into<A: AsRef<[u8]>>(values: &[A], out: &mut [f64]) -> Result<(), TdError> {
    for (v, o) in values.iter().zip(out) {
        let q = double(v.as_ref()).ok_or(TdError::QuantileParse)?;
        if !(0.0..=1.0).contains(&q) {
            return Err(TdError::QuantileRange);
        }
        *o = q;
    }
    Ok(())
}

/// `TDIGEST.CDF`'s values (argv after the key); infinities are accepted.
pub fn parse_cdf_values<A: AsRef<[u8]>>(values: &[A]) -> Result<Vec<f64>, TdError> {
    let mut out = vec![0.0; values.len()];
    parse_cdf_values_into(values, &mut out)?;
    Ok(out)
}

/// [`parse_cdf_values`] into `out` (as long as `values`).
pub fn parse_cdf_values_into<A: AsRef<[u8]>>(values: &[A], out: &mut [f64]) -> Result<(), TdError> {
    for (v, o) in values.iter().zip(out) {
        *o = double(v.as_ref()).ok_or(TdError::CdfParse)?;
    }
    Ok(())
}

/// `TDIGEST.RANK`/`REVRANK`'s values (argv after the key).
pub fn parse_rank_values<A: AsRef<[u8]>>(values: &[A]) -> Result<Vec<f64>, TdError> {
    values.iter().map(|v| double(v.as_ref()).ok_or(TdError::ValueParse)).collect()
}

/// `TDIGEST.BYRANK`/`BYREVRANK`'s ranks (argv after the key), integers from 0.
pub fn parse_ranks<A: AsRef<[u8]>>(values: &[A]) -> Result<Vec<i64>, TdError> {
    values
        .iter()
        .map(|v| {
            let r = parse_long_long(v.as_ref()).ok_or(TdError::RankParse)?;
            if r < 0 {
                return Err(TdError::RankNegative);
            }
            Ok(r)
        })
        .collect()
}

/// `TDIGEST.TRIMMED_MEAN key low high` (argv of 4, checked by the caller).
pub fn parse_trimmed_mean<A: AsRef<[u8]>>(argv: &[A]) -> Result<(f64, f64), TdError> {
    let low = double(argv[2].as_ref()).ok_or(TdError::LowCutParse)?;
    let high = double(argv[3].as_ref()).ok_or(TdError::HighCutParse)?;
    if !(0.0..=1.0).contains(&low) || !(0.0..=1.0).contains(&high) {
        return Err(TdError::CutRange);
    }
    if low >= high {
        return Err(TdError::CutOrder);
    }
    Ok((low, high))
}

/// How many words each command takes (see [`Arity`]).
pub mod arity {
    pub use crate::common::parse::Arity;

    pub const CREATE: Arity = Arity::Either(2, 4);
    pub const RESET: Arity = Arity::Exactly(2);
    pub const ADD: Arity = Arity::AtLeast(3);
    pub const MERGE: Arity = Arity::AtLeast(4);
    pub const QUANTILE: Arity = Arity::AtLeast(3);
    pub const CDF: Arity = Arity::AtLeast(3);
    pub const TRIMMED_MEAN: Arity = Arity::Exactly(4);
    pub const RANK: Arity = Arity::AtLeast(3);
    pub const BY_RANK: Arity = Arity::AtLeast(3);
    pub const ONE_KEY: Arity = Arity::Exactly(2);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::parse::argv;

    /// The plain-decimal path reads every string as `string2d` does, bit
    /// for bit, and leaves to it whatever it does not take.
    #[test]
    fn doubles_read_as_string2d_reads_them() {
        let mut fixed: Vec<String> = [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1",
            "-1",
            "007",
            "000000123456",
            "1.5",
            "-2.25",
            "0.1",
            "0.3",
            "1.",
            ".5",
            "-.5",
            "-",
            "",
            ".",
            "1.2.3",
            "1e3",
            "+1",
            " 1",
            "1 ",
            "inf",
            "nan",
            "0x10",
            "9007199254740992",
            "9007199254740993",
            "-9007199254740993",
            "18446744073709551615",
            "18446744073709551616",
            "123456789012345678901234567890",
            "0.0000000000000000000001",
            "0.00000000000000000000001",
            "1.7976931348623157",
            "4.9e-324",
            "0.99",
            "0.5",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut state = 0x5eed_1234_abcd_0001u64;
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            state >> 33
        };
        for _ in 0..200_000 {
            let int_digits = next() % 20;
            let frac_digits = next() % 26;
            let mut t = String::new();
            if next() % 3 == 0 {
                t.push('-');
            }
            for _ in 0..int_digits {
                t.push(char::from(b'0' + (next() % 10) as u8));
            }
            if next() % 2 == 0 {
                t.push('.');
                for _ in 0..frac_digits {
                    t.push(char::from(b'0' + (next() % 10) as u8));
                }
            }
            fixed.push(t);
        }
        let mut fast = 0;
        for t in &fixed {
            let want = parse_double(t.as_bytes()).map(f64::to_bits);
            assert_eq!(double(t.as_bytes()).map(f64::to_bits), want, "{t:?}");
            if let Some(x) = plain_decimal(t.as_bytes()) {
                assert_eq!(Some(x.to_bits()), want, "{t:?}");
                fast += 1;
            }
        }
        assert!(fast > 50_000, "the plain path took {fast}");
    }

    #[test]
    fn create_reads_the_last_argument() {
        assert_eq!(parse_create(&argv("TDIGEST.CREATE k")), Ok(100));
        assert_eq!(parse_create(&argv("TDIGEST.CREATE k compression 7")), Ok(7));
        assert_eq!(parse_create(&argv("TDIGEST.CREATE k 7 COMPRESSION")), Err(TdError::CompressionParse));
        assert_eq!(parse_create(&argv("TDIGEST.CREATE k x 7")), Err(TdError::WrongKeyword));
        assert_eq!(
            parse_create(&argv("TDIGEST.CREATE k COMPRESSION 0")),
            Err(TdError::CompressionNotPositive)
        );
        assert_eq!(parse_create(&argv("TDIGEST.CREATE k COMPRESSION 1.5")), Err(TdError::CompressionParse));
    }

    #[test]
    fn merge_in_redisbloom_order() {
        let ok = |s: &str| parse_merge(&argv(s)).unwrap();
        let err = |s: &str| parse_merge(&argv(s)).unwrap_err();
        assert_eq!(ok("M d 2 a b"), Merge { numkeys: 2, compression: None, overwrite: false });
        assert_eq!(ok("M d 1 a foo override"), Merge { numkeys: 1, compression: None, overwrite: true });
        assert_eq!(
            ok("M d 1 a COMPRESSION 5 x"),
            Merge { numkeys: 1, compression: Some(5), overwrite: false }
        );
        assert_eq!(err("M d x a"), TdError::NumkeysParse);
        assert_eq!(err("M d 0 a"), TdError::NumkeysNotPositive);
        assert_eq!(err("M d 3 a b"), TdError::WrongArity);
        assert_eq!(err("M d 1 a COMPRESSION"), TdError::WrongArity);
        assert_eq!(err("M d 1 a COMPRESSION -1 OVERRIDE"), TdError::CompressionNotPositive);
        assert_eq!(err("M d 1 a b"), TdError::WrongKeyword);
    }

    #[test]
    fn values() {
        assert_eq!(parse_add_values(&argv("1 inf")), Err(TdError::ValNotFinite));
        assert_eq!(parse_add_values(&argv("nan 1")), Err(TdError::ValParse));
        assert_eq!(parse_quantiles(&argv("0 1.5")), Err(TdError::QuantileRange));
        assert_eq!(parse_cdf_values(&argv("-inf 3")), Ok(vec![f64::NEG_INFINITY, 3.0]));
        assert_eq!(parse_ranks(&argv("0 -1")), Err(TdError::RankNegative));
        assert_eq!(parse_trimmed_mean(&argv("T k 0.5 0.5")), Err(TdError::CutOrder));
        assert_eq!(parse_trimmed_mean(&argv("T k x y")), Err(TdError::LowCutParse));
        assert_eq!(parse_trimmed_mean(&argv("T k -1 y")), Err(TdError::HighCutParse));
        assert_eq!(parse_trimmed_mean(&argv("T k -1 0.5")), Err(TdError::CutRange));
    }
}
