//! Talking to a Redis/Valkey server: connections with errors that say what
//! to do, and moving filters between servers and files by SCANDUMP/LOADCHUNK.

use std::io::{Read, Write};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bloomkit_core::dump::{self, MAX_CHUNK};
use bloomkit_core::file::{FileReader, FileWriter};
use indicatif::ProgressBar;
use redis::{Cmd, FromRedisValue};

pub struct Server {
    pub url: String,
    con: redis::Connection,
}

impl Server {
    /// The connection, for the client library's filters.
    pub fn connection(&mut self) -> &mut redis::Connection {
        &mut self.con
    }
}

impl Server {
    pub fn connect(url: &str) -> Result<Server> {
        Ok(Server { url: url.to_string(), con: connection(url)? })
    }

    /// Runs a command, turning server errors into messages that say what to do.
    pub fn call<T: FromRedisValue>(&mut self, cmd: &Cmd, key: &str) -> Result<T> {
        cmd.query(&mut self.con).map_err(|e| explain(e, &self.url, key))
    }

    pub fn exists(&mut self, key: &str) -> Result<bool> {
        self.call(redis::cmd("EXISTS").arg(key), key)
    }
}

/// A connection, or an error that says what to check.
pub fn connection(url: &str) -> Result<redis::Connection> {
    let client = redis::Client::open(url)
        .map_err(|e| anyhow!("'{url}' is not a Redis URL ({e}); use redis://host:port[/db]"))?;
    client.get_connection_with_timeout(Duration::from_secs(5)).map_err(|e| {
        anyhow!("cannot reach the server at {url}: {e}; check that it is running and the URL is right")
    })
}

/// A server error in words a user can act on.
pub fn explain(e: redis::RedisError, url: &str, key: &str) -> anyhow::Error {
    let text = e.to_string();
    if text.contains("unknown command") {
        anyhow!(
            "the server at {url} has no Bloom filter module: load libbloomkit.so \
             (redis-server --loadmodule /path/to/libbloomkit.so) or RedisBloom"
        )
    } else if text.contains("WRONGTYPE") {
        anyhow!("key '{key}' on {url} holds another type of value, not a Bloom filter")
    } else if e.detail() == Some("not found") || text.ends_with(": not found") {
        anyhow!("key '{key}' does not exist on {url}")
    } else if e.is_io_error() || e.is_connection_dropped() {
        anyhow!("lost the connection to {url}: {text}")
    } else {
        anyhow!("{url}: {text}")
    }
}

fn scandump(server: &mut Server, key: &str, iter: i64) -> Result<(i64, Vec<u8>)> {
    server.call(redis::cmd("BF.SCANDUMP").arg(key).arg(iter), key)
}

fn loadchunk(server: &mut Server, key: &str, iter: i64, data: &[u8]) -> Result<()> {
    server.call::<()>(redis::cmd("BF.LOADCHUNK").arg(key).arg(iter).arg(data), key)
}

/// Streams a server's filter into a filter file.
pub fn dump(server: &mut Server, key: &str, out: impl Write, progress: &ProgressBar) -> Result<()> {
    let (_, header) = scandump(server, key, 0)?;
    let parsed = dump::parse_header(&header)
        .map_err(|e| anyhow!("the server sent a header bloomkit cannot read: {e}"))?;
    progress.set_length(parsed.links.iter().map(|(s, _)| s.bytes).sum());
    let mut writer = FileWriter::new(out, &header)?;
    scan_chunks(server, "BF.SCANDUMP", key, 1, |data| {
        writer.write_bits(&data)?;
        progress.inc(data.len() as u64);
        Ok(())
    })?;
    writer.finish()?;
    Ok(())
}

/// The chunks a SCANDUMP-style command (`BF.SCANDUMP`, `APBF.SCANDUMP`)
/// answers from `iter` on, until its next iterator is 0.
pub fn scan_chunks(
    server: &mut Server,
    command: &str,
    key: &str,
    mut iter: i64,
    mut each: impl FnMut(Vec<u8>) -> Result<()>,
) -> Result<()> {
    loop {
        let (next, data): (i64, Vec<u8>) = server.call(redis::cmd(command).arg(key).arg(iter), key)?;
        if next == 0 {
            return Ok(());
        }
        each(data)?;
        iter = next;
    }
}

/// A key name beside `key` for loading into before an atomic rename, in
/// the same hash slot so that RENAME works on a Redis Cluster: `key`'s own
/// hash tag is kept, or `key` becomes the tag.
fn staging_key(key: &str) -> String {
    let suffix = format!(":bloomkit-staging:{}", std::process::id());
    if bloomkit_client::has_hash_tag(key) || key.contains(['{', '}']) {
        format!("{key}{suffix}")
    } else {
        format!("{{{key}}}{suffix}")
    }
}

/// Loads into staging keys (one per key, each in its key's hash slot) with
/// `load`, then renames them over `keys` in one transaction, so that a
/// half-loaded filter is never visible and a failure leaves `keys` as they
/// were. Without `replace`, existing keys are refused, and a key created
/// meanwhile aborts the transaction (WATCH).
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
                    bail!("key '{key}' already exists on {}; pass --replace to overwrite it", server.url);
                }
            }
        }
        server.call::<i64>(redis::cmd("DEL").arg(&staging), &staging[0])?;
        load(server, &staging)?;
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (from, to) in staging.iter().zip(keys) {
            pipe.cmd("RENAME").arg(from).arg(to).ignore();
        }
        let committed: Option<()> =
            pipe.query(&mut server.con).map_err(|e| explain(e, &server.url, &keys[0]))?;
        if committed.is_none() {
            bail!(
                "key '{}' appeared on {} while loading; pass --replace to overwrite it",
                keys[0],
                server.url
            );
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
    progress: &ProgressBar,
) -> Result<()> {
    let parsed = dump::parse_header(header).map_err(|e| anyhow!("invalid filter header: {e}"))?;
    stage_and_commit(server, &[key.to_string()], replace, |server, staging| {
        let staging = &staging[0];
        loadchunk(server, staging, 1, header)?;
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
        before_commit()
    })?;
    verify(server, key, &parsed)
}

/// After a load, the server must report the items and capacity the header describes.
fn verify(server: &mut Server, key: &str, header: &dump::Header) -> Result<()> {
    let capacity: i64 = first(server.call(redis::cmd("BF.INFO").arg(key).arg("CAPACITY"), key)?)?;
    let items: i64 = first(server.call(redis::cmd("BF.INFO").arg(key).arg("ITEMS"), key)?)?;
    let expected_capacity: u64 = header.links.iter().map(|(s, _)| s.capacity).sum();
    if capacity as u64 != expected_capacity || items as u64 != header.items {
        bail!(
            "verification failed on {}: '{key}' reports capacity {capacity} and {items} items, \
             the dump has {expected_capacity} and {}",
            server.url,
            header.items
        );
    }
    Ok(())
}

fn first(values: Vec<i64>) -> Result<i64> {
    values.first().copied().context("BF.INFO returned no value")
}

/// Restores a filter file into `key`; the file's checksum is checked before
/// the restored filter replaces anything.
pub fn restore(
    server: &mut Server,
    key: &str,
    input: impl Read,
    replace: bool,
    progress: &ProgressBar,
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
    progress: &ProgressBar,
) -> Result<()> {
    let (_, header) = scandump(from, key, 0)?;
    let parsed =
        dump::parse_header(&header).map_err(|e| anyhow!("the source sent an unreadable header: {e}"))?;
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
                bail!("the source filter '{key}' changed during the copy; try again");
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

/// BF.DEBUG, parsed.
pub fn describe(server: &mut Server, key: &str) -> Result<(u64, Vec<SubFilterInfo>)> {
    let lines: Vec<String> = server.call(redis::cmd("BF.DEBUG").arg(key), key)?;
    let field = |line: &str, name: &str| -> Result<String> {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix(':')))
            .map(str::to_string)
            .with_context(|| format!("BF.DEBUG line without {name}: {line}"))
    };
    let total: u64 = field(lines.first().context("empty BF.DEBUG reply")?, "size")?.parse()?;
    let mut subs = Vec::new();
    for line in &lines[1..] {
        subs.push(SubFilterInfo {
            bytes: field(line, "bytes")?.parse()?,
            hashes: field(line, "hashes")?.parse()?,
            capacity: field(line, "capacity")?.parse()?,
            items: field(line, "size")?.parse()?,
            error: field(line, "ratio")?.parse()?,
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
            bloomkit_core::sizing::log10_false_positive_rate(
                (s.bytes * 8) as f64,
                s.hashes as f64,
                s.items as f64,
            )
        })
        .collect();
    bloomkit_core::sizing::log10_combined_rate(&rates)
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
