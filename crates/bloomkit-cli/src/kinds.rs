//! Every kind of key bloomkit makes, for `info`, `dump`, `restore` and
//! `copy`: Bloom filters (`MBbloom--`, by SCANDUMP/LOADCHUNK and the
//! BLOOMKIT file format, in `server.rs`), sliding-window filters
//! (`bkit-apbf`, by APBF.SCANDUMP/LOADCHUNK, in the state-file format of
//! `dedup --window --state`), and bitmap filters (plain strings written by
//! `dedup --bitmap` or the client's bitmap layout, whose size and hashing
//! come from `--capacity` and `--error-rate`, in the BKBITMAP format).

use std::io::{Read, Write};

use anyhow::{anyhow, bail, Context, Result};
use bloomkit_client::{Filter, Layout, Options, RedisFilter};
use bloomkit_core::apbf;
use bloomkit_core::dump::MAX_CHUNK;
use indicatif::ProgressBar;

use crate::server::{self, Server};

/// What a key holds, from `TYPE`.
#[derive(Debug, PartialEq)]
pub enum Kind {
    Bloom,
    Window,
    /// A string: a bitmap filter, if the options describe one.
    String,
    Missing,
    Other(String),
}

pub fn kind(server: &mut Server, key: &str) -> Result<Kind> {
    let t: String = server.call(redis::cmd("TYPE").arg(key), key)?;
    Ok(match t.as_str() {
        "MBbloom--" => Kind::Bloom,
        "bkit-apbf" => Kind::Window,
        "string" => Kind::String,
        "none" => Kind::Missing,
        _ => Kind::Other(t),
    })
}

/// The error for a key that holds something bloomkit cannot read, naming it.
pub fn unreadable(server: &Server, key: &str, kind: &Kind) -> anyhow::Error {
    match kind {
        Kind::Missing => anyhow!("key '{key}' does not exist on {}", server.url),
        Kind::String => anyhow!(
            "key '{key}' on {} holds a string: if it is a bitmap filter, pass --bitmap with the \
             --capacity and --error-rate it was made with",
            server.url
        ),
        Kind::Other(t) => anyhow!(
            "key '{key}' on {} holds a {t}, not a filter bloomkit can read (a Bloom filter, a \
             sliding-window filter, or a bitmap filter with --bitmap)",
            server.url
        ),
        Kind::Bloom | Kind::Window => anyhow!("key '{key}' on {} is a filter of another kind", server.url),
    }
}

// ---- sliding-window filters ----

fn window_scandump(server: &mut Server, key: &str, iter: u64) -> Result<(u64, Vec<u8>)> {
    server.call(redis::cmd("APBF.SCANDUMP").arg(key).arg(iter), key)
}

/// Streams a window's state: the same bytes `dedup --window --state` saves.
pub fn dump_window(
    server: &mut Server,
    key: &str,
    mut out: impl Write,
    progress: &ProgressBar,
) -> Result<u64> {
    let (iter, header) = window_scandump(server, key, 0)?;
    let body =
        apbf::state_body_len(&header).map_err(|e| anyhow!("the server sent an unreadable header: {e}"))?;
    progress.set_length(body);
    out.write_all(&header)?;
    let mut written = header.len() as u64;
    server::scan_chunks(server, "APBF.SCANDUMP", key, iter as i64, |data| {
        out.write_all(&data)?;
        progress.inc(data.len() as u64);
        written += data.len() as u64;
        Ok(())
    })?;
    out.flush()?;
    // A write during the dump would tear the ring from its body (the copy
    // would then miss recent items): the header must not have moved.
    if written != header.len() as u64 + body || window_scandump(server, key, 0)?.1 != header {
        bail!("the filter '{key}' changed during the dump; try again");
    }
    Ok(written)
}

/// Loads a window's state (from a file or another server) into `key`,
/// through a staging key renamed over it at the end, once `before_commit`
/// has passed and the staged header is the one sent.
pub fn load_window(
    server: &mut Server,
    key: &str,
    replace: bool,
    header: &[u8],
    mut next_chunk: impl FnMut(&mut Vec<u8>, usize) -> Result<()>,
    before_commit: impl FnOnce() -> Result<()>,
    progress: &ProgressBar,
) -> Result<()> {
    let body = apbf::state_body_len(header).map_err(|e| anyhow!("invalid sliding-window filter: {e}"))?;
    progress.set_length(body);
    server::stage_and_commit(server, &[key.to_string()], replace, |server, staging| {
        let staging = &staging[0];
        server.call::<()>(redis::cmd("APBF.LOADCHUNK").arg(staging).arg(0).arg(header), staging)?;
        let mut offset = 0u64;
        let mut buf = Vec::new();
        while offset < body {
            let len = (body - offset).min(MAX_CHUNK) as usize;
            next_chunk(&mut buf, len)?;
            server
                .call::<()>(redis::cmd("APBF.LOADCHUNK").arg(staging).arg(1 + offset).arg(&buf), staging)?;
            offset += len as u64;
            progress.inc(len as u64);
        }
        before_commit()?;
        // (A first-format header is converted on load, so only the current one compares.)
        let staged = window_scandump(server, staging, 0)?.1;
        if header.starts_with(apbf::MAGIC) && staged != header {
            bail!("the server did not load the filter as sent (its header differs)");
        }
        Ok(())
    })
}

/// Restores a state file into `key` (its header already read).
pub fn restore_window(
    server: &mut Server,
    key: &str,
    header: &[u8],
    input: impl Read,
    replace: bool,
    progress: &ProgressBar,
) -> Result<()> {
    let input = std::cell::RefCell::new(input);
    load_window(
        server,
        key,
        replace,
        header,
        |buf, len| {
            buf.resize(len, 0);
            input.borrow_mut().read_exact(buf).context("the file ends before the filter does")?;
            Ok(())
        },
        || {
            let mut rest = [0u8; 1];
            if input.borrow_mut().read(&mut rest)? != 0 {
                bail!("the file holds more than the filter its header describes");
            }
            Ok(())
        },
        progress,
    )
}

pub fn copy_window(
    from: &mut Server,
    to: &mut Server,
    key: &str,
    replace: bool,
    progress: &ProgressBar,
) -> Result<()> {
    let (mut iter, header) = window_scandump(from, key, 0)?;
    let from = std::cell::RefCell::new(from);
    load_window(
        to,
        key,
        replace,
        &header,
        |buf, len| {
            let (next, data) = window_scandump(&mut from.borrow_mut(), key, iter)?;
            if next == 0 || data.len() != len {
                bail!("the source filter '{key}' changed during the copy; try again");
            }
            *buf = data;
            iter = next;
            Ok(())
        },
        // A write to the source meanwhile would tear ring from body.
        || match window_scandump(&mut from.borrow_mut(), key, 0)?.1 == header {
            true => Ok(()),
            false => bail!("the source filter '{key}' changed during the copy; try again"),
        },
        progress,
    )
}

/// `APBF.INFO`, as label and value pairs.
pub fn window_info(server: &mut Server, key: &str) -> Result<Vec<(String, String)>> {
    let values: Vec<redis::Value> = server.call(redis::cmd("APBF.INFO").arg(key), key)?;
    let text = |v: &redis::Value| match v {
        redis::Value::Int(i) => i.to_string(),
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    Ok(values.chunks(2).map(|p| (text(&p[0]), p.get(1).map(text).unwrap_or_default())).collect())
}

// ---- bitmap filters ----

/// The first bytes of a bitmap filter file.
pub const BITMAP_MAGIC: &[u8; 8] = b"BKBITMAP";

/// The bitmap layout `dedup --bitmap` and the client make for these options.
pub fn bitmap_layout(key: &str, capacity: u64, error_rate: f64) -> Result<Layout> {
    Layout::bitmap(key, Options::new(capacity, error_rate)).map_err(|e| anyhow!("{e}"))
}

fn strlen(server: &mut Server, key: &str) -> Result<u64> {
    server.call(redis::cmd("STRLEN").arg(key), key)
}

/// A bitmap filter file: magic, version 1, the layout's name ("guava"),
/// capacity, error rate, the number of keys and each one's length, then
/// their bytes, then a CRC-32 of everything before it.
pub fn dump_bitmap(
    server: &mut Server,
    key: &str,
    capacity: u64,
    error_rate: f64,
    out: impl Write,
    progress: &ProgressBar,
) -> Result<u64> {
    let layout = bitmap_layout(key, capacity, error_rate)?;
    let keys = layout.keys();
    let mut lengths = Vec::new();
    for k in &keys {
        match kind(server, k)? {
            Kind::String | Kind::Missing => lengths.push(strlen(server, k)?),
            other => return Err(unreadable(server, k, &other)),
        }
    }
    progress.set_length(lengths.iter().sum());
    let mut out = CrcWriter::new(out);
    out.write_all(BITMAP_MAGIC)?;
    out.write_all(&1u32.to_le_bytes())?;
    out.write_all(&(b"guava".len() as u32).to_le_bytes())?;
    out.write_all(b"guava")?;
    out.write_all(&capacity.to_le_bytes())?;
    out.write_all(&error_rate.to_le_bytes())?;
    out.write_all(&(keys.len() as u32).to_le_bytes())?;
    for len in &lengths {
        out.write_all(&len.to_le_bytes())?;
    }
    for (k, &len) in keys.iter().zip(&lengths) {
        let mut at = 0u64;
        while at < len {
            let end = (at + MAX_CHUNK).min(len);
            let data: Vec<u8> = server.call(redis::cmd("GETRANGE").arg(k).arg(at).arg(end - 1), k)?;
            if data.len() as u64 != end - at {
                bail!("the bitmap '{k}' changed during the dump; try again");
            }
            out.write_all(&data)?;
            progress.inc(data.len() as u64);
            at = end;
        }
    }
    let crc = out.crc.clone().finalize();
    let mut out = out.inner;
    out.write_all(&crc.to_le_bytes())?;
    out.flush()?;
    Ok(out_len(&lengths, keys.len()))
}

fn out_len(lengths: &[u64], keys: usize) -> u64 {
    8 + 4 + 4 + 5 + 8 + 8 + 4 + 8 * keys as u64 + lengths.iter().sum::<u64>() + 4
}

struct CrcWriter<W: Write> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> CrcWriter<W> {
    fn new(inner: W) -> CrcWriter<W> {
        CrcWriter { inner, crc: crc32fast::Hasher::new() }
    }
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Reads exactly `n` bytes, feeding the checksum.
fn read_n(input: &mut impl Read, crc: &mut crc32fast::Hasher, n: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    input.read_exact(&mut buf).context("the bitmap file ends early")?;
    crc.update(&buf);
    Ok(buf)
}

fn u32_at(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

/// Restores a bitmap filter file (its magic already read) into the keys the
/// same layout gives `key`: each part through a staging key, all renamed
/// in one transaction once the checksum is verified.
pub fn restore_bitmap(
    server: &mut Server,
    key: &str,
    mut input: impl Read,
    replace: bool,
    progress: &ProgressBar,
) -> Result<()> {
    let mut crc = crc32fast::Hasher::new();
    crc.update(BITMAP_MAGIC);
    let head = read_n(&mut input, &mut crc, 8)?;
    if u32_at(&head) != 1 {
        bail!("bitmap file version {} is not supported (this bloomkit reads version 1)", u32_at(&head));
    }
    let name = read_n(&mut input, &mut crc, u32_at(&head[4..]).min(64) as usize)?;
    if name != b"guava" {
        bail!("bitmap layout '{}' is not supported here (guava is)", String::from_utf8_lossy(&name));
    }
    let shape = read_n(&mut input, &mut crc, 20)?;
    let (capacity, error_rate, nkeys) =
        (u64_at(&shape), f64::from_bits(u64_at(&shape[8..])), u32_at(&shape[16..]));
    let layout = bitmap_layout(key, capacity, error_rate)?;
    let keys = layout.keys();
    if keys.len() != nkeys as usize {
        bail!(
            "the file holds {nkeys} bitmap keys where capacity {capacity} at {error_rate} needs {}",
            keys.len()
        );
    }
    let lengths: Vec<u64> = read_n(&mut input, &mut crc, 8 * keys.len())?.chunks(8).map(u64_at).collect();
    let max_bytes = bloomkit_client::MAX_STRING_BITS / 8;
    if lengths.iter().any(|&l| l > max_bytes) {
        bail!("the file claims a bitmap longer than Redis allows; it is damaged");
    }
    progress.set_length(lengths.iter().sum());
    server::stage_and_commit(server, &keys, replace, |server, staging| {
        for (k, &len) in staging.iter().zip(&lengths) {
            // Every part gets its key, an empty one too, so that every
            // RENAME of the transaction has a source.
            server.call::<()>(redis::cmd("SET").arg(k).arg(""), k)?;
            let mut at = 0u64;
            while at < len {
                let n = (len - at).min(MAX_CHUNK);
                let data = read_n(&mut input, &mut crc, n as usize)?;
                server.call::<i64>(redis::cmd("SETRANGE").arg(k).arg(at).arg(data), k)?;
                progress.inc(n);
                at += n;
            }
        }
        let mut stored = [0u8; 4];
        input.read_exact(&mut stored).context("the bitmap file ends before its checksum")?;
        if u32::from_le_bytes(stored) != crc.clone().finalize() {
            bail!("the bitmap file's checksum does not match: it is damaged");
        }
        Ok(())
    })
}

pub fn copy_bitmap(
    from: &mut Server,
    to: &mut Server,
    key: &str,
    capacity: u64,
    error_rate: f64,
    replace: bool,
    progress: &ProgressBar,
) -> Result<()> {
    let mut file = Vec::new();
    dump_bitmap(from, key, capacity, error_rate, &mut file, &ProgressBar::hidden())?;
    restore_bitmap(to, key, &file[BITMAP_MAGIC.len()..], replace, progress)
}

/// The client's view of a bitmap filter: fill and estimated items.
pub fn bitmap_info(
    server: &mut Server,
    key: &str,
    capacity: u64,
    error_rate: f64,
) -> Result<bloomkit_client::Info> {
    let layout = bitmap_layout(key, capacity, error_rate)?;
    for k in layout.keys() {
        match kind(server, &k)? {
            Kind::String | Kind::Missing => {}
            other => return Err(unreadable(server, &k, &other)),
        }
    }
    RedisFilter::new(server.connection(), layout).info().map_err(|e| anyhow!("{}: {e}", server.url))
}
