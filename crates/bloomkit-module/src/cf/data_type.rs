//! The `MBbloomCF` data type: what a cuckoo filter owes the server, through
//! the shared callbacks of [`crate::value`].
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::cf`.

use bloomkit_core::cf::CuckooFilter;

use crate::stats::Counters;
use crate::value::{DigestOut, Rewrite, Value};

impl Value for CuckooFilter {
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    /// The header and every sub-filter.
    fn digest(&mut self, out: &mut DigestOut) {
        let header = self.encode_header();
        let mut buffers: Vec<&[u8]> = vec![&header];
        buffers.extend(self.filters().iter().map(|s| s.bytes()));
        out.buffers(&buffers);
    }

    /// As RedisBloom rewrites it: its SCANDUMP stream as `CF.LOADCHUNK`s.
    fn rewrite(&mut self, aof: &mut Rewrite) {
        aof.chunk(c"CF.LOADCHUNK", 1, &self.encode_header());
        for (pos, data) in self.chunks() {
            aof.chunk(c"CF.LOADCHUNK", pos, data);
        }
    }
}
