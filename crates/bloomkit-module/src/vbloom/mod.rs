//! valkey-bloom's filters, type `bloomfltr`: loaded from its RDB files,
//! DUMP payloads and AOF (`BF.LOAD`), answering `BF.*` as valkey-bloom
//! does, saved back in its format. Under `bf.compat valkey-bloom` new
//! Bloom filters are of this type, and `BF.*` is registered as
//! valkey-bloom registers it ([`dialect`]).

pub mod commands;
pub mod counters;
pub mod data_type;
pub mod settings;

use std::ffi::CStr;

use bloomkit_core::common::compat::Compat;

use crate::command::docs::Arg;
use crate::command::{entry, Command, Dialect, Family, RW_INSERT};

pub const FAMILY: Family = Family {
    info: Some(counters::info),
    dialect,
    settings: &settings::SETTINGS,
    ..Family::of::<bloomkit_core::vbloom::Object>(COMMANDS, None)
};

/// valkey-bloom 1.0's nine commands as it registers them: upper-case names
/// (what `COMMAND INFO`, `INFO commandstats` and the arity error show),
/// `fast` on all but `BF.LOAD`, ACL category `bloom`.
const DIALECT: [Dialect; 9] = {
    const fn write(name: &'static CStr) -> Dialect {
        Dialect { name, flags: c"write fast deny-oom", acl: c"fast write bloom" }
    }
    const fn read(name: &'static CStr) -> Dialect {
        Dialect { name, flags: c"readonly fast", acl: c"fast read bloom" }
    }
    [
        write(c"BF.ADD"),
        write(c"BF.MADD"),
        read(c"BF.EXISTS"),
        read(c"BF.MEXISTS"),
        read(c"BF.CARD"),
        write(c"BF.RESERVE"),
        read(c"BF.INFO"),
        write(c"BF.INSERT"),
        Dialect { name: c"BF.LOAD", flags: c"write deny-oom", acl: c"write bloom" },
    ]
};

/// How a command is registered under `compat`: valkey-bloom's way for its
/// own commands under `valkey-bloom`, else bloomkit's (`None`).
pub fn dialect(compat: Compat, name: &CStr) -> Option<&'static Dialect> {
    if compat != Compat::ValkeyBloom {
        return None;
    }
    DIALECT.iter().find(|d| d.name.to_bytes().eq_ignore_ascii_case(name.to_bytes()))
}

const COMMANDS: &[Command] = &[Command {
    name: c"bf.load",
    acl: c"bloom write",
    handler: entry!(commands::load),
    flags: c"write deny-oom",
    key_flags: RW_INSERT,
    summary: c"Creates a valkey-bloom filter from the blob its AOF rewrite wrote",
    complexity: c"O(n), n the blob's size",
    // valkey-bloom's, whose first release has it, with its argument names.
    args: &[Arg::key(c"key"), Arg::string(c"dump")],
    ..Command::row(c"1.0.0")
}];
