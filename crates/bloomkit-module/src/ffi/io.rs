//! Module I/O shared by every data type: the RDB field adapters over
//! `RedisModule_Load*`/`Save*` (which core's codecs read and write through),
//! and what a loader needs to know about its context.

use bloomkit_core::common::fields::{FieldError, FieldReader, FieldWriter};
use redis_module::raw;

use crate::ffi::api;

pub(crate) struct IoReader(pub(crate) *mut raw::RedisModuleIO);

impl IoReader {
    fn check<T>(&self, v: T) -> Result<T, FieldError> {
        // SAFETY: valid IO handle; the module set HANDLE_IO_ERRORS at load.
        if unsafe { api!(RedisModule_IsIOError)(self.0) } != 0 {
            Err(FieldError)
        } else {
            Ok(v)
        }
    }
}

impl FieldReader for IoReader {
    fn unsigned(&mut self) -> Result<u64, FieldError> {
        // SAFETY: valid IO handle.
        let v = unsafe { api!(RedisModule_LoadUnsigned)(self.0) };
        self.check(v)
    }

    fn double(&mut self) -> Result<f64, FieldError> {
        // SAFETY: valid IO handle.
        let v = unsafe { api!(RedisModule_LoadDouble)(self.0) };
        self.check(v)
    }

    fn buffer(&mut self) -> Result<Box<[u8]>, FieldError> {
        let mut len = 0usize;
        // SAFETY: valid IO handle. The buffer comes from the server's allocator,
        // which is also this module's global allocator, so a Box may own it.
        unsafe {
            let ptr = api!(RedisModule_LoadStringBuffer)(self.0, &mut len);
            let ptr = self.check(ptr)?;
            if ptr.is_null() {
                return Err(FieldError);
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

/// True while the server loads its data at startup (or a replica its
/// initial sync), and on a replica, whose RESTOREs come from its primary:
/// what was accepted once is not refused again. False for a client's
/// RESTORE on a primary, which the size limit applies to. (The IO context's
/// client is a temporary one, so the REPLICATED flag cannot tell.)
pub(crate) fn is_loading(io: *mut raw::RedisModuleIO) -> bool {
    // SAFETY: valid IO handle; its context tells startup loading from RESTORE.
    let flags = unsafe {
        let ctx = api!(RedisModule_GetContextFromIO)(io);
        api!(RedisModule_GetContextFlags)(ctx) as u32
    };
    flags & (raw::REDISMODULE_CTX_FLAGS_LOADING | raw::REDISMODULE_CTX_FLAGS_SLAVE) != 0
}

/// The name of the key being loaded, for log lines.
pub(crate) fn key_name(io: *mut raw::RedisModuleIO) -> String {
    // SAFETY: valid IO handle; the key name is borrowed for the call.
    unsafe {
        let name = api!(RedisModule_GetKeyNameFromIO)(io);
        if name.is_null() {
            return String::from("?");
        }
        let mut len = 0usize;
        let ptr = api!(RedisModule_StringPtrLen)(name, &mut len);
        String::from_utf8_lossy(std::slice::from_raw_parts(ptr.cast::<u8>(), len)).into_owned()
    }
}
