//! The filter operations on a server, each written once as a [`Call`]: the
//! commands a [`Layout`] builds for it and how their replies make its
//! answer. [`crate::RedisFilter`] and [`crate::AsyncRedisFilter`] only run
//! these calls, so the two fronts answer alike by construction.

use std::time::Duration;

use redis::Value;

use crate::call::Call;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::options::Info;
use crate::plan::{check, integer};

/// What a filter that cannot remove answers to a removal.
const NO_REMOVE: &str =
    "removing items: only cuckoo and expandable filters (Layout::cuckoo, Layout::expandable) can";

/// The replies, once none is an error.
fn checked(replies: Result<Vec<Value>>, key: &str) -> Result<Vec<Value>> {
    let replies = replies?;
    replies.iter().try_for_each(|r| check(r, key))?;
    Ok(replies)
}

pub(crate) fn reserve(layout: &Layout) -> Call<'_, ()> {
    Call::round(layout.reserve(), move |replies| checked(replies, layout.name()).map(drop))
}

pub(crate) fn add_many<'a>(layout: &'a Layout, items: &'a [&'a [u8]]) -> Call<'a, Vec<bool>> {
    layout.add_plan(items).into_call(layout.name()).then(move |answers| match answers {
        // Nothing was written: create the window filter, then add.
        Err(Error::NotFound(_)) if layout.is_window() => reserve(layout).then(move |created| match created {
            Ok(()) | Err(Error::AlreadyExists(_)) => layout.add_plan(items).into_call(layout.name()),
            Err(e) => Call::Done(Err(e)),
        }),
        other => Call::Done(other),
    })
}

pub(crate) fn contains_many<'a>(layout: &'a Layout, items: &'a [&'a [u8]]) -> Call<'a, Vec<bool>> {
    layout.contains_plan(items).into_call(layout.name())
}

/// A missing filter holds nothing to remove: every answer is `false`.
pub(crate) fn remove_many<'a>(layout: &'a Layout, items: &'a [&'a [u8]]) -> Call<'a, Vec<bool>> {
    if !layout.removes() {
        return Call::Done(Err(Error::Unsupported(NO_REMOVE)));
    }
    let n = items.len();
    layout.remove_plan(items).into_call(layout.name()).map(move |answers| match answers {
        Err(Error::NotFound(_)) => Ok(vec![false; n]),
        other => other,
    })
}

/// How many copies of the item a cuckoo or expandable filter may hold
/// (`CF.COUNT`, `XF.COUNT`).
pub(crate) fn count_of<'a>(layout: &'a Layout, item: &[u8]) -> Call<'a, u64> {
    if !layout.removes() {
        return Call::Done(Err(Error::Unsupported(
            "counting copies of an item: only cuckoo and expandable filters (Layout::cuckoo, \
             Layout::expandable) can",
        )));
    }
    let cmds = layout.count_of(item);
    let n = cmds.len();
    Call::round(cmds, move |replies| {
        let replies = replies?;
        if replies.len() != n {
            return Err(Error::Protocol(format!("{} replies to {n} COUNT commands", replies.len())));
        }
        replies.iter().try_fold(0u64, |sum, v| Ok(sum + integer(v, layout.name())?.max(0) as u64))
    })
}

/// The exact count where the backend keeps one: a cuckoo filter only in
/// its info (a missing one holds none), the others by their own command.
pub(crate) fn count(layout: &Layout) -> Call<'_, Option<u64>> {
    if layout.removes() && !layout.is_expandable() {
        return info(layout).map(|info| match info {
            Ok(info) => Ok(info.items),
            Err(Error::NotFound(_)) => Ok(Some(0)),
            Err(e) => Err(e),
        });
    }
    let Some(cmds) = layout.count() else { return Call::Done(Ok(None)) };
    Call::round(cmds, move |replies| {
        let replies = checked(replies, layout.name())?;
        let total =
            replies.iter().try_fold(0u64, |acc, r| Ok::<_, Error>(acc + integer(r, layout.name())? as u64));
        total.map(Some)
    })
}

/// Each part (shard) is read in a round trip of its own, so that one not
/// yet written to does not fail the others.
pub(crate) fn info(layout: &Layout) -> Call<'_, Info> {
    let parts = layout
        .info_parts()
        .into_iter()
        .map(|part| Call::round(part.info(), move |r| part.read_info(r?)))
        .collect();
    Call::each(parts).map(move |parts| layout.combine_info(parts?))
}

pub(crate) fn clear(layout: &Layout) -> Call<'_, ()> {
    Call::round(layout.clear(), move |replies| checked(replies, layout.name()).map(drop))
}

pub(crate) fn expire(layout: &Layout, ttl: Duration) -> Call<'_, ()> {
    Call::round(layout.expire(ttl), move |replies| checked(replies, layout.name()).map(drop))
}
