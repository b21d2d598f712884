//! `bloomkit calc --xf`: an expandable filter's (`XF.*`) memory at n items,
//! the items that fit under a byte limit, and what its starting capacity
//! changes, from core's simulation ([`XfModel`]).

use std::io::Write;

use anyhow::Result;
use bloomkit_core::xf::{XfModel, XfParams};
use bloomkit_core::xf::{MAX_CAPACITY_LIMIT, MAX_ERROR_RATE, MIN_ERROR_RATE};
use serde_json::json;

use crate::units::{human_bytes, human_bytes_exact};

/// `bf.max-filter-bytes`' default (`crates/bloomkit-module/src/config/limits.rs`;
/// the CLI tests read it back from a server's CONFIG GET).
pub const MAX_FILTER_BYTES: u64 = 8 << 30;

/// Up to this many items a filter has few blocks, and its bytes depend on
/// which of them its items happened to fill first (between 700 and 5,000
/// items at 1%, the bytes of 300 filters of the same count spanned up to
/// 10% either side of their mean): the figure is the mean of
/// [`REALIZATIONS`] simulated filters, and the least and most of them are
/// reported. Past it, filters differ by about 1% or less and one
/// simulation is the figure.
const AVERAGED_UP_TO: u64 = 1 << 14;
const REALIZATIONS: u64 = 32;

/// What was asked.
#[derive(Clone, Copy, Debug)]
pub struct XfInputs {
    pub error_rate: f64,
    /// `XF.RESERVE`'s `CAPACITY`: where the filter starts.
    pub start_capacity: u64,
    pub max_capacity: u64,
    /// The size past which the server refuses to grow it (`bf.max-filter-bytes`).
    pub max_bytes: u64,
    /// Items to size it for, if given.
    pub items: Option<u64>,
}

impl XfInputs {
    fn params(&self, start_capacity: u64) -> XfParams {
        XfParams { error_rate: self.error_rate, capacity: start_capacity, max_capacity: self.max_capacity }
    }

    /// The checks `XF.RESERVE` makes, in the CLI's words.
    pub fn check(&self) -> Result<()> {
        if !(MIN_ERROR_RATE..=MAX_ERROR_RATE).contains(&self.error_rate) {
            return Err(usage!(
                "--error-rate for an expandable filter must be from {MIN_ERROR_RATE:e} to {MAX_ERROR_RATE} \
                 (XF.RESERVE's range), got {}",
                self.error_rate
            ));
        }
        for (name, value) in
            [("--start-capacity", self.start_capacity), ("--max-capacity", self.max_capacity)]
        {
            if value > MAX_CAPACITY_LIMIT {
                return Err(usage!("{name} may be at most 2^40 ({MAX_CAPACITY_LIMIT}), got {value}"));
            }
        }
        if self.start_capacity > self.max_capacity {
            return Err(usage!(
                "--start-capacity {} is above --max-capacity {}: a filter starts at or below its maximum",
                self.start_capacity,
                self.max_capacity
            ));
        }
        if let Some(n) = self.items.filter(|n| *n > self.max_capacity) {
            return Err(usage!(
                "--capacity {n} is above --max-capacity {}: an expandable filter refuses new items past \
                 MAXCAPACITY (raise --max-capacity, up to 2^40)",
                self.max_capacity
            ));
        }
        Ok(())
    }
}

/// The filter at one count of items.
#[derive(Clone, Copy, Debug)]
pub struct Figure {
    pub items: u64,
    pub bytes: f64,
    /// The least and most bytes of the simulated filters, where several
    /// were (up to [`AVERAGED_UP_TO`] items; equal while a filter is one
    /// block, whose bytes its count decides).
    pub range: Option<(f64, f64)>,
    /// The rate it guarantees then (`XF.INFO`'s `Guaranteed rate`; the
    /// mean of the simulated filters where several were).
    pub guaranteed_rate: f64,
}

impl Figure {
    pub fn bits_per_item(&self) -> f64 {
        self.bytes * 8.0 / self.items.max(1) as f64
    }
}

/// How many items fit under the byte limit.
#[derive(Clone, Copy, Debug)]
pub enum Fit {
    /// About this many, then writes that need more memory are refused.
    Items(u64),
    /// `MAXCAPACITY` comes first, at these bytes.
    MaxCapacity { bytes: f64 },
    /// Even the empty filter is over the limit: `XF.RESERVE` is refused.
    Refused { empty: f64 },
}

/// A complete sizing.
pub struct XfSizing {
    pub inputs: XfInputs,
    /// At `--capacity` items.
    pub at: Option<Figure>,
    /// Just created (`XF.RESERVE`): the layout its capacity asks for.
    pub empty: f64,
    /// At 1, 10, 100, ... up to `--capacity` (or to the limit).
    pub growth: Vec<Figure>,
    pub fit: Fit,
    /// The same items in a filter created with `CAPACITY` n: laid out for
    /// them from the start (when that starts elsewhere).
    pub sized_for_n: Option<Figure>,
}

pub fn solve(inputs: XfInputs) -> Result<XfSizing> {
    inputs.check()?;
    let params = inputs.params(inputs.start_capacity);
    // The growth table: powers of ten up to n and n, or without n, those
    // below the items that fit.
    let top = inputs.items.unwrap_or(inputs.max_capacity);
    let mut points: Vec<u64> =
        std::iter::successors(Some(1u64), |p| p.checked_mul(10)).take_while(|p| *p < top).collect();
    points.extend(inputs.items);
    let run = simulate(params, &points, inputs.max_bytes as f64, inputs.items.is_none());
    let sized_for_n = match inputs.items {
        Some(n) if inputs.params(n).first_level() != params.first_level() => {
            simulate(inputs.params(n), &[n], f64::INFINITY, false).figures.first().copied()
        }
        _ => None,
    };
    Ok(XfSizing {
        inputs,
        at: inputs.items.and(run.figures.last().copied()),
        empty: run.empty,
        growth: run.figures,
        fit: run.fit,
        sized_for_n,
    })
}

pub(super) struct Run {
    pub empty: f64,
    pub figures: Vec<Figure>,
    pub fit: Fit,
}

/// Grows one model filter through `points` (ascending), with
/// [`REALIZATIONS`] beside it up to [`AVERAGED_UP_TO`] items, and on until
/// its bytes pass `max_bytes` or it reaches `MAXCAPACITY`; with
/// `until_fit`, the points past that are left out.
pub(super) fn simulate(params: XfParams, points: &[u64], max_bytes: f64, until_fit: bool) -> Run {
    let seed = |r: u64| 0x6266_6b69_7463_616c ^ r.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut main = XfModel::new(params, seed(0));
    // The others, made when first needed: as many as fit in 2^16 blocks
    // at the start (a filter laid out in thousands of blocks has a few
    // items in each by AVERAGED_UP_TO, and its bytes hardly vary).
    let first_blocks = XfModel::first_blocks(params);
    let realizations = (REALIZATIONS.min((1 << 16) / first_blocks)).max(1);
    let mut others: Option<Vec<XfModel>> = None;
    let empty = main.bytes();
    let mut fit = (empty > max_bytes).then_some(Fit::Refused { empty });
    let (mut last_items, mut last_bytes) = (0u64, empty);
    let mut figures = Vec::with_capacity(points.len());
    let mut points = points.iter().copied().peekable();
    loop {
        let point = points.peek().copied().filter(|_| !(until_fit && fit.is_some()));
        // Steps of 1/64 of a doubling while the limit is looked for.
        let step = (main.items() + 1).max((main.items() as f64 * 2f64.powf(1.0 / 64.0)).ceil() as u64);
        let target = match (point, fit.is_some()) {
            (Some(p), true) => p,
            (Some(p), false) => p.min(step),
            // No limit to look for: done with the points.
            (None, false) if max_bytes.is_infinite() => break,
            (None, false) => step,
            (None, true) => break,
        };
        main.grow_to(target);
        let bytes = main.bytes();
        if fit.is_none() {
            if bytes > max_bytes {
                let share = (max_bytes - last_bytes) / (bytes - last_bytes);
                let items = last_items as f64 + share * (main.items() - last_items) as f64;
                fit = Some(Fit::Items(items.floor() as u64));
                if until_fit {
                    continue;
                }
            } else if main.is_full() {
                fit = Some(Fit::MaxCapacity { bytes });
            }
            (last_items, last_bytes) = (main.items(), bytes);
        }
        if point == Some(target) || (main.is_full() && point.is_some()) {
            points.next();
            let mut figure =
                Figure { items: target, bytes, range: None, guaranteed_rate: main.guaranteed_rate() };
            if target <= AVERAGED_UP_TO && realizations > 1 {
                let mut all = vec![bytes];
                let mut rates = main.guaranteed_rate();
                let others = others.get_or_insert_with(|| {
                    (1..realizations).map(|r| XfModel::new(params, seed(r))).collect()
                });
                for m in others {
                    m.grow_to(target);
                    all.push(m.bytes());
                    rates += m.guaranteed_rate();
                }
                figure.bytes = all.iter().sum::<f64>() / all.len() as f64;
                // A filter laid out in many blocks gives each block's
                // entries their own lengths (by its place): the rate too
                // depends on which blocks the few items fell in.
                figure.guaranteed_rate = rates / all.len() as f64;
                let least = all.iter().copied().fold(f64::INFINITY, f64::min);
                figure.range = Some((least, all.iter().copied().fold(0.0, f64::max)));
            } else {
                others = None;
            }
            figures.push(figure);
        }
    }
    Run { empty, figures, fit: fit.unwrap_or(Fit::MaxCapacity { bytes: last_bytes }) }
}

/// `XF.RESERVE`'s arguments for these inputs.
fn reserve_command(inputs: &XfInputs, start_capacity: u64) -> String {
    format!(
        "XF.RESERVE key {} CAPACITY {start_capacity} MAXCAPACITY {}",
        inputs.error_rate, inputs.max_capacity
    )
}

/// A range of bytes for people, where it is one: `1.9 KiB to 2.2 KiB`.
fn range_text(range: Option<(f64, f64)>) -> Option<String> {
    range
        .filter(|(low, high)| low != high)
        .map(|(low, high)| format!("{} to {}", human_bytes(low), human_bytes(high)))
}

fn figure_json(f: &Figure) -> serde_json::Value {
    json!({
        "items": f.items, "bytes": f.bytes.round() as u64, "memory": human_bytes(f.bytes),
        "bits_per_item": f.bits_per_item(), "guaranteed_rate": f.guaranteed_rate,
        "bytes_low": f.range.map(|r| r.0.round() as u64), "bytes_high": f.range.map(|r| r.1.round() as u64),
    })
}

/// Prints the sizing: one JSON object, or a table of figures and then the
/// growth curve. The JSON and the table's rows are made apart, so each reads on one screen.
pub fn print(s: &XfSizing, as_json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if as_json {
        return print_json(s, &mut out);
    }
    let rows = rows(s);
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, value) in rows {
        writeln!(out, "{name:<width$} {value}")?;
    }
    writeln!(out)?;
    writeln!(out, "{:>14} {:>12} {:>14}  from filter to filter", "items", "memory", "bits per item")?;
    for f in &s.growth {
        let range = range_text(f.range).unwrap_or_default();
        let line =
            format!("{:>14} {:>12} {:>14.2}  {range}", f.items, human_bytes(f.bytes), f.bits_per_item());
        writeln!(out, "{}", line.trim_end())?;
    }
    out.flush()
}

/// `--json`: every figure in one object, with the figures at `n` at its top level.
fn print_json(s: &XfSizing, out: &mut impl Write) -> std::io::Result<()> {
    let i = &s.inputs;
    let (fit_items, limited_by) = match s.fit {
        Fit::Items(n) => (Some(n), "max_bytes"),
        Fit::MaxCapacity { .. } => (Some(i.max_capacity), "max_capacity"),
        Fit::Refused { .. } => (None, "max_bytes"),
    };
    let mut v = json!({
        "kind": "xf", "error_rate": i.error_rate, "start_capacity": i.start_capacity,
        "max_capacity": i.max_capacity, "reserve": reserve_command(i, i.start_capacity),
        "empty_bytes": s.empty.round() as u64, "max_bytes": i.max_bytes,
        "items_under_max_bytes": fit_items, "limited_by": limited_by,
        "growth": s.growth.iter().map(figure_json).collect::<Vec<_>>(),
    });
    if let Some(at) = &s.at {
        for (key, value) in figure_json(at).as_object().expect("an object") {
            v[key] = value.clone();
        }
    }
    if let Some(other) = &s.sized_for_n {
        v["sized_for_items"] = figure_json(other);
        v["sized_for_items"]["start_capacity"] = json!(other.items);
    }
    writeln!(out, "{v}")?;
    out.flush()
}

/// The table's rows (name, value): the command, the figures at `n`, the
/// empty filter, how many items fit, and the filter laid out for `n`.
fn rows(s: &XfSizing) -> Vec<(String, String)> {
    let i = &s.inputs;
    let mut rows: Vec<(String, String)> = vec![(
        "expandable filter".into(),
        format!(
            "{} (grows from CAPACITY to MAXCAPACITY items at the rate)",
            reserve_command(i, i.start_capacity)
        ),
    )];
    if let Some(at) = &s.at {
        rows.push(("items (n)".into(), at.items.to_string()));
        rows.push(("memory at n".into(), human_bytes_exact(at.bytes.round())));
        rows.push(("bits per item".into(), format!("{:.2}", at.bits_per_item())));
        if let Some(range) = range_text(at.range) {
            rows.push((
                "from filter to filter".into(),
                format!(
                    "{range} in simulated filters (which of its few blocks a filter's items fill \
                     first; the figure is their mean)"
                ),
            ));
        }
        rows.push(("rate guaranteed at n".into(), format!("{:.3e}", at.guaranteed_rate)));
    }
    rows.push((
        "memory when created".into(),
        format!("{} (XF.RESERVE, before any item)", human_bytes(s.empty)),
    ));
    let limit = human_bytes(i.max_bytes as f64);
    rows.push((
        format!("items under {limit}"),
        match s.fit {
            Fit::Items(n) => format!(
                "about {n} ({:.2e}; then writes that need more memory are refused: bf.max-filter-bytes)",
                n as f64
            ),
            Fit::MaxCapacity { bytes } => {
                format!("{} (MAXCAPACITY comes first, at {})", i.max_capacity, human_bytes(bytes))
            }
            Fit::Refused { empty } => {
                format!(
                    "none: the empty filter takes {} already, so XF.RESERVE is refused",
                    human_bytes(empty)
                )
            }
        },
    ));
    if let (Some(at), Some(other)) = (&s.at, &s.sized_for_n) {
        rows.push((
            format!("with CAPACITY {}", other.items),
            format!(
                "{} at n, {:.2} bits per item, {} when created (laid out for n from the start; {:+.1}% at n)",
                human_bytes(other.bytes),
                other.bits_per_item(),
                human_bytes(XfModel::new(i.params(other.items), 0).bytes()),
                (other.bytes / at.bytes - 1.0) * 100.0
            ),
        ));
    }
    rows
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bloomkit_core::xf::{Seed, XfFilter};
    use bloomkit_core::Limits;

    /// 16 counts per doubling from 1 to `n`.
    pub(crate) fn points(n: u64) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        for j in 0.. {
            let c = 2f64.powf(f64::from(j) / 16.0).round() as u64;
            if c > n {
                break;
            }
            if out.last() != Some(&c) {
                out.push(c);
            }
        }
        out
    }

    /// A real filter's bytes (`XF.INFO`'s Size) at each of `points`.
    pub(crate) fn real(params: XfParams, seed: u64, points: &[u64]) -> Vec<f64> {
        let mut f = XfFilter::with_seed(params, Seed([seed, !seed]), Limits::NONE).unwrap();
        let mut i = 0u64;
        points
            .iter()
            .map(|&p| {
                while i < p {
                    f.insert(&i.to_le_bytes(), Limits::NONE).unwrap();
                    i += 1;
                }
                f.size_bytes() as f64
            })
            .collect()
    }

    /// The figures against real filters at 16 points per doubling up to
    /// 2^17 items (2^23 under `BLOOMKIT_LONG_TESTS=1`: minutes, as a real
    /// filter's inserts slow with its blocks): equal while a filter is one block (every simulated
    /// filter agrees); within 5% of the mean of eight real ones up to
    /// [`AVERAGED_UP_TO`], where filters differ by their items; within 4%
    /// of the mean of four past it; and within 1% on average past 1,000 items (a rule
    /// of growth copied wrong would shift them all).
    #[test]
    fn figures_follow_real_filters() {
        let cases =
            [(0.01, 100, 1u64 << 36), (1e-6, 1, 1 << 36), (0.1, 10_000, 1 << 20), (0.001, 1 << 20, 1 << 36)];
        for (error_rate, capacity, max_capacity) in cases {
            let params = XfParams { error_rate, capacity, max_capacity };
            let points = points(bloomkit_testkit::lean_or_long(1 << 17, 1 << 23));
            let run = simulate(params, &points, f64::INFINITY, false);
            let (few, many): (Vec<u64>, Vec<u64>) = points.iter().partition(|p| **p <= AVERAGED_UP_TO);
            let reals: Vec<Vec<f64>> = (0..8).map(|seed| real(params, seed, &few)).collect();
            // Past AVERAGED_UP_TO one simulation is the figure, against the
            // mean of four real filters (one is 2-4% off the mean near it).
            let truth: Vec<f64> = {
                let four: Vec<Vec<f64>> = (8..12).map(|seed| real(params, seed, &many)).collect();
                (0..many.len()).map(|j| four.iter().map(|r| r[j]).sum::<f64>() / 4.0).collect()
            };
            let (mut sum, mut count, mut worst) = (0.0, 0, (0.0f64, 0u64));
            for (j, figure) in run.figures.iter().enumerate() {
                let n = figure.items;
                let (real, bound) = if j < few.len() {
                    if figure.range.is_some_and(|(low, high)| low == high) {
                        assert!(reals.iter().all(|r| r[j] == figure.bytes), "{params:?} at {n}: one block");
                    }
                    (reals.iter().map(|r| r[j]).sum::<f64>() / reals.len() as f64, 0.05)
                } else {
                    (truth[j - few.len()], 0.04)
                };
                let d = figure.bytes / real - 1.0;
                assert!(d.abs() <= bound, "{params:?} at {n}: {d:+.4}");
                if n >= 1000 {
                    sum += d;
                    count += 1;
                }
                if d.abs() > worst.0 {
                    worst = (d.abs(), n);
                }
            }
            let mean = sum / f64::from(count);
            eprintln!("{params:?}: worst {:.4} at {}, mean past 1000 {mean:+.4}", worst.0, worst.1);
            assert!(mean.abs() < 0.01, "{params:?}: mean {mean:+.4}");
        }
    }

    #[test]
    fn the_items_that_fit_under_a_limit_take_about_the_limit() {
        let params = XfParams { error_rate: 0.01, capacity: 100, max_capacity: 1 << 36 };
        let run = simulate(params, &[], 1e6, true);
        let Fit::Items(n) = run.fit else { panic!("a limit of 1 MB is reached") };
        let truth = real(params, 3, &[n])[0];
        assert!((truth / 1e6 - 1.0).abs() < 0.04, "{n} items take {truth} bytes");
        // MAXCAPACITY first, and a limit the empty filter passes.
        let small = XfParams { max_capacity: 1000, ..params };
        assert!(matches!(simulate(small, &[], 1e6, true).fit, Fit::MaxCapacity { .. }));
        let big = XfParams { capacity: 1 << 30, max_capacity: 1 << 36, ..params };
        assert!(matches!(simulate(big, &[], 1e6, true).fit, Fit::Refused { empty } if empty > 1e6));
    }
}
