//! `DUMP` payloads, as Redis and Valkey frame them: the value's RDB
//! serialisation, the RDB version (2 bytes, little-endian) and a CRC-64
//! (Jones, as Redis's `crc64`) of everything before it.
//!
//! A server refuses `RESTORE` of a payload whose RDB version is newer than
//! its own (Valkey 9 writes 80, Redis 7.0 reads up to 10), although a module
//! value (`RDB_TYPE_MODULE_2`, module opcodes) reads the same under any
//! version since RDB 9. [`retarget`] rewrites the version so that such a
//! value moves between any two servers that load its module.

use std::fmt;

/// RDB version 9 (Redis 5): the first with module values in opcode form.
pub const MODULE_VALUE_RDB_VERSION: u16 = 9;

/// `RDB_TYPE_MODULE_2`: a module value, its fields framed by opcodes.
const RDB_TYPE_MODULE_2: u8 = 7;

const CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadError {
    TooShort,
    Checksum,
    NotAModuleValue(u8),
}

impl fmt::Display for PayloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PayloadError::TooShort => f.write_str("the DUMP payload is too short to hold a value"),
            PayloadError::Checksum => {
                f.write_str("the DUMP payload's checksum does not match: it is damaged")
            }
            PayloadError::NotAModuleValue(t) => {
                write!(f, "the DUMP payload holds RDB type {t}, not a module value (type 7)")
            }
        }
    }
}

impl std::error::Error for PayloadError {}

/// Redis's CRC-64 (Jones, reflected), which seals DUMP payloads and RDB files.
pub fn crc64(data: &[u8]) -> u64 {
    CRC.checksum(data)
}

/// Seals a payload body (the value and its RDB version) with its checksum.
pub fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 8);
    out.extend_from_slice(body);
    out.extend_from_slice(&crc64(body).to_le_bytes());
    out
}

/// The payload's RDB version.
pub fn version(payload: &[u8]) -> Result<u16, PayloadError> {
    check(payload)?;
    let at = payload.len() - 10;
    Ok(u16::from_le_bytes([payload[at], payload[at + 1]]))
}

/// Checks the frame and the checksum of a module value's payload (servers
/// always compute it for `DUMP`, and check it on `RESTORE`).
pub fn check(payload: &[u8]) -> Result<(), PayloadError> {
    if payload.len() < 11 {
        return Err(PayloadError::TooShort);
    }
    if payload[0] != RDB_TYPE_MODULE_2 {
        return Err(PayloadError::NotAModuleValue(payload[0]));
    }
    let (body, crc) = payload.split_at(payload.len() - 8);
    let stored = u64::from_le_bytes(crc.try_into().expect("8 bytes"));
    if stored != CRC.checksum(body) {
        return Err(PayloadError::Checksum);
    }
    Ok(())
}

/// The same module value framed for RDB `version`, with its checksum.
pub fn retarget(payload: &[u8], version: u16) -> Result<Vec<u8>, PayloadError> {
    check(payload)?;
    let mut body = payload[..payload.len() - 10].to_vec();
    body.extend_from_slice(&version.to_le_bytes());
    Ok(seal(&body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_redis_crc64() {
        assert_eq!(CRC.checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn retargeting_keeps_the_value_and_fixes_the_frame() {
        let mut payload = vec![7, 0x81, 1, 2, 3, 0];
        payload.extend_from_slice(&80u16.to_le_bytes());
        let crc = CRC.checksum(&payload);
        payload.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(version(&payload), Ok(80));
        let moved = retarget(&payload, MODULE_VALUE_RDB_VERSION).unwrap();
        assert_eq!(version(&moved), Ok(9));
        assert_eq!(moved[..6], payload[..6]);
        let mut damaged = payload.clone();
        damaged[3] ^= 1;
        assert_eq!(retarget(&damaged, 9), Err(PayloadError::Checksum));
        assert_eq!(retarget(&payload[..5], 9), Err(PayloadError::TooShort));
        payload[0] = 0;
        assert!(matches!(check(&payload), Err(PayloadError::NotAModuleValue(0))));
    }
}
