//! Typed parsing of `XF.*` arguments. Keywords are case-insensitive and
//! spelled out; numbers follow the server's rules (`string2ll`, `string2d`).
//!
//! Arguments are the whole argv, command name included, as the server passes them.

use super::errors::XfError;
use super::filter::{Seed, XfParams};
use super::{DEFAULT_CAPACITY, DEFAULT_ERROR_RATE, DEFAULT_MAX_CAPACITY, MAX_CAPACITY_LIMIT};
use super::{MAX_ERROR_RATE, MIN_ERROR_RATE};
use crate::common::parse::{eq_ignore_case, parse_double, parse_long_long};

/// What a write creates a missing key with, and what `XF.RESERVE` leaves out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct XfDefaults {
    pub error_rate: f64,
    pub capacity: u64,
    pub max_capacity: u64,
}

impl XfDefaults {
    pub const BLOOMKIT: XfDefaults = XfDefaults {
        error_rate: DEFAULT_ERROR_RATE,
        capacity: DEFAULT_CAPACITY,
        max_capacity: DEFAULT_MAX_CAPACITY,
    };

    pub fn params(&self) -> XfParams {
        XfParams { error_rate: self.error_rate, capacity: self.capacity, max_capacity: self.max_capacity }
    }
}

fn error_rate(word: &[u8]) -> Result<f64, XfError> {
    parse_double(word).filter(|e| (MIN_ERROR_RATE..=MAX_ERROR_RATE).contains(e)).ok_or(XfError::BadErrorRate)
}

fn count(word: Option<&[u8]>, bad: XfError) -> Result<u64, XfError> {
    word.and_then(parse_long_long)
        .filter(|n| (1..=MAX_CAPACITY_LIMIT as i64).contains(n))
        .map(|n| n as u64)
        .ok_or(bad)
}

/// Fills what the command left out: a `CAPACITY` above a default
/// `MAXCAPACITY` raises it; one above an explicit `MAXCAPACITY` is refused.
fn complete(
    error: Option<f64>,
    capacity: Option<u64>,
    max: Option<u64>,
    defaults: &XfDefaults,
) -> Result<XfParams, XfError> {
    let (capacity, max_capacity) = match (capacity, max) {
        (Some(c), Some(m)) if m < c => return Err(XfError::CapacityAboveMax),
        (Some(c), Some(m)) => (c, m),
        (Some(c), None) => (c, defaults.max_capacity.max(c)),
        // A default capacity above an explicit MAXCAPACITY shrinks to it.
        (None, Some(m)) => (defaults.capacity.min(m), m),
        (None, None) => (defaults.capacity, defaults.max_capacity),
    };
    let params = XfParams { error_rate: error.unwrap_or(defaults.error_rate), capacity, max_capacity };
    params.check()?;
    Ok(params)
}

/// A parsed `XF.RESERVE`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reserve {
    pub params: XfParams,
    /// `SEED`: the filter's hash key, when given (else the server's).
    pub seed: Option<Seed>,
    /// `KEYID`: the id of the server's deployment key the filter hashes
    /// with, which only the server's own replication stream and AOF send
    /// (the caller refuses it from clients).
    pub key_id: Option<u64>,
}

/// `XF.RESERVE key error_rate [CAPACITY initial] [MAXCAPACITY limit] [SEED hex]`.
pub fn parse_reserve<A: AsRef<[u8]>>(argv: &[A], defaults: &XfDefaults) -> Result<Reserve, XfError> {
    if argv.len() < 3 || argv.len().is_multiple_of(2) {
        return Err(XfError::WrongArity);
    }
    let error = error_rate(argv[2].as_ref())?;
    let (mut capacity, mut max, mut seed, mut key_id) = (None, None, None, None);
    for pair in argv[3..].chunks(2) {
        let (word, value) = (pair[0].as_ref(), pair.get(1).map(AsRef::as_ref));
        if eq_ignore_case(word, "SEED") {
            let s = value.and_then(Seed::from_hex).ok_or(XfError::BadSeed)?;
            if seed.replace(s).is_some() || key_id.is_some() {
                return Err(XfError::DuplicateArgument("SEED"));
            }
        } else if eq_ignore_case(word, "KEYID") {
            let id = value.and_then(hex_u64).ok_or(XfError::BadSeed)?;
            if key_id.replace(id).is_some() || seed.is_some() {
                return Err(XfError::DuplicateArgument("KEYID"));
            }
        } else if eq_ignore_case(word, "CAPACITY") {
            if capacity.replace(count(value, XfError::BadCapacity)?).is_some() {
                return Err(XfError::DuplicateArgument("CAPACITY"));
            }
        } else if eq_ignore_case(word, "MAXCAPACITY") {
            if max.replace(count(value, XfError::BadMaxCapacity)?).is_some() {
                return Err(XfError::DuplicateArgument("MAXCAPACITY"));
            }
        } else {
            return Err(XfError::UnknownArgument(String::from_utf8_lossy(word).into_owned()));
        }
    }
    Ok(Reserve { params: complete(Some(error), capacity, max, defaults)?, seed, key_id })
}

/// 16 hexadecimal digits (a `KEYID`).
fn hex_u64(text: &[u8]) -> Option<u64> {
    if text.len() != 16 || !text.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(text).ok()?, 16).ok()
}

/// A parsed `XF.INSERT`.
#[derive(Clone, Debug, PartialEq)]
pub struct Insert {
    /// The filter created for a missing key.
    pub params: XfParams,
    /// False with `NOCREATE`: a missing key is an error.
    pub create: bool,
    /// Index in argv of the first item.
    pub items_from: usize,
    /// `NX`: add each item only when it is not probably in (`XF.MADDNX`).
    pub nx: bool,
}

/// `XF.INSERT key [ERROR e] [CAPACITY c] [MAXCAPACITY m] [NOCREATE] [NX] ITEMS item...`,
/// options in any order before `ITEMS`.
pub fn parse_insert<A: AsRef<[u8]>>(argv: &[A], defaults: &XfDefaults) -> Result<Insert, XfError> {
    if argv.len() < 4 {
        return Err(XfError::WrongArity);
    }
    let (mut error, mut capacity, mut max, mut create, mut nx) = (None, None, None, true, false);
    let mut pos = 2;
    loop {
        let Some(word) = argv.get(pos).map(AsRef::as_ref) else { return Err(XfError::WrongArity) };
        let value = argv.get(pos + 1).map(AsRef::as_ref);
        let once = |slot: &mut Option<_>, v, name| match slot.replace(v) {
            Some(_) => Err(XfError::DuplicateArgument(name)),
            None => Ok(()),
        };
        if eq_ignore_case(word, "ITEMS") {
            if pos + 1 >= argv.len() {
                return Err(XfError::WrongArity);
            }
            let params = complete(error, capacity, max, defaults)?;
            return Ok(Insert { params, create, items_from: pos + 1, nx });
        } else if eq_ignore_case(word, "ERROR") {
            once(&mut error, error_rate(value.ok_or(XfError::BadErrorRate)?)?, "ERROR")?;
            pos += 2;
        } else if eq_ignore_case(word, "CAPACITY") {
            let v = count(value, XfError::BadCapacity)?;
            if capacity.replace(v).is_some() {
                return Err(XfError::DuplicateArgument("CAPACITY"));
            }
            pos += 2;
        } else if eq_ignore_case(word, "MAXCAPACITY") {
            let v = count(value, XfError::BadMaxCapacity)?;
            if max.replace(v).is_some() {
                return Err(XfError::DuplicateArgument("MAXCAPACITY"));
            }
            pos += 2;
        } else if eq_ignore_case(word, "NOCREATE") {
            if !std::mem::replace(&mut create, false) {
                return Err(XfError::DuplicateArgument("NOCREATE"));
            }
            pos += 1;
        } else if eq_ignore_case(word, "NX") {
            if std::mem::replace(&mut nx, true) {
                return Err(XfError::DuplicateArgument("NX"));
            }
            pos += 1;
        } else {
            return Err(XfError::UnknownArgument(String::from_utf8_lossy(word).into_owned()));
        }
    }
}

/// `XF.ADD key item`, `XF.EXISTS`, `XF.DEL`, `XF.COUNT`: exactly one item.
pub fn check_single_item<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), XfError> {
    if argv.len() != 3 {
        return Err(XfError::WrongArity);
    }
    Ok(())
}

/// `XF.MADD key item...`, `XF.MEXISTS`: at least one item, from argv[2].
pub fn check_items<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), XfError> {
    if argv.len() < 3 {
        return Err(XfError::WrongArity);
    }
    Ok(())
}

/// `XF.CARD key`, `XF.INFO key`: the key alone.
pub fn check_key_only<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), XfError> {
    if argv.len() != 2 {
        return Err(XfError::WrongArity);
    }
    Ok(())
}

/// A parsed `XF.MERGE`.
#[derive(Clone, Debug, PartialEq)]
pub struct Merge {
    /// The argv indices of the sources.
    pub sources: std::ops::Range<usize>,
    /// `RAISERATE`: merge even when the result guarantees a rate above the
    /// destination's, which then becomes its error rate.
    pub raise_rate: bool,
}

/// `XF.MERGE dest numkeys src... [RAISERATE]`.
pub fn parse_merge<A: AsRef<[u8]>>(argv: &[A]) -> Result<Merge, XfError> {
    if argv.len() < 4 {
        return Err(XfError::WrongArity);
    }
    let n = parse_long_long(argv[2].as_ref()).filter(|&n| n >= 1).ok_or(XfError::BadNumKeys)?;
    let n = usize::try_from(n).map_err(|_| XfError::BadNumKeys)?;
    let given = argv.len() - 3;
    if n == given {
        return Ok(Merge { sources: 3..argv.len(), raise_rate: false });
    }
    if n + 1 == given {
        let last = argv[argv.len() - 1].as_ref();
        if eq_ignore_case(last, "RAISERATE") {
            return Ok(Merge { sources: 3..argv.len() - 1, raise_rate: true });
        }
        return Err(XfError::UnknownArgument(String::from_utf8_lossy(last).into_owned()));
    }
    Err(XfError::BadNumKeys)
}

/// `XF.SCANDUMP key iter`: a non-negative iterator (0 starts with the header).
pub fn parse_scandump<A: AsRef<[u8]>>(argv: &[A]) -> Result<u64, XfError> {
    if argv.len() != 3 {
        return Err(XfError::WrongArity);
    }
    parse_long_long(argv[2].as_ref()).filter(|&i| i >= 0).map(|i| i as u64).ok_or(XfError::BadIterator)
}

/// `XF.LOADCHUNK key iter data`: the iterator `XF.SCANDUMP` returned with
/// the chunk (1 for the header), and the index of the data.
pub fn parse_loadchunk<A: AsRef<[u8]>>(argv: &[A]) -> Result<u64, XfError> {
    if argv.len() != 4 {
        return Err(XfError::WrongArity);
    }
    parse_long_long(argv[2].as_ref()).filter(|&i| i >= 1).map(|i| i as u64).ok_or(XfError::BadIterator)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::parse::argv;

    const D: XfDefaults = XfDefaults::BLOOMKIT;

    #[test]
    fn reserve() {
        let ok = |s: &str| parse_reserve(&argv(s), &D).unwrap().params;
        let err = |s: &str| parse_reserve(&argv(s), &D).unwrap_err();
        assert_eq!(
            ok("XF.RESERVE k 0.01"),
            XfParams { error_rate: 0.01, capacity: DEFAULT_CAPACITY, max_capacity: DEFAULT_MAX_CAPACITY }
        );
        let seeded =
            parse_reserve(&argv("XF.RESERVE k 0.01 SEED 000102030405060708090a0b0c0d0e0f"), &D).unwrap();
        assert_eq!(seeded.seed, Some(Seed([0x0001020304050607, 0x08090a0b0c0d0e0f])));
        assert_eq!(err("XF.RESERVE k 0.01 SEED 12"), XfError::BadSeed);
        let replayed = parse_reserve(&argv("XF.RESERVE k 0.01 KEYID 00000000000000ff"), &D).unwrap();
        assert_eq!((replayed.seed, replayed.key_id), (None, Some(255)));
        assert_eq!(err("XF.RESERVE k 0.01 KEYID ff"), XfError::BadSeed);
        assert_eq!(
            err("XF.RESERVE k 0.01 SEED 000102030405060708090a0b0c0d0e0f KEYID 00000000000000ff"),
            XfError::DuplicateArgument("KEYID")
        );
        assert_eq!(err("XF.RESERVE k 0.01 SEED 000102030405060708090a0b0c0d0e0g"), XfError::BadSeed);
        assert_eq!(
            ok("XF.RESERVE k 0.001 capacity 50 MAXCAPACITY 5000"),
            XfParams { error_rate: 0.001, capacity: 50, max_capacity: 5000 }
        );
        // A MAXCAPACITY below the default capacity shrinks it.
        assert_eq!(ok("XF.RESERVE k 0.01 MAXCAPACITY 10").capacity, 10);
        assert_eq!(err("XF.RESERVE k"), XfError::WrongArity);
        assert_eq!(err("XF.RESERVE k 0.01 CAPACITY"), XfError::WrongArity);
        assert_eq!(err("XF.RESERVE k 0"), XfError::BadErrorRate);
        assert_eq!(err("XF.RESERVE k 0.6"), XfError::BadErrorRate);
        assert_eq!(err("XF.RESERVE k 1e-10"), XfError::BadErrorRate);
        assert_eq!(err("XF.RESERVE k x"), XfError::BadErrorRate);
        assert_eq!(err("XF.RESERVE k 0.01 CAPACITY 0"), XfError::BadCapacity);
        assert_eq!(err("XF.RESERVE k 0.01 CAPACITY -3"), XfError::BadCapacity);
        assert_eq!(err("XF.RESERVE k 0.01 CAPACITY 1099511627777"), XfError::BadCapacity);
        assert_eq!(err("XF.RESERVE k 0.01 MAXCAPACITY 0"), XfError::BadMaxCapacity);
        assert_eq!(err("XF.RESERVE k 0.01 CAPACITY 10 MAXCAPACITY 5"), XfError::CapacityAboveMax);
        assert_eq!(err("XF.RESERVE k 0.01 CAPACITY 10 CAPACITY 5"), XfError::DuplicateArgument("CAPACITY"));
        assert_eq!(err("XF.RESERVE k 0.01 EXPANSION 2"), XfError::UnknownArgument("EXPANSION".into()));
    }

    #[test]
    fn insert() {
        let ok = |s: &str| parse_insert(&argv(s), &D).unwrap();
        let err = |s: &str| parse_insert(&argv(s), &D).unwrap_err();
        let i = ok("XF.INSERT k ITEMS a b");
        assert_eq!((i.create, i.items_from, i.params), (true, 3, D.params()));
        assert!(ok("XF.INSERT k NX ITEMS a").nx && !ok("XF.INSERT k ITEMS a").nx);
        assert_eq!(err("XF.INSERT k NX nx ITEMS a"), XfError::DuplicateArgument("NX"));
        let i = ok("XF.INSERT k error 0.001 NOCREATE capacity 10 maxcapacity 20 items a");
        assert_eq!(i.params, XfParams { error_rate: 0.001, capacity: 10, max_capacity: 20 });
        assert_eq!((i.create, i.items_from), (false, 10));
        // An item may be spelled like a keyword.
        assert_eq!(ok("XF.INSERT k ITEMS NOCREATE").items_from, 3);
        assert_eq!(err("XF.INSERT k ITEMS"), XfError::WrongArity);
        assert_eq!(err("XF.INSERT k NOCREATE a"), XfError::UnknownArgument("a".into()));
        assert_eq!(err("XF.INSERT k NOCREATE NOCREATE"), XfError::DuplicateArgument("NOCREATE"));
        assert_eq!(err("XF.INSERT k NOCREATE CAPACITY"), XfError::BadCapacity);
        assert_eq!(err("XF.INSERT k NOCREATE NOCREATE ITEMS a"), XfError::DuplicateArgument("NOCREATE"));
        assert_eq!(err("XF.INSERT k ERROR 2 ITEMS a"), XfError::BadErrorRate);
        assert_eq!(err("XF.INSERT k CAPACITY 0 ITEMS a"), XfError::BadCapacity);
        assert_eq!(err("XF.INSERT k CAPACITY 9 MAXCAPACITY 3 ITEMS a"), XfError::CapacityAboveMax);
        assert_eq!(err("XF.INSERT k a"), XfError::WrongArity);
    }

    #[test]
    fn the_rest() {
        assert_eq!(parse_merge(&argv("XF.MERGE d 2 a b")), Ok(Merge { sources: 3..5, raise_rate: false }));
        assert_eq!(
            parse_merge(&argv("XF.MERGE d 2 a b raiserate")),
            Ok(Merge { sources: 3..5, raise_rate: true })
        );
        assert_eq!(parse_merge(&argv("XF.MERGE d 2 a b c")), Err(XfError::UnknownArgument("c".into())));
        assert_eq!(parse_merge(&argv("XF.MERGE d 3 a b")), Err(XfError::BadNumKeys));
        assert_eq!(parse_merge(&argv("XF.MERGE d 0 a")), Err(XfError::BadNumKeys));
        assert_eq!(parse_merge(&argv("XF.MERGE d 1")), Err(XfError::WrongArity));
        assert_eq!(parse_scandump(&argv("XF.SCANDUMP k 0")), Ok(0));
        assert_eq!(parse_scandump(&argv("XF.SCANDUMP k -1")), Err(XfError::BadIterator));
        assert_eq!(parse_loadchunk(&argv("XF.LOADCHUNK k 1 x")), Ok(1));
        assert_eq!(parse_loadchunk(&argv("XF.LOADCHUNK k 0 x")), Err(XfError::BadIterator));
        assert_eq!(check_single_item(&argv("XF.ADD k a b")), Err(XfError::WrongArity));
        assert_eq!(check_items(&argv("XF.MADD k a b")), Ok(()));
        assert_eq!(check_items(&argv("XF.MADD k")), Err(XfError::WrongArity));
        assert_eq!(check_key_only(&argv("XF.CARD k")), Ok(()));
    }
}
