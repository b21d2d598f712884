//! valkey-bloom's `INFO bf` sections, which its users' monitoring reads
//! (`bf_bloom_core_metrics`, `bf_bloom_defrag_metrics`): totals over the
//! `bloomfltr` objects in the keyspace, kept as valkey-bloom keeps them
//! (`bloom_total_memory_bytes` is the sum of `BF.INFO`'s `Size`, as
//! valkey-bloom's is). Reported under every `bf.compat`: they count only
//! valkey-bloom's type, so they are right under each. The objects' real
//! bytes, counted as every type's are (`value::Value`), go to BF's `stats`
//! section (`bf_bytes`), which counts every `BF.*` filter.
//!
//! Relaxed atomics, as in [`crate::stats`]: lazy-free may drop an object on
//! a background thread.

use std::ffi::CStr;

use bloomkit_core::vbloom::Object;
use redis_module::raw;

use crate::stats::{add_field, add_section, Counters, Held, OBJECTS};

/// `bloom_num_objects`, the objects' real bytes, then valkey-bloom's totals.
pub static COUNTERS: Counters = Counters::new(
    "bloom_core_metrics",
    "bloom_",
    "vbloom",
    &[
        "num_objects",
        "bytes",
        "total_memory_bytes",
        "num_filters_across_objects",
        "num_items_across_objects",
        "capacity_across_objects",
        "items_added",
        "scale_outs",
        "refused_creations",
    ],
)
.holding(6);

/// valkey-bloom's `bloom_total_memory_bytes`: the sum of `BF.INFO`'s `Size`.
const SIZE: usize = 2;
const FILTERS: usize = 3;
const ITEMS: usize = 4;
const CAPACITY: usize = 5;
/// Not in valkey-bloom's sections: what BF's `stats` section adds to its
/// own (it counts every `BF.*` filter, of either type).
pub const ITEMS_ADDED: usize = 6;
pub const SCALE_OUTS: usize = 7;
pub const REFUSED: usize = 8;

/// What one object adds to the totals (its real bytes are counted as every
/// type's are: `value::Value`).
#[derive(Clone, Copy)]
pub struct Tally {
    pub size: u64,
    pub filters: u64,
    pub items: u64,
    pub capacity: u64,
}

impl Tally {
    pub fn of(o: &Object) -> Tally {
        Tally { size: o.size(), filters: o.filters().len() as u64, items: o.items(), capacity: o.capacity() }
    }
}

/// What an object adds to the totals beyond objects and bytes while it is
/// in the keyspace.
pub fn held_extra(o: &Object, held: &mut Held) {
    let t = Tally::of(o);
    held[SIZE] = t.size;
    held[FILTERS] = t.filters;
    held[ITEMS] = t.items;
    held[CAPACITY] = t.capacity;
}

/// An object that grew from `before` (adds only ever grow one).
pub fn grew(before: Tally, o: &Object) {
    let after = Tally::of(o);
    COUNTERS.add(SIZE, after.size - before.size);
    COUNTERS.add(FILTERS, after.filters - before.filters);
    COUNTERS.add(ITEMS, after.items - before.items);
    COUNTERS.add(CAPACITY, after.capacity - before.capacity);
    COUNTERS.add(ITEMS_ADDED, after.items - before.items);
    COUNTERS.add(SCALE_OUTS, after.filters - before.filters);
}

/// The two sections, with valkey-bloom's names and order (the server puts
/// `bf_` before each).
pub fn info(ctx: *mut raw::RedisModuleInfoCtx) {
    let fields: [(&CStr, u64); 5] = [
        (c"bloom_total_memory_bytes", COUNTERS.get(SIZE)),
        (c"bloom_num_objects", COUNTERS.get(OBJECTS)),
        (c"bloom_num_filters_across_objects", COUNTERS.get(FILTERS)),
        (c"bloom_num_items_across_objects", COUNTERS.get(ITEMS)),
        (c"bloom_capacity_across_objects", COUNTERS.get(CAPACITY)),
    ];
    add_section(ctx, c"bloom_core_metrics");
    for (name, value) in fields {
        add_field(ctx, name, value);
    }
    add_section(ctx, c"bloom_defrag_metrics");
    add_field(ctx, c"bloom_defrag_hits", COUNTERS.defrag_hits());
    add_field(ctx, c"bloom_defrag_misses", COUNTERS.defrag_misses());
}
