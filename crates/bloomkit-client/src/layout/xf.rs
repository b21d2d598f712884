//! The expandable filter backend's commands (`XF.*`, bloomkit only): a
//! filter that grows at its error rate from any start, and removes and
//! counts items. The options' capacity is only its first size.
//!
//! `XF.ADD` counts every add (an item added twice is in twice), while a
//! [`crate::Filter`] adds an item only when it is not in yet, as the cuckoo
//! backend's `CF.INSERTNX` does: so an add answered `false` stores nothing
//! and [`crate::Filter::remove`] stays safe. The module has no such
//! command, so each batch of adds is one script that looks each item up
//! and adds the absent ones, atomically (and creates the filter with the
//! options first, where `XF.ADD` would take the server's defaults).

use redis::{cmd, Cmd, Value};

use crate::error::Result;
use crate::options::{Info, Options};
use crate::plan::InfoFields;

/// KEYS[1]: the filter. ARGV: error rate, capacity, max capacity (0: the
/// server's default), then the items. Answers 1 per item added, 0 per item
/// found in. A key of another type fails in `XF.EXISTS` (WRONGTYPE).
const ADD_SCRIPT: &str = r"
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then
  if ARGV[3] == '0' then
    redis.call('XF.RESERVE', key, ARGV[1], 'CAPACITY', ARGV[2])
  else
    redis.call('XF.RESERVE', key, ARGV[1], 'CAPACITY', ARGV[2], 'MAXCAPACITY', ARGV[3])
  end
end
local new = {}
for i = 4, #ARGV do
  if redis.call('XF.EXISTS', key, ARGV[i]) == 1 then
    new[#new + 1] = 0
  else
    redis.call('XF.ADD', key, ARGV[i])
    new[#new + 1] = 1
  end
end
return new
";

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

/// One batch's adds (the script) or `XF.MEXISTS`: one answer per item.
pub(super) fn batch(name: &str, o: &Options, items: &[&[u8]], write: bool) -> Cmd {
    let mut c;
    if write {
        c = cmd("EVAL");
        c.arg(ADD_SCRIPT).arg(1).arg(name).arg(rate(o)).arg(o.capacity).arg(o.max_capacity.unwrap_or(0));
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

/// `XF.INFO`: the capacity is what it holds before its next doubling, and
/// the estimated error rate the rate it guarantees now.
pub(super) fn read_info(name: &str, reply: Value) -> Result<Info> {
    let fields = InfoFields::read(reply, name)?;
    Ok(Info {
        backend: "expandable".into(),
        keys: vec![name.to_string()],
        capacity: fields.get("Grows at").unwrap_or(0),
        bytes: fields.get("Size").unwrap_or(0),
        items: fields.get("Items"),
        estimated_error_rate: fields.get_f64("Guaranteed rate"),
        ..Info::default()
    })
}
