//! Expandable filters (`bkit-xflt`) between servers and files, chunk by
//! chunk (`XF.SCANDUMP` / `XF.LOADCHUNK`), so that a filter of any size
//! moves through a bounded buffer. The file is also a local expandable
//! filter's state file (`dedup --state` without a capacity):
//!
//! ```text
//! "BKXFFILE"  u32 version (1)
//! records: u64 iterator, u32 length, the chunk's bytes, as XF.SCANDUMP
//!          gave them: the first is the header (96 bytes, "BKXFLT01...",
//!          iterator 1; bloomkit 0.1's files: 80 bytes, "BKXFLT00..."),
//!          then the blocks; a record with iterator 0 ends them
//! u32 CRC-32 of everything before it
//! ```
//! A load is checked before its staging key replaces anything: the
//! server's header for the staged filter must be the one sent (its
//! parameters, seed, items and shape; a bloomkit 0.1 file is converted as
//! it loads, so only its completeness is checked), and the filter must be
//! complete (a filter still loading answers as empty). A
//! dump or copy watches the source key (`WATCH`), so a write meanwhile,
//! which would tear the chunks, is refused rather than copied.

use std::io::{Read, Write};

use bloomkit_core::xf::{deployment_key, Seed, XfFilter, CHUNK_BYTES, HEADER_LEN};
use bloomkit_core::Limits;

use super::checked::{CrcReader, CrcWriter};
use super::{
    arm_staging, info_fields, require_command, scan_chunks, stage_and_commit, Loader, Progress, Server,
};
use crate::error::{Error, Result};

/// The first bytes of an expandable filter file.
pub const XF_MAGIC: &[u8; 8] = b"BKXFFILE";

const VERSION: u32 = 1;

/// The largest record a file may hold: a chunk, or the header.
const MAX_RECORD: u64 = if CHUNK_BYTES > HEADER_LEN as u64 { CHUNK_BYTES } else { HEADER_LEN as u64 };

/// The header of bloomkit 0.1's files (encoding 0), which restore too.
const OLD_HEADER_LEN: usize = 80;

fn xf_scandump(server: &mut Server, key: &str, iter: u64) -> Result<(u64, Vec<u8>)> {
    server.call(redis::cmd("XF.SCANDUMP").arg(key).arg(iter), key)
}

fn xf_loadchunk(server: &mut Server, key: &str, iter: u64, data: &[u8]) -> Result<()> {
    server.call::<()>(redis::cmd("XF.LOADCHUNK").arg(key).arg(iter).arg(data), key)
}

/// `XF.INFO`, as label and value pairs.
pub fn xf_info(server: &mut Server, key: &str) -> Result<Vec<(String, String)>> {
    info_fields(server, key, "XF.INFO")
}

/// The bytes of slots a transfer moves, for progress: read off the filter's
/// SCANDUMP header (what its chunks will carry, the run index and the
/// padding words not being sent).
fn size(server: &mut Server, key: &str) -> Result<u64> {
    let (_, header) = xf_scandump(server, key, 0)?;
    Ok(XfFilter::header_data_len(&header).unwrap_or(0))
}

/// Runs `scan` with the source key watched; afterwards, a write to it in
/// the meantime (or a header that moved) is refused as `changed`.
fn watched<T>(
    server: &mut Server,
    key: &str,
    changed: impl FnOnce() -> Error,
    scan: impl FnOnce(&mut Server) -> Result<T>,
) -> Result<T> {
    server.call::<()>(redis::cmd("WATCH").arg(key), key)?;
    let result = scan(server);
    if result.is_err() {
        let _ = server.call::<()>(&redis::cmd("UNWATCH"), key);
        return result;
    }
    // An empty transaction: EXEC answers nil if a watched key was written.
    server.call::<()>(&redis::cmd("MULTI"), key)?;
    let exec: redis::Value = server.call(&redis::cmd("EXEC"), key)?;
    match exec {
        redis::Value::Nil => Err(changed()),
        _ => result,
    }
}

/// Streams an expandable filter into a file, chunk by chunk.
pub fn dump_xf(server: &mut Server, key: &str, out: impl Write, progress: &dyn Progress) -> Result<u64> {
    progress.set_length(size(server, key)?);
    watched(
        server,
        key,
        || transfer!("the filter '{key}' changed during the dump; try again"),
        |server| {
            let mut out = CrcWriter::new(out, XF_MAGIC)?;
            out.write_all(&VERSION.to_le_bytes())?;
            let (first, header) = xf_scandump(server, key, 0)?;
            write_record(&mut out, first, &header)?;
            scan_chunks(server, "XF.SCANDUMP", key, first as i64, |next, data| {
                write_record(&mut out, next as u64, &data)?;
                progress.inc(data.len() as u64);
                Ok(())
            })?;
            out.write_all(&0u64.to_le_bytes())?; // the end of the records
            if xf_scandump(server, key, 0)?.1 != header {
                return Err(transfer!("the filter '{key}' changed during the dump; try again"));
            }
            Ok(out.finish()?)
        },
    )
}

fn write_record(out: &mut impl Write, iter: u64, data: &[u8]) -> std::io::Result<()> {
    out.write_all(&iter.to_le_bytes())?;
    out.write_all(&(data.len() as u32).to_le_bytes())?;
    out.write_all(data)
}

/// Reads a file's records (its magic already read) in order, each handed
/// to `each` with its iterator; then its checksum.
fn read_records(input: impl Read, mut each: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
    let mut file = CrcReader::new(input, XF_MAGIC, "expandable filter file");
    let version = file.u32()?;
    if version != VERSION {
        return Err(transfer!(
            "expandable filter file version {version} is not supported (this bloomkit reads {VERSION})"
        ));
    }
    loop {
        let iter = file.u64()?;
        if iter == 0 {
            break;
        }
        let len = file.u32()?;
        if u64::from(len) > MAX_RECORD {
            return Err(transfer!("the expandable filter file claims a {len}-byte chunk: it is damaged"));
        }
        let data = file.bytes(len as usize)?;
        each(iter, &data)?;
    }
    file.finish()
}

/// Checks a staged filter against the header it was loaded from: the same
/// header now, and no chunk missing.
fn verify(server: &mut Server, staging: &str, header: &[u8], url: &str) -> Result<()> {
    // bloomkit 0.1's header describes the filter before its conversion.
    let converted = header.len() == OLD_HEADER_LEN;
    if !converted && xf_scandump(server, staging, 0)?.1 != header {
        return Err(transfer!(
            "verification failed on {url}: the server did not load the filter as sent (its header differs)"
        ));
    }
    // A filter still loading has no chunks to give: the load was cut short.
    if xf_scandump(server, staging, 1)?.0 == 0 {
        return Err(transfer!("verification failed on {url}: the filter's last chunks are missing"));
    }
    Ok(())
}

/// Reads an expandable filter file (its magic already read) into `key`:
/// the chunks into a staging key, then the file's checksum and the loaded
/// filter checked before the staging key replaces anything.
pub fn restore_xf(
    server: &mut Server,
    key: &str,
    input: impl Read,
    replace: bool,
    progress: &dyn Progress,
) -> Result<()> {
    let url = server.url.clone();
    require_command(server, "XF.LOADCHUNK", "an expandable filter", Loader::Bloomkit)?;
    stage_and_commit(server, &[key.to_string()], replace, |server, staging| {
        let staging = &staging[0];
        let mut header = None;
        read_records(input, |iter, data| {
            // The server checks each chunk's slots as it arrives, before
            // the file's checksum at its end.
            // (Only the server's own reply blames the file: a reply the
            // redis crate could not read, an unknown command's echo of the
            // chunk, says nothing of it.)
            xf_loadchunk(server, staging, iter, data).map_err(|e| match e {
                Error::Server(failure)
                    if failure.code().is_some() && failure.message().contains("invalid") =>
                {
                    transfer!(
                        "the expandable filter file is damaged: the server refused it ({})",
                        failure.message().trim_start_matches("ERR ")
                    )
                }
                other => other,
            })?;
            if header.is_none() {
                if iter != 1 || (data.len() != HEADER_LEN && data.len() != OLD_HEADER_LEN) {
                    return Err(transfer!("the expandable filter file does not start with a header"));
                }
                arm_staging(server, staging)?;
                progress.set_length(XfFilter::header_data_len(data).unwrap_or(0));
                header = Some(data.to_vec());
                return Ok(());
            }
            progress.inc(data.len() as u64);
            Ok(())
        })?;
        let header = header.ok_or_else(|| transfer!("the expandable filter file holds no filter"))?;
        verify(server, staging, &header, &url)
    })
}

/// Copies an expandable filter chunk by chunk; a write to the source
/// meanwhile is refused rather than copied torn.
pub fn copy_xf(
    from: &mut Server,
    to: &mut Server,
    key: &str,
    replace: bool,
    progress: &dyn Progress,
) -> Result<()> {
    progress.set_length(size(from, key)?);
    let url = to.url.clone();
    require_command(to, "XF.LOADCHUNK", "an expandable filter", Loader::Bloomkit)?;
    watched(
        from,
        key,
        || transfer!("the source filter '{key}' changed during the copy; try again"),
        |from| {
            stage_and_commit(to, &[key.to_string()], replace, |to, staging| {
                let staging = &staging[0];
                let (first, header) = xf_scandump(from, key, 0)?;
                xf_loadchunk(to, staging, first, &header)?;
                arm_staging(to, staging)?;
                let loaded = scan_chunks(from, "XF.SCANDUMP", key, first as i64, |next, data| {
                    xf_loadchunk(to, staging, next as u64, &data)?;
                    progress.inc(data.len() as u64);
                    Ok(())
                });
                // A write to the source meanwhile tears its chunks, which the
                // destination may refuse before the copy ends: that is said
                // first, as what happened, rather than the refusal it caused.
                if xf_scandump(from, key, 0)?.1 != header {
                    return Err(transfer!("the source filter '{key}' changed during the copy; try again"));
                }
                loaded?;
                verify(to, staging, &header, &url)
            })
        },
    )
}

// ---- local filters ----

/// Writes an in-process expandable filter in the file format above: the
/// same bytes a dump of the same filter on a server writes.
pub(crate) fn write_file(filter: &XfFilter, out: impl Write) -> Result<u64> {
    let mut out = CrcWriter::new(out, XF_MAGIC)?;
    out.write_all(&VERSION.to_le_bytes())?;
    let mut iter = 0;
    while let Some((next, data)) = filter.chunk_at(iter) {
        write_record(&mut out, next, &data)?;
        iter = next;
    }
    out.write_all(&0u64.to_le_bytes())?;
    Ok(out.finish()?)
}

/// Reads a file written by [`write_file`] or a dump (its magic already
/// read) into an in-process filter, every slot checked as the module
/// checks `XF.LOADCHUNK`'s.
pub(crate) fn read_file(input: impl Read) -> Result<XfFilter> {
    let mut filter: Option<XfFilter> = None;
    read_records(input, |iter, data| {
        match &mut filter {
            None if iter == 1 => filter = Some(XfFilter::from_header(data, Limits::NONE)?),
            None => return Err(transfer!("the expandable filter file does not start with a header")),
            Some(f) => f.load_chunk(iter, data, Limits::NONE)?,
        }
        Ok(())
    })?;
    match filter {
        Some(mut f) if !f.is_loading() => {
            // A filter made by a server without SEED hashes with that
            // server's secret, which no file carries: only a process
            // started with the same secret pinned (BLOOMKIT_HASH_SEED, as
            // the test suites run) can read it.
            let pinned = Seed::from_environment().map(deployment_key);
            if f.unseal(|_| pinned) {
                return Ok(f);
            }
            let id = f.hashing().key_id().unwrap_or(0);
            Err(transfer!(
                "the expandable filter file holds a filter a server made under its own secret (id {id:016x}): \
                 it restores into that server, or one that shares its secret, but cannot be read in process; \
                 dump a filter made with XF.RESERVE ... SEED to use it here"
            ))
        }
        Some(_) => Err(transfer!("the expandable filter file ends before the filter does: it is cut short")),
        None => Err(transfer!("the expandable filter file holds no filter")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(n: u64) -> XfFilter {
        let mut f = XfFilter::new(0.01, 100, 1 << 20, Limits::NONE).unwrap();
        for i in 0..n {
            f.insert(&i.to_le_bytes(), Limits::NONE).unwrap();
        }
        f
    }

    fn read(bytes: &[u8]) -> Result<XfFilter> {
        assert_eq!(&bytes[..8], XF_MAGIC);
        read_file(&bytes[8..])
    }

    /// A server's filter made without SEED keeps its secret on the server:
    /// its file says so, and is read only where that secret is pinned.
    #[test]
    fn a_filter_of_a_servers_secret_is_read_only_under_that_secret() {
        let write = |secret: Seed| {
            let params =
                bloomkit_core::xf::XfParams { error_rate: 0.01, capacity: 100, max_capacity: 1 << 20 };
            let hashing = bloomkit_core::xf::Hashing::Deployment(deployment_key(secret));
            let mut f = XfFilter::with_hashing(params, hashing, Limits::NONE).unwrap();
            f.insert(b"item", Limits::NONE).unwrap();
            let mut bytes = Vec::new();
            write_file(&f, &mut bytes).unwrap();
            bytes
        };
        let e = read(&write(Seed([0x5eed, 0x5ec2e7]))).err().unwrap().to_string();
        assert!(e.contains("made under its own secret") && e.contains("XF.RESERVE ... SEED"), "{e}");
        if let Some(pinned) = Seed::from_environment() {
            assert!(read(&write(pinned)).unwrap().contains(b"item"));
        }
    }

    #[test]
    fn files_round_trip_and_damage_is_refused() {
        // 210 items: a doubling under way, two tables in the file.
        for n in [0, 50, 210, 3000] {
            let f = filter(n);
            let mut bytes = Vec::new();
            let len = write_file(&f, &mut bytes).unwrap();
            assert_eq!(len, bytes.len() as u64);
            let back = read(&bytes).unwrap();
            assert_eq!(back.info(), f.info());
            let mut again = Vec::new();
            write_file(&back, &mut again).unwrap();
            assert_eq!(again, bytes, "{n} items: a file read and written again is the same bytes");
            assert!((0..n).all(|i| back.contains(&i.to_le_bytes())));
        }
        let mut bytes = Vec::new();
        write_file(&filter(500), &mut bytes).unwrap();
        for cut in [9, 20, 100, bytes.len() - 5, bytes.len() - 1] {
            assert!(read(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in [8, 12, 40, 200, bytes.len() - 2] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(read(&damaged).is_err(), "a flip at {at}");
        }
    }
}
