//! Module values in the server's own serialisation: the bytes `DUMP`
//! returns for a module key and `RESTORE` takes, written and read field by
//! field over [`FieldWriter`] and [`FieldReader`].
//!
//! A payload is `0x07` (a module value with opcodes), the module type id as
//! an RDB length, one opcode and its data per `RedisModule_Save*` call
//! (unsigned 2, float 3, double 4, string 5), the end opcode 0, the RDB
//! version (2 bytes LE) and the CRC-64 of all that. Strings use the RDB
//! string forms: a length then the bytes, an integer encoding for short
//! numeric strings, or LZF when the server compresses (`rdbcompression`).
//!
//! Families use it where they must produce a payload without the server
//! (an AOF rewrite as `RESTORE`, as RedisBloom does), and tests and fuzzers
//! use it to read the payloads RedisBloom wrote.

use crate::common::fields::{FieldError, FieldReader, FieldWriter};
use crate::common::payload::{self, seal, MODULE_VALUE_RDB_VERSION};

const RDB_TYPE_MODULE_2: u8 = 7;
const OPCODE_EOF: u8 = 0;
const OPCODE_UINT: u8 = 2;
const OPCODE_FLOAT: u8 = 3;
const OPCODE_DOUBLE: u8 = 4;
const OPCODE_STRING: u8 = 5;

/// The 64-bit id the server stores for a module type: its nine characters,
/// six bits each over `A-Z a-z 0-9 - _`, first character highest, then the
/// encoding version in the low 10 bits. `None` for a name it would refuse.
pub const fn module_type_id(name: &str, encver: u32) -> Option<u64> {
    let name = name.as_bytes();
    if name.len() != 9 || encver >= 1024 {
        return None;
    }
    let mut id = 0u64;
    let mut i = 0;
    while i < name.len() {
        let c = name[i];
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        id = (id << 6) | v as u64;
        i += 1;
    }
    Some((id << 10) | encver as u64)
}

/// [`module_type_id`] of a family's own type, at compile time.
pub const fn own_type_id(name: &str, encver: i32) -> u64 {
    match module_type_id(name, encver as u32) {
        Some(id) => id,
        None => panic!("not a module type name"),
    }
}

/// Writes a module value as a `DUMP` payload, strings uncompressed, framed
/// for RDB version 9, which every server that loads module values restores.
pub struct PayloadWriter(Vec<u8>);

impl PayloadWriter {
    pub fn new(type_id: u64) -> PayloadWriter {
        let mut w = PayloadWriter(vec![RDB_TYPE_MODULE_2]);
        w.length(type_id);
        w
    }

    fn length(&mut self, v: u64) {
        match v {
            0..=0x3f => self.0.push(v as u8),
            0x40..=0x3fff => self.0.extend_from_slice(&[0x40 | (v >> 8) as u8, v as u8]),
            0x4000..=0xffff_ffff => {
                self.0.push(0x80);
                self.0.extend_from_slice(&(v as u32).to_be_bytes());
            }
            _ => {
                self.0.push(0x81);
                self.0.extend_from_slice(&v.to_be_bytes());
            }
        }
    }

    /// The sealed payload: end opcode, RDB version and checksum.
    pub fn finish(self) -> Vec<u8> {
        self.finish_for(MODULE_VALUE_RDB_VERSION)
    }

    /// The payload framed for `rdb_version` (a test comparing with a
    /// server's own DUMP gives that server's).
    pub fn finish_for(mut self, rdb_version: u16) -> Vec<u8> {
        self.0.push(OPCODE_EOF);
        self.0.extend_from_slice(&rdb_version.to_le_bytes());
        seal(&self.0)
    }
}

impl FieldWriter for PayloadWriter {
    fn unsigned(&mut self, v: u64) {
        self.0.push(OPCODE_UINT);
        self.length(v);
    }
    fn double(&mut self, v: f64) {
        self.0.push(OPCODE_DOUBLE);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn buffer(&mut self, v: &[u8]) {
        self.0.push(OPCODE_STRING);
        self.length(v.len() as u64);
        self.0.extend_from_slice(v);
    }
}

/// Reads the fields of a `DUMP` payload of a module value. Nothing is
/// trusted: a string's length is compared with what is left before
/// anything is allocated, and LZF data must expand to exactly its length.
pub struct PayloadReader<'a> {
    value: &'a [u8],
    pos: usize,
    /// The module type id the payload names.
    pub type_id: u64,
}

impl<'a> PayloadReader<'a> {
    /// Checks the frame and the checksum, then reads the type id.
    pub fn new(payload: &'a [u8]) -> Result<PayloadReader<'a>, FieldError> {
        payload::check(payload).map_err(|_| FieldError)?;
        let value = &payload[..payload.len() - 10];
        let mut r = PayloadReader { value, pos: 1, type_id: 0 };
        r.type_id = r.length()?.0;
        Ok(r)
    }

    /// True once every field was read and only the end opcode is left.
    pub fn at_end(&self) -> bool {
        self.value.get(self.pos..) == Some(&[OPCODE_EOF][..])
    }

    fn byte(&mut self) -> Result<u8, FieldError> {
        let b = *self.value.get(self.pos).ok_or(FieldError)?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], FieldError> {
        let n = usize::try_from(n).map_err(|_| FieldError)?;
        let end = self.pos.checked_add(n).ok_or(FieldError)?;
        let v = self.value.get(self.pos..end).ok_or(FieldError)?;
        self.pos = end;
        Ok(v)
    }

    /// An RDB length, and whether it is a special (encoded string) form.
    fn length(&mut self) -> Result<(u64, bool), FieldError> {
        let t = self.byte()?;
        Ok(match t >> 6 {
            0 => (u64::from(t & 0x3f), false),
            1 => ((u64::from(t & 0x3f) << 8) | u64::from(self.byte()?), false),
            2 => match t {
                0x80 => (u64::from(u32::from_be_bytes(self.take(4)?.try_into().expect("4"))), false),
                0x81 => (u64::from_be_bytes(self.take(8)?.try_into().expect("8")), false),
                _ => return Err(FieldError),
            },
            _ => (u64::from(t & 0x3f), true),
        })
    }

    fn opcode(&mut self, want: u8) -> Result<(), FieldError> {
        if self.byte()? == want {
            Ok(())
        } else {
            Err(FieldError)
        }
    }
}

/// LZF decompression to exactly `out_len` bytes.
fn lzf(data: &[u8], out_len: usize) -> Result<Vec<u8>, FieldError> {
    let mut out = Vec::new();
    out.try_reserve_exact(out_len).map_err(|_| FieldError)?;
    let mut i = 0;
    while i < data.len() {
        let ctrl = usize::from(data[i]);
        i += 1;
        if ctrl < 32 {
            let lit = data.get(i..i + ctrl + 1).ok_or(FieldError)?;
            if out.len() + lit.len() > out_len {
                return Err(FieldError);
            }
            out.extend_from_slice(lit);
            i += ctrl + 1;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*data.get(i).ok_or(FieldError)?);
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*data.get(i).ok_or(FieldError)?) + 1;
            i += 1;
            if back > out.len() || out.len() + len + 2 > out_len {
                return Err(FieldError);
            }
            for _ in 0..len + 2 {
                out.push(out[out.len() - back]);
            }
        }
    }
    if out.len() != out_len {
        return Err(FieldError);
    }
    Ok(out)
}

impl FieldReader for PayloadReader<'_> {
    fn unsigned(&mut self) -> Result<u64, FieldError> {
        self.opcode(OPCODE_UINT)?;
        match self.length()? {
            (v, false) => Ok(v),
            _ => Err(FieldError),
        }
    }

    fn double(&mut self) -> Result<f64, FieldError> {
        self.opcode(OPCODE_DOUBLE)?;
        Ok(f64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn buffer(&mut self) -> Result<Box<[u8]>, FieldError> {
        self.opcode(OPCODE_STRING)?;
        match self.length()? {
            (len, false) => Ok(self.take(len)?.into()),
            // Short numeric strings the server stored as integers.
            (0, true) => Ok((self.byte()? as i8).to_string().into_bytes().into()),
            (1, true) => {
                Ok(i16::from_le_bytes(self.take(2)?.try_into().expect("2")).to_string().into_bytes().into())
            }
            (2, true) => {
                Ok(i32::from_le_bytes(self.take(4)?.try_into().expect("4")).to_string().into_bytes().into())
            }
            (3, true) => {
                let (clen, _) = self.length()?;
                let (ulen, _) = self.length()?;
                let data = self.take(clen)?;
                let ulen = usize::try_from(ulen).map_err(|_| FieldError)?;
                // LZF expands at most about 264 times: a larger claim is damage.
                if ulen > data.len().saturating_mul(264) {
                    return Err(FieldError);
                }
                Ok(lzf(data, ulen)?.into())
            }
            _ => Err(FieldError),
        }
    }
}

/// A float field (`RedisModule_SaveFloat`), which [`FieldReader`] does not
/// name: for the families that store one.
impl PayloadReader<'_> {
    pub fn float(&mut self) -> Result<f32, FieldError> {
        self.opcode(OPCODE_FLOAT)?;
        Ok(f32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ids_are_the_servers() {
        assert_eq!(module_type_id("CMSk-TYPE", 0), Some(0x08c4a4f9360f1000));
        assert_eq!(module_type_id("TopK-TYPE", 0), Some(0x4e8a4af9360f1000));
        assert_eq!(module_type_id("TDIS-TYPE", 0), Some(0x4c3212f9360f1000));
        assert_eq!(module_type_id("short", 0), None);
        assert_eq!(module_type_id("CMSk TYPE", 0), None);
    }

    #[test]
    fn written_payloads_read_back() {
        let mut w = PayloadWriter::new(0x08c4a4f9360f1000);
        for v in [0u64, 63, 64, 0x3fff, 0x4000, u64::from(u32::MAX) + 1] {
            w.unsigned(v);
        }
        w.double(-2.5);
        w.buffer(b"");
        w.buffer(&[7u8; 300]);
        let p = w.finish();
        assert_eq!(payload::version(&p), Ok(MODULE_VALUE_RDB_VERSION));
        let mut r = PayloadReader::new(&p).unwrap();
        assert_eq!(r.type_id, 0x08c4a4f9360f1000);
        for v in [0u64, 63, 64, 0x3fff, 0x4000, u64::from(u32::MAX) + 1] {
            assert_eq!(r.unsigned(), Ok(v));
        }
        assert_eq!(r.double(), Ok(-2.5));
        assert_eq!(&*r.buffer().unwrap(), b"");
        assert_eq!(&*r.buffer().unwrap(), &[7u8; 300][..]);
        assert!(r.at_end());
        assert_eq!(r.unsigned(), Err(FieldError));
    }

    #[test]
    fn lzf_refuses_what_does_not_expand_exactly() {
        // A literal run of 3 bytes, then a back-reference of 4 bytes to offset 1.
        let data = [2, b'a', b'b', b'c', 0x40, 0];
        assert_eq!(lzf(&data, 7).unwrap(), b"abccccc");
        assert!(lzf(&data, 6).is_err());
        assert!(lzf(&data, 8).is_err());
        assert!(lzf(&[0x40, 5], 3).is_err(), "reference before the start");
        assert!(lzf(&[5, b'a'], 6).is_err(), "literal past the input");
    }
}
