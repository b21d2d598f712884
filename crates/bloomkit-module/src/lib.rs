//! `bf`: RedisBloom's BF.*, CF.*, CMS.*, TOPK.* and TDIGEST.* commands,
//! valkey-bloom's filters and bloomkit's APBF.*, for Redis 7 and 8 and
//! Valkey 8 and 9.
//!
//! This file lists the families and starts the module. Each family has its
//! folder, named as in `bloomkit-core`, with its command table in `mod.rs`,
//! `commands.rs` and `data_type.rs`; they share the command plumbing
//! ([`command`]), key lookup and storing ([`keys`]), the RDB I/O adapters
//! ([`io`]), the settings ([`config`]) and the counters ([`stats`]). Every
//! filter operation and argument rule is in `bloomkit-core`.

// Compiled in tests too, for `alloc::defrag_may_move`; installed only outside them.
#[cfg_attr(test, allow(dead_code))]
mod alloc;
mod command;
mod config;
mod ffi;
mod io;
mod keys;
mod stats;
mod value;

use std::ffi::{c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;

use command::Family;
use ffi::{api, guard, Arg, Ctx, RawArgv};

#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: alloc::ServerAllocator = alloc::ServerAllocator;

/// The version `MODULE LIST` reports: the RedisBloom release whose interface
/// bloomkit implements, because clients gate features on it.
const MODULE_VERSION: c_int = 20802;

/// Declares each family's folder and lists its `FAMILY`, so that a new
/// family is one name here.
macro_rules! families {
    ($($family:ident),* $(,)?) => {
        $(mod $family;)*
        /// Every family, in the order its types, categories and commands are registered.
        const FAMILIES: &[Family] = &[$($family::FAMILY),*];
    };
}

families!(bf, cf, apbf, vbloom, cms, topk, tdigest, xf);

/// `INFO bf`: the module's counters.
extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    guard((), || {
        let fields: [(&CStr, u64); 7] = [
            (c"filters", stats::get(&stats::FILTERS)),
            (c"bytes", stats::get(&stats::BYTES)),
            (c"items_added", stats::get(&stats::ITEMS_ADDED)),
            (c"lookups", stats::get(&stats::LOOKUPS)),
            (c"scale_outs", stats::get(&stats::SCALE_OUTS)),
            (c"refused_creations", stats::get(&stats::REFUSED)),
            (c"maxmemory_refusals", stats::get(&stats::MAXMEMORY_REFUSALS)),
        ];
        // SAFETY: valid info context; NUL-terminated names.
        unsafe {
            api!(RedisModule_InfoAddSection)(ctx, c"stats".as_ptr());
            for (name, value) in fields {
                api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), value);
            }
            api!(RedisModule_InfoAddFieldCString)(
                ctx,
                c"bloomkit_version".as_ptr(),
                concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast(),
            );
        }
        for family in FAMILIES {
            if let Some(section) = family.info {
                section(ctx);
            }
        }
        defrag_info(ctx);
    })
}

/// `INFO bf`'s `defrag` section: what active defrag moved, by data type.
fn defrag_info(ctx: *mut raw::RedisModuleInfoCtx) {
    use stats::defrag::{Kind, HITS, KEYS_RESUMED, LARGE_KEPT, MISSES};
    let kinds = [
        (Kind::Bf, "bf"),
        (Kind::Cf, "cf"),
        (Kind::Apbf, "apbf"),
        (Kind::Vbloom, "vbloom"),
        (Kind::Cms, "cms"),
        (Kind::Topk, "topk"),
        (Kind::Tdigest, "tdigest"),
        (Kind::Xf, "xf"),
    ];
    let mut fields: Vec<(String, u64)> = Vec::with_capacity(2 * kinds.len() + 2);
    for (kind, name) in kinds {
        fields.push((format!("defrag_{name}_hits\0"), stats::get(&HITS[kind as usize])));
        fields.push((format!("defrag_{name}_misses\0"), stats::get(&MISSES[kind as usize])));
    }
    fields.push(("defrag_large_kept\0".into(), stats::get(&LARGE_KEPT)));
    fields.push(("defrag_keys_resumed\0".into(), stats::get(&KEYS_RESUMED)));
    // SAFETY: valid info context; NUL-terminated names.
    unsafe {
        api!(RedisModule_InfoAddSection)(ctx, c"defrag".as_ptr());
        for (name, value) in &fields {
            api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr().cast(), *value);
        }
    }
}

/// Panics are caught at every entry point; this puts their message and
/// location in the server log, where the error reply points.
fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        ffi::log(std::ptr::null_mut(), c"warning", &format!("bloomkit: internal error: {info}"));
    }));
}

fn load(ctx: *mut raw::RedisModuleCtx, args: &[Arg]) -> Result<(), String> {
    log_panics();
    // A corrupt value in RESTORE or an RDB file must be an error, not an exit.
    // SAFETY: valid context during OnLoad.
    unsafe { api!(RedisModule_SetModuleOptions)(ctx, raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as c_int) };
    config::apply_load_args(args)?;
    // Every type and ACL category first: commands name the categories.
    for family in FAMILIES {
        (family.register)(ctx)?;
    }
    // The settings before the commands: `bf.compat` (from a load argument
    // or the configuration file) decides how BF.* is registered.
    config::register(Ctx(ctx))?;
    let compat = config::compat();
    for family in FAMILIES {
        for c in family.commands {
            command::register(ctx, c, vbloom::dialect(compat, c.name))?;
        }
    }
    // SAFETY: valid context during OnLoad.
    if unsafe { api!(RedisModule_RegisterInfoFunc)(ctx, Some(info)) } != raw::REDISMODULE_OK as c_int {
        return Err("could not register the INFO section".into());
    }
    Ok(())
}

/// The entry point the server calls on `loadmodule` / `MODULE LOAD`.
///
/// # Safety
/// Called by the server with a valid context and `argc` arguments.
#[no_mangle]
pub unsafe extern "C" fn RedisModule_OnLoad(
    ctx: *mut raw::RedisModuleCtx,
    argv: RawArgv,
    argc: c_int,
) -> c_int {
    // Nothing may allocate before this: the allocator is the server's.
    if raw::Export_RedisModule_Init(ctx, c"bf".as_ptr(), MODULE_VERSION, raw::REDISMODULE_APIVER_1 as c_int)
        == raw::Status::Err as c_int
    {
        return raw::Status::Err as c_int;
    }
    let args = ffi::args(argv, argc);
    match catch_unwind(AssertUnwindSafe(|| load(ctx, args))) {
        Ok(Ok(())) => raw::REDISMODULE_OK as c_int,
        Ok(Err(message)) => {
            ffi::log(ctx, c"warning", &format!("bloomkit: not loaded: {message}"));
            raw::REDISMODULE_ERR as c_int
        }
        Err(_) => raw::REDISMODULE_ERR as c_int,
    }
}
