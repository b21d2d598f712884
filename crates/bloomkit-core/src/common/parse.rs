//! Numbers and keywords in command arguments, read by the server's own rules
//! (`string2ll`, `string2d`), so that every family accepts exactly what
//! RedisBloom and the server accept.

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

pub fn eq_ignore_case(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// A command line split at spaces, as the server passes argv (for tests).
#[cfg(test)]
pub(crate) fn argv(s: &str) -> Vec<&[u8]> {
    s.split(' ').map(str::as_bytes).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

/// How many words a command takes, its name included: the rule a family's
/// `args.rs` states once for each command (its `arity` module), checked
/// before anything else, as RedisBloom checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    Exactly(usize),
    AtLeast(usize),
    /// One of two counts (`TDIGEST.CREATE key [COMPRESSION c]`).
    Either(usize, usize),
    /// From the first to the second, both included.
    Between(usize, usize),
}

impl Arity {
    pub fn allows(self, words: usize) -> bool {
        match self {
            Arity::Exactly(n) => words == n,
            Arity::AtLeast(n) => words >= n,
            Arity::Either(a, b) => words == a || words == b,
            Arity::Between(a, b) => (a..=b).contains(&words),
        }
    }

    /// The server's wrong-arity error unless `argv` has a count this allows.
    pub fn check<A>(self, argv: &[A]) -> Result<(), crate::Reply> {
        if self.allows(argv.len()) {
            Ok(())
        } else {
            Err(crate::Reply::WrongArity)
        }
    }
}
