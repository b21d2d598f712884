//! Typed parsing of `CF.*` arguments, with RedisBloom 2.8.2's rules and
//! order of checks, or RedisBloom 8's as measured (`bf.compat
//! redisbloom-8`): the same order of options, then the capacity's range
//! [2 x bucket size, 2^30] checked last, a bucket size of at most
//! min(255, cf-initial-size / 2), and its own texts (no `ERR`, the option
//! named first).
//!
//! Arguments are the whole argv, command name included, as the server passes them.

use super::errors::CfError;
use super::{
    CuckooParams, DEFAULT_BUCKET_SIZE, DEFAULT_CAPACITY, DEFAULT_EXPANSION, DEFAULT_MAX_ITERATIONS,
    MAX_BUCKET_SIZE, MAX_EXPANSION, MAX_EXPANSIONS,
};
use crate::common::compat::Compat;
use crate::common::parse::{eq_ignore_case, parse_long_long};

/// RedisBloom 8's largest capacity at creation (2^30), as for `BF.*`.
pub const MAX_CAPACITY_8: i64 = 1 << 30;

/// What a write uses for a filter it creates, and for options `CF.RESERVE`
/// leaves out: RedisBloom's constants, or RedisBloom 8's `cf-*` configs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CfDefaults {
    /// `cf-initial-size`: the capacity `CF.ADD` and `CF.INSERT` create with.
    pub capacity: u64,
    pub bucket_size: u16,
    pub max_iterations: u16,
    pub expansion: u16,
    /// `cf-max-expansions`: writes are refused once a filter has this many
    /// sub-filters ("Maximum expansions reached").
    pub max_expansions: usize,
}

impl CfDefaults {
    pub const REDISBLOOM: CfDefaults = CfDefaults {
        capacity: DEFAULT_CAPACITY,
        bucket_size: DEFAULT_BUCKET_SIZE,
        max_iterations: DEFAULT_MAX_ITERATIONS,
        expansion: DEFAULT_EXPANSION,
        max_expansions: MAX_EXPANSIONS,
    };

    /// The parameters of a filter a write creates with this capacity.
    pub fn params(&self, capacity: u64) -> CuckooParams {
        CuckooParams {
            capacity,
            bucket_size: self.bucket_size,
            max_iterations: self.max_iterations,
            expansion: self.expansion,
        }
    }
}

/// `CF.RESERVE key capacity [BUCKETSIZE n] [MAXITERATIONS n] [EXPANSION n]`,
/// with RedisBloom's order of checks: capacity parsed, MAXITERATIONS,
/// BUCKETSIZE, EXPANSION, then the capacity against the bucket size (and,
/// at RedisBloom 8's level, against 2^30). Keywords are found anywhere in
/// argv (key included), unknown words are ignored.
pub fn parse_reserve<A: AsRef<[u8]>>(
    argv: &[A],
    defaults: &CfDefaults,
    compat: Compat,
) -> Result<CuckooParams, CfError> {
    if argv.len() < 3 || argv.len().is_multiple_of(2) {
        return Err(CfError::WrongArity);
    }
    let capacity = parse_long_long(argv[2].as_ref()).ok_or(CfError::BadCapacity)?;
    let v8 = compat == Compat::RedisBloom8;
    // RedisBloom 8 links the bucket size's maximum to cf-initial-size.
    let max_bucket =
        if v8 { (defaults.capacity / 2).min(u64::from(MAX_BUCKET_SIZE)) as u16 } else { MAX_BUCKET_SIZE };
    let option = |word: &str, default: u16, range: (i64, i64), not_number, out_of_range| {
        let Some(at) = argv.iter().position(|a| eq_ignore_case(a.as_ref(), word)) else {
            return Ok(default);
        };
        let v = argv.get(at + 1).and_then(|v| parse_long_long(v.as_ref())).ok_or(not_number)?;
        if !(range.0..=range.1).contains(&v) {
            return Err(out_of_range);
        }
        Ok(v as u16)
    };
    use CfError::*;
    let max_iterations = option(
        "MAXITERATIONS",
        defaults.max_iterations,
        (1, i64::from(u16::MAX)),
        MaxIterationsNotNumber,
        if v8 { MaxIterationsOutOfRange } else { MaxIterationsRange },
    )?;
    let bucket_size = option(
        "BUCKETSIZE",
        defaults.bucket_size,
        (1, i64::from(max_bucket)),
        BucketSizeNotNumber,
        if v8 { BucketSizeOutOfRange { max: max_bucket } } else { BucketSizeRange },
    )?;
    let expansion = option(
        "EXPANSION",
        defaults.expansion,
        (0, i64::from(MAX_EXPANSION)),
        ExpansionNotNumber,
        if v8 { ExpansionOutOfRange } else { ExpansionRange },
    )?;
    if v8 && !(i64::from(bucket_size) * 2..=MAX_CAPACITY_8).contains(&capacity) {
        return Err(CapacityOutOfRange);
    }
    if i64::from(bucket_size) * 2 > capacity {
        return Err(CapacityTooSmall);
    }
    Ok(CuckooParams { capacity: capacity as u64, bucket_size, max_iterations, expansion })
}

/// A parsed `CF.INSERT` / `CF.INSERTNX`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Insert {
    /// Capacity of the filter created for a missing key.
    pub capacity: u64,
    pub create: bool,
    /// Index in argv of the first item.
    pub items_from: usize,
}

/// `CF.INSERT key [CAPACITY c] [NOCREATE] ITEMS item...`: options told apart
/// by their first letter (`c`, `n`, `i`), as RedisBloom does.
pub fn parse_insert<A: AsRef<[u8]>>(
    argv: &[A],
    defaults: &CfDefaults,
    compat: Compat,
) -> Result<Insert, CfError> {
    if argv.len() < 4 {
        return Err(CfError::WrongArity);
    }
    let mut capacity = defaults.capacity as i64;
    let mut create = true;
    let mut items_from = None;
    let mut pos = 2;
    while pos < argv.len() && items_from.is_none() {
        match argv[pos].as_ref().first().map(u8::to_ascii_lowercase) {
            Some(b'c') => {
                let value = argv.get(pos + 1).ok_or(CfError::WrongArity)?;
                capacity = parse_long_long(value.as_ref()).ok_or(CfError::BadCapacity)?;
                let least = 2 * i64::from(defaults.bucket_size);
                if compat == Compat::RedisBloom8 && !(least..=MAX_CAPACITY_8).contains(&capacity) {
                    return Err(CfError::InsertCapacityOutOfRange);
                }
                if least > capacity {
                    return Err(CfError::CapacityTooSmall);
                }
                pos += 2;
            }
            Some(b'i') => {
                pos += 1;
                items_from = Some(pos);
            }
            Some(b'n') => {
                create = false;
                pos += 1;
            }
            _ => return Err(CfError::UnknownArgument),
        }
    }
    match items_from {
        Some(i) if i < argv.len() => Ok(Insert { capacity: capacity as u64, create, items_from: i }),
        _ => Err(CfError::WrongArity),
    }
}

/// The position of `CF.SCANDUMP key pos`: a non-negative integer.
pub fn parse_scandump_pos(word: &[u8]) -> Result<i64, CfError> {
    parse_long_long(word).filter(|p| *p >= 0).ok_or(CfError::InvalidPosition)
}

/// The position of `CF.LOADCHUNK key pos data`: any integer but 0 (1 is the header).
pub fn parse_loadchunk_pos(word: &[u8]) -> Result<i64, CfError> {
    parse_long_long(word).filter(|p| *p != 0).ok_or(CfError::InvalidPosition)
}

/// How many words each command takes (see [`Arity`]).
pub mod arity {
    pub use crate::common::parse::Arity;

    pub const ADD_ONE: Arity = Arity::Exactly(3);
    pub const EXISTS: Arity = Arity::Exactly(3);
    pub const MEXISTS: Arity = Arity::AtLeast(3);
    pub const COUNT: Arity = Arity::Exactly(3);
    pub const DEL: Arity = Arity::Exactly(3);
    pub const COMPACT: Arity = Arity::Exactly(2);
    pub const INFO: Arity = Arity::Exactly(2);
    pub const DEBUG: Arity = Arity::Exactly(2);
    pub const SCANDUMP: Arity = Arity::Exactly(3);
    pub const LOADCHUNK: Arity = Arity::Exactly(4);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::parse::argv;

    #[test]
    fn reserve_checks_in_redisbloom_order() {
        let err =
            |s: &str| parse_reserve(&argv(s), &CfDefaults::REDISBLOOM, Compat::RedisBloom28).unwrap_err();
        assert_eq!(err("CF.RESERVE k"), CfError::WrongArity);
        assert_eq!(err("CF.RESERVE k 10 BUCKETSIZE"), CfError::WrongArity);
        assert_eq!(err("CF.RESERVE k x"), CfError::BadCapacity);
        assert_eq!(err("CF.RESERVE k 100 bucketsize 0 maxiterations 0"), CfError::MaxIterationsRange);
        assert_eq!(err("CF.RESERVE k 100 expansion -1 bucketsize 0"), CfError::BucketSizeRange);
        assert_eq!(err("CF.RESERVE k 10 foo maxiterations"), CfError::MaxIterationsNotNumber);
        assert_eq!(err("CF.RESERVE k 100 EXPANSION 32769"), CfError::ExpansionRange);
        assert_eq!(err("CF.RESERVE k 3"), CfError::CapacityTooSmall);
        assert_eq!(err("CF.RESERVE bucketsize 10"), CfError::CapacityTooSmall);
        let p = parse_reserve(
            &argv("CF.RESERVE maxiterations 10"),
            &CfDefaults::REDISBLOOM,
            Compat::RedisBloom28,
        )
        .unwrap();
        assert_eq!(p.max_iterations, 10);
        let p = parse_reserve(
            &argv("CF.RESERVE k 100 foo 3 EXPANSION 0"),
            &CfDefaults::REDISBLOOM,
            Compat::RedisBloom28,
        )
        .unwrap();
        assert_eq!((p.capacity, p.bucket_size, p.expansion), (100, 2, 0));
    }

    #[test]
    fn insert_options_by_first_letter() {
        let ok = |s: &str| parse_insert(&argv(s), &CfDefaults::REDISBLOOM, Compat::RedisBloom28).unwrap();
        let err =
            |s: &str| parse_insert(&argv(s), &CfDefaults::REDISBLOOM, Compat::RedisBloom28).unwrap_err();
        assert_eq!(ok("CF.INSERT k Cap 5 n items a"), Insert { capacity: 5, create: false, items_from: 6 });
        assert_eq!(ok("CF.INSERT k i a").items_from, 3);
        assert_eq!(err("CF.INSERT k items"), CfError::WrongArity);
        assert_eq!(err("CF.INSERT k capacity"), CfError::WrongArity);
        assert_eq!(err("CF.INSERT k capacity 3 items a"), CfError::CapacityTooSmall);
        assert_eq!(err("CF.INSERT k foo items a"), CfError::UnknownArgument);
        assert_eq!(parse_scandump_pos(b"-1"), Err(CfError::InvalidPosition));
        assert_eq!(parse_loadchunk_pos(b"0"), Err(CfError::InvalidPosition));
        assert_eq!(parse_loadchunk_pos(b"-5"), Ok(-5));
    }

    #[test]
    fn configured_defaults_fill_what_the_command_leaves_out() {
        let d =
            CfDefaults { capacity: 64, bucket_size: 4, max_iterations: 7, expansion: 2, max_expansions: 5 };
        let p = parse_reserve(&argv("CF.RESERVE k 100"), &d, Compat::RedisBloom28).unwrap();
        assert_eq!((p.bucket_size, p.max_iterations, p.expansion), (4, 7, 2));
        let p = parse_reserve(&argv("CF.RESERVE k 100 BUCKETSIZE 1"), &d, Compat::RedisBloom28).unwrap();
        assert_eq!(p.bucket_size, 1);
        assert_eq!(
            parse_insert(&argv("CF.INSERT k ITEMS a"), &d, Compat::RedisBloom28).unwrap().capacity,
            64
        );
        // The bucket size a created filter gets bounds the capacity asked for.
        assert_eq!(
            parse_insert(&argv("CF.INSERT k CAPACITY 7 ITEMS a"), &d, Compat::RedisBloom28),
            Err(CfError::CapacityTooSmall)
        );
        assert_eq!(d.params(10).bucket_size, 4);
    }

    #[test]
    fn redisbloom_8_names_each_range() {
        let v8 = |s: &str| parse_reserve(&argv(s), &CfDefaults::REDISBLOOM, Compat::RedisBloom8).unwrap_err();
        assert_eq!(v8("CF.RESERVE k 1073741825"), CfError::CapacityOutOfRange);
        assert_eq!(v8("CF.RESERVE k 0"), CfError::CapacityOutOfRange);
        assert_eq!(v8("CF.RESERVE k 100 MAXITERATIONS 0"), CfError::MaxIterationsOutOfRange);
        assert_eq!(v8("CF.RESERVE k 100 BUCKETSIZE 256"), CfError::BucketSizeOutOfRange { max: 255 });
        assert_eq!(v8("CF.RESERVE k 100 EXPANSION 32769"), CfError::ExpansionOutOfRange);
        assert_eq!(v8("CF.RESERVE k 3"), CfError::CapacityOutOfRange);
        assert_eq!(v8("CF.RESERVE k -1"), CfError::CapacityOutOfRange);
        assert_eq!(v8("CF.RESERVE k x BUCKETSIZE 0"), CfError::BadCapacity);
        // The capacity's range is checked last.
        assert_eq!(v8("CF.RESERVE k 0 BUCKETSIZE 0"), CfError::BucketSizeOutOfRange { max: 255 });
        assert_eq!(v8("CF.RESERVE k 9 BUCKETSIZE 5"), CfError::CapacityOutOfRange);
        // cf-initial-size 4 bounds the bucket size at 2.
        let small = CfDefaults { capacity: 4, ..CfDefaults::REDISBLOOM };
        let e = parse_reserve(&argv("CF.RESERVE c 511 BUCKETSIZE 255"), &small, Compat::RedisBloom8);
        assert_eq!(e, Err(CfError::BucketSizeOutOfRange { max: 2 }));
        assert_eq!(e.unwrap_err().to_string(), "BUCKETSIZE: value must be in the range [1, 2]");
        let p = parse_reserve(&argv("CF.RESERVE k 1073741824"), &CfDefaults::REDISBLOOM, Compat::RedisBloom8);
        assert_eq!(p.unwrap().capacity, 1 << 30);
        let ins = |s: &str| parse_insert(&argv(s), &CfDefaults::REDISBLOOM, Compat::RedisBloom8);
        assert_eq!(ins("CF.INSERT k CAPACITY 1073741825 ITEMS a"), Err(CfError::InsertCapacityOutOfRange));
        assert_eq!(ins("CF.INSERT k CAPACITY 3 ITEMS a"), Err(CfError::InsertCapacityOutOfRange));
        // 2.8.2 takes any capacity it can size.
        let p =
            parse_reserve(&argv("CF.RESERVE k 1073741825"), &CfDefaults::REDISBLOOM, Compat::RedisBloom28);
        assert!(p.is_ok());
    }
}
