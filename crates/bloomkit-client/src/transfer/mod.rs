//! Moving filters of every kind between servers and files, for the CLI
//! and for library users: Bloom filters (`MBbloom--`, by SCANDUMP/LOADCHUNK
//! and the BLOOMKIT file format), sliding-window filters (`bkit-apbf`, by
//! APBF.SCANDUMP/LOADCHUNK, in the state-file format of a local window),
//! and bitmap filters (plain strings, whose size and hashing come from the
//! capacity and error rate they were made with, in the BKBITMAP format).
//! Every load goes through staging keys renamed in one transaction once it
//! has been checked, so a half-loaded filter is never visible.

use std::io::{Read, Write};
use std::time::Duration;

use bloomkit_core::apbf;
use bloomkit_core::bf::file::{FileReader, FileWriter};
use bloomkit_core::{bf::scandump as dump, common::MAX_CHUNK};
use redis::{Cmd, FromRedisValue};

use crate::error::{Error, Result};

/// A transfer that cannot complete safely, said in words.
macro_rules! transfer {
    ($($arg:tt)*) => { $crate::Error::Transfer(format!($($arg)*)) };
}

/// Told how far a transfer has come, in bytes of filter data.
pub trait Progress {
    fn set_length(&self, _bytes: u64) {}
    fn inc(&self, _bytes: u64) {}
}

/// No progress to show.
impl Progress for () {}

/// A connection to `url`, or an error that says what to check: a malformed
/// URL, or a server that does not answer within five seconds.
pub fn connect(url: &str) -> Result<redis::Connection> {
    let client = redis::Client::open(url).map_err(|e| {
        Error::InvalidOptions(format!("'{url}' is not a Redis URL ({e}); use redis://host:port[/db]"))
    })?;
    client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| Error::Connection(format!("{url}: {e}")))
}

/// A server connection for transfers, with its URL for messages.
pub struct Server {
    pub url: String,
    con: redis::Connection,
}

impl Server {
    /// Connects, or says what to check: a malformed URL, or a server that
    /// does not answer within five seconds.
    pub fn connect(url: &str) -> Result<Server> {
        Ok(Server { url: url.to_string(), con: connect(url)? })
    }

    /// The connection, for filters ([`crate::RedisFilter`]).
    pub fn connection(&mut self) -> &mut redis::Connection {
        &mut self.con
    }

    /// Runs a command; errors are classified as every client call's are.
    pub fn call<T: FromRedisValue>(&mut self, cmd: &Cmd, key: &str) -> Result<T> {
        cmd.query(&mut self.con).map_err(|e| Error::from_redis(e, key))
    }

    pub fn exists(&mut self, key: &str) -> Result<bool> {
        self.call(redis::cmd("EXISTS").arg(key), key)
    }
}

fn scandump(server: &mut Server, key: &str, iter: i64) -> Result<(i64, Vec<u8>)> {
    server.call(redis::cmd("BF.SCANDUMP").arg(key).arg(iter), key)
}

fn loadchunk(server: &mut Server, key: &str, iter: i64, data: &[u8]) -> Result<()> {
    server.call::<()>(redis::cmd("BF.LOADCHUNK").arg(key).arg(iter).arg(data), key)
}

/// Streams a server's filter into a filter file.
pub fn dump(server: &mut Server, key: &str, out: impl Write, progress: &dyn Progress) -> Result<()> {
    let (_, header) = scandump(server, key, 0)?;
    let parsed = dump::parse_header(&header)
        .map_err(|e| transfer!("the server sent a header bloomkit cannot read: {e}"))?;
    progress.set_length(parsed.links.iter().map(|(s, _)| s.bytes).sum());
    let mut writer = FileWriter::new(out, &header)?;
    scan_chunks(server, "BF.SCANDUMP", key, 1, |_, data| {
        writer.write_bits(&data)?;
        progress.inc(data.len() as u64);
        Ok(())
    })?;
    writer.finish()?;
    Ok(())
}

/// The chunks a SCANDUMP-style command (`BF.SCANDUMP`, `APBF.SCANDUMP`,
/// `CF.SCANDUMP`) answers from `iter` on, until its next iterator is 0;
/// `each` gets each chunk with the iterator that loads it back (LOADCHUNK's).
pub fn scan_chunks(
    server: &mut Server,
    command: &str,
    key: &str,
    mut iter: i64,
    mut each: impl FnMut(i64, Vec<u8>) -> Result<()>,
) -> Result<()> {
    loop {
        // The last answer's data may be nil (CF.SCANDUMP).
        let (next, data): (i64, Option<Vec<u8>>) =
            server.call(redis::cmd(command).arg(key).arg(iter), key)?;
        if next == 0 {
            return Ok(());
        }
        each(next, data.unwrap_or_default())?;
        iter = next;
    }
}

/// A key name beside `key` for loading into before an atomic rename, in
/// the same hash slot so that RENAME works on a Redis Cluster: `key`'s own
/// hash tag is kept, or `key` becomes the tag.
fn staging_key(key: &str) -> String {
    let suffix = format!(":bloomkit-staging:{}", std::process::id());
    if crate::has_hash_tag(key) || key.contains(['{', '}']) {
        format!("{key}{suffix}")
    } else {
        format!("{{{key}}}{suffix}")
    }
}

/// A staging key lives an hour at most: a transfer killed midway (Ctrl-C,
/// a lost connection) leaves nothing behind for good.
const STAGING_TTL_MS: u64 = 3_600_000;

/// Gives a staging key, just created, its safety TTL.
fn arm_staging(server: &mut Server, staging: &str) -> Result<()> {
    server.call::<i64>(redis::cmd("PEXPIRE").arg(staging).arg(STAGING_TTL_MS), staging).map(|_| ())
}

/// Loads into staging keys (one per key, each in its key's hash slot) with
/// `load`, then renames them over `keys` in one transaction, so that a
/// half-loaded filter is never visible and a failure leaves `keys` as they
/// were. Without `replace`, existing keys are refused, and a key created
/// meanwhile aborts the transaction (WATCH). Loaders give each staging key
/// a TTL as they create it ([`arm_staging`]).
pub fn stage_and_commit(
    server: &mut Server,
    keys: &[String],
    replace: bool,
    load: impl FnOnce(&mut Server, &[String]) -> Result<()>,
) -> Result<()> {
    let staging: Vec<String> = keys.iter().map(|k| staging_key(k)).collect();
    let result = (|| -> Result<()> {
        if !replace {
            server.call::<()>(redis::cmd("WATCH").arg(keys), &keys[0])?;
            for key in keys {
                if server.exists(key)? {
                    return Err(transfer!(
                        "key '{key}' already exists on {}; pass --replace to overwrite it",
                        server.url
                    ));
                }
            }
        }
        server.call::<i64>(redis::cmd("DEL").arg(&staging), &staging[0])?;
        load(server, &staging)?;
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (from, to) in staging.iter().zip(keys) {
            // RENAME carries the staging key's safety TTL over: drop it.
            pipe.cmd("RENAME").arg(from).arg(to).ignore();
            pipe.cmd("PERSIST").arg(to).ignore();
        }
        let committed: Option<()> =
            pipe.query(&mut server.con).map_err(|e| Error::from_redis(e, &keys[0]))?;
        if committed.is_none() {
            return Err(transfer!(
                "key '{}' appeared on {} while loading; pass --replace to overwrite it",
                keys[0],
                server.url
            ));
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = server.call::<()>(&redis::cmd("UNWATCH"), &keys[0]);
        let _ = server.call::<i64>(redis::cmd("DEL").arg(&staging), &staging[0]);
    }
    result
}

/// Loads a Bloom filter's chunks through [`stage_and_commit`], then checks
/// that the server reports what the header describes.
fn load_staged(
    server: &mut Server,
    key: &str,
    replace: bool,
    header: &[u8],
    mut next_chunk: impl FnMut(&mut [u8]) -> Result<()>,
    before_commit: impl FnOnce() -> Result<()>,
    progress: &dyn Progress,
) -> Result<()> {
    let parsed = dump::parse_header(header).map_err(|e| transfer!("invalid filter header: {e}"))?;
    stage_and_commit(server, &[key.to_string()], replace, |server, staging| {
        let staging = &staging[0];
        loadchunk(server, staging, 1, header)?;
        arm_staging(server, staging)?;
        let mut end: i64 = 0;
        let mut buf = Vec::new();
        for (shape, _) in &parsed.links {
            let mut left = shape.bytes;
            while left > 0 {
                let len = left.min(MAX_CHUNK);
                buf.resize(len as usize, 0);
                next_chunk(&mut buf)?;
                end += len as i64;
                loadchunk(server, staging, end + 1, &buf)?;
                progress.inc(len);
                left -= len;
            }
        }
        before_commit()?;
        // Checked before it replaces anything.
        verify(server, staging, &parsed)
    })
}

/// After a load, the server must report the items and capacity the header describes.
fn verify(server: &mut Server, key: &str, header: &dump::Header) -> Result<()> {
    let capacity: i64 = first(server.call(redis::cmd("BF.INFO").arg(key).arg("CAPACITY"), key)?)?;
    let items: i64 = first(server.call(redis::cmd("BF.INFO").arg(key).arg("ITEMS"), key)?)?;
    let expected_capacity: u64 = header.links.iter().map(|(s, _)| s.capacity).sum();
    if capacity as u64 != expected_capacity || items as u64 != header.items {
        return Err(transfer!(
            "verification failed on {}: '{key}' reports capacity {capacity} and {items} items, \
             the dump has {expected_capacity} and {}",
            server.url,
            header.items
        ));
    }
    Ok(())
}

fn first(values: Vec<i64>) -> Result<i64> {
    values.first().copied().ok_or_else(|| Error::Protocol("BF.INFO returned no value".into()))
}

/// Restores a filter file into `key`; the file's checksum is checked before
/// the restored filter replaces anything.
pub fn restore(
    server: &mut Server,
    key: &str,
    input: impl Read,
    replace: bool,
    progress: &dyn Progress,
) -> Result<()> {
    let reader = FileReader::open(input)?;
    progress.set_length(reader.array_sizes.iter().sum());
    let header = reader.header().to_vec();
    let reader = std::cell::RefCell::new(Some(reader));
    load_staged(
        server,
        key,
        replace,
        &header,
        |buf| Ok(reader.borrow_mut().as_mut().expect("open until the end").read_bits(buf)?),
        || Ok(reader.borrow_mut().take().expect("finished once").finish()?),
        progress,
    )
}

/// Copies `key` from one server to another, chunk by chunk.
pub fn copy(
    from: &mut Server,
    to: &mut Server,
    key: &str,
    replace: bool,
    progress: &dyn Progress,
) -> Result<()> {
    let (_, header) = scandump(from, key, 0)?;
    let parsed =
        dump::parse_header(&header).map_err(|e| transfer!("the source sent an unreadable header: {e}"))?;
    progress.set_length(parsed.links.iter().map(|(s, _)| s.bytes).sum());
    let mut iter = 1;
    load_staged(
        to,
        key,
        replace,
        &header,
        |buf| {
            let (next, data) = scandump(from, key, iter)?;
            if next == 0 || data.len() != buf.len() {
                return Err(transfer!("the source filter '{key}' changed during the copy; try again"));
            }
            buf.copy_from_slice(&data);
            iter = next;
            Ok(())
        },
        || Ok(()),
        progress,
    )
}

/// One sub-filter as BF.DEBUG describes it.
pub struct SubFilterInfo {
    pub bytes: u64,
    pub hashes: u64,
    pub capacity: u64,
    pub items: u64,
    pub error: f64,
}

/// BF.DEBUG, parsed: the items added, and each sub-filter.
pub fn describe(server: &mut Server, key: &str) -> Result<(u64, Vec<SubFilterInfo>)> {
    let lines: Vec<String> = server.call(redis::cmd("BF.DEBUG").arg(key), key)?;
    fn field<T: std::str::FromStr>(line: &str, name: &str) -> Result<T> {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix(':')))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Error::Protocol(format!("BF.DEBUG line without a number for {name}: {line}")))
    }
    let total: u64 =
        field(lines.first().ok_or_else(|| Error::Protocol("an empty BF.DEBUG reply".into()))?, "size")?;
    let mut subs = Vec::new();
    for line in &lines[1..] {
        subs.push(SubFilterInfo {
            bytes: field(line, "bytes")?,
            hashes: field(line, "hashes")?,
            capacity: field(line, "capacity")?,
            items: field(line, "size")?,
            error: field(line, "ratio")?,
        });
    }
    Ok((total, subs))
}

/// Estimated false-positive rate from item counts, `1 - Π(1 - (1 -
/// e^(-k n / m))^k)`, as its base-10 logarithm (a near-empty filter's rate
/// is far below what an f64 holds).
pub fn log10_estimated_rate(subs: &[SubFilterInfo]) -> f64 {
    let rates: Vec<f64> = subs
        .iter()
        .map(|s| {
            bloomkit_core::common::sizing::log10_false_positive_rate(
                (s.bytes * 8) as f64,
                s.hashes as f64,
                s.items as f64,
            )
        })
        .collect();
    bloomkit_core::common::sizing::log10_combined_rate(&rates)
}

/// What a key holds, from `TYPE`.
#[derive(Debug, PartialEq)]
pub enum Kind {
    Bloom,
    Window,
    /// valkey-bloom's `bloomfltr`, served by bloomkit too.
    ValkeyBloom,
    /// A cuckoo filter (`MBbloomCF`).
    Cuckoo,
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
        "bloomfltr" => Kind::ValkeyBloom,
        "MBbloomCF" => Kind::Cuckoo,
        "string" => Kind::String,
        "none" => Kind::Missing,
        _ => Kind::Other(t),
    })
}

/// The error for a key that holds something bloomkit cannot read, naming it.
pub fn unreadable(server: &Server, key: &str, kind: &Kind) -> Error {
    match kind {
        Kind::Missing => transfer!("key '{key}' does not exist on {}", server.url),
        Kind::String => transfer!(
            "key '{key}' on {} holds a string: if it is a bitmap filter, pass --bitmap (and --layout \
             if another system wrote it) with the --capacity and --error-rate it was made with, or \
             --bits and --hashes",
            server.url
        ),
        Kind::Other(t) => transfer!(
            "key '{key}' on {} holds a {t}, not a filter bloomkit can read (a Bloom filter, a \
             sliding-window filter, or a bitmap filter with --bitmap)",
            server.url
        ),
        Kind::Bloom | Kind::Window | Kind::ValkeyBloom | Kind::Cuckoo => {
            transfer!("key '{key}' on {} is a filter of another kind", server.url)
        }
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
    progress: &dyn Progress,
) -> Result<u64> {
    let (iter, header) = window_scandump(server, key, 0)?;
    let body =
        apbf::state_body_len(&header).map_err(|e| transfer!("the server sent an unreadable header: {e}"))?;
    progress.set_length(body);
    out.write_all(&header)?;
    let mut written = header.len() as u64;
    scan_chunks(server, "APBF.SCANDUMP", key, iter as i64, |_, data| {
        out.write_all(&data)?;
        progress.inc(data.len() as u64);
        written += data.len() as u64;
        Ok(())
    })?;
    out.flush()?;
    // A write during the dump would tear the ring from its body (the copy
    // would then miss recent items): the header must not have moved.
    if written != header.len() as u64 + body || window_scandump(server, key, 0)?.1 != header {
        return Err(transfer!("the filter '{key}' changed during the dump; try again"));
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
    progress: &dyn Progress,
) -> Result<()> {
    let body = apbf::state_body_len(header).map_err(|e| transfer!("invalid sliding-window filter: {e}"))?;
    progress.set_length(body);
    stage_and_commit(server, &[key.to_string()], replace, |server, staging| {
        let staging = &staging[0];
        server.call::<()>(redis::cmd("APBF.LOADCHUNK").arg(staging).arg(0).arg(header), staging)?;
        arm_staging(server, staging)?;
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
            return Err(transfer!("the server did not load the filter as sent (its header differs)"));
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
    progress: &dyn Progress,
) -> Result<()> {
    let input = std::cell::RefCell::new(input);
    load_window(
        server,
        key,
        replace,
        header,
        |buf, len| {
            buf.resize(len, 0);
            input
                .borrow_mut()
                .read_exact(buf)
                .map_err(|e| transfer!("the file ends before the filter does: {e}"))?;
            Ok(())
        },
        || {
            let mut rest = [0u8; 1];
            if input.borrow_mut().read(&mut rest)? != 0 {
                return Err(transfer!("the file holds more than the filter its header describes"));
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
    progress: &dyn Progress,
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
                return Err(transfer!("the source filter '{key}' changed during the copy; try again"));
            }
            *buf = data;
            iter = next;
            Ok(())
        },
        // A write to the source meanwhile would tear ring from body.
        || match window_scandump(&mut from.borrow_mut(), key, 0)?.1 == header {
            true => Ok(()),
            false => Err(transfer!("the source filter '{key}' changed during the copy; try again")),
        },
        progress,
    )
}

/// `APBF.INFO`, as label and value pairs.
pub fn window_info(server: &mut Server, key: &str) -> Result<Vec<(String, String)>> {
    info_fields(server, key, "APBF.INFO")
}

/// The label and value pairs of an `*.INFO` command (`BF.INFO` of a
/// valkey-bloom filter, `CF.INFO`, `APBF.INFO`).
pub fn info_fields(server: &mut Server, key: &str, command: &str) -> Result<Vec<(String, String)>> {
    let values: Vec<redis::Value> = server.call(redis::cmd(command).arg(key), key)?;
    let text = |v: &redis::Value| match v {
        redis::Value::Int(i) => i.to_string(),
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Double(d) => d.to_string(),
        redis::Value::Nil => String::new(),
        other => format!("{other:?}"),
    };
    Ok(values.chunks(2).map(|p| (text(&p[0]), p.get(1).map(text).unwrap_or_default())).collect())
}

// ---- bitmap filters: in bitmap.rs; values moved whole: in value.rs ----

mod bitmap;
mod checked;
mod cuckoo;
mod value;
pub use bitmap::*;
pub use cuckoo::*;
pub use value::*;

// ---- every kind, one call ----

fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::Bloom => "Bloom filter",
        Kind::Window => "sliding-window filter",
        Kind::ValkeyBloom => "valkey-bloom filter",
        Kind::Cuckoo => "cuckoo filter",
        _ => "bitmap filter",
    }
}

/// Dumps `key` of any kind to `out` (a bitmap filter with `bitmap`'s
/// parameters); returns what it was.
pub fn dump_key(
    server: &mut Server,
    key: &str,
    bitmap: Option<BitmapParams>,
    out: impl Write,
    progress: &dyn Progress,
) -> Result<&'static str> {
    let kind = kind(server, key)?;
    match (&kind, bitmap) {
        (Kind::Bloom, _) => dump(server, key, out, progress)?,
        (Kind::Window, _) => {
            dump_window(server, key, out, progress)?;
        }
        (Kind::ValkeyBloom, _) => {
            dump_value(server, key, out, progress)?;
        }
        (Kind::Cuckoo, _) => {
            dump_cuckoo(server, key, out, progress)?;
        }
        (Kind::String | Kind::Missing, Some(b)) => {
            dump_bitmap(server, key, &b, out, progress)?;
        }
        (other, _) => return Err(unreadable(server, key, other)),
    }
    Ok(kind_name(&kind))
}

/// Restores a file of any kind into `key`, told by its first bytes;
/// returns what it held.
pub fn restore_file(
    server: &mut Server,
    key: &str,
    mut input: impl Read,
    replace: bool,
    progress: &dyn Progress,
) -> Result<&'static str> {
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic).map_err(|e| transfer!("the file is too short to be a filter: {e}"))?;
    if &magic == b"BLOOMKIT" {
        restore(server, key, std::io::Cursor::new(magic).chain(input), replace, progress)?;
        return Ok("Bloom filter");
    }
    if &magic == CUCKOO_MAGIC {
        restore_cuckoo(server, key, input, replace, progress)?;
        return Ok("cuckoo filter");
    }
    if &magic == VALUE_MAGIC {
        let type_name = restore_value(server, key, input, replace, progress)?;
        return Ok(match type_name.as_str() {
            "bloomfltr" => "valkey-bloom filter",
            "MBbloomCF" => "cuckoo filter",
            _ => "filter",
        });
    }
    if &magic == BITMAP_MAGIC {
        restore_bitmap(server, key, input, replace, progress)?;
        return Ok("bitmap filter");
    }
    match apbf::Apbf::header_len(&magic) {
        Ok(len) => {
            let mut header = magic.to_vec();
            header.resize(len, 0);
            input
                .read_exact(&mut header[8..])
                .map_err(|e| transfer!("the file ends inside the filter's header: {e}"))?;
            restore_window(server, key, &header, input, replace, progress)?;
            Ok("sliding-window filter")
        }
        Err(_) => Err(transfer!(
            "not a filter file: it starts with neither BLOOMKIT (a Bloom filter), BKAPBF (a \
             sliding-window filter), BKBITMAP (a bitmap filter), BKCUCKOO (a cuckoo filter) nor \
             BKMODVAL (a valkey-bloom filter, or an empty cuckoo filter)"
        )),
    }
}

/// Copies `key` of any kind from one server to another; returns what it was.
pub fn copy_key(
    from: &mut Server,
    to: &mut Server,
    key: &str,
    bitmap: Option<BitmapParams>,
    replace: bool,
    progress: &dyn Progress,
) -> Result<&'static str> {
    let kind = kind(from, key)?;
    match (&kind, bitmap) {
        (Kind::Bloom, _) => copy(from, to, key, replace, progress)?,
        (Kind::Window, _) => copy_window(from, to, key, replace, progress)?,
        (Kind::ValkeyBloom, _) => {
            copy_value(from, to, key, replace, progress)?;
        }
        (Kind::Cuckoo, _) => copy_cuckoo(from, to, key, replace, progress)?,
        // (A split bitmap's own key is missing: its parts are `{key}:i`.)
        (Kind::String | Kind::Missing, Some(b)) => copy_bitmap(from, to, key, &b, replace, progress)?,
        (other, _) => return Err(unreadable(from, key, other)),
    }
    Ok(kind_name(&kind))
}

#[cfg(test)]
mod tests {
    use super::staging_key;

    /// Redis Cluster's slot of a key (CRC16/XMODEM of its hash tag or of it).
    fn slot(key: &str) -> u16 {
        let k = key.as_bytes();
        let hashed = match k.iter().position(|&b| b == b'{') {
            Some(open) => match k[open + 1..].iter().position(|&b| b == b'}') {
                Some(close) if close > 0 => &k[open + 1..open + 1 + close],
                _ => k,
            },
            None => k,
        };
        crc16::State::<crc16::XMODEM>::calculate(hashed) % 16384
    }

    #[test]
    fn staging_keys_share_the_slot() {
        // (A key with braces but no tag, such as "x{}y", cannot be matched.)
        for key in ["clicks", "user:{42}:seen", "a:b:c", "{tag}rest"] {
            assert_eq!(slot(&staging_key(key)), slot(key), "{key} -> {}", staging_key(key));
            assert_ne!(staging_key(key), key);
        }
    }
}
