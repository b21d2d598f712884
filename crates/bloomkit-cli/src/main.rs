//! `bloomkit`: size Bloom filters, dedup streams, and move filters between
//! Redis/Valkey servers and files. Output goes to stdout, messages to stderr;
//! errors exit with status 1 (2 for usage errors, 128 + the signal's number
//! when a signal stopped a command after its cleanup: see `interrupt.rs`).
//! Every message goes through `say!` ([`output`]), which never panics: a
//! closed standard error (`bloomkit dump ... 2>&1 | head`) must not turn a
//! quiet end into a crash; and which never prints a password (`redact.rs`).
//!
//! A thin binary: the command line's grammar is here, each subcommand's
//! options and work are in [`commands`], and `run` only dispatches.

// First, so that every module below uses `say!` and `usage!` by name.
#[macro_use]
mod output;

mod calc;
mod commands;
mod dedup;
mod interrupt;
mod manual;
mod redact;
mod rules;
mod server;
mod units;

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use output::describe;

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
    Calc(commands::calc::CalcArgs),
    /// Write each input line the first time it is seen.
    Dedup(commands::dedup::DedupArgs),
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
    Dump(commands::dump::DumpArgs),
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
    Restore(commands::restore::RestoreArgs),
    /// Copy filters and sketches from one server to another.
    ///
    /// Chunk by chunk, through a staging key on the destination, as restore
    /// loads; every kind dump handles. --all finds them with SCAN. Each key
    /// keeps the TTL it has left on the source (--no-ttl: none).
    Copy(commands::copy::CopyArgs),
    /// Describe a server's filter or sketch.
    ///
    /// Its kind and the server's INFO fields (a Bloom filter's sub-filters,
    /// fill and estimated false-positive rate now), and any staging key an
    /// interrupted restore or copy into the key left.
    Info(commands::info::InfoArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// For bash: mkdir -p ~/.local/share/bash-completion/completions &&
    /// bloomkit completions bash > ~/.local/share/bash-completion/completions/bloomkit
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff): `bloomkit man dedup | man -l -`.
    Man(commands::man::ManArgs),
}

/// Runs the subcommand given; each is a module of [`commands`].
fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Calc(a) => commands::calc::run(a),
        Command::Dedup(a) => commands::dedup::run(a),
        Command::Dump(a) => commands::dump::run(a),
        Command::Restore(a) => commands::restore::run(a),
        Command::Copy(a) => commands::copy::run(a),
        Command::Info(a) => commands::info::run(a),
        Command::Completions { shell } => commands::completions::run(shell, Cli::command()),
        Command::Man(a) => commands::man::run(a, Cli::command()),
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
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let parsed = rules::declare(Cli::command()).try_get_matches_from(&args);
    let cli = match parsed.and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            if matches!(e.kind(), ErrorKind::ArgumentConflict | ErrorKind::MissingRequiredArgument) {
                if let Some(why) = rules::broken(Cli::command(), &args) {
                    say!("bloomkit: error: {why}");
                    return ExitCode::from(2);
                }
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
