//! A value's RDB fields as a sequence of typed reads and writes.
//!
//! Redis hands a module typed reads (`unsigned`, `double`, `string buffer`);
//! each family states the field order of its encodings over these traits, so
//! that the real loader (the module's RDB adapters) and the fuzzers and tests
//! ([`FieldStream`]) share one implementation of every format.

/// A field could not be read: the value ends early, or the next field is of
/// another type. Each family answers it as its own "bad data".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldError;

/// Typed reads of one value's RDB fields. A failed read is an `Err`.
pub trait FieldReader {
    fn unsigned(&mut self) -> Result<u64, FieldError>;
    fn double(&mut self) -> Result<f64, FieldError>;
    /// A string field as an owned buffer (the module adopts Redis's copy).
    fn buffer(&mut self) -> Result<Box<[u8]>, FieldError>;
}

/// Typed writes of one value's RDB fields.
pub trait FieldWriter {
    fn unsigned(&mut self, v: u64);
    fn double(&mut self, v: f64);
    fn buffer(&mut self, v: &[u8]);
}

/// A plain in-memory field stream, for tests and fuzzing: each field is a tag
/// byte (`U`, `D`, `B`) then 8 bytes little-endian (for `B`, the length, then the bytes).
#[derive(Default, Debug)]
pub struct FieldStream {
    pub bytes: Vec<u8>,
    pub pos: usize,
}

impl FieldStream {
    fn field(&mut self, tag: u8) -> Result<[u8; 8], FieldError> {
        let rest = self.bytes.get(self.pos..).ok_or(FieldError)?;
        match rest.split_first() {
            Some((&t, rest)) if t == tag => {
                let (v, _) = rest.split_first_chunk::<8>().ok_or(FieldError)?;
                self.pos += 9;
                Ok(*v)
            }
            _ => Err(FieldError),
        }
    }
}

impl FieldReader for FieldStream {
    fn unsigned(&mut self) -> Result<u64, FieldError> {
        self.field(b'U').map(u64::from_le_bytes)
    }
    fn double(&mut self) -> Result<f64, FieldError> {
        self.field(b'D').map(f64::from_le_bytes)
    }
    fn buffer(&mut self) -> Result<Box<[u8]>, FieldError> {
        let len = u64::from_le_bytes(self.field(b'B')?);
        let end = u64::try_from(self.pos).ok().and_then(|p| p.checked_add(len)).ok_or(FieldError)?;
        let end = usize::try_from(end).map_err(|_| FieldError)?;
        let data = self.bytes.get(self.pos..end).ok_or(FieldError)?;
        self.pos = end;
        Ok(data.into())
    }
}

impl FieldWriter for FieldStream {
    fn unsigned(&mut self, v: u64) {
        self.bytes.push(b'U');
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    fn double(&mut self, v: f64) {
        self.bytes.push(b'D');
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    fn buffer(&mut self, v: &[u8]) {
        self.bytes.push(b'B');
        self.bytes.extend_from_slice(&(v.len() as u64).to_le_bytes());
        self.bytes.extend_from_slice(v);
    }
}
