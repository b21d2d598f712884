//! `bf`: RedisBloom's BF.* commands, and bloomkit's APBF.*, for Redis 7 and 8 and Valkey 8 and 9.
//!
//! This file is the table of commands and the module's entry point. Each
//! family has its folder with `commands.rs` and `data_type.rs` ([`bf`] for
//! `BF.*`, [`cf`] for `CF.*`, [`apbf`] for `APBF.*`, [`vbloom`] for valkey-bloom's filters
//! behind `BF.*`), sharing key lookup and storing
//! ([`keys`]) and the RDB I/O adapters ([`io`]); every filter operation and
//! every argument rule is in `bloomkit-core`.

#[cfg(not(test))]
mod alloc;
mod apbf;
mod bf;
mod cf;
mod config;
mod ffi;
mod io;
mod keys;
mod stats;
mod vbloom;

use std::ffi::{c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use bloomkit_core::args::ArgError;
use redis_module::raw;

use ffi::{api, has_api, Arg, Ctx, RawArgv};

#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: alloc::ServerAllocator = alloc::ServerAllocator;

/// The version `MODULE LIST` reports: the RedisBloom release whose interface
/// bloomkit implements, because clients gate features on it.
const MODULE_VERSION: c_int = 20802;

/// One command: name, handler, server flags, ACL categories, key-spec flags and docs.
/// Names are lowercase as RedisBloom registers them: the server's
/// wrong-arity error quotes the registered name.
struct Command {
    name: &'static CStr,
    handler: extern "C" fn(*mut raw::RedisModuleCtx, RawArgv, c_int) -> c_int,
    flags: &'static CStr,
    /// `bloom` and the server's own categories, as Redis 8's built-in Bloom
    /// commands have them, so that a user granted `+@read` may run the
    /// readers (servers that let modules set categories: Redis 7.4+, Valkey 8+).
    acl: &'static CStr,
    key_flags: u32,
    summary: &'static CStr,
    complexity: &'static CStr,
}

/// Wraps a handler so that it runs behind `catch_unwind`, with its errors replied.
macro_rules! entry {
    ($handler:path) => {{
        extern "C" fn entry(ctx: *mut raw::RedisModuleCtx, argv: RawArgv, argc: c_int) -> c_int {
            // SAFETY: the server passes argc valid strings that outlive the call.
            run(Ctx(ctx), unsafe { ffi::args(argv, argc) }, $handler)
        }
        entry
    }};
}

const RO: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
const RW_INSERT: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_INSERT;
const RW_UPDATE: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE;

const COMMANDS: &[Command] = &[
    Command {
        name: c"bf.reserve",
        acl: c"bloom write",
        handler: entry!(bf::commands::reserve),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates an empty Bloom filter with an error rate and initial capacity",
        complexity: c"O(1)",
    },
    Command {
        name: c"bf.add",
        acl: c"bloom write fast",
        handler: entry!(bf::commands::add),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds an item, creating the filter if needed",
        complexity: c"O(k), k the number of hash functions",
    },
    Command {
        name: c"bf.madd",
        acl: c"bloom write",
        handler: entry!(bf::commands::madd),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds items, creating the filter if needed",
        complexity: c"O(k * n), n the number of items",
    },
    Command {
        name: c"bf.insert",
        acl: c"bloom write",
        handler: entry!(bf::commands::insert),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds items, creating the filter with the given parameters if needed",
        complexity: c"O(k * n)",
    },
    Command {
        name: c"bf.exists",
        acl: c"bloom read fast",
        handler: entry!(bf::commands::exists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether an item may have been added",
        complexity: c"O(k)",
    },
    Command {
        name: c"bf.mexists",
        acl: c"bloom read",
        handler: entry!(bf::commands::mexists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether items may have been added",
        complexity: c"O(k * n)",
    },
    Command {
        name: c"bf.info",
        acl: c"bloom read fast",
        handler: entry!(bf::commands::info),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns information about a Bloom filter",
        complexity: c"O(1)",
    },
    Command {
        name: c"bf.card",
        acl: c"bloom read fast",
        handler: entry!(bf::commands::card),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns the number of items added to a Bloom filter",
        complexity: c"O(1)",
    },
    Command {
        name: c"bf.debug",
        acl: c"bloom read",
        handler: entry!(bf::commands::debug),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the layout of a Bloom filter's sub-filters",
        complexity: c"O(s), s the number of sub-filters",
    },
    Command {
        name: c"bf.scandump",
        acl: c"bloom read",
        handler: entry!(bf::commands::scandump),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the next chunk of a Bloom filter's dump",
        complexity: c"O(c), c the chunk size",
    },
    Command {
        name: c"bf.loadchunk",
        acl: c"bloom write",
        handler: entry!(bf::commands::loadchunk),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Restores a Bloom filter from chunks returned by BF.SCANDUMP",
        complexity: c"O(c)",
    },
    Command {
        name: c"bf.load",
        acl: c"bloom write",
        handler: entry!(vbloom::commands::load),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates a valkey-bloom filter from the blob its AOF rewrite wrote",
        complexity: c"O(n), n the blob's size",
    },
    Command {
        name: c"cf.reserve",
        acl: c"cuckoo write",
        handler: entry!(cf::commands::reserve),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates an empty cuckoo filter with a capacity and optional bucket size, max iterations and expansion",
        complexity: c"O(1)",
    },
    Command {
        name: c"cf.add",
        acl: c"cuckoo write fast",
        handler: entry!(cf::commands::add),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds an item (a copy if already present), creating the filter if needed",
        complexity: c"O(k + i), k sub-filters, i max iterations",
    },
    Command {
        name: c"cf.addnx",
        acl: c"cuckoo write fast",
        handler: entry!(cf::commands::addnx),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds an item unless it may already be present, creating the filter if needed",
        complexity: c"O(k + i)",
    },
    Command {
        name: c"cf.insert",
        acl: c"cuckoo write",
        handler: entry!(cf::commands::insert),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds items, creating the filter with the given capacity if needed",
        complexity: c"O(n * (k + i)), n the number of items",
    },
    Command {
        name: c"cf.insertnx",
        acl: c"cuckoo write",
        handler: entry!(cf::commands::insertnx),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds items unless they may already be present, creating the filter if needed",
        complexity: c"O(n * (k + i))",
    },
    Command {
        name: c"cf.exists",
        acl: c"cuckoo read fast",
        handler: entry!(cf::commands::exists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether an item may be in a cuckoo filter",
        complexity: c"O(k)",
    },
    Command {
        name: c"cf.mexists",
        acl: c"cuckoo read",
        handler: entry!(cf::commands::mexists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether items may be in a cuckoo filter",
        complexity: c"O(k * n)",
    },
    Command {
        name: c"cf.count",
        acl: c"cuckoo read fast",
        handler: entry!(cf::commands::count),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns how many copies of an item may be in a cuckoo filter",
        complexity: c"O(k)",
    },
    Command {
        name: c"cf.del",
        acl: c"cuckoo write fast",
        handler: entry!(cf::commands::del),
        flags: c"write fast",
        key_flags: RW_UPDATE,
        summary: c"Deletes one copy of an item from a cuckoo filter",
        complexity: c"O(k), more when it compacts",
    },
    Command {
        name: c"cf.compact",
        acl: c"cuckoo write",
        handler: entry!(cf::commands::compact),
        flags: c"write",
        key_flags: RW_UPDATE,
        summary: c"Moves items into older sub-filters and frees emptied ones",
        complexity: c"O(s), s the number of slots",
    },
    Command {
        name: c"cf.info",
        acl: c"cuckoo read fast",
        handler: entry!(cf::commands::info),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns information about a cuckoo filter",
        complexity: c"O(1)",
    },
    Command {
        name: c"cf.debug",
        acl: c"cuckoo read",
        handler: entry!(cf::commands::debug),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns a cuckoo filter's parameters and counters on one line",
        complexity: c"O(1)",
    },
    Command {
        name: c"cf.scandump",
        acl: c"cuckoo read",
        handler: entry!(cf::commands::scandump),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the next chunk of a cuckoo filter's dump",
        complexity: c"O(c), c the chunk size",
    },
    Command {
        name: c"cf.loadchunk",
        acl: c"cuckoo write",
        handler: entry!(cf::commands::loadchunk),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Restores a cuckoo filter from chunks returned by CF.SCANDUMP",
        complexity: c"O(c)",
    },
    Command {
        name: c"apbf.reserve",
        acl: c"bloom write",
        handler: entry!(apbf::commands::reserve),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates a sliding-window filter: COUNT (the last capacity items) or TIME seconds",
        complexity: c"O(1)",
    },
    Command {
        name: c"apbf.add",
        acl: c"bloom write fast",
        handler: entry!(apbf::commands::add),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Adds an item; 1 if it was not seen within the window",
        complexity: c"O(k + l)",
    },
    Command {
        name: c"apbf.madd",
        acl: c"bloom write",
        handler: entry!(apbf::commands::madd),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Adds items; one reply per item",
        complexity: c"O((k + l) * n)",
    },
    Command {
        name: c"apbf.exists",
        acl: c"bloom read fast",
        handler: entry!(apbf::commands::exists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether an item was seen within the window",
        complexity: c"O(k + l)",
    },
    Command {
        name: c"apbf.mexists",
        acl: c"bloom read",
        handler: entry!(apbf::commands::mexists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks items; one reply per item",
        complexity: c"O((k + l) * n)",
    },
    Command {
        name: c"apbf.info",
        acl: c"bloom read fast",
        handler: entry!(apbf::commands::info),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns a sliding-window filter's parameters and state",
        complexity: c"O(1)",
    },
    Command {
        name: c"apbf.scandump",
        acl: c"bloom read",
        handler: entry!(apbf::commands::scandump),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the next chunk of a sliding-window filter's state",
        complexity: c"O(c), c the chunk size",
    },
    Command {
        name: c"apbf.advance",
        acl: c"bloom write",
        handler: entry!(apbf::commands::advance),
        flags: c"write",
        key_flags: RW_UPDATE,
        summary: c"Ends generations as the primary decided (replication and AOF)",
        complexity: c"O(n) slices cleared",
    },
    Command {
        name: c"apbf.loadchunk",
        acl: c"bloom write",
        handler: entry!(apbf::commands::loadchunk),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Restores a sliding-window filter's state (replication and AOF rewrite)",
        complexity: c"O(c), c the chunk size",
    },
];

/// Runs a callback, turning a panic into `fallback` so that it never unwinds
/// into the server.
pub(crate) fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// What a command handler returns: an error is replied by [`run`].
pub(crate) type Outcome = Result<(), ArgError>;

fn run(ctx: Ctx, argv: &[Arg], handler: fn(Ctx, &[Arg]) -> Outcome) -> c_int {
    match catch_unwind(AssertUnwindSafe(|| handler(ctx, argv))) {
        Ok(Ok(())) => {}
        Ok(Err(ArgError::WrongArity)) => ctx.wrong_arity(),
        Ok(Err(ArgError::Reply(e))) => ctx.reply_error(&e.message()),
        Err(_) => ctx.reply_error(
            "ERR bloomkit internal error (the server log has details); nothing else was affected, please report it",
        ),
    }
    raw::REDISMODULE_OK as c_int
}

/// Registers one command with its key spec and documentation.
fn register_command(ctx: *mut raw::RedisModuleCtx, c: &Command) -> Result<(), String> {
    let name = c.name.to_string_lossy();
    // SAFETY: valid context during OnLoad; first/last/step key = 1 for every BF command.
    let status = unsafe {
        api!(RedisModule_CreateCommand)(ctx, c.name.as_ptr(), Some(c.handler), c.flags.as_ptr(), 1, 1, 1)
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not register {name}"));
    }
    if !has_api!(RedisModule_SetCommandInfo) {
        return Ok(());
    }
    // SAFETY: the command was just created.
    let command = unsafe { api!(RedisModule_GetCommand)(ctx, c.name.as_ptr()) };
    // One key, at argument 1; the array ends with a zeroed entry.
    // SAFETY: all-zero is the terminator the API expects.
    let mut key_specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    key_specs[0].flags = u64::from(c.key_flags);
    key_specs[0].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    key_specs[0].bs.index.pos = 1;
    key_specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    key_specs[0].fk.range.lastkey = 0;
    key_specs[0].fk.range.keystep = 1;
    key_specs[0].fk.range.limit = 0;
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    // SAFETY: all-zero means "not given" for the remaining fields.
    let mut info: raw::RedisModuleCommandInfo = unsafe { std::mem::zeroed() };
    info.version = &version;
    info.summary = c.summary.as_ptr();
    info.complexity = c.complexity.as_ptr();
    info.since = c"1.0.0".as_ptr();
    info.key_specs = key_specs.as_mut_ptr();
    // SAFETY: the server copies everything it keeps from `info` during the call.
    let status = unsafe { api!(RedisModule_SetCommandInfo)(command, &info) };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not set the command info of {name}"));
    }
    if has_api!(RedisModule_SetCommandACLCategories) && has_api!(RedisModule_AddACLCategory) {
        // SAFETY: a command of this module and a category it added.
        let status = unsafe { api!(RedisModule_SetCommandACLCategories)(command, c.acl.as_ptr()) };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not put {name} in the ACL categories {}", c.acl.to_string_lossy()));
        }
    }
    Ok(())
}

/// `INFO bf`: the module's counters.
extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    guard((), || {
        let fields: [(&CStr, u64); 6] = [
            (c"filters", stats::get(&stats::FILTERS)),
            (c"bytes", stats::get(&stats::BYTES)),
            (c"items_added", stats::get(&stats::ITEMS_ADDED)),
            (c"lookups", stats::get(&stats::LOOKUPS)),
            (c"scale_outs", stats::get(&stats::SCALE_OUTS)),
            (c"refused_creations", stats::get(&stats::REFUSED)),
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
        cf::add_info_section(ctx);
    })
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
    bf::data_type::register(ctx)?;
    cf::data_type::register(ctx)?;
    apbf::data_type::register(ctx)?;
    vbloom::data_type::register(ctx)?;
    if has_api!(RedisModule_AddACLCategory) {
        // SAFETY: valid context during OnLoad.
        if unsafe { api!(RedisModule_AddACLCategory)(ctx, c"bloom".as_ptr()) } != raw::REDISMODULE_OK as c_int
        {
            return Err("could not add the ACL category bloom".into());
        }
    }
    cf::add_acl_category(ctx)?;
    for command in COMMANDS {
        register_command(ctx, command)?;
    }
    // SAFETY: valid context during OnLoad.
    if unsafe { api!(RedisModule_RegisterInfoFunc)(ctx, Some(info)) } != raw::REDISMODULE_OK as c_int {
        return Err("could not register the INFO section".into());
    }
    config::register(Ctx(ctx))
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
