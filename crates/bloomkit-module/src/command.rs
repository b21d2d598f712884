//! The command table's types and the one path every command runs through:
//! each family lists its commands as data ([`Command`]) in its `mod.rs`;
//! here they are registered with their key specs, docs and ACL categories,
//! and each call runs behind `catch_unwind` with its error replied.

use std::ffi::{c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use bloomkit_core::common::compat::Compat;
use bloomkit_core::Reply;
use redis_module::raw;

use crate::config::Setting;
use crate::ffi::{api, has_api, Arg, Ctx, RawArgv};
use crate::stats::Counters;

pub mod docs;

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
    /// What the command does, in a line (`COMMAND DOCS`' summary).
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// The release that added the command: RedisBloom's for `BF.*` and
    /// `CF.*`, valkey-bloom's for `BF.LOAD`, bloomkit's for `APBF.*`.
    pub since: &'static CStr,
    /// Command tips (`COMMAND INFO`), space-separated: [`DONT_CACHE`] on
    /// readers whose reply a client must not cache.
    pub tips: Option<&'static CStr>,
    /// The argument tree after the command name, for `COMMAND DOCS`.
    pub args: &'static [docs::Arg],
    /// How RedisBloom 8 declares the command, registered instead of the
    /// fields above at the RedisBloom 8 levels; `None` for bloomkit's and
    /// valkey-bloom's own commands, registered the same way at every level.
    pub redisbloom8: Option<Declared>,
}

impl Command {
    /// The fields a family's rows share, each row stating the rest: the
    /// release that added the family's commands (`since`), no tips, no
    /// RedisBloom 8 declaration. Its name, handler, flags, ACL categories,
    /// key flags, summary, complexity and arguments are placeholders every
    /// row replaces (`rows_state_what_defaults_cannot` checks that each
    /// registered row has a name, a summary and a handler of its own).
    pub const fn row(since: &'static CStr) -> Command {
        Command {
            name: c"",
            handler: no_handler,
            flags: c"",
            acl: c"",
            key_flags: 0,
            summary: c"",
            complexity: c"",
            since,
            tips: None,
            args: &[],
            redisbloom8: None,
        }
    }
}

/// The handler of [`Command::row`]'s placeholder, which no registered row
/// keeps: an error, should one ever be called.
extern "C" fn no_handler(ctx: *mut raw::RedisModuleCtx, _argv: RawArgv, _argc: c_int) -> c_int {
    crate::ffi::Ctx(ctx).reply_error("ERR bloomkit: this command has no handler");
    raw::REDISMODULE_OK as c_int
}

/// A command's metadata as RedisBloom 8 declares it (`COMMAND INFO` of
/// RedisBloom 8 on Redis 8.2, `../shared/vectors/redisbloom-8-command-info.tsv`),
/// registered at the `redisbloom-8` and `redisbloom-8.12` levels. Where
/// RedisBloom 8's declaration would hurt users, the row keeps bloomkit's and
/// README's differences say why: every key spec keeps its `access`,
/// `insert` and `update` flags (RedisBloom 8 gives bare `RW` / `RO`, with
/// which ACL read-only and write-only key patterns stop applying), the
/// scandumps keep `RO` (RedisBloom 8: `RW`), CF.COMPACT stays `write`
/// (RedisBloom 8: `readonly`, so it would run on replicas and for `+@read`
/// users), and CMS.MERGE keeps declaring its sources (see [`Keys`]).
#[derive(Clone, Copy)]
pub struct Declared {
    /// The server's arity check: n exactly, or -n for at least n words
    /// (the command name counted); -1 where RedisBloom 8 declares none.
    pub arity: c_int,
    pub flags: &'static CStr,
    pub acl: &'static CStr,
    pub key_flags: u32,
    pub tips: Option<&'static CStr>,
    /// Redis 8.12's argument tree, where it differs (CMS.INITBYDIM and
    /// CMS.INITBYPROB take `CELL_SIZE`): registered, with the arity made
    /// "at least", where the Count-Min Sketch answers as Redis 8.12's.
    pub args_8_12: Option<&'static [docs::Arg]>,
}

impl Declared {
    pub const fn new(arity: c_int, flags: &'static CStr, acl: &'static CStr, key_flags: u32) -> Declared {
        Declared { arity, flags, acl, key_flags, tips: None, args_8_12: None }
    }

    /// With RedisBloom 8's [`DONT_CACHE_8`] tip.
    pub const fn dont_cache(self) -> Declared {
        Declared { tips: DONT_CACHE_8, ..self }
    }

    /// With Redis 8.12's argument tree.
    pub const fn at_8_12(self, args: &'static [docs::Arg]) -> Declared {
        Declared { args_8_12: Some(args), ..self }
    }
}

/// The tip RedisBloom 8 puts on `*.INFO`, `*.DEBUG` and `*.SCANDUMP`: read-only
/// commands on one key whose replies client-side caches must not keep
/// (sizes and state that change without the key changing, or one chunk of
/// an iteration).
pub const DONT_CACHE: Option<&CStr> = Some(c"dont-cache");

/// The same tip as RedisBloom 8 spells it in its command info.
pub const DONT_CACHE_8: Option<&CStr> = Some(c"dont_cache");

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
/// Key-spec flags the server gives a key it was told of only by position
/// (`1 1 1`), as RedisBloom 8's CF.COMPACT has them: read, and changed.
pub const RW_ACCESS_UPDATE: u32 =
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE;
/// What a command handler returns: an error is replied by [`run`]. Any
/// family's error converts into a [`Reply`] with `?`.
pub type Outcome = Result<(), Reply>;

/// Runs a handler behind `catch_unwind` and replies its error, if any; a
/// keys-position request runs no handler and is answered from the
/// command's table row ([`report_keys`]).
pub fn run(ctx: Ctx, argv: &[Arg], handler: fn(Ctx, &[Arg]) -> Outcome) -> c_int {
    if ctx.is_keys_position_request() {
        // Nothing to reply: the server reads the keys reported, and a
        // panic here must not cross into the server either.
        let _ = catch_unwind(AssertUnwindSafe(|| report_keys(ctx, argv)));
        return raw::REDISMODULE_OK as c_int;
    }
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

/// A family of commands and data types: everything the shared code needs
/// of it. The module's entry point lists the families; registration, INFO,
/// active defrag's counters, COMMAND DOCS and the settings iterate them.
pub struct Family {
    /// Its entry in core's list of every family ([`bloomkit_core::family::KINDS`]).
    pub kind: bloomkit_core::family::Kind,
    pub commands: &'static [Command],
    /// Registers the family's data type (before any command).
    pub register: fn(*mut raw::RedisModuleCtx) -> Result<(), String>,
    /// The ACL category the family adds, where the server lets modules add
    /// one (APBF's and valkey-bloom's commands are in BF's `bloom`).
    pub acl_category: Option<&'static CStr>,
    /// Its type's counters: its `INFO bf` section and defrag rows.
    pub counters: &'static Counters,
    /// Writes the family's `INFO bf` sections where they are not simply
    /// its counters' (valkey-bloom's names, the module-wide fields).
    pub info: Option<fn(*mut raw::RedisModuleInfoCtx)>,
    /// Registers a command of this family another way under a compatibility
    /// level (`BF.*` as valkey-bloom registers it); `None` for bloomkit's.
    pub dialect: fn(Compat, &CStr) -> Option<&'static Dialect>,
    /// Its settings (`settings.rs`): configs and load arguments.
    pub settings: &'static [&'static Setting],
}

impl Family {
    /// The family whose data type is `T`: its entry in core's list, its
    /// type registered with the shared callbacks, its counters. Its `INFO
    /// bf` sections are its counters', its commands register as bloomkit's,
    /// and it has no settings, unless the family says otherwise.
    pub const fn of<T: crate::value::Value>(
        commands: &'static [Command],
        acl_category: Option<&'static CStr>,
    ) -> Family {
        Family {
            kind: bloomkit_core::family::KINDS[T::SLOT],
            commands,
            register: crate::data_type::register::<T>,
            acl_category,
            counters: T::COUNTERS,
            info: None,
            dialect: no_dialect,
            settings: &[],
        }
    }

    /// Adds the family's sections to `INFO bf`.
    pub fn write_info(&self, ctx: *mut raw::RedisModuleInfoCtx) {
        match self.info {
            Some(write) => write(ctx),
            None => self.counters.write_info(ctx),
        }
    }
}

/// Every command is registered as bloomkit registers it.
fn no_dialect(_: Compat, _: &CStr) -> Option<&'static Dialect> {
    None
}

pub use crate::ffi::add_acl_category;

/// Where a command's keys are, read from its argument tree (its `Key`
/// arguments are the one place a command declares them). The key specs,
/// the `getkeys-api` flag and the answer to the server's keys-position
/// request ([`report_keys`]) are all made from this, so that they agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// `key ...`: one key, argument 1.
    One,
    /// `destination numkeys source [source ...] ...` (`CMS.MERGE`,
    /// `TDIGEST.MERGE`, `XF.MERGE`): argument 1, and the `numkeys`
    /// arguments after argument 2; what follows them (`WEIGHTS`,
    /// `COMPRESSION`, `OVERRIDE`) is not a key.
    Sources,
}

impl Keys {
    pub fn of(args: &[docs::Arg]) -> Keys {
        match args {
            [first, count, sources, ..]
                if first.kind == docs::Kind::Key
                    && count.kind == docs::Kind::Integer
                    && count.name == c"numkeys"
                    && sources.kind == docs::Kind::Key =>
            {
                Keys::Sources
            }
            _ => Keys::One,
        }
    }

    /// The argv positions of one call's keys, as the server reads the key
    /// specs [`register`] declares (a range at 1, then a key count at 2):
    /// none at all where they do not fit the call (no argument 1, or a
    /// `numkeys` that is not an integer from 1 to the arguments left), as
    /// the server gives none for its own `ZUNIONSTORE` then: the handler
    /// refuses such a call, and `COMMAND GETKEYS` answers it as before.
    pub fn positions<A: AsRef<[u8]>>(self, argv: &[A]) -> Vec<usize> {
        match self {
            Keys::One if argv.len() > 1 => vec![1],
            Keys::Sources if argv.len() > 3 => {
                let left = argv.len() as i64 - 3;
                match bloomkit_core::common::parse::parse_long_long(argv[2].as_ref()) {
                    Some(n) if (1..=left).contains(&n) => [1].into_iter().chain(3..3 + n as usize).collect(),
                    _ => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }
}

/// Answers the server's keys-position request for a command registered
/// `getkeys-api`: the keys of this call, found by its name in the table,
/// with the flags of the key spec each falls under (the destination's, and
/// `RO access` for the sources). Reads only static data and argv, so it is
/// safe wherever the server asks (Valkey's I/O threads ask too, to find a
/// command's slot early).
fn report_keys(ctx: Ctx, argv: &[Arg]) {
    let Some(name) = argv.first() else { return };
    let found = crate::FAMILIES
        .iter()
        .flat_map(|f| f.commands)
        .find(|c| c.name.to_bytes().eq_ignore_ascii_case(name.bytes()));
    let Some(c) = found else { return };
    let destination = key_flags(c, declared(c, None));
    for pos in Keys::of(c.args).positions(argv) {
        ctx.key_at_pos(pos, if pos == 1 { destination } else { RO });
    }
}

/// How RedisBloom 8 declares the command where it is registered so: at the
/// RedisBloom 8 levels, outside a dialect.
fn declared(c: &Command, dialect: Option<&Dialect>) -> Option<Declared> {
    match dialect {
        None if crate::config::redisbloom_level() == Compat::RedisBloom8 => c.redisbloom8,
        _ => None,
    }
}

/// The flags of the command's first key spec.
fn key_flags(c: &Command, declared: Option<Declared>) -> u32 {
    declared.map_or(c.key_flags, |r| r.key_flags)
}

/// How another module registers a command bloomkit answers in its dialect
/// (`bf.compat valkey-bloom`): its spelling of the name, its flags and ACL
/// categories, no tips, and the server's own key spec for `1 1 1`.
pub struct Dialect {
    pub name: &'static CStr,
    pub flags: &'static CStr,
    pub acl: &'static CStr,
}

/// Registers one command with its key spec and documentation (summary,
/// complexity, since, tips and argument tree), where the server has
/// `RedisModule_SetCommandInfo` (Redis 7+, Valkey 7.2+); as `dialect` says
/// where it is given, and as RedisBloom 8 declares it ([`Declared`]) at the
/// RedisBloom 8 levels. The level is the one in force when the module
/// loads: `COMMAND INFO` keeps it if `bf.compat` changes later.
///
/// At `redisbloom-2.8` (and for bloomkit's own commands) the arity stays
/// the server's -1 for module commands and each handler checks its own; at
/// the RedisBloom 8 levels the server checks RedisBloom 8's arities first,
/// as it does for RedisBloom 8. Both answer a wrong count with the same
/// text, `ERR wrong number of arguments for 'bf.add' command`: the server
/// and `RedisModule_WrongArity` both quote the registered (lowercase) name.
pub fn register(ctx: *mut raw::RedisModuleCtx, c: &Command, dialect: Option<&Dialect>) -> Result<(), String> {
    let declared = declared(c, dialect);
    let registered = dialect.map_or(c.name, |d| d.name);
    let flags = match (dialect, declared) {
        (Some(d), _) => d.flags,
        (None, Some(r)) => r.flags,
        (None, None) => c.flags,
    };
    let acl = match (dialect, declared) {
        (Some(d), _) => d.acl,
        (None, Some(r)) => r.acl,
        (None, None) => c.acl,
    };
    let shape = Shape::of(c, declared);
    // A command naming several keys also answers the server's
    // keys-position request ([`report_keys`]). Every server here (Redis
    // 7.0 and 8.2, Valkey 8.1 and 9.1) checks a cluster call's slots, and
    // routes it, by the keys that request gives or else by first/last/step,
    // which cannot follow a key count: key specs reach `COMMAND GETKEYS`,
    // `COMMAND INFO` and ACLs, not the slot check, and without the flag a
    // cross-slot merge ran (Redis 7.0) or looked for its sources in the
    // destination's slot and answered that they did not exist (Redis 8.2,
    // Valkey 8.1 and 9.1, which keep keys per slot). The flag shows in no
    // reply (`COMMAND INFO` already says `movablekeys`).
    let flags = match shape.keys {
        Keys::Sources if dialect.is_none() => {
            let flags = format!("{} getkeys-api", flags.to_string_lossy());
            std::ffi::CString::new(flags).expect("flags have no NUL")
        }
        _ => flags.to_owned(),
    };
    let name = registered.to_string_lossy();
    // SAFETY: valid context during OnLoad; the server parses the flags
    // during the call. first/last/step key = 1 for every command: the
    // destination, or the key (a key count has no first/last/step).
    let status = unsafe {
        api!(RedisModule_CreateCommand)(ctx, registered.as_ptr(), Some(c.handler), flags.as_ptr(), 1, 1, 1)
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not register {name}"));
    }
    if !crate::ffi::has_command_info() {
        return Ok(());
    }
    let command = crate::ffi::get_command(ctx, registered);
    set_info(command, c, dialect, &shape, &name)?;
    if has_api!(RedisModule_SetCommandACLCategories) && has_api!(RedisModule_AddACLCategory) {
        // SAFETY: a command of this module and a category it added.
        let status = unsafe { api!(RedisModule_SetCommandACLCategories)(command, acl.as_ptr()) };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not put {name} in the ACL categories {}", acl.to_string_lossy()));
        }
    }
    Ok(())
}

/// How a command is registered at the level in force, apart from its
/// name, flags and ACL categories: made once, since the flags
/// (`getkeys-api`) and the command info both follow from it.
struct Shape {
    /// The arity `COMMAND INFO` gives (0: not given, the server's -1).
    arity: c_int,
    /// The argument tree: the command's, or Redis 8.12's.
    args: &'static [docs::Arg],
    /// Which arguments are keys, read from `args`.
    keys: Keys,
    tips: Option<&'static CStr>,
    /// The flags of the first key spec.
    key_flags: u32,
}

impl Shape {
    fn of(c: &Command, declared: Option<Declared>) -> Shape {
        let redisbloom8 = crate::config::redisbloom_level() == Compat::RedisBloom8;
        let key_flags = key_flags(c, declared);
        let tips = match declared {
            Some(r) => r.tips,
            // bloomkit's own readers spell the tip as the level does.
            None if redisbloom8 && c.tips == DONT_CACHE => DONT_CACHE_8,
            None => c.tips,
        };
        // Redis 8.12's tree where the families answer as Redis 8.12's.
        let cell_sized = crate::config::level_8_12();
        let (arity, args) = match declared {
            Some(Declared { arity, args_8_12: Some(args), .. }) if cell_sized => (-arity.abs(), args),
            Some(r) => (r.arity, c.args),
            // 0: not given, the server's -1.
            None => (0, c.args),
        };
        Shape { arity, args, keys: Keys::of(args), tips, key_flags }
    }
}

/// The command's key specs, ended by a zeroed entry: its key, and for a
/// `numkeys` command its sources.
fn key_specs(shape: &Shape) -> [raw::RedisModuleCommandKeySpec; 3] {
    // One key, at argument 1 (and, for a `numkeys` command, its sources);
    // the array ends with a zeroed entry.
    // SAFETY: all-zero is the terminator the API expects.
    let mut key_specs: [raw::RedisModuleCommandKeySpec; 3] = unsafe { std::mem::zeroed() };
    key_specs[0].flags = u64::from(shape.key_flags);
    key_specs[0].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    key_specs[0].bs.index.pos = 1;
    key_specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    key_specs[0].fk.range.lastkey = 0;
    key_specs[0].fk.range.keystep = 1;
    key_specs[0].fk.range.limit = 0;
    if shape.keys == Keys::Sources {
        // `destination numkeys source [source ...]`: the sources are keys
        // too (read), so that a cluster routes and cross-slot-checks them.
        key_specs[1].flags = u64::from(RO);
        key_specs[1].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
        key_specs[1].bs.index.pos = 2;
        key_specs[1].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
        key_specs[1].fk.keynum.keynumidx = 0;
        key_specs[1].fk.keynum.firstkey = 1;
        key_specs[1].fk.keynum.keystep = 1;
    }
    key_specs
}

/// Gives the command just created its documentation and key specs
/// (`RedisModule_SetCommandInfo`); in a dialect, no tips, key specs or
/// argument tree, as the other module gives none.
fn set_info(
    command: *mut raw::RedisModuleCommand,
    c: &Command,
    dialect: Option<&Dialect>,
    shape: &Shape,
    name: &str,
) -> Result<(), String> {
    let mut key_specs = key_specs(shape);
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
    info.since = c.since.as_ptr();
    info.arity = shape.arity;
    info.tips = match dialect {
        Some(_) => std::ptr::null(),
        None => shape.tips.map_or(std::ptr::null(), CStr::as_ptr),
    };
    // In a dialect, the server keeps the key spec it made from `1 1 1`.
    info.key_specs = if dialect.is_some() { std::ptr::null_mut() } else { key_specs.as_mut_ptr() };
    // Lives until after the call: `info.args` points into it. In a dialect
    // the command takes arguments the tree does not describe (valkey-bloom's
    // BF.INSERT SEED, TIGHTENING, VALIDATESCALETO), so it gives none, as
    // valkey-bloom gives none.
    let mut raw_args = docs::RawArgs::new(if dialect.is_some() { &[] } else { shape.args });
    info.args = raw_args.root();
    // SAFETY: the server validates `info` and copies everything it keeps
    // from it (strings, key specs, the argument tree) during the call; every
    // pointer in it is to 'static strings or to `version`, `key_specs` and
    // `raw_args`, which outlive the call.
    let status = unsafe { api!(RedisModule_SetCommandInfo)(command, &info) };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not set the command info of {name}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions(keys: Keys, line: &str) -> Vec<usize> {
        keys.positions(&line.split(' ').collect::<Vec<_>>())
    }

    /// Every registered row replaced [`Command::row`]'s placeholders.
    #[test]
    fn rows_state_what_defaults_cannot() {
        for c in crate::FAMILIES.iter().flat_map(|f| f.commands) {
            let name = c.name.to_string_lossy();
            assert!(!c.name.is_empty() && !c.summary.is_empty() && !c.flags.is_empty(), "{name}");
            assert!(!c.acl.is_empty() && !c.complexity.is_empty() && !c.since.is_empty(), "{name}");
            assert_ne!(
                c.handler as *const () as usize, no_handler as *const () as usize,
                "{name} has no handler"
            );
        }
    }

    #[test]
    fn keys_are_read_from_the_argument_tree() {
        let found = |name: &CStr| {
            let c = crate::FAMILIES.iter().flat_map(|f| f.commands).find(|c| c.name == name).unwrap();
            Keys::of(c.args)
        };
        for name in [c"cms.merge", c"tdigest.merge", c"xf.merge"] {
            assert_eq!(found(name), Keys::Sources, "{name:?}");
        }
        assert_eq!(found(c"bf.add"), Keys::One);
        assert_eq!(found(c"cms.incrby"), Keys::One);
    }

    /// As the server reads a range spec at 1 and a key-count spec at 2: the
    /// destination and the counted sources, options after them not keys,
    /// and nothing at all for a call the key specs do not fit.
    #[test]
    fn positions_follow_the_key_specs() {
        assert_eq!(positions(Keys::One, "BF.ADD k a"), [1]);
        assert_eq!(positions(Keys::One, "BF.ADD"), [0usize; 0]);
        let merge = |line| positions(Keys::Sources, line);
        assert_eq!(merge("M d 1 a"), [1, 3]);
        assert_eq!(merge("M d 2 a b WEIGHTS 1 2"), [1, 3, 4]);
        assert_eq!(merge("M d 2 a b COMPRESSION 5 OVERRIDE"), [1, 3, 4]);
        assert_eq!(merge("M d 3 a b c"), [1, 3, 4, 5]);
        let refused =
            ["M d 0 a", "M d -1 a", "M d x a", "M d 2 a", "M d 1", "M d", "M", "M d 01x a", "M d +1 a"];
        for bad in refused {
            assert_eq!(merge(bad), [0usize; 0], "{bad}");
        }
    }
}
