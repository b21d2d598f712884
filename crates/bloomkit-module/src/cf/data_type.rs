//! The `MBbloomCF` data type: what a cuckoo filter owes the server, through
//! the shared callbacks of [`crate::value`].
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::cf`.

use std::ffi::c_int;

use bloomkit_core::cf::{CuckooFilter, ENCODING_VERSION, TYPE_NAME};

use crate::io::IoWriter;
use crate::keys::{DataType, Stored};
use crate::stats::Counters;
use crate::value::{DigestOut, Load, Rewrite, Value};

static CF_TYPE: DataType = DataType::new();


impl Stored for CuckooFilter {
    const TYPE: &'static DataType = &CF_TYPE;
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    fn counted_bytes(&self) -> u64 {
        self.size_bytes()
    }

    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize> {
        CuckooFilter::relocate(self, from, to)
    }
}

impl Value for CuckooFilter {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const ENCODING_VERSION: c_int = ENCODING_VERSION;

    fn load(from: &mut Load) -> Result<Self, String> {
        CuckooFilter::load(&mut from.reader(), from.encver, from.limits()).map_err(|e| e.to_string())
    }

    fn save(&mut self, to: &mut IoWriter) {
        CuckooFilter::save(self, to)
    }

    fn memory(&self) -> usize {
        self.size_bytes() as usize
    }

    /// The header and every sub-filter.
    fn digest(&mut self, out: &mut DigestOut) {
        let header = self.encode_header();
        let mut buffers: Vec<&[u8]> = vec![&header];
        buffers.extend(self.filters().iter().map(|s| s.bytes()));
        out.buffers(&buffers);
    }

    fn copy(&self) -> Option<Self> {
        self.try_clone().ok()
    }

    /// As RedisBloom rewrites it: its SCANDUMP stream as `CF.LOADCHUNK`s.
    fn rewrite(&mut self, aof: &mut Rewrite) {
        aof.chunk(c"CF.LOADCHUNK", 1, &self.encode_header());
        for (pos, data) in self.chunks() {
            aof.chunk(c"CF.LOADCHUNK", pos, data);
        }
    }
}
