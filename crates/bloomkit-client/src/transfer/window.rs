//! Sliding-window filters (`bkit-apbf`) between servers and files:
//! `APBF.SCANDUMP` / `APBF.LOADCHUNK`, in the state-file format of a local
//! window (`dedup --window --state`). A window's ring moves with every add,
//! so each transfer checks that the header it started from is still the
//! one at its end, and refuses a torn copy rather than make one.

use std::io::{Read, Write};

use bloomkit_core::apbf;
use bloomkit_core::common::MAX_CHUNK;

use super::{
    arm_staging, info_fields, require_command, scan_chunks, stage_and_commit, Loader, Progress, Server,
};
use crate::error::Result;

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
    require_command(server, "APBF.LOADCHUNK", "a sliding-window filter", Loader::Bloomkit)?;
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

/// Whether a file starting with these bytes holds a window's state.
pub(super) fn is_window_file(magic: &[u8; 8]) -> bool {
    apbf::Apbf::header_len(magic).is_ok()
}

/// Restores a state file whose first bytes, `magic`, were read to tell its
/// kind: the rest of its header, then its body.
pub(super) fn restore_window_file(
    server: &mut Server,
    key: &str,
    magic: &[u8; 8],
    mut input: impl Read,
    replace: bool,
    progress: &dyn Progress,
) -> Result<()> {
    let len =
        apbf::Apbf::header_len(magic).map_err(|e| transfer!("not a sliding-window filter file: {e}"))?;
    let mut header = magic.to_vec();
    header.resize(len, 0);
    input
        .read_exact(&mut header[8..])
        .map_err(|e| transfer!("the file ends inside the filter's header: {e}"))?;
    restore_window(server, key, &header, input, replace, progress)
}
