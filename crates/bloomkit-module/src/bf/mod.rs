//! `BF.*`: RedisBloom's scalable Bloom filter, type `MBbloom--`. A `BF.*`
//! key may also hold a valkey-bloom filter: [`lookup::lookup_bloom`]
//! tells them apart and `commands` hands those to [`crate::vbloom`].

pub mod commands;
pub mod counters;
pub mod data_type;
pub mod lookup;
pub mod settings;

use crate::command::docs::{Arg, KEY, KEY_ITEM, KEY_ITEMS, LOADCHUNK, SCANDUMP};
use crate::command::{entry, Command, Family, DONT_CACHE, RO, RW_INSERT, RW_UPDATE};

pub const FAMILY: Family = Family {
    info: Some(info),
    dialect: crate::vbloom::dialect,
    settings: &settings::SETTINGS,
    ..Family::of::<bloomkit_core::bf::Chain>(COMMANDS, Some(c"bloom"))
};

/// `INFO bf`'s `stats` section: every `BF.*` filter, RedisBloom's and
/// valkey-bloom's (whose own sections count only theirs), then the
/// module-wide fields (`maxmemory_refusals`, `bloomkit_version`), where
/// monitoring has read them since the first release.
fn info(ctx: *mut redis_module::raw::RedisModuleInfoCtx) {
    use crate::stats::{add_field, add_section, BYTES, OBJECTS};
    use crate::vbloom::counters as vb;
    let (bf, vb_c) = (&counters::COUNTERS, &vb::COUNTERS);
    let both = |mine: usize, theirs: usize| bf.get(mine) + vb_c.get(theirs);
    add_section(ctx, c"stats");
    for (name, value) in [
        (c"filters", both(OBJECTS, OBJECTS)),
        (c"bytes", both(BYTES, BYTES)),
        (c"items_added", both(counters::ITEMS_ADDED, vb::ITEMS_ADDED)),
        (c"lookups", bf.get(counters::LOOKUPS)),
        (c"scale_outs", both(counters::SCALE_OUTS, vb::SCALE_OUTS)),
        (c"refused_creations", both(counters::REFUSED, vb::REFUSED)),
    ] {
        add_field(ctx, name, value);
    }
    crate::stats::write_module_fields(ctx);
}

use crate::command::Declared;

// `since` is RedisBloom's: 1.0.0 for every command but BF.CARD (2.4.4), as
// its command docs give them (BF.DEBUG, undocumented there, is 1.0.0 in its
// command info).
/// What most of the family's rows share (see [`Command::row`]).
const ROW: Command = Command::row(c"1.0.0");

const COMMANDS: &[Command] = &[
    Command {
        name: c"bf.reserve",
        acl: c"bloom write",
        handler: entry!(commands::reserve),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates an empty Bloom filter with an error rate and initial capacity",
        complexity: c"O(1)",
        args: &[
            Arg::key(c"key"),
            Arg::double(c"error_rate"),
            Arg::integer(c"capacity"),
            Arg::integer(c"expansion").token(c"EXPANSION").optional(),
            Arg::word(c"nonscaling", c"NONSCALING").optional(),
        ],
        redisbloom8: Some(Declared::new(-4, c"write deny-oom", c"bloom write fast", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"bf.add",
        acl: c"bloom write fast",
        handler: entry!(commands::add),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds an item, creating the filter if needed",
        complexity: c"O(k), k the number of hash functions",
        args: KEY_ITEM,
        redisbloom8: Some(Declared::new(3, c"write deny-oom", c"bloom write", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"bf.madd",
        acl: c"bloom write",
        handler: entry!(commands::madd),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds items, creating the filter if needed",
        complexity: c"O(k * n), k the number of hash functions, n the number of items",
        args: KEY_ITEMS,
        redisbloom8: Some(Declared::new(-3, c"write deny-oom", c"bloom write", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"bf.insert",
        acl: c"bloom write",
        handler: entry!(commands::insert),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Adds items, creating the filter with the given parameters if needed",
        complexity: c"O(k * n), k the number of hash functions, n the number of items",
        args: &[
            Arg::key(c"key"),
            Arg::integer(c"capacity").token(c"CAPACITY").optional(),
            Arg::double(c"error").token(c"ERROR").optional(),
            Arg::integer(c"expansion").token(c"EXPANSION").optional(),
            Arg::word(c"nocreate", c"NOCREATE").optional(),
            Arg::word(c"nonscaling", c"NONSCALING").optional(),
            Arg::word(c"items", c"ITEMS"),
            Arg::string(c"item").multiple(),
        ],
        redisbloom8: Some(Declared::new(-4, c"write deny-oom", c"bloom write", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"bf.exists",
        acl: c"bloom read fast",
        handler: entry!(commands::exists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether an item may have been added",
        complexity: c"O(k), k the number of hash functions",
        args: KEY_ITEM,
        redisbloom8: Some(Declared::new(3, c"readonly fast", c"bloom read", RO)),
        ..ROW
    },
    Command {
        name: c"bf.mexists",
        acl: c"bloom read",
        handler: entry!(commands::mexists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether items may have been added",
        complexity: c"O(k * n), k the number of hash functions, n the number of items",
        args: KEY_ITEMS,
        redisbloom8: Some(Declared::new(-3, c"readonly fast", c"bloom read", RO)),
        ..ROW
    },
    Command {
        name: c"bf.info",
        acl: c"bloom read fast",
        handler: entry!(commands::info),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns a Bloom filter's capacity, size, sub-filters, items and expansion, or one of them",
        complexity: c"O(1)",
        tips: DONT_CACHE,
        args: &[
            Arg::key(c"key"),
            Arg::one_of(
                c"single_value",
                &[
                    Arg::word(c"capacity", c"CAPACITY"),
                    Arg::word(c"size", c"SIZE"),
                    Arg::word(c"filters", c"FILTERS"),
                    Arg::word(c"items", c"ITEMS"),
                    Arg::word(c"expansion", c"EXPANSION"),
                ],
            )
            .optional(),
        ],
        redisbloom8: Some(Declared::new(-2, c"readonly fast", c"bloom read fast", RO).dont_cache()),
        ..ROW
    },
    Command {
        name: c"bf.card",
        acl: c"bloom read fast",
        handler: entry!(commands::card),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns the number of items added to a Bloom filter",
        complexity: c"O(1)",
        since: c"2.4.4",
        args: KEY,
        redisbloom8: Some(Declared::new(2, c"readonly fast", c"bloom read fast", RO)),
        ..ROW
    },
    Command {
        name: c"bf.debug",
        acl: c"bloom read",
        handler: entry!(commands::debug),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the layout of a Bloom filter's sub-filters",
        complexity: c"O(s), s the number of sub-filters",
        tips: DONT_CACHE,
        args: KEY,
        redisbloom8: Some(Declared::new(2, c"readonly fast", c"bloom read", RO).dont_cache()),
        ..ROW
    },
    Command {
        name: c"bf.scandump",
        acl: c"bloom read",
        handler: entry!(commands::scandump),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the next chunk of a Bloom filter's dump",
        complexity: c"O(c), c the chunk size",
        tips: DONT_CACHE,
        args: SCANDUMP,
        redisbloom8: Some(Declared::new(3, c"readonly fast", c"bloom read", RO).dont_cache()),
        ..ROW
    },
    Command {
        name: c"bf.loadchunk",
        acl: c"bloom write",
        handler: entry!(commands::loadchunk),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Restores a Bloom filter from chunks returned by BF.SCANDUMP",
        complexity: c"O(c), c the chunk size",
        args: LOADCHUNK,
        redisbloom8: Some(Declared::new(4, c"write deny-oom", c"bloom write", RW_UPDATE)),
        ..ROW
    },
];
