//! `BF.*` arguments on `bloomfltr` keys, parsed by valkey-bloom's rules
//! (lossy UTF-8, then Rust's `parse`), which differ from RedisBloom's.
//!
//! Arguments are the whole argv, command name included, as the server passes them.

use std::borrow::Cow;

use super::errors::ValkeyError;
use super::{scaled_capacity, DEFAULT_CAPACITY, DEFAULT_EXPANSION, DEFAULT_FP_RATE, DEFAULT_TIGHTENING};
use crate::common::memory::Limits;
use crate::common::sizing::is_rate;

/// An argument as valkey-bloom reads it: lossy UTF-8, then Rust's `parse`.
fn text(arg: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(arg)
}

fn word(arg: &[u8]) -> String {
    text(arg).to_uppercase()
}

/// A ratio strictly between 0 and 1 (an error rate, a tightening ratio),
/// read as valkey-bloom reads its arguments and configs: `Err(None)` when
/// it is no number, `Err(Some(v))` when `v` is out of range.
pub fn parse_unit_ratio(arg: &[u8]) -> Result<f64, Option<f64>> {
    match text(arg).parse::<f64>() {
        Ok(v) if is_rate(v) => Ok(v),
        Ok(v) => Err(Some(v)),
        Err(_) => Err(None),
    }
}

/// An error rate: a float strictly between 0 and 1.
fn parse_rate(arg: &[u8]) -> Result<f64, ValkeyError> {
    parse_unit_ratio(arg).map_err(|e| {
        if e.is_some() {
            ValkeyError::ErrorRateRange
        } else {
            ValkeyError::BadErrorRate
        }
    })
}

/// A capacity: 1 to 2^63-1 (0 has its own message).
fn parse_capacity(arg: &[u8]) -> Result<i64, ValkeyError> {
    match text(arg).parse::<i64>() {
        Ok(v) if v >= 1 => Ok(v),
        Ok(0) => Err(ValkeyError::CapacityRange),
        _ => Err(ValkeyError::BadCapacity),
    }
}

fn parse_expansion(arg: &[u8]) -> Result<u32, ValkeyError> {
    text(arg).parse::<u32>().ok().filter(|e| *e >= 1).ok_or(ValkeyError::BadExpansion)
}

/// What a new object gets where a command leaves a parameter out:
/// valkey-bloom's configs (`bf.bloom-capacity`, `bf.bloom-fp-rate`,
/// `bf.bloom-tightening-ratio`, `bf.bloom-expansion`,
/// `bf.bloom-use-random-seed`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VbDefaults {
    pub capacity: i64,
    pub fp_rate: f64,
    pub tightening: f64,
    /// 0: new objects are non-scaling.
    pub expansion: u32,
    /// False: new objects get [`FIXED_SEED`](super::FIXED_SEED).
    pub random_seed: bool,
}

impl VbDefaults {
    /// valkey-bloom's own defaults.
    pub const VALKEY_BLOOM: VbDefaults = VbDefaults {
        capacity: DEFAULT_CAPACITY,
        fp_rate: DEFAULT_FP_RATE,
        tightening: DEFAULT_TIGHTENING,
        expansion: DEFAULT_EXPANSION,
        random_seed: true,
    };

    /// The seed a new object gets unless the command names one: `None`
    /// for a fresh random one.
    fn seed(&self) -> Option<[u8; 32]> {
        (!self.random_seed).then_some(super::FIXED_SEED)
    }
}

/// An object to create, as a command asked for it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Creation {
    pub capacity: u64,
    pub fp_rate: f64,
    pub tightening: f64,
    /// 0 for a non-scaling object.
    pub expansion: u32,
    /// `None`: draw a random seed (the caller has the randomness).
    pub seed: Option<[u8; 32]>,
}

impl Creation {
    /// What a command that names no parameter creates (`BF.ADD`, `BF.MADD`).
    pub fn from_defaults(defaults: &VbDefaults) -> Creation {
        Creation {
            capacity: defaults.capacity as u64,
            fp_rate: defaults.fp_rate,
            tightening: defaults.tightening,
            expansion: defaults.expansion,
            seed: defaults.seed(),
        }
    }
}

/// Parses `BF.RESERVE key error_rate capacity [NONSCALING | EXPANSION n]`
/// as valkey-bloom does, before it looks at the key (which may be taken:
/// `ERR item exists`).
pub fn parse_reserve<A: AsRef<[u8]>>(argv: &[A], defaults: &VbDefaults) -> Result<Creation, ValkeyError> {
    if !(4..=6).contains(&argv.len()) {
        return Err(ValkeyError::WrongArity);
    }
    let mut creation = Creation::from_defaults(defaults);
    creation.fp_rate = parse_rate(argv[2].as_ref())?;
    creation.capacity = parse_capacity(argv[3].as_ref())? as u64;
    if argv.len() > 4 {
        match (word(argv[4].as_ref()).as_str(), argv.len()) {
            ("NONSCALING", 5) => creation.expansion = 0,
            ("EXPANSION", 6) => creation.expansion = parse_expansion(argv[5].as_ref())?,
            _ => return Err(ValkeyError::Syntax),
        }
    }
    Ok(creation)
}

/// `BF.INSERT`, parsed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Insert {
    /// What a missing key becomes (options change nothing on an existing one).
    pub creation: Creation,
    pub nocreate: bool,
    /// Where the items start (`argv.len()` when there are none).
    pub items_from: usize,
}

/// Parses `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NONSCALING]
/// [NOCREATE] [SEED s] [TIGHTENING t] [VALIDATESCALETO n] [ITEMS item...]`
/// as valkey-bloom does; every option is checked, also on an existing
/// object. `VALIDATESCALETO` is checked against `limits` (skipped when a
/// replica or a replay has none, as valkey-bloom skips it there).
pub fn parse_insert<A: AsRef<[u8]>>(
    argv: &[A],
    defaults: &VbDefaults,
    limits: Limits,
) -> Result<Insert, ValkeyError> {
    if argv.len() < 2 {
        return Err(ValkeyError::WrongArity);
    }
    let mut c = Creation::from_defaults(defaults);
    let mut nocreate = false;
    let mut scale_to = None;
    let mut items = false;
    let mut i = 2;
    while i < argv.len() {
        let w = word(argv[i].as_ref());
        let value = |i: usize| argv.get(i + 1).map(AsRef::as_ref).ok_or(ValkeyError::WrongArity);
        match w.as_str() {
            "ERROR" => c.fp_rate = parse_rate(value(i)?)?,
            "TIGHTENING" => {
                c.tightening = parse_unit_ratio(value(i)?).map_err(|e| {
                    if e.is_some() {
                        ValkeyError::TighteningRange
                    } else {
                        ValkeyError::BadTightening
                    }
                })?
            }
            "CAPACITY" => c.capacity = parse_capacity(value(i)?)? as u64,
            "SEED" => {
                let seed: [u8; 32] = value(i)?.try_into().map_err(|_| ValkeyError::InvalidSeed)?;
                c.seed = Some(seed);
            }
            "NOCREATE" => nocreate = true,
            "NONSCALING" => c.expansion = 0,
            "EXPANSION" => c.expansion = parse_expansion(value(i)?)?,
            "VALIDATESCALETO" => scale_to = Some(parse_capacity(value(i)?)?),
            "ITEMS" => {
                items = true;
                i += 1;
                break;
            }
            _ => return Err(ValkeyError::UnknownArgument),
        }
        i += match w.as_str() {
            "NOCREATE" | "NONSCALING" => 1,
            _ => 2,
        };
    }
    if items && i == argv.len() {
        return Err(ValkeyError::WrongArity);
    }
    if let Some(target) = scale_to {
        if c.expansion == 0 {
            return Err(ValkeyError::NonScalingAndValidateScaleTo);
        }
        if limits.max_bytes.is_some() {
            scaled_capacity(c.capacity, c.fp_rate, Some(target as u64), c.tightening, c.expansion, limits)?;
        }
    }
    Ok(Insert { creation: c, nocreate, items_from: i.min(argv.len()) })
}

/// A field of `BF.INFO key <field>` on a `bloomfltr` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InfoField {
    Capacity,
    Size,
    Filters,
    Items,
    Error,
    Expansion,
    Tightening,
    MaxScaledCapacity,
}

impl InfoField {
    pub fn parse(arg: &[u8]) -> Result<InfoField, ValkeyError> {
        Ok(match word(arg).as_str() {
            "CAPACITY" => InfoField::Capacity,
            "SIZE" => InfoField::Size,
            "FILTERS" => InfoField::Filters,
            "ITEMS" => InfoField::Items,
            "ERROR" => InfoField::Error,
            "EXPANSION" => InfoField::Expansion,
            "TIGHTENING" => InfoField::Tightening,
            "MAXSCALEDCAPACITY" => InfoField::MaxScaledCapacity,
            _ => return Err(ValkeyError::InvalidInfoField),
        })
    }
}

/// How many words each command takes (see [`Arity`]).
pub mod arity {
    pub use crate::common::parse::Arity;

    pub const LOAD: Arity = Arity::Exactly(3);
}
