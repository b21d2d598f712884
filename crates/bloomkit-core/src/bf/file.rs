//! bloomkit's filter file: what `bloomkit dump` writes, `bloomkit restore`
//! reads, and `bloomkit dedup --state` keeps between runs.
//!
//! ```text
//! "BLOOMKIT"  u32 version (1)  u32 header length  SCANDUMP header
//! bit arrays of the sub-filters, in order (the bytes of the SCANDUMP chunks)
//! u32 CRC-32 of everything before it
//! ```
//! All integers little-endian. The header is RedisBloom's, so a file moves
//! to and from any server that speaks `BF.SCANDUMP` / `BF.LOADCHUNK`.
//! Writing and reading stream, so a filter of any size passes through a
//! bounded buffer.

use std::fmt;
use std::io::{self, Read, Write};

use super::chain::Chain;
use super::errors::BfError;
use super::scandump as dump;
use crate::common::memory::Limits;

pub const MAGIC: &[u8; 8] = b"BLOOMKIT";
pub const VERSION: u32 = 1;
/// A header longer than this is not from a real filter (1 MiB holds 19 000 sub-filters).
const MAX_HEADER: u32 = 1 << 20;

#[derive(Debug)]
pub enum FileError {
    Io(io::Error),
    NotAFilterFile,
    UnsupportedVersion(u32),
    /// Cut short, a checksum mismatch, or trailing bytes.
    Corrupt(&'static str),
    Filter(BfError),
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io(e) => write!(f, "{e}"),
            FileError::NotAFilterFile => f.write_str("not a bloomkit filter file (no BLOOMKIT signature)"),
            FileError::UnsupportedVersion(v) => {
                write!(f, "filter file format version {v} is newer than this bloomkit reads (1)")
            }
            FileError::Corrupt(what) => f.write_str(what),
            FileError::Filter(e) => write!(f, "invalid filter in file: {e}"),
        }
    }
}

impl std::error::Error for FileError {}

/// A file that stops before the filter it describes does.
const CUT_SHORT: &str = "the filter file is cut short: it ends before the filter it describes \
     (an interrupted copy or dump?); dump the filter again";

impl From<io::Error> for FileError {
    fn from(e: io::Error) -> FileError {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            FileError::Corrupt(CUT_SHORT)
        } else {
            FileError::Io(e)
        }
    }
}

/// Writes a filter file from a header and the bit arrays that follow it.
pub struct FileWriter<W: Write> {
    out: W,
    crc: crc32fast::Hasher,
    remaining: u64,
}

impl<W: Write> FileWriter<W> {
    /// Starts a file with a SCANDUMP header (which says how many bytes follow).
    pub fn new(mut out: W, header: &[u8]) -> Result<FileWriter<W>, FileError> {
        let parsed = dump::parse_header(header).map_err(FileError::Filter)?;
        let remaining = parsed.links.iter().map(|(s, _)| s.bytes).sum();
        let mut crc = crc32fast::Hasher::new();
        let mut prefix = Vec::with_capacity(16 + header.len());
        prefix.extend_from_slice(MAGIC);
        prefix.extend_from_slice(&VERSION.to_le_bytes());
        prefix.extend_from_slice(&(header.len() as u32).to_le_bytes());
        prefix.extend_from_slice(header);
        crc.update(&prefix);
        out.write_all(&prefix)?;
        Ok(FileWriter { out, crc, remaining })
    }

    /// Appends bit-array bytes (a SCANDUMP chunk).
    pub fn write_bits(&mut self, data: &[u8]) -> Result<(), FileError> {
        if data.len() as u64 > self.remaining {
            return Err(FileError::Corrupt(
                "the filter file would get more bit-array bytes than its header describes",
            ));
        }
        self.remaining -= data.len() as u64;
        self.crc.update(data);
        self.out.write_all(data)?;
        Ok(())
    }

    /// Seals the file; fails if bytes are missing.
    pub fn finish(mut self) -> Result<W, FileError> {
        if self.remaining != 0 {
            return Err(FileError::Corrupt(
                "the filter file would get fewer bit-array bytes than its header describes",
            ));
        }
        self.out.write_all(&self.crc.clone().finalize().to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Writes a whole in-memory filter.
pub fn write(chain: &Chain, out: impl Write) -> Result<(), FileError> {
    let mut w = FileWriter::new(out, &dump::encode_header(chain))?;
    for f in chain.filters() {
        w.write_bits(f.bytes())?;
    }
    w.finish()?;
    Ok(())
}

/// Reads a filter file's header; the bit arrays follow in `reader`.
pub struct FileReader<R: Read> {
    input: R,
    crc: crc32fast::Hasher,
    header: Vec<u8>,
    /// Bytes of each sub-filter's bit array, in order.
    pub array_sizes: Vec<u64>,
}

impl<R: Read> FileReader<R> {
    pub fn open(mut input: R) -> Result<FileReader<R>, FileError> {
        let mut prefix = [0u8; 16];
        let mut got = 0;
        while got < prefix.len() {
            match input.read(&mut prefix[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(FileError::Io(e)),
            }
        }
        // A file that starts as one but stops is cut short, not foreign.
        if got < MAGIC.len() || &prefix[..MAGIC.len()] != MAGIC {
            return Err(FileError::NotAFilterFile);
        }
        if got < prefix.len() {
            return Err(FileError::Corrupt(CUT_SHORT));
        }
        let version = u32::from_le_bytes(prefix[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(FileError::UnsupportedVersion(version));
        }
        let header_len = u32::from_le_bytes(prefix[12..16].try_into().expect("4 bytes"));
        if header_len > MAX_HEADER {
            return Err(FileError::Corrupt(
                "the filter file's header length is implausible: the file is damaged",
            ));
        }
        let mut header = vec![0u8; header_len as usize];
        input.read_exact(&mut header)?;
        let parsed = dump::parse_header(&header).map_err(FileError::Filter)?;
        let array_sizes = parsed.links.iter().map(|(s, _)| s.bytes).collect();
        let mut crc = crc32fast::Hasher::new();
        crc.update(&prefix);
        crc.update(&header);
        Ok(FileReader { input, crc, header, array_sizes })
    }

    /// The SCANDUMP header (what `BF.LOADCHUNK key 1` takes).
    pub fn header(&self) -> &[u8] {
        &self.header
    }

    /// Reads exactly `buf.len()` bit-array bytes.
    pub fn read_bits(&mut self, buf: &mut [u8]) -> Result<(), FileError> {
        self.input.read_exact(buf)?;
        self.crc.update(buf);
        Ok(())
    }

    /// Checks the trailing checksum and that nothing follows it.
    pub fn finish(mut self) -> Result<(), FileError> {
        let mut stored = [0u8; 4];
        self.input.read_exact(&mut stored)?;
        if u32::from_le_bytes(stored) != self.crc.finalize() {
            return Err(FileError::Corrupt("the filter file's checksum does not match: the file is damaged"));
        }
        let mut extra = [0u8; 1];
        if self.input.read(&mut extra)? != 0 {
            return Err(FileError::Corrupt(
                "the filter file has bytes after its checksum: the file is damaged",
            ));
        }
        Ok(())
    }
}

/// Reads a whole filter into memory, within `limits`.
pub fn read(input: impl Read, limits: Limits) -> Result<Chain, FileError> {
    let mut reader = FileReader::open(input)?;
    let mut chain = dump::decode_header(reader.header(), limits).map_err(FileError::Filter)?;
    for f in chain.filters_mut() {
        reader.read_bits(f.bytes_mut())?;
    }
    reader.finish()?;
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bf::chain::ChainParams;

    fn sample() -> Chain {
        let p = ChainParams { capacity: 10, error: 0.01, expansion: 2, scaling: true };
        let mut c = Chain::new(p, Limits::NONE).unwrap();
        for i in 0..100u32 {
            c.add(&i.to_le_bytes(), Limits::NONE).unwrap();
        }
        c
    }

    fn bytes() -> Vec<u8> {
        let mut out = Vec::new();
        write(&sample(), &mut out).unwrap();
        out
    }

    #[test]
    fn round_trip() {
        let loaded = read(&bytes()[..], Limits::NONE).unwrap();
        for i in 0..100u32 {
            assert!(loaded.contains(&i.to_le_bytes()));
        }
        let mut again = Vec::new();
        write(&loaded, &mut again).unwrap();
        assert_eq!(again, bytes());
    }

    #[test]
    fn every_truncation_and_flip_is_refused() {
        let file = bytes();
        for len in 0..file.len() {
            assert!(read(&file[..len], Limits::NONE).is_err(), "truncated to {len}");
        }
        for i in 0..file.len() {
            let mut f = file.clone();
            f[i] ^= 0x10;
            assert!(read(&f[..], Limits::NONE).is_err(), "byte {i} flipped");
        }
        let mut longer = file.clone();
        longer.push(0);
        assert!(matches!(read(&longer[..], Limits::NONE), Err(FileError::Corrupt(_))));
        assert!(matches!(
            read(&b"hello world, not a filter"[..], Limits::NONE),
            Err(FileError::NotAFilterFile)
        ));
    }
}
