//! The command table's types and the one path every command runs through:
//! each family lists its commands as data ([`Command`]) in its `mod.rs`;
//! here they are registered with their key specs, docs and ACL categories,
//! and each call runs behind `catch_unwind` with its error replied.

use std::ffi::{c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use bloomkit_core::Reply;
use redis_module::raw;

use crate::ffi::{api, has_api, Arg, Ctx, RawArgv};

/// One command: name, handler, server flags, ACL categories, key-spec flags and docs.
/// Names are lowercase as RedisBloom registers them: the server's
/// wrong-arity error quotes the registered name.
pub struct Command {
    pub name: &'static CStr,
    pub handler: extern "C" fn(*mut raw::RedisModuleCtx, RawArgv, c_int) -> c_int,
    pub flags: &'static CStr,
    /// `bloom` and the server's own categories, as Redis 8's built-in Bloom
    /// commands have them, so that a user granted `+@read` may run the
    /// readers (servers that let modules set categories: Redis 7.4+, Valkey 8+).
    pub acl: &'static CStr,
    pub key_flags: u32,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
}

/// Wraps a handler so that it runs behind `catch_unwind`, with its errors replied.
macro_rules! entry {
    ($handler:path) => {{
        extern "C" fn entry(
            ctx: *mut redis_module::raw::RedisModuleCtx,
            argv: $crate::ffi::RawArgv,
            argc: std::ffi::c_int,
        ) -> std::ffi::c_int {
            // SAFETY: the server passes argc valid strings that outlive the call.
            $crate::command::run($crate::ffi::Ctx(ctx), unsafe { $crate::ffi::args(argv, argc) }, $handler)
        }
        entry
    }};
}
pub(crate) use entry;

/// Key-spec flags of a command that reads its key.
pub const RO: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
/// Key-spec flags of a command that may create its key.
pub const RW_INSERT: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_INSERT;
/// Key-spec flags of a command that changes an existing key.
pub const RW_UPDATE: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE;

/// What a command handler returns: an error is replied by [`run`]. Any
/// family's error converts into a [`Reply`] with `?`.
pub type Outcome = Result<(), Reply>;

/// Runs a handler behind `catch_unwind` and replies its error, if any.
pub fn run(ctx: Ctx, argv: &[Arg], handler: fn(Ctx, &[Arg]) -> Outcome) -> c_int {
    match catch_unwind(AssertUnwindSafe(|| handler(ctx, argv))) {
        Ok(Ok(())) => {}
        Ok(Err(Reply::WrongArity)) => ctx.wrong_arity(),
        Ok(Err(Reply::Error(text))) => ctx.reply_error(&text),
        Err(_) => ctx.reply_error(
            "ERR bloomkit internal error (the server log has details); nothing else was affected, please report it",
        ),
    }
    raw::REDISMODULE_OK as c_int
}

/// A family of commands and data types, as the module's entry point lists them.
pub struct Family {
    pub commands: &'static [Command],
    /// Registers the family's data types and ACL categories (before any command).
    pub register: fn(*mut raw::RedisModuleCtx) -> Result<(), String>,
    /// Adds the family's section to `INFO bf`, if it has one.
    pub info: Option<fn(*mut raw::RedisModuleInfoCtx)>,
}

/// Adds an ACL category, where the server lets modules add one.
pub fn add_acl_category(ctx: *mut raw::RedisModuleCtx, name: &CStr) -> Result<(), String> {
    if has_api!(RedisModule_AddACLCategory) {
        // SAFETY: valid context during OnLoad.
        if unsafe { api!(RedisModule_AddACLCategory)(ctx, name.as_ptr()) } != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not add the ACL category {}", name.to_string_lossy()));
        }
    }
    Ok(())
}

/// Registers one command with its key spec and documentation.
pub fn register(ctx: *mut raw::RedisModuleCtx, c: &Command) -> Result<(), String> {
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
