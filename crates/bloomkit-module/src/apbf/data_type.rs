//! The `bkit-apbf` data type: what a sliding-window filter owes the server,
//! through the shared callbacks of [`crate::data_type`]. The bytes are
//! core's (`Apbf::encode`), one string in the RDB value.

use bloomkit_core::apbf::Apbf;

use crate::stats::Counters;
use crate::value::{DigestOut, Rewrite, Value};

/// Bytes of the body per AOF-rewrite command.
const CHUNK: usize = 1 << 20;

impl Value for Apbf {
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    /// Header and body.
    fn digest(&mut self, out: &mut DigestOut) {
        out.buffers(&[&self.encode_header(), self.bits()]);
    }

    /// The state as `APBF.LOADCHUNK`s: the header, then the body by the MiB
    /// (chunks of zeros are left out: a new filter is zeroed).
    fn rewrite(&mut self, aof: &mut Rewrite) {
        aof.chunk(c"APBF.LOADCHUNK", 0, &self.encode_header());
        for (i, chunk) in self.bits().chunks(CHUNK).enumerate() {
            if chunk.iter().any(|&b| b != 0) {
                aof.chunk(c"APBF.LOADCHUNK", (1 + i * CHUNK) as i64, chunk);
            }
        }
    }
}
