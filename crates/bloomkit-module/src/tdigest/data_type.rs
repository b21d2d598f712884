//! The `TDIS-TYPE` data type: everything a t-digest owes the server.
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::tdigest`; this file only connects it to the module IO calls.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bloomkit_core::common::payload::MODULE_VALUE_RDB_VERSION;
use bloomkit_core::tdigest::{TDigest, ENCODING_VERSION, TYPE_NAME};
use redis_module::raw;

use super::stats;
use crate::config;
use crate::ffi::{api, digest_buffers, emit_aof_chunk, guard, has_api, log};
use crate::io::{self, IoReader, IoWriter};
use crate::keys::{DataType, Stored};

static TD_TYPE: DataType = DataType::new();

/// How many snapshots (forks: BGSAVE, full syncs, AOF rewrites) this
/// process has started. A snapshot writes each digest compressed; a digest
/// whose buffer held values then owes that compression to its next write
/// (`TDigest::owes_compression`), so that the primary, its replicas and
/// its AOF go on from the same point as the snapshot.
static SNAPSHOT_EPOCH: AtomicU64 = AtomicU64::new(0);

pub fn snapshot_epoch() -> u64 {
    SNAPSHOT_EPOCH.load(Relaxed)
}

/// The server forked a child: in the parent, right after `fork()`, before
/// any other command, so the child's copy is the state at this epoch.
extern "C" fn on_fork_child(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    guard((), || {
        if subevent == raw::REDISMODULE_SUBEVENT_FORK_CHILD_BORN {
            SNAPSHOT_EPOCH.fetch_add(1, Relaxed);
        }
    })
}

pub fn td_type() -> *mut raw::RedisModuleType {
    TD_TYPE.get()
}

pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    if has_api!(RedisModule_SubscribeToServerEvent) {
        let event = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_FORK_CHILD, dataver: 1 };
        // SAFETY: valid context during OnLoad; a callback of the declared signature.
        unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx, event, Some(on_fork_child)) };
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
/// startup keeps what it finds, and says so. Encoding versions other than
/// RedisBloom's 0 are refused, not misread.
extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let loading = io::is_loading(io);
        match TDigest::load_version(&mut IoReader(io), encver, config::limits_for_load(loading)) {
            Ok(t) => {
                if loading {
                    io::warn_if_over_limit(io, t.size_bytes());
                }
                t.into_value()
            }
            Err(e) => {
                log(
                    std::ptr::null_mut(),
                    c"warning",
                    &format!("bloomkit: refused a {TYPE_NAME} value (encoding version {encver}): {e}"),
                );
                std::ptr::null_mut()
            }
        }
    })
}

/// Saves the compressed form, as RedisBloom does, without changing the
/// digest (`DUMP`, `SAVE` and `DEBUG RELOAD` are reads): the compression
/// RedisBloom would have made here is owed to the next write, which
/// announces it (see `commands.rs`). In a fork child the copy is the child's.
extern "C" fn rdb_save(io: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type, used by nothing else meanwhile.
        let t = unsafe { &mut *value.cast::<TDigest>() };
        t.save(&mut IoWriter(io));
    })
}

/// Rewrites the digest as RedisBloom does: `RESTORE key 0 <payload>` of its
/// compressed form (this runs in the rewrite's child, on its own copy).
extern "C" fn aof_rewrite(aof: *mut raw::RedisModuleIO, key: *mut raw::RedisModuleString, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type.
        let t = unsafe { &mut *value.cast::<TDigest>() };
        if t.estimates().is_err() {
            let _ = t.compress(); // the child's own copy
        }
        emit_aof_chunk(aof, c"RESTORE", key, 0, &t.estimated().dump_payload(MODULE_VALUE_RDB_VERSION));
    })
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(0, || unsafe { digest_ref(value) }.size_bytes() as usize)
}

/// DEBUG DIGEST-VALUE: every field and every node in use of the digest's
/// compressed form, what every estimate, DUMP and snapshot of it reads: a
/// primary, a replica that kept the buffer and one that loaded the
/// snapshot agree (their next write compresses the buffer at the same
/// point). The value itself is not changed.
extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type and a digest handle.
        let owned = unsafe { &mut *value.cast::<TDigest>() };
        let _ = owned.estimates();
        let t = owned.estimated();
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
