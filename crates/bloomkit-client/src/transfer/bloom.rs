//! Bloom filters (`MBbloom--`, bloomkit's or RedisBloom's) between servers
//! and files: `BF.SCANDUMP` / `BF.LOADCHUNK` chunk by chunk, in the BLOOMKIT
//! file format (the SCANDUMP header, the bit arrays, a CRC-32), which is
//! also a local filter's state file. What a load must report afterwards
//! comes from the header, so a restore is checked against the dump itself.

use std::io::{Read, Write};

use bloomkit_core::bf::file::{FileReader, FileWriter};
use bloomkit_core::bf::scandump as dump;
use bloomkit_core::common::MAX_CHUNK;

use super::{arm_staging, require_command, scan_chunks, stage_and_commit, Loader, Progress, Server};
use crate::error::{Error, Result};

/// The first bytes of a Bloom filter file.
pub const BLOOM_MAGIC: &[u8; 8] = bloomkit_core::bf::file::MAGIC;

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
    require_command(server, "BF.LOADCHUNK", "a Bloom filter", Loader::BloomkitOrRedisBloom)?;
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
