//! The BF.* commands: parse, open the key, call core, reply, replicate, notify.
//!
//! Reply shapes, error texts and quirks follow RedisBloom 2.8.2 as measured
//! (see the differential tests); where bloomkit differs on purpose, README says so.
//!
//! A key may also hold a valkey-bloom filter (`bloomfltr`):
//! [`lookup::lookup_bloom`] is the one place that tells the two apart, and each command hands such a
//! key to `vbloom::commands`, which answers as valkey-bloom does. Under
//! `bf.compat valkey-bloom` it gets empty keys too (new filters are
//! valkey-bloom's), and a key of another type is WRONGTYPE for every
//! command, readers included, as in valkey-bloom.

use std::ffi::CStr;

use bloomkit_core::bf::args::arity;
use bloomkit_core::bf::args::{parse_insert, parse_reserve, InfoField};
use bloomkit_core::bf::{scandump as dump, BfError, Chain, ChainParams};
use bloomkit_core::common::compat::Compat;
use bloomkit_core::common::fmt::format_g;
use bloomkit_core::common::parse::parse_long_long;
use bloomkit_core::vbloom::ValkeyError;
use bloomkit_core::{Limits, Reply, ReplyError};

use super::counters;
use super::lookup::{lookup_bloom as lookup, lookup_bloom_mut as lookup_mut, Found, FoundMut as Filter};
use crate::command::Outcome;
use crate::ffi::{Arg, Ctx, Key};
use crate::value::Value;
use crate::vbloom;
use crate::{config, keys};

/// A new chain stored in an empty key opened for writing.
fn create(
    key: &mut Key,
    ctx: Ctx,
    make: impl FnOnce(Limits) -> Result<Chain, BfError>,
) -> Result<&mut Chain, Reply> {
    let chain = make(config::limits(ctx)).map_err(|e| {
        counters::COUNTERS.add(counters::REFUSED, 1);
        // RedisBloom 8 words an allocation failure its own way.
        match e {
            BfError::OutOfMemory if config::redisbloom_level() == Compat::RedisBloom8 => {
                BfError::InsufficientMemory
            }
            e => e,
        }
    })?;
    keys::store(key, chain)
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING]`
pub fn reserve(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::RESERVE.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    // Whether the key holds valkey-bloom's object (`Some(true)`) or a chain.
    let found = lookup(&key).map(|found| found.map(|f| matches!(f, Found::Valkey(_))));
    match found {
        Ok(Some(true)) => return vbloom::commands::reserve_refused(argv, ValkeyError::ItemExists.into()),
        Ok(None) if valkey_bloom() => return vbloom::commands::reserve_new(ctx, argv, &mut key),
        Err(e) if valkey_bloom() => return vbloom::commands::reserve_refused(argv, e),
        _ => {}
    }
    let params = parse_reserve(argv, &super::settings::defaults(), config::redisbloom_level())?;
    if found?.is_some() {
        return Err(BfError::ItemExists.into());
    }
    let chain = create(&mut key, ctx, |limits| Chain::new(params, limits))?;
    ctx.reply_simple(c"OK");
    replicate_creation(ctx, &argv[1], chain);
    ctx.notify(c"bf.reserve", &argv[1]);
    Ok(())
}

/// `BF.ADD key item` → 1 new, 0 probably present.
pub fn add(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::ADD.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    match lookup_mut(&mut key)? {
        Some(Filter::Valkey(o)) => vbloom::commands::add(ctx, argv, o, 2, false),
        Some(Filter::Chain(_)) => insert_items(ctx, argv, &mut key, 2, None, false, c"bf.add"),
        None if valkey_bloom() => vbloom::commands::add_new(ctx, argv, &mut key, false),
        None => {
            insert_items(ctx, argv, &mut key, 2, Some(super::settings::defaults().params()), false, c"bf.add")
        }
    }
}

/// `BF.MADD key item...` → one reply per item.
pub fn madd(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::MADD.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    match lookup_mut(&mut key)? {
        Some(Filter::Valkey(o)) => vbloom::commands::add(ctx, argv, o, 2, true),
        Some(Filter::Chain(_)) => insert_items(ctx, argv, &mut key, 2, None, true, c"bf.madd"),
        None if valkey_bloom() => vbloom::commands::add_new(ctx, argv, &mut key, true),
        None => {
            insert_items(ctx, argv, &mut key, 2, Some(super::settings::defaults().params()), true, c"bf.madd")
        }
    }
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING] ITEMS item...`
pub fn insert(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::INSERT.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    // Whether the key holds valkey-bloom's object (`Some(true)`) or a chain.
    let found = lookup(&key).map(|found| found.map(|f| matches!(f, Found::Valkey(_))));
    match found {
        Ok(Some(true)) => return vbloom::commands::insert(ctx, argv, &mut key),
        Ok(None) if valkey_bloom() || (ctx.is_replaying() && names_seed(argv)) => {
            return vbloom::commands::insert(ctx, argv, &mut key)
        }
        Err(e) if valkey_bloom() => return vbloom::commands::insert_refused(ctx, argv, e),
        _ => {}
    }
    let parsed = parse_insert(argv, &super::settings::defaults(), config::redisbloom_level())?;
    // Another type is WRONGTYPE after the arguments' own errors, as in RedisBloom.
    found?;
    let create_with = parsed.create.then_some(parsed.params);
    insert_items(ctx, argv, &mut key, parsed.items_from, create_with, true, c"bf.insert")
}

/// The body of ADD, MADD and INSERT on a key that holds a chain or is
/// empty: RedisBloom's `bfInsertCommon`.
fn insert_items(
    ctx: Ctx,
    argv: &[Arg],
    key: &mut Key,
    items_from: usize,
    create_with: Option<ChainParams>,
    multi: bool,
    event: &'static CStr,
) -> Outcome {
    let (chain, created) = match (keys::lookup_mut::<Chain>(key)?, create_with) {
        (Some(chain), _) => (chain, false),
        (None, Some(params)) => (create(key, ctx, |limits| Chain::new(params, limits))?, true),
        (None, None) => return Err(BfError::NotFound.into()),
    };
    if created {
        replicate_creation(ctx, &argv[1], chain);
    }
    let limits = config::limits(ctx);
    let filters_before = chain.filters().len();
    let items = &argv[items_from..];
    let array = multi.then(|| ctx.postponed_array());
    let mut added = 0u64;
    let mut replied = 0usize;
    let mut stopped = false;
    // A scale-out allocates: `write` keeps INFO's bytes current.
    chain.write(|chain| {
        chain.add_each(items, limits, |outcome| {
            replied += 1;
            match outcome {
                Ok(new) => {
                    added += u64::from(new);
                    ctx.reply_bool(new);
                    true
                }
                Err(e) => {
                    if !matches!(e, BfError::NonScalingFull) {
                        counters::COUNTERS.add(counters::REFUSED, 1);
                    }
                    ctx.reply_error(&e.message());
                    stopped = true;
                    false
                }
            }
        })
    });
    if let Some(array) = array {
        array.close(replied);
    }
    counters::wrote(added, chain, filters_before);
    // An add that changed nothing is not replicated: replicas already agree.
    // One that an error cut short replicates the items it did: a replica or
    // an AOF replay applies no limits (the size limit, maxmemory), so the
    // whole command would go further there than here.
    if added > 0 {
        if stopped {
            let done = replied - 1;
            ctx.replicate_items(c"BF.MADD", &argv[1], None, &items[..done]);
        } else {
            ctx.replicate_verbatim();
        }
    }
    if created || added > 0 {
        ctx.notify(event, &argv[1]);
    }
    Ok(())
}

/// A new filter reaches replicas and the AOF as `BF.LOADCHUNK key 1 <header>`:
/// the exact parameters it was made with, whatever the defaults, expansion
/// and limits configured on the other side. Items added by the same command
/// follow as the command itself (the server wraps both in MULTI/EXEC).
fn replicate_creation(ctx: Ctx, key: &Arg, chain: &Chain) {
    ctx.replicate_chunk(c"BF.LOADCHUNK", key, 1, &dump::encode_header(chain));
}

/// Whether a `BF.INSERT` names a `SEED` (before its items): valkey-bloom's
/// form of a creation, which RedisBloom's `BF.INSERT` never has. A replica
/// or an AOF replay creates a `bloomfltr` object from it under every
/// `bf.compat`, so that a primary's valkey-bloom filters, or an AOF written
/// under `valkey-bloom` and replayed after the setting changed, are kept.
fn names_seed(argv: &[Arg]) -> bool {
    argv[2..]
        .iter()
        .map(|a| a.bytes())
        .take_while(|a| !a.eq_ignore_ascii_case(b"ITEMS"))
        .any(|a| a.eq_ignore_ascii_case(b"SEED"))
}

/// Whether `bf.compat valkey-bloom` is in force.
fn valkey_bloom() -> bool {
    config::compat() == Compat::ValkeyBloom
}

/// Runs `f` on the key's filter for a read; a missing key reads as empty,
/// and so does one of another type (RedisBloom answers 0 there, never an
/// error), except under `bf.compat valkey-bloom` (WRONGTYPE).
fn with_filter_for_read<T>(ctx: Ctx, name: &Arg, f: impl FnOnce(Option<Found>) -> T) -> Result<T, Reply> {
    let key = Key::open(ctx, name, false);
    match lookup(&key) {
        Ok(Some(filter)) => Ok(f(Some(filter))),
        Err(e) if valkey_bloom() => Err(e),
        _ => Ok(f(None)),
    }
}

/// A missing key's answer to `BF.EXISTS`: valkey-bloom's integer 0, or
/// RedisBloom's false (a boolean in RESP3).
fn reply_absent(ctx: Ctx) {
    if valkey_bloom() {
        ctx.reply_i64(0)
    } else {
        ctx.reply_bool(false)
    }
}

/// `BF.EXISTS key item`
pub fn exists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::EXISTS.check(argv)?;
    let item = argv[2].bytes();
    with_filter_for_read(ctx, &argv[1], |filter| match filter {
        Some(Found::Chain(c)) => ctx.reply_bool(c.contains(item)),
        // valkey-bloom answers integers, also in RESP3.
        Some(Found::Valkey(o)) => ctx.reply_i64(i64::from(o.contains(item))),
        None => reply_absent(ctx),
    })?;
    counters::COUNTERS.add_on_main_thread(counters::LOOKUPS, 1);
    Ok(())
}

/// `BF.MEXISTS key item...`
pub fn mexists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::MEXISTS.check(argv)?;
    let items = &argv[2..];
    with_filter_for_read(ctx, &argv[1], |filter| {
        ctx.reply_array(items.len());
        match filter {
            Some(Found::Chain(chain)) => chain.contains_each(items, |found| ctx.reply_bool(found)),
            Some(Found::Valkey(o)) => {
                items.iter().for_each(|i| ctx.reply_i64(i64::from(o.contains(i.bytes()))))
            }
            None => items.iter().for_each(|_| reply_absent(ctx)),
        }
    })?;
    counters::COUNTERS.add_on_main_thread(counters::LOOKUPS, items.len() as u64);
    Ok(())
}

/// The filter in a key for commands that report on it: errors when missing.
fn with_existing<T>(ctx: Ctx, name: &Arg, f: impl FnOnce(Found) -> T) -> Result<T, Reply> {
    let key = Key::open(ctx, name, false);
    match lookup(&key)? {
        Some(filter) => Ok(f(filter)),
        None => Err(BfError::NotFound.into()),
    }
}

/// The chain in a key for commands that only RedisBloom's filters have
/// (valkey-bloom has no SCANDUMP): a `bloomfltr` key is refused, saying so.
fn with_chain<T>(ctx: Ctx, name: &Arg, f: impl FnOnce(&Chain) -> T) -> Result<T, Reply> {
    with_existing(ctx, name, |found| match found {
        Found::Chain(chain) => Ok(f(chain)),
        Found::Valkey(_) => Err(ValkeyError::NoChunks.into()),
    })?
}

/// `BF.CARD key` → items added; 0 for a missing key.
pub fn card(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::CARD.check(argv)?;
    let key = Key::open(ctx, &argv[1], false);
    let items = lookup(&key)?.map_or(0, |f| match f {
        Found::Chain(c) => c.items(),
        Found::Valkey(o) => o.items(),
    });
    ctx.reply_i64(items as i64);
    Ok(())
}

/// `BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION]`
pub fn info(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::INFO.check(argv)?;
    with_existing(ctx, &argv[1], |found| {
        let chain = match found {
            Found::Chain(chain) => chain,
            Found::Valkey(o) => return vbloom::commands::info(ctx, argv, o),
        };
        let value = |field: InfoField| match field {
            InfoField::Capacity => Some(chain.capacity()),
            InfoField::Size => Some(chain.size_bytes()),
            InfoField::Filters => Some(chain.filters().len() as u64),
            InfoField::Items => Some(chain.items()),
            InfoField::Expansion => chain.expansion().map(u64::from),
        };
        let reply_value = |v: Option<u64>| match v {
            Some(v) => ctx.reply_i64(v as i64),
            None => ctx.reply_null(),
        };
        match argv.get(2) {
            None => {
                ctx.reply_map(InfoField::ALL.len());
                for field in InfoField::ALL {
                    ctx.reply_simple(field.label());
                    reply_value(value(field));
                }
                Ok(())
            }
            Some(word) => {
                let field = InfoField::parse(word.bytes())?;
                // RESP2: a one-element array; RESP3: a one-entry map.
                if ctx.is_resp3() {
                    ctx.reply_map(1);
                    ctx.reply_simple(field.label());
                } else {
                    ctx.reply_array(1);
                }
                reply_value(value(field));
                Ok(())
            }
        }
    })?
}

/// `BF.DEBUG key` → `size:<items>` then one line per sub-filter.
pub fn debug(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::DEBUG.check(argv)?;
    with_existing(ctx, &argv[1], |found| {
        let chain = match found {
            Found::Chain(chain) => chain,
            Found::Valkey(o) => return vbloom::commands::debug(ctx, o),
        };
        ctx.reply_array(1 + chain.filters().len());
        ctx.reply_bulk(format!("size:{}", chain.items()).as_bytes());
        for f in chain.filters() {
            let s = &f.shape();
            let bits = if s.bits != 0 { s.bits } else { 1u64 << s.n2 };
            let line = format!(
                "bytes:{} bits:{} hashes:{} hashwidth:{} capacity:{} size:{} ratio:{}",
                s.bytes,
                bits,
                s.hashes,
                chain.width().bits(),
                s.capacity,
                f.items,
                format_g(s.error)
            );
            ctx.reply_bulk(line.as_bytes());
        }
    })?;
    Ok(())
}

/// `BF.SCANDUMP key iter` → `[next_iter, data]`; iter 0 gives the header.
pub fn scandump(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::SCANDUMP.check(argv)?;
    with_chain(ctx, &argv[1], |chain| {
        let iter = parse_long_long(argv[2].bytes()).ok_or(BfError::ScanDumpIterNotNumeric)?;
        ctx.reply_array(2);
        if iter == 0 {
            ctx.reply_i64(1);
            ctx.reply_bulk(&dump::encode_header(chain));
        } else {
            let (next, data) = dump::chunk_at(chain, iter);
            ctx.reply_i64(next);
            ctx.reply_bulk(data);
        }
        Ok::<(), Reply>(())
    })??;
    Ok(())
}

/// `BF.LOADCHUNK key iter data`: iter 1 on an empty key is the header.
pub fn loadchunk(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::LOADCHUNK.check(argv)?;
    let iter = parse_long_long(argv[2].bytes()).ok_or(BfError::LoadChunkIterNotNumeric)?;
    let data = argv[3].bytes();
    let mut key = Key::open(ctx, &argv[1], true);
    match lookup_mut(&mut key)? {
        Some(Filter::Valkey(_)) => return Err(ValkeyError::NoChunks.into()),
        None if iter == 1 => {
            create(&mut key, ctx, |limits| dump::decode_header(data, limits))?;
        }
        None => return Err(BfError::NotFound.into()),
        Some(Filter::Chain(chain)) => dump::load_chunk(chain, iter, data)?,
    }
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"bf.loadchunk", &argv[1]);
    Ok(())
}
