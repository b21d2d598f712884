//! Typed parsing of `BF.RESERVE` / `BF.INSERT` / `BF.INFO` arguments, with
//! RedisBloom 2.8.2's rules and quirks, checked against the live module.
//!
//! Arguments are the whole argv, command name included, as the server passes them.

use crate::apbf::{ApbfError, ApbfParams, Window, MAX_WINDOW_SECONDS};
use crate::chain::ChainParams;
use crate::cuckoo::{self, CuckooError, CuckooParams};
use crate::error::{Error, MAX_EXPANSION};

/// What a parse can end in besides a value.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgError {
    /// The server's own wrong-arity error.
    WrongArity,
    Reply(Error),
}

impl From<Error> for ArgError {
    fn from(e: Error) -> ArgError {
        ArgError::Reply(e)
    }
}

/// Parameters used when a write creates a filter without naming them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Defaults {
    pub error: f64,
    pub capacity: u64,
    pub expansion: u32,
}

impl Defaults {
    pub const REDISBLOOM: Defaults = Defaults { error: 0.01, capacity: 100, expansion: 2 };

    pub fn params(&self) -> ChainParams {
        ChainParams { capacity: self.capacity, error: self.error, expansion: self.expansion, scaling: true }
    }
}

/// Redis's `string2ll`: optional `-`, no `+`, no leading zeros, no spaces,
/// within `i64`. The same rule the server applies to every integer argument.
pub fn parse_long_long(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut value: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if negative {
        if value > i64::MAX as u64 + 1 {
            return None;
        }
        Some((value as i64).wrapping_neg())
    } else {
        i64::try_from(value).ok()
    }
}

/// Redis's `string2d`: C `strtod` over the whole argument, refusing a leading
/// space, NaN, overflow to infinity and underflow to zero. Hex floats and
/// `inf` are accepted, as the server accepts them.
pub fn parse_double(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s.len() > 4096 || s[0].is_ascii_whitespace() || s[0] == b'\x0b' || s[0] == b'\x0c' {
        return None;
    }
    if s.contains(&0) {
        return None;
    }
    let mut buf = Vec::with_capacity(s.len() + 1);
    buf.extend_from_slice(s);
    buf.push(0);
    let mut end: *mut std::ffi::c_char = std::ptr::null_mut();
    // SAFETY: `buf` is NUL-terminated and outlives the call; strtod only reads it.
    let (value, consumed, range_error) = unsafe {
        *errno_location() = 0;
        let v = strtod(buf.as_ptr().cast(), &mut end);
        (v, end.offset_from(buf.as_ptr().cast()) as usize, *errno_location() == ERANGE)
    };
    if consumed != s.len() || value.is_nan() {
        return None;
    }
    if range_error && (value.is_infinite() || value == 0.0) {
        return None;
    }
    Some(value)
}

const ERANGE: i32 = 34;
extern "C" {
    fn strtod(s: *const std::ffi::c_char, end: *mut *mut std::ffi::c_char) -> f64;
    #[link_name = "__errno_location"]
    fn errno_location() -> *mut i32;
}

fn eq_ignore_case(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING]`.
pub fn parse_reserve<A: AsRef<[u8]>>(argv: &[A], defaults: &Defaults) -> Result<ChainParams, ArgError> {
    if !(4..=7).contains(&argv.len()) {
        return Err(ArgError::WrongArity);
    }
    let error = parse_double(argv[2].as_ref()).ok_or(Error::BadErrorRate)?;
    if !(error > 0.0 && error < 1.0) {
        return Err(Error::ErrorRateRange.into());
    }
    let capacity = parse_long_long(argv[3].as_ref()).ok_or(Error::BadCapacity)?;
    if capacity <= 0 {
        return Err(Error::CapacityRange.into());
    }
    // RedisBloom looks for the keywords anywhere in argv, key included.
    let position = |word: &str| argv.iter().position(|a| eq_ignore_case(a.as_ref(), word));
    let scaling = position("NONSCALING").is_none();
    let mut expansion = i64::from(defaults.expansion);
    if let Some(at) = position("EXPANSION") {
        if at + 1 == argv.len() {
            return Err(Error::NoExpansion.into());
        }
        if !scaling {
            return Err(Error::NonScalingCannotExpand.into());
        }
        expansion = parse_long_long(argv[at + 1].as_ref()).ok_or(Error::BadExpansion)?;
        if expansion < 1 {
            return Err(Error::ExpansionRange.into());
        }
        if expansion > MAX_EXPANSION {
            return Err(Error::ExpansionTooLarge.into());
        }
    }
    Ok(ChainParams { capacity: capacity as u64, error, expansion: expansion as u32, scaling })
}

/// A parsed `BF.INSERT`.
#[derive(Clone, Debug, PartialEq)]
pub struct Insert {
    pub params: ChainParams,
    pub create: bool,
    /// Index in argv of the first item.
    pub items_from: usize,
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING] ITEMS item...`
///
/// Options are told apart by their first letters, as RedisBloom does:
/// `I…` starts the items, `ER…` is the error rate, other `E…` the expansion,
/// `C…` the capacity, `N?C…` NOCREATE and other `N…` NONSCALING.
pub fn parse_insert<A: AsRef<[u8]>>(argv: &[A], defaults: &Defaults) -> Result<Insert, ArgError> {
    if argv.len() < 4 {
        return Err(ArgError::WrongArity);
    }
    let mut capacity = defaults.capacity as i64;
    let mut error = defaults.error;
    let mut expansion = i64::from(defaults.expansion);
    let mut create = true;
    let mut scaling = true;
    let mut items_from = None;
    let mut pos = 2;
    while pos < argv.len() && items_from.is_none() {
        let word = argv[pos].as_ref();
        let letter = |i: usize| word.get(i).map(u8::to_ascii_lowercase);
        let value = |at: usize| argv.get(at).map(AsRef::as_ref).ok_or(ArgError::WrongArity);
        match letter(0) {
            Some(b'i') => {
                pos += 1;
                items_from = Some(pos);
            }
            Some(b'e') => {
                let v = value(pos + 1)?;
                if letter(1) == Some(b'r') {
                    error = parse_double(v).ok_or(Error::InsertBadErrorRate)?;
                } else {
                    expansion = parse_long_long(v).ok_or(Error::InsertBadExpansion)?;
                }
                pos += 2;
            }
            Some(b'c') => {
                capacity = parse_long_long(value(pos + 1)?).ok_or(Error::InsertBadCapacity)?;
                pos += 2;
            }
            Some(b'n') => {
                if letter(2) == Some(b'c') {
                    create = false;
                } else {
                    scaling = false;
                }
                pos += 1;
            }
            _ => return Err(Error::UnknownArgument.into()),
        }
    }
    let items_from = match items_from {
        Some(i) if i < argv.len() => i,
        _ => return Err(ArgError::WrongArity),
    };
    if !(error > 0.0 && error < 1.0) || capacity < 1 || expansion < 1 {
        return Err(Error::InsertBadArgument.into());
    }
    if expansion > MAX_EXPANSION {
        return Err(Error::ExpansionTooLarge.into());
    }
    let params = ChainParams { capacity: capacity as u64, error, expansion: expansion as u32, scaling };
    Ok(Insert { params, create, items_from })
}

/// `APBF.RESERVE key error_rate capacity COUNT | TIME seconds`.
/// A missing window is answered with what the window may be, not an arity error.
pub fn parse_apbf_reserve<A: AsRef<[u8]>>(argv: &[A]) -> Result<ApbfParams, ArgError> {
    if !(4..=6).contains(&argv.len()) {
        return Err(ArgError::WrongArity);
    }
    let apbf = |e: ApbfError| ArgError::Reply(Error::Apbf(e));
    let error = parse_double(argv[2].as_ref())
        .filter(|e| *e > 0.0 && *e < 1.0)
        .ok_or_else(|| apbf(ApbfError::BadErrorRate))?;
    let capacity =
        parse_long_long(argv[3].as_ref()).filter(|c| *c >= 1).ok_or_else(|| apbf(ApbfError::BadCapacity))?;
    let window = match &argv[4..] {
        [word] if eq_ignore_case(word.as_ref(), "COUNT") => Window::Count,
        [word, seconds] if eq_ignore_case(word.as_ref(), "TIME") => {
            let s = parse_long_long(seconds.as_ref())
                .filter(|s| (1..=MAX_WINDOW_SECONDS).contains(s))
                .ok_or_else(|| apbf(ApbfError::BadSeconds))?;
            Window::Time { millis: s as u64 * 1000 }
        }
        _ => return Err(apbf(ApbfError::BadWindow)),
    };
    Ok(ApbfParams { error, capacity: capacity as u64, window })
}

/// A parsed `APBF.ADVANCE key n started_ms [now_ms]`: the primary's decision
/// to end `n` generations on the clock (the first format had no `now_ms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Advance {
    pub generations: u64,
    pub started_ms: u64,
    pub now_ms: u64,
}

pub fn parse_apbf_advance<A: AsRef<[u8]>>(argv: &[A]) -> Result<Advance, ArgError> {
    if !(4..=5).contains(&argv.len()) {
        return Err(ArgError::WrongArity);
    }
    let number = |i: usize| {
        parse_long_long(argv[i].as_ref())
            .filter(|n| *n >= 0)
            .map(|n| n as u64)
            .ok_or(ArgError::Reply(Error::Apbf(ApbfError::BadAdvance)))
    };
    let (generations, started_ms) = (number(2)?, number(3)?);
    let now_ms = if argv.len() == 5 { number(4)? } else { started_ms };
    Ok(Advance { generations, started_ms, now_ms })
}

/// The offset of `APBF.LOADCHUNK key iter data`: `None` for the header
/// (iter 0), else the body offset `iter - 1`.
pub fn parse_apbf_chunk_iter(word: &[u8]) -> Result<Option<u64>, Error> {
    match parse_long_long(word) {
        Some(0) => Ok(None),
        Some(i) if i > 0 => Ok(Some(i as u64 - 1)),
        _ => Err(Error::LoadChunkIterNotNumeric),
    }
}

/// The field of `BF.INFO key <field>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InfoField {
    Capacity,
    Size,
    Filters,
    Items,
    Expansion,
}

impl InfoField {
    pub const ALL: [InfoField; 5] =
        [InfoField::Capacity, InfoField::Size, InfoField::Filters, InfoField::Items, InfoField::Expansion];

    pub fn parse(word: &[u8]) -> Result<InfoField, Error> {
        let names = ["CAPACITY", "SIZE", "FILTERS", "ITEMS", "EXPANSION"];
        names
            .iter()
            .position(|n| eq_ignore_case(word, n))
            .map(|i| InfoField::ALL[i])
            .ok_or(Error::InvalidInfoField)
    }

    /// The label in the reply, NUL-terminated for the server's reply calls.
    pub fn label(self) -> &'static std::ffi::CStr {
        match self {
            InfoField::Capacity => c"Capacity",
            InfoField::Size => c"Size",
            InfoField::Filters => c"Number of filters",
            InfoField::Items => c"Number of items inserted",
            InfoField::Expansion => c"Expansion rate",
        }
    }
}

/// `CF.RESERVE key capacity [BUCKETSIZE n] [MAXITERATIONS n] [EXPANSION n]`,
/// with RedisBloom 2.8.2's order of checks: capacity, MAXITERATIONS,
/// BUCKETSIZE, EXPANSION, then capacity against the bucket size. Keywords
/// are found anywhere in argv (key included), unknown words are ignored.
pub fn parse_cf_reserve<A: AsRef<[u8]>>(argv: &[A]) -> Result<CuckooParams, ArgError> {
    if argv.len() < 3 || argv.len().is_multiple_of(2) {
        return Err(ArgError::WrongArity);
    }
    let cf = |e: CuckooError| ArgError::Reply(Error::Cuckoo(e));
    let capacity = parse_long_long(argv[2].as_ref()).ok_or_else(|| cf(CuckooError::BadCapacity))?;
    let option = |word: &str, default: u16, range: (i64, i64), not_number, out_of_range| {
        let Some(at) = argv.iter().position(|a| eq_ignore_case(a.as_ref(), word)) else {
            return Ok(default);
        };
        let v = argv.get(at + 1).and_then(|v| parse_long_long(v.as_ref())).ok_or_else(|| cf(not_number))?;
        if !(range.0..=range.1).contains(&v) {
            return Err(cf(out_of_range));
        }
        Ok(v as u16)
    };
    use CuckooError::*;
    let max_iterations = option(
        "MAXITERATIONS",
        cuckoo::DEFAULT_MAX_ITERATIONS,
        (1, i64::from(u16::MAX)),
        MaxIterationsNotNumber,
        MaxIterationsRange,
    )?;
    let bucket_size = option(
        "BUCKETSIZE",
        cuckoo::DEFAULT_BUCKET_SIZE,
        (1, i64::from(cuckoo::MAX_BUCKET_SIZE)),
        BucketSizeNotNumber,
        BucketSizeRange,
    )?;
    let expansion = option(
        "EXPANSION",
        cuckoo::DEFAULT_EXPANSION,
        (0, i64::from(cuckoo::MAX_EXPANSION)),
        ExpansionNotNumber,
        ExpansionRange,
    )?;
    if i64::from(bucket_size) * 2 > capacity {
        return Err(cf(CapacityTooSmall));
    }
    Ok(CuckooParams { capacity: capacity as u64, bucket_size, max_iterations, expansion })
}

/// A parsed `CF.INSERT` / `CF.INSERTNX`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CfInsert {
    /// Capacity of the filter created for a missing key.
    pub capacity: u64,
    pub create: bool,
    /// Index in argv of the first item.
    pub items_from: usize,
}

/// `CF.INSERT key [CAPACITY c] [NOCREATE] ITEMS item...`: options told apart
/// by their first letter (`c`, `n`, `i`), as RedisBloom does.
pub fn parse_cf_insert<A: AsRef<[u8]>>(argv: &[A]) -> Result<CfInsert, ArgError> {
    if argv.len() < 4 {
        return Err(ArgError::WrongArity);
    }
    let cf = |e: CuckooError| ArgError::Reply(Error::Cuckoo(e));
    let mut capacity = cuckoo::DEFAULT_CAPACITY as i64;
    let mut create = true;
    let mut items_from = None;
    let mut pos = 2;
    while pos < argv.len() && items_from.is_none() {
        match argv[pos].as_ref().first().map(u8::to_ascii_lowercase) {
            Some(b'c') => {
                let value = argv.get(pos + 1).ok_or(ArgError::WrongArity)?;
                capacity = parse_long_long(value.as_ref()).ok_or_else(|| cf(CuckooError::BadCapacity))?;
                if 2 * i64::from(cuckoo::DEFAULT_BUCKET_SIZE) > capacity {
                    return Err(cf(CuckooError::CapacityTooSmall));
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
            _ => return Err(Error::UnknownArgument.into()),
        }
    }
    match items_from {
        Some(i) if i < argv.len() => Ok(CfInsert { capacity: capacity as u64, create, items_from: i }),
        _ => Err(ArgError::WrongArity),
    }
}

/// The position of `CF.SCANDUMP key pos`: a non-negative integer.
pub fn parse_cf_scandump_pos(word: &[u8]) -> Result<i64, Error> {
    parse_long_long(word).filter(|p| *p >= 0).ok_or(Error::Cuckoo(CuckooError::InvalidPosition))
}

/// The position of `CF.LOADCHUNK key pos data`: any integer but 0 (1 is the header).
pub fn parse_cf_loadchunk_pos(word: &[u8]) -> Result<i64, Error> {
    parse_long_long(word).filter(|p| *p != 0).ok_or(Error::Cuckoo(CuckooError::InvalidPosition))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<&[u8]> {
        s.split(' ').map(str::as_bytes).collect()
    }

    #[test]
    fn long_long_follows_string2ll() {
        for (s, v) in [
            ("0", Some(0)),
            ("7", Some(7)),
            ("-7", Some(-7)),
            ("+7", None),
            ("007", None),
            ("-0", None),
            ("", None),
            (" 1", None),
            ("1 ", None),
            ("1e3", None),
            ("9223372036854775807", Some(i64::MAX)),
            ("9223372036854775808", None),
            ("-9223372036854775808", Some(i64::MIN)),
            ("-9223372036854775809", None),
        ] {
            assert_eq!(parse_long_long(s.as_bytes()), v, "{s:?}");
        }
    }

    #[test]
    fn double_follows_string2d() {
        for (s, ok) in [
            ("0.01", true),
            (".5", true),
            ("1e-5", true),
            ("0x10", true),
            ("inf", true),
            ("nan", false),
            ("", false),
            (" 1", false),
            ("1 ", false),
            ("1e-400", false),
            ("4.9e-320", true),
            ("1e999", false),
            ("abc", false),
        ] {
            assert_eq!(parse_double(s.as_bytes()).is_some(), ok, "{s:?}");
        }
    }

    #[test]
    fn reserve_checks_in_redisbloom_order() {
        let d = Defaults::REDISBLOOM;
        let err = |s: &str| parse_reserve(&argv(s), &d).unwrap_err();
        assert_eq!(err("BF.RESERVE k bad 0 EXPANSION x"), Error::BadErrorRate.into());
        assert_eq!(err("BF.RESERVE k 0.01 0 EXPANSION x"), Error::CapacityRange.into());
        assert_eq!(err("BF.RESERVE k 0.01 100 NONSCALING EXPANSION"), Error::NoExpansion.into());
        assert_eq!(err("BF.RESERVE k 0.01 100 NONSCALING EXPANSION x"), Error::NonScalingCannotExpand.into());
        assert_eq!(err("BF.RESERVE expansion 0.01 100"), Error::BadExpansion.into());
        assert_eq!(err("BF.RESERVE k 0.01 100 EXPANSION 2 EXPANSION x"), ArgError::WrongArity);
        let p = parse_reserve(&argv("BF.RESERVE nonscaling 0.01 100"), &d).unwrap();
        assert!(!p.scaling);
    }

    #[test]
    fn insert_options_by_first_letters() {
        let d = Defaults::REDISBLOOM;
        let ok = |s: &str| parse_insert(&argv(s), &d).unwrap();
        let i = ok("BF.INSERT k Cxx 10 ERR 0.1 EX 3 NOPE ITEMS a");
        assert_eq!(i.params, ChainParams { capacity: 10, error: 0.1, expansion: 3, scaling: false });
        assert!(i.create);
        assert!(!ok("BF.INSERT k NOCREATEX ITEMS a").create);
        assert_eq!(ok("BF.INSERT k Ifoo a").items_from, 3);
        let err = |s: &str| parse_insert(&argv(s), &d).unwrap_err();
        assert_eq!(err("BF.INSERT k E 0.1 ITEMS a"), Error::InsertBadExpansion.into());
        assert_eq!(err("BF.INSERT k CAPACITY 5 ITEMS"), ArgError::WrongArity);
        assert_eq!(err("BF.INSERT k CAPACITY"), ArgError::WrongArity);
        assert_eq!(err("BF.INSERT k X 5 ITEMS a"), Error::UnknownArgument.into());
        assert_eq!(err("BF.INSERT k CAPACITY 0 ITEMS a"), Error::InsertBadArgument.into());
    }

    #[test]
    fn cf_reserve_checks_in_redisbloom_order() {
        let err = |s: &str| parse_cf_reserve(&argv(s)).unwrap_err();
        let cf = |e: CuckooError| ArgError::Reply(Error::Cuckoo(e));
        assert_eq!(err("CF.RESERVE k"), ArgError::WrongArity);
        assert_eq!(err("CF.RESERVE k 10 BUCKETSIZE"), ArgError::WrongArity);
        assert_eq!(err("CF.RESERVE k x"), cf(CuckooError::BadCapacity));
        assert_eq!(err("CF.RESERVE k 100 bucketsize 0 maxiterations 0"), cf(CuckooError::MaxIterationsRange));
        assert_eq!(err("CF.RESERVE k 100 expansion -1 bucketsize 0"), cf(CuckooError::BucketSizeRange));
        assert_eq!(err("CF.RESERVE k 10 foo maxiterations"), cf(CuckooError::MaxIterationsNotNumber));
        assert_eq!(err("CF.RESERVE k 100 EXPANSION 32769"), cf(CuckooError::ExpansionRange));
        assert_eq!(err("CF.RESERVE k 3"), cf(CuckooError::CapacityTooSmall));
        assert_eq!(err("CF.RESERVE bucketsize 10"), cf(CuckooError::CapacityTooSmall));
        let p = parse_cf_reserve(&argv("CF.RESERVE maxiterations 10")).unwrap();
        assert_eq!(p.max_iterations, 10);
        let p = parse_cf_reserve(&argv("CF.RESERVE k 100 foo 3 EXPANSION 0")).unwrap();
        assert_eq!((p.capacity, p.bucket_size, p.expansion), (100, 2, 0));
    }

    #[test]
    fn cf_insert_options_by_first_letter() {
        let ok = |s: &str| parse_cf_insert(&argv(s)).unwrap();
        let err = |s: &str| parse_cf_insert(&argv(s)).unwrap_err();
        assert_eq!(ok("CF.INSERT k Cap 5 n items a"), CfInsert { capacity: 5, create: false, items_from: 6 });
        assert_eq!(ok("CF.INSERT k i a").items_from, 3);
        assert_eq!(err("CF.INSERT k items"), ArgError::WrongArity);
        assert_eq!(err("CF.INSERT k capacity"), ArgError::WrongArity);
        assert_eq!(
            err("CF.INSERT k capacity 3 items a"),
            ArgError::Reply(CuckooError::CapacityTooSmall.into())
        );
        assert_eq!(err("CF.INSERT k foo items a"), Error::UnknownArgument.into());
        assert_eq!(parse_cf_scandump_pos(b"-1"), Err(CuckooError::InvalidPosition.into()));
        assert_eq!(parse_cf_loadchunk_pos(b"0"), Err(CuckooError::InvalidPosition.into()));
        assert_eq!(parse_cf_loadchunk_pos(b"-5"), Ok(-5));
    }
}
