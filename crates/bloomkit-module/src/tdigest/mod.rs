//! `TDIGEST.*`: RedisBloom's t-digest, type `TDIS-TYPE`.

pub mod commands;
pub mod counters;
pub mod data_type;

use crate::command::docs::{Arg, KEY};
use crate::command::{entry, Command, Family, DONT_CACHE, RO, RW_INSERT, RW_UPDATE};

pub const FAMILY: Family = Family::of::<bloomkit_core::tdigest::TDigest>(COMMANDS, Some(c"tdigest"));

const KEY_VALUES: &[Arg] = &[Arg::key(c"key"), Arg::double(c"value").multiple()];

use crate::command::Declared;

// `since` is 2.4.0 for every command, as RedisBloom 8's command info and
// RedisBloom's command docs give it (RANK/REVRANK/BYRANK/BYREVRANK too).
// Flags are 2.8.2's (none is `fast`); RedisBloom 8's ACL categories add
// `fast` on most readers (`redisbloom8`).
/// What most of the family's rows share (see [`Command::row`]).
const ROW: Command = Command::row(c"2.4.0");

const COMMANDS: &[Command] = &[
    Command {
        name: c"tdigest.create",
        acl: c"tdigest write",
        handler: entry!(commands::create),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates an empty t-digest with the given compression (default 100)",
        complexity: c"O(1)",
        args: &[Arg::key(c"key"), Arg::integer(c"compression").token(c"COMPRESSION").optional()],
        redisbloom8: Some(Declared::new(-2, c"write deny-oom", c"tdigest write fast", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"tdigest.reset",
        acl: c"tdigest write",
        handler: entry!(commands::reset),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Empties a t-digest, keeping its compression",
        complexity: c"O(1)",
        args: KEY,
        redisbloom8: Some(Declared::new(2, c"write deny-oom", c"tdigest write fast", RW_UPDATE)),
        ..ROW
    },
    Command {
        name: c"tdigest.add",
        acl: c"tdigest write",
        handler: entry!(commands::add),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Adds observations (finite numbers) to a t-digest",
        complexity: c"O(n) for n values, plus a compression when the buffer fills",
        args: KEY_VALUES,
        redisbloom8: Some(Declared::new(-3, c"write deny-oom", c"tdigest write", RW_UPDATE)),
        ..ROW
    },
    Command {
        name: c"tdigest.merge",
        acl: c"tdigest write",
        handler: entry!(commands::merge),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Replaces the destination with a t-digest of the sources' observations (and its own, unless OVERRIDE)",
        complexity: c"O(k * c), k the number of sources, c their capacity",
        args: &[
            Arg::key(c"destination-key"),
            Arg::integer(c"numkeys"),
            Arg::key(c"source-key").multiple(),
            Arg::integer(c"compression").token(c"COMPRESSION").optional(),
            Arg::word(c"override", c"OVERRIDE").optional(),
        ],
        redisbloom8: Some(Declared::new(-4, c"write deny-oom", c"tdigest write", RW_INSERT)),
        ..ROW
    },
    Command {
        name: c"tdigest.min",
        acl: c"tdigest read",
        handler: entry!(commands::min),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the smallest observation, or nan for an empty t-digest",
        complexity: c"O(1)",
        args: KEY,
        redisbloom8: Some(Declared::new(2, c"readonly", c"tdigest read fast", RO)),
        ..ROW
    },
    Command {
        name: c"tdigest.max",
        acl: c"tdigest read",
        handler: entry!(commands::max),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the largest observation, or nan for an empty t-digest",
        complexity: c"O(1)",
        args: KEY,
        redisbloom8: Some(Declared::new(2, c"readonly", c"tdigest read fast", RO)),
        ..ROW
    },
    Command {
        name: c"tdigest.quantile",
        acl: c"tdigest read",
        handler: entry!(commands::quantile),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates the value at each given quantile",
        complexity: c"O(n + c), n the quantiles, c the capacity",
        args: &[Arg::key(c"key"), Arg::double(c"quantile").multiple()],
        redisbloom8: Some(Declared::new(-3, c"readonly", c"tdigest read fast", RO)),
        ..ROW
    },
    Command {
        name: c"tdigest.cdf",
        acl: c"tdigest read",
        handler: entry!(commands::cdf),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates, for each value, the fraction of observations below it (counting half of those equal)",
        complexity: c"O(n * c), n the values, c the capacity",
        args: KEY_VALUES,
        redisbloom8: Some(Declared::new(-3, c"readonly", c"tdigest read fast", RO)),
        ..ROW
    },
    Command {
        name: c"tdigest.trimmed_mean",
        acl: c"tdigest read",
        handler: entry!(commands::trimmed_mean),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates the mean of the observations between two quantiles",
        complexity: c"O(c), c the capacity",
        args: &[Arg::key(c"key"), Arg::double(c"low_cut_quantile"), Arg::double(c"high_cut_quantile")],
        redisbloom8: Some(Declared::new(4, c"readonly", c"tdigest read", RO)),
        ..ROW
    },
    Command {
        name: c"tdigest.rank",
        acl: c"tdigest read",
        handler: entry!(commands::rank),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates, for each value, how many observations lie below it (counting half of those equal)",
        complexity: c"O(n * c), n the values, c the capacity",
        args: KEY_VALUES,
        redisbloom8: Some(Declared::new(-3, c"readonly", c"tdigest read fast", RO)),
        ..ROW
    },
    Command {
        name: c"tdigest.revrank",
        acl: c"tdigest read",
        handler: entry!(commands::revrank),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates, for each value, how many observations lie above it (counting half of those equal)",
        complexity: c"O(n * c), n the values, c the capacity",
        args: KEY_VALUES,
        redisbloom8: Some(Declared::new(-3, c"readonly", c"tdigest read fast", RO)),
        ..ROW
    },
    Command {
        name: c"tdigest.byrank",
        acl: c"tdigest read",
        handler: entry!(commands::byrank),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates the value of the observation at each rank, from the smallest",
        complexity: c"O(n * c), n the ranks, c the capacity",
        args: &[Arg::key(c"key"), Arg::integer(c"rank").multiple()],
        redisbloom8: Some(Declared::new(-3, c"readonly", c"tdigest read fast", RO)),
        ..ROW
    },
    Command {
        name: c"tdigest.byrevrank",
        acl: c"tdigest read",
        handler: entry!(commands::byrevrank),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates the value of the observation at each rank, from the largest",
        complexity: c"O(n * c), n the ranks, c the capacity",
        args: &[Arg::key(c"key"), Arg::integer(c"reverse_rank").multiple()],
        redisbloom8: Some(Declared::new(-3, c"readonly", c"tdigest read fast", RO)),
        ..ROW
    },
    Command {
        name: c"tdigest.info",
        acl: c"tdigest read",
        handler: entry!(commands::info),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns a t-digest's compression, capacity, node and weight counts, compressions and memory",
        complexity: c"O(1)",
        tips: DONT_CACHE,
        args: KEY,
        redisbloom8: Some(Declared::new(2, c"readonly", c"tdigest read fast", RO).dont_cache()),
        ..ROW
    },
];
