//! The `TDIS-TYPE` data type: everything a t-digest owes the server.
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::tdigest`; this file only connects it to the module IO calls.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering::Relaxed};

use bloomkit_core::common::payload::MODULE_VALUE_RDB_VERSION;
use bloomkit_core::tdigest::{TDigest, ENCODING_VERSION, TYPE_NAME};
use redis_module::raw;

use super::stats;
use crate::config;
use crate::ffi::{api, digest_buffers, emit_aof_chunk, guard, log};
use crate::io::{self, IoReader, IoWriter};
use crate::keys::{DataType, Stored};

static TD_TYPE: DataType = DataType::new();

/// The server's process id at load: `rdb_save` in a fork child (BGSAVE, a
/// full sync, an AOF rewrite) changes only the child's copy.
static MAIN_PID: AtomicU32 = AtomicU32::new(0);

/// A context for sending on the compressions `DUMP` runs on the primary's
/// live digests (the IO context of `rdb_save` has no client to replicate with).
static REPLICATION_CTX: AtomicPtr<raw::RedisModuleCtx> = AtomicPtr::new(std::ptr::null_mut());

pub fn td_type() -> *mut raw::RedisModuleType {
    TD_TYPE.get()
}

pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    MAIN_PID.store(std::process::id(), Relaxed);
    if crate::ffi::has_api!(RedisModule_GetDetachedThreadSafeContext) {
        // SAFETY: valid context during OnLoad; the detached context lives as long as the module.
        let detached = unsafe { api!(RedisModule_GetDetachedThreadSafeContext)(ctx) };
        REPLICATION_CTX.store(detached, Relaxed);
    }
    TD_TYPE.register(ctx, TYPE_NAME, ENCODING_VERSION, crate::keys::type_methods!(TDigest))
}

impl Stored for TDigest {
    fn data_type() -> *mut raw::RedisModuleType {
        td_type()
    }

    /// Hands the digest over, counting it.
    fn into_value(self) -> *mut c_void {
        stats::created(self.size_bytes());
        Box::into_raw(Box::new(self)).cast()
    }

    unsafe fn free_value(value: *mut c_void) {
        let t = Box::from_raw(value.cast::<TDigest>());
        stats::freed(t.size_bytes());
    }

    const DEFRAG_KIND: crate::stats::defrag::Kind = crate::stats::defrag::Kind::Tdigest;

    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize> {
        TDigest::relocate(self, from, to)
    }
}

/// # Safety
/// `value` must be a digest stored by this type.
unsafe fn digest_ref<'a>(value: *const c_void) -> &'a TDigest {
    &*value.cast::<TDigest>()
}

/// RDB files and RESTORE: RESTORE obeys `bf.max-filter-bytes`; loading at
/// startup keeps what it finds, and says so.
extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, _encver: c_int) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let loading = io::is_loading(io);
        match TDigest::load(&mut IoReader(io), config::limits_for_load(loading)) {
            Ok(t) => {
                if loading {
                    io::warn_if_over_limit(io, t.size_bytes());
                }
                t.into_value()
            }
            Err(e) => {
                log(std::ptr::null_mut(), c"warning", &format!("bloomkit: refused a {TYPE_NAME} value: {e}"));
                std::ptr::null_mut()
            }
        }
    })
}

/// Compresses, then saves, as RedisBloom does (so `TDIGEST.INFO` after a
/// `DUMP` shows what RedisBloom shows). When that compression changes a live
/// digest of the main process outside loading (`DUMP`, `SAVE`, `DEBUG
/// RELOAD`), replicas and the AOF are sent a `TDIGEST.CDF key 0`, which
/// compresses theirs at the same point of the stream.
extern "C" fn rdb_save(io: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type, used by nothing else meanwhile.
        let t = unsafe { &mut *value.cast::<TDigest>() };
        let had_buffer = t.unmerged_nodes() > 0;
        let main_process = std::process::id() == MAIN_PID.load(Relaxed);
        if had_buffer && main_process && io::is_loading(io) {
            // A replica's DUMP must not compress its live digest: its
            // primary did not. It saves a compressed copy instead.
            if let Ok(mut copy) = t.try_clone() {
                copy.save(&mut IoWriter(io));
                return;
            }
        }
        t.save(&mut IoWriter(io));
        if had_buffer && t.unmerged_nodes() == 0 && main_process {
            replicate_dump_compression(io);
        }
    })
}

/// Sends `TDIGEST.CDF key 0` for the key `rdb_save` is saving, in its database.
fn replicate_dump_compression(io: *mut raw::RedisModuleIO) {
    let ctx = REPLICATION_CTX.load(Relaxed);
    if ctx.is_null() || !crate::ffi::has_api!(RedisModule_GetDbIdFromIO) {
        return;
    }
    // SAFETY: valid IO handle and the module's detached context, used on the
    // main thread (the server runs rdb_save there outside a fork child).
    unsafe {
        let flags = api!(RedisModule_GetContextFlags)(ctx) as u32;
        if flags & (raw::REDISMODULE_CTX_FLAGS_LOADING | raw::REDISMODULE_CTX_FLAGS_SLAVE) != 0 {
            return;
        }
        let key = api!(RedisModule_GetKeyNameFromIO)(io);
        if key.is_null() {
            return;
        }
        let db = api!(RedisModule_GetDbIdFromIO)(io);
        if api!(RedisModule_SelectDb)(ctx, db) != raw::REDISMODULE_OK as c_int {
            return;
        }
        api!(RedisModule_Replicate)(ctx, c"TDIGEST.CDF".as_ptr(), c"sc".as_ptr(), key, c"0".as_ptr());
    }
    stats::add(&stats::COMPRESSIONS_REPLICATED, 1);
}

/// Rewrites the digest as RedisBloom does: `RESTORE key 0 <payload>` of its
/// compressed value (this runs in the rewrite's child, on its own copy).
extern "C" fn aof_rewrite(aof: *mut raw::RedisModuleIO, key: *mut raw::RedisModuleString, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type.
        let t = unsafe { &mut *value.cast::<TDigest>() };
        let _ = t.compress();
        emit_aof_chunk(aof, c"RESTORE", key, 0, &t.dump_payload(MODULE_VALUE_RDB_VERSION));
    })
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(0, || unsafe { digest_ref(value) }.size_bytes() as usize)
}

/// DEBUG DIGEST-VALUE: every field and every node in use (the buffer too),
/// without compressing, so that equal digests mean equal values.
extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type and a digest handle.
        let t = unsafe { digest_ref(value) };
        let mut header = Vec::with_capacity(80);
        for v in [t.compression().to_bits(), t.min().to_bits(), t.max().to_bits()] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        for v in [
            t.capacity() as i64,
            t.merged_nodes() as i64,
            t.unmerged_nodes() as i64,
            t.total_compressions(),
            t.merged_weight(),
            t.unmerged_weight(),
        ] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        let (means, weights) = t.nodes();
        let means: Vec<u8> = means.iter().flat_map(|m| m.to_bits().to_le_bytes()).collect();
        let weights: Vec<u8> = weights.iter().flat_map(|w| w.to_le_bytes()).collect();
        digest_buffers(md, &[&header, &means, &weights]);
    })
}

/// Large digests are freed on a background thread.
extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(1, || (unsafe { digest_ref(value) }.size_bytes() >> 20) as usize)
}

/// COPY (RedisBloom has none): a failed allocation makes COPY fail, not the server.
extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: the server passes a value of this type.
    guard(std::ptr::null_mut(), || match unsafe { digest_ref(value) }.try_clone() {
        Ok(t) => t.into_value(),
        Err(_) => std::ptr::null_mut(),
    })
}
