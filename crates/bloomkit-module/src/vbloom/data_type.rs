//! The `bloomfltr` data type: what a valkey-bloom object owes the server,
//! through the shared callbacks of [`crate::value`], in valkey-bloom's formats (RDB value and DUMP payload, AOF
//! rewrite as `BF.LOAD key blob`), so that its files load here and ours
//! load there. The formats live in `bloomkit_core::vbloom`.

use std::ffi::c_int;

use bloomkit_core::vbloom::{Object, ENCODING_VERSION, TYPE_NAME};

use crate::ffi::io::IoWriter;
use crate::ffi::log;
use crate::keys::{DataType, Stored};
use crate::stats::Counters;
use crate::value::{DigestOut, Load, Rewrite, Value};

use super::counters;

static VBLOOM_TYPE: DataType = DataType::new();

impl Stored for Object {
    const TYPE: &'static DataType = &VBLOOM_TYPE;
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    /// valkey-bloom's totals.
    fn held_extra(&self, held: &mut crate::stats::Held) {
        counters::held_extra(self, held);
    }

    fn defrag_enabled() -> bool {
        super::settings::defrag()
    }

    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize> {
        Object::relocate(self, from, to)
    }
}

impl Value for Object {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const ENCODING_VERSION: c_int = ENCODING_VERSION;

    fn load(from: &mut Load) -> Result<Self, String> {
        let limits = super::settings::limits(from.limits());
        Object::load(&mut from.reader(), from.encver, limits).map_err(|e| e.to_string())
    }

    fn save(&mut self, to: &mut IoWriter) {
        Object::save(self, to)
    }

    fn memory(&self) -> usize {
        self.size() as usize
    }

    /// valkey-bloom's sequence (parameters, then each sub-filter's bytes,
    /// items and capacity), so digests match across the two modules.
    fn digest(&mut self, out: &mut DigestOut) {
        out.long(i64::from(self.expansion().unwrap_or(0)));
        out.buffer(&self.fp_rate().to_le_bytes());
        out.buffer(&self.tightening().to_le_bytes());
        out.long(i64::from(self.seed_random()));
        for f in self.filters() {
            out.buffer(f.serialized());
            out.long(f.items() as i64);
            out.long(f.capacity() as i64);
        }
        out.end();
    }

    fn copy(&self) -> Option<Self> {
        self.try_clone().ok()
    }

    /// As valkey-bloom rewrites it: one `BF.LOAD key blob`, so that its AOF
    /// and ours replay on either module.
    ///
    /// This runs in the rewrite's child process. If the blob cannot be
    /// allocated, the child ends (as the server's own allocator ends it when
    /// out of memory): the server then counts the rewrite as failed and keeps
    /// the old AOF, where skipping the key would lose it.
    fn rewrite(&mut self, aof: &mut Rewrite) {
        match self.encode_blob() {
            Ok(blob) => aof.command(c"BF.LOAD", &blob),
            Err(e) => {
                log(std::ptr::null_mut(), c"warning", &format!("bloomkit: AOF rewrite stopped: {e}"));
                std::process::abort();
            }
        }
    }
}
