//! The `CMSk-TYPE` data type: everything a Count-Min Sketch owes the server.
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::cms`; this file only connects it to the module IO calls.

use std::ffi::{c_int, c_void};

use bloomkit_core::cms::{CountMinSketch, ENCODING_VERSION, TYPE_NAME};
use redis_module::raw;

use super::counters;
use crate::config;
use crate::ffi::{digest_buffers, emit_aof_chunk, guard, log};
use crate::io::{self, IoReader, IoWriter};
use crate::keys::{DataType, Stored};

static CMS_TYPE: DataType = DataType::new();

pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    CMS_TYPE.register(ctx, TYPE_NAME, ENCODING_VERSION, crate::keys::type_methods!(CountMinSketch))
}

impl Stored for CountMinSketch {
    fn data_type() -> *mut raw::RedisModuleType {
        CMS_TYPE.get()
    }

    /// Hands the sketch over, counting it.
    fn into_value(self) -> *mut c_void {
        counters::created(self.size_bytes());
        Box::into_raw(Box::new(self)).cast()
    }

    unsafe fn free_value(value: *mut c_void) {
        let s = Box::from_raw(value.cast::<CountMinSketch>());
        counters::freed(s.size_bytes());
    }

    const DEFRAG_KIND: crate::stats::defrag::Kind = crate::stats::defrag::Kind::Cms;

    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize> {
        CountMinSketch::relocate(self, from, to)
    }
}

/// # Safety
/// `value` must be a sketch stored by this type.
unsafe fn sketch_ref<'a>(value: *const c_void) -> &'a CountMinSketch {
    &*value.cast::<CountMinSketch>()
}

/// RDB files and RESTORE: a value that does not describe a sketch is
/// refused (2.8.2 took it unchecked); RESTORE obeys `bf.max-filter-bytes`,
/// loading at startup keeps what it finds, and says so.
extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let loading = io::is_loading(io);
        match CountMinSketch::load(&mut IoReader(io), encver, config::limits_for_load(loading)) {
            Ok(s) => {
                if loading {
                    io::warn_if_over_limit(io, s.size_bytes());
                }
                s.into_value()
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

/// Rewrites the sketch as RedisBloom does: `RESTORE key 0 <payload>`, the
/// payload built here (uncompressed, framed for RDB version 9, which every
/// supported server restores) rather than through a `DUMP` call.
extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard((), || {
        // SAFETY: the server passes a value of this type.
        let payload = unsafe { sketch_ref(value) }.dump_payload();
        emit_aof_chunk(aof, c"RESTORE", key, 0, &payload);
    })
}

/// `32 + 4 * width * depth`, as RedisBloom 8.6 reports (2.8.2 counted the
/// array twice).
extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(0, || unsafe { sketch_ref(value) }.size_bytes() as usize)
}

/// DEBUG DIGEST-VALUE: dimensions, total and every counter, so that equal
/// digests mean equal sketches (replica checks rely on it).
extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type and a digest handle.
        let s = unsafe { sketch_ref(value) };
        let mut header = [0u8; 24];
        header[..8].copy_from_slice(&s.width().to_le_bytes());
        header[8..16].copy_from_slice(&s.depth().to_le_bytes());
        header[16..].copy_from_slice(&s.count().to_le_bytes());
        digest_buffers(md, &[&header, &s.counter_bytes()]);
    })
}

/// Large sketches are freed on a background thread, as filters are.
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
        Ok(s) => s.into_value(),
        Err(_) => std::ptr::null_mut(),
    })
}
