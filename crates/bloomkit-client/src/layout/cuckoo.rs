//! The cuckoo filter backend's commands (`CF.*`, bloomkit or RedisBloom):
//! the one backend that removes items. Its count lives only in `CF.INFO`,
//! so counting reads the info rather than a `CARD` command.

use redis::{cmd, Cmd, Value};

use crate::error::Result;
use crate::options::{Info, Options};
use crate::plan::InfoFields;

pub(super) fn reserve(name: &str, o: &Options) -> Cmd {
    cmd("CF.RESERVE").arg(name).arg(o.capacity).clone()
}

/// One batch's `CF.INSERTNX` or `CF.MEXISTS`. `CF.INSERTNX` answers 1
/// (added), 0 (already there) or -1 (no room: the filter cannot grow).
pub(super) fn batch(name: &str, o: &Options, items: &[&[u8]], write: bool) -> Cmd {
    let mut c = cmd(if write { "CF.INSERTNX" } else { "CF.MEXISTS" });
    c.arg(name);
    if write {
        c.arg("CAPACITY").arg(o.capacity).arg("ITEMS");
    }
    for item in items {
        c.arg(*item);
    }
    c
}

/// `CF.DEL` of one item: whether a copy was removed.
pub(super) fn remove(name: &str, item: &[u8]) -> Cmd {
    cmd("CF.DEL").arg(name).arg(item).clone()
}

/// `CF.COUNT`: how many copies of the item the filter may hold.
pub(super) fn count_of(name: &str, item: &[u8]) -> Cmd {
    cmd("CF.COUNT").arg(name).arg(item).clone()
}

pub(super) fn info(name: &str) -> Cmd {
    cmd("CF.INFO").arg(name).clone()
}

pub(super) fn read_info(name: &str, reply: Value) -> Result<Info> {
    let fields = InfoFields::read(reply, name)?;
    let field = |label: &str| fields.get(label);
    Ok(Info {
        backend: "cuckoo".into(),
        keys: vec![name.to_string()],
        // Slots in every sub-filter: sub-filter i has the first's buckets
        // times expansion^i.
        capacity: {
            let slots = field("Number of buckets").unwrap_or(0) * field("Bucket size").unwrap_or(0);
            let growth = field("Expansion rate").unwrap_or(1).max(1);
            (0..field("Number of filters").unwrap_or(1))
                .map(|i| slots.saturating_mul(growth.saturating_pow(i as u32)))
                .fold(0u64, u64::saturating_add)
        },
        bytes: field("Size").unwrap_or(0),
        items: field("Number of items inserted"),
        filters: field("Number of filters"),
        ..Info::default()
    })
}
