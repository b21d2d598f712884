//! Typed parsing of `CMS.*` arguments with RedisBloom 2.8.2's rules and
//! order of checks. Arguments are the whole argv, command name included.
//!
//! Checks that need the keyspace (the key exists, a source's type and
//! dimensions) stay with the module; their place in the order is noted
//! where it interleaves with these.

use super::cells::CellSize;
use super::errors::CmsError;
use super::Rules;
use crate::common::parse::{eq_ignore_case, parse_double, parse_long_long};

/// Width and depth of a new sketch, both at least 1 and with a product
/// that fits 64 signed bits (RedisBloom's guard).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dimensions {
    pub width: u64,
    pub depth: u64,
}

impl Dimensions {
    /// RedisBloom's last check of either form: `width * depth` must fit `i64`.
    fn checked(width: i64, depth: i64) -> Result<Dimensions, CmsError> {
        if width < 1 || depth < 1 || width > i64::MAX / depth {
            return Err(CmsError::InvalidInitArguments);
        }
        Ok(Dimensions { width: width as u64, depth: depth as u64 })
    }
}

/// Both `CMS.INITBY*` take exactly a key and two numbers.
fn check_init_arity<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), CmsError> {
    if argv.len() != 4 {
        return Err(CmsError::WrongArity);
    }
    Ok(())
}

/// `CMS.INITBYDIM key width depth` (after the key-exists check).
pub fn parse_initbydim<A: AsRef<[u8]>>(argv: &[A]) -> Result<Dimensions, CmsError> {
    check_init_arity(argv)?;
    let width = parse_long_long(argv[2].as_ref()).filter(|w| *w >= 1).ok_or(CmsError::InvalidWidth)?;
    let depth = parse_long_long(argv[3].as_ref()).filter(|d| *d >= 1).ok_or(CmsError::InvalidDepth)?;
    Dimensions::checked(width, depth)
}

/// `CMS.INITBYPROB key error probability` (after the key-exists check):
/// width `ceil(2 / error)`, depth `ceil(log10f(prob) / log10f(0.5))` in
/// single precision, as RedisBloom computes them.
pub fn parse_initbyprob<A: AsRef<[u8]>>(argv: &[A]) -> Result<Dimensions, CmsError> {
    check_init_arity(argv)?;
    let in_unit = |v: &f64| *v > 0.0 && *v < 1.0;
    let error = parse_double(argv[2].as_ref()).filter(in_unit).ok_or(CmsError::InvalidOverestimation)?;
    let prob = parse_double(argv[3].as_ref()).filter(in_unit).ok_or(CmsError::InvalidProb)?;
    let (width, depth) = dimensions_from_prob(error, prob);
    Dimensions::checked(width, depth)
}

/// The two sizes as RedisBloom's `size_t` results read back as `long long`:
/// a value that does not fit `i64` (or is not finite) comes out as one the
/// final check refuses, so that it answers `CMS: invalid init arguments`.
pub fn dimensions_from_prob(error: f64, prob: f64) -> (i64, i64) {
    let width = (2.0 / error).ceil();
    // C promotes the float quotient to double for ceil().
    let q = (prob as f32).log10() / 0.5f32.log10();
    let depth = f64::from(q).ceil();
    let fit = |v: f64| if v.is_finite() && v < 9_223_372_036_854_775_808.0 { v as i64 } else { -1 };
    (fit(width), fit(depth))
}

/// A creation's parameters: the dimensions and the cell size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Init {
    pub dims: Dimensions,
    pub cell: CellSize,
}

/// `CMS.INITBYDIM key width depth [CELL_SIZE n]` (after the key-exists
/// check), `CELL_SIZE` under Redis 8.12's rules only.
pub fn parse_initbydim_with<A: AsRef<[u8]>>(argv: &[A], rules: Rules) -> Result<Init, CmsError> {
    let short = check_init_arity_with(argv, rules)?;
    let dims = parse_initbydim(&argv[..4])?;
    Ok(Init { dims, cell: parse_cell_size(&argv[4..], short)? })
}

/// `CMS.INITBYPROB key error probability [CELL_SIZE n]` (after the
/// key-exists check), `CELL_SIZE` under Redis 8.12's rules only.
pub fn parse_initbyprob_with<A: AsRef<[u8]>>(argv: &[A], rules: Rules) -> Result<Init, CmsError> {
    let short = check_init_arity_with(argv, rules)?;
    let dims = parse_initbyprob(&argv[..4])?;
    Ok(Init { dims, cell: parse_cell_size(&argv[4..], short)? })
}

/// Four arguments, or under Redis 8.12's rules six. True for four.
pub fn check_init_arity_with<A: AsRef<[u8]>>(argv: &[A], rules: Rules) -> Result<bool, CmsError> {
    match (argv.len(), rules) {
        (4, _) => Ok(true),
        (6, Rules::CellSized) => Ok(false),
        _ => Err(CmsError::WrongArity),
    }
}

/// The optional `CELL_SIZE n` after the numbers, checked after them as
/// Redis 8.12 does: another token is `CMS: unknown argument`, a value
/// other than 1, 2, 4 or 8 (or not an integer) the `CELL_SIZE` text.
fn parse_cell_size<A: AsRef<[u8]>>(rest: &[A], absent: bool) -> Result<CellSize, CmsError> {
    if absent {
        return Ok(CellSize::DEFAULT);
    }
    if !eq_ignore_case(rest[0].as_ref(), "CELL_SIZE") {
        return Err(CmsError::UnknownArgument);
    }
    parse_long_long(rest[1].as_ref())
        .and_then(|n| u64::try_from(n).ok())
        .and_then(CellSize::from_bytes)
        .ok_or(CmsError::InvalidCellSize)
}

/// `CMS.INCRBY` under Redis 8.12's rules: the increments in order, any
/// 64-bit signed integer, parsed before anything changes (after the key's
/// checks, by the module). A non-integer is `CMS: Cannot parse number`.
pub fn parse_incrby_signed<A: AsRef<[u8]>>(argv: &[A]) -> Result<Vec<i64>, CmsError> {
    let mut out = vec![0; argv.len().saturating_sub(2) / 2];
    parse_incrby_signed_into(argv, &mut out)?;
    Ok(out)
}

/// [`parse_incrby_signed`] into `out`, one increment per pair (`out` holds
/// `(argv.len() - 2) / 2`): the caller chooses where they live.
pub fn parse_incrby_signed_into<A: AsRef<[u8]>>(argv: &[A], out: &mut [i64]) -> Result<(), CmsError> {
    check_incrby_arity(argv)?;
    for (v, o) in argv[3..].iter().step_by(2).zip(out) {
        *o = parse_long_long(v.as_ref()).ok_or(CmsError::CannotParseNumber)?;
    }
    Ok(())
}

/// `CMS.INCRBY key item increment [item increment ...]`: the increments in
/// order, parsed before anything changes (the key is checked first, by the
/// module). Items are at `argv[2 + 2 * i]`.
pub fn parse_incrby<A: AsRef<[u8]>>(argv: &[A]) -> Result<Vec<u64>, CmsError> {
    let mut out = vec![0; argv.len().saturating_sub(2) / 2];
    parse_incrby_into(argv, &mut out)?;
    Ok(out)
}

/// [`parse_incrby`] into `out`, one increment per pair (`out` holds
/// `(argv.len() - 2) / 2`): the caller chooses where they live.
pub fn parse_incrby_into<A: AsRef<[u8]>>(argv: &[A], out: &mut [u64]) -> Result<(), CmsError> {
    check_incrby_arity(argv)?;
    for (v, o) in argv[3..].iter().step_by(2).zip(out) {
        *o = match parse_long_long(v.as_ref()) {
            None => return Err(CmsError::CannotParseNumber),
            Some(v) if v < 0 => return Err(CmsError::NegativeNumber),
            Some(v) => v as u64,
        };
    }
    Ok(())
}

/// At least one pair, and whole pairs.
pub fn check_incrby_arity<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), CmsError> {
    if argv.len() < 4 || argv.len() % 2 == 1 {
        return Err(CmsError::WrongArity);
    }
    Ok(())
}

/// `CMS.MERGE destination numKeys source [source ...] [WEIGHTS weight ...]`,
/// the part checked before any source is looked at: numKeys and the shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merge {
    /// How many sources; they are `argv[3..3 + sources]`.
    pub sources: usize,
    /// Where the weights start in argv, when `WEIGHTS` is given.
    pub weights_from: Option<usize>,
}

impl Merge {
    /// Source `i`'s weight: 1 without `WEIGHTS`. Checked per source, in
    /// RedisBloom's order (before that source's key).
    pub fn weight<A: AsRef<[u8]>>(&self, argv: &[A], i: usize) -> Result<i64, CmsError> {
        match self.weights_from {
            None => Ok(1),
            Some(at) => parse_long_long(argv[at + i].as_ref()).ok_or(CmsError::InvalidWeight),
        }
    }
}

/// The arity and numKeys checks of `CMS.MERGE` (after the destination's
/// checks, which the module makes first).
pub fn parse_merge<A: AsRef<[u8]>>(argv: &[A]) -> Result<Merge, CmsError> {
    check_merge_arity(argv)?;
    let num_keys = parse_long_long(argv[2].as_ref()).ok_or(CmsError::InvalidNumKeys)?;
    if num_keys <= 0 {
        return Err(CmsError::NumKeysNotPositive);
    }
    let rest = &argv[3..];
    let rest_len = rest.len() as i64;
    match rest.iter().position(|a| eq_ignore_case(a.as_ref(), "WEIGHTS")) {
        None if num_keys != rest_len => Err(CmsError::WrongNumberOfKeys),
        None => Ok(Merge { sources: num_keys as usize, weights_from: None }),
        Some(at) if at as i64 != num_keys || Some(rest_len) != num_keys.checked_mul(2).map(|n| n + 1) => {
            Err(CmsError::WrongNumberOfKeysWeights)
        }
        Some(at) => Ok(Merge { sources: at, weights_from: Some(3 + at + 1) }),
    }
}

pub fn check_merge_arity<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), CmsError> {
    if argv.len() < 4 {
        return Err(CmsError::WrongArity);
    }
    Ok(())
}

/// How many words each command takes (see [`Arity`]).
pub mod arity {
    pub use crate::common::parse::Arity;

    pub const QUERY: Arity = Arity::AtLeast(3);
    pub const INFO: Arity = Arity::Exactly(2);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::parse::argv;

    #[test]
    fn initbydim_checks_in_order() {
        let p = |s: &str| parse_initbydim(&argv(s));
        assert_eq!(p("CMS.INITBYDIM k 10 3"), Ok(Dimensions { width: 10, depth: 3 }));
        assert_eq!(p("CMS.INITBYDIM k 10"), Err(CmsError::WrongArity));
        assert_eq!(p("CMS.INITBYDIM k 10 3 4"), Err(CmsError::WrongArity));
        assert_eq!(p("CMS.INITBYDIM k 0 x"), Err(CmsError::InvalidWidth));
        assert_eq!(p("CMS.INITBYDIM k 07 1"), Err(CmsError::InvalidWidth));
        assert_eq!(p("CMS.INITBYDIM k 1 -1"), Err(CmsError::InvalidDepth));
        assert_eq!(p("CMS.INITBYDIM k 4611686018427387904 2"), Err(CmsError::InvalidInitArguments));
        assert_eq!(
            p("CMS.INITBYDIM k 4611686018427387903 2"),
            Ok(Dimensions { width: 4611686018427387903, depth: 2 })
        );
    }

    #[test]
    fn initbyprob_sizes_like_redisbloom() {
        let p = |s: &str| parse_initbyprob(&argv(s));
        assert_eq!(p("CMS.INITBYPROB k 0.001 0.01"), Ok(Dimensions { width: 2000, depth: 7 }));
        assert_eq!(p("CMS.INITBYPROB k 0.5 1e-7"), Ok(Dimensions { width: 4, depth: 24 }));
        assert_eq!(p("CMS.INITBYPROB k 0.5 0.03125"), Ok(Dimensions { width: 4, depth: 5 }));
        assert_eq!(p("CMS.INITBYPROB k 1 0.5"), Err(CmsError::InvalidOverestimation));
        assert_eq!(p("CMS.INITBYPROB k nan 0.5"), Err(CmsError::InvalidOverestimation));
        assert_eq!(p("CMS.INITBYPROB k 0.5 0"), Err(CmsError::InvalidProb));
        assert_eq!(p("CMS.INITBYPROB k 1e-19 0.5"), Err(CmsError::InvalidInitArguments));
        assert_eq!(p("CMS.INITBYPROB k 0.5 1e-300"), Err(CmsError::InvalidInitArguments));
    }

    #[test]
    fn cell_size_follows_the_numbers_under_8_12() {
        let dim = |s: &str| parse_initbydim_with(&argv(s), Rules::CellSized);
        let prob = |s: &str| parse_initbyprob_with(&argv(s), Rules::CellSized);
        let d = |width, depth| Dimensions { width, depth };
        assert_eq!(dim("CMS.INITBYDIM k 20 5"), Ok(Init { dims: d(20, 5), cell: CellSize::Four }));
        for (n, cell) in
            [("1", CellSize::One), ("2", CellSize::Two), ("4", CellSize::Four), ("8", CellSize::Eight)]
        {
            assert_eq!(
                dim(&format!("CMS.INITBYDIM k 20 5 CELL_SIZE {n}")),
                Ok(Init { dims: d(20, 5), cell })
            );
            assert_eq!(
                prob(&format!("CMS.INITBYPROB k 0.001 0.01 cell_size {n}")),
                Ok(Init { dims: d(2000, 7), cell })
            );
        }
        for bad in ["0", "3", "5", "6", "7", "9", "16", "-1", "-4", "blah", "4.5", "04", "+4"] {
            assert_eq!(
                dim(&format!("CMS.INITBYDIM k 20 5 CELL_SIZE {bad}")),
                Err(CmsError::InvalidCellSize),
                "{bad}"
            );
        }
        assert_eq!(dim("CMS.INITBYDIM k 20 5 CELLSIZE 1"), Err(CmsError::UnknownArgument));
        assert_eq!(prob("CMS.INITBYPROB k 0.001 0.01 OOR 1"), Err(CmsError::UnknownArgument));
        assert_eq!(dim("CMS.INITBYDIM k 20 5 CELL_SIZE"), Err(CmsError::WrongArity));
        assert_eq!(dim("CMS.INITBYDIM k 20 5 CELL_SIZE 1 2"), Err(CmsError::WrongArity));
        // The numbers are checked first, the guard included.
        assert_eq!(dim("CMS.INITBYDIM k 0 5 CELL_SIZE 3"), Err(CmsError::InvalidWidth));
        assert_eq!(prob("CMS.INITBYPROB k 2 0.01 CELL_SIZE 3"), Err(CmsError::InvalidOverestimation));
        assert_eq!(dim("CMS.INITBYDIM k 4611686018427387904 2 X 3"), Err(CmsError::InvalidInitArguments));
        // The older rules know no CELL_SIZE: six arguments are an arity error.
        let old = |s: &str| parse_initbydim_with(&argv(s), Rules::Classic);
        assert_eq!(old("CMS.INITBYDIM k 20 5 CELL_SIZE 4"), Err(CmsError::WrongArity));
        assert_eq!(old("CMS.INITBYDIM k 20 5"), Ok(Init { dims: d(20, 5), cell: CellSize::Four }));
    }

    #[test]
    fn signed_increments_under_8_12() {
        assert_eq!(parse_incrby_signed(&argv("CMS.INCRBY k a -5 b 3 a 0")), Ok(vec![-5, 3, 0]));
        assert_eq!(
            parse_incrby_signed(&argv("CMS.INCRBY k a -9223372036854775808")),
            Ok(vec![i64::MIN]),
            "i64::MIN parses; the sketch refuses it as an underflow"
        );
        assert_eq!(parse_incrby_signed(&argv("CMS.INCRBY k a -1 b x")), Err(CmsError::CannotParseNumber));
        assert_eq!(parse_incrby_signed(&argv("CMS.INCRBY k a 1 b")), Err(CmsError::WrongArity));
    }

    #[test]
    fn incrby_parses_every_increment_first() {
        assert_eq!(parse_incrby(&argv("CMS.INCRBY k a 5 b 3 a 2")), Ok(vec![5, 3, 2]));
        assert_eq!(parse_incrby(&argv("CMS.INCRBY k a 5 b")), Err(CmsError::WrongArity));
        assert_eq!(parse_incrby(&argv("CMS.INCRBY k a")), Err(CmsError::WrongArity));
        assert_eq!(parse_incrby(&argv("CMS.INCRBY k a -1 b x")), Err(CmsError::NegativeNumber));
        assert_eq!(parse_incrby(&argv("CMS.INCRBY k a x b -1")), Err(CmsError::CannotParseNumber));
    }

    #[test]
    fn merge_shapes() {
        let p = |s: &str| parse_merge(&argv(s));
        assert_eq!(p("CMS.MERGE d 2 a b"), Ok(Merge { sources: 2, weights_from: None }));
        assert_eq!(p("CMS.MERGE d 2 a b weights 1 2"), Ok(Merge { sources: 2, weights_from: Some(6) }));
        assert_eq!(p("CMS.MERGE d 2 a"), Err(CmsError::WrongNumberOfKeys));
        assert_eq!(p("CMS.MERGE d x a"), Err(CmsError::InvalidNumKeys));
        assert_eq!(p("CMS.MERGE d 0 a"), Err(CmsError::NumKeysNotPositive));
        assert_eq!(p("CMS.MERGE d -5 a"), Err(CmsError::NumKeysNotPositive));
        assert_eq!(p("CMS.MERGE d 2 a b WEIGHTS 1"), Err(CmsError::WrongNumberOfKeysWeights));
        assert_eq!(p("CMS.MERGE d 1 WEIGHTS a 1"), Err(CmsError::WrongNumberOfKeysWeights));
        assert_eq!(p("CMS.MERGE d 9223372036854775807 a WEIGHTS"), Err(CmsError::WrongNumberOfKeysWeights));
        assert_eq!(p("CMS.MERGE d 2"), Err(CmsError::WrongArity));
        let m = p("CMS.MERGE d 2 a b WEIGHTS 3 x").unwrap();
        let a = argv("CMS.MERGE d 2 a b WEIGHTS 3 x");
        assert_eq!(m.weight(&a, 0), Ok(3));
        assert_eq!(m.weight(&a, 1), Err(CmsError::InvalidWeight));
    }
}
