//! Key lookup and storing, shared by every data type: each type says which
//! registered type it is and how its values enter and leave the keyspace;
//! the checks (empty, ours, another type) and the hand-over live here once.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use bloomkit_core::common::memory::{HeapBlocks, OutOfMemory};
use bloomkit_core::common::reply::WrongType;
use bloomkit_core::Reply;
use redis_module::raw;

use crate::ffi::{api, cstring, Key, Slot};
use crate::stats::{Counters, Held, BYTES, OBJECTS};

/// A module data type: registered once at load, its handle kept for key
/// type checks.
pub struct DataType(AtomicPtr<raw::RedisModuleType>);

impl DataType {
    pub const fn new() -> DataType {
        DataType(AtomicPtr::new(std::ptr::null_mut()))
    }

    pub fn get(&self) -> *mut raw::RedisModuleType {
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
pub unsafe fn defrag<T>(
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

/// A Rust value stored under a module data type: which registered type it
/// is, which counters follow it in and out of the keyspace, and how active
/// defrag walks it. Entering and leaving are written once, here: a value
/// enters its counters when it is made and leaves them when the server
/// frees it (why that is exact: `crate::stats`).
pub trait Stored: Sized + Send + 'static + Blocks {
    /// The registered type (set once at load).
    const TYPE: &'static DataType;
    /// The type's `INFO bf` counters (objects, bytes, defrag moves).
    const COUNTERS: &'static Counters;
    /// The bytes the counters hold for this value: its real size
    /// ([`real_bytes`]), which writes keep current ([`Stored::write`]).
    /// Only for a value in its box (the keyspace's, or one about to be).
    fn counted_bytes(&self) -> u64 {
        real_bytes(self)
    }
    /// Totals beyond objects and bytes that follow the value in and out of
    /// the keyspace (valkey-bloom's), written into its fields of `held`.
    fn held_extra(&self, _held: &mut Held) {}
    /// Offers the value's buffers to active defrag from buffer `from` on
    /// (the core type's `relocate`); `Some(next)` when time ran out first.
    fn relocate_buffers(&mut self, from: usize, to: &mut crate::ffi::Defrag) -> Option<usize>;
    /// Whether active defrag may move values of this type now (valkey-bloom's
    /// objects obey `bf.bloom-defrag-enabled`).
    fn defrag_enabled() -> bool {
        true
    }

    fn data_type() -> *mut raw::RedisModuleType {
        Self::TYPE.get()
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

    /// [`Stored::write`] for code that reaches values of this type another
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

/// The heap blocks a stored value owns beyond its own (the box the keyspace
/// points to), each with the size it was allocated with: core's
/// [`HeapBlocks`], listed for each type in [`blocks`] below.
pub trait Blocks {
    fn blocks(&self, each: &mut dyn FnMut(*const u8, usize));
}

/// Every type's blocks: core's own walk of them.
macro_rules! blocks {
    ($($ty:ty),+ $(,)?) => {$(
        impl Blocks for $ty {
            fn blocks(&self, each: &mut dyn FnMut(*const u8, usize)) {
                HeapBlocks::heap_blocks(self, each)
            }
        }
    )+};
}
blocks!(
    bloomkit_core::bf::Chain,
    bloomkit_core::cf::CuckooFilter,
    bloomkit_core::cms::CountMinSketch,
    bloomkit_core::topk::TopK,
    bloomkit_core::tdigest::TDigest,
    bloomkit_core::apbf::Apbf,
    bloomkit_core::vbloom::Object,
);

/// XF keeps its own count of its blocks (`XF.INFO`'s `Size`, which XF's
/// writes keep current with `Counters::resized`), each at the allocator
/// class it was sized to (`bloomkit_core::xf` sizes blocks to classes), so
/// that figure less the struct it includes is what its blocks take; the
/// value's own block then counts at its real size.
impl Blocks for bloomkit_core::xf::XfFilter {
    fn blocks(&self, each: &mut dyn FnMut(*const u8, usize)) {
        let own = std::mem::size_of::<bloomkit_core::xf::XfFilter>() as u64;
        each(std::ptr::null(), self.size_bytes().saturating_sub(own) as usize);
    }
}

/// What a value really takes: its own block and every block it owns, each
/// at its usable size as the server's allocator reports it (what
/// `used_memory` grew by when they were allocated). The bytes `INFO bf`
/// counts, and `MEMORY USAGE`'s part for the value.
pub fn real_bytes<T: Blocks>(value: &T) -> u64 {
    let mut total = crate::alloc::usable_size((value as *const T).cast(), std::mem::size_of::<T>()) as u64;
    value.blocks(&mut |ptr, len| total += crate::alloc::usable_size(ptr, len) as u64);
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

/// Declares a core type's data type (the `static` the server's handle is
/// kept in) and its [`Stored`] impl: counted in `$counters` at its real
/// size ([`real_bytes`]), its buffers offered to defrag by its `relocate`.
macro_rules! stored {
    ($ty:ident, $counters:path) => {
        static TYPE: $crate::keys::DataType = $crate::keys::DataType::new();

        impl $crate::keys::Stored for $ty {
            const TYPE: &'static $crate::keys::DataType = &TYPE;
            const COUNTERS: &'static $crate::stats::Counters = &$counters;

            fn relocate_buffers(&mut self, from: usize, to: &mut $crate::ffi::Defrag) -> Option<usize> {
                $ty::relocate(self, from, to)
            }
        }
    };
}
pub(crate) use stored;

/// Every data type's `free` callback: the value goes back through its
/// type's [`Stored::free_value`], which takes it out of its counters.
pub extern "C" fn free_callback<T: Stored>(value: *mut c_void) {
    // SAFETY: the server passes ownership of a value of the type this
    // callback was registered for.
    crate::ffi::guard((), || unsafe { T::free_value(value) })
}

/// Every data type's `defrag` callback (`activedefrag yes`): the value and
/// its buffers, resumable between buffers (see [`defrag`]).
pub extern "C" fn defrag_callback<T: Stored>(
    ctx: *mut raw::RedisModuleDefragCtx,
    _key: *mut raw::RedisModuleString,
    value: *mut *mut c_void,
) -> c_int {
    if !T::defrag_enabled() {
        return 0; // done: nothing is moved
    }
    // SAFETY: the server passes its defrag context and the pointer to a
    // value of the type this callback was registered for, which it holds.
    unsafe { defrag::<T>(ctx, value, T::COUNTERS, |v, from, d| v.relocate_buffers(from, d)) }
}

/// The value in a key: `Ok(None)` when the key is empty, `WRONGTYPE` when
/// it holds anything else.
pub fn lookup<T: Stored>(key: &Key) -> Result<Option<NonNull<T>>, Reply> {
    match key.slot::<T>(T::data_type()) {
        Slot::Ours(v) => Ok(Some(v)),
        Slot::Empty => Ok(None),
        Slot::OtherType => Err(WrongType.into()),
    }
}

/// A value of one of two types: `Ok` the first, `Err` the second.
pub type Either<A, B> = Result<NonNull<A>, NonNull<B>>;

/// The value in a key that may hold either of two types (a `BF.*` key:
/// RedisBloom's or valkey-bloom's): `Ok(None)` when the key is empty,
/// `WRONGTYPE` when it holds anything else.
pub fn lookup_either<A: Stored, B: Stored>(key: &Key) -> Result<Option<Either<A, B>>, Reply> {
    match key.slot::<A>(A::data_type()) {
        Slot::Ours(a) => Ok(Some(Ok(a))),
        Slot::Empty => Ok(None),
        Slot::OtherType => match key.slot::<B>(B::data_type()) {
            Slot::Ours(b) => Ok(Some(Err(b))),
            _ => Err(WrongType.into()),
        },
    }
}

/// Stores a new value in an empty key opened for writing.
pub fn store<T: Stored>(key: &Key, value: T) -> Result<NonNull<T>, Reply> {
    let value = value.into_value();
    // A value of T's type: on success the keyspace owns it and frees it
    // through the type's free callback.
    if !key.set_module_value(T::data_type(), value) {
        // SAFETY: refused, so still ours.
        unsafe { T::free_value(value) };
        return Err(OutOfMemory.into());
    }
    Ok(NonNull::new(value.cast()).expect("into_value never returns null"))
}
