//! The `bkit-apbf` data type: what a sliding-window filter owes the server,
//! through the shared callbacks of [`crate::value`]. The bytes are core's
//! (`Apbf::encode`), one string in the RDB value.

use std::ffi::c_int;

use bloomkit_core::apbf::{Apbf, TYPE_NAME};
use bloomkit_core::common::fields::{FieldReader, FieldWriter};

use crate::ffi::io::IoWriter;
use crate::keys::stored;
use crate::value::{DigestOut, Load, Rewrite, Value};

/// 1: the first state format (`BKAPBF01`); 2: burst-safe windows
/// (`BKAPBF02`). Both load; 2 is written.
const ENCODING_VERSION: c_int = 2;
/// Bytes of the body per AOF-rewrite command.
const CHUNK: usize = 1 << 20;

stored!(Apbf, super::counters::COUNTERS);

impl Value for Apbf {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const ENCODING_VERSION: c_int = ENCODING_VERSION;

    /// The state as one string, encoding 1 or 2.
    fn load(from: &mut Load) -> Result<Self, String> {
        if !(1..=ENCODING_VERSION).contains(&from.encver) {
            return Err(format!("encoding {} is unknown", from.encver));
        }
        let limit = from.limits().max_bytes;
        let buffer = from.reader().buffer().map_err(|_| "cut short".to_string())?;
        Apbf::decode_owned(buffer.into_vec(), limit).map_err(|e| e.to_string())
    }

    fn save(&mut self, to: &mut IoWriter) {
        to.buffer(&self.encode())
    }

    /// The struct and its state: what the size limit and the lazy-free
    /// effort are reckoned on.
    fn memory(&self) -> usize {
        std::mem::size_of::<Apbf>() + self.bytes()
    }

    /// Header and body.
    fn digest(&mut self, out: &mut DigestOut) {
        out.buffers(&[&self.encode_header(), self.bits()]);
    }

    fn copy(&self) -> Option<Self> {
        self.try_clone().ok()
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
