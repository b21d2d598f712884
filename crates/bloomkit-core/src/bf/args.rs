//! Typed parsing of `BF.RESERVE` / `BF.INSERT` / `BF.INFO` arguments, with
//! RedisBloom 2.8.2's rules and quirks (checked against the live module) or
//! RedisBloom 8's (capacity at most 2^30, expansion 0 meaning non-scaling,
//! error rates above 0.25 used as 0.25, range errors that name the range,
//! `BF.INSERT` naming the bad field), as `bf.compat` says.
//!
//! Arguments are the whole argv, command name included, as the server passes them.

use super::chain::ChainParams;
use super::errors::BfError;
use crate::common::compat::Compat;
use crate::common::parse::{eq_ignore_case, parse_double, parse_long_long};
use crate::common::sizing::is_rate;

/// The largest expansion accepted, as in current RedisBloom releases.
pub const MAX_EXPANSION: i64 = 32768;
/// RedisBloom 8's largest capacity at creation (2^30).
pub const MAX_CAPACITY_8: i64 = 1 << 30;
/// RedisBloom 8 uses an error rate above this as this.
pub const ERROR_RATE_CAP_8: f64 = 0.25;

/// Parameters used when a write creates a filter without naming them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Defaults {
    pub error: f64,
    pub capacity: u64,
    pub expansion: u32,
}

impl Defaults {
    pub const REDISBLOOM: Defaults = Defaults { error: 0.01, capacity: 100, expansion: 2 };

    /// The parameters of a filter a write creates; an expansion of 0 (which
    /// RedisBloom 8's `bf-expansion-factor` allows) makes it non-scaling.
    pub fn params(&self) -> ChainParams {
        ChainParams {
            capacity: self.capacity,
            error: self.error,
            expansion: self.expansion,
            scaling: self.expansion > 0,
        }
    }
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING]`.
pub fn parse_reserve<A: AsRef<[u8]>>(
    argv: &[A],
    defaults: &Defaults,
    compat: Compat,
) -> Result<ChainParams, BfError> {
    if !(4..=7).contains(&argv.len()) {
        return Err(BfError::WrongArity);
    }
    let v8 = compat == Compat::RedisBloom8;
    let mut error = parse_double(argv[2].as_ref()).ok_or(BfError::BadErrorRate)?;
    if !is_rate(error) {
        return Err(if v8 { BfError::ErrorRateOutOfRange } else { BfError::ErrorRateRange });
    }
    if v8 {
        error = error.min(ERROR_RATE_CAP_8);
    }
    let capacity = parse_long_long(argv[3].as_ref()).ok_or(BfError::BadCapacity)?;
    if v8 && !(1..=MAX_CAPACITY_8).contains(&capacity) {
        return Err(BfError::CapacityOutOfRange);
    }
    if capacity <= 0 {
        return Err(BfError::CapacityRange);
    }
    // RedisBloom looks for the keywords anywhere in argv, key included.
    let position = |word: &str| argv.iter().position(|a| eq_ignore_case(a.as_ref(), word));
    // Under RedisBloom 8's `bf-expansion-factor 0` every filter is non-scaling,
    // so any expansion but 0 is refused as with NONSCALING.
    let mut scaling = position("NONSCALING").is_none() && !(v8 && defaults.expansion == 0);
    let mut expansion = i64::from(defaults.expansion);
    match position("EXPANSION") {
        Some(at) if at + 1 == argv.len() => return Err(BfError::NoExpansion),
        // 2.8 refuses EXPANSION with NONSCALING before reading it.
        Some(_) if !v8 && !scaling => return Err(BfError::NonScalingCannotExpand),
        Some(at) => {
            expansion = parse_long_long(argv[at + 1].as_ref()).ok_or(BfError::BadExpansion)?;
            if v8 {
                // 8 reads it first: 0 is non-scaling, anything else with NONSCALING is refused.
                if expansion != 0 && !scaling {
                    return Err(BfError::NonScalingCannotExpand);
                }
                if !(0..=MAX_EXPANSION).contains(&expansion) {
                    return Err(BfError::ExpansionOutOfRange);
                }
            } else if expansion < 1 {
                return Err(BfError::ExpansionRange);
            } else if expansion > MAX_EXPANSION {
                return Err(BfError::ExpansionTooLarge);
            }
        }
        None => {}
    }
    if expansion == 0 {
        scaling = false;
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
pub fn parse_insert<A: AsRef<[u8]>>(
    argv: &[A],
    defaults: &Defaults,
    compat: Compat,
) -> Result<Insert, BfError> {
    if argv.len() < 4 {
        return Err(BfError::WrongArity);
    }
    let v8 = compat == Compat::RedisBloom8;
    let mut capacity = defaults.capacity as i64;
    let mut error = defaults.error;
    let mut expansion = i64::from(defaults.expansion);
    let mut create = true;
    // Under RedisBloom 8's `bf-expansion-factor 0` an EXPANSION given here
    // still makes a non-scaling filter, silently.
    let mut scaling = !(v8 && defaults.expansion == 0);
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
            // RedisBloom 8 checks each value's range where it reads it, so
            // the first bad option in argument order is the one reported.
            Some(b'e') => {
                let v = value(pos + 1)?;
                if letter(1) == Some(b'r') {
                    error = parse_double(v)
                        .filter(|e| !v8 || (*e > 0.0 && *e < 1.0))
                        .ok_or(BfError::InsertBadErrorRate)?;
                } else {
                    expansion = parse_long_long(v)
                        .filter(|x| !v8 || (0..=MAX_EXPANSION).contains(x))
                        .ok_or(BfError::InsertBadExpansion)?;
                }
                pos += 2;
            }
            Some(b'c') => {
                capacity = parse_long_long(value(pos + 1)?)
                    .filter(|c| !v8 || (1..=MAX_CAPACITY_8).contains(c))
                    .ok_or(BfError::InsertBadCapacity)?;
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
    if v8 {
        // 8 checked each range as it read it (the defaults are in range), allows
        // expansion 0 (non-scaling) and caps the rate.
        error = error.min(ERROR_RATE_CAP_8);
    } else {
        if !is_rate(error) || capacity < 1 || expansion < 1 {
            return Err(BfError::InsertBadArgument);
        }
        if expansion > MAX_EXPANSION {
            return Err(BfError::ExpansionTooLarge);
        }
    }
    let scaling = scaling && expansion > 0;
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

/// How many words each command takes (see [`Arity`]).
pub mod arity {
    pub use crate::common::parse::Arity;

    pub const RESERVE: Arity = Arity::AtLeast(2);
    pub const ADD: Arity = Arity::Exactly(3);
    pub const MADD: Arity = Arity::AtLeast(3);
    pub const INSERT: Arity = Arity::AtLeast(2);
    pub const EXISTS: Arity = Arity::Exactly(3);
    pub const MEXISTS: Arity = Arity::AtLeast(3);
    pub const CARD: Arity = Arity::Exactly(2);
    pub const INFO: Arity = Arity::Between(2, 3);
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
        let d = Defaults::REDISBLOOM;
        let err = |s: &str| parse_reserve(&argv(s), &d, Compat::RedisBloom28).unwrap_err();
        assert_eq!(err("BF.RESERVE k bad 0 EXPANSION x"), BfError::BadErrorRate);
        assert_eq!(err("BF.RESERVE k 0.01 0 EXPANSION x"), BfError::CapacityRange);
        assert_eq!(err("BF.RESERVE k 0.01 100 NONSCALING EXPANSION"), BfError::NoExpansion);
        assert_eq!(err("BF.RESERVE k 0.01 100 NONSCALING EXPANSION x"), BfError::NonScalingCannotExpand);
        assert_eq!(err("BF.RESERVE expansion 0.01 100"), BfError::BadExpansion);
        assert_eq!(err("BF.RESERVE k 0.01 100 EXPANSION 2 EXPANSION x"), BfError::WrongArity);
        let p = parse_reserve(&argv("BF.RESERVE nonscaling 0.01 100"), &d, Compat::RedisBloom28).unwrap();
        assert!(!p.scaling);
    }

    #[test]
    fn insert_options_by_first_letters() {
        let d = Defaults::REDISBLOOM;
        let ok = |s: &str| parse_insert(&argv(s), &d, Compat::RedisBloom28).unwrap();
        let i = ok("BF.INSERT k Cxx 10 ERR 0.1 EX 3 NOPE ITEMS a");
        assert_eq!(i.params, ChainParams { capacity: 10, error: 0.1, expansion: 3, scaling: false });
        assert!(i.create);
        assert!(!ok("BF.INSERT k NOCREATEX ITEMS a").create);
        assert_eq!(ok("BF.INSERT k Ifoo a").items_from, 3);
        let err = |s: &str| parse_insert(&argv(s), &d, Compat::RedisBloom28).unwrap_err();
        assert_eq!(err("BF.INSERT k E 0.1 ITEMS a"), BfError::InsertBadExpansion);
        assert_eq!(err("BF.INSERT k CAPACITY 5 ITEMS"), BfError::WrongArity);
        assert_eq!(err("BF.INSERT k CAPACITY"), BfError::WrongArity);
        assert_eq!(err("BF.INSERT k X 5 ITEMS a"), BfError::UnknownArgument);
        assert_eq!(err("BF.INSERT k CAPACITY 0 ITEMS a"), BfError::InsertBadArgument);
    }

    #[test]
    fn redisbloom_8_rules() {
        let d = Defaults::REDISBLOOM;
        let reserve = |s: &str| parse_reserve(&argv(s), &d, Compat::RedisBloom8);
        let err = |s: &str| reserve(s).unwrap_err();
        assert_eq!(err("BF.RESERVE k x 100"), BfError::BadErrorRate);
        assert_eq!(err("BF.RESERVE k 1 100"), BfError::ErrorRateOutOfRange);
        assert_eq!(err("BF.RESERVE k 0.01 0"), BfError::CapacityOutOfRange);
        assert_eq!(err("BF.RESERVE k 0.01 1073741825"), BfError::CapacityOutOfRange);
        assert_eq!(err("BF.RESERVE k 0.01 100 EXPANSION"), BfError::NoExpansion);
        assert_eq!(err("BF.RESERVE k 0.01 100 EXPANSION x"), BfError::BadExpansion);
        assert_eq!(err("BF.RESERVE k 0.01 100 EXPANSION 32769"), BfError::ExpansionOutOfRange);
        assert_eq!(err("BF.RESERVE k 0.01 100 NONSCALING EXPANSION 3"), BfError::NonScalingCannotExpand);
        // 2.8 refuses what 8 takes, and the other way round.
        let p = reserve("BF.RESERVE k 0.01 1073741824 NONSCALING EXPANSION 0").unwrap();
        assert_eq!((p.capacity, p.expansion, p.scaling), (1 << 30, 0, false));
        let old = |s: &str| parse_reserve(&argv(s), &d, Compat::RedisBloom28).unwrap_err();
        assert_eq!(old("BF.RESERVE k 0.01 100 NONSCALING EXPANSION 0"), BfError::NonScalingCannotExpand);
        assert_eq!(old("BF.RESERVE k 0.01 100 EXPANSION 0"), BfError::ExpansionRange);
        assert!(parse_reserve(&argv("BF.RESERVE k 0.01 1073741825"), &d, Compat::RedisBloom28).is_ok());
        assert_eq!(reserve("BF.RESERVE k 0.5 100").unwrap().error, ERROR_RATE_CAP_8);

        let insert = |s: &str| parse_insert(&argv(s), &d, Compat::RedisBloom8);
        assert_eq!(insert("BF.INSERT k ERROR 2 ITEMS a").unwrap_err(), BfError::InsertBadErrorRate);
        assert_eq!(insert("BF.INSERT k CAPACITY 0 ITEMS a").unwrap_err(), BfError::InsertBadCapacity);
        assert_eq!(insert("BF.INSERT k EXPANSION -1 ITEMS a").unwrap_err(), BfError::InsertBadExpansion);
        let i = insert("BF.INSERT k EXPANSION 0 ITEMS a").unwrap();
        assert!(!i.params.scaling);
        let old = parse_insert(&argv("BF.INSERT k CAPACITY 0 ITEMS a"), &d, Compat::RedisBloom28);
        assert_eq!(old.unwrap_err(), BfError::InsertBadArgument);
        // The first bad option in argument order, before ITEMS is looked for.
        assert_eq!(insert("BF.INSERT k CAPACITY -1").unwrap_err(), BfError::InsertBadCapacity);
        assert_eq!(
            insert("BF.INSERT k CAPACITY 100 EXPANSION 32769 ERROR -0.1 ITEMS a").unwrap_err(),
            BfError::InsertBadExpansion
        );
        let old = parse_insert(&argv("BF.INSERT k CAPACITY -1"), &d, Compat::RedisBloom28);
        assert_eq!(old.unwrap_err(), BfError::WrongArity);
    }

    #[test]
    fn redisbloom_8_under_an_expansion_factor_of_0() {
        let d = Defaults { expansion: 0, ..Defaults::REDISBLOOM };
        let reserve = |s: &str| parse_reserve(&argv(s), &d, Compat::RedisBloom8);
        for e in ["3", "32769", "-1"] {
            let got = reserve(&format!("BF.RESERVE k 0.01 100 EXPANSION {e}"));
            assert_eq!(got.unwrap_err(), BfError::NonScalingCannotExpand, "{e}");
        }
        assert_eq!(reserve("BF.RESERVE k 0.01 100 EXPANSION x").unwrap_err(), BfError::BadExpansion);
        assert!(!reserve("BF.RESERVE k 0.01 100 EXPANSION 0").unwrap().scaling);
        assert!(!reserve("BF.RESERVE k 0.01 100").unwrap().scaling);
        let i = parse_insert(&argv("BF.INSERT k EXPANSION 4 ITEMS a"), &d, Compat::RedisBloom8).unwrap();
        assert!(!i.params.scaling);
    }

    #[test]
    fn an_expansion_of_0_in_the_defaults_creates_non_scaling_filters() {
        let d = Defaults { expansion: 0, ..Defaults::REDISBLOOM };
        assert!(!d.params().scaling);
        assert!(Defaults::REDISBLOOM.params().scaling);
    }
}
