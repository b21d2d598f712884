//! `bloomkit dedup`: print each line the first time it is seen.
//!
//! Lines are bytes (not necessarily UTF-8), split on `\n`; the key is the
//! whole line without its `\n`, or one field of it. Lines are read in
//! batches, so that the in-process filter can hash a batch and prefetch its
//! bits, and the Redis backend sends one pipelined round trip per batch.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bloomkit_core::{file, Chain, ChainParams, Limits};
use indicatif::{ProgressBar, ProgressStyle};
use redis::Value;

use crate::server::{describe, estimated_rate, Server};

const BATCH: usize = 4096;
/// Items per BF.MADD: a bounded time for each command on the server.
const MADD_ITEMS: usize = 1000;

pub struct Options {
    pub inputs: Vec<PathBuf>,
    pub duplicates: bool,
    pub count_only: bool,
    pub state: Option<PathBuf>,
    pub redis: Option<String>,
    pub key: String,
    pub capacity: u64,
    pub error_rate: f64,
    pub field: Option<usize>,
    pub delimiter: u8,
}

/// Where "seen before" is remembered.
enum Backend {
    Local(Chain),
    Module(Server, String),
}

impl Backend {
    /// For each key: true when it was new.
    fn add(&mut self, keys: &[&[u8]], new: &mut Vec<bool>) -> Result<()> {
        new.clear();
        match self {
            Backend::Local(chain) => {
                let mut failure = None;
                chain.add_each(keys, Limits::NONE, |r| match r {
                    Ok(n) => {
                        new.push(n);
                        true
                    }
                    Err(e) => {
                        failure = Some(e);
                        false
                    }
                });
                if let Some(e) = failure {
                    bail!("the filter cannot take more items: {e}");
                }
            }
            Backend::Module(server, key) => {
                let mut pipe = redis::pipe();
                for chunk in keys.chunks(MADD_ITEMS) {
                    pipe.cmd("BF.MADD").arg(&*key).arg(chunk);
                }
                for reply in server.pipeline(&pipe, key)? {
                    let Value::Array(items) = reply else { bail!("unexpected BF.MADD reply: {reply:?}") };
                    for item in items {
                        match item {
                            Value::Int(v) => new.push(v == 1),
                            Value::Boolean(b) => new.push(b),
                            Value::ServerError(e) => bail!("{}: BF.MADD {key}: {e:?}", server.url),
                            other => bail!("unexpected BF.MADD item: {other:?}"),
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn false_positive_rate(&mut self) -> Result<f64> {
        Ok(match self {
            Backend::Local(chain) => chain.estimated_false_positive_rate(),
            Backend::Module(server, key) => estimated_rate(&describe(server, key)?.1),
        })
    }
}

fn open_backend(o: &Options) -> Result<Backend> {
    let params = ChainParams { capacity: o.capacity, error: o.error_rate, expansion: 2, scaling: true };
    match (&o.redis, &o.state) {
        (Some(_), Some(_)) => {
            bail!("--state keeps an in-process filter; with --redis the filter lives on the server")
        }
        (Some(url), None) => {
            let mut server = Server::connect(url)?;
            if !server.exists(&o.key)? {
                // Reserve with our parameters rather than the server's defaults.
                server.call::<()>(
                    redis::cmd("BF.RESERVE").arg(&o.key).arg(o.error_rate).arg(o.capacity),
                    &o.key,
                )?;
            } else {
                describe(&mut server, &o.key)?; // fails clearly when the key is not a filter
            }
            Ok(Backend::Module(server, o.key.clone()))
        }
        (None, Some(path)) if path.exists() => {
            let f =
                File::open(path).with_context(|| format!("cannot open the state file {}", path.display()))?;
            let chain = file::read(BufReader::new(f), Limits::NONE)
                .with_context(|| format!("cannot load the state file {}", path.display()))?;
            Ok(Backend::Local(chain))
        }
        (None, _) => Ok(Backend::Local(Chain::new(params, Limits::NONE)?)),
    }
}

/// Writes the filter next to `path`, syncs it, then renames it into place.
fn save_state(chain: &Chain, path: &Path) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().map_or("state".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let result = (|| -> Result<()> {
        let f = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        file::write(chain, &mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot save the state file {}", path.display()))
}

/// The key of a line: the line without `\n`, or field `n` (1-based) of it.
fn key_of(line: &[u8], field: Option<usize>, delimiter: u8) -> Option<&[u8]> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    match field {
        None => Some(line),
        Some(n) => line.split(|&b| b == delimiter).nth(n - 1),
    }
}

struct Counts {
    read: u64,
    written: u64,
    duplicates: u64,
    without_field: u64,
}

pub fn run(o: &Options) -> Result<()> {
    let started = Instant::now();
    let mut backend = open_backend(o)?;
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 18, stdout.lock());
    let progress = if io::stderr().is_terminal() {
        let bar = ProgressBar::new_spinner();
        bar.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("valid template"));
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut counts = Counts { read: 0, written: 0, duplicates: 0, without_field: 0 };
    let inputs: Vec<Option<&PathBuf>> =
        if o.inputs.is_empty() { vec![None] } else { o.inputs.iter().map(Some).collect() };
    let mut arena: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut ends: Vec<usize> = Vec::with_capacity(BATCH);
    let mut new = Vec::with_capacity(BATCH);
    for input in inputs {
        let mut reader: Box<dyn BufRead> = match input {
            None => Box::new(BufReader::with_capacity(1 << 20, io::stdin().lock())),
            Some(path) => Box::new(BufReader::with_capacity(
                1 << 20,
                File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
            )),
        };
        loop {
            arena.clear();
            ends.clear();
            while ends.len() < BATCH {
                let n = reader.read_until(b'\n', &mut arena)?;
                if n == 0 {
                    break;
                }
                ends.push(arena.len());
            }
            if ends.is_empty() {
                break;
            }
            let lines: Vec<&[u8]> =
                ends.iter().scan(0, |start, &end| Some(&arena[std::mem::replace(start, end)..end])).collect();
            let keyed: Vec<(usize, &[u8])> = lines
                .iter()
                .enumerate()
                .filter_map(|(i, l)| key_of(l, o.field, o.delimiter).map(|k| (i, k)))
                .collect();
            let keys: Vec<&[u8]> = keyed.iter().map(|(_, k)| *k).collect();
            backend.add(&keys, &mut new)?;
            // Lines without the field pass through as unique.
            let mut is_new = vec![true; lines.len()];
            for ((i, _), n) in keyed.iter().zip(&new) {
                is_new[*i] = *n;
            }
            counts.without_field += (lines.len() - keyed.len()) as u64;
            for (line, fresh) in lines.iter().zip(is_new) {
                counts.read += 1;
                counts.duplicates += u64::from(!fresh);
                if !o.count_only && fresh != o.duplicates {
                    out.write_all(line)?;
                    if !line.ends_with(b"\n") {
                        out.write_all(b"\n")?;
                    }
                    counts.written += 1;
                }
            }
            let rate = counts.read as f64 / started.elapsed().as_secs_f64().max(1e-9);
            progress.set_message(format!(
                "{} lines, {:.0} lines/s, {} duplicates",
                counts.read, rate, counts.duplicates
            ));
        }
    }
    if o.count_only {
        writeln!(
            out,
            "{} lines, {} unique, {} duplicates",
            counts.read,
            counts.read - counts.duplicates,
            counts.duplicates
        )?;
    }
    out.flush()?;
    progress.finish_and_clear();
    if let (Backend::Local(chain), Some(path)) = (&backend, &o.state) {
        save_state(chain, path)?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let fp_rate = backend.false_positive_rate()?;
    let mut summary = format!(
        "bloomkit dedup: {} lines read, {} written, {} duplicates, {:.2} s, {:.0} lines/s, \
         filter false-positive rate now {:.2e}",
        counts.read,
        counts.written,
        counts.duplicates,
        elapsed,
        counts.read as f64 / elapsed.max(1e-9),
        fp_rate
    );
    if counts.without_field > 0 {
        summary += &format!(
            ", {} lines without field {} kept as unique",
            counts.without_field,
            o.field.unwrap_or(0)
        );
    }
    eprintln!("{summary}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::key_of;

    #[test]
    fn keys_of_lines_and_fields() {
        assert_eq!(key_of(b"a,b,c\n", None, b','), Some(&b"a,b,c"[..]));
        assert_eq!(key_of(b"a,b,c\n", Some(2), b','), Some(&b"b"[..]));
        assert_eq!(key_of(b"a,b,c\n", Some(3), b','), Some(&b"c"[..]));
        assert_eq!(key_of(b"a,b\n", Some(3), b','), None);
        assert_eq!(key_of(b"no newline", None, b','), Some(&b"no newline"[..]));
    }
}
