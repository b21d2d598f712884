//! The `APBF.*` commands: parse in core, open the key, call core, reply,
//! replicate, notify.
//!
//! Time windows are decided by the primary's clock only. A write to a
//! time window replicates the primary's decision first, as
//! `APBF.ADVANCE key n started_ms now_ms` (generations ended on the clock,
//! when the current one began, and the time the write is made at), then
//! itself verbatim; on a replica or during AOF replay the clock is never
//! consulted for writes, so volume ends and add times match the primary's
//! to the byte. Creation replicates as `APBF.LOADCHUNK key 0 <header>`.

use std::ffi::CStr;

use bloomkit_core::apbf::args::arity;
use bloomkit_core::apbf::args::{parse_advance, parse_chunk_iter, parse_reserve};
use bloomkit_core::apbf::{self, Apbf, ApbfError, Window};
use bloomkit_core::common::fmt::format_g;
use bloomkit_core::common::parse::parse_long_long;
use bloomkit_core::{Limits, Reply};

use super::counters::{self, COUNTERS};
use crate::command::Outcome;
use crate::ffi::{Arg, Ctx, Key};
use crate::{config, keys};

fn lookup(key: &mut Key) -> Result<Option<&mut Apbf>, Reply> {
    keys::lookup_mut(key)
}

/// The clock time decisions are made with (plus the test offset).
fn now_ms() -> u64 {
    let ms = crate::ffi::milliseconds();
    (ms.max(0) as u64).saturating_add(super::settings::clock_offset_ms())
}

/// `APBF.RESERVE key error_rate capacity COUNT | TIME seconds`
pub fn reserve(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let params = parse_reserve(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    if lookup(&mut key)?.is_some() {
        return Err(ApbfError::ItemExists.into());
    }
    // Sized and checked against the limit before anything is allocated.
    let f = Apbf::new(params, now_ms(), config::limits(ctx))
        .inspect_err(|_| COUNTERS.add(counters::REFUSED, 1))?;
    let header = f.encode_header();
    keys::store(&mut key, f)?;
    ctx.reply_simple(c"OK");
    ctx.replicate_chunk(c"APBF.LOADCHUNK", &argv[1], 0, &header);
    ctx.notify(c"apbf.reserve", &argv[1]);
    Ok(())
}

/// `APBF.ADD key item` and `APBF.MADD key item...`: 1 new within the window, 0 seen.
fn add_items(ctx: Ctx, argv: &[Arg], multi: bool) -> Outcome {
    let mut key = Key::open(ctx, &argv[1], true);
    let Some(f) = lookup(&mut key)? else { return Err(ApbfError::AddToMissing.into()) };
    let now = if f.window() == Window::Count {
        0
    } else if ctx.is_replaying() {
        // The primary's time, from the APBF.ADVANCE before this command.
        f.clock_ms()
    } else {
        // The filter's clock never goes back (a failover to a node whose
        // clock is behind, a lowered test offset): writes are made at the
        // later of the two, and replicas are told that time.
        let due = f.advance_to(now_ms());
        let now = f.clock_ms();
        ctx.replicate_advance(&argv[1], due, f.generation_started_ms(), now);
        now
    };
    let items = &argv[2..];
    if multi {
        ctx.reply_array(items.len());
    }
    for item in items {
        ctx.reply_bool(f.add(item.bytes(), now));
    }
    COUNTERS.add(counters::ITEMS_ADDED, items.len() as u64);
    ctx.replicate_verbatim();
    ctx.notify(c"apbf.add", &argv[1]);
    Ok(())
}

pub fn add(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::ADD.check(argv)?;
    add_items(ctx, argv, false)
}

pub fn madd(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::MADD.check(argv)?;
    add_items(ctx, argv, true)
}

/// Reads see generations due by now as passed, without changing anything.
fn with_filter<T>(ctx: Ctx, name: &Arg, f: impl FnOnce(Option<&Apbf>) -> T) -> Result<T, Reply> {
    let key = Key::open(ctx, name, false);
    Ok(f(keys::lookup(&key)?))
}

/// `APBF.EXISTS key item` (0 for a missing key).
pub fn exists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::EXISTS.check(argv)?;
    let now = now_ms();
    let found = with_filter(ctx, &argv[1], |f| f.is_some_and(|f| f.contains(argv[2].bytes(), now)))?;
    COUNTERS.add_on_main_thread(counters::LOOKUPS, 1);
    ctx.reply_bool(found);
    Ok(())
}

/// `APBF.MEXISTS key item...`
pub fn mexists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::MEXISTS.check(argv)?;
    let now = now_ms();
    with_filter(ctx, &argv[1], |f| {
        ctx.reply_array(argv.len() - 2);
        for item in &argv[2..] {
            ctx.reply_bool(f.is_some_and(|f| f.contains(item.bytes(), now)));
        }
    })?;
    COUNTERS.add_on_main_thread(counters::LOOKUPS, argv.len() as u64 - 2);
    Ok(())
}

/// `APBF.INFO key`: parameters, then the state as of now.
pub fn info(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::INFO.check(argv)?;
    let now = now_ms();
    let found = with_filter(ctx, &argv[1], |f| {
        let Some(f) = f else { return false };
        let s = f.shape();
        let (window, seconds) = match f.window() {
            Window::Count => ("count", -1),
            Window::Time { millis } => ("time", (millis / 1000) as i64),
        };
        let fields: [(&CStr, i64); 11] = [
            (c"Capacity", s.capacity() as i64),
            (c"Window seconds", seconds),
            (c"Slices", i64::from(s.slices())),
            (c"Hashes", i64::from(s.k)),
            (c"Generation size", s.generation as i64),
            (c"Generation ms", f.tick_ms().map_or(-1, |t| t as i64)),
            (c"Current generation", f.generations().saturating_add(f.due_generations(now)) as i64),
            (c"Items in window", f.items_in_window(now) as i64),
            (c"Items in generation", f.items_in_generation(now) as i64),
            (c"Generations lost early", f.early_losses() as i64),
            (c"Size", f.bytes() as i64),
        ];
        ctx.reply_map(2 + fields.len());
        ctx.reply_simple(c"Error rate");
        // A double in RESP3, as XF.INFO's and BF.INFO's numbers are typed
        // there; RESP2 keeps the text it always had.
        if ctx.is_resp3() {
            ctx.reply_double(f.error_rate());
        } else {
            ctx.reply_bulk(format_g(f.error_rate()).as_bytes());
        }
        ctx.reply_simple(c"Window");
        ctx.reply_bulk(window.as_bytes());
        for (label, value) in fields {
            ctx.reply_simple(label);
            ctx.reply_i64(value);
        }
        true
    })?;
    if !found {
        return Err(ApbfError::NotFound.into());
    }
    Ok(())
}

/// `APBF.SCANDUMP key iter` → `[next_iter, data]`: the header at iter 0,
/// then the body; `[0, ""]` at the end. Each pair loads with APBF.LOADCHUNK.
pub fn scandump(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::SCANDUMP.check(argv)?;
    let iter =
        parse_long_long(argv[2].bytes()).filter(|i| *i >= 0).ok_or(ApbfError::ScanDumpIterNotNumeric)?;
    let found = with_filter(ctx, &argv[1], |f| {
        let Some(f) = f else { return false };
        let (next, data) = f.scan_chunk(iter as u64);
        ctx.reply_array(2);
        ctx.reply_i64(next as i64);
        ctx.reply_bulk(&data);
        true
    })?;
    if !found {
        return Err(ApbfError::NotFound.into());
    }
    Ok(())
}

/// `APBF.ADVANCE key n started_ms [now_ms]`: ends n generations, as the primary did.
pub fn advance(ctx: Ctx, argv: &[Arg]) -> Outcome {
    let a = parse_advance(argv)?;
    let mut key = Key::open(ctx, &argv[1], true);
    let Some(f) = lookup(&mut key)? else { return Err(ApbfError::NotFound.into()) };
    f.advance(a.generations, a.started_ms, a.now_ms);
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    Ok(())
}

/// `APBF.LOADCHUNK key 0 header` creates; `APBF.LOADCHUNK key 1+offset data`
/// fills the body (what AOF rewrite and replication of creation send).
pub fn loadchunk(ctx: Ctx, argv: &[Arg]) -> Outcome {
    arity::LOADCHUNK.check(argv)?;
    let offset = parse_chunk_iter(argv[2].bytes())?;
    let data = argv[3].bytes();
    let mut key = Key::open(ctx, &argv[1], true);
    match (lookup(&mut key)?, offset) {
        (None, None) => {
            // Checked against both limits before the body is allocated: the
            // server's memory here, bf.max-filter-bytes by the decoder.
            let limits = config::limits(ctx);
            let memory = Limits { max_bytes: None, ..limits };
            memory.check(apbf::state_body_len(data)?).map_err(ApbfError::from)?;
            let f = Apbf::from_header(data, limits.max_bytes)?;
            keys::store(&mut key, f)?;
        }
        (Some(_), None) => return Err(ApbfError::ItemExists.into()),
        (None, Some(_)) => return Err(ApbfError::NotFound.into()),
        (Some(f), Some(offset)) => {
            f.load_bits(offset, data)?;
        }
    }
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    ctx.notify(c"apbf.loadchunk", &argv[1]);
    Ok(())
}
