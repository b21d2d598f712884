//! The `MBbloom--` data type: what a RedisBloom Bloom filter owes the
//! server, through the shared callbacks of [`crate::value`].
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::bf::rdb`.

use bloomkit_core::bf::{check_counts, scandump as dump, Chain};
use bloomkit_core::common::value::FamilyValue;

use crate::ffi::log;
use crate::stats::Counters;
use crate::value::{DigestOut, Load, Rewrite, Value};

impl Value for Chain {
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    /// RESTORE is held to RedisBloom 8's count checks; the server's own
    /// RDB (startup, a replica's full sync) is trusted, so that no file
    /// stops it from starting, and what fails the checks is logged.
    fn from_rdb(from: &mut Load) -> Result<Self, String> {
        let chain = Chain::load(&mut from.reader(), from.how()).map_err(|e| e.to_string())?;
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

    /// The header and every bit array.
    fn digest(&mut self, out: &mut DigestOut) {
        let header = dump::encode_header(self);
        let mut buffers: Vec<&[u8]> = vec![&header];
        buffers.extend(self.filters().iter().map(|f| f.bytes()));
        out.buffers(&buffers);
    }

    /// As RedisBloom rewrites it: its SCANDUMP stream as `BF.LOADCHUNK`s.
    fn rewrite(&mut self, aof: &mut Rewrite) {
        aof.chunk(c"BF.LOADCHUNK", 1, &dump::encode_header(self));
        for (iter, data) in dump::chunks(self) {
            aof.chunk(c"BF.LOADCHUNK", iter, data);
        }
    }
}
