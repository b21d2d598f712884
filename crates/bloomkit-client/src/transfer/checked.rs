//! The checksummed framing every transfer file shares (BKBITMAP, BKCUCKOO,
//! BKMODVAL): little-endian fields, then a CRC-32 of everything before it.

use std::io::{Read, Write};

use crate::error::Result;

/// Writes a file, keeping its CRC-32 and length as it goes.
pub(super) struct CrcWriter<W: Write> {
    inner: W,
    crc: crc32fast::Hasher,
    written: u64,
}

impl<W: Write> CrcWriter<W> {
    /// Starts a file with its magic (part of the checksum).
    pub fn new(inner: W, magic: &[u8]) -> std::io::Result<CrcWriter<W>> {
        let mut w = CrcWriter { inner, crc: crc32fast::Hasher::new(), written: 0 };
        w.write_all(magic)?;
        Ok(w)
    }

    /// Ends the file with its checksum; returns the bytes written in all.
    pub fn finish(mut self) -> std::io::Result<u64> {
        let crc = self.crc.clone().finalize();
        self.inner.write_all(&crc.to_le_bytes())?;
        self.inner.flush()?;
        Ok(self.written + 4)
    }
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Reads a file whose magic was read already, keeping its CRC-32; `what`
/// names it in errors ("bitmap file").
pub(super) struct CrcReader<R: Read> {
    input: R,
    crc: crc32fast::Hasher,
    what: &'static str,
}

impl<R: Read> CrcReader<R> {
    pub fn new(input: R, magic: &[u8], what: &'static str) -> CrcReader<R> {
        let mut crc = crc32fast::Hasher::new();
        crc.update(magic);
        CrcReader { input, crc, what }
    }

    pub fn bytes(&mut self, n: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; n];
        self.input
            .read_exact(&mut buf)
            .map_err(|_| transfer!("the {} ends early: it is cut short", self.what))?;
        self.crc.update(&buf);
        Ok(buf)
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes(4)?.try_into().expect("4 bytes")))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes(8)?.try_into().expect("8 bytes")))
    }

    /// Reads the stored checksum and compares it with what was read.
    pub fn finish(&mut self) -> Result<()> {
        let mut stored = [0u8; 4];
        self.input
            .read_exact(&mut stored)
            .map_err(|_| transfer!("the {} ends before its checksum: it is cut short", self.what))?;
        if u32::from_le_bytes(stored) != self.crc.clone().finalize() {
            return Err(transfer!("the {}'s checksum does not match: it is damaged", self.what));
        }
        Ok(())
    }
}
