//! `CF.*`: RedisBloom's cuckoo filter, type `MBbloomCF`.

pub mod commands;
pub mod data_type;

use std::ffi::{c_int, CStr};

use redis_module::raw;

use crate::ffi::api;
use crate::stats::{self, cuckoo};

/// `INFO bf`'s `cuckoo` section: the cuckoo filters' counters.
pub fn add_info_section(ctx: *mut raw::RedisModuleInfoCtx) {
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

/// Adds the `cuckoo` ACL category, where the server lets modules add one.
pub fn add_acl_category(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    if crate::ffi::has_api!(RedisModule_AddACLCategory) {
        // SAFETY: valid context during OnLoad.
        if unsafe { api!(RedisModule_AddACLCategory)(ctx, c"cuckoo".as_ptr()) }
            != raw::REDISMODULE_OK as c_int
        {
            return Err("could not add the ACL category cuckoo".into());
        }
    }
    Ok(())
}
