//! The TDIGEST.* commands: check the arity, look the key up, parse in core,
//! call core, reply, replicate.
//!
//! Replies, error texts and their order follow RedisBloom 2.8.2 as measured
//! (see `tests/tdigest_differential.rs`); doubles go through
//! `RedisModule_ReplyWithDouble`, so that the server prints them as it does
//! RedisBloom's.
//!
//! Reads never write. RedisBloom compresses a digest's buffer on every
//! estimate (QUANTILE, CDF, TRIMMED_MEAN, RANK, BYRANK ...), and where that
//! happens decides later answers. Here an estimate reads the digest's
//! compressed copy ([`TDigest::estimates`]) and leaves the value as it is;
//! on a primary it records that RedisBloom's compression is owed. The next
//! write from a client pays it in place and sends `TDIGEST.CDF key 0`
//! before itself into the replication stream and the AOF, where a read
//! arriving from the primary (or replayed from the AOF) compresses the
//! replica's digest at the same point. Writes are never run while writes
//! are paused, so nothing is ever propagated when the server forbids it
//! (`CLIENT PAUSE WRITE`, `FAILOVER`, `SHUTDOWN` waiting for replicas);
//! a snapshot taken while a buffer held values (a full sync, BGSAVE, an
//! AOF rewrite) holds the compressed form, and owes the same to the next
//! write ([`super::data_type::snapshot_epoch`]).
//!
//! Writes are sent as received (an ADD cut short by an overflow as the
//! part that ran).

use std::ffi::CStr;

use bloomkit_core::tdigest::args::arity;
use bloomkit_core::tdigest::args::{
    parse_add_values_into, parse_cdf_values_into, parse_create, parse_merge, parse_quantiles_into,
    parse_rank_values, parse_ranks, parse_trimmed_mean,
};
use bloomkit_core::tdigest::{TDigest, TdError};
use bloomkit_core::Reply;
use redis_module::raw;

use super::counters::{self, COUNTERS};
use crate::command::Outcome;
use crate::ffi::{Arg, Ctx, Key};
use crate::value::Value;
use crate::{config, keys};

/// Values of up to this many arguments are parsed onto the stack: no
/// allocation for the common command.
const ON_STACK: usize = 32;

/// Parsed values: on the stack up to `ON_STACK` of them, else on the heap.
struct Values {
    stack: [f64; ON_STACK],
    heap: Vec<f64>,
    n: usize,
}

impl Values {
    /// `args` parsed by `parse_into`, which fills a slice as long as them.
    fn parse(
        args: &[Arg],
        parse_into: fn(&[Arg], &mut [f64]) -> Result<(), TdError>,
    ) -> Result<Values, TdError> {
        let mut v = Values { stack: [0.0; ON_STACK], heap: Vec::new(), n: args.len() };
        if v.n > ON_STACK {
            v.heap.resize(v.n, 0.0);
            parse_into(args, &mut v.heap)?;
        } else {
            parse_into(args, &mut v.stack[..v.n])?;
        }
        Ok(v)
    }

    fn get(&self) -> &[f64] {
        if self.n > ON_STACK {
            &self.heap
        } else {
            &self.stack[..self.n]
        }
    }
}

/// The digest in a key, `ERR T-Digest: key does not exist` when there is none.
fn existing(key: &Key) -> Result<&TDigest, Reply> {
    keys::lookup(key)?.ok_or_else(|| TdError::KeyMissing.into())
}

/// [`existing`] for a write, or for a read that makes the compressed copy.
fn existing_mut(key: &mut Key) -> Result<&mut TDigest, Reply> {
    keys::lookup_mut(key)?.ok_or_else(|| TdError::KeyMissing.into())
}

/// `TDIGEST.CREATE key [COMPRESSION compression]`
pub fn create(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::CREATE.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    if keys::lookup::<TDigest>(&key)?.is_some() {
        return Err(TdError::KeyExists.into());
    }
    let compression = parse_create(argv)?;
    let t = TDigest::new(compression as f64, config::limits(ctx))
        .inspect_err(|_| counters::COUNTERS.add(counters::REFUSED, 1))?;
    keys::store(&mut key, t)?;
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"tdigest.create", &argv[1]);
    Ok(())
}

/// `TDIGEST.RESET key`
pub fn reset(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::RESET.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    existing_mut(&mut key)?.write(TDigest::reset);
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"tdigest.reset", &argv[1]);
    Ok(())
}

/// `TDIGEST.ADD key value [value ...]`: every value is parsed before any is added.
pub fn add(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::ADD.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    let t = existing_mut(&mut key)?;
    let values = Values::parse(&argv[2..], parse_add_values_into)?;
    let values = values.get();
    // Settling takes or drops the compressed copy a read made, and so does
    // the first add: `write` keeps INFO's bytes current.
    let mut ran = 0usize;
    let mut failed = None;
    t.write(|t| {
        settle(ctx, t, &argv[1])?;
        for &v in values {
            if let Err(e) = t.add(v, 1) {
                failed = Some(e);
                break;
            }
            ran += 1;
        }
        Ok::<(), TdError>(())
    })?;
    COUNTERS.add(counters::OBSERVATIONS_ADDED, ran as u64);
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
    arity::MERGE.check(argv)?;
    let mut dest_key = Key::open(ctx, &argv[1], true);
    let has_dest = keys::lookup::<TDigest>(&dest_key)?.is_some();
    let parsed = parse_merge(argv)?;
    // Each source's own key; `None` where it is the destination.
    let mut source_keys: Vec<Option<Key>> = Vec::with_capacity(parsed.numkeys);
    for name in &argv[3..3 + parsed.numkeys] {
        if name.bytes() == argv[1].bytes() {
            if !has_dest {
                return Err(TdError::KeyMissing.into());
            }
            source_keys.push(None);
            continue;
        }
        let key = Key::open(ctx, name, false);
        existing(&key)?;
        source_keys.push(Some(key));
    }
    let compression = match (parsed.compression, parsed.overwrite, has_dest) {
        (Some(c), _, _) => c,
        (None, false, true) => existing(&dest_key)?.compression() as i64,
        _ => source_keys
            .iter()
            .map(|k| existing(k.as_ref().unwrap_or(&dest_key)).map(|t| t.compression() as i64))
            .try_fold(0, |most, c| c.map(|c| most.max(c)))?,
    };
    let mut merged = TDigest::new(compression as f64, config::limits(ctx))
        .map_err(|e| match e {
            TdError::AllocationFailed => TdError::MergeAllocationFailed,
            e => e,
        })
        .inspect_err(|_| counters::COUNTERS.add(counters::REFUSED, 1))?;
    // Every digest read is read compressed, as RedisBloom reads it; unlike
    // RedisBloom, reading compresses none of them in place: each owes it
    // to its next write (see the file's doc). A digest named twice is
    // reached through two keys, one at a time.
    let old_dest = has_dest && !parsed.overwrite;
    let primary = from_client_on_primary(ctx);
    let prepare = |t: &mut TDigest| {
        if primary {
            t.owe_compression();
        }
        t.estimates().map(|_| ()).map_err(|_| Reply::from(TdError::MergeAllocationFailed))
    };
    // Each read digest makes its compressed copy: `track` keeps INFO's bytes current.
    TDigest::track(|| {
        if old_dest {
            prepare(existing_mut(&mut dest_key)?)?;
        }
        for key in source_keys.iter_mut() {
            prepare(existing_mut(key.as_mut().unwrap_or(&mut dest_key))?)?;
        }
        Ok::<(), Reply>(())
    })?;
    let dest = old_dest.then(|| existing(&dest_key)).transpose()?;
    let sources = source_keys.iter().map(|k| existing(k.as_ref().unwrap_or(&dest_key)));
    for (i, t) in dest.map(Ok).into_iter().chain(sources).enumerate() {
        let poured = merged.merge_compressed(t?.estimated());
        // RedisBloom ignores a failure to pour the old destination and goes on.
        if i > 0 || !old_dest {
            poured?;
        }
    }
    drop(source_keys);
    keys::store(&mut dest_key, merged)?;
    COUNTERS.add(counters::MERGES, 1);
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"tdigest.merge", &argv[1]);
    Ok(())
}

/// True for a client's command on a primary: the only place that owes,
/// pays and announces compressions. A replica's digests follow its primary.
fn from_client_on_primary(ctx: Ctx) -> bool {
    ctx.flags() & raw::REDISMODULE_CTX_FLAGS_SLAVE == 0 && !ctx.is_replaying()
}

/// Before a client's write on a primary: pays a compression the digest
/// owes (a read, a save or a snapshot since its last write) and announces
/// it ahead of the write, in the same propagation.
fn settle(ctx: Ctx, t: &mut TDigest, key: &Arg) -> Result<(), TdError> {
    if !from_client_on_primary(ctx) {
        t.follow_stream();
        return Ok(());
    }
    if t.settle(super::data_type::snapshot_epoch())? {
        ctx.replicate_items(c"TDIGEST.CDF", key, Some(c"0"), &[]);
        COUNTERS.add(counters::COMPRESSIONS_REPLICATED, 1);
    }
    Ok(())
}

/// A digest as an estimate reads it: its fields as they are, and its
/// compressed form made on first use, as RedisBloom compresses only when an
/// answer needs the centroids (RANK of a value outside `[min, max]` does not).
struct Reading<'a> {
    digest: &'a mut TDigest,
    compressed: bool,
}

impl Reading<'_> {
    /// Size, min and max: what compressing never changes.
    fn fields(&self) -> &TDigest {
        self.digest
    }

    /// The compressed form; its copy, made here on first use, counts in
    /// `INFO bf` (only the making is measured: what a read returns is
    /// freed after the count).
    fn compressed(&mut self) -> Result<&TDigest, TdError> {
        self.compressed = true;
        self.digest.write(|t| t.estimates().map(|_| ()))?;
        Ok(self.digest.estimated())
    }
}

/// An estimate: the key is looked up before the values are parsed
/// (RedisBloom's order), and the digest is read compressed without being
/// changed. See the file's doc.
fn read<P, T>(
    ctx: Ctx,
    argv: &[Arg],
    parse: impl FnOnce() -> Result<P, TdError>,
    run: impl FnOnce(&mut Reading, P) -> Result<T, TdError>,
) -> Result<T, Reply> {
    let mut key = Key::open(ctx, &argv[1], false);
    let t = existing_mut(&mut key)?;
    let parsed = parse()?;
    COUNTERS.add(counters::QUERIES, 1);
    if ctx.is_replaying() {
        // From the primary's stream or the AOF: the compression the primary
        // announced (`TDIGEST.CDF key 0`), at the same point. It drops the
        // compressed copy a read made: `write` keeps INFO's bytes current.
        t.write(TDigest::compress)?;
        t.follow_stream();
    }
    let mut reading = Reading { digest: t, compressed: false };
    let out = run(&mut reading, parsed)?;
    if reading.compressed && from_client_on_primary(ctx) {
        t.owe_compression();
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
    arity::QUANTILE.check(argv)?;
    let parse = || Values::parse(&argv[2..], parse_quantiles_into);
    let values = read(ctx, argv, parse, |r, qs| Ok(r.compressed()?.quantiles(qs.get())))?;
    reply_doubles(ctx, &values);
    Ok(())
}

/// `TDIGEST.CDF key value [value ...]`
pub fn cdf(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::CDF.check(argv)?;
    read(
        ctx,
        argv,
        || Values::parse(&argv[2..], parse_cdf_values_into),
        |r, xs| {
            // Nothing can fail once the compressed digest is there: the
            // answers are replied as they are computed.
            let t = r.compressed()?;
            ctx.reply_array(xs.get().len());
            for &x in xs.get() {
                ctx.reply_double(t.cdf(x));
            }
            Ok(())
        },
    )?;
    Ok(())
}

/// `TDIGEST.TRIMMED_MEAN key low_cut_percentile high_cut_percentile`
pub fn trimmed_mean(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::TRIMMED_MEAN.check(argv)?;
    let v =
        read(ctx, argv, || parse_trimmed_mean(argv), |r, (lo, hi)| Ok(r.compressed()?.trimmed_mean(lo, hi)))?;
    ctx.reply_double(v);
    Ok(())
}

fn rank_common(ctx: Ctx, argv: &[Arg], reverse: bool) -> Outcome {
    arity::RANK.check(argv)?;
    let ranks = read(
        ctx,
        argv,
        || parse_rank_values(&argv[2..]),
        |r, xs| {
            xs.iter()
                .map(|&x| match r.fields().rank_without_estimates(x, reverse) {
                    Some(rank) => Ok(rank),
                    None => Ok(r.compressed()?.rank(x, reverse)),
                })
                .collect::<Result<Vec<_>, TdError>>()
        },
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
    arity::BY_RANK.check(argv)?;
    let values = read(
        ctx,
        argv,
        || parse_ranks(&argv[2..]),
        |r, ranks| {
            ranks
                .iter()
                .map(|&rank| match r.fields().by_rank_without_estimates(rank, reverse) {
                    Some(v) => Ok(v),
                    None => Ok(r.compressed()?.by_rank(rank, reverse)),
                })
                .collect::<Result<Vec<_>, TdError>>()
        },
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

/// The digest in a key for reads that never compress, as a client of this
/// server sees it: on a primary, with an owed compression made (in the
/// compressed copy), as RedisBloom would show it.
fn with_digest<T>(ctx: Ctx, argv: &[Arg], f: impl FnOnce(&TDigest) -> T) -> Result<T, Reply> {
    arity::ONE_KEY.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], false);
    let t = existing_mut(&mut key)?;
    COUNTERS.add(counters::QUERIES, 1);
    if from_client_on_primary(ctx) && t.owes_compression(super::data_type::snapshot_epoch()) {
        // The compressed copy may be made here: `write` keeps INFO's bytes current.
        t.write(|t| t.estimates().map(|_| ()))?;
        return Ok(f(t.estimated()));
    }
    Ok(f(t))
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
            (c"Memory usage", (t.size_bytes() + super::data_type::memory_extra()) as i64),
        ]
    })?;
    ctx.reply_map(fields.len());
    for (label, value) in fields {
        ctx.reply_simple(label);
        ctx.reply_i64(value);
    }
    Ok(())
}
