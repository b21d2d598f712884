//! `bloomkit`: size Bloom filters, dedup streams, and move filters between
//! Redis/Valkey servers and files. Output goes to stdout, messages to stderr;
//! errors exit with status 1 (2 for usage errors).

mod calc;
mod dedup;
mod server;
mod units;

use std::fs::File;
use std::io::{self, BufReader, BufWriter, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser)]
#[command(
    name = "bloomkit",
    version,
    about = "Bloom filters for Redis and Valkey: sizing, stream dedup, dump and restore"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Size a filter from any two of capacity, error rate, bits and hashes.
    Calc(CalcArgs),
    /// Write each input line the first time it is seen.
    Dedup(DedupArgs),
    /// Save a server's filter to a file (SCANDUMP).
    Dump(DumpArgs),
    /// Load a filter file into a server (LOADCHUNK).
    Restore(RestoreArgs),
    /// Copy filters from one server to another.
    Copy(CopyArgs),
    /// Describe a server's filter.
    Info(InfoArgs),
}

#[derive(Args)]
struct CalcArgs {
    /// Items the filter holds (1e9, 10M, 250k).
    #[arg(short = 'n', long = "capacity", value_parser = units::parse_count)]
    n: Option<f64>,
    /// False-positive rate at capacity (0.01 = 1%).
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
    /// Bits per item for --table.
    #[arg(long, value_delimiter = ',', default_values_t = vec![10.0, 20.0, 30.0, 50.0])]
    bits_per_item: Vec<f64>,
    /// Hash counts for --table.
    #[arg(long = "table-hashes", value_delimiter = ',', default_values_t = vec![4.0, 8.0, 16.0])]
    table_hashes: Vec<f64>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct DedupArgs {
    /// Input files (standard input when none).
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
    /// Use the Bloom filter module of this server (redis://host:port).
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// With --redis: keep the filter in plain Redis bitmaps (Guava-compatible
    /// hashing), for servers that cannot load a module.
    #[arg(long)]
    bitmap: bool,
    /// The filter's key with --redis.
    #[arg(long, default_value = "bloomkit:dedup")]
    key: String,
    /// Lines expected (the filter grows past it, keeping the error rate).
    #[arg(long, default_value = "10M", value_parser = units::parse_count)]
    capacity: f64,
    /// Chance that a new line is taken for a repeat.
    #[arg(long, default_value_t = 1e-6)]
    error_rate: f64,
    /// Dedup over a sliding window of time (90s, 10m, 2h, 7d): a line is
    /// written again once it was last seen longer ago; --capacity is then the
    /// most lines expected per window.
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
}

#[derive(Args)]
struct DumpArgs {
    #[arg(long, value_name = "URL")]
    redis: String,
    key: String,
    /// Output file (standard output when none, if it is not a terminal).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

#[derive(Args)]
struct RestoreArgs {
    #[arg(long, value_name = "URL")]
    redis: String,
    key: String,
    /// Input file (standard input when none).
    #[arg(short, long)]
    input: Option<PathBuf>,
    /// Overwrite an existing key.
    #[arg(long)]
    replace: bool,
}

#[derive(Args)]
struct CopyArgs {
    #[arg(long, value_name = "URL")]
    from: String,
    #[arg(long, value_name = "URL")]
    to: String,
    #[arg(required = true)]
    keys: Vec<String>,
    /// Overwrite existing keys on the destination.
    #[arg(long)]
    replace: bool,
}

#[derive(Args)]
struct InfoArgs {
    #[arg(long, value_name = "URL")]
    redis: String,
    key: String,
}

fn progress_bar(what: &str) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{what} [{{bar:30}}] {{bytes}}/{{total_bytes}} {{bytes_per_sec}} eta {{eta}}"
        ))
        .expect("valid template"),
    );
    bar
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Calc(a) => {
            if a.table {
                let n = a.n.context("--table needs --capacity")?;
                calc::table(n, &a.bits_per_item, &a.table_hashes, a.json);
            } else {
                let sizing = calc::solve(&calc::Inputs { n: a.n, p: a.p, m: a.m, k: a.k })?;
                calc::print(&sizing, a.json);
            }
        }
        Command::Dedup(a) => {
            let delimiter = match a.delimiter.as_bytes() {
                [b] => *b,
                b"\\t" => b'\t',
                _ => bail!("--delimiter must be one byte (or \\t), got '{}'", a.delimiter),
            };
            if !(a.error_rate > 0.0 && a.error_rate < 1.0) {
                bail!("--error-rate must be strictly between 0 and 1, got {}", a.error_rate);
            }
            dedup::run(&dedup::Options {
                inputs: a.files,
                duplicates: a.duplicates,
                count_only: a.count,
                state: a.state,
                redis: a.redis,
                bitmap: a.bitmap,
                key: a.key,
                window: match (a.window, a.window_count) {
                    (Some(d), _) => Some(bloomkit_client::Window::Time(d)),
                    (None, Some(_)) => Some(bloomkit_client::Window::Count),
                    (None, None) => None,
                },
                capacity: a.window_count.unwrap_or(a.capacity) as u64,
                error_rate: a.error_rate,
                field: a.field.map(|f| f as usize),
                delimiter,
            })?;
        }
        Command::Dump(a) => {
            let mut server = server::Server::connect(&a.redis)?;
            let bar = progress_bar("dump");
            match a.output {
                Some(path) => {
                    // Written beside the target and renamed, so a failed dump leaves no partial file.
                    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
                    let result = (|| -> Result<()> {
                        let f =
                            File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
                        let mut w = BufWriter::with_capacity(1 << 20, f);
                        server::dump(&mut server, &a.key, &mut w, &bar)?;
                        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
                        std::fs::rename(&tmp, &path)?;
                        Ok(())
                    })();
                    if result.is_err() {
                        let _ = std::fs::remove_file(&tmp);
                    }
                    result?;
                }
                None => {
                    if io::stdout().is_terminal() {
                        bail!("the dump is binary: give -o FILE or redirect standard output");
                    }
                    server::dump(
                        &mut server,
                        &a.key,
                        BufWriter::with_capacity(1 << 20, io::stdout().lock()),
                        &bar,
                    )?;
                }
            }
            bar.finish_and_clear();
        }
        Command::Restore(a) => {
            let mut server = server::Server::connect(&a.redis)?;
            let bar = progress_bar("restore");
            match a.input {
                Some(path) => {
                    let f = File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
                    server::restore(
                        &mut server,
                        &a.key,
                        BufReader::with_capacity(1 << 20, f),
                        a.replace,
                        &bar,
                    )
                    .with_context(|| format!("restoring {} into '{}'", path.display(), a.key))?;
                }
                None => {
                    server::restore(&mut server, &a.key, BufReader::new(io::stdin().lock()), a.replace, &bar)?
                }
            }
            bar.finish_and_clear();
        }
        Command::Copy(a) => {
            let mut from = server::Server::connect(&a.from)?;
            let mut to = server::Server::connect(&a.to)?;
            for key in &a.keys {
                let bar = progress_bar(key);
                server::copy(&mut from, &mut to, key, a.replace, &bar)?;
                bar.finish_and_clear();
                eprintln!("bloomkit copy: {key}: done");
            }
        }
        Command::Info(a) => {
            let mut server = server::Server::connect(&a.redis)?;
            let (items, subs) = server::describe(&mut server, &a.key)?;
            let capacity: u64 = subs.iter().map(|s| s.capacity).sum();
            let bytes: u64 = subs.iter().map(|s| s.bytes).sum();
            println!("key                      {}", a.key);
            println!("items                    {items}");
            println!("capacity                 {capacity}");
            println!("bit arrays               {}", units::human_bytes(bytes as f64));
            println!("sub-filters              {}", subs.len());
            println!(
                "false-positive rate now  {:.3e} (estimated from the items added)",
                server::estimated_rate(&subs)
            );
            println!();
            println!(
                "{:>3} {:>12} {:>12} {:>6} {:>12} {:>7} {:>10}",
                "#", "capacity", "items", "fill", "bytes", "hashes", "error"
            );
            for (i, s) in subs.iter().enumerate() {
                println!(
                    "{:>3} {:>12} {:>12} {:>5.0}% {:>12} {:>7} {:>10.3e}",
                    i + 1,
                    s.capacity,
                    s.items,
                    100.0 * s.items as f64 / s.capacity.max(1) as f64,
                    s.bytes,
                    s.hashes,
                    s.error
                );
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A closed pipe (`bloomkit dedup | head`) is a normal end.
            if e.chain().any(|c| {
                c.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("bloomkit: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
