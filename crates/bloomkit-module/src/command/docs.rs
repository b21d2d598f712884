//! Command documentation as data: each command's argument tree ([`Arg`]),
//! written as `const` items beside the command in its family's table, and
//! its conversion into the server's `RedisModuleCommandArg` arrays
//! ([`RawArgs`]) when the command is registered, so that `COMMAND DOCS` and
//! redis-cli's hints describe every argument.

use std::ffi::{c_int, CStr};
use std::ptr;

use redis_module::raw;

/// What an argument is, as `COMMAND DOCS` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A key name (the command's one key spec).
    Key,
    String,
    Integer,
    Double,
    /// A word on its own (`NOCREATE`): the argument's token.
    PureToken,
    /// Exactly one of the sub-arguments.
    OneOf,
    /// All of the sub-arguments, in order (`item increment` of `CMS.INCRBY`).
    Block,
}

impl Kind {
    fn raw(self) -> raw::RedisModuleCommandArgType {
        match self {
            Kind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
            Kind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            Kind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            Kind::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
            Kind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
            Kind::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            Kind::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
        }
    }
}

/// One node of a command's argument tree. Built with the `const`
/// constructors, e.g. `Arg::integer(c"capacity").token(c"CAPACITY").optional()`
/// for `[CAPACITY capacity]`.
#[derive(Debug)]
pub struct Arg {
    pub name: &'static CStr,
    pub kind: Kind,
    /// The word that comes before the value (`CAPACITY 100`), or the word
    /// itself for a [`Kind::PureToken`].
    pub token: Option<&'static CStr>,
    pub optional: bool,
    /// May be repeated (`item [item ...]`).
    pub multiple: bool,
    /// The alternatives of a [`Kind::OneOf`], or the parts of a
    /// [`Kind::Block`] (`item increment` of `CMS.INCRBY`); empty for every
    /// other kind. A token with one value is an argument with a token, as
    /// RedisBloom's command docs write them, not a block.
    pub subargs: &'static [Arg],
}

impl Arg {
    const fn new(name: &'static CStr, kind: Kind) -> Arg {
        Arg { name, kind, token: None, optional: false, multiple: false, subargs: &[] }
    }

    pub const fn key(name: &'static CStr) -> Arg {
        Arg::new(name, Kind::Key)
    }

    pub const fn string(name: &'static CStr) -> Arg {
        Arg::new(name, Kind::String)
    }

    pub const fn integer(name: &'static CStr) -> Arg {
        Arg::new(name, Kind::Integer)
    }

    pub const fn double(name: &'static CStr) -> Arg {
        Arg::new(name, Kind::Double)
    }

    /// A word on its own, named as the word in lowercase by convention.
    pub const fn word(name: &'static CStr, token: &'static CStr) -> Arg {
        Arg::new(name, Kind::PureToken).token(token)
    }

    pub const fn one_of(name: &'static CStr, alternatives: &'static [Arg]) -> Arg {
        Arg { subargs: alternatives, ..Arg::new(name, Kind::OneOf) }
    }

    /// Sub-arguments that come together, e.g. a repeated `item increment` pair.
    pub const fn block(name: &'static CStr, parts: &'static [Arg]) -> Arg {
        Arg { subargs: parts, ..Arg::new(name, Kind::Block) }
    }

    /// The word before the value: `CAPACITY` in `CAPACITY 100`.
    pub const fn token(self, token: &'static CStr) -> Arg {
        Arg { token: Some(token), ..self }
    }

    pub const fn optional(self) -> Arg {
        Arg { optional: true, ..self }
    }

    pub const fn multiple(self) -> Arg {
        Arg { multiple: true, ..self }
    }

    fn flags(&self) -> c_int {
        let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
        if self.optional {
            flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
        }
        if self.multiple {
            flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
        }
        flags as c_int
    }
}

/// `key`: commands on a key and nothing else.
pub const KEY: &[Arg] = &[Arg::key(c"key")];
/// `key item`
pub const KEY_ITEM: &[Arg] = &[Arg::key(c"key"), Arg::string(c"item")];
/// `key item [item ...]`
pub const KEY_ITEMS: &[Arg] = &[Arg::key(c"key"), Arg::string(c"item").multiple()];
/// `key iterator`: every `*.SCANDUMP`.
pub const SCANDUMP: &[Arg] = &[Arg::key(c"key"), Arg::integer(c"iterator")];
/// `key iterator data`: every `*.LOADCHUNK`.
pub const LOADCHUNK: &[Arg] = &[Arg::key(c"key"), Arg::integer(c"iterator"), Arg::string(c"data")];

/// An argument tree in the server's form: arrays of `RedisModuleCommandArg`,
/// each ending with a zeroed entry, pointing into one another through
/// `subargs` and at the `'static` strings of the [`Arg`]s. It owns the
/// arrays, so they live until the server has copied them
/// (`RedisModule_SetCommandInfo` keeps nothing of its input).
pub struct RawArgs {
    /// Every array of the tree; a `Vec`'s buffer stays where it is when the
    /// `Vec` itself moves into this list, and none is pushed to afterwards.
    arrays: Vec<Vec<raw::RedisModuleCommandArg>>,
    root: *mut raw::RedisModuleCommandArg,
    /// Key arguments seen so far: the n-th names key spec n (a `numkeys`
    /// command's sources are its second, see `command::Keys`).
    keys: c_int,
}

impl RawArgs {
    /// The server's form of `args`; a null root for a command without arguments.
    pub fn new(args: &[Arg]) -> RawArgs {
        let mut raw_args = RawArgs { arrays: Vec::new(), root: ptr::null_mut(), keys: 0 };
        if !args.is_empty() {
            raw_args.root = raw_args.array(args);
        }
        raw_args
    }

    /// The first entry of the top-level array (null when there are no arguments).
    pub fn root(&mut self) -> *mut raw::RedisModuleCommandArg {
        self.root
    }

    /// Builds one array (its sub-arrays first) and returns its first entry.
    fn array(&mut self, args: &[Arg]) -> *mut raw::RedisModuleCommandArg {
        let mut entries = Vec::with_capacity(args.len() + 1);
        for arg in args {
            let subargs = if arg.subargs.is_empty() { ptr::null_mut() } else { self.array(arg.subargs) };
            entries.push(raw::RedisModuleCommandArg {
                name: arg.name.as_ptr(),
                type_: arg.kind.raw(),
                // The command's key specs in order; -1 ("none") for any other argument.
                key_spec_index: if arg.kind == Kind::Key {
                    self.keys += 1;
                    self.keys - 1
                } else {
                    -1
                },
                token: arg.token.map_or(ptr::null(), CStr::as_ptr),
                flags: arg.flags(),
                subargs,
                ..zeroed_arg()
            });
        }
        entries.push(zeroed_arg());
        let first = entries.as_mut_ptr();
        self.arrays.push(entries);
        first
    }
}

/// An argument with nothing given: the terminator of every array, and
/// "not given" for the fields bloomkit leaves out (summary, since,
/// deprecated_since, display_text).
fn zeroed_arg() -> raw::RedisModuleCommandArg {
    // SAFETY: a plain C struct of pointers and integers, for which all-zero
    // (null pointers, type 0, flags 0) is valid and is the API's terminator.
    unsafe { std::mem::zeroed() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words a tree needs at the least, the command name not counted.
    fn min_words(args: &[Arg]) -> usize {
        args.iter().filter(|a| !a.optional).map(arg_min_words).sum()
    }

    fn arg_min_words(arg: &Arg) -> usize {
        let own = match arg.kind {
            Kind::PureToken => return 1,
            Kind::OneOf => arg.subargs.iter().map(arg_min_words).min().unwrap_or(0),
            Kind::Block => min_words(arg.subargs),
            Kind::Key | Kind::String | Kind::Integer | Kind::Double => 1,
        };
        own + usize::from(arg.token.is_some())
    }

    const INSERT: &[Arg] = &[
        Arg::key(c"key"),
        Arg::integer(c"capacity").token(c"CAPACITY").optional(),
        Arg::word(c"nocreate", c"NOCREATE").optional(),
        Arg::one_of(c"window", &[Arg::word(c"count", c"COUNT"), Arg::integer(c"seconds").token(c"TIME")]),
        Arg::word(c"items", c"ITEMS"),
        Arg::string(c"item").multiple(),
    ];

    #[test]
    fn min_words_counts_required_words_and_tokens() {
        // key, COUNT (the shorter alternative), ITEMS, one item.
        assert_eq!(min_words(INSERT), 4);
        assert_eq!(min_words(LOADCHUNK), 3);
        assert_eq!(min_words(&[]), 0);
    }

    /// What the server refuses (and the module would then fail to load on),
    /// and bloomkit's own conventions, checked over every table.
    fn check_tree(command: &str, args: &[Arg]) {
        for arg in args {
            let name = arg.name.to_str().unwrap();
            assert!(!name.is_empty() && name == name.to_lowercase(), "{command}: argument name {name:?}");
            assert!(
                arg.kind != Kind::PureToken || arg.token.is_some(),
                "{command} {name}: a word needs its token"
            );
            assert_eq!(
                matches!(arg.kind, Kind::OneOf | Kind::Block),
                !arg.subargs.is_empty(),
                "{command} {name}: sub-arguments"
            );
            if arg.kind == Kind::OneOf {
                assert!(arg.subargs.len() >= 2, "{command} {name}: one of one");
            }
            check_tree(command, arg.subargs);
        }
    }

    #[test]
    fn every_command_has_docs_and_a_well_formed_tree() {
        let commands: Vec<_> = crate::FAMILIES.iter().flat_map(|f| f.commands).collect();
        let mut names: Vec<_> = commands.iter().map(|c| c.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), commands.len(), "a command name is registered twice");
        assert!(crate::FAMILIES.iter().all(|f| !f.commands.is_empty()), "a family without commands");
        for c in commands {
            let name = c.name.to_str().unwrap();
            for (field, text) in [("summary", c.summary), ("complexity", c.complexity), ("since", c.since)] {
                assert!(!text.is_empty(), "{name}: no {field}");
            }
            // Every command takes its key first, and only one key (or a
            // second, its sources, where a second key spec declares them).
            assert_eq!(c.args.first().map(|a| a.kind), Some(Kind::Key), "{name}");
            let keys = crate::command::Keys::of(c.args);
            let specs = 1 + usize::from(keys == crate::command::Keys::Sources);
            assert_eq!(c.args.iter().filter(|a| a.kind == Kind::Key).count(), specs, "{name}");
            if keys == crate::command::Keys::Sources {
                // The sources are a repeated key, counted by `numkeys`.
                assert!(c.args[2].multiple && !c.args[2].optional, "{name}");
                // The keys-position answer uses the level in force, the key
                // specs the level at load: the two agree only if RedisBloom
                // 8's declaration of the destination is bloomkit's.
                if let Some(r) = c.redisbloom8 {
                    assert_eq!(r.key_flags, c.key_flags, "{name}");
                }
            }
            check_tree(name, c.args);
            // Redis 8.12's tree extends the command's with optional
            // arguments only: the same fewest words, the arity made "at least".
            if let Some(args) = c.redisbloom8.and_then(|r| r.args_8_12) {
                check_tree(name, args);
                assert_eq!(crate::command::Keys::of(args), keys, "{name}: Redis 8.12's keys");
                assert_eq!(min_words(args), min_words(c.args), "{name}: Redis 8.12's tree");
                let same = args.iter().zip(c.args).all(|(a, b)| (a.name, a.kind) == (b.name, b.kind));
                assert!(args.len() > c.args.len() && same, "{name}: Redis 8.12's tree");
            }
            // RedisBloom 8's exact arities agree with the tree.
            if let Some(r) = c.redisbloom8 {
                let words = min_words(c.args) as i32 + 1;
                let fixed = c.args.iter().all(|a| !a.optional && !a.multiple);
                let fits =
                    if r.arity > 0 { fixed && r.arity == words } else { r.arity == -words || r.arity == -1 };
                assert!(fits, "{name}: arity {}", r.arity);
            }
        }
    }

    #[test]
    fn raw_arrays_are_terminated_and_linked() {
        let mut raw_args = RawArgs::new(INSERT);
        let root = raw_args.root();
        // SAFETY: `root` points at INSERT.len() + 1 entries owned by `raw_args`.
        let top = unsafe { std::slice::from_raw_parts(root, INSERT.len() + 1) };
        assert!(top[INSERT.len()].name.is_null(), "terminator");
        assert_eq!(top[0].key_spec_index, 0);
        assert_eq!(top[1].key_spec_index, -1);
        assert_eq!(top[1].flags, raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int);
        assert_eq!(top[5].flags, raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int);
        // SAFETY: NUL-terminated 'static strings.
        assert_eq!(unsafe { CStr::from_ptr(top[1].token) }, c"CAPACITY");
        assert!(top[0].token.is_null() && top[0].subargs.is_null());
        // SAFETY: the one-of's two alternatives and their terminator, owned by `raw_args`.
        let alternatives = unsafe { std::slice::from_raw_parts(top[3].subargs, 3) };
        // SAFETY: a NUL-terminated 'static string.
        assert_eq!(unsafe { CStr::from_ptr(alternatives[1].name) }, c"seconds");
        assert!(alternatives[2].name.is_null(), "terminator");
        assert!(RawArgs::new(&[]).root().is_null());
    }
}
