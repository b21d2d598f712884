//! The `bkit-xflt` data type: what an expandable filter owes the server,
//! through the shared callbacks of [`crate::value`]. The formats are core's
//! (`bloomkit_core::xf::formats`); encoding 0 (bloomkit 0.1's) loads too.

use std::ffi::c_int;

use bloomkit_core::xf::{XfFilter, ENCODING_VERSION, TYPE_NAME};

use crate::io::IoWriter;
use crate::keys::stored;
use crate::value::{DigestOut, Load, Rewrite, Value};

stored!(XfFilter, super::counters::COUNTERS);

impl Value for XfFilter {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const ENCODING_VERSION: c_int = ENCODING_VERSION;

    /// A value that does not describe a filter is refused, never trusted;
    /// the first filter loaded lends the server its seed (see `secret`).
    fn load(from: &mut Load) -> Result<Self, String> {
        let f = XfFilter::load(&mut from.reader(), from.encver, from.limits()).map_err(|e| e.to_string())?;
        super::secret::adopt(f.seed());
        Ok(f)
    }

    fn save(&mut self, to: &mut IoWriter) {
        XfFilter::save(self, to)
    }

    fn memory(&self) -> usize {
        self.size_bytes() as usize
    }

    /// The SCANDUMP stream (header, then the blocks; what a load under way
    /// has received): equal digests mean byte-identical filters.
    fn digest(&mut self, out: &mut DigestOut) {
        // One chunk at a time: a digest of a large filter copies a MiB at most.
        for (_, data) in self.chunks() {
            out.buffer(&data);
        }
        out.end();
    }

    fn copy(&self) -> Option<Self> {
        self.try_clone().ok()
    }

    /// The SCANDUMP stream as `XF.LOADCHUNK`s, which rebuild it exactly (a
    /// load under way as far as it got: the next chunk continues it).
    fn rewrite(&mut self, aof: &mut Rewrite) {
        for (iter, data) in self.chunks() {
            aof.chunk(c"XF.LOADCHUNK", iter as i64, &data);
        }
    }
}
