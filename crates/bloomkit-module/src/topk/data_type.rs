//! The `TopK-TYPE` data type: everything a Top-K sketch owes the server.
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::topk::formats`; this file only connects it to the module
//! IO calls.

use std::ffi::{c_int, c_void};

use bloomkit_core::topk::{TopK, ENCODING_VERSION, TYPE_NAME};
use redis_module::raw;

use super::stats;
use crate::config;
use crate::ffi::{digest_buffers, emit_aof_chunk, guard, log};
use crate::io::{self, IoReader, IoWriter};
use crate::keys::{DataType, Stored};

static TOPK_TYPE: DataType = DataType::new();

pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    TOPK_TYPE.register(ctx, TYPE_NAME, ENCODING_VERSION, crate::keys::type_methods!(TopK))
}

impl Stored for TopK {
    fn data_type() -> *mut raw::RedisModuleType {
        TOPK_TYPE.get()
    }

    /// Hands the sketch over, counting it.
    fn into_value(self) -> *mut c_void {
        stats::created(self.size_bytes());
        Box::into_raw(Box::new(self)).cast()
    }

    unsafe fn free_value(value: *mut c_void) {
        let t = Box::from_raw(value.cast::<TopK>());
        stats::freed(t.size_bytes());
    }

    const DEFRAG_KIND: crate::stats::defrag::Kind = crate::stats::defrag::Kind::Topk;

    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize> {
        TopK::relocate(self, from, to)
    }
}

/// # Safety
/// `value` must be a sketch stored by this type.
unsafe fn sketch_ref<'a>(value: *const c_void) -> &'a TopK {
    &*value.cast::<TopK>()
}

/// RDB files and RESTORE: RESTORE obeys `bf.max-filter-bytes`; loading at
/// startup keeps what it finds, and says so. A value that does not describe
/// a sketch is refused (RedisBloom 2.8.2 asserts and aborts the server).
extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let loading = io::is_loading(io);
        match TopK::load(&mut IoReader(io), encver, config::limits_for_load(loading)) {
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

extern "C" fn rdb_save(io: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: the server passes a value of this type.
    guard((), || unsafe { sketch_ref(value) }.save(&mut IoWriter(io)))
}

/// Rewrites the sketch as RedisBloom does: `RESTORE key 0 <payload>`, a
/// DUMP payload of the value (RDB version 9, which every server reads).
extern "C" fn aof_rewrite(aof: *mut raw::RedisModuleIO, key: *mut raw::RedisModuleString, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type.
        let payload = unsafe { sketch_ref(value) }.dump_payload();
        emit_aof_chunk(aof, c"RESTORE", key, 0, &payload);
    })
}

/// RedisBloom's figure: `2088 + 8 x width x depth + 24 x k`.
extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(0, || unsafe { sketch_ref(value) }.size_bytes() as usize)
}

/// DEBUG DIGEST-VALUE: the parameters, every bucket, every slot (item
/// included) and the draw counter, so that equal digests mean equal sketches.
extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type and a digest handle.
        let t = unsafe { sketch_ref(value) };
        let p = t.params();
        let mut header = Vec::with_capacity(28);
        for v in [p.k, p.width, p.depth] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        header.extend_from_slice(&p.decay.to_bits().to_le_bytes());
        header.extend_from_slice(&t.draws().to_le_bytes());
        let mut buckets = Vec::with_capacity(t.buckets().len() * 8);
        for b in t.buckets() {
            buckets.extend_from_slice(&b.fp.to_le_bytes());
            buckets.extend_from_slice(&b.count.to_le_bytes());
        }
        let mut slots = Vec::new();
        for s in t.heap() {
            slots.extend_from_slice(&s.fp.to_le_bytes());
            slots.extend_from_slice(&s.count.to_le_bytes());
            slots.push(u8::from(s.item.is_some()));
            slots.extend_from_slice(&(s.bytes().len() as u64).to_le_bytes());
            slots.extend_from_slice(s.bytes());
        }
        digest_buffers(md, &[&header, &buckets, &slots]);
    })
}

/// Large sketches are freed on a background thread, as other types are.
extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(1, || (unsafe { sketch_ref(value) }.size_bytes() >> 20) as usize)
}

/// COPY (RedisBloom has none): a failed allocation makes COPY fail, not the server.
extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: the server passes a value of this type.
    guard(std::ptr::null_mut(), || match unsafe { sketch_ref(value) }.try_clone() {
        Ok(t) => t.into_value(),
        Err(_) => std::ptr::null_mut(),
    })
}
