//! The `MBbloomCF` data type: everything a cuckoo filter owes the server.
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::cf`; this file only connects it to the module IO calls.

use std::ffi::{c_int, c_void};

use bloomkit_core::cf::{CuckooFilter, ENCODING_VERSION, TYPE_NAME};
use redis_module::raw;

use crate::config;
use crate::ffi::guard;
use crate::ffi::{digest_buffers, emit_aof_chunk, log};
use crate::io::{self, IoReader, IoWriter};
use crate::keys::{DataType, Stored};
use crate::stats::cuckoo as stats;

static CF_TYPE: DataType = DataType::new();

pub fn cf_type() -> *mut raw::RedisModuleType {
    CF_TYPE.get()
}

pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    CF_TYPE.register(ctx, TYPE_NAME, ENCODING_VERSION, crate::keys::type_methods!(CuckooFilter))
}

impl Stored for CuckooFilter {
    fn data_type() -> *mut raw::RedisModuleType {
        cf_type()
    }

    /// Hands the filter over, counting it.
    fn into_value(self) -> *mut c_void {
        stats::created(self.size_bytes());
        Box::into_raw(Box::new(self)).cast()
    }

    unsafe fn free_value(value: *mut c_void) {
        let f = Box::from_raw(value.cast::<CuckooFilter>());
        stats::freed(f.size_bytes());
    }

    const DEFRAG_KIND: crate::stats::defrag::Kind = crate::stats::defrag::Kind::Cf;

    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize> {
        CuckooFilter::relocate(self, from, to)
    }
}

/// # Safety
/// `value` must be a filter stored by this type.
unsafe fn filter_ref<'a>(value: *const c_void) -> &'a CuckooFilter {
    &*value.cast::<CuckooFilter>()
}

/// RDB files and RESTORE: RESTORE obeys `bf.max-filter-bytes`; loading at
/// startup keeps what it finds, and says so.
extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let loading = io::is_loading(io);
        match CuckooFilter::load(&mut IoReader(io), encver, config::limits_for_load(loading)) {
            Ok(f) => {
                if loading {
                    io::warn_if_over_limit(io, f.size_bytes());
                }
                f.into_value()
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
    guard((), || unsafe { filter_ref(value) }.save(&mut IoWriter(io)))
}

/// Rewrites the filter as RedisBloom does: its SCANDUMP stream as `CF.LOADCHUNK`s.
extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard((), || {
        // SAFETY: the server passes a value of this type.
        let f = unsafe { filter_ref(value) };
        let emit = |pos: i64, data: &[u8]| emit_aof_chunk(aof, c"CF.LOADCHUNK", key, pos, data);
        emit(1, &f.encode_header());
        for (pos, data) in f.chunks() {
            emit(pos, data);
        }
    })
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(0, || unsafe { filter_ref(value) }.size_bytes() as usize)
}

/// DEBUG DIGEST-VALUE: the header and every sub-filter, so that equal
/// digests mean equal filters (replica checks rely on it).
extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type and a digest handle.
        let f = unsafe { filter_ref(value) };
        let header = f.encode_header();
        let mut buffers: Vec<&[u8]> = vec![&header];
        buffers.extend(f.filters().iter().map(|s| s.bytes()));
        digest_buffers(md, &buffers);
    })
}

/// Large filters are freed on a background thread, as for `MBbloom--`.
extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(1, || (unsafe { filter_ref(value) }.size_bytes() >> 20) as usize)
}

/// COPY: a failed allocation makes COPY fail, not the server.
extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: the server passes a value of this type.
    guard(std::ptr::null_mut(), || match unsafe { filter_ref(value) }.try_clone() {
        Ok(f) => f.into_value(),
        Err(_) => std::ptr::null_mut(),
    })
}
