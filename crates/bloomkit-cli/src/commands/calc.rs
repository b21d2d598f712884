//! `bloomkit calc`: its options and their checks (which of a Bloom filter,
//! an expandable filter, a sliding window or a population they size), then
//! the sizing of [`crate::calc`].

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use crate::{calc, units};

#[derive(Args)]
pub struct CalcArgs {
    /// Items the filter holds (1e9, 10M, 250k, 2^30); with --window, the
    /// most adds within one window, bursts included.
    #[arg(short = 'n', long = "capacity", value_parser = units::parse_count)]
    n: Option<f64>,
    /// False-positive rate at capacity (0.01 = 1%); --xf takes 0.01 when it
    /// is not given, as XF.ADD does.
    #[arg(short = 'p', long = "error-rate")]
    p: Option<f64>,
    /// Size in bits, or bytes with a unit (512MiB, 2GB).
    #[arg(short = 'm', long = "bits", value_parser = units::parse_bits)]
    m: Option<f64>,
    /// Number of hash functions.
    #[arg(short = 'k', long = "hashes")]
    k: Option<f64>,
    /// Print a grid over bits per item and hash counts for --capacity.
    #[arg(long)]
    table: bool,
    /// Bits per item for --table (30,50 or 30 50).
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = vec![10.0, 20.0, 30.0, 50.0])]
    bits_per_item: Vec<f64>,
    /// Hash counts for --table (8,16 or 8 16).
    #[arg(long = "table-hashes", value_delimiter = ',', num_args = 1.., default_values_t = vec![4.0, 8.0, 16.0])]
    table_hashes: Vec<f64>,
    /// Size an expandable filter (XF.*) instead: its memory at --capacity
    /// items, the items that fit under --max-bytes, and how it grows.
    #[arg(long)]
    xf: bool,
    /// With --xf: XF.RESERVE's CAPACITY [default: 100, as XF.ADD creates
    /// it]. It is where the filter starts, not a limit: the filter is laid
    /// out for this many items when created (one block of 8 to 512
    /// quotients up to 512 items, 2^(ceil(log2 c) - 9) blocks of 512 past
    /// it, the same past 2^25) and grows past it as items come. Starting
    /// near the final count gives shorter fingerprints (a few percent less
    /// memory there); starting far above it pays for empty blocks.
    #[arg(long, value_name = "C", value_parser = units::parse_count)]
    start_capacity: Option<f64>,
    /// With --xf: XF.RESERVE's MAXCAPACITY [default: 2^36], the most items
    /// the filter takes; the rate is guaranteed up to it, so a lower one
    /// gives shorter fingerprints.
    #[arg(long, value_name = "M", value_parser = units::parse_count)]
    max_capacity: Option<f64>,
    /// With --xf or a window: the server's bf.max-filter-bytes, past which it
    /// refuses to grow (or create) a filter [default: 8GiB, its default].
    #[arg(long, value_name = "BYTES", value_parser = units::parse_bytes)]
    max_bytes: Option<f64>,
    /// Size a sliding-window filter (APBF.*) over a window of time (90s,
    /// 10m, 2h, 7d; whole seconds, rounded up, as the server takes them),
    /// with --capacity adds at most within any one window.
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration, conflicts_with = "window_count")]
    window: Option<std::time::Duration>,
    /// Size a sliding-window filter (APBF.*) over the last N adds.
    #[arg(long, value_name = "N", value_parser = units::parse_count)]
    window_count: Option<f64>,
    /// With --xf: size one filter per key for a population of keys, from a
    /// file of item counts (one key's count per line, or COUNT KEYS per
    /// line): total used_memory (values and keys), and the false positives
    /// to expect.
    #[arg(long, value_name = "FILE", conflicts_with = "population_range")]
    population: Option<PathBuf>,
    /// With --xf: a population of --keys keys whose sizes spread from LO to
    /// HI items (log-uniformly: most keys small; --shape uniform).
    #[arg(long, value_name = "LO..HI", value_parser = parse_range)]
    population_range: Option<(u64, u64)>,
    /// With --population-range: how many keys.
    #[arg(long, value_parser = units::parse_count)]
    keys: Option<f64>,
    /// With --population-range: how sizes spread.
    #[arg(long, value_enum, default_value = "log-uniform")]
    shape: Shape,
    /// With a population: the server that keeps the keys (what a key costs
    /// beside its value): redis7 (7.0 to 7.4), redis8, valkey (8 and 9).
    #[arg(long, value_enum, default_value = "redis7")]
    server: calc::population::ServerKind,
    /// With a population: the mean length of the keys' names, in bytes.
    #[arg(long, default_value_t = 24)]
    key_bytes: u64,
    /// With a population: the keys carry a TTL (EXPIRE).
    #[arg(long)]
    ttl: bool,
    /// With a population: the flow it replaces, BF.RESERVE key RATE
    /// CAPACITY per key: its memory and false positives, and the XF rate
    /// whose false positives match them.
    #[arg(long, value_name = "RATE:CAPACITY", value_parser = parse_old_flow)]
    like_bf: Option<calc::population::OldFlow>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// How the sizes of `--population-range` spread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Shape {
    LogUniform,
    Uniform,
}

/// `LO..HI` (counts as --capacity takes them).
fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let (lo, hi) =
        text.split_once("..").ok_or_else(|| format!("expected LO..HI, such as 1..50000, got '{text}'"))?;
    Ok((units::parse_count(lo)? as u64, units::parse_count(hi)? as u64))
}

/// `RATE:CAPACITY`, as `BF.RESERVE key RATE CAPACITY`.
fn parse_old_flow(text: &str) -> Result<calc::population::OldFlow, String> {
    let (rate, capacity) = text
        .split_once(':')
        .ok_or_else(|| format!("expected RATE:CAPACITY, such as 0.01:100000, got '{text}'"))?;
    let error_rate: f64 = rate.parse().map_err(|_| format!("'{rate}' is not a rate such as 0.01"))?;
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(format!("the rate must be between 0 and 1, got {error_rate}"));
    }
    let capacity = units::parse_count(capacity)? as u64;
    if capacity == 0 {
        return Err("the capacity must be at least 1".into());
    }
    let flow = calc::population::OldFlow { error_rate, capacity };
    flow.shape().ok_or_else(|| format!("BF.RESERVE would refuse {error_rate} and {capacity} (too large)"))?;
    Ok(flow)
}

/// `calc`: which kind of filter the options size, then that sizing. Which
/// flags go with which is declared in [`crate::rules`], so that the flags
/// given here always describe one kind.
pub fn run(a: CalcArgs) -> Result<()> {
    let max_bytes = a.max_bytes.map_or(calc::xf::MAX_FILTER_BYTES, |b| b.ceil() as u64);
    if a.population.is_some() || a.population_range.is_some() {
        return population(&a);
    }
    if a.xf {
        xf(&a, max_bytes)
    } else if a.window.is_some() || a.window_count.is_some() {
        window(&a, max_bytes)
    } else if a.table {
        table(&a)
    } else {
        let sizing = calc::solve(&calc::Inputs { n: a.n, p: a.p, m: a.m, k: a.k })?;
        calc::print(&sizing, a.json)?;
        Ok(())
    }
}

/// `calc --xf`: an expandable filter's memory and growth.
fn xf(a: &CalcArgs, max_bytes: u64) -> Result<()> {
    let sizing = calc::xf::solve(calc::xf::XfInputs {
        error_rate: a.p.unwrap_or(bloomkit_core::xf::DEFAULT_ERROR_RATE),
        start_capacity: a.start_capacity.map_or(bloomkit_core::xf::DEFAULT_CAPACITY, |c| c as u64),
        max_capacity: a.max_capacity.map_or(bloomkit_core::xf::DEFAULT_MAX_CAPACITY, |c| c as u64),
        max_bytes,
        items: a.n.map(|n| n as u64),
    })?;
    calc::xf::print(&sizing, a.json)?;
    Ok(())
}

/// `calc --window` / `--window-count`: a sliding-window filter as
/// APBF.RESERVE sizes it.
fn window(a: &CalcArgs, max_bytes: u64) -> Result<()> {
    // (The rules give a window one capacity and a rate.)
    let (Some(capacity), Some(error_rate)) = (a.window_count.or(a.n), a.p) else {
        bail!("a window without its capacity or rate passed the flag rules");
    };
    let capacity = capacity as u64;
    let sizing = calc::window::solve(calc::window::WindowInputs {
        error_rate,
        capacity,
        seconds: a.window.map(|t| t.as_millis().div_ceil(1000).max(1) as u64),
        max_bytes,
    })?;
    calc::window::print(&sizing, a.json)?;
    Ok(())
}

/// `calc --table`: a grid over bits per item and hash counts.
fn table(a: &CalcArgs) -> Result<()> {
    let Some(n) = a.n else { bail!("--table without --capacity passed the flag rules") };
    if let Some(b) = a.bits_per_item.iter().find(|b| !(**b > 0.0 && b.is_finite())) {
        return Err(usage!("--bits-per-item takes positive numbers, got {b}"));
    }
    if let Some(k) = a.table_hashes.iter().find(|k| !(**k >= 1.0 && k.fract() == 0.0)) {
        return Err(usage!("--table-hashes takes whole numbers of at least 1, got {k}"));
    }
    calc::table(n, &a.bits_per_item, &a.table_hashes, a.json)?;
    Ok(())
}

/// `calc --xf --population FILE` or `--population-range LO..HI --keys N`.
fn population(a: &CalcArgs) -> Result<()> {
    let population = match (&a.population, a.population_range, a.keys) {
        (Some(file), None, None) => calc::population::Population::read(file)?,
        (None, Some((lo, hi)), Some(keys)) => {
            calc::population::Population::range(lo, hi, keys as u64, a.shape == Shape::LogUniform)?
        }
        _ => bail!("a population's flags passed the flag rules in a combination they refuse"),
    };
    let inputs = calc::xf::XfInputs {
        error_rate: a.p.unwrap_or(bloomkit_core::xf::DEFAULT_ERROR_RATE),
        start_capacity: a.start_capacity.map_or(bloomkit_core::xf::DEFAULT_CAPACITY, |c| c as u64),
        max_capacity: a.max_capacity.map_or(bloomkit_core::xf::DEFAULT_MAX_CAPACITY, |c| c as u64),
        max_bytes: calc::xf::MAX_FILTER_BYTES,
        items: None,
    };
    inputs.check()?;
    let params = bloomkit_core::xf::XfParams {
        error_rate: inputs.error_rate,
        capacity: inputs.start_capacity,
        max_capacity: inputs.max_capacity,
    };
    let key = calc::population::KeyCost { server: a.server, name_bytes: a.key_bytes, ttl: a.ttl };
    let sizing = calc::population::solve(calc::population::PopulationInputs {
        population,
        params,
        key,
        like_bf: a.like_bf,
    })?;
    calc::population::print(&sizing, a.json)?;
    Ok(())
}
