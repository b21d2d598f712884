//! Typed parsing of `TOPK.*` arguments, with RedisBloom 2.8.2's rules and
//! order of checks. Arguments are the whole argv, command name included, as
//! the server passes them.

use super::errors::TopkError;
use super::{TopkParams, DEFAULT_DECAY, DEFAULT_DEPTH, DEFAULT_WIDTH, MAX_INCREMENT};
use crate::common::parse::{parse_double, parse_long_long};

/// `TOPK.RESERVE key topk [width depth decay]` takes exactly 3 or 6 words:
/// checked before the key (which must be empty) and the values.
pub fn check_reserve_arity<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), TopkError> {
    match argv.len() {
        3 | 6 => Ok(()),
        _ => Err(TopkError::WrongArity),
    }
}

/// A count RedisBloom keeps in 32 bits: an integer in `1..=u32::MAX`.
fn positive_u32(word: &[u8], error: TopkError) -> Result<u32, TopkError> {
    match parse_long_long(word) {
        Some(v) if v >= 1 => u32::try_from(v).map_err(|_| error),
        _ => Err(error),
    }
}

/// The values of `TOPK.RESERVE` (after [`check_reserve_arity`] and the key
/// check), in RedisBloom's order: k, width, depth, decay. `k` above
/// 4294967295 is refused as RedisBloom 2.8.16 refuses it (2.8.2 truncates
/// it, and 2^32 aborts the server).
pub fn parse_reserve<A: AsRef<[u8]>>(argv: &[A]) -> Result<TopkParams, TopkError> {
    check_reserve_arity(argv)?;
    let k = positive_u32(argv[2].as_ref(), TopkError::InvalidK)?;
    if argv.len() == 3 {
        return Ok(TopkParams { k, width: DEFAULT_WIDTH, depth: DEFAULT_DEPTH, decay: DEFAULT_DECAY });
    }
    let width = positive_u32(argv[3].as_ref(), TopkError::InvalidWidth)?;
    let depth = positive_u32(argv[4].as_ref(), TopkError::InvalidDepth)?;
    let decay = match parse_double(argv[5].as_ref()) {
        Some(d) if d > 0.0 && d <= 1.0 => d,
        _ => return Err(TopkError::InvalidDecay),
    };
    Ok(TopkParams { k, width, depth, decay })
}

/// `TOPK.ADD`, `TOPK.QUERY` and `TOPK.COUNT`: a key and at least one item.
pub fn check_items_arity<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), TopkError> {
    if argv.len() < 3 {
        return Err(TopkError::WrongArity);
    }
    Ok(())
}

/// `TOPK.INCRBY key item increment [item increment ...]`.
pub fn check_incrby_arity<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), TopkError> {
    if argv.len() < 4 || !argv.len().is_multiple_of(2) {
        return Err(TopkError::WrongArity);
    }
    Ok(())
}

/// One increment of `TOPK.INCRBY`: an integer in `0..=100000`.
pub fn parse_increment(word: &[u8]) -> Result<u32, TopkError> {
    match parse_long_long(word) {
        Some(v) if (0..=MAX_INCREMENT).contains(&v) => Ok(v as u32),
        _ => Err(TopkError::BadIncrement),
    }
}

/// `TOPK.LIST key [WITHCOUNT]`: whether counts are asked for. As in
/// RedisBloom, any case-insensitive prefix of `WITHCOUNT` means it (the
/// empty word too); checked before the key is looked up.
pub fn parse_list<A: AsRef<[u8]>>(argv: &[A]) -> Result<bool, TopkError> {
    match argv.len() {
        2 => Ok(false),
        3 => {
            let word = argv[2].as_ref();
            let is_prefix =
                word.len() <= b"WITHCOUNT".len() && word.eq_ignore_ascii_case(&b"WITHCOUNT"[..word.len()]);
            if is_prefix {
                Ok(true)
            } else {
                Err(TopkError::WithcountExpected)
            }
        }
        _ => Err(TopkError::WrongArity),
    }
}

/// `TOPK.INFO key`.
pub fn check_info_arity<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), TopkError> {
    if argv.len() != 2 {
        return Err(TopkError::WrongArity);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::parse::argv;

    #[test]
    fn reserve_checks_in_redisbloom_order() {
        let p = parse_reserve(&argv("TOPK.RESERVE k 3")).unwrap();
        assert_eq!(p, TopkParams { k: 3, width: 8, depth: 7, decay: 0.9 });
        let p = parse_reserve(&argv("TOPK.RESERVE k 3 50 4 1")).unwrap();
        assert_eq!(p, TopkParams { k: 3, width: 50, depth: 4, decay: 1.0 });
        for (line, e) in [
            ("TOPK.RESERVE k", TopkError::WrongArity),
            ("TOPK.RESERVE k 1 2", TopkError::WrongArity),
            ("TOPK.RESERVE k 1 2 3", TopkError::WrongArity),
            ("TOPK.RESERVE k 1 2 3 0.5 x", TopkError::WrongArity),
            ("TOPK.RESERVE k 0 x x x", TopkError::InvalidK),
            ("TOPK.RESERVE k -1", TopkError::InvalidK),
            ("TOPK.RESERVE k 07", TopkError::InvalidK),
            ("TOPK.RESERVE k 4294967296", TopkError::InvalidK),
            ("TOPK.RESERVE k 4294967297", TopkError::InvalidK),
            ("TOPK.RESERVE k 1 0 x x", TopkError::InvalidWidth),
            ("TOPK.RESERVE k 1 4294967296 1 1", TopkError::InvalidWidth),
            ("TOPK.RESERVE k 1 1 0 x", TopkError::InvalidDepth),
            ("TOPK.RESERVE k 1 1 4294967296 1", TopkError::InvalidDepth),
            ("TOPK.RESERVE k 1 1 1 0", TopkError::InvalidDecay),
            ("TOPK.RESERVE k 1 1 1 1.0000001", TopkError::InvalidDecay),
            ("TOPK.RESERVE k 1 1 1 inf", TopkError::InvalidDecay),
            ("TOPK.RESERVE k 1 1 1 nan", TopkError::InvalidDecay),
        ] {
            assert_eq!(parse_reserve(&argv(line)), Err(e), "{line}");
        }
        assert_eq!(parse_reserve(&argv("TOPK.RESERVE k 4294967295 1 1 1e-300")).unwrap().k, u32::MAX);
    }

    #[test]
    fn increments_and_withcount() {
        assert_eq!(parse_increment(b"0"), Ok(0));
        assert_eq!(parse_increment(b"100000"), Ok(100_000));
        for bad in [&b"100001"[..], b"-1", b"x", b"", b"+1", b"1.0"] {
            assert_eq!(parse_increment(bad), Err(TopkError::BadIncrement));
        }
        assert_eq!(parse_list(&argv("TOPK.LIST k")), Ok(false));
        for yes in ["WITHCOUNT", "withcount", "with", "W"] {
            assert_eq!(parse_list(&[b"TOPK.LIST".as_ref(), b"k", yes.as_bytes()]), Ok(true), "{yes}");
        }
        assert_eq!(parse_list(&[b"TOPK.LIST".as_ref(), b"k", b""]), Ok(true));
        for no in ["WITHCOUNTS", "x", "count"] {
            assert_eq!(
                parse_list(&[b"TOPK.LIST".as_ref(), b"k", no.as_bytes()]),
                Err(TopkError::WithcountExpected)
            );
        }
        assert_eq!(parse_list(&argv("TOPK.LIST k a b")), Err(TopkError::WrongArity));
        assert_eq!(check_incrby_arity(&argv("TOPK.INCRBY k a")), Err(TopkError::WrongArity));
        assert_eq!(check_incrby_arity(&argv("TOPK.INCRBY k a 1 b")), Err(TopkError::WrongArity));
        assert_eq!(check_incrby_arity(&argv("TOPK.INCRBY k a 1")), Ok(()));
    }
}
