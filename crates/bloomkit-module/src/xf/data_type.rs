//! The `bkit-xflt` data type: what an expandable filter owes the server,
//! through the shared callbacks of [`crate::value`]. The formats are core's
//! (`bloomkit_core::xf::formats`).

use std::ffi::c_int;

use bloomkit_core::xf::{XfFilter, ENCODING_VERSION, TYPE_NAME};

use crate::io::IoWriter;
use crate::keys::{DataType, Stored};
use crate::stats::Counters;
use crate::value::{DigestOut, Load, Rewrite, Value};

static XF_TYPE: DataType = DataType::new();

impl Stored for XfFilter {
    const TYPE: &'static DataType = &XF_TYPE;
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    fn counted_bytes(&self) -> u64 {
        self.size_bytes()
    }

    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize> {
        XfFilter::relocate(self, from, to)
    }
}

impl Value for XfFilter {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const ENCODING_VERSION: c_int = ENCODING_VERSION;

    fn load(from: &mut Load) -> Result<Self, String> {
        XfFilter::load(&mut from.reader(), from.encver, from.limits()).map_err(|e| e.to_string())
    }

    fn save(&mut self, to: &mut IoWriter) {
        XfFilter::save(self, to)
    }

    fn memory(&self) -> usize {
        self.size_bytes() as usize
    }

    /// The SCANDUMP stream (header, then every table's slots, a doubling
    /// under way included): equal digests mean byte-identical filters.
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

    /// The SCANDUMP stream as `XF.LOADCHUNK`s, which rebuild it exactly.
    fn rewrite(&mut self, aof: &mut Rewrite) {
        for (iter, data) in self.chunks() {
            aof.chunk(c"XF.LOADCHUNK", iter as i64, &data);
        }
    }
}
