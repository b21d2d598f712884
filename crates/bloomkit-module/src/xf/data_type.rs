//! The `bkit-xflt` data type: what an expandable filter owes the server,
//! through the shared callbacks of [`crate::value`]. The formats are core's
//! (`bloomkit_core::xf::formats`).

use bloomkit_core::xf::XfFilter;

use crate::value::{plain_value, DigestOut, Own, Rewrite};

plain_value!(bloomkit_core::xf, XfFilter, super::counters::COUNTERS);

impl Own for XfFilter {
    /// The SCANDUMP stream (header, then every table's slots, a doubling
    /// under way included): equal digests mean byte-identical filters.
    fn digest(&mut self, out: &mut DigestOut) {
        // One chunk at a time: a digest of a large filter copies a MiB at most.
        for (_, data) in self.chunks() {
            out.buffer(&data);
        }
        out.end();
    }

    /// The SCANDUMP stream as `XF.LOADCHUNK`s, which rebuild it exactly.
    fn rewrite(&mut self, aof: &mut Rewrite) {
        for (iter, data) in self.chunks() {
            aof.chunk(c"XF.LOADCHUNK", iter as i64, &data);
        }
    }
}
