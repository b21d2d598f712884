//! The sliding-window backend's commands (`APBF.*`, bloomkit only). Unlike
//! `BF.INSERT`, `APBF.MADD` cannot create its filter (a window needs its
//! length), so a write that finds none is answered `NotFound`, and the
//! filter then reserves it and writes again (the filters' `add_many`).

use std::time::Duration;

use redis::{cmd, Cmd, Value};

use crate::error::Result;
use crate::options::{Info, Options, Window};
use crate::plan::InfoFields;

/// `APBF.RESERVE`; a time window goes in whole seconds, rounded up so
/// that an item is never forgotten early.
pub(super) fn reserve(name: &str, o: &Options, window: Window) -> Cmd {
    let mut c = cmd("APBF.RESERVE");
    c.arg(name).arg(o.error_rate).arg(o.capacity);
    match window {
        Window::Count => c.arg("COUNT"),
        Window::Time(t) => c.arg("TIME").arg(whole_seconds(t)),
    };
    c
}

fn whole_seconds(t: Duration) -> u64 {
    t.as_millis().div_ceil(1000).max(1) as u64
}

/// One batch's `APBF.MADD` or `APBF.MEXISTS`: one answer per item.
pub(super) fn batch(name: &str, items: &[&[u8]], write: bool) -> Cmd {
    let mut c = cmd(if write { "APBF.MADD" } else { "APBF.MEXISTS" });
    c.arg(name);
    for item in items {
        c.arg(*item);
    }
    c
}

pub(super) fn info(name: &str) -> Cmd {
    cmd("APBF.INFO").arg(name).clone()
}

pub(super) fn read_info(name: &str, reply: Value) -> Result<Info> {
    Ok(InfoFields::read(reply, name)?.bloom_info("module window", name))
}
