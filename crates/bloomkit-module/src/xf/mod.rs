//! `XF.*`: bloomkit's expandable filter, type `bkit-xflt`: a filter that
//! needs no size guess, growing with its items from a few bytes to any size
//! at a stable false-positive rate, with deletes, counts, merges and
//! add-if-absent (`bloomkit_core::xf`, and its `DESIGN.md`).

pub mod commands;
pub mod counters;
pub mod data_type;
pub mod secret;
pub mod settings;

use std::ffi::CStr;

use crate::command::docs::{Arg, KEY, KEY_ITEM, KEY_ITEMS, LOADCHUNK, SCANDUMP};
use crate::command::{entry, Command, Family, DONT_CACHE, RO, RW_INSERT, RW_UPDATE};

pub const FAMILY: Family = Family {
    settings: &settings::SETTINGS,
    info: Some(info),
    register: data_type::register,
    ..Family::of::<bloomkit_core::xf::XfFilter>(COMMANDS, Some(c"xf"))
};

/// `INFO bf`'s `xf` section: the counters, then the key ring (`secret`):
/// the current secret's id (what `XF.RESERVE ... KEYID` and every format
/// carry; `none` before the first filter) and how many secrets it holds;
/// then the bit instructions lookups run on (`portable`, `popcnt` or
/// `pdep`: the CPU's, or what `BLOOMKIT_XF_KERNEL` asked for) and the
/// vector lanes batches hash in (`one`, `avx2` or `avx512`: the CPU's, or what `BLOOMKIT_SIP_LANES` asked for).
fn info(ctx: *mut redis_module::raw::RedisModuleInfoCtx) {
    counters::COUNTERS.write_info(ctx);
    let (current, held) = secret::summary();
    let id = current.map_or_else(|| String::from("none"), |id| format!("{id:016x}"));
    crate::stats::add_text(ctx, c"xf_secret_id", &id);
    crate::stats::add_field(ctx, c"xf_secrets", held as u64);
    crate::stats::add_text(ctx, c"xf_kernel", bloomkit_core::xf::Kernel::get().name());
    crate::stats::add_text(ctx, c"xf_hash_lanes", bloomkit_core::common::sip4::Lanes::get().name());
}

/// bloomkit's own commands: XF.* came with 0.1.0 (encoding 0), add-if-absent
/// with 0.2.0 (encoding 1).
const SINCE: &CStr = c"0.1.0";
const SINCE_ADDNX: &CStr = c"0.2.0";
const SINCE_KEYRING: &CStr = c"0.3.0";

/// The options `XF.RESERVE` and `XF.INSERT` create a filter with.
const CAPACITY: Arg = Arg::integer(c"capacity").token(c"CAPACITY").optional();
const MAXCAPACITY: Arg = Arg::integer(c"maxcapacity").token(c"MAXCAPACITY").optional();
const SEED: Arg = Arg::string(c"seed").token(c"SEED").optional();

// Single-item commands are `fast`: a write touches one block (and splits
// it at most, a microsecond's work), never the whole filter.
/// What most of the family's rows share (see [`Command::row`]).
const ROW: Command = Command::row(SINCE);

const COMMANDS: &[Command] = &[
    Command {
        name: c"xf.reserve",
        acl: c"xf write",
        handler: entry!(commands::reserve),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates an expandable filter: an error rate it keeps at every size, a first size (a hint), an optional item limit and an optional 128-bit hash seed (32 hex digits)",
        complexity: c"O(n), n the capacity's blocks",
        args: &[Arg::key(c"key"), Arg::double(c"error_rate"), CAPACITY, MAXCAPACITY, SEED],
        ..ROW
    },
    Command {
        name: c"xf.add",
        acl: c"xf write fast",
        handler: entry!(commands::add),
        flags: c"write deny-oom fast",
        key_flags: RW_UPDATE,
        summary: c"Adds an occurrence of an item; 1 if it was not in the filter, 0 if it probably was",
        complexity: c"O(1)",
        args: KEY_ITEM,
        ..ROW
    },
    Command {
        name: c"xf.madd",
        acl: c"xf write",
        handler: entry!(commands::madd),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Adds an occurrence of each item; per item 1 if it was not in the filter",
        complexity: c"O(n), n the number of items",
        args: KEY_ITEMS,
        ..ROW
    },
    Command {
        name: c"xf.addnx",
        acl: c"xf write fast",
        handler: entry!(commands::addnx),
        flags: c"write deny-oom fast",
        key_flags: RW_UPDATE,
        summary: c"Adds an item only when it is not probably in the filter; 1 if added, 0 if it was (nothing stored)",
        complexity: c"O(1)",
        since: SINCE_ADDNX,
        args: KEY_ITEM,
        ..ROW
    },
    Command {
        name: c"xf.maddnx",
        acl: c"xf write",
        handler: entry!(commands::maddnx),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Adds each item only when it is not probably in the filter; per item 1 if added, 0 if it was",
        complexity: c"O(n), n the number of items",
        since: SINCE_ADDNX,
        args: KEY_ITEMS,
        ..ROW
    },
    Command {
        name: c"xf.insert",
        acl: c"xf write",
        handler: entry!(commands::insert),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Adds items, creating the filter with the options given unless NOCREATE; with NX only the items not probably in",
        complexity: c"O(n), n the number of items",
        args: &[
            Arg::key(c"key"),
            Arg::double(c"error").token(c"ERROR").optional(),
            CAPACITY,
            MAXCAPACITY,
            Arg::word(c"nocreate", c"NOCREATE").optional(),
            Arg::word(c"nx", c"NX").optional(),
            Arg::word(c"items", c"ITEMS"),
            Arg::string(c"item").multiple(),
        ],
        ..ROW
    },
    Command {
        name: c"xf.exists",
        acl: c"xf read fast",
        handler: entry!(commands::exists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"1 if the item is probably in the filter, 0 if it surely is not",
        complexity: c"O(1)",
        args: KEY_ITEM,
        ..ROW
    },
    Command {
        name: c"xf.mexists",
        acl: c"xf read",
        handler: entry!(commands::mexists),
        flags: c"readonly",
        key_flags: RO,
        summary: c"For each item, 1 if it is probably in the filter, 0 if it surely is not",
        complexity: c"O(n), n the number of items",
        args: KEY_ITEMS,
        ..ROW
    },
    Command {
        name: c"xf.del",
        acl: c"xf write fast",
        handler: entry!(commands::del),
        flags: c"write fast",
        key_flags: RW_UPDATE,
        summary: c"Removes one occurrence of an item; 1 if one was removed",
        complexity: c"O(1)",
        args: KEY_ITEM,
        ..ROW
    },
    Command {
        name: c"xf.count",
        acl: c"xf read fast",
        handler: entry!(commands::count),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"How many times an item was added and not deleted (never below the true count)",
        complexity: c"O(1)",
        args: KEY_ITEM,
        ..ROW
    },
    Command {
        name: c"xf.card",
        acl: c"xf read fast",
        handler: entry!(commands::card),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"The number of items added and not deleted",
        complexity: c"O(1)",
        args: KEY,
        ..ROW
    },
    Command {
        name: c"xf.merge",
        acl: c"xf write",
        handler: entry!(commands::merge),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Adds every item of the sources to the destination (a missing destination starts as a copy of the first); refused if the result would guarantee a rate above the destination's, unless RAISERATE (which raises the destination's rate to one it can keep growing at)",
        complexity: c"O(n), n the entries of the filters",
        args: &[
            Arg::key(c"destination"),
            Arg::integer(c"numkeys"),
            Arg::key(c"source").multiple(),
            Arg::word(c"raiserate", c"RAISERATE").optional(),
        ],
        ..ROW
    },
    Command {
        name: c"xf.info",
        // Not `fast`: the largest block and the levels are a walk of every
        // block's header (tens of ms at 100M items).
        acl: c"xf read",
        handler: entry!(commands::info),
        flags: c"readonly",
        key_flags: RO,
        summary: c"The filter's parameters, items, size, blocks, fingerprint length, hashing and the rate it guarantees now",
        complexity: c"O(n), n the filter's blocks",
        tips: DONT_CACHE,
        args: KEY,
        ..ROW
    },
    Command {
        name: c"xf.scandump",
        acl: c"xf read",
        handler: entry!(commands::scandump),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns a chunk of the filter: iterator 0 gives the header, then its blocks, then [0, \"\"]",
        complexity: c"O(n), n the size of the chunk",
        tips: DONT_CACHE,
        args: SCANDUMP,
        ..ROW
    },
    Command {
        name: c"xf.loadchunk",
        acl: c"xf write",
        handler: entry!(commands::loadchunk),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Restores a filter from its XF.SCANDUMP chunks, in order (iterator 1, the header, creates it)",
        complexity: c"O(n), n the size of the chunk",
        args: LOADCHUNK,
        ..ROW
    },
    Command {
        name: c"xf.keyring",
        acl: c"xf write",
        handler: entry!(commands::keyring),
        // Only the server sends it (replication, the AOF), with secrets in
        // it: never shown to MONITOR or kept in the slow log.
        flags: c"write no-monitor no-slowlog",
        key_flags: RO,
        summary: c"Replication and the AOF only: the primary's key ring, ahead of the filter (the key) that needs it; refused from clients",
        complexity: c"O(1)",
        since: SINCE_KEYRING,
        args: KEYRING,
        ..ROW
    },
];

/// `key ring`: `XF.KEYRING`.
const KEYRING: &[Arg] = &[Arg::key(c"key"), Arg::string(c"ring")];
