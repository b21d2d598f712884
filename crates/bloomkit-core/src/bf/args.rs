//! Typed parsing of `BF.RESERVE` / `BF.INSERT` / `BF.INFO` arguments, with
//! RedisBloom 2.8.2's rules and quirks, checked against the live module.
//!
//! Arguments are the whole argv, command name included, as the server passes them.

use super::chain::ChainParams;
use super::errors::BfError;
use crate::common::parse::{eq_ignore_case, parse_double, parse_long_long};

/// The largest expansion accepted, as in current RedisBloom releases.
pub const MAX_EXPANSION: i64 = 32768;

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

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING]`.
pub fn parse_reserve<A: AsRef<[u8]>>(argv: &[A], defaults: &Defaults) -> Result<ChainParams, BfError> {
    if !(4..=7).contains(&argv.len()) {
        return Err(BfError::WrongArity);
    }
    let error = parse_double(argv[2].as_ref()).ok_or(BfError::BadErrorRate)?;
    if !(error > 0.0 && error < 1.0) {
        return Err(BfError::ErrorRateRange);
    }
    let capacity = parse_long_long(argv[3].as_ref()).ok_or(BfError::BadCapacity)?;
    if capacity <= 0 {
        return Err(BfError::CapacityRange);
    }
    // RedisBloom looks for the keywords anywhere in argv, key included.
    let position = |word: &str| argv.iter().position(|a| eq_ignore_case(a.as_ref(), word));
    let scaling = position("NONSCALING").is_none();
    let mut expansion = i64::from(defaults.expansion);
    if let Some(at) = position("EXPANSION") {
        if at + 1 == argv.len() {
            return Err(BfError::NoExpansion);
        }
        if !scaling {
            return Err(BfError::NonScalingCannotExpand);
        }
        expansion = parse_long_long(argv[at + 1].as_ref()).ok_or(BfError::BadExpansion)?;
        if expansion < 1 {
            return Err(BfError::ExpansionRange);
        }
        if expansion > MAX_EXPANSION {
            return Err(BfError::ExpansionTooLarge);
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
pub fn parse_insert<A: AsRef<[u8]>>(argv: &[A], defaults: &Defaults) -> Result<Insert, BfError> {
    if argv.len() < 4 {
        return Err(BfError::WrongArity);
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
        let value = |at: usize| argv.get(at).map(AsRef::as_ref).ok_or(BfError::WrongArity);
        match letter(0) {
            Some(b'i') => {
                pos += 1;
                items_from = Some(pos);
            }
            Some(b'e') => {
                let v = value(pos + 1)?;
                if letter(1) == Some(b'r') {
                    error = parse_double(v).ok_or(BfError::InsertBadErrorRate)?;
                } else {
                    expansion = parse_long_long(v).ok_or(BfError::InsertBadExpansion)?;
                }
                pos += 2;
            }
            Some(b'c') => {
                capacity = parse_long_long(value(pos + 1)?).ok_or(BfError::InsertBadCapacity)?;
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
            _ => return Err(BfError::UnknownArgument),
        }
    }
    let items_from = match items_from {
        Some(i) if i < argv.len() => i,
        _ => return Err(BfError::WrongArity),
    };
    if !(error > 0.0 && error < 1.0) || capacity < 1 || expansion < 1 {
        return Err(BfError::InsertBadArgument);
    }
    if expansion > MAX_EXPANSION {
        return Err(BfError::ExpansionTooLarge);
    }
    let params = ChainParams { capacity: capacity as u64, error, expansion: expansion as u32, scaling };
    Ok(Insert { params, create, items_from })
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

    pub fn parse(word: &[u8]) -> Result<InfoField, BfError> {
        let names = ["CAPACITY", "SIZE", "FILTERS", "ITEMS", "EXPANSION"];
        names
            .iter()
            .position(|n| eq_ignore_case(word, n))
            .map(|i| InfoField::ALL[i])
            .ok_or(BfError::InvalidInfoField)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<&[u8]> {
        s.split(' ').map(str::as_bytes).collect()
    }

    #[test]
    fn reserve_checks_in_redisbloom_order() {
        let d = Defaults::REDISBLOOM;
        let err = |s: &str| parse_reserve(&argv(s), &d).unwrap_err();
        assert_eq!(err("BF.RESERVE k bad 0 EXPANSION x"), BfError::BadErrorRate);
        assert_eq!(err("BF.RESERVE k 0.01 0 EXPANSION x"), BfError::CapacityRange);
        assert_eq!(err("BF.RESERVE k 0.01 100 NONSCALING EXPANSION"), BfError::NoExpansion);
        assert_eq!(err("BF.RESERVE k 0.01 100 NONSCALING EXPANSION x"), BfError::NonScalingCannotExpand);
        assert_eq!(err("BF.RESERVE expansion 0.01 100"), BfError::BadExpansion);
        assert_eq!(err("BF.RESERVE k 0.01 100 EXPANSION 2 EXPANSION x"), BfError::WrongArity);
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
        assert_eq!(err("BF.INSERT k E 0.1 ITEMS a"), BfError::InsertBadExpansion);
        assert_eq!(err("BF.INSERT k CAPACITY 5 ITEMS"), BfError::WrongArity);
        assert_eq!(err("BF.INSERT k CAPACITY"), BfError::WrongArity);
        assert_eq!(err("BF.INSERT k X 5 ITEMS a"), BfError::UnknownArgument);
        assert_eq!(err("BF.INSERT k CAPACITY 0 ITEMS a"), BfError::InsertBadArgument);
    }
}
