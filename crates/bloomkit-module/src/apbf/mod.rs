//! `APBF.*`: sliding-window filters, type `bkit-apbf`.

pub mod commands;
pub mod counters;
pub mod data_type;
pub mod settings;

use crate::command::docs::{Arg, KEY, KEY_ITEM, KEY_ITEMS, LOADCHUNK, SCANDUMP};
use crate::command::{entry, Command, Family, DONT_CACHE, RO, RW_INSERT, RW_UPDATE};

pub const FAMILY: Family =
    Family { settings: &settings::SETTINGS, ..Family::of::<bloomkit_core::apbf::Apbf>(COMMANDS, None) };

/// bloomkit's own commands, all in its first release. k is the number of
/// hash functions, l the number of slices a lookup may walk past.
const SINCE: &std::ffi::CStr = c"0.1.0";

/// What most of the family's rows share (see [`Command::row`]).
const ROW: Command = Command::row(SINCE);

const COMMANDS: &[Command] = &[
    Command {
        name: c"apbf.reserve",
        acl: c"bloom write",
        handler: entry!(commands::reserve),
        flags: c"write deny-oom",
        key_flags: RW_INSERT,
        summary: c"Creates a sliding-window filter: COUNT (the last capacity items) or TIME seconds",
        complexity: c"O(1)",
        args: &[
            Arg::key(c"key"),
            Arg::double(c"error_rate"),
            Arg::integer(c"capacity"),
            Arg::one_of(c"window", &[Arg::word(c"count", c"COUNT"), Arg::integer(c"seconds").token(c"TIME")]),
        ],
        ..ROW
    },
    Command {
        name: c"apbf.add",
        acl: c"bloom write fast",
        handler: entry!(commands::add),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Adds an item; 1 if it was not seen within the window",
        complexity: c"O(k + l)",
        args: KEY_ITEM,
        ..ROW
    },
    Command {
        name: c"apbf.madd",
        acl: c"bloom write",
        handler: entry!(commands::madd),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Adds items; one reply per item",
        complexity: c"O((k + l) * n), n the number of items",
        args: KEY_ITEMS,
        ..ROW
    },
    Command {
        name: c"apbf.exists",
        acl: c"bloom read fast",
        handler: entry!(commands::exists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks whether an item was seen within the window",
        complexity: c"O(k + l)",
        args: KEY_ITEM,
        ..ROW
    },
    Command {
        name: c"apbf.mexists",
        acl: c"bloom read",
        handler: entry!(commands::mexists),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Checks items; one reply per item",
        complexity: c"O((k + l) * n), n the number of items",
        args: KEY_ITEMS,
        ..ROW
    },
    Command {
        name: c"apbf.info",
        acl: c"bloom read fast",
        handler: entry!(commands::info),
        flags: c"readonly fast",
        key_flags: RO,
        summary: c"Returns a sliding-window filter's parameters and state",
        complexity: c"O(1)",
        tips: DONT_CACHE,
        args: KEY,
        ..ROW
    },
    Command {
        name: c"apbf.scandump",
        acl: c"bloom read",
        handler: entry!(commands::scandump),
        flags: c"readonly",
        key_flags: RO,
        summary: c"Returns the next chunk of a sliding-window filter's state",
        complexity: c"O(c), c the chunk size",
        tips: DONT_CACHE,
        args: SCANDUMP,
        ..ROW
    },
    Command {
        name: c"apbf.advance",
        acl: c"bloom write",
        handler: entry!(commands::advance),
        flags: c"write",
        key_flags: RW_UPDATE,
        summary: c"Ends generations as the primary decided (replication and AOF)",
        complexity: c"O(n) slices cleared",
        args: &[
            Arg::key(c"key"),
            Arg::integer(c"generations"),
            Arg::integer(c"started_ms"),
            // Left out by the first format, which wrote at `started_ms`.
            Arg::integer(c"now_ms").optional(),
        ],
        ..ROW
    },
    Command {
        name: c"apbf.loadchunk",
        acl: c"bloom write",
        handler: entry!(commands::loadchunk),
        flags: c"write deny-oom",
        key_flags: RW_UPDATE,
        summary: c"Restores a sliding-window filter's state (replication and AOF rewrite)",
        complexity: c"O(c), c the chunk size",
        args: LOADCHUNK,
        ..ROW
    },
];
