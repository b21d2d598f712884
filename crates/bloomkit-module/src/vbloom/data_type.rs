//! The `bloomfltr` data type: everything a valkey-bloom object owes the
//! server, in valkey-bloom's formats (RDB value and DUMP payload, AOF
//! rewrite as `BF.LOAD key blob`), so that its files load here and ours
//! load there. The formats live in `bloomkit_core::vbloom`.

use std::ffi::{c_int, c_void};

use bloomkit_core::vbloom::{Object, ENCODING_VERSION, TYPE_NAME};
use redis_module::raw;

use crate::ffi::guard;
use crate::ffi::{api, emit_aof_command, log};
use crate::io::{self, IoReader, IoWriter};
use crate::keys::{DataType, Stored};
use crate::{config, stats};

use super::counters;

static VBLOOM_TYPE: DataType = DataType::new();

/// The registered type, for key type checks.
pub fn vbloom_type() -> *mut raw::RedisModuleType {
    VBLOOM_TYPE.get()
}

pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    VBLOOM_TYPE.register(ctx, TYPE_NAME, ENCODING_VERSION, crate::keys::type_methods!(Object))
}

impl Stored for Object {
    fn data_type() -> *mut raw::RedisModuleType {
        vbloom_type()
    }

    fn into_value(self) -> *mut c_void {
        stats::counted(self.size());
        counters::stored(&self);
        Box::into_raw(Box::new(self)).cast()
    }

    unsafe fn free_value(value: *mut c_void) {
        let object = Box::from_raw(value.cast::<Object>());
        stats::uncounted(object.size());
        counters::freed(&object);
    }

    fn defrag_enabled() -> bool {
        config::vbloom_defrag()
    }

    const DEFRAG_KIND: crate::stats::defrag::Kind = crate::stats::defrag::Kind::Vbloom;

    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize> {
        Object::relocate(self, from, to)
    }
}

/// # Safety
/// `value` must be an object stored by this type.
unsafe fn object_ref<'a>(value: *const c_void) -> &'a Object {
    &*value.cast::<Object>()
}

/// RDB files and RESTORE. RESTORE obeys the limit; loading at startup keeps
/// what it finds, and says so.
extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let loading = io::is_loading(io);
        match Object::load(&mut IoReader(io), encver, config::vbloom_limits(config::limits_for_load(loading))) {
            Ok(object) => {
                if loading {
                    io::warn_if_over_limit(io, object.size());
                }
                object.into_value()
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
    guard((), || unsafe { object_ref(value) }.save(&mut IoWriter(io)))
}

/// As valkey-bloom rewrites it: one `BF.LOAD key blob`, so that its AOF
/// and ours replay on either module.
///
/// This runs in the rewrite's child process. If the blob cannot be
/// allocated, the child ends (as the server's own allocator ends it when
/// out of memory): the server then counts the rewrite as failed and keeps
/// the old AOF, where skipping the key would lose it.
extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard((), || {
        // SAFETY: the server passes a value of this type.
        match unsafe { object_ref(value) }.encode_blob() {
            Ok(blob) => emit_aof_command(aof, c"BF.LOAD", key, &blob),
            Err(e) => {
                log(std::ptr::null_mut(), c"warning", &format!("bloomkit: AOF rewrite stopped: {e}"));
                std::process::abort();
            }
        }
    })
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(0, || unsafe { object_ref(value) }.size() as usize)
}

/// DEBUG DIGEST-VALUE: valkey-bloom's sequence (parameters, then each
/// sub-filter's bytes, items and capacity), so digests match across the two.
extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type and a digest handle.
        let o = unsafe { object_ref(value) };
        let long = |v: i64| unsafe { api!(RedisModule_DigestAddLongLong)(md, v) };
        // SAFETY: a valid digest handle; the server only reads the bytes.
        let buffer = |b: &[u8]| unsafe {
            api!(RedisModule_DigestAddStringBuffer)(md, b.as_ptr().cast_mut().cast(), b.len())
        };
        long(i64::from(o.expansion().unwrap_or(0)));
        buffer(&o.fp_rate().to_le_bytes());
        buffer(&o.tightening().to_le_bytes());
        long(i64::from(o.seed_random()));
        for f in o.filters() {
            buffer(f.serialized());
            long(f.items() as i64);
            long(f.capacity() as i64);
        }
        // SAFETY: a valid digest handle.
        unsafe { api!(RedisModule_DigestEndSequence)(md) };
    })
}

/// Large objects are freed on a background thread, as for `MBbloom--`.
extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(1, || (unsafe { object_ref(value) }.size() >> 20) as usize)
}

/// COPY: a failed allocation makes COPY fail, not the server.
extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: the server passes a value of this type.
    guard(std::ptr::null_mut(), || match unsafe { object_ref(value) }.try_clone() {
        Ok(o) => o.into_value(),
        Err(_) => std::ptr::null_mut(),
    })
}
