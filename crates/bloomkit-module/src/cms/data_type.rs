//! The `CMSk-TYPE` data type: what a Count-Min Sketch owes the server,
//! through the shared callbacks of [`crate::value`].
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::cms`.

use std::ffi::c_int;

use bloomkit_core::cms::{CountMinSketch, ENCODING_VERSION, TYPE_NAME};

use crate::io::IoWriter;
use crate::keys::{DataType, Stored};
use crate::stats::Counters;
use crate::value::{DigestOut, Load, Rewrite, Value};

static CMS_TYPE: DataType = DataType::new();

impl Stored for CountMinSketch {
    const TYPE: &'static DataType = &CMS_TYPE;
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    fn counted_bytes(&self) -> u64 {
        self.size_bytes()
    }

    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize> {
        CountMinSketch::relocate(self, from, to)
    }
}

impl Value for CountMinSketch {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const ENCODING_VERSION: c_int = ENCODING_VERSION;

    /// A value that does not describe a sketch is refused (2.8.2 took it unchecked).
    fn load(from: &mut Load) -> Result<Self, String> {
        CountMinSketch::load(&mut from.reader(), from.encver, from.limits()).map_err(|e| e.to_string())
    }

    fn save(&mut self, to: &mut IoWriter) {
        CountMinSketch::save(self, to)
    }

    /// `32 + 4 * width * depth`, as RedisBloom 8.6 reports (2.8.2 counted
    /// the array twice).
    fn memory(&self) -> usize {
        self.size_bytes() as usize
    }

    /// Dimensions, total and every counter.
    fn digest(&mut self, out: &mut DigestOut) {
        let mut header = [0u8; 24];
        header[..8].copy_from_slice(&self.width().to_le_bytes());
        header[8..16].copy_from_slice(&self.depth().to_le_bytes());
        header[16..].copy_from_slice(&self.count().to_le_bytes());
        out.buffers(&[&header, &self.counter_bytes()]);
    }

    fn copy(&self) -> Option<Self> {
        self.try_clone().ok()
    }

    /// As RedisBloom rewrites it: `RESTORE key 0 <payload>`, the payload
    /// built here (uncompressed, framed for RDB version 9, which every
    /// supported server restores) rather than through a `DUMP` call.
    fn rewrite(&mut self, aof: &mut Rewrite) {
        aof.chunk(c"RESTORE", 0, &self.dump_payload());
    }
}
