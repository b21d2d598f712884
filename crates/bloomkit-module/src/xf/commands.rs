//! The `XF.*` commands: parse in core, open the key, call core, reply,
//! replicate, notify, count.
//!
//! Replicas stay byte-identical: every operation of the filter is a pure
//! function of its state and the items (no clock, no randomness: a new
//! filter's seed is chosen here, once, and sent along), growth happens only
//! inside the write that needs it, and a write that is refused changes
//! nothing (core makes every allocation before it moves anything). A filter
//! a write creates reaches replicas as `XF.RESERVE` with its exact
//! parameters and seed (the defaults and the secret may differ there). A
//! batch is all or nothing (core's `Batch`): refused by a limit
//! (`MAXCAPACITY`, the size limit, `maxmemory`) at any item, it changes
//! nothing, creates no key and sends nothing; kept, it is sent whole, less
//! the items answered without being stored (an item already in, at a limit
//! that replicas do not have).

use std::convert::Infallible;
use std::ffi::CStr;

use bloomkit_core::xf::args::{
    check_items, check_key_only, check_single_item, parse_insert, parse_loadchunk, parse_merge, parse_reserve,
};
use bloomkit_core::xf::{Hashing, Seed, XfError, XfFilter, XfParams};
use bloomkit_core::{Limits, Reply};

use super::counters::*;
use super::settings::{defaults, max_merge_entries, merge_threads};
use crate::command::Outcome;
use crate::ffi::{Arg, Ctx, Key};
use crate::{config, keys};

fn lookup(key: &Key) -> Result<Option<&XfFilter>, Reply> {
    keys::lookup(key)
}

/// The filter in a key for a command that hashes items: one made under a
/// secret the key ring does not hold (sealed) is refused, once the ring
/// has been asked again (it may have learnt the secret since the load).
/// Unsealing changes no byte the filter saves.
fn lookup_hashing(ctx: Ctx, key: &mut Key) -> Result<Option<&mut XfFilter>, Reply> {
    let found = keys::lookup_mut::<XfFilter>(key)?;
    if let Some(f) = found {
        if !super::secret::unseal(f) {
            let id = f.hashing().key_id().unwrap_or(0);
            if ctx.is_replaying() {
                // The primary or the AOF wrote to a filter whose secret this
                // server lacks (data edited by hand): the write is lost here.
                let warning =
                    format!("bloomkit: a replicated write to a sealed XF filter (id {id:016x}) was dropped");
                crate::ffi::log(std::ptr::null_mut(), c"warning", &warning);
            }
            return Err(XfError::Sealed { id }.into());
        }
        return Ok(Some(f));
    }
    Ok(None)
}

/// The error rate as a word that parses back to the same double.
fn rate_word(rate: f64) -> Vec<u8> {
    format!("{rate:?}").into_bytes()
}

/// A new filter stored in an empty key opened for writing, sent to
/// replicas as `XF.RESERVE key rate CAPACITY c MAXCAPACITY m SEED s` (or
/// `KEYID id`).
fn create<'k>(
    ctx: Ctx,
    key: &'k mut Key,
    name: &Arg,
    params: XfParams,
    hashing: Hashing,
) -> Result<&'k mut XfFilter, Reply> {
    let f = XfFilter::with_hashing(params, hashing, config::limits(ctx)).inspect_err(|_| refused())?;
    store_new(ctx, key, name, f)
}

/// A new filter hashing with the server's current secret, not stored yet
/// (a batch that creates its key fills it first, and stores it only if
/// the batch is kept).
fn new_filter(ctx: Ctx, params: XfParams) -> Result<XfFilter, Reply> {
    let hashing = super::secret::new_hashing();
    Ok(XfFilter::with_hashing(params, hashing, config::limits(ctx)).inspect_err(|_| refused())?)
}

/// How `XF.RESERVE` makes its filter hash: its own `SEED`; the deployment
/// key `KEYID` names (only from the primary or the AOF: a filter whose
/// secret the ring lacks is made sealed, never refused, so that a replica
/// and a replay follow the primary); else the current secret.
fn reserve_hashing(ctx: Ctx, seed: Option<Seed>, key_id: Option<u64>) -> Result<Hashing, Reply> {
    Ok(match (seed, key_id) {
        (Some(s), _) => Hashing::Keyed(s),
        (None, Some(_)) if !ctx.is_replaying() => return Err(XfError::KeyIdFromClient.into()),
        (None, Some(id)) => super::secret::key_for(id).map_or(Hashing::Sealed { id }, Hashing::Deployment),
        (None, None) => super::secret::new_hashing(),
    })
}

/// Stores `f` in an empty key opened for writing and sends it to replicas
/// as `XF.RESERVE` with its exact parameters and its seed, or its secret's
/// id (then after the ring, `XF.KEYRING`, which replicas and the AOF need
/// to hash for it).
fn store_new<'k>(ctx: Ctx, key: &'k mut Key, name: &Arg, f: XfFilter) -> Result<&'k mut XfFilter, Reply> {
    let (params, hashing) = (f.params(), f.hashing());
    let stored = keys::store(key, f)?;
    let (word, how): (&[u8], String) = match (hashing, hashing.key_id()) {
        (Hashing::Keyed(seed), _) => (b"SEED", seed.to_hex()),
        (_, id) => {
            super::secret::send_ahead_of(ctx, name);
            (b"KEYID", format!("{:016x}", id.unwrap_or(0)))
        }
    };
    let (rate, capacity, max) =
        (rate_word(params.error_rate), params.capacity.to_string(), params.max_capacity.to_string());
    let words: [&[u8]; 7] =
        [&rate, b"CAPACITY", capacity.as_bytes(), b"MAXCAPACITY", max.as_bytes(), word, how.as_bytes()];
    ctx.replicate_words(c"XF.RESERVE", name, &words, &[]);
    Ok(stored)
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

/// `XF.RESERVE key error_rate [CAPACITY initial] [MAXCAPACITY limit] [SEED hex]`
pub fn reserve(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let r = parse_reserve(argv, &defaults())?;
    let mut key = Key::open(ctx, &argv[1], true);
    if lookup(&key)?.is_some() {
        return Err(XfError::ItemExists.into());
    }
    let hashing = reserve_hashing(ctx, r.seed, r.key_id)?;
    create(ctx, &mut key, &argv[1], r.params, hashing)?;
    ctx.reply_simple(c"OK");
    ctx.notify(c"xf.reserve", &argv[1]);
    Ok(())
}

/// How a batch of adds answers.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// `XF.ADD`: one boolean; an error is the reply.
    Single,
    /// `XF.MADD`, `XF.INSERT`: an array of booleans; or, when any item is
    /// refused, one error that names it, and nothing of the batch stored.
    Array,
}

/// What an add does with an item already (probably) in.
#[derive(Clone, Copy, PartialEq)]
enum Repeat {
    /// `XF.ADD`, `XF.MADD`, `XF.INSERT`: one more occurrence (counted).
    Count,
    /// `XF.ADDNX`, `XF.MADDNX`: nothing (0), so that `Items` counts distinct items.
    Skip,
}

/// `XF.ADD key item`: 1 if new, 0 if probably present; either way one more
/// occurrence is counted. Creates the key with the defaults.
pub fn add(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_single_item(argv)?;
    add_items(ctx, argv, 2, Some(defaults().params()), Shape::Single, Repeat::Count, c"xf.add")
}

/// `XF.MADD key item [item ...]`
pub fn madd(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_items(argv)?;
    add_items(ctx, argv, 2, Some(defaults().params()), Shape::Array, Repeat::Count, c"xf.madd")
}

/// `XF.ADDNX key item`: adds the item only when it is not probably in: 1
/// if added, 0 if it was (nothing stored). Creates the key with the defaults.
pub fn addnx(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_single_item(argv)?;
    add_items(ctx, argv, 2, Some(defaults().params()), Shape::Single, Repeat::Skip, c"xf.addnx")
}

/// `XF.MADDNX key item [item ...]`: per item as `XF.ADDNX`, in order (an
/// item repeated in the batch is added once).
pub fn maddnx(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_items(argv)?;
    add_items(ctx, argv, 2, Some(defaults().params()), Shape::Array, Repeat::Skip, c"xf.maddnx")
}

/// `XF.INSERT key [ERROR e] [CAPACITY c] [MAXCAPACITY m] [NOCREATE] [NX] ITEMS item...`:
/// with `NX`, each item is added only when not probably in (as `XF.MADDNX`).
pub fn insert(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let parsed = parse_insert(argv, &defaults())?;
    let create_with = parsed.create.then_some(parsed.params);
    let repeat = if parsed.nx { Repeat::Skip } else { Repeat::Count };
    add_items(ctx, argv, parsed.items_from, create_with, Shape::Array, repeat, c"xf.insert")
}

fn add_items(
    ctx: Ctx,
    argv: &[Arg],
    items_from: usize,
    create_with: Option<XfParams>,
    shape: Shape,
    repeat: Repeat,
    event: &'static CStr,
) -> Outcome {
    let mut key = Key::open(ctx, &argv[1], true);
    let items = &argv[items_from..];
    // A filter this command creates is filled before it is stored: a
    // refused batch then leaves no key behind, and sends nothing.
    let mut fresh = None;
    let f = match (lookup_hashing(ctx, &mut key)?, create_with) {
        (Some(f), _) => f,
        (None, Some(params)) => fresh.insert(new_filter(ctx, params)?),
        (None, None) => return Err(XfError::NotFound.into()),
    };
    let (size_before, blocks_before) = (f.size_bytes(), f.block_count());
    let ran = run_batch(f, items, repeat, config::limits(ctx));
    let (answers, stored) = match ran {
        Ok(done) => done,
        Err((item, cause)) => {
            count_refusal(&cause);
            return Err(match (shape, cause) {
                // Not about an item: as it is.
                (_, cause @ XfError::Loading) | (Shape::Single, cause) => cause,
                (Shape::Array, cause) => XfError::BatchRefused {
                    item: item as u64 + 1,
                    items: items.len() as u64,
                    held: f.items(),
                    new_key: fresh.is_some(),
                    cause: Box::new(cause),
                },
            }
            .into());
        }
    };
    let (size_after, blocks_after) = (f.size_bytes(), f.block_count());
    match fresh {
        // Counted whole as it is stored.
        Some(f) => drop(store_new(ctx, &mut key, &argv[1], f)?),
        None => COUNTERS.resized(size_before, size_after),
    }
    COUNTERS.add(EXPANSIONS, blocks_after.saturating_sub(blocks_before));
    COUNTERS.add(ITEMS_ADDED, answers.iter().filter(|&&a| a || repeat == Repeat::Count).count() as u64);
    match shape {
        Shape::Single => ctx.reply_bool(answers[0]),
        Shape::Array => {
            ctx.reply_array(answers.len());
            answers.iter().for_each(|&new| ctx.reply_bool(new));
        }
    }
    if stored.len() == items.len() {
        ctx.replicate_verbatim();
    } else if !stored.is_empty() {
        // Less what was answered without being stored (an item already in,
        // at a limit the replica does not have).
        let command = if repeat == Repeat::Skip { c"XF.MADDNX" } else { c"XF.MADD" };
        ctx.replicate_words(command, &argv[1], &stored, &[]);
    }
    ctx.notify(event, &argv[1]);
    Ok(())
}

/// The items added in one batch, all or none (core's `Batch`): the answers
/// and the items stored; or the index of the item refused and why, with
/// the filter as it was.
#[allow(clippy::type_complexity)]
fn run_batch<'a>(
    f: &mut XfFilter,
    items: &'a [Arg],
    repeat: Repeat,
    limits: Limits,
) -> Result<(Vec<bool>, Vec<&'a [u8]>), (usize, XfError)> {
    let mut answers = Vec::with_capacity(items.len());
    let mut stored = Vec::with_capacity(items.len());
    if let [item] = items {
        // One add changes nothing unless it succeeds: no undo log to keep.
        let h = f.hash(item.bytes());
        let (new, was_stored) = match repeat {
            Repeat::Count => f.add_occurrence(h, limits).map(|a| (a.new, a.stored)),
            Repeat::Skip => f.insert_if_absent_hash(h, limits).map(|new| (new, true)),
        }
        .map_err(|e| (0, e))?;
        answers.push(new);
        if was_stored {
            stored.push(item.bytes());
        }
        return Ok((answers, stored));
    }
    let hashing = f.hashing();
    let mut batch = f.batch();
    // Hashed a chunk at a time, so that each add can ask for the block of
    // an item a few places on while it shifts its own (`prefetch_for`; a
    // block that splits meanwhile makes it a wasted hint).
    hashing.hash_chunks(items, Arg::bytes, |first, chunk, hashes| {
        for (j, (&h, item)) in hashes.iter().zip(chunk).enumerate() {
            batch.filter().prefetch_for(hashes, j);
            let new = match repeat {
                Repeat::Count => batch.add_occurrence(h, limits).map(|a| (a.new, a.stored)),
                Repeat::Skip => batch.insert_if_absent(h, limits).map(|new| (new, true)),
            };
            let (new, was_stored) = new.map_err(|e| (first + j, e))?;
            answers.push(new);
            if was_stored {
                stored.push(item.bytes());
            }
        }
        Ok(())
    })?;
    batch.commit();
    Ok((answers, stored))
}

/// The filter in a key for a read (`None`: a missing key).
fn with_filter<T>(ctx: Ctx, name: &Arg, f: impl FnOnce(Option<&XfFilter>) -> T) -> Result<T, Reply> {
    let key = Key::open(ctx, name, false);
    Ok(f(lookup(&key)?))
}

/// The filter in a key for a read of items (refused if sealed).
fn with_hashing_filter<T>(ctx: Ctx, name: &Arg, f: impl FnOnce(Option<&XfFilter>) -> T) -> Result<T, Reply> {
    let mut key = Key::open(ctx, name, false);
    Ok(f(lookup_hashing(ctx, &mut key)?.map(|f| &*f)))
}

/// `XF.EXISTS key item`: 1 if probably present, 0 if surely not (or no key).
pub fn exists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_single_item(argv)?;
    let found = with_hashing_filter(ctx, &argv[1], |f| f.is_some_and(|f| f.contains(argv[2].bytes())))?;
    COUNTERS.add(LOOKUPS, 1);
    ctx.reply_bool(found);
    Ok(())
}

/// `XF.MEXISTS key item [item ...]`
pub fn mexists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_items(argv)?;
    with_hashing_filter(ctx, &argv[1], |f| {
        ctx.reply_array(argv.len() - 2);
        let Some(f) = f else {
            argv[2..].iter().for_each(|_| ctx.reply_bool(false));
            return;
        };
        // Hashed a chunk at a time, looked up with the memory loads of
        // later items started early (`contains_each`).
        let looked_up: Result<(), Infallible> =
            f.hashing().hash_chunks(&argv[2..], Arg::bytes, |_, _, hashes| {
                f.contains_each(hashes, |found| ctx.reply_bool(found));
                Ok(())
            });
        let Ok(()) = looked_up;
    })?;
    COUNTERS.add(LOOKUPS, (argv.len() - 2) as u64);
    Ok(())
}

/// `XF.COUNT key item`: how many times the item was added (and not
/// deleted); never below the true count, 0 for a missing key.
pub fn count(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_single_item(argv)?;
    let n = with_hashing_filter(ctx, &argv[1], |f| f.map_or(0, |f| f.count(argv[2].bytes())))?;
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
    let mut key = Key::open(ctx, &argv[1], true);
    let Some(f) = lookup_hashing(ctx, &mut key)? else {
        ctx.reply_bool(false);
        return Ok(());
    };
    let size_before = f.size_bytes();
    let removed = f.delete(argv[2].bytes())?;
    COUNTERS.resized(size_before, f.size_bytes());
    ctx.reply_bool(removed);
    if removed {
        COUNTERS.add(ITEMS_DELETED, 1);
        ctx.replicate_verbatim();
        ctx.notify(c"xf.del", &argv[1]);
    }
    Ok(())
}

/// `XF.MERGE destination numkeys source [source ...] [RAISERATE]`:
/// afterwards every item of every source (and of the destination) is in
/// the destination. A missing destination starts as a copy of the first
/// source. A result that would guarantee a rate above the destination's
/// error rate is refused unless `RAISERATE`, which then makes that rate its
/// error rate. All or nothing: an error leaves the destination as it was.
pub fn merge(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let parsed = parse_merge(argv)?;
    let mut dest_key = Key::open(ctx, &argv[1], true);
    let has_dest = lookup_hashing(ctx, &mut dest_key)?.is_some();
    // Each source's own key; `None` where it is the destination.
    let mut source_keys: Vec<Option<Key>> = Vec::with_capacity(parsed.sources.len());
    for name in &argv[parsed.sources] {
        if name.bytes() == argv[1].bytes() {
            if !has_dest {
                return Err(XfError::NotFound.into());
            }
            source_keys.push(None);
            continue;
        }
        let mut key = Key::open(ctx, name, false);
        lookup_hashing(ctx, &mut key)?.ok_or(XfError::NotFound)?;
        source_keys.push(Some(key));
    }
    let limits = config::limits(ctx);
    // Only read until the result replaces the destination.
    let dest = lookup(&dest_key)?;
    let sources =
        source_keys.iter().map(|k| lookup(k.as_ref().unwrap_or(&dest_key))?.ok_or(XfError::NotFound.into()));
    let sources = sources.collect::<Result<Vec<&XfFilter>, Reply>>()?;
    if !ctx.is_replaying() {
        let (entries, limit) = (XfFilter::merge_entries(dest, &sources), max_merge_entries());
        if entries > u128::from(limit) {
            return Err(XfError::MergeTooLong { entries, limit }.into());
        }
    }
    let merged = XfFilter::merged_on(dest, &sources, parsed.raise_rate, limits, merge_threads())
        .inspect_err(count_refusal)?;
    let blocks_before = dest.map_or(merged.block_count(), XfFilter::block_count);
    drop(source_keys);
    COUNTERS.add(EXPANSIONS, merged.block_count().saturating_sub(blocks_before));
    // The merged filter replaces the destination (its TTL goes, as with SUNIONSTORE).
    keys::store(&mut dest_key, merged)?;
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
    ctx.reply_map(14);
    let int = |label: &'static CStr, v: u64| {
        ctx.reply_simple(label);
        ctx.reply_i64(v.min(i64::MAX as u64) as i64);
    };
    int(c"Initial capacity", info.capacity);
    int(c"Max capacity", info.max_capacity);
    int(c"Items", info.items);
    int(c"Entries", info.entries);
    int(c"Size", info.size_bytes);
    int(c"Blocks", info.blocks);
    int(c"Largest block", info.largest_block);
    int(c"Quotients", info.quotients);
    int(c"Deepest level", u64::from(info.deepest_level));
    int(c"Fingerprint bits", u64::from(info.next_fingerprint_bits));
    int(c"Loaded", info.loading.map_or(100, |(got, of)| (got * 100).checked_div(of).unwrap_or(100)));
    ctx.reply_simple(c"Hash");
    ctx.reply_simple(if info.keyed { c"keyed" } else { c"murmur3" });
    ctx.reply_simple(c"Error rate");
    ctx.reply_double(info.error_rate);
    ctx.reply_simple(c"Guaranteed rate");
    ctx.reply_double(info.guaranteed_rate);
    Ok(())
}

/// `XF.SCANDUMP key iterator`: `[next, data]`; iterator 0 gives the header,
/// then the blocks by the MiB, then `[0, ""]`.
pub fn scandump(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let iter = bloomkit_core::xf::args::parse_scandump(argv)?;
    let chunk = with_filter(ctx, &argv[1], |f| {
        f.map(|f| if f.is_loading() { Err(XfError::Loading) } else { Ok(f.chunk_at(iter)) })
    })?
    .ok_or(XfError::NotFound)??;
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
    let mut key = Key::open(ctx, &argv[1], true);
    let limits = config::limits(ctx);
    match keys::lookup_mut::<XfFilter>(&mut key)? {
        None if iter == 1 => {
            let mut f = XfFilter::from_header(data, limits).inspect_err(|_| refused())?;
            super::secret::admit(&mut f, ctx.is_replaying())?;
            keys::store(&mut key, f)?;
        }
        None => return Err(XfError::NotFound.into()),
        Some(f) => {
            let before = f.size_bytes();
            f.load_chunk(iter, data, limits).inspect_err(count_refusal)?;
            COUNTERS.resized(before, f.size_bytes());
        }
    }
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"xf.loadchunk", &argv[1]);
    Ok(())
}

/// `XF.KEYRING key ring`: the primary's key ring (see `secret`), sent by
/// the server itself before a filter that needs it; refused from clients,
/// who can neither read nor set a secret. `key` is the filter that needed
/// it, so that the command routes like the one it precedes.
pub fn keyring(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() != 3 {
        return Err(XfError::WrongArity.into());
    }
    if !ctx.is_replaying() {
        return Err(Reply::Error(
            "ERR XF.KEYRING is sent only by the server itself (replication and the AOF)".into(),
        ));
    }
    super::secret::replay(argv[2].bytes())
        .map_err(|why| Reply::Error(format!("ERR XF.KEYRING: {why}").into()))?;
    ctx.reply_simple(c"OK");
    // A replica's own AOF keeps it too.
    ctx.replicate_verbatim();
    Ok(())
}
