//! `TOPK.*`: RedisBloom's Top-K (a HeavyKeeper), type `TopK-TYPE`.

pub mod commands;
pub mod counters;
pub mod data_type;

use crate::command::docs::{Arg, KEY, KEY_ITEMS};
use crate::command::{entry, Command, Family, DONT_CACHE, RO, RW_INSERT, RW_UPDATE};

pub const FAMILY: Family = Family::of::<bloomkit_core::topk::TopK>(COMMANDS, Some(c"topk"));

use crate::command::Declared;

// Flags are RedisBloom's (`write deny-oom` for writers, `readonly` for
// readers, none `fast`), except TOPK.COUNT: 2.8.2 registers it `write`, so
// replicas refuse it; it is `readonly` here, as in RedisBloom 8.
// `since` is RedisBloom's: 2.0.0, the release that added Top-K.
/// What most of the family's rows share (see [`Command::row`]).
const ROW: Command = Command::row(c"2.0.0");

const COMMANDS: &[Command] = &[
    Command {
        name: c"topk.reserve",
        acl: c"topk write",
        handler: entry!(commands::reserve),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates a Top-K sketch keeping the k heaviest items, with optional width, depth and decay",
        complexity: c"O(1)",
        args: &[Arg::key(c"key"), Arg::integer(c"topk"), Arg::block(c"params", PARAMS).optional()],
        redisbloom8: Some(Declared::new(-3, c"write deny-oom", c"topk write fast", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"topk.add",
        acl: c"topk write",
        handler: entry!(commands::add),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Counts one occurrence of each item; replies the items pushed out of the top k",
        complexity: c"O(n * d), n the number of items, d the depth",
        args: KEY_ITEMS,
        redisbloom8: Some(Declared::new(-3, c"write deny-oom", c"topk write", RW_UPDATE)),
        ..ROW
    },
    Command {
        name: c"topk.incrby",
        acl: c"topk write",
        handler: entry!(commands::incrby),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Counts each item by its increment; replies the items pushed out of the top k",
        complexity:
            c"O(n * d * i), n the number of items, d the depth, i the increment where buckets collide",
        args: &[Arg::key(c"key"), Arg::block(c"item_increment", INCREMENT).multiple()],
        redisbloom8: Some(Declared::new(-4, c"write deny-oom", c"topk write", RW_UPDATE)),
        ..ROW
    },
    Command {
        name: c"topk.query",
        acl: c"topk read",
        handler: entry!(commands::query),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Checks whether items are among the top k",
        complexity: c"O(n * k), n the number of items",
        args: KEY_ITEMS,
        redisbloom8: Some(Declared::new(-3, c"readonly", c"topk read", RO)),
        ..ROW
    },
    Command {
        name: c"topk.count",
        acl: c"topk read",
        handler: entry!(commands::count),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the estimated counts of items (deprecated in RedisBloom's docs)",
        complexity: c"O(n * (d + k)), n the number of items, d the depth",
        args: KEY_ITEMS,
        redisbloom8: Some(Declared::new(-3, c"readonly", c"topk read", RO)),
        ..ROW
    },
    Command {
        name: c"topk.list",
        acl: c"topk read",
        handler: entry!(commands::list),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the top k items, heaviest first, optionally with their counts",
        complexity: c"O(k log k)",
        args: &[Arg::key(c"key"), Arg::word(c"withcount", c"WITHCOUNT").optional()],
        redisbloom8: Some(Declared::new(-2, c"readonly", c"topk read", RO)),
        ..ROW
    },
    Command {
        name: c"topk.info",
        acl: c"topk read",
        handler: entry!(commands::info),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns a Top-K sketch's k, width, depth and decay",
        complexity: c"O(1)",
        tips: DONT_CACHE,
        args: KEY,
        redisbloom8: Some(Declared::new(2, c"readonly", c"topk read fast", RO)),
        ..ROW
    },
];

/// `item increment`, one pair of `TOPK.INCRBY`.
const INCREMENT: &[Arg] = &[Arg::string(c"item"), Arg::integer(c"increment")];

/// `width depth decay`: `TOPK.RESERVE` takes all three or none.
const PARAMS: &[Arg] = &[Arg::integer(c"width"), Arg::integer(c"depth"), Arg::double(c"decay")];
