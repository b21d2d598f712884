//! `CF.*`: RedisBloom's cuckoo filter, type `MBbloomCF`.

pub mod commands;
pub mod data_type;

use std::ffi::CStr;

use redis_module::raw;

use crate::command::{add_acl_category, entry, Command, Family, RO, RW_INSERT, RW_UPDATE};
use crate::ffi::api;
use crate::stats::{self, cuckoo};

pub const FAMILY: Family = Family { commands: COMMANDS, register, info: Some(info) };

/// The data type and the `cuckoo` ACL category.
fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    data_type::register(ctx)?;
    add_acl_category(ctx, c"cuckoo")
}

/// `INFO bf`'s `cuckoo` section: the cuckoo filters' counters.
fn info(ctx: *mut raw::RedisModuleInfoCtx) {
    let fields: [(&CStr, u64); 5] = [
        (c"cf_filters", stats::get(&cuckoo::FILTERS)),
        (c"cf_bytes", stats::get(&cuckoo::BYTES)),
        (c"cf_items_added", stats::get(&cuckoo::ITEMS_ADDED)),
        (c"cf_items_deleted", stats::get(&cuckoo::ITEMS_DELETED)),
        (c"cf_lookups", stats::get(&cuckoo::LOOKUPS)),
    ];
    // SAFETY: valid info context; NUL-terminated names.
    unsafe {
        api!(RedisModule_InfoAddSection)(ctx, c"cuckoo".as_ptr());
        for (name, value) in fields {
            api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), value);
        }
    }
}

const COMMANDS: &[Command] = &[
    Command {
        name: c"cf.reserve",
        acl: c"cuckoo write",
        handler: entry!(commands::reserve),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates an empty cuckoo filter with a capacity and optional bucket size, max iterations and expansion",
        complexity: c"O(1)",
    },
    Command {
        name: c"cf.add",
        acl: c"cuckoo write fast",
        handler: entry!(commands::add),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds an item (a copy if already present), creating the filter if needed",
        complexity: c"O(k + i), k sub-filters, i max iterations",
    },
    Command {
        name: c"cf.addnx",
        acl: c"cuckoo write fast",
        handler: entry!(commands::addnx),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds an item unless it may already be present, creating the filter if needed",
        complexity: c"O(k + i)",
    },
    Command {
        name: c"cf.insert",
        acl: c"cuckoo write",
        handler: entry!(commands::insert),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds items, creating the filter with the given capacity if needed",
        complexity: c"O(n * (k + i)), n the number of items",
    },
    Command {
        name: c"cf.insertnx",
        acl: c"cuckoo write",
        handler: entry!(commands::insertnx),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds items unless they may already be present, creating the filter if needed",
        complexity: c"O(n * (k + i))",
    },
    Command {
        name: c"cf.exists",
        acl: c"cuckoo read fast",
        handler: entry!(commands::exists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether an item may be in a cuckoo filter",
        complexity: c"O(k)",
    },
    Command {
        name: c"cf.mexists",
        acl: c"cuckoo read",
        handler: entry!(commands::mexists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether items may be in a cuckoo filter",
        complexity: c"O(k * n)",
    },
    Command {
        name: c"cf.count",
        acl: c"cuckoo read fast",
        handler: entry!(commands::count),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns how many copies of an item may be in a cuckoo filter",
        complexity: c"O(k)",
    },
    Command {
        name: c"cf.del",
        acl: c"cuckoo write fast",
        handler: entry!(commands::del),
        flags: c"write fast",
        key_flags: RW_UPDATE,
        summary: c"Deletes one copy of an item from a cuckoo filter",
        complexity: c"O(k), more when it compacts",
    },
    Command {
        name: c"cf.compact",
        acl: c"cuckoo write",
        handler: entry!(commands::compact),
        flags: c"write",
        key_flags: RW_UPDATE,
        summary: c"Moves items into older sub-filters and frees emptied ones",
        complexity: c"O(s), s the number of slots",
    },
    Command {
        name: c"cf.info",
        acl: c"cuckoo read fast",
        handler: entry!(commands::info),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns information about a cuckoo filter",
        complexity: c"O(1)",
    },
    Command {
        name: c"cf.debug",
        acl: c"cuckoo read",
        handler: entry!(commands::debug),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns a cuckoo filter's parameters and counters on one line",
        complexity: c"O(1)",
    },
    Command {
        name: c"cf.scandump",
        acl: c"cuckoo read",
        handler: entry!(commands::scandump),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the next chunk of a cuckoo filter's dump",
        complexity: c"O(c), c the chunk size",
    },
    Command {
        name: c"cf.loadchunk",
        acl: c"cuckoo write",
        handler: entry!(commands::loadchunk),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Restores a cuckoo filter from chunks returned by CF.SCANDUMP",
        complexity: c"O(c)",
    },
];
