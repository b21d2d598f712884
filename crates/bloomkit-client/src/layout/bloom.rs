//! The Bloom filter backend's commands (`BF.*`: bloomkit, RedisBloom or
//! valkey-bloom). Writes go through `BF.INSERT` with the capacity and error
//! rate, so the first write creates the filter with the options asked for
//! rather than the server's defaults.

use redis::{cmd, Cmd, Value};

use crate::error::Result;
use crate::options::{Info, Options};
use crate::plan::InfoFields;

pub(super) fn reserve(name: &str, o: &Options) -> Cmd {
    cmd("BF.RESERVE").arg(name).arg(o.error_rate).arg(o.capacity).clone()
}

/// One batch's `BF.INSERT` or `BF.MEXISTS`: one answer per item.
pub(super) fn batch(name: &str, o: &Options, items: &[&[u8]], write: bool) -> Cmd {
    let mut c;
    if write {
        c = cmd("BF.INSERT");
        c.arg(name).arg("CAPACITY").arg(o.capacity).arg("ERROR").arg(o.error_rate).arg("ITEMS");
    } else {
        c = cmd("BF.MEXISTS");
        c.arg(name);
    }
    for item in items {
        c.arg(*item);
    }
    c
}

pub(super) fn info(name: &str) -> Cmd {
    cmd("BF.INFO").arg(name).clone()
}

pub(super) fn read_info(name: &str, reply: Value) -> Result<Info> {
    Ok(InfoFields::read(reply, name)?.bloom_info("module", name))
}

/// `BF.CARD`: the exact count a Bloom filter keeps.
pub(super) fn count(name: &str) -> Cmd {
    cmd("BF.CARD").arg(name).clone()
}
