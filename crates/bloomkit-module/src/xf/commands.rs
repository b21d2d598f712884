//! The `XF.*` commands: parse in core, open the key, call core, reply,
//! replicate, notify, count.
//!
//! Replicas stay byte-identical: every operation of the filter is a pure
//! function of its state and the items (no clock, no randomness), and a
//! doubling moves a fixed number of slots per write, so a write replicated
//! verbatim does the same work there. A filter a write creates reaches
//! replicas as `XF.RESERVE` with its exact parameters (the defaults may
//! differ there); a batch cut short by an error (the size limit,
//! `MAXCAPACITY`) is sent as the part that ran, because replicas skip the
//! limits.

use std::ffi::CStr;
use std::ptr::NonNull;

use bloomkit_core::xf::args::{
    check_items, check_key_only, check_single_item, parse_insert, parse_loadchunk, parse_merge,
    parse_reserve, XfDefaults,
};
use bloomkit_core::xf::{XfError, XfFilter, XfParams};
use bloomkit_core::{Limits, Reply, ReplyError};

use super::counters::*;
use crate::command::Outcome;
use crate::ffi::{Arg, Ctx, Key};
use crate::{config, keys};

/// What a write creates a missing key with.
fn defaults() -> XfDefaults {
    XfDefaults::BLOOMKIT
}

fn lookup(key: &Key) -> Result<Option<NonNull<XfFilter>>, Reply> {
    keys::lookup(key)
}

/// The error rate as a word that parses back to the same double.
fn rate_word(rate: f64) -> Vec<u8> {
    format!("{rate:?}").into_bytes()
}

/// A new filter stored in an empty key opened for writing, sent to
/// replicas as `XF.RESERVE key rate CAPACITY c MAXCAPACITY m`.
fn create(ctx: Ctx, key: &Key, name: &Arg, params: XfParams) -> Result<NonNull<XfFilter>, Reply> {
    let f = XfFilter::with_params(params, config::limits(ctx)).inspect_err(|_| refused())?;
    let stored = keys::store(key, f)?;
    let (rate, capacity, max) =
        (rate_word(params.error_rate), params.capacity.to_string(), params.max_capacity.to_string());
    let words: [&[u8]; 5] = [&rate, b"CAPACITY", capacity.as_bytes(), b"MAXCAPACITY", max.as_bytes()];
    ctx.replicate_words(c"XF.RESERVE", name, &words, &[]);
    Ok(stored)
}

/// Frees the table a finished doubling left behind on a background thread,
/// as the server's lazy free does with large values: unmapping hundreds of
/// MB on the main thread would hold every client for milliseconds. (Should
/// no thread start, the table is freed here.)
fn free_retired(f: &mut XfFilter) {
    if let Some(old) = f.take_retired() {
        let _ = std::thread::Builder::new().name("bloomkit-free".into()).spawn(move || drop(old));
    }
}

fn refused() {
    COUNTERS.add(REFUSED, 1);
}

/// Counts `e` as a refusal when it is one of the size limits (or a failed
/// allocation), not a property of the items.
fn count_refusal(e: &XfError) {
    if matches!(e, XfError::TooLarge { .. } | XfError::OverMaxmemory | XfError::OutOfMemory) {
        refused();
    }
}

/// `XF.RESERVE key error_rate [CAPACITY initial] [MAXCAPACITY limit]`
pub fn reserve(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let params = parse_reserve(argv, &defaults())?;
    let key = Key::open(ctx, &argv[1], true);
    if lookup(&key)?.is_some() {
        return Err(XfError::ItemExists.into());
    }
    create(ctx, &key, &argv[1], params)?;
    ctx.reply_simple(c"OK");
    ctx.notify(c"xf.reserve", &argv[1]);
    Ok(())
}

/// How a batch of adds answers.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// `XF.ADD`: one boolean; an error is the reply.
    Single,
    /// `XF.MADD`, `XF.INSERT`: an array of booleans; an error takes the
    /// place of the item that failed, and the command stops there.
    Array,
}

/// `XF.ADD key item`: 1 if new, 0 if probably present; either way one more
/// occurrence is counted. Creates the key with the defaults.
pub fn add(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_single_item(argv)?;
    add_items(ctx, argv, 2, Some(defaults().params()), Shape::Single, c"xf.add")
}

/// `XF.MADD key item [item ...]`
pub fn madd(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_items(argv)?;
    add_items(ctx, argv, 2, Some(defaults().params()), Shape::Array, c"xf.madd")
}

/// `XF.INSERT key [ERROR e] [CAPACITY c] [MAXCAPACITY m] [NOCREATE] ITEMS item...`
pub fn insert(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let parsed = parse_insert(argv, &defaults())?;
    let create_with = parsed.create.then_some(parsed.params);
    add_items(ctx, argv, parsed.items_from, create_with, Shape::Array, c"xf.insert")
}

fn add_items(
    ctx: Ctx,
    argv: &[Arg],
    items_from: usize,
    create_with: Option<XfParams>,
    shape: Shape,
    event: &'static CStr,
) -> Outcome {
    let key = Key::open(ctx, &argv[1], true);
    let mut f = match (lookup(&key)?, create_with) {
        (Some(f), _) => f,
        (None, Some(params)) => create(ctx, &key, &argv[1], params)?,
        (None, None) => return Err(XfError::NotFound.into()),
    };
    // SAFETY: the keyspace owns the filter; commands run one at a time.
    let f = unsafe { f.as_mut() };
    let limits: Limits = config::limits(ctx);
    let (size_before, level_before) = (f.size_bytes(), f.expansions());
    let items = &argv[items_from..];
    let mut answers = Vec::with_capacity(items.len());
    let mut failed = None;
    for item in items {
        match f.insert(item.bytes(), limits) {
            Ok(new) => answers.push(new),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let ran = answers.len();
    free_retired(f);
    COUNTERS.resized(size_before, f.size_bytes());
    COUNTERS.add(EXPANSIONS, u64::from(f.expansions() - level_before));
    COUNTERS.add(ITEMS_ADDED, ran as u64);
    if let Some(e) = &failed {
        count_refusal(e);
    }
    match (shape, failed) {
        (Shape::Single, Some(e)) => return Err(e.into()),
        (Shape::Single, None) => ctx.reply_bool(answers[0]),
        (Shape::Array, failed) => {
            ctx.reply_array(ran + usize::from(failed.is_some()));
            for &new in &answers {
                ctx.reply_bool(new);
            }
            if let Some(e) = failed {
                ctx.reply_error(&e.message());
                if ran > 0 {
                    ctx.replicate_items(c"XF.MADD", &argv[1], None, &items[..ran]);
                    ctx.notify(event, &argv[1]);
                }
                return Ok(());
            }
        }
    }
    ctx.replicate_verbatim();
    ctx.notify(event, &argv[1]);
    Ok(())
}

/// The filter in a key for a read (`None`: a missing key).
fn with_filter<T>(ctx: Ctx, name: &Arg, f: impl FnOnce(Option<&XfFilter>) -> T) -> Result<T, Reply> {
    let key = Key::open(ctx, name, false);
    // SAFETY: owned by the keyspace, read only while the key is open.
    Ok(f(lookup(&key)?.map(|p| unsafe { &*p.as_ptr() })))
}

/// `XF.EXISTS key item`: 1 if probably present, 0 if surely not (or no key).
pub fn exists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_single_item(argv)?;
    let found = with_filter(ctx, &argv[1], |f| f.is_some_and(|f| f.contains(argv[2].bytes())))?;
    COUNTERS.add(LOOKUPS, 1);
    ctx.reply_bool(found);
    Ok(())
}

/// `XF.MEXISTS key item [item ...]`
pub fn mexists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_items(argv)?;
    with_filter(ctx, &argv[1], |f| {
        ctx.reply_array(argv.len() - 2);
        for item in &argv[2..] {
            ctx.reply_bool(f.is_some_and(|f| f.contains(item.bytes())));
        }
    })?;
    COUNTERS.add(LOOKUPS, (argv.len() - 2) as u64);
    Ok(())
}

/// `XF.COUNT key item`: how many times the item was added (and not
/// deleted); never below the true count, 0 for a missing key.
pub fn count(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_single_item(argv)?;
    let n = with_filter(ctx, &argv[1], |f| f.map_or(0, |f| f.count(argv[2].bytes())))?;
    COUNTERS.add(LOOKUPS, 1);
    ctx.reply_i64(n.min(i64::MAX as u64) as i64);
    Ok(())
}

/// `XF.CARD key`: items added and not deleted, 0 for a missing key.
pub fn card(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_key_only(argv)?;
    let n = with_filter(ctx, &argv[1], |f| f.map_or(0, XfFilter::items))?;
    ctx.reply_i64(n.min(i64::MAX as u64) as i64);
    Ok(())
}

/// `XF.DEL key item`: removes one occurrence; 1 if one was removed, 0 if
/// the item was not in (or the key is missing).
pub fn del(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_single_item(argv)?;
    let key = Key::open(ctx, &argv[1], true);
    let Some(mut f) = lookup(&key)? else {
        ctx.reply_bool(false);
        return Ok(());
    };
    // SAFETY: the keyspace owns the filter; commands run one at a time.
    let f = unsafe { f.as_mut() };
    let (size_before, level_before) = (f.size_bytes(), f.expansions());
    let removed = f.delete(argv[2].bytes())?;
    free_retired(f);
    COUNTERS.resized(size_before, f.size_bytes());
    COUNTERS.add(EXPANSIONS, u64::from(f.expansions() - level_before));
    ctx.reply_bool(removed);
    // A delete also moves a step of a doubling under way: replicas must
    // take it too, even when nothing was removed.
    if removed || f.expansions() != level_before || f.is_migrating() {
        ctx.replicate_verbatim();
    }
    if removed {
        COUNTERS.add(ITEMS_DELETED, 1);
        ctx.notify(c"xf.del", &argv[1]);
    }
    Ok(())
}

/// `XF.MERGE destination numkeys source [source ...]`: afterwards every
/// item of every source (and of the destination) is in the destination.
/// A missing destination starts as a copy of the first source. All or
/// nothing: an error leaves the destination as it was.
pub fn merge(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let sources = parse_merge(argv)?;
    let dest_key = Key::open(ctx, &argv[1], true);
    let dest = lookup(&dest_key)?;
    let mut source_keys = Vec::with_capacity(sources.len());
    let mut filters: Vec<NonNull<XfFilter>> = Vec::with_capacity(sources.len());
    for name in &argv[sources] {
        if name.bytes() == argv[1].bytes() {
            filters.push(dest.ok_or(XfError::NotFound)?);
            continue;
        }
        let key = Key::open(ctx, name, false);
        filters.push(lookup(&key)?.ok_or(XfError::NotFound)?);
        source_keys.push(key);
    }
    let limits = config::limits(ctx);
    // SAFETY (every dereference below): the filters belong to the keyspace,
    // whose keys stay open until the end; commands run one at a time; they
    // are only read until the result replaces the destination.
    let (mut merged, rest) = match dest {
        Some(d) => (unsafe { d.as_ref() }.try_clone()?, &filters[..]),
        None => (unsafe { filters[0].as_ref() }.try_clone()?, &filters[1..]),
    };
    for f in rest {
        merged.merge_from(unsafe { f.as_ref() }, limits).inspect_err(count_refusal)?;
    }
    drop(source_keys);
    free_retired(&mut merged);
    let level_before = dest.map_or(merged.expansions(), |d| unsafe { d.as_ref() }.expansions());
    COUNTERS.add(EXPANSIONS, u64::from(merged.expansions().saturating_sub(level_before)));
    // The merged filter replaces the destination (its TTL goes, as with SUNIONSTORE).
    keys::store(&dest_key, merged)?;
    COUNTERS.add(MERGES, 1);
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"xf.merge", &argv[1]);
    Ok(())
}

/// `XF.INFO key`: the parameters and the state, as a map (a flat array in RESP2).
pub fn info(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_key_only(argv)?;
    let info = with_filter(ctx, &argv[1], |f| f.map(XfFilter::info))?.ok_or(XfError::NotFound)?;
    let migration = info.migration.map_or(0, |(moved, of)| (moved * 100).checked_div(of).unwrap_or(100));
    ctx.reply_map(13);
    let int = |label: &'static CStr, v: u64| {
        ctx.reply_simple(label);
        ctx.reply_i64(v.min(i64::MAX as u64) as i64);
    };
    int(c"Capacity", info.capacity);
    int(c"Max capacity", info.max_capacity);
    int(c"Items", info.items);
    int(c"Entries", info.entries);
    int(c"Size", info.size_bytes);
    int(c"Expansions", u64::from(info.expansions));
    int(c"Grows at", info.grows_at);
    int(c"Newest fingerprint bits", u64::from(info.newest_fingerprint_bits));
    int(c"Oldest fingerprint bits", u64::from(info.oldest_fingerprint_bits));
    int(c"Expansion progress", migration);
    int(c"Quotients", info.quotients);
    ctx.reply_simple(c"Error rate");
    ctx.reply_double(info.error_rate);
    ctx.reply_simple(c"Guaranteed rate");
    ctx.reply_double(info.guaranteed_rate);
    Ok(())
}

/// `XF.SCANDUMP key iterator`: `[next, data]`; iterator 0 gives the header,
/// then the slots by the MiB, then `[0, ""]`.
pub fn scandump(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let iter = bloomkit_core::xf::args::parse_scandump(argv)?;
    let chunk = with_filter(ctx, &argv[1], |f| f.map(|f| f.chunk_at(iter)))?.ok_or(XfError::NotFound)?;
    let (next, data) = chunk.unwrap_or((0, Vec::new()));
    ctx.reply_array(2);
    ctx.reply_i64(next.min(i64::MAX as u64) as i64);
    ctx.reply_bulk(&data);
    Ok(())
}

/// `XF.LOADCHUNK key iterator data`: iterator 1 on an empty key creates the
/// filter from a header; the chunks that follow fill it, in order.
pub fn loadchunk(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let iter = parse_loadchunk(argv)?;
    let data = argv[3].bytes();
    let key = Key::open(ctx, &argv[1], true);
    match lookup(&key)? {
        None if iter == 1 => {
            let f = XfFilter::from_header(data, config::limits(ctx)).inspect_err(|_| refused())?;
            keys::store(&key, f)?;
        }
        None => return Err(XfError::NotFound.into()),
        Some(mut f) => {
            // SAFETY: the keyspace owns the filter; commands run one at a time.
            let f = unsafe { f.as_mut() };
            let before = f.size_bytes();
            f.load_chunk(iter, data)?;
            COUNTERS.resized(before, f.size_bytes());
        }
    }
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"xf.loadchunk", &argv[1]);
    Ok(())
}
