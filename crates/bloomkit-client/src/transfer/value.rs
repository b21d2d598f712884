//! Filters moved whole, as their server serialises them (`DUMP` /
//! `RESTORE`): valkey-bloom's `bloomfltr` values, empty cuckoo filters
//! (`MBbloomCF`) and RedisBloom's sketches (`CMSk-TYPE`, `TopK-TYPE`,
//! `TDIS-TYPE`). The payload is retargeted to RDB version 9 on the way
//! ([`bloomkit_core::common::payload`]), so a value dumped by Valkey 9 restores into
//! Redis 7 and back; a payload is at most the server's 512 MB bulk limit.

use std::io::{Read, Write};

use bloomkit_core::common::payload::{self, MODULE_VALUE_RDB_VERSION};

use super::checked::{CrcReader, CrcWriter};
use super::{require_command, stage_and_commit, Kind, Loader, Progress, Server, STAGING_TTL_MS};
use crate::error::{Error, Result};

/// The first bytes of a module-value file.
pub const VALUE_MAGIC: &[u8; 8] = b"BKMODVAL";

/// A key's `DUMP` payload and its type's name, checked.
fn dump_payload(server: &mut Server, key: &str) -> Result<(String, Vec<u8>)> {
    let type_name: String = server.call(redis::cmd("TYPE").arg(key), key)?;
    let payload: Option<Vec<u8>> = server.call(redis::cmd("DUMP").arg(key), key)?;
    let payload = payload.ok_or_else(|| Error::NotFound(key.to_string()))?;
    payload::check(&payload).map_err(|e| transfer!("'{key}' on {}: {e}", server.url))?;
    Ok((type_name, payload))
}

/// A module-value file: magic, version 1, the type's name, the `DUMP`
/// payload, then a CRC-32 of everything before it. Returns the bytes written.
pub fn dump_value(server: &mut Server, key: &str, out: impl Write, progress: &dyn Progress) -> Result<u64> {
    let (type_name, payload) = dump_payload(server, key)?;
    progress.set_length(payload.len() as u64);
    let mut file = CrcWriter::new(out, VALUE_MAGIC)?;
    file.write_all(&1u32.to_le_bytes())?;
    file.write_all(&(type_name.len() as u32).to_le_bytes())?;
    file.write_all(type_name.as_bytes())?;
    file.write_all(&(payload.len() as u64).to_le_bytes())?;
    file.write_all(&payload)?;
    progress.inc(payload.len() as u64);
    Ok(file.finish()?)
}

/// Restores a module-value file (its magic already read) into `key`:
/// `RESTORE` into a staging key, its type checked, then renamed over `key`.
/// Returns the type's name.
pub fn restore_value(
    server: &mut Server,
    key: &str,
    input: impl Read,
    replace: bool,
    progress: &dyn Progress,
) -> Result<String> {
    let mut file = CrcReader::new(input, VALUE_MAGIC, "filter file");
    let version = file.u32()?;
    if version != 1 {
        return Err(transfer!(
            "filter file version {version} is not supported (this bloomkit reads version 1)"
        ));
    }
    let name_len = file.u32()?;
    if name_len == 0 || name_len > 64 {
        return Err(transfer!("the filter file's type name is {name_len} bytes long: it is damaged"));
    }
    let type_name = String::from_utf8_lossy(&file.bytes(name_len as usize)?).into_owned();
    let len = file.u64()?;
    if len > 512 << 20 {
        return Err(transfer!(
            "the filter file claims a {len}-byte value, more than a server takes: it is damaged"
        ));
    }
    progress.set_length(len);
    let payload = file.bytes(len as usize)?;
    file.finish()?;
    restore_payload(server, key, &type_name, &payload, replace)?;
    progress.inc(len);
    Ok(type_name)
}

/// `RESTORE`s a payload of type `type_name` through a staging key.
fn restore_payload(
    server: &mut Server,
    key: &str,
    type_name: &str,
    payload: &[u8],
    replace: bool,
) -> Result<()> {
    let payload = payload::retarget(payload, MODULE_VALUE_RDB_VERSION).map_err(|e| transfer!("{e}"))?;
    let url = server.url.clone();
    // The command of the module that registers the value's type.
    let (command, what, loader) = match Kind::from_type_name(type_name) {
        Kind::ValkeyBloom => ("BF.LOAD", "a valkey-bloom filter".to_string(), Loader::BloomkitOrValkeyBloom),
        Kind::Cuckoo => ("CF.LOADCHUNK", "a cuckoo filter".to_string(), Loader::BloomkitOrRedisBloom),
        Kind::Sketch(s) => (s.info_command(), format!("a {}", s.name()), Loader::BloomkitOrRedisBloom),
        _ => ("", String::new(), Loader::Bloomkit),
    };
    if !command.is_empty() {
        require_command(server, command, &what, loader)?;
    }
    stage_and_commit(server, &[key.to_string()], replace, |server, staging| {
        let staging = &staging[0];
        let restored: Result<()> =
            server.call(redis::cmd("RESTORE").arg(staging).arg(STAGING_TTL_MS).arg(&payload), staging);
        restored.map_err(|e| match e {
            Error::Server(failure) if failure.message().to_ascii_lowercase().contains("bad data format") => {
                transfer!(
                    "the server at {url} cannot load a {type_name} value ({failure}): load bloomkit there"
                )
            }
            other => other,
        })?;
        let got: String = server.call(redis::cmd("TYPE").arg(staging), staging)?;
        if got != type_name {
            return Err(transfer!(
                "verification failed on {url}: the value loaded as {got}, not {type_name}"
            ));
        }
        Ok(())
    })
}

/// Copies a module value from one server to another through `DUMP` and `RESTORE`.
pub fn copy_value(
    from: &mut Server,
    to: &mut Server,
    key: &str,
    replace: bool,
    progress: &dyn Progress,
) -> Result<String> {
    let (type_name, payload) = dump_payload(from, key)?;
    progress.set_length(payload.len() as u64);
    restore_payload(to, key, &type_name, &payload, replace)?;
    progress.inc(payload.len() as u64);
    Ok(type_name)
}
