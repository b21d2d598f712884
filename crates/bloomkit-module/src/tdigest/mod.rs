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
        summary: c"Allocates memory and initializes a new t-digest sketch",
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
        summary: c"Resets a t-digest sketch: empties the sketch and re-initializes it",
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
        summary: c"Adds one or more observations to a t-digest sketch",
        complexity: c"O(N), where N is the number of samples to add",
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
        summary: c"Merges multiple t-digest sketches into a single sketch",
        complexity: c"O(N*K), where N is the number of centroids and K being the number of input sketches",
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
        summary: c"Returns the minimum observation value from a t-digest sketch",
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
        summary: c"Returns the maximum observation value from a t-digest sketch",
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
        summary: c"Returns, for each input fraction, an estimation of the value (floating point) that is smaller than the given fraction of observations",
        complexity: c"O(N) where N is the number of quantiles specified",
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
        summary: c"Returns, for each input value, an estimation of the fraction (floating-point) of (observations smaller than the given value + half the observations equal to the given value)",
        complexity: c"O(N) where N is the number of values specified",
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
        summary: c"Returns an estimation of the mean value from the sketch, excluding observation values outside the low and high cutoff quantiles",
        complexity: c"O(N) where N is the number of centroids",
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
        summary: c"Returns, for each input value (floating-point), the estimated rank of the value (the number of observations in the sketch that are smaller than the value + half the number of observations that are equal to the value)",
        complexity: c"O(N) where N is the number of values specified",
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
        summary: c"Returns, for each input value (floating-point), the estimated reverse rank of the value (the number of observations in the sketch that are larger than the value + half the number of observations that are equal to the value)",
        complexity: c"O(N) where N is the number of values specified",
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
        summary: c"Returns, for each input rank, an estimation of the value (floating-point) with that rank",
        complexity: c"O(N) where N is the number of ranks specified",
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
        summary: c"Returns, for each input reverse rank, an estimation of the value (floating-point) with that reverse rank",
        complexity: c"O(N) where N is the number of reverse ranks specified",
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
        summary: c"Returns information and statistics about a t-digest sketch",
        complexity: c"O(1)",
        since: c"2.4.0",
        tips: DONT_CACHE,
        args: KEY,
    },
];
