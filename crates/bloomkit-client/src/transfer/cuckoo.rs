//! Cuckoo filters (`MBbloomCF`) between servers and files, chunk by chunk
//! (`CF.SCANDUMP` / `CF.LOADCHUNK`, as bloomkit and RedisBloom both speak
//! them), so that a filter of any size moves through a bounded buffer.
//!
//! ```text
//! "BKCUCKOO"  u32 version (1)
//! records: u64 iterator, u32 length, the chunk's bytes; a record with
//!          iterator 0 ends them
//! CF.INFO of the source: u64 count, then (u32 length, label, i64 value)...
//! u32 CRC-32 of everything before it
//! ```
//! A filter with no items has no chunks (`CF.SCANDUMP` answers `[0, nil]`
//! at once, in RedisBloom and bloomkit alike); it moves whole instead
//! (`DUMP`/`RESTORE`, the module-value format), where it is small: the
//! dispatch in `transfer` picks which, so that this file stands alone.

use std::io::{Read, Write};

use super::checked::{CrcReader, CrcWriter};
use super::{arm_staging, require_command, stage_and_commit, Loader, Progress, Server};
use crate::error::Result;

/// The first bytes of a cuckoo filter file.
pub const CUCKOO_MAGIC: &[u8; 8] = b"BKCUCKOO";

/// Chunk sizes a server sends are at most this; larger in a file is damage.
const MAX_CHUNK: u32 = bloomkit_core::common::MAX_CHUNK as u32;

fn cf_scandump(server: &mut Server, key: &str, iter: i64) -> Result<(i64, Vec<u8>)> {
    let (next, data): (i64, Option<Vec<u8>>) =
        server.call(redis::cmd("CF.SCANDUMP").arg(key).arg(iter), key)?;
    Ok((next, data.unwrap_or_default()))
}

/// `CF.INFO`'s numbers: what a loaded copy must report too.
fn cf_info(server: &mut Server, key: &str) -> Result<Vec<(String, i64)>> {
    Ok(super::info_fields(server, key, "CF.INFO")?
        .into_iter()
        .filter_map(|(label, value)| value.parse().ok().map(|v| (label, v)))
        .collect())
}

/// `CF.INFO Size`: the bytes a transfer moves, for progress.
fn info_size(info: &[(String, i64)]) -> u64 {
    info.iter().find(|(l, _)| l == "Size").map_or(0, |(_, v)| *v as u64)
}

/// Whether the filter has chunks to scan (a filter with no items has none).
pub(super) fn has_chunks(server: &mut Server, key: &str) -> Result<bool> {
    Ok(cf_scandump(server, key, 0)?.0 != 0)
}

/// Streams a cuckoo filter that has chunks into a file: its chunks, then
/// its `CF.INFO` ([`super::dump_cuckoo`] picks this or a whole value).
pub(super) fn dump_chunks(
    server: &mut Server,
    key: &str,
    out: impl Write,
    progress: &dyn Progress,
) -> Result<u64> {
    let info = cf_info(server, key)?;
    progress.set_length(info_size(&info));
    let mut out = CrcWriter::new(out, CUCKOO_MAGIC)?;
    out.write_all(&1u32.to_le_bytes())?;
    super::scan_chunks(server, "CF.SCANDUMP", key, 0, |next, data| {
        out.write_all(&(next as u64).to_le_bytes())?;
        out.write_all(&(data.len() as u32).to_le_bytes())?;
        out.write_all(&data)?;
        progress.inc(data.len() as u64);
        Ok(())
    })?;
    out.write_all(&0u64.to_le_bytes())?; // the end of the chunks
                                         // A write meanwhile would have torn the chunks: refuse the file.
    if cf_info(server, key)? != info {
        return Err(transfer!("the filter '{key}' changed during the dump; try again"));
    }
    write_info(&mut out, &info)?;
    Ok(out.finish()?)
}

fn write_info(out: &mut impl Write, info: &[(String, i64)]) -> std::io::Result<()> {
    out.write_all(&(info.len() as u64).to_le_bytes())?;
    for (label, value) in info {
        out.write_all(&(label.len() as u32).to_le_bytes())?;
        out.write_all(label.as_bytes())?;
        out.write_all(&value.to_le_bytes())?;
    }
    Ok(())
}

/// Reads a cuckoo filter file (its magic already read) into `key`: the
/// chunks into a staging key, then its `CF.INFO` and the file's checksum
/// checked before the staging key replaces anything.
pub fn restore_cuckoo(
    server: &mut Server,
    key: &str,
    input: impl Read,
    replace: bool,
    progress: &dyn Progress,
) -> Result<()> {
    let mut file = CrcReader::new(input, CUCKOO_MAGIC, "cuckoo filter file");
    let version = file.u32()?;
    if version != 1 {
        return Err(transfer!(
            "cuckoo filter file version {version} is not supported (this bloomkit reads 1)"
        ));
    }
    let url = server.url.clone();
    require_command(server, "CF.LOADCHUNK", "a cuckoo filter", Loader::BloomkitOrRedisBloom)?;
    stage_and_commit(server, &[key.to_string()], replace, |server, staging| {
        let staging = &staging[0];
        let mut first = true;
        loop {
            let next = file.u64()? as i64;
            if next == 0 {
                break;
            }
            let len = file.u32()?;
            if len > MAX_CHUNK {
                return Err(transfer!("the cuckoo filter file claims a {len}-byte chunk: it is damaged"));
            }
            let data = file.bytes(len as usize)?;
            server.call::<()>(redis::cmd("CF.LOADCHUNK").arg(staging).arg(next).arg(&data), staging)?;
            if first {
                arm_staging(server, staging)?;
                first = false;
            }
            progress.inc(u64::from(len));
        }
        let count = file.u64()?;
        if count > 64 {
            return Err(transfer!("the cuckoo filter file claims {count} info fields: it is damaged"));
        }
        let mut expected = Vec::new();
        for _ in 0..count {
            let len = file.u32()?;
            if len > 64 {
                return Err(transfer!("the cuckoo filter file's info label is {len} bytes: it is damaged"));
            }
            let label = String::from_utf8_lossy(&file.bytes(len as usize)?).into_owned();
            let value = file.u64()? as i64;
            expected.push((label, value));
        }
        file.finish()?;
        verify(server, staging, &expected, &url)
    })
}

/// After a load, the copy must report what the source did.
fn verify(server: &mut Server, staging: &str, expected: &[(String, i64)], url: &str) -> Result<()> {
    let got = cf_info(server, staging)?;
    for (label, value) in expected {
        if let Some((_, v)) = got.iter().find(|(l, _)| l == label) {
            if v != value {
                return Err(transfer!(
                    "verification failed on {url}: the loaded filter reports {label} {v}, the source {value}"
                ));
            }
        }
    }
    Ok(())
}

/// Copies a cuckoo filter that has chunks, chunk by chunk; a write to the
/// source meanwhile (its `CF.INFO` changed) is refused rather than copied
/// torn.
pub(super) fn copy_chunks(
    from: &mut Server,
    to: &mut Server,
    key: &str,
    replace: bool,
    progress: &dyn Progress,
) -> Result<()> {
    let info = cf_info(from, key)?;
    let url = to.url.clone();
    progress.set_length(info_size(&info));
    require_command(to, "CF.LOADCHUNK", "a cuckoo filter", Loader::BloomkitOrRedisBloom)?;
    stage_and_commit(to, &[key.to_string()], replace, |to, staging| {
        let staging = &staging[0];
        let mut first = true;
        super::scan_chunks(from, "CF.SCANDUMP", key, 0, |next, data| {
            to.call::<()>(redis::cmd("CF.LOADCHUNK").arg(staging).arg(next).arg(&data), staging)?;
            if std::mem::take(&mut first) {
                arm_staging(to, staging)?;
            }
            progress.inc(data.len() as u64);
            Ok(())
        })?;
        if cf_info(from, key)? != info {
            return Err(transfer!("the source filter '{key}' changed during the copy; try again"));
        }
        verify(to, staging, &info, &url)
    })
}
