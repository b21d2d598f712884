//! `BF.*` on a `bloomfltr` key, answered as valkey-bloom answers: its
//! argument rules, replies (integers, not booleans; `BF.INFO` as an array
//! with its extra fields), errors, scaling and keyspace events
//! (`bloom.add`, `bloom.reserve`). `bf::commands` finds the key and hands
//! it here; `BF.LOAD` (valkey-bloom's AOF) is the one command of its own.
//!
//! Replication: a write replicates what it did, so replicas and the AOF
//! apply the same adds to the same object and get the same sub-filters (a
//! scale-out is deterministic: its size comes from the object, its seed is
//! the first sub-filter's). An add that completed replicates verbatim; one
//! that stopped at an error (a scale-out refused by the limit) replicates
//! as `BF.MADD key <the items before it>`, since a replica or a replay
//! does not apply the limit; `BF.LOAD` replicates verbatim.

use std::ptr::NonNull;

use bloomkit_core::common::fmt::format_g;
use bloomkit_core::vbloom::{self, InfoField, Object, ValkeyError};
use bloomkit_core::{Reply, ReplyError};
use redis_module::raw;

use crate::command::Outcome;
use crate::ffi::{api, Arg, Ctx, Key};
use crate::keys::lookup_bloom as lookup;
use crate::{config, keys, stats};

/// `BF.LOAD key blob`: creates the object valkey-bloom's AOF rewrite wrote.
pub fn load(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() != 3 {
        return Err(Reply::WrongArity);
    }
    let key = Key::open(ctx, &argv[1], true);
    if lookup(&key)?.is_some() {
        return Err(ValkeyError::KeyExists.into());
    }
    // Checked and compared with the limit before anything is allocated.
    let object = Object::decode_blob(argv[2].bytes(), config::limits(ctx))?;
    keys::store(&key, object)?;
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"bloom.reserve", &argv[1]);
    Ok(())
}

/// `BF.RESERVE` on a `bloomfltr` key: its arguments are checked, then the
/// key is taken.
pub fn reserve(argv: &[Arg]) -> Outcome {
    vbloom::check_reserve(argv)?;
    Err(ValkeyError::ItemExists.into())
}

/// `BF.INSERT` on a `bloomfltr` key: the options are checked (they change
/// nothing on an existing object), then the items are added.
pub fn insert(ctx: Ctx, argv: &[Arg], object: NonNull<Object>) -> Outcome {
    let items_from = vbloom::parse_insert(argv, config::limits(ctx))?;
    add(ctx, argv, object, items_from, true)
}

/// `BF.ADD` (one item, its result or error as the reply), `BF.MADD` and
/// `BF.INSERT` (an array; the first error ends it, as its last element).
/// A non-scaling object that cannot take the batch refuses all of it.
pub fn add(ctx: Ctx, argv: &[Arg], mut object: NonNull<Object>, items_from: usize, multi: bool) -> Outcome {
    // SAFETY: the keyspace owns the object and nothing else touches it while
    // this command runs (commands run one at a time on the main thread).
    let o = unsafe { object.as_mut() };
    let limits = config::limits(ctx);
    let items = &argv[items_from..];
    let (size_before, filters_before) = (o.size(), o.filters().len());
    let mut added = 0u64;
    let mut completed = 0usize;
    if multi {
        o.check_room(items)?;
        // SAFETY: valid context; the length is set below.
        unsafe { api!(RedisModule_ReplyWithArray)(ctx.0, raw::REDISMODULE_POSTPONED_LEN as _) };
        let mut replied = 0usize;
        o.add_each(items, limits, |outcome| {
            replied += 1;
            match outcome {
                Ok(new) => {
                    added += u64::from(new);
                    completed += 1;
                    ctx.reply_i64(i64::from(new));
                    true
                }
                Err(e) => {
                    ctx.reply_error(&e.message());
                    false
                }
            }
        });
        // SAFETY: closes the postponed array opened above.
        unsafe { api!(RedisModule_ReplySetArrayLength)(ctx.0, replied as _) };
    } else {
        let new = o.add(items[0].bytes(), limits)?;
        added = u64::from(new);
        completed = 1;
        ctx.reply_i64(i64::from(new));
    }
    stats::grew(added, o.size() - size_before, (o.filters().len() - filters_before) as u64);
    if added > 0 {
        if completed == items.len() {
            ctx.replicate_verbatim();
        } else {
            ctx.replicate_items(c"BF.MADD", &argv[1], None, &items[..completed]);
        }
        ctx.notify(c"bloom.add", &argv[1]);
    }
    Ok(())
}

/// `BF.INFO key [field]`: valkey-bloom's array (scaling objects add
/// `Tightening ratio` and `Max scaled capacity`), or one bare value.
pub fn info(ctx: Ctx, argv: &[Arg], o: &Object) -> Outcome {
    let limits = config::limits(ctx);
    let reply_expansion = || match o.expansion() {
        Some(e) => ctx.reply_i64(i64::from(e)),
        None => ctx.reply_null(),
    };
    let Some(field) = argv.get(2) else {
        let scaling = o.expansion().is_some();
        ctx.reply_array(if scaling { 16 } else { 12 });
        for (label, value) in [
            (c"Capacity", o.capacity()),
            (c"Size", o.size()),
            (c"Number of filters", o.filters().len() as u64),
            (c"Number of items inserted", o.items()),
        ] {
            ctx.reply_simple(label);
            ctx.reply_i64(value as i64);
        }
        ctx.reply_simple(c"Error rate");
        ctx.reply_double(o.fp_rate());
        ctx.reply_simple(c"Expansion rate");
        reply_expansion();
        if scaling {
            ctx.reply_simple(c"Tightening ratio");
            ctx.reply_double(o.tightening());
            ctx.reply_simple(c"Max scaled capacity");
            ctx.reply_i64(o.max_scaled_capacity(limits) as i64);
        }
        return Ok(());
    };
    let scaling_only = || o.expansion().ok_or(ValkeyError::InvalidInfoField);
    match InfoField::parse(field.bytes())? {
        InfoField::Capacity => ctx.reply_i64(o.capacity() as i64),
        InfoField::Size => ctx.reply_i64(o.size() as i64),
        InfoField::Filters => ctx.reply_i64(o.filters().len() as i64),
        InfoField::Items => ctx.reply_i64(o.items() as i64),
        InfoField::Error => ctx.reply_double(o.fp_rate()),
        InfoField::Expansion => reply_expansion(),
        InfoField::Tightening => {
            scaling_only()?;
            ctx.reply_double(o.tightening());
        }
        InfoField::MaxScaledCapacity => {
            scaling_only()?;
            ctx.reply_i64(o.max_scaled_capacity(limits) as i64);
        }
    }
    Ok(())
}

/// `BF.DEBUG key` (valkey-bloom has none): `size:<items>`, then one line per
/// sub-filter in RedisBloom's format (`ratio` is the sub-filter's error rate).
pub fn debug(ctx: Ctx, o: &Object) {
    ctx.reply_array(1 + o.filters().len());
    ctx.reply_bulk(format!("size:{}", o.items()).as_bytes());
    let mut ratio = o.fp_rate();
    for f in o.filters() {
        let line = format!(
            "bytes:{} bits:{} hashes:{} hashwidth:64 capacity:{} size:{} ratio:{}",
            f.bitmap_len(),
            f.bitmap_len() * 8,
            f.hashes(),
            f.capacity(),
            f.items(),
            format_g(ratio)
        );
        ctx.reply_bulk(line.as_bytes());
        ratio *= o.tightening();
    }
}
