//! The `bloomfltr` data type: what a valkey-bloom object owes the server,
//! through the shared callbacks of [`crate::value`], in valkey-bloom's formats (RDB value and DUMP payload, AOF
//! rewrite as `BF.LOAD key blob`), so that its files load here and ours
//! load there. The formats live in `bloomkit_core::vbloom`.

use bloomkit_core::common::value::{FamilyValue, Loading};
use bloomkit_core::vbloom::Object;

use crate::ffi::log;
use crate::stats::Counters;
use crate::value::{DigestOut, Load, Rewrite, Value};

use super::counters;

impl Value for Object {
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    /// valkey-bloom's totals.
    fn held_extra(&self, held: &mut crate::stats::Held) {
        counters::held_extra(self, held);
    }

    fn defrag_enabled() -> bool {
        super::settings::defrag()
    }

    /// Within valkey-bloom's own limits too.
    fn from_rdb(from: &mut Load) -> Result<Self, String> {
        let how = Loading { limits: super::settings::limits(from.limits), ..from.how() };
        <Object as FamilyValue>::load(&mut from.reader(), how).map_err(|e| e.to_string())
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
