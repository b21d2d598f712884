//! C's `%g`, which RedisBloom's `BF.DEBUG` uses for error rates.

/// Formats like `printf("%g", v)`: 6 significant digits, trailing zeros
/// removed, exponent form below 1e-4 or from 1e6, exponent of at least 2 digits.
pub fn format_g(v: f64) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    if !v.is_finite() {
        return if v.is_nan() {
            "nan".into()
        } else if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    const PRECISION: i32 = 6;
    // The exponent after rounding to the precision decides the style.
    let sci = format!("{:.*e}", (PRECISION - 1) as usize, v);
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    if !(-4..PRECISION).contains(&exp) {
        let mantissa = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (PRECISION - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{v:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::format_g;

    #[test]
    fn like_printf() {
        for (v, s) in [
            (0.005, "0.005"),
            (5e-7, "5e-07"),
            (0.0025, "0.0025"),
            (0.00125, "0.00125"),
            (0.05, "0.05"),
            (0.0125, "0.0125"),
            (1e-4, "0.0001"),
            (1.5e-5, "1.5e-05"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (0.1 * 0.5 * 0.5 * 0.5, "0.0125"),
            (0.000244140625, "0.000244141"),
            (2.44140625e-5, "2.44141e-05"),
        ] {
            assert_eq!(format_g(v), s, "{v}");
        }
    }
}
