//! `BF.*` on a `bloomfltr` key, answered as valkey-bloom answers: its
//! argument rules, replies (integers, not booleans; `BF.INFO` as an array
//! with its extra fields), errors, scaling and keyspace events
//! (`bloom.add`, `bloom.reserve`). `bf::commands` finds the key and hands
//! it here, and under `bf.compat valkey-bloom` an empty key too, which then
//! becomes a `bloomfltr` object; `BF.LOAD` (valkey-bloom's AOF) is the one
//! command of its own.
//!
//! Replication, as valkey-bloom replicates, so that a bloomkit primary
//! feeds a valkey-bloom replica and the other way round: a creation is sent
//! as `BF.INSERT key CAPACITY c ERROR e TIGHTENING t SEED s (NONSCALING |
//! EXPANSION x) [ITEMS ...]`, whatever the replica's configs, with the seed
//! the primary drew; an add that completed replicates verbatim. Where
//! bloomkit replicates more carefully than valkey-bloom: an add that
//! stopped at an error (a scale-out refused by the limit) replicates only
//! the items before it (`BF.MADD key ...`, or the creation's `ITEMS`),
//! since a replica or a replay applies no limit and would go further;
//! `BF.LOAD` replicates verbatim rather than as a `BF.INSERT`.

use bloomkit_core::common::fmt::format_g;
use bloomkit_core::vbloom::args::arity;
use bloomkit_core::vbloom::{self, Creation, InfoField, Object, ValkeyError, FIXED_SEED};
use bloomkit_core::{Limits, Reply, ReplyError};

use super::counters::{self, Tally};
use crate::command::Outcome;
use crate::ffi::{random_bytes, Arg, Ctx, Key};
use crate::value::Value;
use crate::{config, keys};

/// What a `bloomfltr` operation may allocate.
fn limits(ctx: Ctx) -> Limits {
    super::settings::limits(config::limits(ctx))
}

/// `BF.LOAD key blob`: creates the object valkey-bloom's AOF rewrite wrote.
pub fn load(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::LOAD.check(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    // A Bloom filter of either type is there already; another type is WRONGTYPE.
    if keys::lookup_either::<Object, bloomkit_core::bf::Chain>(&key)?.is_some() {
        return Err(ValkeyError::KeyExists.into());
    }
    // Checked and compared with the limit before anything is allocated.
    let object = Object::decode_blob(argv[2].bytes(), limits(ctx))?;
    keys::store(&mut key, object)?;
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"bloom.reserve", &argv[1]);
    Ok(())
}

/// `BF.RESERVE` on a key that cannot take it (`taken`: a `bloomfltr` key's
/// `ERR item exists`, another type's WRONGTYPE): valkey-bloom checks the
/// arguments first, and answers their error if they have one.
pub fn reserve_refused(argv: &[Arg], taken: Reply) -> Outcome {
    vbloom::parse_reserve(argv, &super::settings::defaults())?;
    Err(taken)
}

/// `BF.INSERT` on a key of another type: the arguments first, as for
/// [`reserve_refused`].
pub fn insert_refused(ctx: Ctx, argv: &[Arg], taken: Reply) -> Outcome {
    vbloom::parse_insert(argv, &super::settings::defaults(), limits(ctx))?;
    Err(taken)
}

/// `BF.RESERVE` on an empty key under `bf.compat valkey-bloom`.
pub fn reserve_new(ctx: Ctx, argv: &[Arg], key: &mut Key) -> Outcome {
    let creation = vbloom::parse_reserve(argv, &super::settings::defaults())?;
    let object = create(ctx, &creation)?;
    let stored = keys::store(key, object)?;
    ctx.reply_simple(c"OK");
    replicate_creation(ctx, &argv[1], stored, &[]);
    ctx.notify(c"bloom.reserve", &argv[1]);
    Ok(())
}

/// A new object as a command asked for it, with a fresh random seed where
/// it named none and the configs ask for random seeds (under
/// `BLOOMKIT_HASH_SEED`, the seed that names: see `xf::secret`).
fn create(ctx: Ctx, creation: &Creation) -> Result<Object, Reply> {
    let mut seed = FIXED_SEED;
    if creation.seed.is_none() {
        match bloomkit_core::xf::Seed::from_environment() {
            Some(fixed) => seed = replayable_seed(fixed),
            None => random_bytes(&mut seed),
        }
    }
    Object::create(creation, &seed, limits(ctx)).map_err(|e| {
        super::counters::COUNTERS.add(super::counters::REFUSED, 1);
        e.into()
    })
}

/// Under `BLOOMKIT_HASH_SEED`: the n-th object's seed, from that
/// variable's seed and n, so that a run replays while objects still differ
/// as valkey-bloom's random seeds do.
fn replayable_seed(fixed: bloomkit_core::xf::Seed) -> [u8; 32] {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut seed = [0u8; 32];
    for (half, part) in seed.chunks_exact_mut(16).zip([b"a", b"b"]) {
        let text = format!("{}-{n}-{}", fixed.to_hex(), part[0] as char);
        let words = bloomkit_core::xf::Seed::from_text(text.as_bytes()).0;
        half[..8].copy_from_slice(&words[0].to_le_bytes());
        half[8..].copy_from_slice(&words[1].to_le_bytes());
    }
    seed
}

/// `BF.INSERT` on a `bloomfltr` key, or on an empty key under `bf.compat
/// valkey-bloom`: the options are checked (they change nothing on an
/// existing object), then the items are added.
pub fn insert(ctx: Ctx, argv: &[Arg], key: &mut Key) -> Outcome {
    let parsed = vbloom::parse_insert(argv, &super::settings::defaults(), limits(ctx))?;
    match keys::lookup_mut::<Object>(key)? {
        Some(o) => add(ctx, argv, o, parsed.items_from, true),
        None if parsed.nocreate => Err(ValkeyError::NotFound.into()),
        None => create_with_items(ctx, argv, key, &parsed.creation, parsed.items_from, true),
    }
}

/// `BF.ADD` / `BF.MADD` on an empty key under `bf.compat valkey-bloom`:
/// an object with the configured defaults, then the items.
pub fn add_new(ctx: Ctx, argv: &[Arg], key: &mut Key, multi: bool) -> Outcome {
    let creation = Creation::from_defaults(&super::settings::defaults());
    create_with_items(ctx, argv, key, &creation, 2, multi)
}

/// Creates the object and adds `argv[items_from..]`. A batch a
/// non-scaling object cannot take is refused before the key is made.
fn create_with_items(
    ctx: Ctx,
    argv: &[Arg],
    key: &mut Key,
    creation: &Creation,
    items_from: usize,
    multi: bool,
) -> Outcome {
    let object = create(ctx, creation)?;
    check_room(ctx, &object, &argv[items_from..])?;
    let stored = keys::store(key, object)?;
    write(ctx, argv, stored, items_from, multi, true)
}

/// `BF.ADD` (one item, its result or error as the reply), `BF.MADD` and
/// `BF.INSERT` (an array; the first error ends it, as its last element)
/// on an existing object. A non-scaling object that cannot take the batch
/// refuses all of it.
pub fn add(ctx: Ctx, argv: &[Arg], object: &mut Object, items_from: usize, multi: bool) -> Outcome {
    if multi {
        check_room(ctx, object, &argv[items_from..])?;
    }
    write(ctx, argv, object, items_from, multi, false)
}

/// valkey-bloom refuses a whole batch a non-scaling object cannot take. A
/// replica or a replay does not ask: its primary took the batch (and the
/// trial may need a copy of a sub-filter that memory cannot give there).
fn check_room(ctx: Ctx, o: &Object, items: &[Arg]) -> Result<(), ValkeyError> {
    if ctx.is_replaying() {
        return Ok(());
    }
    o.check_room(items)
}

/// Adds the items to an object in the keyspace (`created` by this
/// command, or not), replies, replicates and notifies.
fn write(ctx: Ctx, argv: &[Arg], o: &mut Object, items_from: usize, multi: bool, created: bool) -> Outcome {
    let limits = limits(ctx);
    let items = &argv[items_from..];
    let before = Tally::of(o);
    let mut added = 0u64;
    let mut completed = 0usize;
    let mut failed = None;
    if multi {
        let array = ctx.postponed_array();
        let mut replied = 0usize;
        // A scale-out allocates: `write` keeps INFO's bytes current.
        o.write(|o| {
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
        });
        array.close(replied);
    } else {
        match o.write(|o| o.add(items[0].bytes(), limits)) {
            Ok(new) => {
                added = u64::from(new);
                completed = 1;
            }
            Err(e) => failed = Some(e),
        }
    }
    counters::grew(before, o);
    if created {
        replicate_creation(ctx, &argv[1], o, &items[..completed]);
    } else if added > 0 {
        if completed == items.len() {
            ctx.replicate_verbatim();
        } else {
            ctx.replicate_items(c"BF.MADD", &argv[1], None, &items[..completed]);
        }
    }
    // valkey-bloom's order: the add, then the creation.
    if added > 0 {
        ctx.notify(c"bloom.add", &argv[1]);
    }
    if created {
        ctx.notify(c"bloom.reserve", &argv[1]);
    }
    match failed {
        Some(e) => Err(e.into()),
        None => {
            if !multi {
                ctx.reply_i64(added as i64);
            }
            Ok(())
        }
    }
}

/// A new object reaches replicas and the AOF as valkey-bloom sends it:
/// `BF.INSERT key CAPACITY c ERROR e TIGHTENING t SEED s (NONSCALING |
/// EXPANSION x) [ITEMS item...]`, the exact object whatever the other
/// side's configs (numbers as Rust prints them, as valkey-bloom does).
fn replicate_creation(ctx: Ctx, key: &Arg, o: &Object, items: &[Arg]) {
    let c = o.creation();
    let seed = c.seed.expect("an object's creation names its seed");
    let (capacity, error, tightening, expansion) =
        (c.capacity.to_string(), c.fp_rate.to_string(), c.tightening.to_string(), c.expansion.to_string());
    let mut words: Vec<&[u8]> = vec![
        b"CAPACITY",
        capacity.as_bytes(),
        b"ERROR",
        error.as_bytes(),
        b"TIGHTENING",
        tightening.as_bytes(),
        b"SEED",
        &seed,
    ];
    if c.expansion == 0 {
        words.push(b"NONSCALING");
    } else {
        words.extend([&b"EXPANSION"[..], expansion.as_bytes()]);
    }
    if !items.is_empty() {
        words.push(b"ITEMS");
    }
    ctx.replicate_words(c"BF.INSERT", key, &words, items);
}

/// `BF.INFO key [field]`: valkey-bloom's array (scaling objects add
/// `Tightening ratio` and `Max scaled capacity`), or one bare value.
pub fn info(ctx: Ctx, argv: &[Arg], o: &Object) -> Outcome {
    let limits = limits(ctx);
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
