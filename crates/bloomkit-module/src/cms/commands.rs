//! The CMS.* commands: parse in core, open the key, call core, reply,
//! replicate, notify, count.
//!
//! Replies, error texts and their order follow RedisBloom 2.8.2 as measured
//! (see `tests/cms_differential.rs`): errors carry its `CMS: ` prefix
//! without `ERR`, `CMS.INCRBY` answers an item that reached 4294967295 with
//! an error element inside its array, `CMS.INFO`'s count is signed.
//!
//! Every write is replicated verbatim: it is deterministic, and replicas
//! and AOF replays skip the size limits, so they do exactly what the
//! primary did.

use bloomkit_core::cms::args::arity;
use bloomkit_core::cms::args::{
    check_incrby_arity, check_init_arity_with, check_merge_arity, parse_incrby_into,
    parse_incrby_signed_into, parse_initbydim_with, parse_initbyprob_with, parse_merge,
};
use bloomkit_core::cms::{CmsError, CountMinSketch, Init, Rules, Source};
use bloomkit_core::{Reply, ReplyError};

use super::counters::{self, COUNTERS};
use crate::command::Outcome;
use crate::ffi::{Arg, Ctx, Key};
use crate::{config, keys};

/// The sketch in an open key: `CMS: key does not exist` when it is empty,
/// WRONGTYPE when it holds anything else.
fn existing(key: &Key) -> Result<&CountMinSketch, Reply> {
    keys::lookup::<CountMinSketch>(key)?.ok_or_else(|| CmsError::KeyMissing.into())
}

/// [`existing`] for a write.
fn existing_mut(key: &mut Key) -> Result<&mut CountMinSketch, Reply> {
    keys::lookup_mut::<CountMinSketch>(key)?.ok_or_else(|| CmsError::KeyMissing.into())
}

/// `CMS.INITBYDIM key width depth [CELL_SIZE n]` (`CELL_SIZE` at `redisbloom-8.12`)
pub fn initbydim(ctx: Ctx, argv: &[Arg]) -> Outcome {
    create(ctx, argv, parse_initbydim_with, c"cms.initbydim")
}

/// `CMS.INITBYPROB key error probability [CELL_SIZE n]` (`CELL_SIZE` at `redisbloom-8.12`)
pub fn initbyprob(ctx: Ctx, argv: &[Arg]) -> Outcome {
    create(ctx, argv, parse_initbyprob_with, c"cms.initbyprob")
}

/// Both creations: any value in the key (of any type) is refused first,
/// then the arguments, then the size against `bf.max-filter-bytes` and the
/// memory left, before anything is allocated.
fn create(
    ctx: Ctx,
    argv: &[Arg],
    parse: fn(&[Arg], Rules) -> Result<Init, CmsError>,
    event: &'static std::ffi::CStr,
) -> Outcome {
    let rules = super::rules();
    check_init_arity_with(argv, rules)?;
    let mut key = Key::open(ctx, &argv[1], true);
    if !key.is_empty() {
        return Err(CmsError::KeyExists.into());
    }
    let Init { dims, cell } = parse(argv, rules)?;
    let sketch = CountMinSketch::with_cell_size(dims, cell, config::limits(ctx)).inspect_err(|_| {
        COUNTERS.add(counters::REFUSED, 1);
    })?;
    keys::store(&mut key, sketch)?;
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(event, &argv[1]);
    Ok(())
}

/// `CMS.INCRBY key item increment [item increment ...]`: every increment is
/// parsed before any is applied. Before Redis 8.12 an item whose estimate
/// reaches 4294967295 answers `CMS: INCRBY overflow` in its place of the
/// array; under 8.12's rules increments may be negative, and an item whose
/// change would take a cell (or the total) out of range is not applied and
/// answers `CMS: INCRBY overflow` or `CMS: INCRBY underflow` in its place,
/// the other items applied (as Redis 8.12 does).
///
/// The key is opened for writing, so that `WATCH` and client-side caching
/// see the change (2.8.2 opened it read-only; RedisBloom 2.8.5 and 8.1 fixed it).
pub fn incrby(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_incrby_arity(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    let sketch = existing_mut(&mut key)?;
    // The increments of up to ON_STACK pairs live on the stack: no
    // allocation for the common command.
    const ON_STACK: usize = 32;
    let pairs = (argv.len() - 2) / 2;
    match super::rules() {
        Rules::Classic => {
            let (mut stack, mut heap) = ([0u64; ON_STACK], Vec::new());
            let increments = on_stack_or_heap(&mut stack, &mut heap, pairs);
            parse_incrby_into(argv, increments)?;
            let increments = &*increments;
            let max = sketch.cell_size().max();
            ctx.reply_array(increments.len());
            for (pair, &by) in argv[2..].chunks_exact(2).zip(increments) {
                match sketch.increment(pair[0].bytes(), by) {
                    estimate if estimate == max => ctx.reply_error(&CmsError::IncrbyOverflow.message()),
                    estimate => ctx.reply_i64(estimate as i64),
                }
            }
        }
        Rules::CellSized => {
            let (mut stack, mut heap) = ([0i64; ON_STACK], Vec::new());
            let increments = on_stack_or_heap(&mut stack, &mut heap, pairs);
            parse_incrby_signed_into(argv, increments)?;
            let increments = &*increments;
            ctx.reply_array(increments.len());
            for (pair, &by) in argv[2..].chunks_exact(2).zip(increments) {
                match sketch.add(pair[0].bytes(), by) {
                    // At most 2^63 - 1 (the largest 8-byte cell).
                    Ok(estimate) => ctx.reply_i64(estimate as i64),
                    Err(e) => ctx.reply_error(&e.message()),
                }
            }
        }
    }
    COUNTERS.add(counters::INCREMENTS, (argv.len() as u64 - 2) / 2);
    ctx.replicate_verbatim();
    ctx.notify(c"cms.incrby", &argv[1]);
    Ok(())
}

/// `n` zeros: the first `n` of `stack` when they fit, else `heap` grown to `n`.
fn on_stack_or_heap<'a, T: Copy + Default>(
    stack: &'a mut [T],
    heap: &'a mut Vec<T>,
    n: usize,
) -> &'a mut [T] {
    if n <= stack.len() {
        &mut stack[..n]
    } else {
        heap.resize(n, T::default());
        heap
    }
}

/// `CMS.QUERY key item [item ...]` → each item's estimate.
pub fn query(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::QUERY.check(argv)?;
    let key = Key::open(ctx, &argv[1], false);
    let sketch = existing(&key)?;
    let items = &argv[2..];
    ctx.reply_array(items.len());
    for item in items {
        // At most 2^63 - 1 (the largest 8-byte cell).
        ctx.reply_i64(sketch.query(item.bytes()) as i64);
    }
    COUNTERS.add(counters::QUERIES, items.len() as u64);
    Ok(())
}

/// `CMS.MERGE destination numKeys source [source ...] [WEIGHTS weight ...]`:
/// the destination's checks, then numKeys and the shape, then each source
/// in turn (its weight, its key, its dimensions, its cell size), then the overflow
/// pre-pass; nothing changes unless all pass. The destination may be among
/// its sources.
pub fn merge(ctx: Ctx, argv: &[Arg]) -> Outcome {
    check_merge_arity(argv)?;
    let mut dest_key = Key::open(ctx, &argv[1], true);
    let dest = existing(&dest_key)?;
    let shape = parse_merge(argv)?;
    // Each source in turn: its weight, its key, its dimensions, its cell
    // size (a key is opened only once the sources before it passed).
    let mut source_keys: Vec<Key> = Vec::with_capacity(shape.sources.min(1024));
    let mut weights = Vec::with_capacity(shape.sources.min(1024));
    for i in 0..shape.sources {
        weights.push(shape.weight(argv, i)?);
        let key = Key::open(ctx, &argv[3 + i], false);
        let found = existing(&key)?;
        if !std::ptr::eq(found, dest) {
            if !dest.same_dimensions(found) {
                return Err(CmsError::DimensionsDiffer.into());
            }
            if dest.cell_size() != found.cell_size() {
                return Err(CmsError::CellSizeDiffers.into());
            }
        }
        source_keys.push(key);
    }
    let mut sources = Vec::with_capacity(source_keys.len());
    for (key, weight) in source_keys.iter().zip(weights) {
        let found = existing(key)?;
        let source = if std::ptr::eq(found, dest) { Source::Destination } else { Source::Other(found) };
        sources.push((source, weight));
    }
    // The destination among its sources is `Source::Destination`: the
    // other sources are other values, read through their own keys while
    // the destination is written.
    existing_mut(&mut dest_key)?.merge(&sources)?;
    COUNTERS.add(counters::MERGES, 1);
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"cms.merge", &argv[1]);
    Ok(())
}

/// `CMS.INFO key` → width, depth and count, and under Redis 8.12's rules
/// `cell_size` (a flat array in RESP2, a map in RESP3); the count printed
/// signed, as RedisBloom prints it.
pub fn info(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::INFO.check(argv)?;
    let key = Key::open(ctx, &argv[1], false);
    let sketch = existing(&key)?;
    let mut fields = vec![(c"width", sketch.width()), (c"depth", sketch.depth()), (c"count", sketch.count())];
    if super::rules() == Rules::CellSized {
        fields.push((c"cell_size", sketch.cell_size().bytes()));
    }
    ctx.reply_map(fields.len());
    for (label, value) in fields {
        ctx.reply_simple(label);
        ctx.reply_i64(value as i64);
    }
    Ok(())
}
