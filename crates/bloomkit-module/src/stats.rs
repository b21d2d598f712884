//! The counters behind `INFO bf`: one [`Counters`] per data type, declared
//! in its family's `counters.rs` with the field names its section prints,
//! plus the few tallies that belong to the module as a whole.
//!
//! Relaxed atomics: they are plain tallies read by INFO, and a flush may
//! free values on the server's background thread.
//!
//! # Values in and out, with no cost to writes
//!
//! A value enters its counters when it is made ([`Counters::enter`]: a
//! command, a load, `COPY`) and leaves them when the server frees it
//! ([`Counters::leave`]), nothing in between. That is exact because the
//! server frees every value of ours at once, on its main thread, when its
//! key leaves the keyspace (DEL, UNLINK, expiry, eviction, an overwrite,
//! `FLUSHDB SYNC`): the types answer a `free_effort` of at most 64, under
//! which no server hands a value to its lazy-free thread (see
//! `value::free_effort`; the big buffers of large values are freed on a
//! thread of ours, after they left their counters: `value::free_later`).
//! MOVE and RENAME unlink a key without freeing its value, and SWAPDB moves
//! no value, so none of them needs looking at: earlier releases uncounted a
//! value at its key's `unlink` and subscribed to every generic keyspace
//! event to count MOVE's and RENAME's values back in, which made the server
//! build a module context for every write bloomkit itself announces (9% of
//! its time at `CMS.INCRBY` pipelined).
//!
//! The one case left is a flush the server frees on its background thread
//! (`FLUSHALL ASYNC`, `FLUSHDB ASYNC`, a replica emptying itself with
//! `replica-lazy-flush`, Redis 8's `FLUSHALL SYNC`, which runs as a blocked
//! asynchronous one). A flush of every database ([`on_flush`]) takes the
//! values out at once: each type's held fields move to its `flushed`
//! bucket, and frees on another thread than the main one draw from that
//! bucket first. The server's lazy-free thread frees in the order the work
//! was queued, so the values of that flush (and of any asynchronous flush
//! queued before it) are the next ones freed there; values of a later
//! one-database flush find the bucket empty and leave the live counters.
//! A one-database `FLUSHDB ASYNC` leaves the counters as its values are
//! freed, as `used_memory` does: finding its values at once would mean
//! walking the database on the main thread, which is what it exists to avoid.

use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis_module::raw;

/// The most fields one type's section has.
pub const MAX_FIELDS: usize = 9;

/// Where every type's counters keep the values the keyspace holds and their
/// bytes (as `MEMORY USAGE` counts them); the type's own tallies follow.
pub const OBJECTS: usize = 0;
pub const BYTES: usize = 1;

/// What one value adds to its type's held fields (objects, bytes, and any
/// totals of the type's own that follow its values: valkey-bloom's).
pub type Held = [u64; MAX_FIELDS];

/// One data type's counters: its `INFO bf` section (name and field names,
/// in the order printed) and what active defrag did to its values.
pub struct Counters {
    /// The section's name (the server prints `# bf_<section>`).
    pub section: &'static str,
    /// What every field name starts with (`cms_`).
    prefix: &'static str,
    /// The type's name in the `defrag` section (`bf_defrag_<name>_hits`).
    pub defrag_name: &'static str,
    fields: &'static [&'static str],
    /// How many fields, from the first, follow the values in the keyspace
    /// (objects and bytes, and valkey-bloom's totals): what a flush of every
    /// database takes out at once. The others count events.
    held: usize,
    values: [AtomicU64; MAX_FIELDS],
    /// The held fields of values a flush of every database handed to the
    /// server's background thread and that it has not freed yet (see the
    /// file's doc): out of `INFO bf`, and what their frees draw from.
    flushed: [AtomicU64; MAX_FIELDS],
    defrag_hits: AtomicU64,
    defrag_misses: AtomicU64,
}

impl Counters {
    /// A family's counters: section `name`, fields `name_<field>`, defrag
    /// rows `defrag_name_*`. `fields[OBJECTS]` and `fields[BYTES]` come
    /// first; at most nine.
    pub const fn family(name: &'static str, fields: &'static [&'static str]) -> Counters {
        Counters::new(name, name, name, fields)
    }

    /// Counters whose section, field prefix (with its `_`, or none) and
    /// defrag name differ.
    pub const fn new(
        section: &'static str,
        prefix: &'static str,
        defrag_name: &'static str,
        fields: &'static [&'static str],
    ) -> Counters {
        assert!(fields.len() >= 2 && fields.len() <= MAX_FIELDS, "a section has 2 to 9 fields");
        Counters {
            section,
            prefix,
            defrag_name,
            fields,
            held: 2,
            values: [const { AtomicU64::new(0) }; MAX_FIELDS],
            flushed: [const { AtomicU64::new(0) }; MAX_FIELDS],
            defrag_hits: AtomicU64::new(0),
            defrag_misses: AtomicU64::new(0),
        }
    }

    /// The same counters with the first `n` fields following the values
    /// (objects and bytes are always two of them).
    pub const fn holding(self, n: usize) -> Counters {
        assert!(n >= 2 && n <= self.fields.len(), "objects and bytes are held, and at most every field");
        Counters { held: n, ..self }
    }

    /// A value entered the keyspace (made by a command, loaded, copied),
    /// adding `held` (see [`Held`]). On the main thread, where values are made.
    pub fn enter(&self, held: &Held) {
        for (field, &n) in held.iter().enumerate().take(self.held) {
            self.add(field, n);
        }
    }

    /// A value is freed: its `held` leaves the counters. On the main thread
    /// this is a key that left the keyspace; on any other, a value a flush
    /// handed to the server's background thread, which leaves the `flushed`
    /// bucket while that holds any (see the file's doc).
    pub fn leave(&self, held: &Held) {
        if flush::on_main_thread() {
            return self.sub_held(held, &self.values);
        }
        let _serial = flush::lock();
        let from = if self.flushed[OBJECTS].load(Relaxed) > 0 { &self.flushed } else { &self.values };
        self.sub_held(held, from);
    }

    fn sub_held(&self, held: &Held, from: &[AtomicU64; MAX_FIELDS]) {
        for (field, &n) in held.iter().enumerate().take(self.held) {
            let before = from[field].fetch_update(Relaxed, Relaxed, |v| Some(v.saturating_sub(n)));
            debug_assert!(before.is_ok_and(|v| v >= n), "counter {} went below 0", self.fields[field]);
        }
    }

    /// A flush of every database handed every value to the server's
    /// background thread: they leave `INFO bf` now, into `flushed`, which
    /// their frees draw from. Called with [`flush::lock`] held.
    fn hand_to_flush(&self) {
        for field in 0..self.held {
            let n = self.values[field].swap(0, Relaxed);
            self.flushed[field].fetch_add(n, Relaxed);
        }
    }

    /// A stored value changed size (grew, compacted, finished a doubling).
    pub fn resized(&self, before: u64, after: u64) {
        if after >= before {
            self.add(BYTES, after - before);
        } else {
            self.sub(BYTES, before - after);
        }
    }

    /// A stored value's bytes changed by `delta` (what a write allocated
    /// minus what it freed: `value::Value::write`).
    pub fn resized_by(&self, delta: i64) {
        if delta >= 0 {
            self.add(BYTES, delta as u64);
        } else {
            self.sub(BYTES, delta.unsigned_abs());
        }
    }

    pub fn add(&self, field: usize, n: u64) {
        self.values[field].fetch_add(n, Relaxed);
    }

    /// Never below 0: a slip in the accounting shows as a small error in
    /// `INFO bf`, not as a number near 2^64 (tests catch it in debug builds).
    pub fn sub(&self, field: usize, n: u64) {
        let before = self.values[field].fetch_update(Relaxed, Relaxed, |v| Some(v.saturating_sub(n)));
        debug_assert!(before.is_ok_and(|v| v >= n), "counter {} went below 0", self.fields[field]);
    }

    /// For lookups, counted only on the main thread: a plain load and store
    /// is enough there, and cheaper than an atomic add on the hottest path.
    pub fn add_on_main_thread(&self, field: usize, n: u64) {
        let cell = &self.values[field];
        cell.store(cell.load(Relaxed) + n, Relaxed);
    }

    pub fn get(&self, field: usize) -> u64 {
        self.values[field].load(Relaxed)
    }

    /// What one defrag call did to a value of this type.
    pub fn defragged(&self, hits: u64, misses: u64) {
        self.defrag_hits.fetch_add(hits, Relaxed);
        self.defrag_misses.fetch_add(misses, Relaxed);
    }

    pub fn defrag_hits(&self) -> u64 {
        self.defrag_hits.load(Relaxed)
    }

    pub fn defrag_misses(&self) -> u64 {
        self.defrag_misses.load(Relaxed)
    }

    /// Adds the section with every field, in declaration order.
    pub fn write_info(&self, ctx: *mut raw::RedisModuleInfoCtx) {
        add_section(ctx, &name(self.section, ""));
        for (i, field) in self.fields.iter().enumerate() {
            add_field(ctx, &name(self.prefix, field), self.get(i));
        }
    }
}

/// `prefix` and `field` as an INFO name (INFO is rare: built when asked).
pub fn name(prefix: &str, field: &str) -> CString {
    let sep = if prefix.is_empty() || field.is_empty() || prefix.ends_with('_') { "" } else { "_" };
    CString::new(format!("{prefix}{sep}{field}")).expect("INFO names hold no NUL")
}

/// Declares a family's counters: `COUNTERS` (made by `$new` from
/// `FIELDS`), its section's fields in order (objects and bytes first), and
/// for each field a command counts in, the index constant it counts with.
macro_rules! counters {
    ($new:expr; $($field:ident $(=> $index:ident)?),+ $(,)?) => {
        const FIELDS: &[&str] = &[$(stringify!($field)),+];
        pub static COUNTERS: $crate::stats::Counters = $new;
        $($(pub const $index: usize = $crate::stats::position(FIELDS, stringify!($field));)?)+
    };
}
pub(crate) use counters;

/// Where `name` is in `fields` (at compile time: a typo fails the build).
pub const fn position(fields: &[&str], name: &str) -> usize {
    let mut i = 0;
    while i < fields.len() {
        let (a, b) = (fields[i].as_bytes(), name.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("no such field")
}

pub use crate::ffi::{add_field, add_section, add_text};

/// Arrays of 1 MiB or more never offered to active defrag.
pub static DEFRAG_LARGE_KEPT: AtomicU64 = AtomicU64::new(0);
/// Defrag calls that resumed a value from the server's cursor.
pub static DEFRAG_KEYS_RESUMED: AtomicU64 = AtomicU64::new(0);

/// What one defrag call did, by the type it ran on.
pub fn defrag_tally(counters: &Counters, hits: u64, misses: u64, large_kept: u64, resumed: bool) {
    counters.defragged(hits, misses);
    DEFRAG_LARGE_KEPT.fetch_add(large_kept, Relaxed);
    DEFRAG_KEYS_RESUMED.fetch_add(u64::from(resumed), Relaxed);
}

pub fn get(counter: &AtomicU64) -> u64 {
    counter.load(Relaxed)
}

/// The module-wide fields, written into the section open at the time (BF's
/// `stats`, where monitoring has always read them).
pub fn write_module_fields(ctx: *mut raw::RedisModuleInfoCtx) {
    add_field(ctx, c"maxmemory_refusals", get(&crate::ffi::MAXMEMORY_REFUSALS));
    add_text(ctx, c"bloomkit_version", env!("CARGO_PKG_VERSION"));
}

/// Flushes of every database, and telling the main thread from the others
/// (see the file's doc).
pub mod flush {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::{Mutex, MutexGuard};

    use redis_module::raw;

    use super::Counters;

    /// The server's main thread (`pthread_self`), recorded at load, where
    /// the server runs commands, loads, keyspace changes and synchronous frees.
    static MAIN_THREAD: AtomicU64 = AtomicU64::new(0);

    /// Records the calling thread as the main one (at load, which the
    /// server runs on its main thread).
    pub fn record_main_thread() {
        // SAFETY: pthread_self has no preconditions.
        MAIN_THREAD.store(unsafe { libc::pthread_self() } as u64, Relaxed);
    }

    pub fn on_main_thread() -> bool {
        // SAFETY: pthread_self has no preconditions.
        MAIN_THREAD.load(Relaxed) == unsafe { libc::pthread_self() } as u64
    }

    /// Serialises a background free's choice of bucket with a flush moving
    /// the live counts into it. Taken only off the main thread and by
    /// flushes of every database, never by commands.
    static SERIAL: Mutex<()> = Mutex::new(());

    pub(super) fn lock() -> MutexGuard<'static, ()> {
        // The guarded data is `()`: a panic elsewhere cannot leave it broken.
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every type's counters, given at load.
    static ALL: Mutex<Vec<&'static Counters>> = Mutex::new(Vec::new());

    /// `FLUSHALL`, a replica emptying itself, `DEBUG RELOAD`: when the
    /// server frees the values on its background thread (the event's `sync`
    /// is 0), they leave `INFO bf` now (see the file's doc); when it frees
    /// them here, each leaves as it is freed, before the command returns.
    /// A one-database flush is left to its frees.
    extern "C" fn on_flush(
        _ctx: *mut raw::RedisModuleCtx,
        _event: raw::RedisModuleEvent,
        subevent: u64,
        data: *mut std::ffi::c_void,
    ) {
        crate::ffi::guard((), || {
            if subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_START || data.is_null() {
                return;
            }
            // SAFETY: for this event the server passes a RedisModuleFlushInfo.
            let info = unsafe { &*data.cast::<raw::RedisModuleFlushInfo>() };
            if info.dbnum == -1 && info.sync == 0 {
                let _serial = lock();
                for counters in ALL.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                    counters.hand_to_flush();
                }
            }
        })
    }

    /// Subscribes to the flush event (at load), for `all` types' counters.
    /// Nothing else: no keyspace event is needed (see the file's doc).
    pub fn subscribe(ctx: *mut raw::RedisModuleCtx, all: impl IntoIterator<Item = &'static Counters>) {
        record_main_thread();
        ALL.lock().unwrap_or_else(|e| e.into_inner()).extend(all);
        crate::ffi::subscribe(ctx, raw::REDISMODULE_EVENT_FLUSHDB, on_flush);
    }
}
