//! Quantities as people write them: `1e9`, `10M`, `2.5k`, `512MiB`.

/// A count: a plain or scientific number, one with an SI suffix
/// (k, M, G, T = 1e3 .. 1e12), or a power (`2^36`).
pub fn parse_count(text: &str) -> Result<f64, String> {
    let t = text.trim();
    // A power, as limits are written: 2^36.
    if let Some((base, exponent)) = t.split_once('^') {
        return match (base.trim().parse::<f64>(), exponent.trim().parse::<f64>()) {
            (Ok(b), Ok(e)) if b.powf(e).is_finite() && b.powf(e) >= 1.0 => Ok(b.powf(e).round()),
            _ => Err(format!("'{text}' is not a count of at least 1 (e.g. 2^36, 1e9, 10M)")),
        };
    }
    let (number, scale) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() && !t.ends_with("e") => {
            let scale = match c {
                'k' | 'K' => 1e3,
                'm' | 'M' => 1e6,
                'g' | 'G' => 1e9,
                't' | 'T' => 1e12,
                _ => return Err(format!("'{text}': unknown suffix '{c}' (use k, M, G or T)")),
            };
            (&t[..i], scale)
        }
        _ => (t, 1.0),
    };
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v * scale >= 1.0 => Ok((v * scale).round()),
        _ => Err(format!("'{text}' is not a count of at least 1 (e.g. 1e9, 10M, 2500)")),
    }
}

/// An error rate: a number strictly between 0 and 1.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v < 1.0 => Ok(v),
        _ => Err(format!("'{text}' is not an error rate strictly between 0 and 1 (e.g. 0.01)")),
    }
}

/// A duration: seconds, or a number with s, m, h or d (`90s`, `10m`, `7d`).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let (number, scale) = match t.chars().last() {
        Some('s') => (&t[..t.len() - 1], 1.0),
        Some('m') => (&t[..t.len() - 1], 60.0),
        Some('h') => (&t[..t.len() - 1], 3600.0),
        Some('d') => (&t[..t.len() - 1], 86_400.0),
        _ => (t, 1.0),
    };
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v * scale >= 1.0 && v * scale <= 10.0 * 365.0 * 86_400.0 => {
            Ok(std::time::Duration::from_secs_f64(v * scale))
        }
        _ => Err(format!("'{text}' is not a window from 1 second to 10 years (e.g. 90s, 10m, 2h, 7d)")),
    }
}

/// A size in bits: a count of bits, or bytes with a unit (B, KB, MB, GB,
/// KiB, MiB, GiB, TiB).
pub fn parse_bits(text: &str) -> Result<f64, String> {
    match with_unit(text) {
        Some(bytes) => bytes.map(|b| b * 8.0),
        None => parse_count(text),
    }
}

/// A size in bytes: a count of bytes, or one with a unit (`8GiB`, `512MB`).
pub fn parse_bytes(text: &str) -> Result<f64, String> {
    with_unit(text).unwrap_or_else(|| parse_count(text))
}

/// Bytes written with a unit; `None` without one.
fn with_unit(text: &str) -> Option<Result<f64, String>> {
    let t = text.trim();
    let units: [(&str, f64); 9] = [
        ("KiB", 1024.0),
        ("MiB", 1024f64.powi(2)),
        ("GiB", 1024f64.powi(3)),
        ("TiB", 1024f64.powi(4)),
        ("KB", 1e3),
        ("MB", 1e6),
        ("GB", 1e9),
        ("TB", 1e12),
        ("B", 1.0),
    ];
    let (number, bytes) = units.iter().find_map(|(unit, bytes)| Some((t.strip_suffix(unit)?, *bytes)))?;
    Some(match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * bytes),
        _ => Err(format!("'{text}' is not a positive size (e.g. 512MiB, 2GB)")),
    })
}

/// A byte count for people: `1.5 GiB`.
pub fn human_bytes(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

/// A byte count for people, with the exact count when a unit rounds it:
/// `55.1 MiB (57747392 bytes)`.
pub fn human_bytes_exact(bytes: f64) -> String {
    if bytes < 1024.0 {
        return human_bytes(bytes);
    }
    format!("{} ({bytes:.0} bytes)", human_bytes(bytes))
}

/// `1 duplicate`, `2 duplicates`.
/// A TTL for people: "86400s (1d 0h 0m)", seconds first so that scripts
/// and `EXPIRE` read the same number.
pub fn human_ttl(ttl: std::time::Duration) -> String {
    let s = ttl.as_secs();
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    match (d, h) {
        (0, 0) => format!("{s}s ({m}m {}s)", s % 60),
        (0, _) => format!("{s}s ({h}h {m}m)"),
        _ => format!("{s}s ({d}d {h}h {m}m)"),
    }
}

pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10m").unwrap().as_secs(), 600);
        assert_eq!(parse_duration("90").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("1.5h").unwrap().as_secs(), 5400);
        assert_eq!(parse_duration("7d").unwrap().as_secs(), 604_800);
        assert!(
            parse_duration("0s").is_err() && parse_duration("ten").is_err() && parse_duration("20y").is_err()
        );
    }

    #[test]
    fn counts_and_sizes() {
        assert_eq!(parse_count("1e9").unwrap(), 1e9);
        assert_eq!(parse_count("10M").unwrap(), 1e7);
        assert_eq!(parse_count("2.5k").unwrap(), 2500.0);
        assert!(parse_count("0").is_err());
        assert!(parse_count("ten").is_err());
        assert!(parse_count("5X").is_err());
        assert_eq!(parse_bits("512MiB").unwrap(), 512.0 * 1024.0 * 1024.0 * 8.0);
        assert_eq!(parse_bits("1KB").unwrap(), 8000.0);
        assert_eq!(parse_bits("1e6").unwrap(), 1e6);
        assert_eq!(parse_bytes("8GiB").unwrap(), 8.0 * 1024f64.powi(3));
        assert_eq!(parse_bytes("4096").unwrap(), 4096.0);
        assert!(parse_bytes("-1MB").is_err() && parse_bytes("lots").is_err());
        assert_eq!(parse_count("2^36").unwrap(), 68_719_476_736.0);
        assert!(parse_count("2^-1").is_err() && parse_count("2^x").is_err());
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
        assert_eq!(human_bytes_exact(57_747_392.0), "55.1 MiB (57747392 bytes)");
        assert_eq!(human_bytes_exact(100.0), "100 B");
        assert_eq!(plural(1, "duplicate", "duplicates"), "1 duplicate");
        assert_eq!(plural(0, "duplicate", "duplicates"), "0 duplicates");
    }
}

/// A false-positive rate from its base-10 logarithm, never rounding a
/// positive rate to 0: `1.234e-5`, or `4.5e-412` where an f64 cannot hold it.
pub fn format_rate(log10: f64) -> String {
    if log10 == f64::NEG_INFINITY {
        return "0 (empty)".to_string();
    }
    if log10 > -300.0 {
        return format!("{:.3e}", 10f64.powf(log10));
    }
    let mut exponent = log10.floor();
    let mut mantissa = 10f64.powf(log10 - exponent);
    if mantissa >= 9.9995 {
        // Rounds up to 10.000: one more in the exponent.
        mantissa = 1.0;
        exponent += 1.0;
    }
    format!("{mantissa:.3}e{}", exponent as i64)
}

#[cfg(test)]
mod rate_tests {
    use super::format_rate;

    #[test]
    fn rates_never_print_as_zero() {
        assert_eq!(format_rate(-2.0), "1.000e-2");
        assert_eq!(format_rate(-22.5), "3.162e-23");
        assert_eq!(format_rate(-412.25), "5.623e-413");
        assert_eq!(format_rate(f64::NEG_INFINITY), "0 (empty)");
        assert_eq!(format_rate(-412.0000001), "1.000e-412");
        assert_eq!(format_rate(-411.99999999), "1.000e-412");
    }
}
