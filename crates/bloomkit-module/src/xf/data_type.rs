//! The `bkit-xflt` data type: what an expandable filter owes the server,
//! through the shared callbacks of [`crate::value`]. The formats are core's
//! (`bloomkit_core::xf::formats`).

use std::ffi::{c_int, c_void};

use bloomkit_core::xf::{XfFilter, ENCODING_VERSION, TYPE_NAME};
use redis_module::raw;

use super::counters;
use crate::io::IoWriter;
use crate::keys::{DataType, Stored};
use crate::value::{self, DigestOut, Load, Rewrite, Value};

static XF_TYPE: DataType = DataType::new();

pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    value::register::<XfFilter>(&XF_TYPE, ctx)
}

impl Stored for XfFilter {
    fn data_type() -> *mut raw::RedisModuleType {
        XF_TYPE.get()
    }

    /// Hands the filter over, counting it (writes count its growth).
    fn into_value(self) -> *mut c_void {
        counters::created(self.size_bytes());
        Box::into_raw(Box::new(self)).cast()
    }

    unsafe fn free_value(value: *mut c_void) {
        let f = Box::from_raw(value.cast::<XfFilter>());
        counters::freed(f.size_bytes());
    }

    const DEFRAG_KIND: crate::stats::defrag::Kind = crate::stats::defrag::Kind::Xf;

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
