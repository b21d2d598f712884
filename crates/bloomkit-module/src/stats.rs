//! The counters behind `INFO bf`: one [`Counters`] per data type, declared
//! in its family's `counters.rs` with the field names its section prints,
//! plus the few tallies that belong to the module as a whole.
//!
//! Relaxed atomics: they are plain tallies read by INFO, and lazy-free may
//! drop a value on a background thread.

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis_module::raw;

use crate::ffi::api;

/// The most fields one type's section has.
const MAX_FIELDS: usize = 8;

/// Where every type's counters keep the values the keyspace holds and their
/// bytes (as `MEMORY USAGE` counts them); the type's own tallies follow.
pub const OBJECTS: usize = 0;
pub const BYTES: usize = 1;

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
    values: [AtomicU64; MAX_FIELDS],
    defrag_hits: AtomicU64,
    defrag_misses: AtomicU64,
}

impl Counters {
    /// A family's counters: section `name`, fields `name_<field>`, defrag
    /// rows `defrag_name_*`. `fields[OBJECTS]` and `fields[BYTES]` come
    /// first; at most eight.
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
        assert!(fields.len() >= 2 && fields.len() <= MAX_FIELDS, "a section has 2 to 8 fields");
        Counters {
            section,
            prefix,
            defrag_name,
            fields,
            values: [const { AtomicU64::new(0) }; MAX_FIELDS],
            defrag_hits: AtomicU64::new(0),
            defrag_misses: AtomicU64::new(0),
        }
    }

    /// A value of `bytes` now owned by the keyspace.
    pub fn created(&self, bytes: u64) {
        self.add(OBJECTS, 1);
        self.add(BYTES, bytes);
    }

    /// A value of `bytes` that left the keyspace.
    pub fn freed(&self, bytes: u64) {
        self.sub(OBJECTS, 1);
        self.sub(BYTES, bytes);
    }

    /// A stored value changed size (grew, compacted, finished a doubling).
    pub fn resized(&self, before: u64, after: u64) {
        if after >= before {
            self.add(BYTES, after - before);
        } else {
            self.sub(BYTES, before - after);
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

/// Starts a section of `INFO bf`.
pub fn add_section(ctx: *mut raw::RedisModuleInfoCtx, name: &CStr) {
    // SAFETY: valid info context; NUL-terminated name.
    unsafe { api!(RedisModule_InfoAddSection)(ctx, name.as_ptr()) };
}

/// Adds a field to the current section.
pub fn add_field(ctx: *mut raw::RedisModuleInfoCtx, name: &CStr, value: u64) {
    // SAFETY: valid info context; NUL-terminated name.
    unsafe { api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), value) };
}

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
    // SAFETY: valid info context; NUL-terminated name and value.
    unsafe {
        api!(RedisModule_InfoAddFieldCString)(
            ctx,
            c"bloomkit_version".as_ptr(),
            concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast(),
        );
    }
}

/// The values bloomkit has made, by address, each with how to count and
/// uncount it, so that a value is in its counters exactly while it is in
/// the keyspace: it leaves them when it leaves the keyspace (the `unlink`
/// callback, a flush), even when a background thread frees it later, and
/// comes back when a MOVE or RENAME (which unlink it from its old name on
/// some servers) puts it back. Values are freed on a background thread
/// under lazy-free, so the map is behind a lock; it is touched only when
/// values are made, leave, move or are freed, never by reads or writes.
pub mod held {
    use std::collections::BTreeMap;
    use std::ffi::c_void;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::Mutex;

    /// Counts (`true`) or uncounts a live value of the type that registered it.
    pub type Count = unsafe fn(*const c_void, bool);

    struct Entry {
        count: Count,
        /// Out of its counters: it left the keyspace.
        left: bool,
    }

    /// Only the main thread adds or moves entries (values are made, loaded
    /// and defragged there); the lazy-free thread only removes them. The
    /// counting functions run under the lock: that is what keeps a value a
    /// background thread is freeing alive until it is counted out.
    static HELD: Mutex<BTreeMap<usize, Entry>> = Mutex::new(BTreeMap::new());

    fn held() -> std::sync::MutexGuard<'static, BTreeMap<usize, Entry>> {
        // A panic while holding the lock cannot leave the map half-changed.
        HELD.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A value made and counted.
    pub fn insert(value: *const c_void, count: Count) {
        held().insert(value as usize, Entry { count, left: false });
    }

    /// A value being freed: whether it was still counted (and is no more).
    pub fn remove(value: *const c_void) -> bool {
        match held().remove(&(value as usize)) {
            Some(e) if e.left => {
                LEFT.fetch_sub(1, Relaxed);
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    /// Values out of their counters but not freed yet (counted by the map's
    /// lock holders): while there are none, a MOVE or RENAME cannot concern
    /// a value of ours, and its event is not looked at.
    static LEFT: AtomicUsize = AtomicUsize::new(0);

    pub fn any_left() -> bool {
        LEFT.load(Relaxed) > 0
    }

    /// A value left the keyspace: uncount it now.
    pub fn leave(value: *const c_void) {
        set(value, false);
    }

    /// A value is back in the keyspace under another name or database
    /// (MOVE, RENAME): count it again if its old name's unlink uncounted it.
    pub fn arrive(value: *const c_void) {
        set(value, true);
    }

    fn set(value: *const c_void, counted: bool) {
        let mut map = held();
        if let Some(e) = map.get_mut(&(value as usize)) {
            if e.left == counted {
                e.left = !counted;
                if counted {
                    LEFT.fetch_sub(1, Relaxed);
                } else {
                    LEFT.fetch_add(1, Relaxed);
                }
                // SAFETY: the map holds only live values (an entry goes
                // when its value is freed), each with its own type's function.
                unsafe { (e.count)(value, counted) };
            }
        }
    }

    /// Active defrag moved a value: its entry follows it (the old address
    /// is free, and may soon hold something else).
    pub fn moved(from: *const c_void, to: *const c_void) {
        let mut map = held();
        if let Some(e) = map.remove(&(from as usize)) {
            map.insert(to as usize, e);
        }
    }

    /// Every value left the keyspace at once (FLUSHALL, or a replica
    /// emptying itself for a full sync): uncount them all now.
    pub fn leave_all() {
        for (value, e) in held().iter_mut().filter(|(_, e)| !e.left) {
            e.left = true;
            LEFT.fetch_add(1, Relaxed);
            // SAFETY: as in `set`: the flush has not freed them yet.
            unsafe { (e.count)(*value as *const c_void, false) };
        }
    }
}

/// A read that leaves no trace: no LRU/LFU touch, no keyspace hit or
/// miss, no expiry, no other effect (what the server supports of them).
fn quiet_read() -> std::ffi::c_int {
    let wanted = raw::REDISMODULE_OPEN_KEY_NOTOUCH
        | raw::REDISMODULE_OPEN_KEY_NOSTATS
        | raw::REDISMODULE_OPEN_KEY_NOEXPIRE
        | raw::REDISMODULE_OPEN_KEY_NOEFFECTS;
    let supported = if crate::ffi::has_api!(RedisModule_GetOpenKeyModesAll) {
        // SAFETY: no arguments; a constant of the server.
        unsafe { api!(RedisModule_GetOpenKeyModesAll)() as u32 }
    } else {
        raw::REDISMODULE_OPEN_KEY_NOTOUCH
    };
    (raw::REDISMODULE_READ | (wanted & supported)) as std::ffi::c_int
}

/// MOVE and RENAME: on some servers the old name's unlink uncounted the
/// value; its new name counts it again.
extern "C" fn on_generic_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: std::ffi::c_int,
    event: *const std::ffi::c_char,
    key: *mut raw::RedisModuleString,
) -> std::ffi::c_int {
    crate::ffi::guard(0, || {
        if event.is_null() || key.is_null() {
            return 0;
        }
        // SAFETY: the server passes a NUL-terminated event name.
        let name = unsafe { CStr::from_ptr(event) }.to_bytes();
        if (name == b"move_to" || name == b"rename_to") && held::any_left() {
            // SAFETY: the callback's context has the new name's database
            // selected; the key is opened for reading and closed here.
            unsafe {
                let k = api!(RedisModule_OpenKey)(ctx, key, quiet_read()).cast::<raw::RedisModuleKey>();
                if !k.is_null() {
                    let value = api!(RedisModule_ModuleTypeGetValue)(k);
                    if !value.is_null() {
                        held::arrive(value);
                    }
                    api!(RedisModule_CloseKey)(k);
                }
            }
        }
        0
    })
}

/// `FLUSHALL` and a replica's emptying, sync or async: the values leave
/// their counters when the flush starts, not when a background thread
/// frees them, so `INFO bf` reads 0 right after. A one-database `FLUSHDB`
/// is left to the frees (at once when synchronous): knowing which values
/// are in one database would mean walking all its keys on the main thread,
/// which is what `FLUSHDB ASYNC` exists to avoid.
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
        if unsafe { (*data.cast::<raw::RedisModuleFlushInfo>()).dbnum } == -1 {
            held::leave_all();
        }
    })
}

/// Whether a value leaves its counters at its key's `unlink` (and comes
/// back at MOVE's and RENAME's new name). Off where the server cannot tell
/// a module of those events safely: Valkey 8.1 to 9.0 run a module's
/// keyspace callback on the client that sent the command and leave it on
/// the event's database (valkey-io/valkey#4024: after a MOVE the client is
/// on the destination database). There, values leave their counters when
/// freed, as before, and flushes still uncount them at once.
static UNLINK_COUNTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn unlink_counts() -> bool {
    UNLINK_COUNTS.load(Relaxed)
}

/// Subscribes to the flush event and, where it is safe, to MOVE's and
/// RENAME's (at load).
pub fn subscribe(ctx: *mut raw::RedisModuleCtx) {
    // Unknown servers are taken to be unsafe.
    let safe = match crate::ffi::server_version(ctx) {
        Some((crate::ffi::ServerKind::Redis, ..)) => true,
        Some((crate::ffi::ServerKind::Valkey, major, minor)) => (major, minor) >= (9, 1),
        None => false,
    };
    if safe && crate::ffi::has_api!(RedisModule_SubscribeToKeyspaceEvents) {
        UNLINK_COUNTS.store(true, Relaxed);
        // SAFETY: valid context during OnLoad; a callback of the declared signature.
        unsafe {
            api!(RedisModule_SubscribeToKeyspaceEvents)(
                ctx,
                raw::REDISMODULE_NOTIFY_GENERIC,
                Some(on_generic_event),
            )
        };
    }
    if crate::ffi::has_api!(RedisModule_SubscribeToServerEvent) {
        let event = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_FLUSHDB, dataver: 1 };
        // SAFETY: valid context during OnLoad; a callback of the declared signature.
        unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx, event, Some(on_flush)) };
    }
}
