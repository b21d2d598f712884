//! `bloomkit dedup`: its options and their checks (a one-byte delimiter,
//! which server, if any, keeps the filter); the streaming is
//! [`crate::dedup`]'s.

use std::path::PathBuf;

use anyhow::Result;
use bloomkit_core::bitmap::BitmapLayout;
use clap::Args;

use super::LayoutArgs;
use crate::{dedup, server, units};

#[derive(Args)]
pub struct DedupArgs {
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

/// `dedup`: the options checked and turned into [`dedup::Options`].
pub fn run(a: DedupArgs) -> Result<()> {
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
        return Err(usage!("--state needs a file (it is read at the start and replaced at the end), not -"));
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
    Ok(())
}
