//! `bloomkit dump`: a key saved to a file or to standard output, with a
//! bar and one summary line. A file is written beside its name and renamed
//! into place when complete, so an interrupted dump leaves no partial file.

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use bloomkit_client::transfer;
use clap::Args;
use indicatif::ProgressBar;

use super::{bitmap_params, BitmapArgs, Format};
use crate::output::progress_bar;
use crate::{interrupt, server, units};

#[derive(Args)]
pub struct DumpArgs {
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

/// `dump`: the options checked (a binary dump goes to no terminal, Guava's
/// format holds a bitmap filter), then the key written where asked.
pub fn run(a: DumpArgs) -> Result<()> {
    let to_stdout = a.output.as_deref().is_none_or(|p| p.as_os_str() == "-");
    if to_stdout && io::stdout().is_terminal() {
        return Err(usage!("the dump is binary: give -o FILE or redirect standard output"));
    }
    let bitmap = bitmap_params(&a.bitmap)?;
    if a.format == Format::Guava && bitmap.is_none() {
        return Err(usage!("--format guava writes a bitmap filter: add --bitmap with its parameters"));
    }
    let flag = interrupt::install();
    let mut server = transfer::Server::connect(&server::resolve(a.redis.as_deref(), "--redis")?)?;
    server.interrupt_on(flag);
    if a.no_ttl {
        server.drop_ttls();
    }
    let source = Source { key: &a.key, format: a.format, bitmap };
    let bar = progress_bar("dump");
    let started = Instant::now();
    let (written, kind) = match a.output.as_ref().filter(|_| !to_stdout) {
        Some(path) => to_file(&source, &mut server, path, &bar)?,
        None => to_standard_output(&source, &mut server, &bar)?,
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
    Ok(())
}

/// What is dumped: the key, in which format, read as which bitmap filter.
struct Source<'a> {
    key: &'a str,
    format: Format,
    bitmap: Option<transfer::BitmapParams>,
}

impl Source<'_> {
    /// Writes the key to `out`; returns its kind, for the summary.
    fn write(
        &self,
        server: &mut transfer::Server,
        out: &mut dyn Write,
        bar: &ProgressBar,
    ) -> bloomkit_client::Result<&'static str> {
        match (self.format, self.bitmap) {
            (Format::Guava, Some(b)) => transfer::dump_guava(server, self.key, &b, out, &server::Bar(bar))
                .map(|_| "Guava BloomFilter"),
            _ => transfer::dump_key(server, self.key, self.bitmap, out, &server::Bar(bar)),
        }
    }
}

/// The dump to a file: written beside the target and renamed, so a failed
/// or interrupted dump leaves no partial file (and the partial files of
/// dumps killed outright are removed first). Returns the bytes written and
/// the key's kind.
fn to_file(
    source: &Source,
    server: &mut transfer::Server,
    path: &Path,
    bar: &ProgressBar,
) -> Result<(u64, &'static str)> {
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
    interrupt::set_unfinished(format!("the partial dump {} may be left: delete it", tmp.display()));
    let result = (|| -> Result<(u64, &'static str)> {
        let f = File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        let kind = source.write(server, &mut w, bar)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        let len = f.metadata()?.len();
        if interrupt::interrupted() {
            return Err(bloomkit_client::Error::Interrupted.into());
        }
        std::fs::rename(&tmp, path)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
        Ok((len, kind))
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
    result
}

/// The dump to standard output; returns the bytes written and the key's kind.
fn to_standard_output(
    source: &Source,
    server: &mut transfer::Server,
    bar: &ProgressBar,
) -> Result<(u64, &'static str)> {
    let mut out = CountingWriter(BufWriter::with_capacity(1 << 20, io::stdout().lock()), 0);
    let result = source.write(server, &mut out, bar).map_err(anyhow::Error::from);
    bar.finish_and_clear();
    if result.is_err() && interrupt::interrupted() {
        let _ = out.flush();
        return Err(interrupt::Stopped(
            "bloomkit dump: interrupted; what went to standard output is incomplete".into(),
        )
        .into());
    }
    let kind = result?;
    out.flush()?;
    Ok((out.1, kind))
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
