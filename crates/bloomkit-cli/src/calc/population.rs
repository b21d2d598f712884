//! `bloomkit calc --xf --population FILE` (or `--population-range LO..HI
//! --keys N`): many expandable filters at once, one per key, as a
//! per-user flow keeps them. What one filter costs at each size comes from
//! the same simulation as `calc --xf` ([`super::xf`]); what a *key* costs
//! beside its value (the key's name, its entry in the keyspace, its TTL)
//! was measured on each server, because for keys of a few items it is a
//! third of the total and nothing in XF.INFO shows it (issue 51: a sum of
//! calc's figures came out 140 bytes a key short of used_memory).
//!
//! With `--like-bf RATE:CAPACITY` it also sizes the flow being replaced
//! (`BF.RESERVE key RATE CAPACITY` per key) and finds the XF rate whose
//! false positives, averaged over the same keys, are the old flow's: an
//! oversized Bloom filter holding a few items answers far below its
//! nominal rate, and an XF key at the same nominal rate would wrongly hide
//! more fresh items than users were used to.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use bloomkit_core::common::sizing::{options, Shape};
use bloomkit_core::xf::XfParams;
use bloomkit_core::xf::{MAX_ERROR_RATE, MIN_ERROR_RATE};
use serde_json::json;

use super::xf::{simulate, Figure};
use crate::units::human_bytes;

/// The most keys `--population-range` spreads sizes over (one step each).
const MAX_RANGE_KEYS: u64 = 100_000_000;

/// Key sizes (items per key) and how many keys have each, ascending.
#[derive(Clone, Debug, PartialEq)]
pub struct Population {
    pub sizes: Vec<(u64, u64)>,
}

impl Population {
    /// A file of one key's item count per line, or `COUNT KEYS` per line
    /// (that many keys of that count); `#` starts a comment.
    pub fn read(path: &Path) -> Result<Population> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut sizes = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let number = |w: &str| {
                w.parse::<u64>().map_err(|_| {
                    usage!(
                        "{} line {}: '{line}' is not a count of items, or a count and a number of keys \
                         (whole numbers)",
                        path.display(),
                        i + 1
                    )
                })
            };
            match words[..] {
                [count] => sizes.push((number(count)?, 1)),
                [count, keys] => sizes.push((number(count)?, number(keys)?)),
                _ => {
                    return Err(usage!(
                        "{} line {}: expected COUNT or COUNT KEYS, got '{line}'",
                        path.display(),
                        i + 1
                    ))
                }
            }
        }
        Population::new(sizes)
    }

    /// `keys` keys whose sizes spread from `lo` to `hi`, log-uniformly
    /// (most keys small, as per-user keys are) or uniformly: the sizes at
    /// the quantiles `(i + 0.5) / keys`, so the result is exact, not drawn.
    pub fn range(lo: u64, hi: u64, keys: u64, log_uniform: bool) -> Result<Population> {
        if lo == 0 || lo > hi || keys == 0 {
            return Err(usage!("--population-range LO..HI needs 1 <= LO <= HI, and --keys at least 1"));
        }
        if keys > MAX_RANGE_KEYS {
            return Err(usage!(
                "--keys {keys} is more than a range is spread over ({MAX_RANGE_KEYS}); for more keys, give a \
                 file of COUNT KEYS lines (--population)"
            ));
        }
        let (a, b) = (lo as f64, hi as f64);
        let mut sizes: Vec<(u64, u64)> = Vec::new();
        for i in 0..keys {
            let q = (i as f64 + 0.5) / keys as f64;
            let x = if log_uniform { (a.ln() + q * (b.ln() - a.ln())).exp() } else { a + q * (b - a) };
            let n = (x.round() as u64).clamp(lo, hi);
            match sizes.last_mut() {
                Some((last, count)) if *last == n => *count += 1,
                _ => sizes.push((n, 1)),
            }
        }
        Population::new(sizes)
    }

    fn new(mut sizes: Vec<(u64, u64)>) -> Result<Population> {
        sizes.retain(|&(_, keys)| keys > 0);
        if sizes.is_empty() {
            return Err(usage!("the population holds no key"));
        }
        sizes.sort_unstable();
        Ok(Population { sizes })
    }

    pub fn keys(&self) -> u64 {
        self.sizes.iter().fold(0u64, |sum, &(_, k)| sum.saturating_add(k))
    }

    pub fn items(&self) -> u128 {
        self.sizes.iter().map(|&(n, k)| u128::from(n) * u128::from(k)).sum()
    }
}

/// Which server keeps the keys: what a key costs beside its value differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ServerKind {
    // (Plain comments: doc comments would make clap list the values one
    // per line, which --help's conventions do not take for arguments.)
    // Redis 7.0 to 7.4.
    Redis7,
    // Redis 8.
    Redis8,
    // Valkey 8 and 9.
    Valkey,
}

/// What a key costs beside its value, in `used_memory`.
#[derive(Clone, Copy, Debug)]
pub struct KeyCost {
    pub server: ServerKind,
    /// The mean length of the keys' names.
    pub name_bytes: u64,
    pub ttl: bool,
}

impl KeyCost {
    /// Measured with 20,000 XF keys named `seen:user:NNNNNNNN` (18 bytes),
    /// `used_memory` after less before, less the values' XF.INFO sizes
    /// (2026-12-02, redis-server 7.0.15 and 8.2, valkey-server 8.1 and
    /// 9.1; TTL by EXPIRE): Redis 7 111 bytes a key (157 with a TTL),
    /// Redis 8 75 (109), Valkey 8 and 9 101 (134). A key of 32 bytes cost
    /// 16 more on Redis 7 and 14 more on Valkey 9: the name is one
    /// allocation, rounded up to the allocator's size class. The keyspace's
    /// tables are in the figure (about 13 bytes a key at 20,000 keys; 8 to
    /// 16 at other counts, as tables double).
    pub fn bytes(&self) -> u64 {
        let (plain, with_ttl) = match self.server {
            ServerKind::Redis7 => (87, 133),
            ServerKind::Redis8 => (51, 85),
            ServerKind::Valkey => (77, 110),
        };
        (if self.ttl { with_ttl } else { plain }) + size_class(self.name_bytes + 4)
    }
}

/// jemalloc's size class for a small allocation as Redis and Valkey build
/// it (a quantum of 8: 8, 16, 24 ... 64, then four classes per doubling).
fn size_class(n: u64) -> u64 {
    if n <= 64 {
        return n.max(1).div_ceil(8) * 8;
    }
    let step = (1u64 << (63 - (n - 1).leading_zeros())) / 4;
    n.div_ceil(step) * step
}

/// The flow being replaced: `BF.RESERVE key rate capacity` per key.
#[derive(Clone, Copy, Debug)]
pub struct OldFlow {
    pub error_rate: f64,
    pub capacity: u64,
}

impl OldFlow {
    /// What `BF.RESERVE key rate capacity` allocates: its first sub-filter,
    /// sized for `rate / 2` (RedisBloom's sizing, room to scale), as `calc`
    /// prints it; `None` where the server would refuse it.
    pub fn shape(&self) -> Option<Shape> {
        Shape::new(self.capacity, self.error_rate / 2.0, options::DEFAULT)
    }

    /// The sub-filters a key of `n` items has: the first, then one of twice
    /// the capacity and half the rate each time the last fills (RedisBloom's
    /// EXPANSION 2); with how many items each holds.
    fn layers(&self, n: u64) -> Vec<(Shape, u64)> {
        let mut layers = Vec::new();
        let (mut left, mut capacity, mut error) = (n, self.capacity, self.error_rate / 2.0);
        while let Some(shape) = Shape::new(capacity, error, options::DEFAULT) {
            let held = left.min(capacity);
            layers.push((shape, held));
            left -= held;
            if left == 0 || layers.len() >= 64 {
                break;
            }
            (capacity, error) = (capacity.saturating_mul(2), error / 2.0);
        }
        layers
    }

    /// Its false-positive rate holding `n` items: a miss in every
    /// sub-filter, each `(1 - e^(-kn/m))^k` at what it holds.
    fn rate_at(&self, n: u64) -> f64 {
        let miss: f64 = self
            .layers(n)
            .iter()
            .map(|(s, held)| {
                let k = f64::from(s.hashes);
                1.0 - (1.0 - (-k * *held as f64 / s.bits as f64).exp()).powf(k)
            })
            .product();
        1.0 - miss
    }

    /// Bytes of one key of `n` items: each sub-filter's bit array as the
    /// allocator rounds it, and its own fields (164,008 bytes of MEMORY
    /// USAGE for 0.01 and 100,000, against 163,840 + 64 here and the key's
    /// own 119).
    fn value_bytes(&self, n: u64) -> f64 {
        self.layers(n).iter().map(|(s, _)| (size_class(s.bytes) + 64) as f64).sum()
    }
}

/// What was asked.
pub struct PopulationInputs {
    pub population: Population,
    pub params: XfParams,
    pub key: KeyCost,
    pub like_bf: Option<OldFlow>,
}

/// The whole population under one XF rate.
#[derive(Clone, Copy, Debug)]
pub struct Totals {
    pub error_rate: f64,
    pub value_bytes: f64,
    pub key_bytes: f64,
    /// The mean over keys of each key's rate at its size (XF.INFO's
    /// `Guaranteed rate`: what an absent item meets, within a few percent).
    pub mean_rate: f64,
    pub worst_rate: f64,
}

pub struct PopulationSizing {
    pub inputs: PopulationInputs,
    pub xf: Totals,
    /// The old flow's totals, and the XF rate that matches its false positives.
    pub old: Option<(Totals, Totals)>,
}

/// Sizes every key at `params`' rate.
fn totals(pop: &Population, params: XfParams, key: KeyCost) -> Totals {
    let points: Vec<u64> = pop.sizes.iter().map(|&(n, _)| n.max(1)).collect();
    let run = simulate(params, &points, f64::INFINITY, false);
    let at = |n: u64| -> Figure {
        let i = run.figures.partition_point(|f| f.items < n.max(1));
        run.figures[i.min(run.figures.len() - 1)]
    };
    let (mut value_bytes, mut rates, mut worst) = (0.0, 0.0, 0.0f64);
    for &(n, keys) in &pop.sizes {
        let f = if n == 0 {
            Figure { items: 0, bytes: run.empty, range: None, guaranteed_rate: 0.0 }
        } else {
            at(n)
        };
        value_bytes += f.bytes * keys as f64;
        rates += f.guaranteed_rate * keys as f64;
        worst = worst.max(f.guaranteed_rate);
    }
    let keys = pop.keys() as f64;
    Totals {
        error_rate: params.error_rate,
        value_bytes,
        key_bytes: key.bytes() as f64 * keys,
        mean_rate: rates / keys,
        worst_rate: worst,
    }
}

/// The old flow's totals.
fn old_totals(pop: &Population, old: OldFlow, key: KeyCost) -> Totals {
    let keys = pop.keys() as f64;
    let rates: f64 = pop.sizes.iter().map(|&(n, k)| old.rate_at(n) * k as f64).sum();
    let worst = pop.sizes.iter().map(|&(n, _)| old.rate_at(n)).fold(0.0, f64::max);
    Totals {
        error_rate: old.error_rate,
        value_bytes: pop.sizes.iter().map(|&(n, k)| old.value_bytes(n) * k as f64).sum(),
        key_bytes: key.bytes() as f64 * keys,
        mean_rate: rates / keys,
        worst_rate: worst,
    }
}

pub fn solve(inputs: PopulationInputs) -> Result<PopulationSizing> {
    let largest = inputs.population.sizes.last().map_or(0, |&(n, _)| n);
    if largest > inputs.params.max_capacity {
        return Err(usage!(
            "a key of {largest} items is above --max-capacity {}: XF refuses items past MAXCAPACITY",
            inputs.params.max_capacity
        ));
    }
    let xf = totals(&inputs.population, inputs.params, inputs.key);
    let old = inputs.like_bf.map(|old| {
        let theirs = old_totals(&inputs.population, old, inputs.key);
        (theirs, matching_rate(&inputs.population, inputs.params, inputs.key, theirs.mean_rate, &xf))
    });
    Ok(PopulationSizing { inputs, xf, old })
}

/// The highest XF rate whose mean rate over the keys is at most `target`
/// (within about 1%). A key's rate follows the configured one nearly in
/// proportion, in steps (a block's fingerprint length is whole), so the
/// first guess scales `start` (the population at the asked rate), a
/// bracket is found by halving or doubling, and it is bisected.
fn matching_rate(pop: &Population, params: XfParams, key: KeyCost, target: f64, start: &Totals) -> Totals {
    let at = |rate: f64| {
        totals(pop, XfParams { error_rate: rate.clamp(MIN_ERROR_RATE, MAX_ERROR_RATE), ..params }, key)
    };
    let guess = at(target * start.error_rate / start.mean_rate.max(f64::MIN_POSITIVE));
    let (mut lo, mut hi) = (guess, None);
    if guess.mean_rate <= target {
        // Up by doubling until one is above.
        while lo.error_rate < MAX_ERROR_RATE {
            let t = at(lo.error_rate * 2.0);
            if t.mean_rate > target {
                hi = Some(t);
                break;
            }
            lo = t;
        }
    } else {
        // Down by halving until one is at or below.
        hi = Some(guess);
        loop {
            let t = at(lo.error_rate / 2.0);
            if t.mean_rate <= target {
                lo = t;
                break;
            }
            if t.error_rate <= MIN_ERROR_RATE {
                // Below what XF's lowest rate gives (a filter reserved for
                // far more items than any key holds): the lowest is nearest.
                return t;
            }
            (lo, hi) = (t, Some(t));
        }
    }
    let Some(mut hi) = hi else { return lo };
    for _ in 0..6 {
        let t = at((lo.error_rate * hi.error_rate).sqrt());
        if t.mean_rate <= target {
            lo = t;
        } else {
            hi = t;
        }
    }
    lo
}

fn totals_json(t: &Totals) -> serde_json::Value {
    json!({
        "error_rate": t.error_rate, "value_bytes": t.value_bytes.round() as u64,
        "key_bytes": t.key_bytes.round() as u64, "total_bytes": (t.value_bytes + t.key_bytes).round() as u64,
        "mean_rate": t.mean_rate, "worst_rate": t.worst_rate,
    })
}

fn sizing_json(s: &PopulationSizing) -> serde_json::Value {
    let pop = &s.inputs.population;
    let mut v = json!({
        "kind": "xf-population", "keys": pop.keys(), "items": pop.items() as f64,
        "key_overhead_bytes": s.inputs.key.bytes(), "xf": totals_json(&s.xf),
    });
    if let Some((old, matching)) = &s.old {
        v["like_bf"] = totals_json(old);
        v["like_bf"]["capacity"] = json!(s.inputs.like_bf.map(|o| o.capacity));
        v["matching_xf"] = totals_json(matching);
        v["matching_xf"]["matched"] = json!(matching.mean_rate <= old.mean_rate * 1.0001);
    }
    v
}

pub fn print(s: &PopulationSizing, as_json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let (pop, key) = (&s.inputs.population, s.inputs.key);
    let keys = pop.keys();
    if as_json {
        writeln!(out, "{}", sizing_json(s))?;
        return out.flush();
    }
    let (least, most) = (pop.sizes[0].0, pop.sizes[pop.sizes.len() - 1].0);
    let mut rows: Vec<(String, String)> = vec![(
        "population".into(),
        format!("{keys} keys, {} items ({least} to {most} per key)", pop.items()),
    )];
    let server = match key.server {
        ServerKind::Redis7 => "Redis 7",
        ServerKind::Redis8 => "Redis 8",
        ServerKind::Valkey => "Valkey 8/9",
    };
    let ttl = if key.ttl { "with a TTL" } else { "no TTL" };
    rows.push((
        "per key beside it".into(),
        format!(
            "{} B ({server}, {}-byte names, {ttl}: the key, its keyspace entry)",
            key.bytes(),
            key.name_bytes
        ),
    ));
    let block = |label: &str, t: &Totals, rows: &mut Vec<(String, String)>| {
        let total = t.value_bytes + t.key_bytes;
        rows.push((
            label.into(),
            format!(
                "{} in used_memory ({} of values, {} of keys; {:.0} B a key)",
                human_bytes(total),
                human_bytes(t.value_bytes),
                human_bytes(t.key_bytes),
                total / keys as f64
            ),
        ));
        rows.push((
            "  false positives".into(),
            format!("{:.3e} on average over the keys, {:.3e} at worst", t.mean_rate, t.worst_rate),
        ));
    };
    block(&format!("XF at {}", s.xf.error_rate), &s.xf, &mut rows);
    if let (Some((old, matching)), Some(flow)) = (&s.old, s.inputs.like_bf) {
        block(&format!("BF.RESERVE {} {}", flow.error_rate, flow.capacity), old, &mut rows);
        block(&format!("XF at {:.3e}", matching.error_rate), matching, &mut rows);
        let text = if matching.mean_rate <= old.mean_rate * 1.0001 {
            format!(
                "the XF rate whose false positives match the old flow's on these keys: XF.RESERVE key {:.3e} \
                 (or bf.xf-error-rate)",
                matching.error_rate
            )
        } else {
            format!(
                "XF's lowest rate: the old flow's filters are reserved for so many more items than its keys \
                 hold that no XF rate answers as rarely wrong ({:.1e} against {:.1e})",
                matching.mean_rate, old.mean_rate
            )
        };
        rows.push(("  that is".into(), text));
    }
    for (k, v) in rows {
        writeln!(out, "{k:<24} {v}")?;
    }
    writeln!(
        out,
        "\nRates are each key's XF.INFO Guaranteed rate at its size, averaged over the keys (absent items \
         measure within a few percent of it). Memory is within about 5% of used_memory for the server named; \
         --server, --key-bytes and --ttl describe the keys."
    )?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_files_give_the_same_population() {
        let p = Population::range(1, 1000, 10_000, true).unwrap();
        assert_eq!(p.keys(), 10_000);
        assert_eq!(p.sizes[0].0, 1);
        assert_eq!(p.sizes.last().unwrap().0, 1000);
        // Log-uniform: as many keys from 1 to 31 as from 32 to 1000.
        let small: u64 = p.sizes.iter().filter(|s| s.0 < 32).map(|s| s.1).sum();
        assert!((4_700..=5_300).contains(&small), "{small}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sizes");
        std::fs::write(&path, "# count keys\n5 3\n7\n\n5\n").unwrap();
        assert_eq!(Population::read(&path).unwrap().sizes, vec![(5, 1), (5, 3), (7, 1)]);
        std::fs::write(&path, "5 x\n").unwrap();
        assert!(Population::read(&path).unwrap_err().to_string().contains("line 1"));
    }

    #[test]
    fn key_costs_follow_the_name_and_the_ttl() {
        let k = |server, name_bytes, ttl| KeyCost { server, name_bytes, ttl }.bytes();
        assert_eq!(k(ServerKind::Redis7, 18, false), 111);
        assert_eq!(k(ServerKind::Redis7, 18, true), 157);
        assert_eq!(k(ServerKind::Redis7, 32, true), 173);
        assert_eq!(k(ServerKind::Valkey, 18, true), 134);
        assert_eq!(size_class(200), 224);
    }

    #[test]
    fn an_oversized_bloom_filter_is_matched_by_a_lower_xf_rate() {
        let pop = Population::range(1, 1_000, 200, true).unwrap();
        let params = XfParams { error_rate: 0.01, capacity: 100, max_capacity: 1 << 36 };
        let key = KeyCost { server: ServerKind::Redis7, name_bytes: 18, ttl: true };
        let old = OldFlow { error_rate: 0.01, capacity: 2_500 };
        let s = solve(PopulationInputs { population: pop, params, key, like_bf: Some(old) }).unwrap();
        let (theirs, matching) = s.old.unwrap();
        // Reserved for 2,500 and holding at most 1,000: far below 1%.
        assert!(theirs.mean_rate < 1e-4, "{}", theirs.mean_rate);
        assert!(matching.error_rate < 0.01 && matching.mean_rate <= theirs.mean_rate);
        assert!(
            matching.mean_rate >= theirs.mean_rate * 0.9,
            "{} for {}",
            matching.mean_rate,
            theirs.mean_rate
        );
        assert!(matching.value_bytes < theirs.value_bytes / 4.0, "XF still far smaller");
        assert!(s.xf.mean_rate <= 0.01 && s.xf.mean_rate > theirs.mean_rate);
    }
}
