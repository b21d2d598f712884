//! `BF.*` arguments on `bloomfltr` keys, parsed by valkey-bloom's rules
//! (lossy UTF-8, then Rust's `parse`), which differ from RedisBloom's.
//!
//! Arguments are the whole argv, command name included, as the server passes them.

use std::borrow::Cow;

use super::errors::ValkeyError;
use super::{scaled_capacity, DEFAULT_CAPACITY, DEFAULT_EXPANSION, DEFAULT_FP_RATE, DEFAULT_TIGHTENING};
use crate::common::memory::Limits;

/// An argument as valkey-bloom reads it: lossy UTF-8, then Rust's `parse`.
fn text(arg: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(arg)
}

fn word(arg: &[u8]) -> String {
    text(arg).to_uppercase()
}

/// An error rate: a float strictly between 0 and 1.
fn parse_rate(arg: &[u8]) -> Result<f64, ValkeyError> {
    match text(arg).parse::<f64>() {
        Ok(v) if v > 0.0 && v < 1.0 => Ok(v),
        Ok(_) => Err(ValkeyError::ErrorRateRange),
        Err(_) => Err(ValkeyError::BadErrorRate),
    }
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

/// Checks `BF.RESERVE key error_rate capacity [NONSCALING | EXPANSION n]`
/// as valkey-bloom does before it finds the key taken (`ERR item exists`).
pub fn check_reserve<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), ValkeyError> {
    if !(4..=6).contains(&argv.len()) {
        return Err(ValkeyError::WrongArity);
    }
    parse_rate(argv[2].as_ref())?;
    parse_capacity(argv[3].as_ref())?;
    if argv.len() > 4 {
        match (word(argv[4].as_ref()).as_str(), argv.len()) {
            ("NONSCALING", 5) => {}
            ("EXPANSION", 6) => {
                parse_expansion(argv[5].as_ref())?;
            }
            _ => return Err(ValkeyError::Syntax),
        }
    }
    Ok(())
}

/// Parses `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NONSCALING]
/// [NOCREATE] [SEED s] [TIGHTENING t] [VALIDATESCALETO n] [ITEMS item...]`
/// as valkey-bloom does; on an existing object the options change nothing
/// but are still checked. Returns where the items start (`argv.len()`
/// when there are none).
pub fn parse_insert<A: AsRef<[u8]>>(argv: &[A], limits: Limits) -> Result<usize, ValkeyError> {
    if argv.len() < 2 {
        return Err(ValkeyError::WrongArity);
    }
    let (mut capacity, mut fp_rate, mut tightening, mut expansion) =
        (DEFAULT_CAPACITY, DEFAULT_FP_RATE, DEFAULT_TIGHTENING, DEFAULT_EXPANSION);
    let mut scale_to = None;
    let mut items = false;
    let mut i = 2;
    while i < argv.len() {
        let w = word(argv[i].as_ref());
        let value = |i: usize| argv.get(i + 1).map(AsRef::as_ref).ok_or(ValkeyError::WrongArity);
        match w.as_str() {
            "ERROR" => fp_rate = parse_rate(value(i)?)?,
            "TIGHTENING" => {
                tightening = match text(value(i)?).parse::<f64>() {
                    Ok(v) if v > 0.0 && v < 1.0 => v,
                    Ok(_) => return Err(ValkeyError::TighteningRange),
                    Err(_) => return Err(ValkeyError::BadTightening),
                }
            }
            "CAPACITY" => capacity = parse_capacity(value(i)?)?,
            "SEED" => {
                if value(i)?.len() != 32 {
                    return Err(ValkeyError::InvalidSeed);
                }
            }
            "NOCREATE" => {}
            "NONSCALING" => expansion = 0,
            "EXPANSION" => expansion = parse_expansion(value(i)?)?,
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
        if expansion == 0 {
            return Err(ValkeyError::NonScalingAndValidateScaleTo);
        }
        scaled_capacity(capacity as u64, fp_rate, Some(target as u64), tightening, expansion, limits)?;
    }
    Ok(i.min(argv.len()))
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
