//! The `CMSk-TYPE` data type: what a Count-Min Sketch owes the server,
//! through the shared callbacks of [`crate::value`].
//!
//! Same name and encoding versions as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there: version 0 (RedisBloom 2.8
//! and 8.10) at the older levels, version 1 (Redis 8.12) at
//! `redisbloom-8.12`; both load at every level. The field order lives in
//! `bloomkit_core::cms`.

use std::ffi::c_int;

use bloomkit_core::cms::{CellSize, CountMinSketch};

use crate::ffi::io::IoWriter;
use crate::stats::Counters;
use crate::value::{DigestOut, Load, Rewrite, Value};

impl Value for CountMinSketch {
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    /// 1 at `redisbloom-8.12`, else 0 (the level is fixed once loaded).
    fn encoding_version() -> c_int {
        super::rules().encoding_version()
    }

    /// A value that does not describe a sketch is refused (2.8.2 took it
    /// unchecked), and so is what Redis 8.12 refuses; a version-1 sketch
    /// loads at the older levels in 4-byte cells.
    fn from_rdb(from: &mut Load) -> Result<Self, String> {
        CountMinSketch::load_with(&mut from.reader(), from.encver, from.limits, super::rules())
            .map_err(|e| e.to_string())
    }

    fn to_rdb(&mut self, to: &mut IoWriter) {
        CountMinSketch::save_with(self, to, super::rules())
    }

    /// Dimensions, total, cell size (when not 4, so that 4-byte sketches
    /// keep their digests) and every counter.
    fn digest(&mut self, out: &mut DigestOut) {
        let mut header = [0u8; 25];
        header[..8].copy_from_slice(&self.width().to_le_bytes());
        header[8..16].copy_from_slice(&self.depth().to_le_bytes());
        header[16..24].copy_from_slice(&self.count().to_le_bytes());
        header[24] = self.cell_size().bytes() as u8;
        let header = if self.cell_size() == CellSize::Four { &header[..24] } else { &header[..] };
        out.buffers(&[header, &self.counter_bytes()]);
    }

    /// As RedisBloom rewrites it: `RESTORE key 0 <payload>`, the payload
    /// built here (uncompressed, framed for RDB version 9, which every
    /// supported server restores) rather than through a `DUMP` call.
    fn rewrite(&mut self, aof: &mut Rewrite) {
        aof.chunk(c"RESTORE", 0, &self.dump_payload_with(super::rules()));
    }
}
