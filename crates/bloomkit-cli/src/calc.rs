//! `bloomkit calc`: sizing from any two of n, p, m, k; [`xf`] sizes
//! expandable filters and [`window`] sliding-window ones.

pub mod population;
pub mod window;
pub mod xf;

use anyhow::Result;
use bloomkit_core::common::sizing::{
    false_positive_rate, log10_false_positive_rate, optimal_bits, optimal_hashes, options, Shape,
};
use std::io::Write;

use serde_json::json;

use crate::units::{format_rate, human_bytes};

/// More hashes than any implementation uses: RedisBloom, Guava and
/// bloomkit derive every position from one 128- or 64-bit hash pair.
const MOST_HASHES: f64 = 64.0;
/// Below this, two items sharing their whole 64-bit hash pair (a chance of
/// about one in 2^64) happen more often than the bits say.
const LOWEST_RATE: f64 = 1e-19;

pub struct Inputs {
    pub n: Option<f64>,
    pub p: Option<f64>,
    pub m: Option<f64>,
    pub k: Option<f64>,
}

/// A complete sizing.
pub struct Sizing {
    pub n: f64,
    pub m: f64,
    pub k: f64,
    /// The false-positive rate expected at n items.
    pub p: f64,
    /// The rate asked for, if one was.
    pub requested_p: Option<f64>,
}

impl Sizing {
    fn bytes(&self) -> f64 {
        (self.m / 8.0).ceil()
    }
}

pub fn solve(i: &Inputs) -> Result<Sizing> {
    let given = [i.n, i.p, i.m, i.k].iter().filter(|v| v.is_some()).count();
    if given != 2 {
        return Err(usage!(
            "give exactly two of --capacity (n), --error-rate (p), --bits (m), --hashes (k); {given} given"
        ));
    }
    if let Some(p) = i.p {
        if !(p > 0.0 && p < 1.0) {
            return Err(usage!("--error-rate must be strictly between 0 and 1, got {p}"));
        }
    }
    if let Some(k) = i.k {
        if k < 1.0 || k.fract() != 0.0 {
            return Err(usage!("--hashes must be a whole number of at least 1, got {k}"));
        }
    }
    let (n, m, k) = match (i.n, i.p, i.m, i.k) {
        (Some(n), Some(p), None, None) => {
            let m = optimal_bits(n, p);
            (n, m, optimal_hashes(m / n))
        }
        (Some(n), None, Some(m), None) => (n, m, optimal_hashes(m / n)),
        (Some(n), None, None, Some(k)) => (n, (k * n / std::f64::consts::LN_2).ceil(), k),
        (None, Some(p), Some(m), None) => {
            let n = (m * std::f64::consts::LN_2.powi(2) / -p.ln()).floor().max(1.0);
            (n, m, optimal_hashes(m / n))
        }
        (None, None, Some(m), Some(k)) => ((m * std::f64::consts::LN_2 / k).floor().max(1.0), m, k),
        (None, Some(_), None, Some(_)) => {
            return Err(usage!(
                "--error-rate and --hashes fix only the bits per item; add --capacity or --bits"
            ))
        }
        _ => unreachable!("exactly two are given"),
    };
    Ok(Sizing { n, m, k, p: false_positive_rate(m, k, n), requested_p: i.p })
}

impl Sizing {
    /// The rate's base-10 logarithm, exact where the rate underflows.
    fn log10_p(&self) -> f64 {
        log10_false_positive_rate(self.m, self.k, self.n)
    }

    /// A warning when the shape is beyond what any implementation does,
    /// with what bloomkit would pick instead.
    pub fn warning(&self) -> Option<String> {
        let too_many = self.k > MOST_HASHES;
        let too_low = self.log10_p() < LOWEST_RATE.log10();
        if !too_many && !too_low {
            return None;
        }
        let k = self.k.min(MOST_HASHES);
        let at_k = log10_false_positive_rate(self.m, k, self.n);
        let enough = optimal_bits(self.n, LOWEST_RATE);
        let mut why = Vec::new();
        if too_many {
            why.push(format!(
                "k = {:.0} hashes is more than any implementation uses (at most {MOST_HASHES:.0}: every \
                 position comes from one hash pair)",
                self.k
            ));
        }
        if too_low {
            why.push(format!(
                "a rate of {} is below what 64-bit hashing delivers (about {LOWEST_RATE:e}: two items \
                 share their whole hash pair more often than that)",
                format_rate(self.log10_p())
            ));
        }
        Some(format!(
            "{}; bloomkit would pick k = {k:.0} (rate {}) here, and {enough:.0} bits ({}) is already enough for \
             {LOWEST_RATE:e}",
            why.join("; "),
            format_rate(at_k),
            human_bytes((enough / 8.0).ceil())
        ))
    }
}

/// A whole number for JSON: an integer, not `10.0` (every count here is
/// whole: sizing rounds bits up and items down).
fn int(x: f64) -> serde_json::Value {
    if x.fract() == 0.0 && x >= 0.0 && x < u64::MAX as f64 {
        json!(x as u64)
    } else {
        json!(x)
    }
}

/// An expected count of false positives: whole numbers where it is large,
/// a few significant digits where it is small, never `0.0` for a positive one.
fn expected(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 0.1 || x == 0.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2e}")
    }
}

/// A rate as a command line takes it: as given when it was, else to four
/// significant digits (`1.092e-9`, not 0.0000000010923600024162456).
fn rate_arg(p: f64, given: bool) -> String {
    if given {
        format!("{p}")
    } else {
        format!("{p:.3e}")
    }
}

pub fn print(s: &Sizing, as_json: bool) -> std::io::Result<()> {
    if let Some(w) = s.warning() {
        say!("bloomkit calc: warning: {w}");
    }
    let mut out = std::io::stdout().lock();
    // What BF.RESERVE n p allocates for its first sub-filter (error p/2, RedisBloom's sizing).
    let p = s.requested_p.unwrap_or(s.p);
    let reserve = Shape::new(s.n as u64, p / 2.0, options::DEFAULT);
    if as_json {
        let mut v = json!({
            "capacity": int(s.n), "error_rate": s.p, "log10_error_rate": s.log10_p(), "bits": int(s.m),
            "bytes": int(s.bytes()), "memory": human_bytes(s.bytes()), "hashes": int(s.k),
            "bits_per_item": s.m / s.n, "expected_false_positives": s.p * s.n,
        });
        if let Some(r) = reserve {
            v["bf_reserve_bytes"] = json!(r.bytes);
            v["bf_reserve_memory"] = json!(human_bytes(r.bytes as f64));
            v["bf_reserve_hashes"] = json!(r.hashes);
        }
        writeln!(out, "{v}")?;
        return out.flush();
    }
    let mut rows = vec![
        ("capacity (n)".to_string(), format!("{:.0}", s.n)),
        ("false-positive rate (p)".to_string(), format_rate(s.log10_p())),
        ("bits (m)".to_string(), format!("{:.0}", s.m)),
        ("memory".to_string(), format!("{} ({:.0} bytes)", human_bytes(s.bytes()), s.bytes())),
        ("hashes (k)".to_string(), format!("{:.0}", s.k)),
        ("bits per item".to_string(), format!("{:.2}", s.m / s.n)),
        ("expected false positives among n absent lookups".to_string(), expected(s.p * s.n)),
    ];
    if let Some(r) = reserve {
        rows.push((
            format!("BF.RESERVE key {} {:.0}", rate_arg(p, s.requested_p.is_some()), s.n),
            format!(
                "{} in its first sub-filter, {} hashes (it sizes for p/2 to leave room to scale)",
                human_bytes(r.bytes as f64),
                r.hashes
            ),
        ));
    }
    // Every value starts in one column, however long the longest name.
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, value) in rows {
        writeln!(out, "{name:<width$} {value}")?;
    }
    out.flush()
}

/// `--table`: a grid over bits per item and hash counts for one capacity.
pub fn table(n: f64, bits_per_item: &[f64], hashes: &[f64], as_json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let mut rows = Vec::new();
    for &b in bits_per_item {
        for &k in hashes {
            let m = (b * n).ceil();
            let p = false_positive_rate(m, k, n);
            rows.push((b, k, p, p * n, (m / 8.0).ceil(), log10_false_positive_rate(m, k, n)));
        }
    }
    if as_json {
        let v: Vec<_> = rows
            .iter()
            .map(|(b, k, p, fp, bytes, _)| {
                json!({"bits_per_item": int(*b), "hashes": int(*k), "false_positive_rate": p,
                       "expected_false_positives": fp, "bytes": int(*bytes), "memory": human_bytes(*bytes)})
            })
            .collect();
        writeln!(out, "{}", json!({"capacity": int(n), "rows": v}))?;
        return out.flush();
    }
    writeln!(out, "capacity n = {n:.0}")?;
    writeln!(out, "{:>10} {:>7} {:>14} {:>16} {:>12}", "m/n", "k", "FPR", "expected FPs", "memory")?;
    for (b, k, _, fp, bytes, log10_p) in rows {
        writeln!(
            out,
            "{b:>10} {k:>7} {:>14} {:>16} {:>12}",
            format_rate(log10_p),
            expected(fp),
            human_bytes(bytes)
        )?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_and_p_give_the_textbook_sizing() {
        let s = solve(&Inputs { n: Some(1e6), p: Some(0.01), m: None, k: None }).unwrap();
        assert!((s.m / s.n - 9.585).abs() < 0.01);
        assert_eq!(s.k, 7.0);
        assert!(s.p < 0.0101 && s.p > 0.0099);
    }

    #[test]
    fn wrong_number_of_inputs_is_refused() {
        assert!(solve(&Inputs { n: Some(1e6), p: None, m: None, k: None }).is_err());
        assert!(solve(&Inputs { n: Some(1e6), p: Some(0.1), m: Some(1e7), k: None }).is_err());
        assert!(solve(&Inputs { n: None, p: Some(0.1), m: None, k: Some(3.0) }).is_err());
        assert!(solve(&Inputs { n: Some(1e6), p: Some(1.5), m: None, k: None }).is_err());
    }
}
