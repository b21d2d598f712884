//! `bloomkit`: size Bloom filters, dedup streams, and move filters between
//! Redis/Valkey servers and files. Output goes to stdout, messages to stderr;
//! errors exit with status 1 (2 for usage errors, 128 + the signal's number
//! when a signal stopped a command after its cleanup: see `interrupt.rs`).
//! Every message goes through [`say!`], which never panics: a closed
//! standard error (`bloomkit dump ... 2>&1 | head`) must not turn a quiet
//! end into a crash; and which never prints a password (`redact.rs`).

// First, so that every module below uses `say!` and `usage!` by name.
#[macro_use]
mod output;

mod calc;
mod cluster;
mod dedup;
mod interrupt;
mod manual;
mod redact;
mod server;
mod units;

use std::fs::File;
use std::io::{self, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bloomkit_client::transfer;
use bloomkit_core::bitmap::BitmapLayout;
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use output::{describe, progress_bar, Scrubbed};

#[derive(Parser)]
#[command(
    name = "bloomkit",
    version,
    propagate_version = true,
    about = "Bloom filters for Redis and Valkey: sizing, stream dedup, dump and restore",
    after_help = server::SERVER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Size a filter: a Bloom filter from any two of capacity, error rate,
    /// bits and hashes; an expandable filter (--xf) or a sliding window
    /// (--window, --window-count) from what its RESERVE takes.
    ///
    /// --xf: an expandable filter's memory at --capacity items (XF.INFO's
    /// Size), the items that fit under --max-bytes, and its growth from one
    /// item on. Its blocks split as they fill, fingerprints lengthen on a
    /// schedule and the allocator rounds each block, so the figures come
    /// from a simulation with the module's own rules (a fraction of the
    /// hash space past 2^18 entries; a fraction of a second up to 10^10
    /// items). They are within 2% of the mean of real filters at every
    /// count measured; up to 5,000 items (at 1%) the blocks are few and a
    /// filter's bytes depend on which of them its items fill first, by the
    /// spread shown (one standard deviation, up to 4%); below the first
    /// split (512 items from the default CAPACITY) they are exact.
    ///
    /// --window / --window-count: a sliding-window filter's slices, hashes,
    /// generations and bytes, exactly as APBF.RESERVE sizes it (APBF.INFO's
    /// Size), allocated whole when it is created.
    Calc(CalcArgs),
    /// Write each input line the first time it is seen.
    Dedup(DedupArgs),
    /// Save a server's filter or sketch to a file, chunk by chunk (any size).
    ///
    /// Every kind of key bloomkit reads: Bloom filters (bloomkit's or
    /// RedisBloom's, BF.SCANDUMP), cuckoo filters (CF.SCANDUMP), expandable
    /// filters (XF, XF.SCANDUMP), sliding-window filters (APBF,
    /// APBF.SCANDUMP), valkey-bloom filters, Count-Min Sketches, Top-K and
    /// t-digests (DUMP, up to 512 MB each), and with --bitmap a bitmap filter
    /// in any --layout (Guava, Redisson, PHP BKDR; --format guava writes
    /// Guava's BloomFilter.writeTo form). restore tells the kind from the file.
    ///
    /// A key with a TTL is dumped with the moment it expires, and restore
    /// gives the key that moment back (--no-ttl leaves it out).
    Dump(DumpArgs),
    /// Load a filter file into a server (LOADCHUNK), staged and checked.
    ///
    /// The file is loaded into a staging key beside KEY, checked (its
    /// checksum, and what the server reports against what the file
    /// describes), then renamed over KEY in one transaction: a failed or
    /// interrupted restore leaves KEY as it was.
    ///
    /// A file dumped from a key with a TTL restores with the same moment of
    /// expiry, so the key keeps the TTL it had left (a file whose key has
    /// expired since is refused; --no-ttl restores it without one).
    Restore(RestoreArgs),
    /// Copy filters and sketches from one server to another.
    ///
    /// Chunk by chunk, through a staging key on the destination, as restore
    /// loads; every kind dump handles. --all finds them with SCAN. Each key
    /// keeps the TTL it has left on the source (--no-ttl: none).
    Copy(CopyArgs),
    /// Describe a server's filter or sketch.
    ///
    /// Its kind and the server's INFO fields (a Bloom filter's sub-filters,
    /// fill and estimated false-positive rate now), and any staging key an
    /// interrupted restore or copy into the key left.
    Info(InfoArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// For bash: mkdir -p ~/.local/share/bash-completion/completions &&
    /// bloomkit completions bash > ~/.local/share/bash-completion/completions/bloomkit
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff): `bloomkit man dedup | man -l -`.
    Man(ManArgs),
}

#[derive(Args)]
struct ManArgs {
    /// The subcommand whose page to print (bloomkit-SUBCOMMAND(1)); without
    /// one, the page of bloomkit itself.
    subcommand: Option<String>,
    /// Write every page (bloomkit.1 and one per subcommand) into this
    /// folder instead, e.g. for /usr/share/man/man1.
    #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
    out_dir: Option<std::path::PathBuf>,
}

#[derive(Args)]
struct CalcArgs {
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

#[derive(Args)]
struct DedupArgs {
    /// Input files; - (or none) is standard input.
    files: Vec<PathBuf>,
    /// Write only the repeats instead of the first sightings.
    #[arg(long, conflicts_with = "count")]
    duplicates: bool,
    /// Print only the counts.
    #[arg(long)]
    count: bool,
    /// Load the filter from FILE if it exists and save it there at the end.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Keep the filter on this server (redis://host:port, host:port, ...)
    /// instead of in process; --redis alone, --key or --bitmap take the
    /// server from $BLOOMKIT_URL, else $REDIS_URL.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    redis: Option<String>,
    /// With --redis: keep the filter in plain Redis bitmaps (Guava-compatible
    /// hashing, or another system's with --layout), for servers that cannot
    /// load a module.
    #[arg(long)]
    bitmap: bool,
    #[command(flatten)]
    layout: LayoutArgs,
    /// The filter's key on the server [default: bloomkit:dedup]; implies
    /// --redis.
    #[arg(long)]
    key: Option<String>,
    /// Lines expected: a Bloom filter sized for them (it grows past it,
    /// keeping the error rate, by adding sub-filters). Without it, dedup
    /// uses an expandable filter (XF), which grows from a small start at
    /// the error rate with no size to guess, in process or, with --redis,
    /// on the server (bloomkit's XF.*; a Bloom filter already in the key is
    /// used as it is). --bitmap and the windows take 10M when it is not given.
    #[arg(long, value_parser = units::parse_count)]
    capacity: Option<f64>,
    /// Chance that a new line is taken for a repeat.
    #[arg(long, default_value_t = 1e-6)]
    error_rate: f64,
    /// Dedup over a sliding window of time (90s, 10m, 2h, 7d): a line is
    /// written again once it was last seen longer ago (it is remembered for
    /// at least the window and forgotten within about twice it). --capacity
    /// is then the most lines (repeats included) that arrive within any one
    /// window, bursts included: a file read in a second is one window. If
    /// more arrive, the oldest are forgotten early, and the summary says so.
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration, conflicts_with = "window_count")]
    window: Option<std::time::Duration>,
    /// Dedup over the last N lines: a line is written again once N lines have
    /// passed since it was last seen.
    #[arg(long, value_name = "N", value_parser = units::parse_count)]
    window_count: Option<f64>,
    /// Dedup on field N (from 1) instead of the whole line.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    field: Option<u64>,
    /// Field separator for --field (one byte).
    #[arg(long, default_value = ",")]
    delimiter: String,
    /// With --redis: shard the filter (an expandable filter, XF) over N
    /// keys {KEY:0} .. {KEY:N-1}, each in its own hash slot. On a Redis
    /// Cluster (found out from the server) dedup always shards, over 12
    /// keys unless given, and sends each batch to every master at once.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    shards: Option<u32>,
}

/// Whose bitmap layout: given with --bitmap, or alone (they imply it).
#[derive(Args)]
struct LayoutArgs {
    /// The bitmap's layout: guava (bloomkit's and Guava's BloomFilter),
    /// guava-unrounded (the Java RedisBloomFilter pattern: Guava's hashing,
    /// bit count not rounded to 64), redisson (Redisson's RBloomFilter with
    /// StringCodec; its config hash {key}:config is written and checked),
    /// redisson-kryo5 (the same with Redisson's default Kryo5Codec),
    /// php-bkdr (the PHP BKDR scheme: give --bits and --hashes).
    #[arg(long, value_name = "LAYOUT", value_parser = parse_layout)]
    layout: Option<BitmapLayout>,
    /// The bitmap's bit count, in place of sizing from --capacity and
    /// --error-rate (with --hashes).
    #[arg(long, value_name = "M", requires = "hashes", value_parser = units::parse_count)]
    bits: Option<f64>,
    /// The bitmap's hash count (with --bits).
    #[arg(long, value_name = "K", requires = "bits")]
    hashes: Option<u32>,
}

impl LayoutArgs {
    fn given(&self) -> bool {
        self.layout.is_some() || self.bits.is_some()
    }

    fn shape(&self) -> Option<(u64, u32)> {
        self.bits.zip(self.hashes).map(|(m, k)| (m as u64, k))
    }
}

fn parse_layout(name: &str) -> Result<BitmapLayout, String> {
    BitmapLayout::from_name(name)
        .ok_or_else(|| format!("unknown layout '{name}'; the layouts are {}", BitmapLayout::names()))
}

/// Bitmap filters hold no parameters: these say how one was made.
#[derive(Args)]
struct BitmapArgs {
    /// The key is a bitmap filter (written by `dedup --bitmap`, the client's
    /// bitmap layouts, or another system's code, see --layout), sized by
    /// --capacity and --error-rate, which must be those it was made with,
    /// or by --bits and --hashes.
    #[arg(long)]
    bitmap: bool,
    #[command(flatten)]
    layout: LayoutArgs,
    /// With --bitmap: the capacity the bitmap filter was made with [default: 10M].
    #[arg(long, value_parser = units::parse_count)]
    capacity: Option<f64>,
    /// With --bitmap: the error rate the bitmap filter was made with [default: 1e-6].
    #[arg(long, value_parser = units::parse_rate)]
    error_rate: Option<f64>,
}

/// A file format for `dump` and `restore`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// bloomkit's own files, for every kind of filter (restore tells which from the file).
    Bloomkit,
    /// Guava's `BloomFilter.writeTo` form, for bitmaps in the guava layout.
    Guava,
}

#[derive(Args)]
struct DumpArgs {
    /// The server: redis://host:port[/db], host:port, host or :port
    /// [default: $BLOOMKIT_URL, else $REDIS_URL].
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// The key: a Bloom filter, a cuckoo filter, an expandable filter (XF),
    /// a sliding-window filter (APBF), a valkey-bloom filter, a Count-Min
    /// Sketch, a Top-K, a t-digest, or with --bitmap a bitmap filter.
    key: String,
    /// Output file; - (or none, when standard output is not a terminal) is
    /// standard output. A file is written beside its name and renamed into
    /// place when complete, so an interrupted dump leaves no partial file.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The file's format: guava writes what Guava's BloomFilter.readFrom
    /// reads (a guava-layout bitmap, given with --bitmap).
    #[arg(long, value_enum, default_value_t = Format::Bloomkit)]
    format: Format,
    /// Leave the key's TTL out of the file. By default a key with a TTL is
    /// dumped with the moment it expires, which restore gives the key back
    /// (Guava's format has no place for it).
    #[arg(long)]
    no_ttl: bool,
    #[command(flatten)]
    bitmap: BitmapArgs,
}

#[derive(Args)]
struct RestoreArgs {
    /// The server: redis://host:port[/db], host:port, host or :port
    /// [default: $BLOOMKIT_URL, else $REDIS_URL].
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// The key to restore into; the file says what kind of filter it holds.
    key: String,
    /// Input file; - (or none) is standard input.
    #[arg(short, long, value_name = "FILE")]
    input: Option<PathBuf>,
    /// The file's format: guava reads what Guava's BloomFilter.writeTo
    /// wrote (items as UTF-8 strings) into a guava-layout bitmap.
    #[arg(long, value_enum, default_value_t = Format::Bloomkit)]
    format: Format,
    /// Overwrite an existing key.
    #[arg(long)]
    replace: bool,
    /// Restore the key without a TTL. By default a file dumped from a key
    /// with a TTL restores with the same moment of expiry (the TTL left
    /// now), and a file whose key has expired since is refused; files
    /// without one, older bloomkit's included, restore without a TTL.
    #[arg(long)]
    no_ttl: bool,
}

#[derive(Args)]
struct CopyArgs {
    /// The source server (redis://host:port[/db], host:port, ...).
    #[arg(long, value_name = "URL")]
    from: String,
    /// The destination server (redis://host:port[/db], host:port, ...)
    /// [default: $BLOOMKIT_URL, else $REDIS_URL].
    #[arg(long, value_name = "URL")]
    to: Option<String>,
    /// The keys to copy; each keeps its name.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    keys: Vec<String>,
    /// Copy every filter and sketch on the source (every key of a Bloom,
    /// cuckoo, sliding-window, expandable (XF), valkey-bloom, Count-Min
    /// Sketch, Top-K or t-digest type), found with SCAN; other keys are
    /// left alone.
    #[arg(long)]
    all: bool,
    /// With --all: only keys matching this SCAN MATCH pattern.
    #[arg(long, value_name = "PATTERN", requires = "all", default_value = "*")]
    r#match: String,
    /// Each KEY names a filter sharded over N keys {KEY:0} .. {KEY:N-1}
    /// (as `dedup --shards` and the client's Layout::sharded make): copy
    /// those. Either server may be a Redis Cluster, found out from it: a
    /// key is read from and written to the master that serves its slot,
    /// so a sharded filter moves between clusters, or to one server, where
    /// `info --shards` and `dedup --shards` read it.
    #[arg(long, value_name = "N", conflicts_with = "all", value_parser = clap::value_parser!(u32).range(1..))]
    shards: Option<u32>,
    /// Overwrite existing keys on the destination.
    #[arg(long)]
    replace: bool,
    /// Copy keys without their TTLs. By default each key keeps the TTL it
    /// has left on the source.
    #[arg(long)]
    no_ttl: bool,
    #[command(flatten)]
    bitmap: BitmapArgs,
}

#[derive(Args)]
struct InfoArgs {
    /// The server: redis://host:port[/db], host:port, host or :port
    /// [default: $BLOOMKIT_URL, else $REDIS_URL].
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// The filter's key.
    key: String,
    /// JSON output (one object).
    #[arg(long)]
    json: bool,
    /// The key names a filter sharded over N keys {KEY:0} .. {KEY:N-1}
    /// (as `dedup --shards` and the client's Layout::sharded make): each
    /// shard's figures, read on the node that serves it on a cluster, and
    /// the whole filter's.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    shards: Option<u32>,
    #[command(flatten)]
    bitmap: BitmapArgs,
}

/// `copy --all` between two single servers: the small module values first,
/// a batch of keys per three round trips (`transfer::copy_small_keys`),
/// with a bar of keys and one summary line; how many were copied, and the
/// keys left for the key-by-key copy (large values, and whatever the
/// destination refused: that copy then says why).
fn copy_small_first(
    from: &mut cluster::Place,
    to: &mut cluster::Place,
    keys: &[String],
    replace: bool,
) -> Result<(usize, Vec<String>)> {
    let (cluster::Place::Single(source), cluster::Place::Single(dest)) = (from, to) else {
        return Ok((0, keys.to_vec()));
    };
    let bar =
        if io::stderr().is_terminal() { ProgressBar::new(keys.len() as u64) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("small keys [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
            .expect("valid template"),
    );
    let mut rest = Vec::new();
    let mut copied = 0;
    for batch in keys.chunks(transfer::MANY_BATCH * 8) {
        let done = match transfer::copy_small_keys(source, dest, batch, replace) {
            Ok(done) => done,
            Err(_) if interrupt::interrupted() => {
                return Err(interrupt::Stopped(format!(
                    "bloomkit copy: interrupted; {copied} of {} copied whole before it (each is complete: no \
                     staging key is used for them)",
                    keys.len()
                ))
                .into())
            }
            Err(e) => return Err(e.into()),
        };
        for (key, done) in batch.iter().zip(done) {
            match done {
                Some(_) => copied += 1,
                None => rest.push(key.clone()),
            }
        }
        bar.inc(batch.len() as u64);
    }
    bar.finish_and_clear();
    say!(
        "bloomkit copy: {} copied whole (DUMP and RESTORE, TTLs kept); {} key by key",
        units::plural(copied as u64, "small key", "small keys"),
        rest.len()
    );
    Ok((copied, rest))
}

/// `calc --xf --population FILE` or `--population-range LO..HI --keys N`.
fn calc_population(a: &CalcArgs) -> Result<()> {
    if !a.xf {
        return Err(usage!("--population and --population-range size expandable filters: add --xf"));
    }
    if a.n.is_some() {
        return Err(usage!("a population gives each key's items: leave out --capacity"));
    }
    if a.max_bytes.is_some() {
        return Err(usage!("--max-bytes is one filter's limit: a population is sized whole, without it"));
    }
    let population = match (&a.population, a.population_range, a.keys) {
        (Some(file), None, None) => calc::population::Population::read(file)?,
        (None, Some((lo, hi)), Some(keys)) => {
            calc::population::Population::range(lo, hi, keys as u64, a.shape == Shape::LogUniform)?
        }
        (Some(_), _, Some(_)) => {
            return Err(usage!("--keys goes with --population-range; a file lists its keys"))
        }
        _ => return Err(usage!("--population-range needs --keys (how many keys)")),
    };
    let inputs = calc::xf::XfInputs {
        error_rate: a.p.unwrap_or(bloomkit_core::xf::DEFAULT_ERROR_RATE),
        start_capacity: a.start_capacity.map_or(bloomkit_core::xf::DEFAULT_CAPACITY, |c| c as u64),
        max_capacity: a.max_capacity.map_or(bloomkit_core::xf::DEFAULT_MAX_CAPACITY, |c| c as u64),
        max_bytes: calc::xf::MAX_FILTER_BYTES,
        items: None,
    };
    inputs.check()?;
    let params = bloomkit_core::xf::filter::XfParams {
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

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Calc(a) => {
            let window = a.window.is_some() || a.window_count.is_some();
            if a.xf || window {
                let what = if a.xf { "an expandable filter (--xf)" } else { "a sliding-window filter" };
                if a.m.is_some() || a.k.is_some() || a.table {
                    return Err(usage!(
                        "--bits, --hashes and --table shape a Bloom filter; {what} is sized from --capacity \
                         and --error-rate (its memory limit: --max-bytes)"
                    ));
                }
                if a.xf && window {
                    return Err(usage!("--xf and --window/--window-count size different filters: give one"));
                }
            } else if a.max_bytes.is_some() {
                return Err(usage!("--max-bytes is the limit of --xf and --window/--window-count sizings"));
            }
            if !a.xf && (a.start_capacity.is_some() || a.max_capacity.is_some()) {
                return Err(usage!(
                    "--start-capacity and --max-capacity size an expandable filter: add --xf"
                ));
            }
            let max_bytes = a.max_bytes.map_or(calc::xf::MAX_FILTER_BYTES, |b| b.ceil() as u64);
            if a.population.is_some() || a.population_range.is_some() {
                return calc_population(&a);
            }
            if a.keys.is_some() || a.like_bf.is_some() || a.ttl {
                return Err(usage!(
                    "--keys, --like-bf and --ttl size a population of keys: give --population FILE or \
                     --population-range LO..HI (with --xf)"
                ));
            }
            if a.xf {
                let sizing = calc::xf::solve(calc::xf::XfInputs {
                    error_rate: a.p.unwrap_or(bloomkit_core::xf::DEFAULT_ERROR_RATE),
                    start_capacity: a
                        .start_capacity
                        .map_or(bloomkit_core::xf::DEFAULT_CAPACITY, |c| c as u64),
                    max_capacity: a
                        .max_capacity
                        .map_or(bloomkit_core::xf::DEFAULT_MAX_CAPACITY, |c| c as u64),
                    max_bytes,
                    items: a.n.map(|n| n as u64),
                })?;
                calc::xf::print(&sizing, a.json)?;
            } else if window {
                let capacity = match (a.window_count, a.n) {
                    (Some(_), Some(_)) => {
                        return Err(usage!(
                        "--window-count N is the window's capacity (its last N adds): leave out --capacity"
                    ))
                    }
                    (Some(c), None) | (None, Some(c)) => c as u64,
                    (None, None) => {
                        return Err(usage!(
                            "--window needs --capacity: the most adds within any one window, bursts included"
                        ))
                    }
                };
                let error_rate = a.p.ok_or_else(|| {
                    usage!("a sliding-window filter needs --error-rate (APBF.RESERVE has no default rate)")
                })?;
                let sizing = calc::window::solve(calc::window::WindowInputs {
                    error_rate,
                    capacity,
                    seconds: a.window.map(|t| t.as_millis().div_ceil(1000).max(1) as u64),
                    max_bytes,
                })?;
                calc::window::print(&sizing, a.json)?;
            } else if a.table {
                let n = a.n.ok_or_else(|| usage!("--table needs --capacity"))?;
                if let Some(b) = a.bits_per_item.iter().find(|b| !(**b > 0.0 && b.is_finite())) {
                    return Err(usage!("--bits-per-item takes positive numbers, got {b}"));
                }
                if let Some(k) = a.table_hashes.iter().find(|k| !(**k >= 1.0 && k.fract() == 0.0)) {
                    return Err(usage!("--table-hashes takes whole numbers of at least 1, got {k}"));
                }
                calc::table(n, &a.bits_per_item, &a.table_hashes, a.json)?;
            } else {
                let sizing = calc::solve(&calc::Inputs { n: a.n, p: a.p, m: a.m, k: a.k })?;
                calc::print(&sizing, a.json)?;
            }
        }
        Command::Dedup(a) => {
            let delimiter = match a.delimiter.as_bytes() {
                [b] => *b,
                b"\\t" => b'\t',
                _ => return Err(usage!("--delimiter must be one byte (or \\t), got '{}'", a.delimiter)),
            };
            if !(a.error_rate > 0.0 && a.error_rate < 1.0) {
                return Err(usage!("--error-rate must be strictly between 0 and 1, got {}", a.error_rate));
            }
            let bitmap = a.bitmap || a.layout.given();
            // A server is used when asked for: --redis, or an option that
            // only means something on one.
            let redis = match (a.redis.as_deref(), a.key.is_some() || bitmap) {
                (Some(""), _) | (None, true) => Some(server::resolve(None, "--redis")?),
                // (--redis takes an optional value: `--redis FILE` would
                // take the file for a server.)
                (Some(url), _) if !url.contains("://") && std::path::Path::new(url).is_file() => {
                    return Err(usage!(
                        "--redis took '{url}' as the server's address, but it is a file here: write the \
                         address after --redis (--redis host:port {url}), or --redis after the files"
                    ))
                }
                (Some(url), _) => Some(server::resolve(Some(url), "--redis")?),
                (None, false) => None,
            };
            if a.state.as_deref().is_some_and(|p| p.as_os_str() == "-") {
                return Err(usage!(
                    "--state needs a file (it is read at the start and replaced at the end), not -"
                ));
            }
            dedup::run(&dedup::Options {
                inputs: a.files,
                duplicates: a.duplicates,
                count_only: a.count,
                state: a.state,
                redis,
                bitmap,
                layout: a.layout.layout.unwrap_or(BitmapLayout::Guava),
                shape: a.layout.shape(),
                key: a.key.unwrap_or_else(|| "bloomkit:dedup".to_string()),
                window: match (a.window, a.window_count) {
                    (Some(d), _) => Some(bloomkit_client::Window::Time(d)),
                    (None, Some(_)) => Some(bloomkit_client::Window::Count),
                    (None, None) => None,
                },
                capacity: a.window_count.or(a.capacity).map(|c| c as u64),
                error_rate: a.error_rate,
                field: a.field.map(|f| f as usize),
                delimiter,
                shards: a.shards,
            })?;
        }
        Command::Dump(a) => {
            let to_stdout = a.output.as_deref().is_none_or(|p| p.as_os_str() == "-");
            if to_stdout && io::stdout().is_terminal() {
                return Err(usage!("the dump is binary: give -o FILE or redirect standard output"));
            }
            let bitmap = bitmap_params(&a.bitmap)?;
            if a.format == Format::Guava && bitmap.is_none() {
                return Err(usage!(
                    "--format guava writes a bitmap filter: add --bitmap with its parameters"
                ));
            }
            let flag = interrupt::install();
            let mut server = transfer::Server::connect(&server::resolve(a.redis.as_deref(), "--redis")?)?;
            server.interrupt_on(flag);
            if a.no_ttl {
                server.drop_ttls();
            }
            let key = a.key.clone();
            let format = a.format;
            let dump_to = |server: &mut transfer::Server, out: &mut dyn Write, bar: &ProgressBar| match (
                format, bitmap,
            ) {
                (Format::Guava, Some(b)) => transfer::dump_guava(server, &key, &b, out, &server::Bar(bar))
                    .map(|_| "Guava BloomFilter"),
                _ => transfer::dump_key(server, &key, bitmap, out, &server::Bar(bar)),
            };
            let bar = progress_bar("dump");
            let started = Instant::now();
            let mut kind = "";
            let written = match a.output.as_ref().filter(|_| !to_stdout) {
                Some(path) => {
                    // Written beside the target and renamed, so a failed or
                    // interrupted dump leaves no partial file.
                    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
                    for stale in stale_partial_dumps(path) {
                        match std::fs::remove_file(&stale) {
                            Ok(()) => say!(
                                "bloomkit dump: removed {}, which an interrupted dump to {} had left",
                                stale.display(),
                                path.display()
                            ),
                            Err(e) => say!("bloomkit dump: warning: cannot remove {}: {e}", stale.display()),
                        }
                    }
                    interrupt::set_unfinished(format!(
                        "the partial dump {} may be left: delete it",
                        tmp.display()
                    ));
                    let result = (|| -> Result<u64> {
                        let f =
                            File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
                        let mut w = BufWriter::with_capacity(1 << 20, f);
                        kind = dump_to(&mut server, &mut w, &bar)?;
                        let f = w.into_inner().map_err(|e| e.into_error())?;
                        f.sync_all()?;
                        let len = f.metadata()?.len();
                        if interrupt::interrupted() {
                            return Err(bloomkit_client::Error::Interrupted.into());
                        }
                        std::fs::rename(&tmp, path).with_context(|| {
                            format!("cannot rename {} to {}", tmp.display(), path.display())
                        })?;
                        Ok(len)
                    })();
                    if result.is_err() {
                        let _ = std::fs::remove_file(&tmp);
                    }
                    interrupt::set_unfinished("");
                    bar.finish_and_clear();
                    if result.is_err() && interrupt::interrupted() {
                        return Err(interrupt::Stopped(format!(
                            "bloomkit dump: interrupted; the partial file was removed and {} was not written",
                            path.display()
                        ))
                        .into());
                    }
                    result?
                }
                None => {
                    let mut out = CountingWriter(BufWriter::with_capacity(1 << 20, io::stdout().lock()), 0);
                    let result = dump_to(&mut server, &mut out, &bar).map_err(anyhow::Error::from);
                    bar.finish_and_clear();
                    if result.is_err() && interrupt::interrupted() {
                        let _ = out.flush();
                        return Err(interrupt::Stopped(
                            "bloomkit dump: interrupted; what went to standard output is incomplete".into(),
                        )
                        .into());
                    }
                    kind = result?;
                    out.flush()?;
                    out.1
                }
            };
            bar.finish_and_clear();
            let to = match &a.output {
                Some(p) if !to_stdout => p.display().to_string(),
                _ => "standard output".to_string(),
            };
            say!(
                "bloomkit dump: '{}' ({}) to {to}: {} in {:.1}s{}",
                a.key,
                kind,
                units::human_bytes_exact(written as f64),
                started.elapsed().as_secs_f64(),
                ttl_note(&mut server, &a.key, a.format == Format::Guava, a.no_ttl)
            );
        }
        Command::Restore(a) => {
            let flag = interrupt::install();
            let url = server::resolve(a.redis.as_deref(), "--redis")?;
            let bar = progress_bar("restore");
            let started = Instant::now();
            let from_stdin = a.input.as_deref().is_none_or(|p| p.as_os_str() == "-");
            let (input, from): (Box<dyn Read>, String) = match a.input.as_ref().filter(|_| !from_stdin) {
                Some(path) => (
                    Box::new(BufReader::with_capacity(
                        1 << 20,
                        File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
                    )),
                    path.display().to_string(),
                ),
                None => {
                    if io::stdin().is_terminal() {
                        say!(
                            "bloomkit restore: reading the filter file from standard input, which is a \
                             terminal: give -i FILE or redirect a file in (Ctrl-C to stop)"
                        );
                    }
                    (Box::new(StdinReader::spawn()), "standard input".to_string())
                }
            };
            // (Connected after the input is opened: the hint above comes first.)
            let mut server = transfer::Server::connect(&url)?;
            server.interrupt_on(flag);
            if a.no_ttl {
                server.drop_ttls();
            }
            interrupt::set_unfinished(format!(
                "a staging key for '{}' may be left on {}: the next restore or copy of that key removes \
                 it, and `bloomkit info` shows it",
                a.key, server.url
            ));
            let kind = match a.format {
                Format::Bloomkit => {
                    transfer::restore_file(&mut server, &a.key, input, a.replace, &server::Bar(&bar))
                        .map(String::from)
                }
                Format::Guava => {
                    transfer::restore_guava(&mut server, &a.key, input, a.replace, &server::Bar(&bar)).map(
                        |spec| {
                            format!(
                            "Guava BloomFilter as a guava-layout bitmap of {} bits and {} hashes: open it \
                             with --bitmap --bits {} --hashes {}",
                            spec.shape.bits, spec.shape.hashes, spec.shape.bits, spec.shape.hashes
                        )
                        },
                    )
                }
            };
            interrupt::set_unfinished("");
            bar.finish_and_clear();
            report_leftovers("restore", &mut server);
            // (Stopped while reading, the error is the input's.)
            if kind.is_err() && interrupt::interrupted() {
                return Err(interrupt::Stopped(format!(
                    "bloomkit restore: interrupted; the staging key was removed and '{}' on {} is as it was",
                    a.key, server.url
                ))
                .into());
            }
            let kind = kind.with_context(|| format!("restoring {from} into '{}'", a.key))?;
            let ttl = match server.last_ttl() {
                Some(ttl) => format!(", expires in {}", units::human_ttl(ttl)),
                None => String::new(),
            };
            say!(
                "bloomkit restore: {from} into '{}' ({kind}) in {:.1}s{ttl}",
                a.key,
                started.elapsed().as_secs_f64()
            );
        }
        Command::Copy(a) => {
            let flag = interrupt::install();
            let to_url = server::resolve(a.to.as_deref(), "--to")?;
            // Either side may be a cluster: each key is then read from, or
            // written to, the master that serves its slot.
            let mut from = cluster::Place::open(&a.from)?;
            let mut to = cluster::Place::open(&to_url)?;
            from.interrupt_on(flag.clone());
            to.interrupt_on(flag);
            if a.no_ttl {
                to.drop_ttls();
            }
            let mut failures = Vec::new();
            let keys = if a.all {
                let (mut keys, mut others) = (Vec::new(), 0);
                for server in from.masters()? {
                    let (mine, theirs) = transfer::module_keys(server, &a.r#match)?;
                    keys.extend(mine);
                    others += theirs;
                }
                say!(
                    "bloomkit copy: {} on {} ({} left alone)",
                    units::plural(keys.len() as u64, "filter or sketch", "filters and sketches"),
                    from.url(),
                    units::plural(others as u64, "other key", "other keys"),
                );
                keys
            } else if let Some(shards) = a.shards {
                a.keys.iter().flat_map(|k| cluster::shard_keys(k, shards)).collect()
            } else {
                a.keys.clone()
            };
            let bitmap = bitmap_params(&a.bitmap)?;
            let (mut copied, rest) = match a.all && bitmap.is_none() {
                true => copy_small_first(&mut from, &mut to, &keys, a.replace)?,
                false => (0, keys.clone()),
            };
            for key in &rest {
                let bar = progress_bar(key);
                let (source, to) = match (from.server_for(key), to.server_for(key)) {
                    (Ok(source), Ok(to)) => (source, to),
                    (Err(e), _) | (_, Err(e)) => {
                        say!("bloomkit copy: {key}: {}", describe(&e));
                        failures.push(key.clone());
                        continue;
                    }
                };
                interrupt::set_unfinished(format!(
                    "a staging key for '{key}' may be left on {}: the next restore or copy of that key \
                     removes it, and `bloomkit info` shows it",
                    to.url
                ));
                let result = transfer::copy_key(source, to, key, bitmap, a.replace, &server::Bar(&bar));
                interrupt::set_unfinished("");
                bar.finish_and_clear();
                report_leftovers("copy", to);
                match result {
                    Ok(kind) => {
                        copied += 1;
                        match to.last_ttl() {
                            Some(ttl) => {
                                say!("bloomkit copy: {key} ({kind}, TTL {}): done", units::human_ttl(ttl))
                            }
                            None => say!("bloomkit copy: {key} ({kind}): done"),
                        }
                    }
                    Err(_) if interrupt::interrupted() => {
                        return Err(interrupt::Stopped(format!(
                            "bloomkit copy: interrupted while copying '{key}'; its staging key was removed and \
                             '{key}' on {} is as it was; {copied} of {} copied before it",
                            to.url,
                            keys.len()
                        ))
                        .into());
                    }
                    Err(e) => {
                        say!("bloomkit copy: {key}: {}", describe(&anyhow::Error::from(e)));
                        failures.push(key.clone());
                    }
                }
            }
            say!("bloomkit copy: {copied} of {} copied", keys.len());
            if !failures.is_empty() {
                bail!("not copied: {}", failures.join(", "));
            }
        }
        Command::Info(a) => {
            let mut place = cluster::Place::open(&server::resolve(a.redis.as_deref(), "--redis")?)?;
            if let Some(shards) = a.shards {
                return sharded_info(&mut place, &a.key, shards, &a.bitmap, a.json);
            }
            let server = place.server_for(&a.key)?;
            let mut info = key_info(server, &a.key, &a.bitmap)?;
            let leftovers = transfer::leftover_staging(server, &a.key)?;
            info["leftover_staging_keys"] = serde_json::json!(leftovers
                .iter()
                .map(|l| serde_json::json!({
                    "key": l.key, "idle_seconds": l.idle_seconds, "ttl_seconds": l.ttl_seconds,
                    "stale": l.is_stale(),
                }))
                .collect::<Vec<_>>());
            print_info(&info, a.json)?;
            for l in leftovers {
                say!(
                    "bloomkit info: '{}' is a staging key an interrupted restore or copy into '{}' left{}; \
                     the next restore or copy of '{}' removes it (its TTL does in {}s), or UNLINK it",
                    l.key,
                    a.key,
                    if l.is_stale() {
                        ""
                    } else {
                        " (or one still running: it was written to in the last seconds)"
                    },
                    a.key,
                    l.ttl_seconds.unwrap_or(0)
                );
            }
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "bloomkit",
                &mut io::stdout(),
            );
        }
        Command::Man(a) => {
            let top = <Cli as clap::CommandFactory>::command();
            match a.out_dir {
                Some(dir) => {
                    for file in manual::write_all(top, &dir)? {
                        say!("bloomkit man: wrote {file}");
                    }
                }
                None => manual::print(top, a.subcommand.as_deref(), &mut io::stdout().lock())?,
            }
        }
    }
    Ok(())
}

/// Standard input read on a thread of its own, so that a signal stops a
/// restore waiting for input (a terminal, a stalled pipe) at once: `read`
/// waits for the next block a short while at a time, and fails once the
/// signal's flag is up. The transfer then removes its staging key.
struct StdinReader {
    blocks: std::sync::mpsc::Receiver<io::Result<Vec<u8>>>,
    block: Vec<u8>,
    at: usize,
    eof: bool,
}

impl StdinReader {
    fn spawn() -> StdinReader {
        let (tx, blocks) = std::sync::mpsc::sync_channel(4);
        std::thread::spawn(move || {
            let mut stdin = io::stdin().lock();
            loop {
                let mut buf = vec![0; 1 << 20];
                match stdin.read(&mut buf) {
                    Ok(0) => {
                        let _ = tx.send(Ok(Vec::new()));
                        return;
                    }
                    Ok(n) => {
                        buf.truncate(n);
                        if tx.send(Ok(buf)).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        StdinReader { blocks, block: Vec::new(), at: 0, eof: false }
    }
}

impl Read for StdinReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.block.len() && !self.eof {
            if interrupt::interrupted() {
                return Err(io::Error::other("interrupted by a signal"));
            }
            match self.blocks.recv_timeout(std::time::Duration::from_millis(100)) {
                Ok(Ok(block)) => {
                    self.eof = block.is_empty();
                    self.block = block;
                    self.at = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => self.eof = true,
            }
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Counts what passes through, for the dump's summary on standard output.
struct CountingWriter<W: Write>(W, u64);

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.0.write(buf)?;
        self.1 += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// What `bloomkit info` says of one key: its kind and its INFO fields.
fn key_info(server: &mut transfer::Server, key: &str, bitmap: &BitmapArgs) -> Result<serde_json::Value> {
    let info = match transfer::kind(server, key)? {
        transfer::Kind::Bloom => bloom_info(server, key)?,
        kind @ (transfer::Kind::Window
        | transfer::Kind::ValkeyBloom
        | transfer::Kind::Cuckoo
        | transfer::Kind::Xf
        | transfer::Kind::Sketch(_)) => {
            let (command, name) = match kind {
                transfer::Kind::Window => ("APBF.INFO", "sliding-window filter"),
                transfer::Kind::Xf => ("XF.INFO", "expandable filter"),
                transfer::Kind::ValkeyBloom => ("BF.INFO", "valkey-bloom filter"),
                transfer::Kind::Sketch(s) => (s.info_command(), s.name()),
                _ => ("CF.INFO", "cuckoo filter"),
            };
            let fields = transfer::info_fields(server, key, command)?;
            let mut v = serde_json::json!({"key": key, "kind": name});
            for (label, value) in fields {
                let name = label.to_lowercase().replace(' ', "_");
                v[name] = value
                    .parse::<i64>()
                    .map(|n| serde_json::json!(n))
                    .or_else(|_| value.parse::<f64>().map(|x| serde_json::json!(x)))
                    .unwrap_or_else(|_| serde_json::json!(value));
            }
            v
        }
        transfer::Kind::String | transfer::Kind::Missing if bitmap_params(bitmap)?.is_some() => {
            let params = bitmap_params(bitmap)?.expect("checked");
            let info = transfer::bitmap_info(server, key, &params)?;
            let rate = info.estimated_error_rate.unwrap_or(0.0);
            serde_json::json!({
                "key": key, "kind": "bitmap filter", "layout": info.layout, "keys": info.keys,
                "capacity": info.capacity, "bits": info.bits, "hashes": info.hashes,
                "bytes": info.bytes, "fill": info.fill, "estimated_items": info.estimated_items,
                "estimated_false_positive_rate": rate,
                "log10_estimated_false_positive_rate": if rate > 0.0 { serde_json::json!(rate.log10()) } else { serde_json::Value::Null },
            })
        }
        transfer::Kind::Missing => {
            // Nothing there, but perhaps what an interrupted
            // transfer into it left.
            let leftovers = transfer::leftover_staging(server, key)?;
            if leftovers.is_empty() {
                return Err(transfer::unreadable(server, key, &transfer::Kind::Missing).into());
            }
            serde_json::json!({"key": key, "kind": "missing"})
        }
        other => return Err(transfer::unreadable(server, key, &other).into()),
    };
    Ok(info)
}

/// `bloomkit info --shards N`: each of a sharded filter's keys ({KEY:0},
/// ...) read on the node that serves it, and the whole filter's figures:
/// items, bytes and capacity summed over the shards, and each rate the
/// largest shard's (an item is looked up in its own shard alone, so the
/// largest bound holds for any item).
fn sharded_info(
    place: &mut cluster::Place,
    key: &str,
    shards: u32,
    bitmap: &BitmapArgs,
    json: bool,
) -> Result<()> {
    const SUMMED: [&str; 7] =
        ["items", "number_of_items_inserted", "size", "bytes", "capacity", "max_capacity", "entries"];
    let mut total = serde_json::Map::new();
    let mut kinds = Vec::new();
    let mut rows = Vec::new();
    let mut missing = 0;
    for shard in cluster::shard_keys(key, shards) {
        let node = match place {
            cluster::Place::Cluster(nodes) => bloomkit_client::redact_url(&nodes.node_for(&shard)?),
            cluster::Place::Single(server) => server.url.clone(),
        };
        let server = place.server_for(&shard)?;
        if !server.exists(&shard)? {
            missing += 1;
            rows.push(serde_json::json!({"key": shard, "node": node, "kind": "missing"}));
            continue;
        }
        let mut info = key_info(server, &shard, bitmap)?;
        for (name, value) in info.as_object().expect("an object") {
            match value {
                serde_json::Value::Number(n) if SUMMED.contains(&name.as_str()) => {
                    let sum = total.get(name).and_then(|v| v.as_u64()).unwrap_or(0) + n.as_u64().unwrap_or(0);
                    total.insert(name.clone(), serde_json::json!(sum));
                }
                serde_json::Value::Number(n) if name.ends_with("rate") && !name.starts_with("log10_") => {
                    let max = total
                        .get(name)
                        .and_then(|v| v.as_f64())
                        .unwrap_or(0.0)
                        .max(n.as_f64().unwrap_or(0.0));
                    total.insert(name.clone(), serde_json::json!(max));
                }
                _ => {}
            }
        }
        if let Some(kind) = info["kind"].as_str() {
            if !kinds.contains(&kind.to_string()) {
                kinds.push(kind.to_string());
            }
        }
        info["node"] = serde_json::json!(node);
        rows.push(info);
    }
    if missing == shards as usize {
        bail!(
            "none of {} on {} exists: '{key}' is not a sharded filter of {shards} shards there (`bloomkit info \
             {key}` without --shards reads one key)",
            cluster::shard_keys(key, shards.min(2)).join(", ") + if shards > 2 { ", ..." } else { "" },
            place.url()
        );
    }
    let mut info = serde_json::Map::new();
    info.insert("key".into(), serde_json::json!(key));
    info.insert("kind".into(), serde_json::json!(format!("sharded {}", kinds.join(" and "))));
    info.insert("shards".into(), serde_json::json!(shards));
    info.insert("missing_shards".into(), serde_json::json!(missing));
    info.insert("cluster".into(), serde_json::json!(place.is_cluster()));
    info.extend(total);
    if json {
        info.insert("per_shard".into(), serde_json::Value::Array(rows));
        return Ok(print_info(&serde_json::Value::Object(info), true)?);
    }
    print_info(&serde_json::Value::Object(info), false)?;
    let mut out = Scrubbed(io::stdout().lock());
    writeln!(out)?;
    writeln!(out, "{:<20} {:<28} {:>14} {:>12} {:>12}", "shard", "node", "items", "bytes", "rate")?;
    for row in rows {
        let field = |names: &[&str]| names.iter().find_map(|n| row.get(*n)).cloned();
        let items = field(&["items", "number_of_items_inserted"]).map_or("-".into(), |v| v.to_string());
        let bytes = field(&["size", "bytes"])
            .and_then(|v| v.as_u64())
            .map_or("-".into(), |b| units::human_bytes_exact(b as f64));
        let rate = field(&["guaranteed_rate", "estimated_false_positive_rate"])
            .and_then(|v| v.as_f64())
            .map_or("-".into(), |r| format!("{r:.6}"));
        let node = row["node"].as_str().unwrap_or("");
        writeln!(
            out,
            "{:<20} {:<28} {items:>14} {bytes:>12} {rate:>12}",
            row["key"].as_str().unwrap_or(""),
            node
        )?;
    }
    out.flush()?;
    Ok(())
}

/// The bitmap parameters given on the command line, if `--bitmap` (or a
/// layout option) was.
fn bitmap_params(b: &BitmapArgs) -> Result<Option<transfer::BitmapParams>> {
    if !b.bitmap && !b.layout.given() {
        if b.capacity.is_some() || b.error_rate.is_some() {
            return Err(usage!("--capacity and --error-rate describe a bitmap filter: add --bitmap"));
        }
        return Ok(None);
    }
    let error_rate = b.error_rate.unwrap_or(1e-6);
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(usage!("--error-rate must be strictly between 0 and 1, got {error_rate}"));
    }
    Ok(Some(transfer::BitmapParams {
        layout: b.layout.layout.unwrap_or(BitmapLayout::Guava),
        capacity: b.capacity.unwrap_or(1e7) as u64,
        error_rate,
        shape: b.layout.shape(),
    }))
}

/// A Bloom filter's description: totals, the estimated rate now, and each sub-filter.
fn bloom_info(server: &mut transfer::Server, key: &str) -> Result<serde_json::Value> {
    let (items, subs) = transfer::describe(server, key)?;
    let rate = transfer::log10_estimated_rate(&subs);
    let subs: Vec<serde_json::Value> = subs
        .iter()
        .map(|s| {
            serde_json::json!({
                "capacity": s.capacity, "items": s.items, "bytes": s.bytes, "hashes": s.hashes,
                "error_rate": s.error,
            })
        })
        .collect();
    Ok(serde_json::json!({
        "key": key,
        "kind": "Bloom filter",
        "items": items,
        "capacity": subs.iter().map(|s| s["capacity"].as_u64().unwrap_or(0)).sum::<u64>(),
        "bytes": subs.iter().map(|s| s["bytes"].as_u64().unwrap_or(0)).sum::<u64>(),
        "filters": subs.len(),
        "estimated_false_positive_rate": 10f64.powf(rate),
        "log10_estimated_false_positive_rate": if rate.is_finite() { serde_json::json!(rate) } else { serde_json::Value::Null },
        "sub_filters": subs,
    }))
}

/// `info`: the JSON object, or the same as aligned text (byte counts
/// with a human size beside them; JSON keeps the exact integer).
fn print_info(info: &serde_json::Value, json: bool) -> io::Result<()> {
    let mut out = Scrubbed(io::stdout().lock());
    if json {
        writeln!(out, "{info}")?;
        return out.flush();
    }
    let obj = info.as_object().expect("an object");
    for (name, value) in obj {
        if name == "sub_filters" || name.starts_with("log10_") || name == "leftover_staging_keys" {
            continue;
        }
        // Byte counts for people, with the exact count beside them: a Bloom
        // filter's `bytes`, and the `Size` (`Memory usage` for a t-digest)
        // that XF.INFO, APBF.INFO, CF.INFO and valkey-bloom's BF.INFO give.
        let is_bytes = matches!(name.as_str(), "bytes" | "size" | "memory_usage") || name.ends_with("_bytes");
        if let (true, Some(bytes)) = (is_bytes, value.as_u64()) {
            writeln!(out, "{:<32} {}", name.replace('_', " "), units::human_bytes_exact(bytes as f64))?;
            continue;
        }
        if name == "estimated_false_positive_rate" {
            let log10 = obj
                .get("log10_estimated_false_positive_rate")
                .and_then(|v| v.as_f64())
                .unwrap_or(f64::NEG_INFINITY);
            writeln!(out, "{:<32} {}", name.replace('_', " "), units::format_rate(log10))?;
            continue;
        }
        let text = match value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(a) => {
                a.iter().map(|v| v.as_str().map_or(v.to_string(), String::from)).collect::<Vec<_>>().join(" ")
            }
            other => other.to_string(),
        };
        writeln!(out, "{:<32} {text}", name.replace('_', " "))?;
    }
    if let Some(subs) = obj.get("sub_filters").and_then(|s| s.as_array()) {
        writeln!(out)?;
        writeln!(
            out,
            "{:>3} {:>12} {:>12} {:>6} {:>12} {:>7} {:>10}",
            "#", "capacity", "items", "fill", "bytes", "hashes", "error"
        )?;
        for (i, s) in subs.iter().enumerate() {
            let n = |f: &str| s[f].as_u64().unwrap_or(0);
            writeln!(
                out,
                "{:>3} {:>12} {:>12} {:>5.0}% {:>12} {:>7} {:>10.3e}",
                i + 1,
                n("capacity"),
                n("items"),
                100.0 * n("items") as f64 / n("capacity").max(1) as f64,
                n("bytes"),
                n("hashes"),
                s["error_rate"].as_f64().unwrap_or(0.0)
            )?;
        }
    }
    out.flush()
}

/// The partial files that dumps to `path` killed outright (SIGKILL, a
/// crash) left beside it: `path` with the extension `tmp-<pid>`, whose
/// process is gone (no `/proc/<pid>`; where there is no `/proc`, none are
/// taken for gone).
fn stale_partial_dumps(path: &std::path::Path) -> Vec<PathBuf> {
    if !std::path::Path::new("/proc/self").exists() {
        return Vec::new();
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name.rsplit_once(".tmp-")?.1.parse::<u32>().ok()?;
            let candidate = dir.join(&name);
            let ours = path.with_extension(format!("tmp-{pid}"));
            let same = ours.file_name() == candidate.file_name();
            let gone = !std::path::Path::new(&format!("/proc/{pid}")).exists();
            (same && gone && e.file_type().ok()?.is_file()).then_some(candidate)
        })
        .collect()
}

/// What the dump's summary says of the key's TTL: recorded in the file,
/// left out (`--no-ttl`), or lost to Guava's format, which has no place for
/// it (said so that a daily key does not silently become permanent).
fn ttl_note(server: &mut transfer::Server, key: &str, guava: bool, no_ttl: bool) -> String {
    if guava {
        let ttl: i64 = server.call(redis::cmd("PTTL").arg(key), key).unwrap_or(-1);
        return match ttl {
            ms if ms > 0 => format!(
                "; its TTL ({}) is not in the file: Guava's format has no place for it",
                units::human_ttl(std::time::Duration::from_millis(ms as u64))
            ),
            _ => String::new(),
        };
    }
    match server.last_ttl() {
        Some(ttl) => {
            format!("; expires in {}, recorded in the file (restore gives it back)", units::human_ttl(ttl))
        }
        None if no_ttl => "; no TTL recorded (--no-ttl)".to_string(),
        None => String::new(),
    }
}

/// Says which leftover staging keys (of transfers killed before their
/// cleanup) a transfer found on the destination and removed.
fn report_leftovers(command: &str, server: &mut transfer::Server) {
    for key in server.take_removed_leftovers() {
        say!(
            "bloomkit {command}: removed '{key}' from {}, which an interrupted restore or copy had left",
            server.url
        );
    }
}

/// Whether an error is a closed pipe: output's reader went away
/// (`bloomkit dump | head`), a normal end.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    use bloomkit_core::bf::file::FileError;
    e.chain().any(|c| {
        let io = c.downcast_ref::<io::Error>().or(match c.downcast_ref::<bloomkit_client::Error>() {
            Some(bloomkit_client::Error::File(FileError::Io(io))) => Some(io),
            _ => None,
        });
        io.is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    redact::init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // One style for every error: clap's usage errors get the
            // prefix the CLI's own have ("bloomkit: error: ...").
            let text = redact::scrub(&e.render().to_string());
            let mut stderr = io::stderr().lock();
            let _ = write!(stderr, "bloomkit: {text}");
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A closed pipe (`bloomkit dedup | head`) is a normal end.
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            if let Some(stopped) = e.downcast_ref::<interrupt::Stopped>() {
                say!("{stopped}");
                return ExitCode::from(interrupt::exit_status());
            }
            say!("bloomkit: error: {}", describe(&e));
            // Invalid values, the CLI's own or the library's (a malformed
            // URL, options that describe no filter), are usage errors.
            let invalid = e.chain().any(|c| {
                c.downcast_ref::<output::Usage>().is_some()
                    || matches!(
                        c.downcast_ref::<bloomkit_client::Error>(),
                        Some(
                            bloomkit_client::Error::InvalidOptions(_) | bloomkit_client::Error::InvalidUrl(_)
                        )
                    )
            });
            if invalid {
                return ExitCode::from(2);
            }
            ExitCode::FAILURE
        }
    }
}
