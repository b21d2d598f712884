//! `CF.*`: RedisBloom's cuckoo filter, type `MBbloomCF`.

pub mod commands;
pub mod counters;
pub mod data_type;
pub mod settings;

use crate::command::docs::{Arg, KEY, KEY_ITEM, KEY_ITEMS, LOADCHUNK, SCANDUMP};
use crate::command::{entry, Command, Family, DONT_CACHE, RO, RW_INSERT, RW_UPDATE};

pub const FAMILY: Family = Family {
    settings: &settings::SETTINGS,
    ..Family::of::<bloomkit_core::cf::CuckooFilter>(COMMANDS, Some(c"cuckoo"))
};

/// `CF.INSERT` and `CF.INSERTNX`: `key [CAPACITY capacity] [NOCREATE] ITEMS item [item ...]`.
const INSERT_ARGS: &[Arg] = &[
    Arg::key(c"key"),
    Arg::integer(c"capacity").token(c"CAPACITY").optional(),
    Arg::word(c"nocreate", c"NOCREATE").optional(),
    Arg::word(c"items", c"ITEMS"),
    Arg::string(c"item").multiple(),
];

use crate::command::{Declared, RW_ACCESS_UPDATE};

// `since` is RedisBloom's: 1.0.0 for every CF command its command docs list;
// CF.COMPACT and CF.DEBUG, undocumented there, date from the same release.
/// What most of the family's rows share (see [`Command::row`]).
const ROW: Command = Command::row(c"1.0.0");

const COMMANDS: &[Command] = &[
    Command {
        name: c"cf.reserve",
        acl: c"cuckoo write",
        handler: entry!(commands::reserve),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates an empty cuckoo filter with a capacity and optional bucket size, max iterations and expansion",
        complexity: c"O(1)",
        args: &[
            Arg::key(c"key"),
            Arg::integer(c"capacity"),
            Arg::integer(c"bucketsize").token(c"BUCKETSIZE").optional(),
            Arg::integer(c"maxiterations").token(c"MAXITERATIONS").optional(),
            Arg::integer(c"expansion").token(c"EXPANSION").optional(),
        ],
        redisbloom8: Some(Declared::new(-3, c"write deny-oom", c"cuckoo write fast", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"cf.add",
        acl: c"cuckoo write fast",
        handler: entry!(commands::add),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds an item (a copy if already present), creating the filter if needed",
        complexity: c"O(k + i), k the number of sub-filters, i the max iterations",
        args: KEY_ITEM,
        redisbloom8: Some(Declared::new(3, c"write deny-oom", c"cuckoo write", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"cf.addnx",
        acl: c"cuckoo write fast",
        handler: entry!(commands::addnx),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds an item unless it may already be present, creating the filter if needed",
        complexity: c"O(k + i), k the number of sub-filters, i the max iterations",
        args: KEY_ITEM,
        redisbloom8: Some(Declared::new(3, c"write deny-oom", c"cuckoo write", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"cf.insert",
        acl: c"cuckoo write",
        handler: entry!(commands::insert),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds items, creating the filter with the given capacity if needed",
        complexity: c"O(n * (k + i)), n the number of items, k the number of sub-filters, i the max iterations",
        args: INSERT_ARGS,
        redisbloom8: Some(Declared::new(-4, c"write deny-oom", c"cuckoo write", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"cf.insertnx",
        acl: c"cuckoo write",
        handler: entry!(commands::insertnx),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds items unless they may already be present, creating the filter if needed",
        complexity: c"O(n * (k + i)), n the number of items, k the number of sub-filters, i the max iterations",
        args: INSERT_ARGS,
        redisbloom8: Some(Declared::new(-4, c"write deny-oom", c"cuckoo write", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"cf.exists",
        acl: c"cuckoo read fast",
        handler: entry!(commands::exists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether an item may be in a cuckoo filter",
        complexity: c"O(k), k the number of sub-filters",
        args: KEY_ITEM,
        redisbloom8: Some(Declared::new(3, c"readonly fast", c"cuckoo read", RO)),
        ..ROW
    },
    Command {
        name: c"cf.mexists",
        acl: c"cuckoo read",
        handler: entry!(commands::mexists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether items may be in a cuckoo filter",
        complexity: c"O(k * n), k the number of sub-filters, n the number of items",
        args: KEY_ITEMS,
        redisbloom8: Some(Declared::new(-3, c"readonly fast", c"cuckoo read", RO)),
        ..ROW
    },
    Command {
        name: c"cf.count",
        acl: c"cuckoo read fast",
        handler: entry!(commands::count),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns how many copies of an item may be in a cuckoo filter",
        complexity: c"O(k), k the number of sub-filters",
        args: KEY_ITEM,
        redisbloom8: Some(Declared::new(3, c"readonly fast", c"cuckoo read", RO)),
        ..ROW
    },
    Command {
        name: c"cf.del",
        acl: c"cuckoo write fast",
        handler: entry!(commands::del),
        flags: c"write fast",
        key_flags: RW_UPDATE,
        summary: c"Deletes one copy of an item from a cuckoo filter",
        complexity: c"O(k), k the number of sub-filters; more when it compacts",
        args: KEY_ITEM,
        redisbloom8: Some(Declared::new(3, c"write fast", c"cuckoo write", RW_UPDATE)),
        ..ROW
    },
    Command {
        name: c"cf.compact",
        acl: c"cuckoo write",
        handler: entry!(commands::compact),
        flags: c"write",
        key_flags: RW_UPDATE,
        summary: c"Moves items into older sub-filters and frees emptied ones",
        complexity: c"O(s), s the number of slots",
        args: KEY,
        redisbloom8: Some(Declared::new(-1, c"write", c"cuckoo write", RW_ACCESS_UPDATE)),
        ..ROW
    },
    Command {
        name: c"cf.info",
        acl: c"cuckoo read fast",
        handler: entry!(commands::info),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns a cuckoo filter's size, buckets, sub-filters, items and parameters",
        complexity: c"O(1)",
        tips: DONT_CACHE,
        args: KEY,
        redisbloom8: Some(Declared::new(2, c"readonly fast", c"cuckoo read fast", RO).dont_cache()),
        ..ROW
    },
    Command {
        name: c"cf.debug",
        acl: c"cuckoo read",
        handler: entry!(commands::debug),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns a cuckoo filter's parameters and counters on one line",
        complexity: c"O(1)",
        tips: DONT_CACHE,
        args: KEY,
        redisbloom8: Some(Declared::new(2, c"readonly fast", c"cuckoo read", RO).dont_cache()),
        ..ROW
    },
    Command {
        name: c"cf.scandump",
        acl: c"cuckoo read",
        handler: entry!(commands::scandump),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the next chunk of a cuckoo filter's dump",
        complexity: c"O(c), c the chunk size",
        tips: DONT_CACHE,
        args: SCANDUMP,
        redisbloom8: Some(Declared::new(3, c"readonly fast", c"cuckoo read", RO).dont_cache()),
        ..ROW
    },
    Command {
        name: c"cf.loadchunk",
        acl: c"cuckoo write",
        handler: entry!(commands::loadchunk),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Restores a cuckoo filter from chunks returned by CF.SCANDUMP",
        complexity: c"O(c), c the chunk size",
        args: LOADCHUNK,
        redisbloom8: Some(Declared::new(4, c"write deny-oom", c"cuckoo write", RW_UPDATE)),
        ..ROW
    },
];
