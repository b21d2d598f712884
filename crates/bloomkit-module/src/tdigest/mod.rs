//! `TDIGEST.*`: RedisBloom's t-digest, type `TDIS-TYPE`.

pub mod commands;
pub mod data_type;
mod stats;

use std::ffi::CStr;

use redis_module::raw;

use crate::command::docs::{Arg, KEY};
use crate::command::{add_acl_category, entry, Command, Family, DONT_CACHE, RO, RW_INSERT, RW_UPDATE};
use crate::ffi::api;

pub const FAMILY: Family = Family { commands: COMMANDS, register, info: Some(info) };

/// The data type and the `tdigest` ACL category (RedisBloom 8's).
fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    data_type::register(ctx)?;
    add_acl_category(ctx, c"tdigest")
}

/// `INFO bf`'s `tdigest` section: the t-digests' counters.
fn info(ctx: *mut raw::RedisModuleInfoCtx) {
    let fields: [(&CStr, u64); 6] = [
        (c"tdigest_digests", stats::get(&stats::DIGESTS)),
        (c"tdigest_bytes", stats::get(&stats::BYTES)),
        (c"tdigest_observations_added", stats::get(&stats::OBSERVATIONS_ADDED)),
        (c"tdigest_merges", stats::get(&stats::MERGES)),
        (c"tdigest_queries", stats::get(&stats::QUERIES)),
        (c"tdigest_compressions_replicated", stats::get(&stats::COMPRESSIONS_REPLICATED)),
    ];
    // SAFETY: valid info context; NUL-terminated names.
    unsafe {
        api!(RedisModule_InfoAddSection)(ctx, c"tdigest".as_ptr());
        for (name, value) in fields {
            api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), value);
        }
    }
}

const KEY_VALUES: &[Arg] = &[Arg::key(c"key"), Arg::double(c"value").multiple()];

// `since` is RedisBloom's: 2.4.0 for the first commands, 2.4.2 for
// RANK/REVRANK/BYRANK/BYREVRANK. Flags are 2.8.2's (none is `fast`);
// the ACL categories are RedisBloom 8's.
const COMMANDS: &[Command] = &[
    Command {
        name: c"tdigest.create",
        acl: c"tdigest write",
        handler: entry!(commands::create),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates an empty t-digest with the given compression (default 100)",
        complexity: c"O(1)",
        since: c"2.4.0",
        tips: None,
        args: &[Arg::key(c"key"), Arg::integer(c"compression").token(c"COMPRESSION").optional()],
    },
    Command {
        name: c"tdigest.reset",
        acl: c"tdigest write",
        handler: entry!(commands::reset),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Empties a t-digest, keeping its compression",
        complexity: c"O(1)",
        since: c"2.4.0",
        tips: None,
        args: KEY,
    },
    Command {
        name: c"tdigest.add",
        acl: c"tdigest write",
        handler: entry!(commands::add),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Adds observations (finite numbers) to a t-digest",
        complexity: c"O(n) for n values, plus a compression when the buffer fills",
        since: c"2.4.0",
        tips: None,
        args: KEY_VALUES,
    },
    Command {
        name: c"tdigest.merge",
        acl: c"tdigest write",
        handler: entry!(commands::merge),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Replaces the destination with a t-digest of the sources' observations (and its own, unless OVERRIDE)",
        complexity: c"O(k * c), k the number of sources, c their capacity",
        since: c"2.4.0",
        tips: None,
        args: &[
            Arg::key(c"destination-key"),
            Arg::integer(c"numkeys"),
            Arg::key(c"source-key").multiple(),
            Arg::integer(c"compression").token(c"COMPRESSION").optional(),
            Arg::word(c"override", c"OVERRIDE").optional(),
        ],
    },
    Command {
        name: c"tdigest.min",
        acl: c"tdigest read",
        handler: entry!(commands::min),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the smallest observation, or nan for an empty t-digest",
        complexity: c"O(1)",
        since: c"2.4.0",
        tips: None,
        args: KEY,
    },
    Command {
        name: c"tdigest.max",
        acl: c"tdigest read",
        handler: entry!(commands::max),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the largest observation, or nan for an empty t-digest",
        complexity: c"O(1)",
        since: c"2.4.0",
        tips: None,
        args: KEY,
    },
    Command {
        name: c"tdigest.quantile",
        acl: c"tdigest read",
        handler: entry!(commands::quantile),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates the value at each given quantile",
        complexity: c"O(n + c), n the quantiles, c the capacity",
        since: c"2.4.0",
        tips: None,
        args: &[Arg::key(c"key"), Arg::double(c"quantile").multiple()],
    },
    Command {
        name: c"tdigest.cdf",
        acl: c"tdigest read",
        handler: entry!(commands::cdf),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates, for each value, the fraction of observations below it (counting half of those equal)",
        complexity: c"O(n * c), n the values, c the capacity",
        since: c"2.4.0",
        tips: None,
        args: KEY_VALUES,
    },
    Command {
        name: c"tdigest.trimmed_mean",
        acl: c"tdigest read",
        handler: entry!(commands::trimmed_mean),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates the mean of the observations between two quantiles",
        complexity: c"O(c), c the capacity",
        since: c"2.4.0",
        tips: None,
        args: &[Arg::key(c"key"), Arg::double(c"low_cut_quantile"), Arg::double(c"high_cut_quantile")],
    },
    Command {
        name: c"tdigest.rank",
        acl: c"tdigest read",
        handler: entry!(commands::rank),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates, for each value, how many observations lie below it (counting half of those equal)",
        complexity: c"O(n * c), n the values, c the capacity",
        since: c"2.4.2",
        tips: None,
        args: KEY_VALUES,
    },
    Command {
        name: c"tdigest.revrank",
        acl: c"tdigest read",
        handler: entry!(commands::revrank),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates, for each value, how many observations lie above it (counting half of those equal)",
        complexity: c"O(n * c), n the values, c the capacity",
        since: c"2.4.2",
        tips: None,
        args: KEY_VALUES,
    },
    Command {
        name: c"tdigest.byrank",
        acl: c"tdigest read",
        handler: entry!(commands::byrank),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates the value of the observation at each rank, from the smallest",
        complexity: c"O(n * c), n the ranks, c the capacity",
        since: c"2.4.2",
        tips: None,
        args: &[Arg::key(c"key"), Arg::integer(c"rank").multiple()],
    },
    Command {
        name: c"tdigest.byrevrank",
        acl: c"tdigest read",
        handler: entry!(commands::byrevrank),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Estimates the value of the observation at each rank, from the largest",
        complexity: c"O(n * c), n the ranks, c the capacity",
        since: c"2.4.2",
        tips: None,
        args: &[Arg::key(c"key"), Arg::integer(c"reverse_rank").multiple()],
    },
    Command {
        name: c"tdigest.info",
        acl: c"tdigest read",
        handler: entry!(commands::info),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns a t-digest's compression, capacity, node and weight counts, compressions and memory",
        complexity: c"O(1)",
        since: c"2.4.0",
        tips: DONT_CACHE,
        args: KEY,
    },
];
