//! RedisBloom's t-digest, the merging digest of t-digest-c (`TDIGEST.*`, `TDIS-TYPE`).

use crate::command::{Command, Family};

pub const FAMILY: Family = Family { commands: COMMANDS, register, info: None };

fn register(_ctx: *mut redis_module::raw::RedisModuleCtx) -> Result<(), String> {
    Ok(())
}

const COMMANDS: &[Command] = &[];
