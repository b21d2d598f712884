//! `bloomkit restore`: a filter file loaded into a key through a staging
//! key beside it, checked, then renamed over the key in one transaction,
//! so that a failed or interrupted restore leaves the key as it was.

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use bloomkit_client::transfer;
use clap::Args;

use super::{report_leftovers, Format};
use crate::output::progress_bar;
use crate::{interrupt, server, units};

#[derive(Args)]
pub struct RestoreArgs {
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

/// `restore`: the input opened (a hint first when it is a terminal), the
/// server connected, the file loaded; one summary line.
pub fn run(a: RestoreArgs) -> Result<()> {
    let flag = interrupt::install();
    let url = server::resolve(a.redis.as_deref(), "--redis")?;
    let bar = progress_bar("restore");
    let started = Instant::now();
    let (input, from) = open_input(&a)?;
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
        Format::Bloomkit => transfer::restore_file(&mut server, &a.key, input, a.replace, &server::Bar(&bar))
            .map(String::from),
        Format::Guava => transfer::restore_guava(&mut server, &a.key, input, a.replace, &server::Bar(&bar))
            .map(|spec| {
                format!(
                    "Guava BloomFilter as a guava-layout bitmap of {} bits and {} hashes: open it \
                     with --bitmap --bits {} --hashes {}",
                    spec.shape.bits, spec.shape.hashes, spec.shape.bits, spec.shape.hashes
                )
            }),
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
    Ok(())
}

/// The file to restore, or standard input (read by a [`StdinReader`], which
/// a signal stops), and its name for the messages.
fn open_input(a: &RestoreArgs) -> Result<(Box<dyn Read>, String)> {
    let from_stdin = a.input.as_deref().is_none_or(|p| p.as_os_str() == "-");
    let opened: (Box<dyn Read>, String) = match a.input.as_ref().filter(|_| !from_stdin) {
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
    Ok(opened)
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
