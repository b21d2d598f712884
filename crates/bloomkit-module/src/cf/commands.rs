//! The CF.* commands: parse in core, open the key, call core, reply,
//! replicate, notify.
//!
//! Replies, error texts and their order follow RedisBloom 2.8.2 as measured
//! (see `tests/cf_differential.rs`), RESP2 and RESP3 quirks included:
//! `CF.INSERTNX` answers integers where `CF.INSERT` answers booleans, a full
//! filter is `-1` in RESP2 and `false` in RESP3 for `CF.INSERT`, `CF.DEL`
//! and `CF.COMPACT` answer a key of another type as missing.
//!
//! Replication leaves replicas byte-identical: a filter a write creates
//! reaches them as `CF.LOADCHUNK key 1 <header>` (its exact parameters), a
//! write that changed nothing is not sent, and a batch cut short by an
//! error is sent as the part that ran.

use std::ffi::CStr;

use bloomkit_core::cf::args::arity;
use bloomkit_core::cf::args::{parse_insert, parse_loadchunk_pos, parse_reserve, parse_scandump_pos};
use bloomkit_core::cf::{CfError, CuckooFilter, CuckooParams, Insert, Lookup};
use bloomkit_core::{Limits, Reply, ReplyError};

use super::counters::{self, COUNTERS};
use crate::command::Outcome;
use crate::ffi::{Arg, Ctx, Key};
use crate::value::Value;
use crate::{config, keys};

fn lookup(key: &mut Key) -> Result<Option<&mut CuckooFilter>, Reply> {
    keys::lookup_mut(key)
}

/// A new filter stored in an empty key opened for writing, and sent to
/// replicas with its exact parameters.
fn create<'k>(
    ctx: Ctx,
    key: &'k mut Key,
    name: &Arg,
    params: CuckooParams,
) -> Result<&'k mut CuckooFilter, Reply> {
    let f = CuckooFilter::new(params, config::limits(ctx))
        .inspect_err(|_| counters::COUNTERS.add(counters::REFUSED, 1))?;
    let header = f.encode_header();
    let stored = keys::store(key, f)?;
    ctx.replicate_chunk(c"CF.LOADCHUNK", name, 1, &header);
    Ok(stored)
}

/// `CF.RESERVE key capacity [BUCKETSIZE n] [MAXITERATIONS n] [EXPANSION n]`
pub fn reserve(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let params = parse_reserve(argv, &super::settings::defaults(), config::redisbloom_level())?;
    let mut key = Key::open(ctx, &argv[1], true);
    if lookup(&mut key)?.is_some() {
        return Err(CfError::ItemExists.into());
    }
    create(ctx, &mut key, &argv[1], params)?;
    ctx.reply_simple(c"OK");
    ctx.notify(c"cf.reserve", &argv[1]);
    Ok(())
}

/// How a batch of inserts answers each item.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// `CF.ADD`/`CF.ADDNX`: one boolean; a full filter is an error.
    Single,
    /// `CF.INSERT`: booleans; a full filter is -1 (RESP2) or false (RESP3).
    Booleans,
    /// `CF.INSERTNX`: 1, 0 or -1.
    Integers,
}

/// `CF.ADD key item` → 1 added; creates the key with the default capacity.
pub fn add(ctx: Ctx, argv: &[Arg]) -> Outcome {
    add_single(ctx, argv, false, c"cf.add")
}

/// `CF.ADDNX key item` → 1 added, 0 may already be present.
pub fn addnx(ctx: Ctx, argv: &[Arg]) -> Outcome {
    add_single(ctx, argv, true, c"cf.addnx")
}

fn add_single(ctx: Ctx, argv: &[Arg], nx: bool, event: &'static CStr) -> Outcome {
    arity::ADD_ONE.check(argv)?;
    insert_items(ctx, argv, 2, Some(super::settings::defaults().capacity), nx, Shape::Single, event)
}

/// `CF.INSERT key [CAPACITY c] [NOCREATE] ITEMS item...`
pub fn insert(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let parsed = parse_insert(argv, &super::settings::defaults(), config::redisbloom_level())?;
    let create_with = parsed.create.then_some(parsed.capacity);
    insert_items(ctx, argv, parsed.items_from, create_with, false, Shape::Booleans, c"cf.insert")
}

/// `CF.INSERTNX key [CAPACITY c] [NOCREATE] ITEMS item...`
pub fn insertnx(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let parsed = parse_insert(argv, &super::settings::defaults(), config::redisbloom_level())?;
    let create_with = parsed.create.then_some(parsed.capacity);
    insert_items(ctx, argv, parsed.items_from, create_with, true, Shape::Integers, c"cf.insertnx")
}

/// The body of ADD, ADDNX, INSERT and INSERTNX: RedisBloom's `cfInsertCommon`.
fn insert_items(
    ctx: Ctx,
    argv: &[Arg],
    items_from: usize,
    create_with: Option<u64>,
    nx: bool,
    shape: Shape,
    event: &'static CStr,
) -> Outcome {
    let mut key = Key::open(ctx, &argv[1], true);
    let (f, created) = match (lookup(&mut key)?, create_with) {
        (Some(f), _) => (f, false),
        (None, Some(capacity)) => {
            (create(ctx, &mut key, &argv[1], super::settings::defaults().params(capacity))?, true)
        }
        (None, None) => return Err(CfError::NotFound.into()),
    };
    f.check_writable(super::settings::defaults().max_expansions)?;
    let limits: Limits = config::limits(ctx);
    let items = &argv[items_from..];
    let array = (shape != Shape::Single).then(|| ctx.postponed_array());
    let mut added = 0u64;
    let mut ran = 0usize;
    let mut failed: Option<CfError> = None;
    for item in items {
        let l = Lookup::new(item.bytes());
        // Growth allocates: `write` keeps INFO's bytes current.
        let outcome = f.write(|f| if nx { f.insert_unique(&l, limits) } else { f.insert(&l, limits) });
        let inserted = matches!(outcome, Ok(Insert::Inserted));
        match (outcome, shape) {
            (Ok(Insert::Inserted), Shape::Integers) => ctx.reply_i64(1),
            (Ok(Insert::Inserted), _) => ctx.reply_bool(true),
            (Ok(Insert::Exists), Shape::Integers) => ctx.reply_i64(0),
            (Ok(Insert::Exists), _) => ctx.reply_bool(false),
            (Ok(Insert::Full), Shape::Single) => failed = Some(CfError::Full),
            (Ok(Insert::Full), Shape::Booleans) if ctx.is_resp3() => ctx.reply_bool(false),
            (Ok(Insert::Full), _) => ctx.reply_i64(-1),
            (Err(e), _) => {
                counters::COUNTERS.add(counters::REFUSED, 1);
                failed = Some(e);
            }
        }
        if failed.is_some() {
            break;
        }
        added += u64::from(inserted);
        ran += 1;
    }
    if let Some(e) = &failed {
        ctx.reply_error(&e.message());
    }
    if let Some(array) = array {
        array.close(ran + usize::from(failed.is_some()));
    }
    counters::wrote(added, 0);
    // An insert that changed nothing is not replicated: replicas already agree.
    if added > 0 {
        if failed.is_none() {
            ctx.replicate_verbatim();
        } else {
            let command = if nx { c"CF.INSERTNX" } else { c"CF.INSERT" };
            ctx.replicate_items(command, &argv[1], Some(c"ITEMS"), &items[..ran]);
        }
    }
    if created || added > 0 {
        ctx.notify(event, &argv[1]);
    }
    Ok(())
}

/// Runs `f` on the key's filter for a read; a missing key or one of another
/// type reads as empty (RedisBloom answers 0 there, never an error).
fn with_filter_for_read<T>(ctx: Ctx, name: &Arg, f: impl FnOnce(Option<&CuckooFilter>) -> T) -> T {
    let key = Key::open(ctx, name, false);
    f(keys::ours(&key))
}

/// `CF.EXISTS key item`
pub fn exists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::EXISTS.check(argv)?;
    let found =
        with_filter_for_read(ctx, &argv[1], |f| f.is_some_and(|f| f.contains(&Lookup::new(argv[2].bytes()))));
    COUNTERS.add_on_main_thread(counters::LOOKUPS, 1);
    ctx.reply_bool(found);
    Ok(())
}

/// `CF.MEXISTS key item...`
pub fn mexists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::MEXISTS.check(argv)?;
    let items = &argv[2..];
    with_filter_for_read(ctx, &argv[1], |f| {
        ctx.reply_array(items.len());
        for item in items {
            ctx.reply_bool(f.is_some_and(|f| f.contains(&Lookup::new(item.bytes()))));
        }
    });
    COUNTERS.add_on_main_thread(counters::LOOKUPS, items.len() as u64);
    Ok(())
}

/// `CF.COUNT key item` → copies that may be present; 0 for a missing key.
pub fn count(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::COUNT.check(argv)?;
    let n = with_filter_for_read(ctx, &argv[1], |f| f.map_or(0, |f| f.count(&Lookup::new(argv[2].bytes()))));
    COUNTERS.add_on_main_thread(counters::LOOKUPS, 1);
    ctx.reply_i64(n as i64);
    Ok(())
}

/// The filter in a key opened for writing, or `missing` when the key is
/// empty or holds another type (as `CF.DEL` and `CF.COMPACT` answer).
fn writable(key: &mut Key, missing: CfError) -> Result<&mut CuckooFilter, Reply> {
    keys::ours_mut(key).ok_or_else(|| missing.into())
}

/// `CF.DEL key item` → 1 deleted one copy, 0 not found.
pub fn del(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::DEL.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    let f = writable(&mut key, CfError::DelNotFound)?;
    // A delete may compact, freeing sub-filters.
    let deleted = f.write(|f| f.delete(&Lookup::new(argv[2].bytes())));
    counters::wrote(0, u64::from(deleted));
    ctx.reply_bool(deleted);
    if deleted {
        ctx.replicate_verbatim();
        ctx.notify(c"cf.del", &argv[1]);
    }
    Ok(())
}

/// `CF.COMPACT key`: moves fingerprints into older sub-filters, frees emptied ones.
pub fn compact(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::COMPACT.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    let f = writable(&mut key, CfError::CompactNotFound)?;
    f.write(|f| f.compact(true));
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"cf.compact", &argv[1]);
    Ok(())
}

/// The filter in a key for commands that report on it: `ERR not found` when
/// missing, WRONGTYPE for another type.
fn with_existing<T>(ctx: Ctx, name: &Arg, f: impl FnOnce(&CuckooFilter) -> T) -> Result<T, Reply> {
    let key = Key::open(ctx, name, false);
    match keys::lookup(&key)? {
        Some(filter) => Ok(f(filter)),
        None => Err(CfError::NotFound.into()),
    }
}

/// `CF.INFO key` → a map of eight figures (a flat array in RESP2).
pub fn info(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::INFO.check(argv)?;
    with_existing(ctx, &argv[1], |f| {
        let s = f.shape();
        let fields: [(&CStr, u64); 8] = [
            (c"Size", f.size_bytes()),
            (c"Number of buckets", s.buckets),
            (c"Number of filters", f.filters().len() as u64),
            (c"Number of items inserted", f.items()),
            (c"Number of items deleted", f.deletes()),
            (c"Bucket size", u64::from(s.bucket_size)),
            (c"Expansion rate", u64::from(s.expansion)),
            (c"Max iterations", u64::from(s.max_iterations)),
        ];
        ctx.reply_map(fields.len());
        for (label, value) in fields {
            ctx.reply_simple(label);
            ctx.reply_i64(value as i64);
        }
    })?;
    Ok(())
}

/// `CF.DEBUG key` → one line of parameters and counters.
pub fn debug(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::DEBUG.check(argv)?;
    with_existing(ctx, &argv[1], |f| ctx.reply_bulk(f.debug_line().as_bytes()))?;
    Ok(())
}

/// `CF.SCANDUMP key pos` → `[next, data]`: the header at 0, then the
/// sub-filters; `[0, nil]` at the end, and for a filter with no items.
pub fn scandump(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::SCANDUMP.check(argv)?;
    let pos = parse_scandump_pos(argv[2].bytes())?;
    with_existing(ctx, &argv[1], |f| {
        ctx.reply_array(2);
        let chunk = match pos {
            _ if f.items() == 0 => None,
            0 => {
                ctx.reply_i64(1);
                ctx.reply_bulk(&f.encode_header());
                return;
            }
            _ => f.chunk_at(pos),
        };
        match chunk {
            Some((next, data)) => {
                ctx.reply_i64(next);
                ctx.reply_bulk(data);
            }
            None => {
                ctx.reply_i64(0);
                ctx.reply_null();
            }
        }
    })?;
    Ok(())
}

/// `CF.LOADCHUNK key pos data`: pos 1 on an empty key is the header.
pub fn loadchunk(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::LOADCHUNK.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    let pos = parse_loadchunk_pos(argv[2].bytes())?;
    let data = argv[3].bytes();
    match (lookup(&mut key)?, pos) {
        (None, 1) => {
            if data.len() != bloomkit_core::cf::HEADER_LEN {
                return Err(CfError::InvalidHeader.into());
            }
            let f = CuckooFilter::from_header(data, config::limits(ctx))
                .inspect_err(|_| counters::COUNTERS.add(counters::REFUSED, 1))?;
            keys::store(&mut key, f)?;
        }
        (Some(_), 1) => return Err(CfError::ItemExists.into()),
        (None, _) => return Err(CfError::NotFound.into()),
        (Some(f), _) => f.load_chunk(pos, data)?,
    }
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"cf.loadchunk", &argv[1]);
    Ok(())
}
