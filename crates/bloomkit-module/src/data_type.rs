//! The server's callbacks for every data type, written once over
//! [`Value`]: RDB load and save, AOF rewrite, `DEBUG DIGEST-VALUE`, `COPY`,
//! free, `MEMORY USAGE`, lazy-free effort, active defrag.
//!
//! Every callback runs inside [`guard`]: no panic crosses into the server,
//! a failed load is logged and refused, a failed copy makes `COPY` fail.

use std::ffi::{c_int, c_void};

use redis_module::raw;

use crate::config;
use crate::ffi::io::{self, IoWriter};
use crate::ffi::{guard, log, DigestOut};
use crate::stats::Counters;
use crate::value::{Load, Rewrite, Value, TYPES};

/// Registers `T` under its name and version with the shared callbacks.
pub fn register<T: Value>(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    register_with::<T>(ctx, |_| ())
}

/// [`register`], with callbacks of the type's own (`more`: aux fields).
pub fn register_with<T: Value>(
    ctx: *mut raw::RedisModuleCtx,
    more: impl FnOnce(&mut raw::RedisModuleTypeMethods),
) -> Result<(), String> {
    TYPES[T::SLOT].register(ctx, T::TYPE_NAME, T::encoding_version(), |m| {
        more(m);
        m.rdb_load = Some(rdb_load::<T>);
        m.rdb_save = Some(rdb_save::<T>);
        m.aof_rewrite = Some(aof_rewrite::<T>);
        m.mem_usage = Some(mem_usage::<T>);
        m.digest = Some(digest::<T>);
        m.free = Some(free_callback::<T>);
        m.free_effort = Some(free_effort::<T>);
        m.copy = Some(copy::<T>);
        if crate::ffi::defrag_supported() {
            m.defrag = Some(defrag_callback::<T>);
        }
    })
}

/// # Safety
/// `value` must be a `T` stored by `T`'s type, used by nothing else meanwhile.
unsafe fn value_mut<'a, T>(value: *mut c_void) -> &'a mut T {
    &mut *value.cast::<T>()
}

/// RDB files and RESTORE. What does not describe a value is refused and
/// logged; the server's own data past the size limit is kept, and logged.
extern "C" fn rdb_load<T: Value>(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let loading = io::is_loading(io);
        let mut from = Load { io, encver, loading, limits: config::limits_for_load(loading) };
        match T::from_rdb(&mut from) {
            Ok(v) => {
                if from.loading {
                    warn_if_over_limit(io, v.memory() as u64);
                }
                v.into_value()
            }
            Err(e) => {
                log(
                    std::ptr::null_mut(),
                    c"warning",
                    &format!("bloomkit: refused a {} value (encoding version {encver}): {e}", T::TYPE_NAME),
                );
                std::ptr::null_mut()
            }
        }
    })
}

/// A save may change what a value holds beside itself (a t-digest's
/// compressed copy): `write` keeps INFO's bytes current (SAVE, DUMP and
/// DEBUG RELOAD run here, on the main thread).
extern "C" fn rdb_save<T: Value>(io: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: the server passes a value of this type.
    guard((), || unsafe { value_mut::<T>(value) }.write(|v| v.to_rdb(&mut IoWriter(io))))
}

extern "C" fn aof_rewrite<T: Value>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: the server passes a value of this type (the child's copy).
    guard((), || unsafe { value_mut::<T>(value) }.rewrite(&mut Rewrite { aof, key }))
}

/// `MEMORY USAGE`'s figure for the value: what it really takes
/// ([`crate::value::real_bytes`], as `INFO bf` counts it) and what the server
/// allocates for a module key that its own part of `MEMORY USAGE` (the
/// key's name and table entry) leaves out ([`key_wrapper`]), so that the
/// reply is what the key really costs (within 5%: `tests/it/memory.rs`).
extern "C" fn mem_usage<T: Value>(value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(0, || crate::value::real_bytes(unsafe { &*value.cast::<T>() }) as usize + key_wrapper())
}

static KEY_WRAPPER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn key_wrapper() -> usize {
    KEY_WRAPPER.load(std::sync::atomic::Ordering::Relaxed)
}

/// Works out, at load, what a module key costs the server beyond what its
/// `MEMORY USAGE` counts for the key itself: the 16-byte module-value block
/// every module key has; before Redis 8, also the key's 16-byte object and
/// the allocator's rounding of the 24-byte table entry (counted as 24);
/// from Redis 8 and on Valkey, whose key objects embed the name and are
/// counted with it, the 8 bytes a key adds to its hash table beyond what is
/// counted. Each block at the server's allocator's size for it (asked of a
/// block of that size). Measured against `used_memory` per key
/// (`bench/memory.py`, bench/MEMORY-RESULTS.md): with it, `MEMORY USAGE`
/// of every bloomkit type is within 3% of the key's real cost on Redis 7.0
/// and 8.2 and Valkey 8.1 and 9.1, down to values of 100 bytes; without
/// it, 20% under for those.
pub fn measure_key_wrapper(ctx: *mut raw::RedisModuleCtx) {
    let usable = |size: usize| {
        // SAFETY: a block allocated and freed here; the API table is filled.
        unsafe {
            match (raw::RedisModule_Alloc, raw::RedisModule_Free) {
                (Some(alloc), Some(free)) => {
                    let p = alloc(size);
                    let n = crate::alloc::usable_size(p.cast(), size);
                    free(p);
                    n
                }
                _ => size,
            }
        }
    };
    let wrapper = match crate::ffi::server_version(ctx) {
        Some((crate::ffi::ServerKind::Valkey, ..)) => usable(16) + 8,
        Some((crate::ffi::ServerKind::Redis, major, _)) if major >= 8 => usable(16) + 8,
        _ => 2 * usable(16) + usable(24) - 24,
    };
    KEY_WRAPPER.store(wrapper, std::sync::atomic::Ordering::Relaxed);
}

/// As [`rdb_save`], a digest may make a t-digest's compressed copy.
extern "C" fn digest<T: Value>(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: the server passes a value of this type and a digest handle.
    guard((), || unsafe { value_mut::<T>(value) }.write(|v| v.digest(&mut DigestOut(md))))
}

/// A value's size in MiB, from 1 to 64. Never above 64 (the servers' lazy
/// free threshold): every value is then freed on the server's main thread
/// when its key leaves, so that it leaves `INFO bf` right then, with no
/// keyspace event to follow (see `crate::stats`); a large value's memory is
/// returned on a thread of ours instead (`value::free_later`). Never 0,
/// which the servers read as "always in the background". Active defrag
/// reads it too: a value above `active-defrag-max-scan-fields` is walked
/// later, resumably.
extern "C" fn free_effort<T: Value>(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(1, || (unsafe { &*value.cast::<T>() }.memory() >> 20).clamp(1, 64))
}

/// COPY (RedisBloom has none): a failed allocation makes COPY fail, not the server.
extern "C" fn copy<T: Value>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: the server passes a value of this type.
    guard(std::ptr::null_mut(), || match unsafe { &*value.cast::<T>() }.copy() {
        Some(v) => v.into_value(),
        None => std::ptr::null_mut(),
    })
}

/// A filter above `bf.max-filter-bytes` in the RDB file is kept at startup
/// (refusing it would stop the server or lose the data), and said so.
fn warn_if_over_limit(io: *mut raw::RedisModuleIO, size: u64) {
    let Some(limit) = config::limits_for_load(false).max_bytes else { return };
    if size <= limit {
        return;
    }
    let key = io::key_name(io);
    log(
        std::ptr::null_mut(),
        c"warning",
        &format!(
            "bloomkit: loaded filter '{key}' of {size} bytes, above bf.max-filter-bytes ({limit}); \
             kept, since refusing it at load would lose it; it cannot grow until the limit is raised"
        ),
    );
}

/// Active defrag of one value, the body of every type's `defrag` callback:
/// moves the value itself (the `Box` the keyspace points to) when a walk
/// starts, then the buffers `walk` (the core type's `relocate`) offers from
/// the cursor on. Returns 1 when the server's time ran out first (the
/// cursor says where to resume: the next buffer's number plus one, as 0
/// means "start"), 0 when the value is done.
///
/// # Safety
/// `ctx` and `value` must be what the server passed to the callback, and
/// `*value` a `T` stored by this type (made by its `into_value`).
unsafe fn defrag<T>(
    ctx: *mut raw::RedisModuleDefragCtx,
    value: *mut *mut c_void,
    counters: &Counters,
    walk: impl FnOnce(&mut T, usize, &mut crate::ffi::Defrag) -> Option<usize>,
) -> c_int {
    crate::ffi::guard(0, || {
        // SAFETY: the server's context for this callback.
        let mut d = unsafe { crate::ffi::Defrag::new(ctx, crate::alloc::defrag_may_move) };
        let resumed = d.cursor().is_some_and(|c| c > 0);
        let from = match d.cursor() {
            Some(c) if c > 0 => usize::try_from(c - 1).unwrap_or(usize::MAX),
            // SAFETY: the caller's guarantees; no reference to the value is alive.
            _ => unsafe {
                d.value::<T>(value);
                0
            },
        };
        // SAFETY: `*value` now points at the value (moved or not); the
        // server runs this on its main thread, where nothing else uses it.
        let v = unsafe { &mut *(*value).cast::<T>() };
        let more = walk(v, from, &mut d);
        let status = match more {
            Some(next) if d.set_cursor(next as u64 + 1) => 1,
            _ => 0,
        };
        crate::stats::defrag_tally(counters, d.hits, d.misses, d.large_kept, resumed);
        status
    })
}

/// Every data type's `free` callback: the value goes back through its
/// type's [`Value::free_value`], which takes it out of its counters.
extern "C" fn free_callback<T: Value>(value: *mut c_void) {
    // SAFETY: the server passes ownership of a value of the type this
    // callback was registered for.
    crate::ffi::guard((), || unsafe { T::free_value(value) })
}

/// Every data type's `defrag` callback (`activedefrag yes`): the value and
/// its buffers, resumable between buffers (see [`defrag`]).
extern "C" fn defrag_callback<T: Value>(
    ctx: *mut raw::RedisModuleDefragCtx,
    _key: *mut raw::RedisModuleString,
    value: *mut *mut c_void,
) -> c_int {
    if !T::defrag_enabled() {
        return 0; // done: nothing is moved
    }
    // SAFETY: the server passes its defrag context and the pointer to a
    // value of the type this callback was registered for, which it holds.
    unsafe { defrag::<T>(ctx, value, T::COUNTERS, |v, from, d| v.relocate(from, d)) }
}
