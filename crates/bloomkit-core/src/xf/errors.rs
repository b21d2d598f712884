//! The expandable filter's errors (`XF.*`) and their reply texts, which say
//! what was wrong and what is allowed.

use std::borrow::Cow;

use super::{MAX_CAPACITY_LIMIT, MAX_ERROR_RATE, MIN_ERROR_RATE};
use crate::common::fields::FieldError;
use crate::common::memory::{Bound, LimitExceeded, OutOfMemory};
use crate::common::reply::{display_as_reply, Reply, ReplyError};

/// Everything that can go wrong with an expandable filter.
#[derive(Clone, Debug, PartialEq)]
pub enum XfError {
    /// The server's own wrong-arity error.
    WrongArity,
    /// The error rate is not a number within the range allowed.
    BadErrorRate,
    /// `CAPACITY` is not a positive integer within the range allowed.
    BadCapacity,
    /// `MAXCAPACITY` is not a positive integer within the range allowed.
    BadMaxCapacity,
    /// `CAPACITY` is larger than `MAXCAPACITY`.
    CapacityAboveMax,
    /// An option `XF.RESERVE` or `XF.INSERT` does not take.
    UnknownArgument(String),
    /// An option given twice.
    DuplicateArgument(&'static str),
    /// `XF.MERGE`'s numkeys is not a positive integer matching the sources given.
    BadNumKeys,
    /// `XF.RESERVE` onto an existing key.
    ItemExists,
    /// A command that needs the key, on a missing one (or `NOCREATE`).
    NotFound,
    /// The filter holds `MAXCAPACITY` items.
    Full {
        max_capacity: u64,
    },
    /// A block holds as many entries as it may ([`super::block::max_entries`]),
    /// all in places a split would not spread (one item added tens of
    /// thousands of times, or items crafted against a known seed): nothing
    /// changed.
    Crowded,
    /// No fingerprint length keeps the filter's mass within its error rate
    /// `rate` (items crafted against a known seed, or a merge that spent
    /// the rate): nothing changed.
    RateSpent {
        rate: f64,
    },
    /// The filter would exceed `bf.max-filter-bytes`.
    TooLarge {
        bytes: u64,
        limit: u64,
    },
    OutOfMemory,
    /// Creating or growing the filter would take the server past `maxmemory`.
    OverMaxmemory,
    /// A merge whose result would hold more than the destination's `MAXCAPACITY`.
    MergeTooLarge {
        items: u128,
        max_capacity: u64,
    },
    /// A merge that would read more entries than `bf.xf-max-merge-entries`.
    MergeTooLong {
        entries: u128,
        limit: u64,
    },
    /// A merge of filters that hash differently (other seeds, or bloomkit
    /// 0.1's filters of other capacities).
    MergeIncompatible,
    /// A merge whose result would guarantee `rate`, above the destination's
    /// configured error rate, without `RAISERATE`.
    MergeRaisesRate {
        rate: f64,
        configured: f64,
    },
    /// A merge whose result would guarantee more than the highest error rate allowed.
    MergeRateTooHigh {
        rate: f64,
    },
    /// `SEED` is not 32 hexadecimal digits.
    BadSeed,
    /// An RDB value, DUMP payload or SCANDUMP header that is not a filter
    /// this code could have written: why.
    BadData(&'static str),
    /// A write on a filter still being loaded with `XF.LOADCHUNK`.
    Loading,
    /// An item command on a filter made under a deployment secret this
    /// server's key ring does not hold (id `id`): it hashes nothing here.
    Sealed {
        id: u64,
    },
    /// A payload (`RESTORE`, `XF.LOADCHUNK`) of a filter made under a
    /// deployment secret this server does not have (id `id`): refused.
    ForeignSecret {
        id: u64,
    },
    /// `KEYID`, which only the server's own replication stream and AOF may send.
    KeyIdFromClient,
    /// A SCANDUMP or LOADCHUNK iterator that is not a valid position.
    BadIterator,
    /// A LOADCHUNK chunk that does not continue the load: why.
    BadChunk(&'static str),
    /// A batch of adds (`XF.MADD`, `XF.MADDNX`, `XF.INSERT`) refused at
    /// item `item` (from 1) of `items` for `cause`: nothing of it was
    /// stored, and the filter holds `held` items as before (`new_key`: the
    /// batch would have created it, and no key was stored).
    BatchRefused {
        item: u64,
        items: u64,
        held: u64,
        new_key: bool,
        cause: Box<XfError>,
    },
}

impl ReplyError for XfError {
    fn reply(&self) -> Reply {
        use XfError::*;
        let text: Cow<'static, str> = match self {
            WrongArity => return Reply::WrongArity,
            ItemExists => Cow::Borrowed("ERR item exists"),
            NotFound => Cow::Borrowed("ERR not found"),
            Full { max_capacity } => Cow::Owned(format!(
                "ERR the filter holds its MAXCAPACITY of {max_capacity} items; delete items, or create it with a \
                 larger MAXCAPACITY"
            )),
            Crowded => Cow::Borrowed(
                "ERR too many entries fall on the same place in the filter (items crafted to collide against its \
                 known SEED, where a key made without SEED hashes with the server's secret, which no client can \
                 craft against; or one item added tens of thousands of times); nothing was changed",
            ),
            RateSpent { rate } => Cow::Owned(format!(
                "ERR the filter cannot take another item within its error rate of {rate}: its entries already \
                 account for that rate (items crafted to collide, or a merge); copy it into a key with a larger \
                 error rate (XF.RESERVE new rate, then XF.MERGE new 1 key) or start a new key; nothing was changed"
            )),
            TooLarge { bytes, limit } => Cow::Owned(format!(
                "ERR the expandable filter would take {bytes} bytes, more than bf.max-filter-bytes ({limit}): \
                 raise the limit (CONFIG SET bf.max-filter-bytes) or send new items to another key (a new filter \
                 starts smaller with a smaller CAPACITY or a larger error rate); nothing was changed"
            )),
            OutOfMemory => Cow::Borrowed("ERR out of memory while allocating the filter; nothing was changed"),
            OverMaxmemory => Cow::Borrowed("OOM command not allowed when used memory > 'maxmemory'."),
            BadSeed => Cow::Borrowed("ERR SEED must be 32 hexadecimal digits (a 128-bit key)"),
            BadData(why) => Cow::Owned(format!("ERR invalid expandable filter data: {why}")),
            Loading => Cow::Borrowed(
                "ERR the filter is still being loaded with XF.LOADCHUNK; send the remaining chunks first",
            ),
            Sealed { id } => Cow::Owned(format!(
                "ERR this filter was made under a deployment secret (id {id:016x}) that is not in this server's \
                 key ring: it can be saved, copied and dumped here, but not read or written. Give the server \
                 that secret (the module argument XF_SECRET_FILE) to use it"
            )),
            ForeignSecret { id } => Cow::Owned(format!(
                "ERR this filter was made under a deployment secret this server does not have (id {id:016x}); \
                 nothing was stored. Give both servers one secret (the module argument XF_SECRET_FILE), or \
                 copy filters made with SEED"
            )),
            KeyIdFromClient => Cow::Borrowed(
                "ERR KEYID is sent only by the server itself (replication and the AOF); no client can choose \
                 how a filter hashes except with SEED",
            ),
            BadIterator => Cow::Borrowed("ERR the iterator must be a non-negative integer (0 to start)"),
            BadChunk(why) => Cow::Owned(format!("ERR invalid chunk: {why}")),
            BatchRefused { item, items, held, new_key, cause } => {
                Cow::Owned(batch_refused(*item, *items, *held, *new_key, cause))
            }
            // Arguments and merges, in their own functions (every variant
            // has its text: `every_error_says_what_to_do` checks).
            other => other
                .argument_text()
                .or_else(|| other.merge_text())
                .unwrap_or(Cow::Borrowed("ERR the expandable filter refused this command")),
        };
        Reply::Error(text)
    }
}

impl XfError {
    /// The text of an error in a command's arguments.
    fn argument_text(&self) -> Option<Cow<'static, str>> {
        use XfError::*;
        Some(match self {
            BadErrorRate => Cow::Owned(format!(
                "ERR error rate must be a number from {MIN_ERROR_RATE:e} to {MAX_ERROR_RATE}, such as 0.01 for 1%"
            )),
            BadCapacity => Cow::Owned(format!(
                "ERR CAPACITY must be a whole number from 1 to {MAX_CAPACITY_LIMIT} (a hint: the filter grows past it)"
            )),
            BadMaxCapacity => Cow::Owned(format!(
                "ERR MAXCAPACITY must be a whole number from 1 to {MAX_CAPACITY_LIMIT} (the most items the filter will hold)"
            )),
            CapacityAboveMax => Cow::Borrowed("ERR CAPACITY must not be larger than MAXCAPACITY"),
            UnknownArgument(word) => Cow::Owned(format!(
                "ERR unknown argument '{word}': XF.INSERT takes ERROR rate, CAPACITY n, MAXCAPACITY n, NOCREATE and NX, \
                 then ITEMS item...; XF.RESERVE takes CAPACITY n, MAXCAPACITY n and SEED hex after the error rate"
            )),
            DuplicateArgument(word) => Cow::Owned(format!("ERR {word} is given more than once")),
            BadNumKeys => Cow::Borrowed(
                "ERR numkeys must be a positive integer, followed by exactly that many source keys",
            ),
            _ => return None,
        })
    }

    /// The text of a refused merge.
    fn merge_text(&self) -> Option<Cow<'static, str>> {
        use XfError::*;
        Some(match self {
            MergeTooLarge { items, max_capacity } => Cow::Owned(format!(
                "ERR the merged filter would hold {items} items, more than the destination's MAXCAPACITY of \
                 {max_capacity}; nothing was changed"
            )),
            MergeTooLong { entries, limit } => Cow::Owned(format!(
                "ERR this merge would read {entries} entries, more than bf.xf-max-merge-entries ({limit}): a merge \
                 holds the server for its whole run; nothing was changed. Merge smaller filters, or raise the \
                 limit with CONFIG SET bf.xf-max-merge-entries"
            )),
            MergeIncompatible => Cow::Borrowed(
                "ERR these filters hash items differently (they were made on different servers, or by bloomkit \
                 0.1 with different capacities) and cannot be merged; create filters you will merge on one server, \
                 or with the same XF.RESERVE ... SEED",
            ),
            MergeRaisesRate { rate, configured } => Cow::Owned(format!(
                "ERR the merged filter would guarantee a false-positive rate of {rate:.6}, above the destination's \
                 error rate of {configured}; nothing was changed. Add RAISERATE to merge anyway and raise its \
                 error rate (to {rate:.6} or more: what it needs to keep growing)"
            )),
            MergeRateTooHigh { rate } => Cow::Owned(format!(
                "ERR the merged filter would guarantee a false-positive rate of {rate:.6}, above the highest \
                 allowed ({MAX_ERROR_RATE}); nothing was changed"
            )),
            _ => return None,
        })
    }
}

display_as_reply!(XfError);

/// The text of [`XfError::BatchRefused`]: the cause's, said of the batch,
/// with its error code (`ERR`, or `OOM` for `maxmemory`) kept in front.
fn batch_refused(item: u64, items: u64, held: u64, new_key: bool, cause: &XfError) -> String {
    match cause {
        XfError::Full { max_capacity } if new_key => format!(
            "ERR this batch would fill a new filter past its MAXCAPACITY of {max_capacity} items: item {item} of \
             {items} was the first that did not fit; nothing was stored and no key was created. Create it with a \
             larger MAXCAPACITY (XF.INSERT key MAXCAPACITY m ITEMS ..., or XF.RESERVE first), or send fewer items"
        ),
        XfError::Full { max_capacity } => format!(
            "ERR this batch would take the filter past its MAXCAPACITY of {max_capacity} items: it holds {held}, \
             and item {item} of {items} was the first that did not fit (every add counts, repeats too, except \
             with XF.MADDNX); nothing was stored. Send a smaller batch, delete items, or copy the filter into a \
             key with a larger MAXCAPACITY (XF.RESERVE new rate MAXCAPACITY m, then XF.MERGE new 1 key)"
        ),
        _ => {
            let text = cause.message();
            let (code, rest) = text.split_once(' ').unwrap_or(("ERR", &text));
            let rest = rest.trim_end_matches("; nothing was changed").trim_end_matches('.');
            format!("{code} item {item} of {items} of this batch was refused: {rest}; nothing of the batch was stored")
        }
    }
}

impl From<LimitExceeded> for XfError {
    fn from(e: LimitExceeded) -> XfError {
        match e.bound {
            Bound::Filter => XfError::TooLarge { bytes: e.bytes, limit: e.limit },
            Bound::Memory => XfError::OverMaxmemory,
        }
    }
}

impl From<OutOfMemory> for XfError {
    fn from(_: OutOfMemory) -> XfError {
        XfError::OutOfMemory
    }
}

/// A value that ends early or holds a field of the wrong type.
impl From<FieldError> for XfError {
    fn from(_: FieldError) -> XfError {
        XfError::BadData("a field is missing or of the wrong type")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant has a text of its own (the texts of arguments and
    /// merges live in their own functions, behind a fallback that none
    /// may reach). The list is checked to be whole by an exhaustive match.
    #[test]
    fn every_error_says_what_to_do() {
        use XfError::*;
        let all = [
            WrongArity,
            BadErrorRate,
            BadCapacity,
            BadMaxCapacity,
            CapacityAboveMax,
            UnknownArgument("X".into()),
            DuplicateArgument("SEED"),
            BadNumKeys,
            ItemExists,
            NotFound,
            Full { max_capacity: 1 },
            Crowded,
            RateSpent { rate: 0.01 },
            TooLarge { bytes: 2, limit: 1 },
            OutOfMemory,
            OverMaxmemory,
            MergeTooLarge { items: 2, max_capacity: 1 },
            MergeTooLong { entries: 2, limit: 1 },
            MergeIncompatible,
            MergeRaisesRate { rate: 0.02, configured: 0.01 },
            MergeRateTooHigh { rate: 0.6 },
            BadSeed,
            BadData("x"),
            Loading,
            Sealed { id: 1 },
            ForeignSecret { id: 1 },
            KeyIdFromClient,
            BadIterator,
            BadChunk("x"),
            BatchRefused { item: 1, items: 2, held: 0, new_key: false, cause: Box::new(Crowded) },
        ];
        for e in &all {
            match e {
                WrongArity
                | BadErrorRate
                | BadCapacity
                | BadMaxCapacity
                | CapacityAboveMax
                | UnknownArgument(_)
                | DuplicateArgument(_)
                | BadNumKeys
                | ItemExists
                | NotFound
                | Full { .. }
                | Crowded
                | RateSpent { .. }
                | TooLarge { .. }
                | OutOfMemory
                | OverMaxmemory
                | MergeTooLarge { .. }
                | MergeTooLong { .. }
                | MergeIncompatible
                | MergeRaisesRate { .. }
                | MergeRateTooHigh { .. }
                | BadSeed
                | BadData(_)
                | Loading
                | Sealed { .. }
                | ForeignSecret { .. }
                | KeyIdFromClient
                | BadIterator
                | BadChunk(_)
                | BatchRefused { .. } => {}
            }
            if *e != WrongArity {
                assert!(!e.message().contains("refused this command"), "{e:?} has no text of its own");
            }
        }
    }

    #[test]
    fn messages_say_what_is_allowed() {
        assert_eq!(XfError::WrongArity.reply(), Reply::WrongArity);
        let m = XfError::BadErrorRate.message();
        assert!(m.starts_with("ERR error rate must be a number from 1e-9 to 0.5"), "{m}");
        assert!(XfError::Full { max_capacity: 10 }.to_string().contains("MAXCAPACITY of 10 items"));
        let e: XfError = LimitExceeded { bytes: 5, limit: 4, bound: Bound::Filter }.into();
        assert!(e.message().contains("5 bytes, more than bf.max-filter-bytes (4)"));
        let m = batch_refused(4, 5, 0, false, &e);
        assert!(m.contains("send new items to another key") && !m.contains("MAXCAPACITY"), "{m}");
        assert!(m.ends_with("error rate); nothing of the batch was stored"), "{m}");
        let e: XfError = LimitExceeded { bytes: 5, limit: 4, bound: Bound::Memory }.into();
        assert!(e.message().starts_with("OOM"));
        assert!(XfError::UnknownArgument("FOO".into()).message().contains("'FOO'"));
        let m = XfError::MergeTooLong { entries: 20, limit: 10 }.message();
        assert!(m.contains("read 20 entries, more than bf.xf-max-merge-entries (10)"), "{m}");
        let batch = |cause| XfError::BatchRefused {
            item: 4,
            items: 5,
            held: 0,
            new_key: false,
            cause: Box::new(cause),
        };
        let m = batch(XfError::Full { max_capacity: 3 }).message();
        assert!(m.starts_with("ERR this batch would take the filter past its MAXCAPACITY of 3 items"), "{m}");
        assert!(m.contains("item 4 of 5") && m.contains("nothing was stored"), "{m}");
        let m = batch(XfError::OverMaxmemory).message();
        assert!(m.starts_with("OOM item 4 of 5 of this batch was refused: command not allowed"), "{m}");
        assert!(m.contains("'maxmemory'; nothing of the batch"), "{m}");
        let new_key = XfError::BatchRefused {
            item: 3,
            items: 5,
            held: 0,
            new_key: true,
            cause: Box::new(XfError::Full { max_capacity: 2 }),
        };
        assert!(new_key.message().contains("no key was created. Create it with a larger MAXCAPACITY"));
        let m = batch(XfError::RateSpent { rate: 0.01 }).message();
        assert!(
            m.starts_with("ERR item 4 of 5 of this batch was refused: the filter cannot take another item"),
            "{m}"
        );
        assert!(m.ends_with("or start a new key; nothing of the batch was stored"), "{m}");
        let m = batch(XfError::OutOfMemory).message();
        assert!(m.ends_with("allocating the filter; nothing of the batch was stored"), "{m}");
    }
}
