//! The `MBbloom--` data type: everything a value owes Redis.
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::bf::rdb`; this file only connects it to the module IO calls.

use std::ffi::{c_int, c_void};

use bloomkit_core::bf::{check_counts, rdb, scandump as dump, Chain, Counts};
use redis_module::raw;

use crate::ffi::guard;
use crate::ffi::{digest_buffers, emit_aof_chunk, log};
use crate::io::{self, IoReader, IoWriter};
use crate::keys::{DataType, Stored};
use crate::{config, stats};

static BF_TYPE: DataType = DataType::new();

/// The registered type, for key type checks.
pub fn bf_type() -> *mut raw::RedisModuleType {
    BF_TYPE.get()
}

pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    BF_TYPE.register(ctx, rdb::TYPE_NAME, rdb::ENCODING_VERSION, crate::keys::type_methods!(Chain))
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

extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let loading = io::is_loading(io);
        // RESTORE is held to RedisBloom 8's count checks; the server's own
        // RDB (startup, a replica's full sync) is trusted, so that no file
        // stops it from starting, and what fails the checks is logged.
        let counts = if loading { Counts::Trusted } else { Counts::Checked };
        match rdb::load(&mut IoReader(io), encver, config::limits_for_load(loading), counts) {
            Ok(chain) => {
                if loading {
                    io::warn_if_over_limit(io, chain.size_bytes());
                    let links = chain.filters().iter().map(|f| (f.shape.capacity, f.items));
                    if check_counts(chain.items(), chain.options(), chain.growth(), links).is_err() {
                        log(
                            std::ptr::null_mut(),
                            c"warning",
                            &format!(
                                "bloomkit: loaded filter '{}' whose counts RESTORE would refuse (items {}, \
                                 growth {}, options {}); kept as it was saved",
                                io::key_name(io),
                                chain.items(),
                                chain.growth(),
                                chain.options()
                            ),
                        );
                    }
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

impl Stored for Chain {
    fn data_type() -> *mut raw::RedisModuleType {
        bf_type()
    }

    fn into_value(self) -> *mut c_void {
        into_value(self)
    }

    unsafe fn free_value(value: *mut c_void) {
        free_value(value)
    }

    const DEFRAG_KIND: crate::stats::defrag::Kind = crate::stats::defrag::Kind::Bf;

    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize> {
        Chain::relocate(self, from, to)
    }
}
