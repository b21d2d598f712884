//! A family's value as the server stores it: one trait, [`Value`], over
//! core's contract ([`FamilyValue`]: name, encoding version, load, save,
//! size, copy, relocation). A family declares its type one way, the same
//! for all eight:
//!
//! ```ignore
//! impl Value for CuckooFilter {
//!     const COUNTERS: &'static Counters = &super::counters::COUNTERS;
//!     fn digest(&mut self, out: &mut DigestOut) { ... }
//!     fn rewrite(&mut self, aof: &mut Rewrite) { ... }
//! }
//! ```
//!
//! which is what is its own: its `INFO bf` counters, what makes two values
//! differ, and how an AOF rebuilds one. Everything else has a default
//! (from core, or written once here), which a family overrides only where
//! it differs (a load that logs, a level that picks the encoding).
//!
//! Here too: how a value enters and leaves the keyspace and its counters,
//! and the registry of the data types' handles. The server's callbacks
//! over this trait are in [`crate::data_type`].

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use bloomkit_core::common::memory::{HeapBlocks, Limits};
use bloomkit_core::common::value::{FamilyValue, Loading};
use bloomkit_core::family::{index_of, KINDS};
use redis_module::raw;

use crate::ffi::io::{self, IoReader, IoWriter};
use crate::ffi::{api, cstring, emit_aof_chunk, emit_aof_command};
use crate::stats::{Counters, Held, BYTES, OBJECTS};

pub use crate::ffi::DigestOut;

/// A family's value as the server stores it. See the file's doc.
pub trait Value: FamilyValue + Send + 'static {
    /// The type's `INFO bf` counters (objects, bytes, defrag moves).
    const COUNTERS: &'static Counters;

    /// Every field that makes two values answer differently, so that equal
    /// digests mean equal values (replica checks rely on it).
    fn digest(&mut self, out: &mut DigestOut);

    /// The commands that rebuild the value, for an AOF rewrite without
    /// RDB preamble. Runs in the rewrite's child process.
    fn rewrite(&mut self, aof: &mut Rewrite);

    /// Where the type's handle is kept: its family's place in core's list.
    const SLOT: usize = index_of(Self::TYPE_NAME);

    /// The encoding version the type registers with, read once when the
    /// module loads (after the settings): core's unless the family's level
    /// decides it.
    fn encoding_version() -> c_int {
        Self::ENCODING_VERSION
    }

    /// Reads a value, trusting nothing; `Err` says why it was refused.
    fn from_rdb(from: &mut Load) -> Result<Self, String> {
        Self::load(&mut from.reader(), from.how()).map_err(|e| e.to_string())
    }

    /// Writes the value (what [`Value::from_rdb`] reads back).
    fn to_rdb(&mut self, to: &mut IoWriter) {
        self.save(to)
    }

    /// The value's size as its family reckons it: the lazy-free effort (a
    /// MiB a unit) and what a startup load compares with the size limit.
    /// `MEMORY USAGE` is the real size ([`real_bytes`]).
    fn memory(&self) -> usize {
        self.size_bytes() as usize
    }

    /// A copy for `COPY`; `None` when it cannot be allocated.
    fn copy(&self) -> Option<Self> {
        self.try_clone().ok()
    }

    /// The bytes the counters hold for this value: its real size
    /// ([`real_bytes`]), which writes keep current ([`Value::write`]).
    /// Only for a value in its box (the keyspace's, or one about to be).
    fn counted_bytes(&self) -> u64 {
        real_bytes(self)
    }

    /// Totals beyond objects and bytes that follow the value in and out of
    /// the keyspace (valkey-bloom's), written into its fields of `held`.
    fn held_extra(&self, _held: &mut Held) {}

    /// Whether active defrag may move values of this type now (valkey-bloom's
    /// objects obey `bf.bloom-defrag-enabled`).
    fn defrag_enabled() -> bool {
        true
    }

    /// The registered type (null before the module registered it).
    fn data_type() -> *mut raw::RedisModuleType {
        TYPES[Self::SLOT].get()
    }

    /// What the value adds to its counters' held fields.
    fn held(&self) -> Held {
        let mut held = [0; crate::stats::MAX_FIELDS];
        held[OBJECTS] = 1;
        held[BYTES] = self.counted_bytes();
        self.held_extra(&mut held);
        held
    }

    /// Runs a write that may change the value's blocks (grow it, shrink it,
    /// make or drop a cached copy), and keeps its bytes in the counters
    /// current: what the main thread's allocations changed, at their real
    /// sizes ([`crate::alloc::track`]). `write` must touch no other value,
    /// and return nothing it allocated (a reply's text, a result vector):
    /// that would count as the value's until freed, after the count.
    fn write<R>(&mut self, write: impl FnOnce(&mut Self) -> R) -> R {
        Self::track(|| write(self))
    }

    /// [`Value::write`] for code that reaches values of this type another
    /// way (several at once: a merge's sources). `f` must make or drop no
    /// whole value (those count themselves in and out) and touch no value
    /// of another type.
    fn track<R>(f: impl FnOnce() -> R) -> R {
        let (result, delta) = crate::alloc::track(f);
        Self::COUNTERS.resized_by(delta);
        result
    }

    /// Hands the value over as the pointer the keyspace keeps, counting it.
    fn into_value(self) -> *mut c_void {
        // Counted in its box: its own block is part of what it takes.
        let value = Box::new(self);
        Self::COUNTERS.enter(&value.held());
        Box::into_raw(value).cast()
    }

    /// Takes back a value made by `into_value` (freed by the keyspace, or
    /// refused by it): it leaves its counters, and is freed.
    ///
    /// # Safety
    /// `value` must come from `into_value` and not be used afterwards.
    unsafe fn free_value(value: *mut c_void) {
        // SAFETY: the caller's guarantee.
        let value = unsafe { Box::from_raw(value.cast::<Self>()) };
        let held = value.held();
        Self::COUNTERS.leave(&held);
        free_later(value, held[BYTES]);
    }
}

/// What a loader gets: the server's RDB reader (a file at startup or a
/// full sync, or a `RESTORE` payload), the value's encoding version, and
/// whether this is the server loading its own data.
pub struct Load {
    pub(crate) io: *mut raw::RedisModuleIO,
    pub encver: c_int,
    /// True when the server loads its own RDB (startup, a replica's full
    /// sync, `DEBUG RELOAD`): what it holds is kept, within `limits`' ceiling.
    pub loading: bool,
    /// `RESTORE` obeys `bf.max-filter-bytes`; the server's own data does
    /// not, so that no file stops it from starting (it is logged instead).
    pub limits: Limits,
}

impl Load {
    pub fn reader(&mut self) -> IoReader {
        IoReader(self.io)
    }

    /// What core's loaders are told.
    pub fn how(&self) -> Loading {
        Loading { encver: self.encver, limits: self.limits, own_data: self.loading }
    }

    /// The key being loaded, for log lines.
    pub fn key_name(&self) -> String {
        io::key_name(self.io)
    }
}

/// Where an AOF rewrite writes a value: commands naming its key.
pub struct Rewrite {
    pub(crate) aof: *mut raw::RedisModuleIO,
    pub(crate) key: *mut raw::RedisModuleString,
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

/// A module data type: registered once at load, its handle kept for key
/// type checks.
pub struct DataType(AtomicPtr<raw::RedisModuleType>);

impl DataType {
    const fn new() -> DataType {
        DataType(AtomicPtr::new(std::ptr::null_mut()))
    }

    fn get(&self) -> *mut raw::RedisModuleType {
        self.0.load(Relaxed)
    }

    /// Registers the type under `name` (nine characters, never changed once
    /// released) and `encver`, with the callbacks `set` fills in.
    pub fn register(
        &self,
        ctx: *mut raw::RedisModuleCtx,
        name: &str,
        encver: c_int,
        set: impl FnOnce(&mut raw::RedisModuleTypeMethods),
    ) -> Result<(), String> {
        // SAFETY: all-zero is "no callback" for every optional field.
        let mut methods: raw::RedisModuleTypeMethods = unsafe { std::mem::zeroed() };
        methods.version = raw::REDISMODULE_TYPE_METHOD_VERSION as u64;
        set(&mut methods);
        let c_name = cstring(name);
        // SAFETY: valid context during OnLoad; the server copies the methods.
        let ty = unsafe { api!(RedisModule_CreateDataType)(ctx, c_name.as_ptr(), encver, &mut methods) };
        if ty.is_null() {
            return Err(format!("could not register data type {name}"));
        }
        self.0.store(ty, Relaxed);
        Ok(())
    }
}

/// Every family's data type handle, in core's order ([`Value::SLOT`]).
pub static TYPES: [DataType; KINDS.len()] = [const { DataType::new() }; KINDS.len()];

/// What a value really takes: its own block and every block it owns, each
/// at its usable size as the server's allocator reports it (what
/// `used_memory` grew by when they were allocated). The bytes `INFO bf`
/// counts, and `MEMORY USAGE`'s part for the value.
pub fn real_bytes<T: HeapBlocks>(value: &T) -> u64 {
    let mut total = crate::alloc::usable_size((value as *const T).cast(), std::mem::size_of::<T>()) as u64;
    value.heap_blocks(&mut |ptr, len| total += crate::alloc::usable_size(ptr, len) as u64);
    total
}

/// Values of at least this many bytes are freed on a thread of ours when the
/// server frees them on its main thread (see [`free_later`]).
const FREE_LATER_FROM: u64 = 1 << 20;

/// Frees a value that left its counters. The server frees our values on its
/// main thread (their `free_effort` keeps them off its lazy-free thread, so
/// that they leave `INFO bf` exactly when their keys leave: `crate::stats`),
/// so a large one (at least [`FREE_LATER_FROM`]) goes to a thread of ours,
/// as the server's lazy free would take it: returning hundreds of MB to the
/// kernel would hold every client for milliseconds. Not under memory
/// pressure (`used_memory` at or past `maxmemory`): eviction measures what a
/// deletion freed by `used_memory` right after it, and memory freed later
/// would make it evict more keys than it needs to. Nor off the main thread
/// (a flush the server frees in the background already). Should no thread
/// start, the value is freed here.
fn free_later<T: Send + 'static>(value: Box<T>, bytes: u64) {
    if bytes < FREE_LATER_FROM || !crate::stats::flush::on_main_thread() || memory_pressure() {
        return drop(value);
    }
    let mut freer = FREER.lock().unwrap_or_else(|e| e.into_inner());
    if freer.is_none() {
        let (tx, rx) = std::sync::mpsc::channel::<Box<dyn Send>>();
        let started = std::thread::Builder::new().name("bloomkit-free".into()).spawn(move || {
            for value in rx {
                drop(value);
            }
        });
        if started.is_ok() {
            *freer = Some(tx);
        }
    }
    match freer.as_ref() {
        Some(tx) => {
            // The thread never ends, so the channel stays open; should it
            // have, the value comes back and is freed here.
            if let Err(returned) = tx.send(value) {
                drop(returned.0);
            }
        }
        None => drop(value),
    }
}

/// The thread [`free_later`] hands large values to, started at the first.
static FREER: std::sync::Mutex<Option<std::sync::mpsc::Sender<Box<dyn Send>>>> = std::sync::Mutex::new(None);

/// Whether the server is at or past `maxmemory` (and so may be evicting).
fn memory_pressure() -> bool {
    crate::ffi::used_memory_ratio().is_some_and(|ratio| ratio >= 1.0)
}
