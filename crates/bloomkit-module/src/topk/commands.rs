//! The TOPK.* commands: parse in core, open the key, call core, reply,
//! replicate.
//!
//! Replies, error texts and their order follow RedisBloom 2.8.2 as measured
//! (see `tests/topk_differential.rs`), with its fixes (README, "Top-K"):
//! items are replied whole (2.8.2 cuts them at a NUL), and `TOPK.INCRBY`'s
//! array holds as many elements as its header says.
//!
//! Writes are replicated verbatim, as RedisBloom does: the decay draws are
//! a function of the sketch's state (see `bloomkit_core::topk::sketch`), so
//! the same command leaves a replica or an AOF replay identical.

use std::ffi::CStr;

use bloomkit_core::topk::args::{
    check_incrby_arity, check_info_arity, check_items_arity, check_reserve_arity, parse_increment,
    parse_list, parse_reserve,
};
use bloomkit_core::topk::{TopK, TopkError};
use bloomkit_core::{Reply, ReplyError};

use super::counters::{self, COUNTERS};
use crate::command::Outcome;
use crate::ffi::{Arg, Ctx, Key};
use crate::value::Value;
use crate::{config, keys};

/// The sketch in a key: `TopK: key does not exist` when it is empty,
/// WRONGTYPE when it holds anything else.
fn existing(key: &Key) -> Result<&TopK, Reply> {
    keys::lookup::<TopK>(key)?.ok_or_else(|| TopkError::KeyMissing.into())
}

/// [`existing`] for a write.
fn existing_mut(key: &mut Key) -> Result<&mut TopK, Reply> {
    keys::lookup_mut::<TopK>(key)?.ok_or_else(|| TopkError::KeyMissing.into())
}

/// `TOPK.RESERVE key topk [width depth decay]`
pub fn reserve(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_reserve_arity(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    if !key.is_empty() {
        return Err(TopkError::KeyExists.into());
    }
    let params = parse_reserve(argv)?;
    let sketch = TopK::new(params, config::limits(ctx))
        .inspect_err(|_| counters::COUNTERS.add(counters::REFUSED, 1))?;
    keys::store(&mut key, sketch)?;
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    Ok(())
}

/// An expelled item, or null.
fn reply_expelled(ctx: Ctx, expelled: Option<Box<[u8]>>) {
    match expelled {
        Some(item) => ctx.reply_bulk(&item),
        None => ctx.reply_null(),
    }
}

/// `TOPK.ADD key item [item ...]` → per item, the item it expelled or null.
pub fn add(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_items_arity(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    let sketch = existing_mut(&mut key)?;
    let items = &argv[2..];
    ctx.reply_array(items.len());
    let mut expelled = 0;
    // An item entering the heap is allocated and the one it expels freed
    // (here, once replied): `write` keeps INFO's bytes current.
    sketch.write(|sketch| {
        for item in items {
            let out = sketch.add(item.bytes(), 1);
            expelled += u64::from(out.is_some());
            reply_expelled(ctx, out);
        }
    });
    counters::added(items.len() as u64, expelled);
    ctx.replicate_verbatim();
    Ok(())
}

/// `TOPK.INCRBY key item increment [item increment ...]` → per pair, the
/// item it expelled or null. A bad increment is an error element and ends
/// the command; the pairs before it stay applied. The array's length is the
/// elements sent (2.8.2 announces every pair and sends fewer, which breaks
/// the connection's protocol).
pub fn incrby(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_incrby_arity(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    let sketch = existing_mut(&mut key)?;
    let array = ctx.postponed_array();
    let (mut sent, mut ran, mut units, mut expelled) = (0usize, 0usize, 0u64, 0u64);
    // As in `add`: heap items come and go.
    sketch.write(|sketch| {
        for pair in argv[2..].chunks_exact(2) {
            sent += 1;
            match parse_increment(pair[1].bytes()) {
                Ok(incr) => {
                    let out = sketch.add(pair[0].bytes(), incr);
                    expelled += u64::from(out.is_some());
                    units += u64::from(incr);
                    ran += 1;
                    reply_expelled(ctx, out);
                }
                Err(e) => {
                    ctx.reply_error(&e.message());
                    break;
                }
            }
        }
    });
    array.close(sent);
    counters::added(units, expelled);
    // The replica stops at the same bad pair; nothing to send if none ran.
    if ran > 0 {
        ctx.replicate_verbatim();
    }
    Ok(())
}

/// Runs `f` on the key's sketch for a read.
fn with_sketch<T>(ctx: Ctx, name: &Arg, f: impl FnOnce(&TopK) -> T) -> Result<T, Reply> {
    let key = Key::open(ctx, name, false);
    Ok(f(existing(&key)?))
}

/// `TOPK.QUERY key item [item ...]` → per item, whether it is in the top k.
pub fn query(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_items_arity(argv)?;
    let items = &argv[2..];
    with_sketch(ctx, &argv[1], |t| {
        ctx.reply_array(items.len());
        for item in items {
            ctx.reply_bool(t.query(item.bytes()));
        }
    })?;
    COUNTERS.add(counters::LOOKUPS, items.len() as u64);
    Ok(())
}

/// `TOPK.COUNT key item [item ...]` → per item, its estimated count.
pub fn count(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_items_arity(argv)?;
    let items = &argv[2..];
    with_sketch(ctx, &argv[1], |t| {
        ctx.reply_array(items.len());
        for item in items {
            ctx.reply_i64(i64::from(t.count(item.bytes())));
        }
    })?;
    COUNTERS.add(counters::LOOKUPS, items.len() as u64);
    Ok(())
}

/// `TOPK.LIST key [WITHCOUNT]` → the top items, heaviest first (with their
/// counts), a flat array in both RESP versions.
pub fn list(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let with_count = parse_list(argv)?;
    with_sketch(ctx, &argv[1], |t| {
        let slots = t.list();
        ctx.reply_array(slots.len() * if with_count { 2 } else { 1 });
        for s in slots {
            ctx.reply_bulk(s.bytes());
            if with_count {
                ctx.reply_i64(i64::from(s.count));
            }
        }
    })?;
    Ok(())
}

/// `TOPK.INFO key` → k, width, depth and decay (a map in RESP3).
pub fn info(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_info_arity(argv)?;
    with_sketch(ctx, &argv[1], |t| {
        let p = t.params();
        let fields: [(&CStr, u32); 3] = [(c"k", p.k), (c"width", p.width), (c"depth", p.depth)];
        ctx.reply_map(4);
        for (label, value) in fields {
            ctx.reply_simple(label);
            ctx.reply_i64(i64::from(value));
        }
        ctx.reply_simple(c"decay");
        ctx.reply_double(p.decay);
    })?;
    Ok(())
}
