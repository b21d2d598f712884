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

    pub fn sub(&self, field: usize, n: u64) {
        self.values[field].fetch_sub(n, Relaxed);
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

/// Creations and growths of any type refused because they would pass
/// `maxmemory` (counted where every error reply passes, in `ffi`).
pub static MAXMEMORY_REFUSALS: AtomicU64 = AtomicU64::new(0);
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
    add_field(ctx, c"maxmemory_refusals", get(&MAXMEMORY_REFUSALS));
    // SAFETY: valid info context; NUL-terminated name and value.
    unsafe {
        api!(RedisModule_InfoAddFieldCString)(
            ctx,
            c"bloomkit_version".as_ptr(),
            concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast(),
        );
    }
}
