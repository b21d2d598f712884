//! The `MBbloom--` data type: what a RedisBloom Bloom filter owes the
//! server, through the shared callbacks of [`crate::value`].
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::bf::rdb`.

use std::ffi::c_int;

use bloomkit_core::bf::{check_counts, rdb, scandump as dump, Chain, Counts};

use crate::ffi::io::IoWriter;
use crate::ffi::log;
use crate::keys::stored;
use crate::value::{DigestOut, Load, Rewrite, Value};

stored!(Chain, super::counters::COUNTERS);

impl Value for Chain {
    const TYPE_NAME: &'static str = rdb::TYPE_NAME;
    const ENCODING_VERSION: c_int = rdb::ENCODING_VERSION;

    /// RESTORE is held to RedisBloom 8's count checks; the server's own
    /// RDB (startup, a replica's full sync) is trusted, so that no file
    /// stops it from starting, and what fails the checks is logged.
    fn load(from: &mut Load) -> Result<Self, String> {
        let counts = if from.loading { Counts::Trusted } else { Counts::Checked };
        let chain =
            rdb::load(&mut from.reader(), from.encver, from.limits(), counts).map_err(|e| e.to_string())?;
        if from.loading {
            let links = chain.filters().iter().map(|f| (f.shape().capacity, f.items));
            if check_counts(chain.items(), chain.options(), chain.growth(), links).is_err() {
                log(
                    std::ptr::null_mut(),
                    c"warning",
                    &format!(
                        "bloomkit: loaded filter '{}' whose counts RESTORE would refuse (items {}, \
                         growth {}, options {}); kept as it was saved",
                        from.key_name(),
                        chain.items(),
                        chain.growth(),
                        chain.options()
                    ),
                );
            }
        }
        Ok(chain)
    }

    fn save(&mut self, to: &mut IoWriter) {
        rdb::save(self, to)
    }

    fn memory(&self) -> usize {
        self.size_bytes() as usize
    }

    /// The header and every bit array.
    fn digest(&mut self, out: &mut DigestOut) {
        let header = dump::encode_header(self);
        let mut buffers: Vec<&[u8]> = vec![&header];
        buffers.extend(self.filters().iter().map(|f| f.bytes()));
        out.buffers(&buffers);
    }

    fn copy(&self) -> Option<Self> {
        self.try_clone().ok()
    }

    /// As RedisBloom rewrites it: its SCANDUMP stream as `BF.LOADCHUNK`s.
    fn rewrite(&mut self, aof: &mut Rewrite) {
        aof.chunk(c"BF.LOADCHUNK", 1, &dump::encode_header(self));
        for (iter, data) in dump::chunks(self) {
            aof.chunk(c"BF.LOADCHUNK", iter, data);
        }
    }
}
