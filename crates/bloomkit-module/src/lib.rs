//! `bf`: RedisBloom's BF.*, CF.*, CMS.*, TOPK.* and TDIGEST.* commands,
//! valkey-bloom's filters and bloomkit's APBF.* and XF.*, for Redis 7 and 8 and
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
mod data_type;
mod ffi;
mod keys;
mod stats;
mod value;

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;

use command::Family;
use ffi::{guard, Arg, Ctx, RawArgv};

#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: alloc::ServerAllocator = alloc::ServerAllocator;

/// The version `MODULE LIST` reports: the RedisBloom release whose interface
/// bloomkit implements, because clients gate features on it.
const MODULE_VERSION: c_int = 20802;

// The families: each is a folder named as in `bloomkit-core`. Plain `mod`
// lines (not a macro) so that `cargo fmt` reaches every file of theirs.
mod apbf;
mod bf;
mod cf;
mod cms;
mod tdigest;
mod topk;
mod vbloom;
mod xf;

/// Every family, in the order its types, categories and commands are
/// registered: a new family is its `mod` line above and its name here.
const FAMILIES: &[Family] = &[
    bf::FAMILY,
    cf::FAMILY,
    apbf::FAMILY,
    vbloom::FAMILY,
    cms::FAMILY,
    topk::FAMILY,
    tdigest::FAMILY,
    xf::FAMILY,
];

/// `INFO bf`: each family's sections, then what active defrag moved.
extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    guard((), || {
        for family in FAMILIES {
            family.write_info(ctx);
        }
        stats::add_section(ctx, c"defrag");
        for counters in FAMILIES.iter().map(|f| f.counters) {
            let name = format!("defrag_{}", counters.defrag_name);
            stats::add_field(ctx, &stats::name(&name, "hits"), counters.defrag_hits());
            stats::add_field(ctx, &stats::name(&name, "misses"), counters.defrag_misses());
        }
        stats::add_field(ctx, c"defrag_large_kept", stats::get(&stats::DEFRAG_LARGE_KEPT));
        stats::add_field(ctx, c"defrag_keys_resumed", stats::get(&stats::DEFRAG_KEYS_RESUMED));
    })
}

/// The server forked a child (`BGSAVE`, a full sync, an AOF rewrite): in
/// the parent, right after `fork()`, before any other command. A module has
/// one callback per event, so every family that cares is called from here.
extern "C" fn on_fork_child(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut std::ffi::c_void,
) {
    guard((), || {
        if subevent == raw::REDISMODULE_SUBEVENT_FORK_CHILD_BORN {
            tdigest::data_type::forked();
            xf::secret::forked();
        }
    })
}

fn subscribe_to_forks(ctx: *mut raw::RedisModuleCtx) {
    ffi::subscribe(ctx, raw::REDISMODULE_EVENT_FORK_CHILD, on_fork_child);
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
    ffi::handle_io_errors(ctx);
    config::init(FAMILIES.iter().flat_map(|f| f.settings.iter().copied()));
    config::apply_load_args(args, &[xf::secret::LOAD_ARG])?;
    xf::secret::apply_load_args(args)?;
    stats::flush::subscribe(ctx, FAMILIES.iter().map(|f| f.counters));
    subscribe_to_forks(ctx);
    data_type::measure_key_wrapper(ctx);
    // The settings first: `bf.compat` (from a load argument or the
    // configuration file) decides how BF.* is registered and the encoding
    // version CMSk-TYPE registers with.
    config::register(Ctx(ctx))?;
    // Every type and ACL category before the commands: commands name the categories.
    for family in FAMILIES {
        (family.register)(ctx).map_err(|e| format!("{} ({}): {e}", family.kind.prefix, family.kind.name))?;
        if let Some(category) = family.acl_category {
            command::add_acl_category(ctx, category)?;
        }
    }
    let compat = config::compat();
    for family in FAMILIES {
        for c in family.commands {
            command::register(ctx, c, (family.dialect)(compat, c.name))?;
        }
    }
    if !ffi::register_info(ctx, Some(info)) {
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
        Ok(Ok(())) => {
            ffi::log(ctx, c"notice", &config::load_line(MODULE_VERSION));
            raw::REDISMODULE_OK as c_int
        }
        Ok(Err(message)) => {
            ffi::log(ctx, c"warning", &format!("bloomkit: not loaded: {message}"));
            raw::REDISMODULE_ERR as c_int
        }
        Err(_) => raw::REDISMODULE_ERR as c_int,
    }
}

#[cfg(test)]
mod tests {
    /// The module serves every family of core's list, in its order, and no
    /// other: a family added to one and not the other fails here.
    #[test]
    fn families_are_core_s_kinds() {
        let served: Vec<_> = super::FAMILIES.iter().map(|f| f.kind).collect();
        assert_eq!(served, bloomkit_core::family::KINDS);
    }
}
