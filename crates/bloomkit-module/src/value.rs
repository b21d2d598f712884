//! One data type for every family: the callbacks the server calls for a
//! module value (RDB load and save, AOF rewrite, `DEBUG DIGEST-VALUE`,
//! `COPY`, free, `MEMORY USAGE`, lazy-free effort, active defrag), written
//! once here over [`Value`]. A family's `data_type.rs` implements [`Value`]
//! (and [`Stored`]) for its core type with only what is its own: its name
//! and encoding version (from core), how it loads and saves, what it
//! digests, how it is rewritten into the AOF.
//!
//! Every callback runs inside [`guard`]: no panic crosses into the server,
//! a failed load is logged and refused, a failed copy makes `COPY` fail.

use std::ffi::{c_int, c_void};

use bloomkit_core::common::memory::Limits;
use redis_module::raw;

use crate::config;
use crate::ffi::io::{self, IoReader, IoWriter};
use crate::ffi::{emit_aof_chunk, emit_aof_command, guard, log};
use crate::keys::Stored;

/// What a loader gets: the server's RDB reader (a file at startup or a
/// full sync, or a `RESTORE` payload), the value's encoding version, and
/// whether this is the server loading its own data.
pub struct Load {
    io: *mut raw::RedisModuleIO,
    pub encver: c_int,
    /// True when the server loads its own RDB (startup, a replica's full
    /// sync, `DEBUG RELOAD`): what it holds is kept, within `limits`' ceiling.
    pub loading: bool,
}

impl Load {
    pub fn reader(&mut self) -> IoReader {
        IoReader(self.io)
    }

    /// `RESTORE` obeys `bf.max-filter-bytes`; the server's own data does not,
    /// so that no file stops it from starting (it is logged instead).
    pub fn limits(&self) -> Limits {
        config::limits_for_load(self.loading)
    }

    /// The key being loaded, for log lines.
    pub fn key_name(&self) -> String {
        io::key_name(self.io)
    }
}

pub use crate::ffi::DigestOut;

/// Where an AOF rewrite writes a value: commands naming its key.
pub struct Rewrite {
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
}

impl Rewrite {
    /// `command key number data` (`BF.LOADCHUNK key iter data`, `RESTORE key 0 payload`).
    pub fn chunk(&mut self, command: &std::ffi::CStr, number: i64, data: &[u8]) {
        emit_aof_chunk(self.aof, command, self.key, number, data);
    }

    /// `command key data` (valkey-bloom's `BF.LOAD key blob`).
    pub fn command(&mut self, command: &std::ffi::CStr, data: &[u8]) {
        emit_aof_command(self.aof, command, self.key, data);
    }
}

/// A family's value as the server stores it. See the file's doc.
pub trait Value: Stored {
    /// The registered type name (nine characters, never changed once
    /// released) and the encoding version new values are saved at: core's.
    const TYPE_NAME: &'static str;
    const ENCODING_VERSION: c_int;

    /// The encoding version the type registers with, read once when the
    /// module loads (after the settings): [`Value::ENCODING_VERSION`]
    /// unless the family's level decides it.
    fn encoding_version() -> c_int {
        Self::ENCODING_VERSION
    }

    /// Reads a value, trusting nothing; `Err` says why it was refused.
    fn load(from: &mut Load) -> Result<Self, String>;

    /// Writes the value (what [`Value::load`] reads back).
    fn save(&mut self, to: &mut IoWriter);

    /// The value's size as its family reckons it (RedisBloom's `Size` for
    /// its types): the lazy-free effort (a MiB a unit) and what a startup
    /// load compares with the size limit. `MEMORY USAGE` is the real size
    /// (`keys::real_bytes`), which needs the value in its box.
    fn memory(&self) -> usize;

    /// Every field that makes two values answer differently, so that equal
    /// digests mean equal values (replica checks rely on it).
    fn digest(&mut self, out: &mut DigestOut);

    /// A copy for `COPY`; `None` when it cannot be allocated.
    fn copy(&self) -> Option<Self>;

    /// The commands that rebuild the value, for an AOF rewrite without
    /// RDB preamble. Runs in the rewrite's child process.
    fn rewrite(&mut self, aof: &mut Rewrite);
}

/// What a family whose data type is declared with [`plain_value!`] writes
/// itself: what makes two values differ, and how an AOF rebuilds one.
pub trait Own {
    /// See [`Value::digest`].
    fn digest(&mut self, out: &mut DigestOut);
    /// See [`Value::rewrite`].
    fn rewrite(&mut self, aof: &mut Rewrite);
}

/// Declares the data type of a core type with the usual shape (core's
/// `TYPE_NAME` and `ENCODING_VERSION` beside it; `load(reader, encver,
/// limits)`, `save(writer)`, `size_bytes()`, `try_clone()`, `relocate()`)
/// counted in `$counters`: everything but its [`Own`] parts, which the
/// family implements beside this line.
macro_rules! plain_value {
    ($core:path, $ty:ident, $counters:path) => {
        $crate::keys::stored!($ty, $counters);

        impl $crate::value::Value for $ty {
            const TYPE_NAME: &'static str = {
                use $core as core;
                core::TYPE_NAME
            };
            const ENCODING_VERSION: std::ffi::c_int = {
                use $core as core;
                core::ENCODING_VERSION
            };

            /// A value that does not describe one is refused, never trusted.
            fn load(from: &mut $crate::value::Load) -> Result<Self, String> {
                $ty::load(&mut from.reader(), from.encver, from.limits()).map_err(|e| e.to_string())
            }

            fn save(&mut self, to: &mut $crate::ffi::io::IoWriter) {
                $ty::save(self, to)
            }

            fn memory(&self) -> usize {
                self.size_bytes() as usize
            }

            fn digest(&mut self, out: &mut $crate::value::DigestOut) {
                <$ty as $crate::value::Own>::digest(self, out)
            }

            fn copy(&self) -> Option<Self> {
                self.try_clone().ok()
            }

            fn rewrite(&mut self, aof: &mut $crate::value::Rewrite) {
                <$ty as $crate::value::Own>::rewrite(self, aof)
            }
        }
    };
}
pub(crate) use plain_value;

/// Registers `T` under its name and version with the shared callbacks.
pub fn register<T: Value>(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    register_with::<T>(ctx, |_| ())
}

/// [`register`], with callbacks of the type's own (`more`: aux fields).
pub fn register_with<T: Value>(
    ctx: *mut raw::RedisModuleCtx,
    more: impl FnOnce(&mut raw::RedisModuleTypeMethods),
) -> Result<(), String> {
    T::TYPE.register(ctx, T::TYPE_NAME, T::encoding_version(), |m| {
        more(m);
        m.rdb_load = Some(rdb_load::<T>);
        m.rdb_save = Some(rdb_save::<T>);
        m.aof_rewrite = Some(aof_rewrite::<T>);
        m.mem_usage = Some(mem_usage::<T>);
        m.digest = Some(digest::<T>);
        m.free = Some(crate::keys::free_callback::<T>);
        m.free_effort = Some(free_effort::<T>);
        m.copy = Some(copy::<T>);
        if crate::ffi::defrag_supported() {
            m.defrag = Some(crate::keys::defrag_callback::<T>);
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
        let mut from = Load { io, encver, loading: io::is_loading(io) };
        match T::load(&mut from) {
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
    guard((), || unsafe { value_mut::<T>(value) }.write(|v| v.save(&mut IoWriter(io))))
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
/// ([`crate::keys::real_bytes`], as `INFO bf` counts it) and what the server
/// allocates for a module key that its own part of `MEMORY USAGE` (the
/// key's name and table entry) leaves out ([`key_wrapper`]), so that the
/// reply is what the key really costs (within 5%: `tests/it/memory.rs`).
extern "C" fn mem_usage<T: Value>(value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(0, || crate::keys::real_bytes(unsafe { &*value.cast::<T>() }) as usize + key_wrapper())
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
/// returned on a thread of ours instead (`keys::free_later`). Never 0,
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
