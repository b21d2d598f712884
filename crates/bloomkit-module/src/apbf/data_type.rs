//! The `bkit-apbf` data type: everything a sliding-window filter owes the
//! server. The bytes are core's (`Apbf::encode`); this file connects them
//! to the module IO calls, with the same size rules as `MBbloom--`.

use std::ffi::{c_int, c_void};

use bloomkit_core::apbf::Apbf;
use bloomkit_core::common::fields::{FieldReader, FieldWriter};
use redis_module::raw;

use crate::config;
use crate::ffi::guard;
use crate::ffi::{digest_buffers, emit_aof_chunk, log};
use crate::io::{self, IoReader, IoWriter};
use crate::keys::{DataType, Stored};

/// Nine characters, as the server requires; never changes once released.
pub const TYPE_NAME: &str = "bkit-apbf";
/// 1: the first state format (`BKAPBF01`); 2: burst-safe windows
/// (`BKAPBF02`). Both load; 2 is written.
const ENCODING_VERSION: c_int = 2;
/// Bytes of the body per AOF-rewrite command.
const CHUNK: usize = 1 << 20;

static APBF_TYPE: DataType = DataType::new();

pub fn apbf_type() -> *mut raw::RedisModuleType {
    APBF_TYPE.get()
}

pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    APBF_TYPE.register(ctx, TYPE_NAME, ENCODING_VERSION, crate::keys::type_methods!(Apbf))
}

impl Stored for Apbf {
    fn data_type() -> *mut raw::RedisModuleType {
        apbf_type()
    }

    fn into_value(self) -> *mut c_void {
        Box::into_raw(Box::new(self)).cast()
    }

    unsafe fn free_value(value: *mut c_void) {
        drop(Box::from_raw(value.cast::<Apbf>()));
    }

    const DEFRAG_KIND: crate::stats::defrag::Kind = crate::stats::defrag::Kind::Apbf;

    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize> {
        Apbf::relocate(self, from, to)
    }
}

/// # Safety
/// `value` must be a filter stored by this type.
unsafe fn apbf_ref<'a>(value: *const c_void) -> &'a Apbf {
    &*value.cast::<Apbf>()
}

/// RDB files and RESTORE: the state as one string. RESTORE obeys
/// `bf.max-filter-bytes`; loading at startup keeps what it finds, and says so.
extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let refuse = |why: &str| {
            log(std::ptr::null_mut(), c"warning", &format!("bloomkit: refused a {TYPE_NAME} value: {why}"));
            std::ptr::null_mut()
        };
        if !(1..=ENCODING_VERSION).contains(&encver) {
            return refuse(&format!("encoding {encver} is unknown"));
        }
        let loading = io::is_loading(io);
        let buffer = match IoReader(io).buffer() {
            Ok(b) => b,
            Err(_) => return refuse("cut short"),
        };
        match Apbf::decode_owned(buffer.into_vec(), config::limits_for_load(loading).max_bytes) {
            Ok(f) => {
                if loading {
                    io::warn_if_over_limit(io, f.bytes() as u64);
                }
                f.into_value()
            }
            Err(e) => refuse(&e.to_string()),
        }
    })
}

extern "C" fn rdb_save(io: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: the server passes a value of this type.
    guard((), || IoWriter(io).buffer(&unsafe { apbf_ref(value) }.encode()))
}

/// The state as `APBF.LOADCHUNK`s: the header, then the body by the MiB
/// (chunks of zeros are left out: a new filter is zeroed).
extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard((), || {
        // SAFETY: the server passes a value of this type.
        let f = unsafe { apbf_ref(value) };
        let emit = |iter: usize, data: &[u8]| emit_aof_chunk(aof, c"APBF.LOADCHUNK", key, iter as i64, data);
        emit(0, &f.encode_header());
        for (i, chunk) in f.bits().chunks(CHUNK).enumerate() {
            if chunk.iter().any(|&b| b != 0) {
                emit(1 + i * CHUNK, chunk);
            }
        }
    })
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(0, || std::mem::size_of::<Apbf>() + unsafe { apbf_ref(value) }.bytes())
}

/// DEBUG DIGEST-VALUE: header and body, so equal digests mean equal filters.
extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type and a digest handle.
        let f = unsafe { apbf_ref(value) };
        digest_buffers(md, &[&f.encode_header(), f.bits()]);
    })
}

/// Large filters are freed on a background thread, as for `MBbloom--`.
extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(1, || unsafe { apbf_ref(value) }.bytes() >> 20)
}

/// COPY: a failed allocation makes COPY fail, not the server.
extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: the server passes a value of this type.
    guard(std::ptr::null_mut(), || match unsafe { apbf_ref(value) }.try_clone() {
        Ok(f) => f.into_value(),
        Err(_) => std::ptr::null_mut(),
    })
}
