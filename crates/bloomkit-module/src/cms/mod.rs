//! `CMS.*`: RedisBloom's Count-Min Sketch, type `CMSk-TYPE`.

pub mod commands;
pub mod counters;
pub mod data_type;

use crate::command::docs::Arg;
use crate::command::{entry, Command, Family, DONT_CACHE, RO, RW_INSERT, RW_UPDATE};

/// Whose Count-Min Sketch `CMS.*` answers as, and the encoding version its
/// values are written at: Redis 8.12's at that level, else RedisBloom 2.8's.
pub fn rules() -> bloomkit_core::cms::Rules {
    if crate::config::level_8_12() {
        bloomkit_core::cms::Rules::CellSized
    } else {
        bloomkit_core::cms::Rules::Classic
    }
}

pub const FAMILY: Family = Family::of::<bloomkit_core::cms::CountMinSketch>(COMMANDS, Some(c"cms"));

use crate::command::Declared;

// Flags are RedisBloom 2.8.2's (`write deny-oom` for the writers,
// `readonly` for the readers, none `fast`); `since` is RedisBloom's 2.0.0
// for every CMS command; the ACL categories are RedisBloom 8's `cms` plus
// the server's read/write ones.
/// What most of the family's rows share (see [`Command::row`]).
const ROW: Command = Command::row(c"2.0.0");

const COMMANDS: &[Command] = &[
    Command {
        name: c"cms.initbydim",
        acl: c"cms write",
        handler: entry!(commands::initbydim),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates a Count-Min Sketch of the given width and depth",
        complexity: c"O(1)",
        args: &[Arg::key(c"key"), Arg::integer(c"width"), Arg::integer(c"depth")],
        redisbloom8: Some(
            Declared::new(4, c"write deny-oom", c"cms write fast", RW_INSERT).at_8_12(INITBYDIM_8_12),
        ),
        ..ROW
    },
    Command {
        name: c"cms.initbyprob",
        acl: c"cms write",
        handler: entry!(commands::initbyprob),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates a Count-Min Sketch sized for an error rate and a probability of exceeding it",
        complexity: c"O(1)",
        args: &[Arg::key(c"key"), Arg::double(c"error"), Arg::double(c"probability")],
        redisbloom8: Some(
            Declared::new(4, c"write deny-oom", c"cms write fast", RW_INSERT).at_8_12(INITBYPROB_8_12),
        ),
        ..ROW
    },
    Command {
        name: c"cms.incrby",
        acl: c"cms write",
        handler: entry!(commands::incrby),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Increases the counts of one or more items",
        complexity: c"O(n * d), n the number of items, d the depth",
        args: &[Arg::key(c"key"), Arg::block(c"items", INCREMENT).multiple()],
        redisbloom8: Some(Declared::new(-4, c"write deny-oom", c"cms write", RW_UPDATE)),
        ..ROW
    },
    Command {
        name: c"cms.query",
        acl: c"cms read",
        handler: entry!(commands::query),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the estimated counts of one or more items",
        complexity: c"O(n * d), n the number of items, d the depth",
        args: &[Arg::key(c"key"), Arg::string(c"item").multiple()],
        redisbloom8: Some(Declared::new(-3, c"readonly", c"cms read", RO)),
        ..ROW
    },
    Command {
        name: c"cms.merge",
        acl: c"cms write",
        handler: entry!(commands::merge),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Replaces a sketch by the weighted sum of sketches of the same dimensions",
        complexity: c"O(n * w * d), n the number of sources, w the width, d the depth",
        args: &[
            Arg::key(c"destination"),
            Arg::integer(c"numkeys"),
            Arg::key(c"source").multiple(),
            Arg::integer(c"weight").token(c"WEIGHTS").multiple().optional(),
        ],
        redisbloom8: Some(Declared::new(-4, c"write deny-oom", c"cms write", RW_UPDATE)),
        ..ROW
    },
    Command {
        name: c"cms.info",
        acl: c"cms read",
        handler: entry!(commands::info),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns a sketch's width, depth and total count",
        complexity: c"O(1)",
        tips: DONT_CACHE,
        args: &[Arg::key(c"key")],
        redisbloom8: Some(Declared::new(2, c"readonly", c"cms read fast", RO).dont_cache()),
        ..ROW
    },
];

/// `item increment`, one pair of `CMS.INCRBY`.
const INCREMENT: &[Arg] = &[Arg::string(c"item"), Arg::integer(c"increment")];

/// `CMS.INITBYDIM` as Redis 8.12 takes it: `key width depth [CELL_SIZE n]`.
const INITBYDIM_8_12: &[Arg] = &[
    Arg::key(c"key"),
    Arg::integer(c"width"),
    Arg::integer(c"depth"),
    Arg::integer(c"cell_size").token(c"CELL_SIZE").optional(),
];

/// `CMS.INITBYPROB` as Redis 8.12 takes it: `key error probability [CELL_SIZE n]`.
const INITBYPROB_8_12: &[Arg] = &[
    Arg::key(c"key"),
    Arg::double(c"error"),
    Arg::double(c"probability"),
    Arg::integer(c"cell_size").token(c"CELL_SIZE").optional(),
];
