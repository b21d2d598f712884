//! valkey-bloom's filters, type `bloomfltr`: loaded from its RDB files,
//! DUMP payloads and AOF (`BF.LOAD`), answering `BF.*` as valkey-bloom
//! does, saved back in its format. bloomkit never creates one: new filters
//! are RedisBloom's (`bf`).

pub mod commands;
pub mod data_type;

use crate::command::docs::Arg;
use crate::command::{entry, Command, Family, RW_INSERT};

pub const FAMILY: Family = Family { commands: COMMANDS, register: data_type::register, info: None };

const COMMANDS: &[Command] = &[Command {
    name: c"bf.load",
    acl: c"bloom write",
    handler: entry!(commands::load),
    flags: c"write deny-oom",
    key_flags: RW_INSERT,
    summary: c"Creates a valkey-bloom filter from the blob its AOF rewrite wrote",
    complexity: c"O(n), n the blob's size",
    // valkey-bloom's, whose first release has it, with its argument names.
    since: c"1.0.0",
    tips: None,
    args: &[Arg::key(c"key"), Arg::string(c"dump")],
}];
