//! The expandable filter backend's commands (`XF.*`, bloomkit only): a
//! filter that grows at its error rate from any start, and removes and
//! counts items. The options' capacity is only its first size.
//!
//! `XF.ADD` counts every add (an item added twice is in twice), while a
//! [`crate::Filter`] adds an item only when it is not in yet, as the cuckoo
//! backend's `CF.INSERTNX` does: so an add answered `false` stores nothing
//! and [`crate::Filter::remove`] stays safe. Each batch of adds is one
//! `XF.INSERT ... NX ITEMS ...`: add-if-absent on the server, atomically,
//! creating the filter with the options where `XF.ADD` would take the
//! server's defaults.

use redis::{cmd, Cmd, Value};

use crate::error::Result;
use crate::options::{Info, Options};
use crate::plan::InfoFields;

/// The error rate as a word the server parses back to the same double.
fn rate(o: &Options) -> String {
    format!("{:?}", o.error_rate)
}

pub(super) fn reserve(name: &str, o: &Options) -> Cmd {
    let mut c = cmd("XF.RESERVE");
    c.arg(name).arg(rate(o)).arg("CAPACITY").arg(o.capacity);
    if let Some(max) = o.max_capacity {
        c.arg("MAXCAPACITY").arg(max);
    }
    c
}

/// One batch's adds (`XF.INSERT ... NX`) or `XF.MEXISTS`: one answer per item.
pub(super) fn batch(name: &str, o: &Options, items: &[&[u8]], write: bool) -> Cmd {
    let mut c;
    if write {
        c = cmd("XF.INSERT");
        c.arg(name).arg("ERROR").arg(rate(o)).arg("CAPACITY").arg(o.capacity);
        if let Some(max) = o.max_capacity {
            c.arg("MAXCAPACITY").arg(max);
        }
        c.arg("NX").arg("ITEMS");
    } else {
        c = cmd("XF.MEXISTS");
        c.arg(name);
    }
    for item in items {
        c.arg(*item);
    }
    c
}

/// `XF.DEL` of one item: whether an occurrence was removed.
pub(super) fn remove(name: &str, item: &[u8]) -> Cmd {
    cmd("XF.DEL").arg(name).arg(item).clone()
}

/// `XF.COUNT`: how many occurrences of the item the filter holds (never
/// fewer than were added and not removed).
pub(super) fn count_of(name: &str, item: &[u8]) -> Cmd {
    cmd("XF.COUNT").arg(name).arg(item).clone()
}

/// `XF.CARD`: the exact count of items added and not removed (0 for a
/// missing key).
pub(super) fn count(name: &str) -> Cmd {
    cmd("XF.CARD").arg(name).clone()
}

pub(super) fn info(name: &str) -> Cmd {
    cmd("XF.INFO").arg(name).clone()
}

/// `XF.INFO`: the capacity is the most items it will hold (it grows to
/// them), and the estimated error rate the rate it guarantees now.
pub(super) fn read_info(name: &str, reply: Value) -> Result<Info> {
    let fields = InfoFields::read(reply, name)?;
    Ok(Info {
        backend: "expandable".into(),
        keys: vec![name.to_string()],
        capacity: fields.get("Max capacity").unwrap_or(0),
        bytes: fields.get("Size").unwrap_or(0),
        items: fields.get("Items"),
        estimated_error_rate: fields.get_f64("Guaranteed rate"),
        ..Info::default()
    })
}
