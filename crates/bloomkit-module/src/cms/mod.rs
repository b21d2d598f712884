//! RedisBloom's Count-Min Sketch (`CMS.*`, `CMSk-TYPE`).

use crate::command::{Command, Family};

pub const FAMILY: Family = Family { commands: COMMANDS, register, info: None };

fn register(_ctx: *mut redis_module::raw::RedisModuleCtx) -> Result<(), String> {
    Ok(())
}

const COMMANDS: &[Command] = &[];
