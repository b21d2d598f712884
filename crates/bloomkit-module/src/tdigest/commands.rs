//! The TDIGEST.* commands: check the arity, look the key up, parse in core,
//! call core, reply, replicate.
//!
//! Replies, error texts and their order follow RedisBloom 2.8.2 as measured
//! (see `tests/tdigest_differential.rs`); doubles go through
//! `RedisModule_ReplyWithDouble`, so that the server prints them as it does
//! RedisBloom's.
//!
//! Replicas and the AOF stay identical to the primary. Writes are sent as
//! received (an ADD cut short by an overflow as the part that ran). Reads
//! that compress a digest (QUANTILE, CDF, TRIMMED_MEAN, RANK, BYRANK ...)
//! change it, as in RedisBloom, and where the compression happens decides
//! later answers: on a primary such a read is followed in the stream by
//! `TDIGEST.CDF key 0`, which compresses the replica's digest at the same
//! point; on a replica a client's read answers from a compressed copy and
//! leaves the digest as its primary has it.

use std::ffi::CStr;
use std::ptr::NonNull;

use bloomkit_core::tdigest::args::{
    parse_add_values, parse_cdf_values, parse_create, parse_merge, parse_quantiles, parse_rank_values,
    parse_ranks, parse_trimmed_mean,
};
use bloomkit_core::tdigest::{TDigest, TdError};
use bloomkit_core::Reply;
use redis_module::raw;

use super::stats;
use crate::command::Outcome;
use crate::ffi::{Arg, Ctx, Key};
use crate::{config, keys};

fn lookup(key: &Key) -> Result<Option<NonNull<TDigest>>, Reply> {
    keys::lookup(key)
}

/// The digest in a key, `ERR T-Digest: key does not exist` when there is none.
fn existing(key: &Key) -> Result<NonNull<TDigest>, Reply> {
    lookup(key)?.ok_or_else(|| TdError::KeyMissing.into())
}

/// `TDIGEST.CREATE key [COMPRESSION compression]`
pub fn create(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() != 2 && argv.len() != 4 {
        return Err(Reply::WrongArity);
    }
    let key = Key::open(ctx, &argv[1], true);
    if lookup(&key)?.is_some() {
        return Err(TdError::KeyExists.into());
    }
    let compression = parse_create(argv)?;
    let t = TDigest::new(compression as f64, config::limits(ctx)).inspect_err(|_| crate::stats::refused())?;
    keys::store(&key, t)?;
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"tdigest.create", &argv[1]);
    Ok(())
}

/// `TDIGEST.RESET key`
pub fn reset(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() != 2 {
        return Err(Reply::WrongArity);
    }
    let key = Key::open(ctx, &argv[1], true);
    let mut t = existing(&key)?;
    // SAFETY: owned by the keyspace; commands run one at a time.
    unsafe { t.as_mut() }.reset();
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"tdigest.reset", &argv[1]);
    Ok(())
}

/// `TDIGEST.ADD key value [value ...]`: every value is parsed before any is added.
pub fn add(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() < 3 {
        return Err(Reply::WrongArity);
    }
    let key = Key::open(ctx, &argv[1], true);
    let mut t = existing(&key)?;
    let values = parse_add_values(&argv[2..])?;
    // SAFETY: owned by the keyspace; commands run one at a time.
    let t = unsafe { t.as_mut() };
    let mut ran = 0usize;
    let mut failed = None;
    for &v in &values {
        if let Err(e) = t.add(v, 1) {
            failed = Some(e);
            break;
        }
        ran += 1;
    }
    stats::add(&stats::OBSERVATIONS_ADDED, ran as u64);
    if ran > 0 {
        ctx.notify(c"tdigest.add", &argv[1]);
    }
    match failed {
        None => {
            ctx.reply_simple(c"OK");
            ctx.replicate_verbatim();
            Ok(())
        }
        Some(e) => {
            // RedisBloom sends nothing here, leaving replicas without the
            // values that were added; they get exactly those.
            if ran > 0 {
                ctx.replicate_items(c"TDIGEST.ADD", &argv[1], None, &argv[2..2 + ran]);
            }
            Err(e.into())
        }
    }
}

/// `TDIGEST.MERGE destination numkeys source [source ...] [COMPRESSION c] [OVERRIDE]`:
/// a new digest replaces the destination (its TTL goes, as in RedisBloom).
pub fn merge(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() < 4 {
        return Err(Reply::WrongArity);
    }
    let dest_key = Key::open(ctx, &argv[1], true);
    let dest = lookup(&dest_key)?;
    let parsed = parse_merge(argv)?;
    let mut source_keys = Vec::with_capacity(parsed.numkeys);
    let mut sources: Vec<NonNull<TDigest>> = Vec::with_capacity(parsed.numkeys);
    for name in &argv[3..3 + parsed.numkeys] {
        if name.bytes() == argv[1].bytes() {
            sources.push(dest.ok_or(TdError::KeyMissing)?);
            continue;
        }
        let key = Key::open(ctx, name, false);
        sources.push(existing(&key)?);
        source_keys.push(key);
    }
    // SAFETY (every dereference below): the digests belong to the keyspace,
    // whose keys stay open until the end; commands run one at a time, and
    // no two references to one digest are alive at once.
    let compression_of = |p: &NonNull<TDigest>| unsafe { p.as_ref() }.compression() as i64;
    let compression = match (parsed.compression, parsed.overwrite, dest) {
        (Some(c), _, _) => c,
        (None, false, Some(d)) => compression_of(&d),
        _ => sources.iter().map(compression_of).fold(0, i64::max),
    };
    let mut merged = TDigest::new(compression as f64, config::limits(ctx))
        .map_err(|e| match e {
            TdError::AllocationFailed => TdError::MergeAllocationFailed,
            e => e,
        })
        .inspect_err(|_| crate::stats::refused())?;
    // Merging compresses the old destination and every source in place; a
    // failed MERGE is not replicated, so those compressions are sent on
    // their own (RedisBloom leaves its replicas without them).
    let buffered = |p: &NonNull<TDigest>| unsafe { p.as_ref() }.unmerged_nodes() > 0;
    let dest_buffered = dest.as_ref().is_some_and(buffered);
    let sources_buffered: Vec<bool> = sources.iter().map(buffered).collect();
    if let (Some(mut d), false) = (dest, parsed.overwrite) {
        // RedisBloom ignores a failure here and goes on.
        let _ = merged.merge_from(unsafe { d.as_mut() });
    }
    for i in 0..sources.len() {
        if let Err(e) = merged.merge_from(unsafe { sources[i].as_mut() }) {
            let mut names: Vec<&Arg> = Vec::new();
            if dest_buffered && dest.as_ref().is_some_and(|d| !buffered(d)) {
                names.push(&argv[1]);
            }
            for (j, s) in sources.iter().enumerate() {
                let name = &argv[3 + j];
                if sources_buffered[j] && !buffered(s) && !names.iter().any(|n| n.bytes() == name.bytes()) {
                    names.push(name);
                }
            }
            for name in names {
                ctx.replicate_items(c"TDIGEST.CDF", name, Some(c"0"), &[]);
                stats::add(&stats::COMPRESSIONS_REPLICATED, 1);
            }
            return Err(e.into());
        }
    }
    drop(source_keys);
    keys::store(&dest_key, merged)?;
    stats::add(&stats::MERGES, 1);
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"tdigest.merge", &argv[1]);
    Ok(())
}

/// True for a client's command on a replica: it must leave the digest as
/// the primary has it.
fn on_replica(ctx: Ctx) -> bool {
    ctx.flags() & raw::REDISMODULE_CTX_FLAGS_SLAVE != 0 && !ctx.is_replaying()
}

/// A read that may compress: the key is looked up before the values are
/// parsed (RedisBloom's order). See the file's doc for where it compresses.
fn read<P, T>(
    ctx: Ctx,
    argv: &[Arg],
    parse: impl FnOnce() -> Result<P, TdError>,
    run: impl FnOnce(&mut TDigest, P) -> T,
) -> Result<T, Reply> {
    let key = Key::open(ctx, &argv[1], false);
    let mut p = existing(&key)?;
    let parsed = parse()?;
    stats::add(&stats::QUERIES, 1);
    // SAFETY: owned by the keyspace; commands run one at a time.
    let t = unsafe { p.as_mut() };
    if t.unmerged_nodes() == 0 {
        return Ok(run(t, parsed));
    }
    if on_replica(ctx) {
        let mut copy = t.try_clone()?;
        return Ok(run(&mut copy, parsed));
    }
    let out = run(t, parsed);
    if t.unmerged_nodes() == 0 && !ctx.is_replaying() {
        ctx.replicate_items(c"TDIGEST.CDF", &argv[1], Some(c"0"), &[]);
        stats::add(&stats::COMPRESSIONS_REPLICATED, 1);
    }
    Ok(out)
}

fn reply_doubles(ctx: Ctx, values: &[f64]) {
    ctx.reply_array(values.len());
    for &v in values {
        ctx.reply_double(v);
    }
}

/// `TDIGEST.QUANTILE key quantile [quantile ...]`
pub fn quantile(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() < 3 {
        return Err(Reply::WrongArity);
    }
    let values = read(ctx, argv, || parse_quantiles(&argv[2..]), |t, qs| t.quantiles(&qs))?;
    reply_doubles(ctx, &values);
    Ok(())
}

/// `TDIGEST.CDF key value [value ...]`
pub fn cdf(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() < 3 {
        return Err(Reply::WrongArity);
    }
    let values = read(
        ctx,
        argv,
        || parse_cdf_values(&argv[2..]),
        |t, xs| xs.iter().map(|&x| t.cdf(x)).collect::<Vec<_>>(),
    )?;
    reply_doubles(ctx, &values);
    Ok(())
}

/// `TDIGEST.TRIMMED_MEAN key low_cut_percentile high_cut_percentile`
pub fn trimmed_mean(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() != 4 {
        return Err(Reply::WrongArity);
    }
    let v = read(ctx, argv, || parse_trimmed_mean(argv), |t, (lo, hi)| t.trimmed_mean(lo, hi))?;
    ctx.reply_double(v);
    Ok(())
}

fn rank_common(ctx: Ctx, argv: &[Arg], reverse: bool) -> Outcome {
    if argv.len() < 3 {
        return Err(Reply::WrongArity);
    }
    let ranks = read(
        ctx,
        argv,
        || parse_rank_values(&argv[2..]),
        |t, xs| xs.iter().map(|&x| t.rank(x, reverse)).collect::<Vec<_>>(),
    )?;
    ctx.reply_array(ranks.len());
    for r in ranks {
        ctx.reply_i64(r);
    }
    Ok(())
}

/// `TDIGEST.RANK key value [value ...]`
pub fn rank(ctx: Ctx, argv: &[Arg]) -> Outcome {
    rank_common(ctx, argv, false)
}

/// `TDIGEST.REVRANK key value [value ...]`
pub fn revrank(ctx: Ctx, argv: &[Arg]) -> Outcome {
    rank_common(ctx, argv, true)
}

fn by_rank_common(ctx: Ctx, argv: &[Arg], reverse: bool) -> Outcome {
    if argv.len() < 3 {
        return Err(Reply::WrongArity);
    }
    let values = read(
        ctx,
        argv,
        || parse_ranks(&argv[2..]),
        |t, rs| rs.iter().map(|&r| t.by_rank(r, reverse)).collect::<Vec<_>>(),
    )?;
    reply_doubles(ctx, &values);
    Ok(())
}

/// `TDIGEST.BYRANK key rank [rank ...]`
pub fn byrank(ctx: Ctx, argv: &[Arg]) -> Outcome {
    by_rank_common(ctx, argv, false)
}

/// `TDIGEST.BYREVRANK key reverse_rank [reverse_rank ...]`
pub fn byrevrank(ctx: Ctx, argv: &[Arg]) -> Outcome {
    by_rank_common(ctx, argv, true)
}

/// The digest in a key for reads that never compress.
fn with_digest<T>(ctx: Ctx, argv: &[Arg], f: impl FnOnce(&TDigest) -> T) -> Result<T, Reply> {
    if argv.len() != 2 {
        return Err(Reply::WrongArity);
    }
    let key = Key::open(ctx, &argv[1], false);
    let p = existing(&key)?;
    stats::add(&stats::QUERIES, 1);
    // SAFETY: owned by the keyspace, read only while the key is open.
    Ok(f(unsafe { p.as_ref() }))
}

/// `TDIGEST.MIN key`: NaN when empty.
pub fn min(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let v = with_digest(ctx, argv, TDigest::min_reply)?;
    ctx.reply_double(v);
    Ok(())
}

/// `TDIGEST.MAX key`: NaN when empty.
pub fn max(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let v = with_digest(ctx, argv, TDigest::max_reply)?;
    ctx.reply_double(v);
    Ok(())
}

/// `TDIGEST.INFO key` → a map of nine integers (a flat array in RESP2).
pub fn info(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let fields = with_digest(ctx, argv, |t| -> [(&'static CStr, i64); 9] {
        [
            (c"Compression", t.compression() as i64),
            (c"Capacity", t.capacity() as i64),
            (c"Merged nodes", t.merged_nodes() as i64),
            (c"Unmerged nodes", t.unmerged_nodes() as i64),
            (c"Merged weight", t.merged_weight()),
            (c"Unmerged weight", t.unmerged_weight()),
            (c"Observations", t.size()),
            (c"Total compressions", t.total_compressions()),
            (c"Memory usage", t.size_bytes() as i64),
        ]
    })?;
    ctx.reply_map(fields.len());
    for (label, value) in fields {
        ctx.reply_simple(label);
        ctx.reply_i64(value);
    }
    Ok(())
}
