//! The subcommands, one module each: its options (the clap definitions,
//! whose doc comments are its `--help` and manual page), the checks of
//! their combinations, and a `run` that does the work, so that each reads
//! on its own and `main.rs` only dispatches. Here: what several of them
//! share (the bitmap options, the file format, the leftovers report).

pub mod calc;
pub mod completions;
pub mod copy;
pub mod dedup;
pub mod dump;
pub mod info;
pub mod man;
pub mod restore;

use anyhow::Result;
use bloomkit_client::transfer;
use bloomkit_core::bitmap::BitmapLayout;
use clap::Args;

use crate::units;

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

/// A file format for `dump` and `restore`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// bloomkit's own files, for every kind of filter (restore tells which from the file).
    Bloomkit,
    /// Guava's `BloomFilter.writeTo` form, for bitmaps in the guava layout.
    Guava,
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
