//! Typed parsing of `APBF.*` arguments.
//!
//! Arguments are the whole argv, command name included, as the server passes them.

use super::errors::ApbfError;
use super::{ApbfParams, Window, MAX_WINDOW_SECONDS};
use crate::common::parse::{eq_ignore_case, parse_double, parse_long_long};

/// `APBF.RESERVE key error_rate capacity COUNT | TIME seconds`.
/// A missing window is answered with what the window may be, not an arity error.
pub fn parse_reserve<A: AsRef<[u8]>>(argv: &[A]) -> Result<ApbfParams, ApbfError> {
    if !(4..=6).contains(&argv.len()) {
        return Err(ApbfError::WrongArity);
    }
    let error =
        parse_double(argv[2].as_ref()).filter(|e| *e > 0.0 && *e < 1.0).ok_or(ApbfError::BadErrorRate)?;
    let capacity = parse_long_long(argv[3].as_ref()).filter(|c| *c >= 1).ok_or(ApbfError::BadCapacity)?;
    let window = match &argv[4..] {
        [word] if eq_ignore_case(word.as_ref(), "COUNT") => Window::Count,
        [word, seconds] if eq_ignore_case(word.as_ref(), "TIME") => {
            let s = parse_long_long(seconds.as_ref())
                .filter(|s| (1..=MAX_WINDOW_SECONDS).contains(s))
                .ok_or(ApbfError::BadSeconds)?;
            Window::Time { millis: s as u64 * 1000 }
        }
        _ => return Err(ApbfError::BadWindow),
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

pub fn parse_advance<A: AsRef<[u8]>>(argv: &[A]) -> Result<Advance, ApbfError> {
    if !(4..=5).contains(&argv.len()) {
        return Err(ApbfError::WrongArity);
    }
    let number = |i: usize| {
        parse_long_long(argv[i].as_ref()).filter(|n| *n >= 0).map(|n| n as u64).ok_or(ApbfError::BadAdvance)
    };
    let (generations, started_ms) = (number(2)?, number(3)?);
    let now_ms = if argv.len() == 5 { number(4)? } else { started_ms };
    Ok(Advance { generations, started_ms, now_ms })
}

/// The offset of `APBF.LOADCHUNK key iter data`: `None` for the header
/// (iter 0), else the body offset `iter - 1`.
pub fn parse_chunk_iter(word: &[u8]) -> Result<Option<u64>, ApbfError> {
    match parse_long_long(word) {
        Some(0) => Ok(None),
        Some(i) if i > 0 => Ok(Some(i as u64 - 1)),
        _ => Err(ApbfError::IterNotNumeric),
    }
}

/// How many words each command takes (see [`Arity`]).
pub mod arity {
    pub use crate::common::parse::Arity;

    pub const ADD: Arity = Arity::Exactly(3);
    pub const MADD: Arity = Arity::AtLeast(3);
    pub const EXISTS: Arity = Arity::Exactly(3);
    pub const MEXISTS: Arity = Arity::AtLeast(3);
    pub const INFO: Arity = Arity::Exactly(2);
    pub const SCANDUMP: Arity = Arity::Exactly(3);
    pub const LOADCHUNK: Arity = Arity::Exactly(4);
}
