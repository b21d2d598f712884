//! The `bkit-xflt` data type: what an expandable filter owes the server,
//! through the shared callbacks of [`crate::value`]. The formats are core's
//! (`bloomkit_core::xf::formats`); encoding 0 (bloomkit 0.1's) loads too.

use std::ffi::c_int;

use bloomkit_core::common::fields::{FieldReader, FieldWriter};
use bloomkit_core::common::value::FamilyValue;
use bloomkit_core::xf::XfFilter;
use redis_module::raw;

use crate::ffi::io::{IoReader, IoWriter};
use crate::stats::Counters;
use crate::value::{DigestOut, Load, Rewrite, Value};

impl Value for XfFilter {
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    /// A value that does not describe a filter is refused, never trusted.
    /// One made under a secret the key ring lacks loads sealed from the
    /// server's own data (so that it always starts), and is refused from a
    /// client's `RESTORE`; nothing loaded changes the ring (see `secret`).
    fn from_rdb(from: &mut Load) -> Result<Self, String> {
        let mut f =
            <XfFilter as FamilyValue>::load(&mut from.reader(), from.how()).map_err(|e| e.to_string())?;
        super::secret::admit(&mut f, from.loading).map_err(|e| e.to_string())?;
        Ok(f)
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

    /// The SCANDUMP stream as `XF.LOADCHUNK`s, which rebuild it exactly (a
    /// load under way as far as it got: the next chunk continues it).
    fn rewrite(&mut self, aof: &mut Rewrite) {
        if self.hashing().key_id().is_some() {
            if let Some(ring) = super::secret::for_rewrite() {
                aof.command(c"XF.KEYRING", &ring);
            }
        }
        for (iter, data) in self.chunks() {
            aof.chunk(c"XF.LOADCHUNK", iter as i64, &data);
        }
    }
}

/// Registers the type, with the key ring's aux field (see `secret`):
/// written before the keyspace so that every filter's secret is known as
/// it loads. Where the server has `aux_save2` (Redis 7.2 and later, Valkey)
/// the field is written only once the ring holds a secret, so an RDB of a
/// server that never made an XF filter loads without this module; Redis
/// 7.0 has only `aux_save`, which writes the field into every RDB.
pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    super::secret::init();
    crate::data_type::register_with::<XfFilter>(ctx, |m| {
        m.aux_load = Some(aux_load);
        m.aux_save = Some(aux_save);
        m.aux_save2 = Some(aux_save2);
        m.aux_save_triggers = raw::REDISMODULE_AUX_BEFORE_RDB as c_int;
    })
}

/// Redis 7.0's aux field, in every RDB (its head is written already): the
/// ring, empty or not.
extern "C" fn aux_save(io: *mut raw::RedisModuleIO, _when: c_int) {
    crate::ffi::guard((), || IoWriter(io).buffer(&super::secret::for_rdb().unwrap_or_default()))
}

/// `aux_save2`: the ring, or nothing (then the server writes no field).
extern "C" fn aux_save2(io: *mut raw::RedisModuleIO, _when: c_int) {
    crate::ffi::guard((), || {
        if let Some(ring) = super::secret::for_rdb() {
            IoWriter(io).buffer(&ring);
        }
    })
}

/// The ring, read before the keyspace; a field this module did not write
/// fails the load (the server's own data is never guessed at).
extern "C" fn aux_load(io: *mut raw::RedisModuleIO, _encver: c_int, _when: c_int) -> c_int {
    crate::ffi::guard(raw::REDISMODULE_ERR as c_int, || {
        let loaded = IoReader(io)
            .buffer()
            .map_err(|_| "the aux field is cut short")
            .and_then(|b| super::secret::from_rdb(&b));
        match loaded {
            Ok(()) => raw::REDISMODULE_OK as c_int,
            Err(why) => {
                crate::ffi::log(std::ptr::null_mut(), c"warning", &format!("bloomkit: XF key ring: {why}"));
                raw::REDISMODULE_ERR as c_int
            }
        }
    })
}
