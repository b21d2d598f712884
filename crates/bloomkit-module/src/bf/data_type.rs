//! The `MBbloom--` data type: everything a value owes Redis.
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::rdb`; this file only connects it to the module IO calls.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use bloomkit_core::error::Error;
use bloomkit_core::rdb::{self, FieldReader, FieldWriter};
use bloomkit_core::{dump, Chain};
use redis_module::raw;

use crate::ffi::{api, cstring, digest_buffers, emit_aof_chunk, log};
use crate::{config, guard, stats};

static BF_TYPE: AtomicPtr<raw::RedisModuleType> = AtomicPtr::new(std::ptr::null_mut());

/// The registered type, for key type checks.
pub fn bf_type() -> *mut raw::RedisModuleType {
    BF_TYPE.load(Relaxed)
}

pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    // SAFETY: all-zero is "no callback" for every optional field.
    let mut methods: raw::RedisModuleTypeMethods = unsafe { std::mem::zeroed() };
    methods.version = raw::REDISMODULE_TYPE_METHOD_VERSION as u64;
    methods.rdb_load = Some(rdb_load);
    methods.rdb_save = Some(rdb_save);
    methods.aof_rewrite = Some(aof_rewrite);
    methods.mem_usage = Some(mem_usage);
    methods.digest = Some(digest);
    methods.free = Some(free);
    methods.free_effort = Some(free_effort);
    methods.copy = Some(copy);
    let name = cstring(rdb::TYPE_NAME);
    // SAFETY: valid context during OnLoad; the server copies the methods.
    let ty =
        unsafe { api!(RedisModule_CreateDataType)(ctx, name.as_ptr(), rdb::ENCODING_VERSION, &mut methods) };
    if ty.is_null() {
        return Err(format!("could not register data type {}", rdb::TYPE_NAME));
    }
    BF_TYPE.store(ty, Relaxed);
    Ok(())
}

/// # Safety
/// `value` must be a chain stored by this type.
unsafe fn chain_ref<'a>(value: *mut c_void) -> &'a Chain {
    &*value.cast::<Chain>()
}

/// Hands a chain to the keyspace, counting it.
pub fn into_value(chain: Chain) -> *mut c_void {
    stats::created(&chain);
    Box::into_raw(Box::new(chain)).cast()
}

pub(crate) struct IoReader(pub(crate) *mut raw::RedisModuleIO);

impl IoReader {
    fn check<T>(&self, v: T) -> Result<T, Error> {
        // SAFETY: valid IO handle; the module set HANDLE_IO_ERRORS at load.
        if unsafe { api!(RedisModule_IsIOError)(self.0) } != 0 {
            Err(Error::BadData)
        } else {
            Ok(v)
        }
    }
}

impl FieldReader for IoReader {
    fn unsigned(&mut self) -> Result<u64, Error> {
        // SAFETY: valid IO handle.
        let v = unsafe { api!(RedisModule_LoadUnsigned)(self.0) };
        self.check(v)
    }

    fn double(&mut self) -> Result<f64, Error> {
        // SAFETY: valid IO handle.
        let v = unsafe { api!(RedisModule_LoadDouble)(self.0) };
        self.check(v)
    }

    fn buffer(&mut self) -> Result<Box<[u8]>, Error> {
        let mut len = 0usize;
        // SAFETY: valid IO handle. The buffer comes from the server's allocator,
        // which is also this module's global allocator, so a Box may own it.
        unsafe {
            let ptr = api!(RedisModule_LoadStringBuffer)(self.0, &mut len);
            let ptr = self.check(ptr)?;
            if ptr.is_null() {
                return Err(Error::BadData);
            }
            if len == 0 {
                api!(RedisModule_Free)(ptr.cast());
                return Ok(Box::new([]));
            }
            Ok(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr.cast::<u8>(), len)))
        }
    }
}

pub(crate) struct IoWriter(pub(crate) *mut raw::RedisModuleIO);

impl FieldWriter for IoWriter {
    fn unsigned(&mut self, v: u64) {
        // SAFETY: valid IO handle.
        unsafe { api!(RedisModule_SaveUnsigned)(self.0, v) };
    }
    fn double(&mut self, v: f64) {
        // SAFETY: valid IO handle.
        unsafe { api!(RedisModule_SaveDouble)(self.0, v) };
    }
    fn buffer(&mut self, v: &[u8]) {
        // SAFETY: valid IO handle; the server copies the bytes.
        unsafe { api!(RedisModule_SaveStringBuffer)(self.0, v.as_ptr().cast(), v.len()) };
    }
}

extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        // SAFETY: valid IO handle; its context tells startup loading from RESTORE.
        let loading = unsafe {
            let ctx = api!(RedisModule_GetContextFromIO)(io);
            api!(RedisModule_GetContextFlags)(ctx) as u32 & raw::REDISMODULE_CTX_FLAGS_LOADING != 0
        };
        match rdb::load(&mut IoReader(io), encver, config::limits_for_load(loading)) {
            Ok(chain) => {
                if loading {
                    warn_if_over_limit(io, &chain);
                }
                into_value(chain)
            }
            Err(e) => {
                log(
                    std::ptr::null_mut(),
                    c"warning",
                    &format!("bloomkit: refused a {} value: {e}", rdb::TYPE_NAME),
                );
                std::ptr::null_mut()
            }
        }
    })
}

/// A filter above `bf.max-filter-bytes` in the RDB file is kept at startup
/// (refusing it would stop the server or lose the data), and said so.
fn warn_if_over_limit(io: *mut raw::RedisModuleIO, chain: &Chain) {
    let Some(limit) = config::limits_for_load(false).max_bytes else { return };
    let size = chain.size_bytes();
    if size <= limit {
        return;
    }
    // SAFETY: valid IO handle; the key name is borrowed for the call.
    let key = unsafe {
        let name = api!(RedisModule_GetKeyNameFromIO)(io);
        if name.is_null() {
            String::from("?")
        } else {
            let mut len = 0usize;
            let ptr = api!(RedisModule_StringPtrLen)(name, &mut len);
            String::from_utf8_lossy(std::slice::from_raw_parts(ptr.cast::<u8>(), len)).into_owned()
        }
    };
    log(
        std::ptr::null_mut(),
        c"warning",
        &format!(
            "bloomkit: loaded filter '{key}' of {size} bytes, above bf.max-filter-bytes ({limit}); \
             kept, since refusing it at load would lose it; it cannot grow until the limit is raised"
        ),
    );
}

extern "C" fn rdb_save(io: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: the server passes a value of this type.
    guard((), || rdb::save(unsafe { chain_ref(value) }, &mut IoWriter(io)))
}

/// Rewrites the filter as RedisBloom does: its SCANDUMP stream as `BF.LOADCHUNK`s.
extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard((), || {
        // SAFETY: the server passes a value of this type.
        let chain = unsafe { chain_ref(value) };
        let emit = |iter: i64, data: &[u8]| emit_aof_chunk(aof, c"BF.LOADCHUNK", key, iter, data);
        emit(1, &dump::encode_header(chain));
        for (iter, data) in dump::chunks(chain) {
            emit(iter, data);
        }
    })
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(0, || unsafe { chain_ref(value as *mut c_void) }.size_bytes() as usize)
}

/// DEBUG DIGEST-VALUE: the header and every bit array, so that equal digests
/// mean equal filters (replica checks rely on it).
extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type and a digest handle.
        let chain = unsafe { chain_ref(value) };
        let header = dump::encode_header(chain);
        let mut buffers: Vec<&[u8]> = vec![&header];
        buffers.extend(chain.filters().iter().map(|f| f.bytes()));
        digest_buffers(md, &buffers);
    })
}

extern "C" fn free(value: *mut c_void) {
    // SAFETY: the server passes ownership of a value of this type.
    guard((), || unsafe { free_value(value) })
}

/// Drops a value made by [`into_value`], uncounting it.
///
/// # Safety
/// `value` must come from `into_value` and not be used afterwards.
pub unsafe fn free_value(value: *mut c_void) {
    let chain = Box::from_raw(value.cast::<Chain>());
    stats::freed(&chain);
}

/// Large filters are freed on a background thread (UNLINK, lazyfree): the
/// server does that above an effort of 64, here 64 MiB of bits.
extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(1, || (unsafe { chain_ref(value as *mut c_void) }.size_bytes() >> 20) as usize)
}

extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the server passes a value of this type.
        match unsafe { chain_ref(value as *mut c_void) }.try_clone() {
            Ok(chain) => into_value(chain),
            Err(_) => std::ptr::null_mut(),
        }
    })
}
