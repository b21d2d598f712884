//! valkey-bloom's `INFO bf` sections, which its users' monitoring reads
//! (`bf_bloom_core_metrics`, `bf_bloom_defrag_metrics`): totals over the
//! `bloomfltr` objects in the keyspace, kept as valkey-bloom keeps them
//! (bytes are `BF.INFO`'s `Size`). Reported under every `bf.compat`: they
//! count only valkey-bloom's type, so they are right under each.
//!
//! Relaxed atomics, as in [`crate::stats`]: lazy-free may drop an object on
//! a background thread.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bloomkit_core::vbloom::Object;
use redis_module::raw;

use crate::ffi::api;
use crate::stats::defrag::{Kind, HITS, MISSES};
use crate::stats::get;

static OBJECTS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static FILTERS: AtomicU64 = AtomicU64::new(0);
static ITEMS: AtomicU64 = AtomicU64::new(0);
static CAPACITY: AtomicU64 = AtomicU64::new(0);

/// What one object adds to the totals.
#[derive(Clone, Copy)]
pub struct Tally {
    pub bytes: u64,
    pub filters: u64,
    pub items: u64,
    pub capacity: u64,
}

impl Tally {
    pub fn of(o: &Object) -> Tally {
        Tally { bytes: o.size(), filters: o.filters().len() as u64, items: o.items(), capacity: o.capacity() }
    }
}

/// An object now owned by the keyspace.
pub fn stored(o: &Object) {
    OBJECTS.fetch_add(1, Relaxed);
    apply(Tally::of(o), AtomicU64::fetch_add);
}

/// An object the keyspace freed.
pub fn freed(o: &Object) {
    OBJECTS.fetch_sub(1, Relaxed);
    apply(Tally::of(o), AtomicU64::fetch_sub);
}

/// An object that grew from `before` (adds only ever grow one).
pub fn grew(before: Tally, o: &Object) {
    let after = Tally::of(o);
    let grown = Tally {
        bytes: after.bytes - before.bytes,
        filters: after.filters - before.filters,
        items: after.items - before.items,
        capacity: after.capacity - before.capacity,
    };
    apply(grown, AtomicU64::fetch_add);
}

/// Adds (or takes) a tally to (from) the totals.
fn apply(t: Tally, op: fn(&AtomicU64, u64, std::sync::atomic::Ordering) -> u64) {
    for (cell, v) in [(&BYTES, t.bytes), (&FILTERS, t.filters), (&ITEMS, t.items), (&CAPACITY, t.capacity)] {
        op(cell, v, Relaxed);
    }
}

/// The two sections, with valkey-bloom's names (the server puts `bf_` before each).
pub fn info(ctx: *mut raw::RedisModuleInfoCtx) {
    let core: [(&CStr, u64); 5] = [
        (c"bloom_total_memory_bytes", get(&BYTES)),
        (c"bloom_num_objects", get(&OBJECTS)),
        (c"bloom_num_filters_across_objects", get(&FILTERS)),
        (c"bloom_num_items_across_objects", get(&ITEMS)),
        (c"bloom_capacity_across_objects", get(&CAPACITY)),
    ];
    let defrag: [(&CStr, u64); 2] = [
        (c"bloom_defrag_hits", get(&HITS[Kind::Vbloom as usize])),
        (c"bloom_defrag_misses", get(&MISSES[Kind::Vbloom as usize])),
    ];
    // SAFETY: valid info context; NUL-terminated names.
    unsafe {
        for (section, fields) in [(c"bloom_core_metrics", &core[..]), (c"bloom_defrag_metrics", &defrag[..])] {
            api!(RedisModule_InfoAddSection)(ctx, section.as_ptr());
            for (name, value) in fields {
                api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), *value);
            }
        }
    }
}
