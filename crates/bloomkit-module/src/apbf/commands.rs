//! Sliding-window dedup: the `APBF.*` commands and their data type, over
//! `bloomkit_core::apbf`.
//!
//! Time windows are decided by the primary's clock only. A command that
//! ends generations on the primary replicates that decision first as
//! `APBF.ADVANCE key n started_ms`, then itself verbatim; on a replica or
//! during AOF replay the clock is never consulted for writes. Creation
//! replicates as `APBF.LOADCHUNK key 0 <header>`, the exact state.

use std::ffi::{c_int, c_void, CStr};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use bloomkit_core::apbf::{Apbf, Window, HEADER_LEN};
use bloomkit_core::args::{parse_double, parse_long_long, ArgError};
use bloomkit_core::error::Error;
use bloomkit_core::rdb::{FieldReader, FieldWriter};
use redis_module::raw;

use crate::commands::Outcome;
use crate::data_type::{IoReader, IoWriter};
use crate::ffi::{api, cstring, digest_buffers, emit_aof_chunk, log, Arg, Ctx, Key, Slot};
use crate::{config, guard};

/// Nine characters, as the server requires; never changes once released.
pub const TYPE_NAME: &str = "bkit-apbf";
const ENCODING_VERSION: c_int = 1;
/// Bytes of slices per AOF-rewrite command.
const CHUNK: usize = 1 << 20;

static APBF_TYPE: AtomicPtr<raw::RedisModuleType> = AtomicPtr::new(std::ptr::null_mut());

fn apbf_type() -> *mut raw::RedisModuleType {
    APBF_TYPE.load(Relaxed)
}

pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    // SAFETY: all-zero is "no callback" for every optional field.
    let mut methods: raw::RedisModuleTypeMethods = unsafe { std::mem::zeroed() };
    methods.version = raw::REDISMODULE_TYPE_METHOD_VERSION as u64;
    methods.rdb_load = Some(rdb_load);
    methods.rdb_save = Some(rdb_save);
    methods.aof_rewrite = Some(aof_rewrite);
    methods.mem_usage = Some(mem_usage);
    methods.digest = Some(digest);
    methods.free = Some(free);
    methods.copy = Some(copy);
    let name = cstring(TYPE_NAME);
    // SAFETY: valid context during OnLoad; the server copies the methods.
    let ty = unsafe { api!(RedisModule_CreateDataType)(ctx, name.as_ptr(), ENCODING_VERSION, &mut methods) };
    if ty.is_null() {
        return Err(format!("could not register data type {TYPE_NAME}"));
    }
    APBF_TYPE.store(ty, Relaxed);
    Ok(())
}

/// # Safety
/// `value` must be a filter stored by this type.
unsafe fn apbf_ref<'a>(value: *mut c_void) -> &'a Apbf {
    &*value.cast::<Apbf>()
}

fn into_value(f: Apbf) -> *mut c_void {
    Box::into_raw(Box::new(f)).cast()
}

extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        if encver != ENCODING_VERSION {
            log(
                std::ptr::null_mut(),
                c"warning",
                &format!("bloomkit: {TYPE_NAME} encoding {encver} is unknown"),
            );
            return std::ptr::null_mut();
        }
        let decoded = IoReader(io).buffer().map_err(|_| "cut short").and_then(|b| Apbf::decode(&b));
        match decoded {
            Ok(f) => into_value(f),
            Err(e) => {
                log(std::ptr::null_mut(), c"warning", &format!("bloomkit: refused a {TYPE_NAME} value: {e}"));
                std::ptr::null_mut()
            }
        }
    })
}

extern "C" fn rdb_save(io: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: the server passes a value of this type.
    guard((), || IoWriter(io).buffer(&unsafe { apbf_ref(value) }.encode()))
}

/// The state as `APBF.LOADCHUNK`s: the header, then the slices by the MiB.
extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard((), || {
        // SAFETY: the server passes a value of this type.
        let f = unsafe { apbf_ref(value) };
        let emit = |iter: usize, data: &[u8]| emit_aof_chunk(aof, c"APBF.LOADCHUNK", key, iter as i64, data);
        emit(0, &f.encode_header());
        for (i, chunk) in f.bits().chunks(CHUNK).enumerate() {
            if chunk.iter().any(|&b| b != 0) {
                emit(1 + i * CHUNK, chunk);
            }
        }
    })
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: the server passes a value of this type.
    guard(0, || std::mem::size_of::<Apbf>() + unsafe { apbf_ref(value as *mut c_void) }.bytes())
}

extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard((), || {
        // SAFETY: the server passes a value of this type and a digest handle.
        let f = unsafe { apbf_ref(value) };
        digest_buffers(md, &[&f.encode_header(), f.bits()]);
    })
}

extern "C" fn free(value: *mut c_void) {
    // SAFETY: the server passes ownership of a value of this type.
    guard((), || drop(unsafe { Box::from_raw(value.cast::<Apbf>()) }))
}

extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: the server passes a value of this type.
    guard(std::ptr::null_mut(), || into_value(unsafe { apbf_ref(value as *mut c_void) }.clone()))
}

fn bad(message: &str) -> ArgError {
    ArgError::Reply(Error::Window(message.to_string()))
}

/// The filter in a key: `Ok(None)` when the key is empty.
fn lookup(key: &Key) -> Result<Option<NonNull<Apbf>>, Error> {
    match key.slot::<Apbf>(apbf_type()) {
        Slot::Ours(f) => Ok(Some(f)),
        Slot::Empty => Ok(None),
        Slot::OtherType => Err(Error::WrongType),
    }
}

fn store(key: &Key, f: Apbf) -> Result<NonNull<Apbf>, Error> {
    let value = into_value(f);
    // SAFETY: a key opened for writing and a value of our type.
    let status = unsafe { api!(RedisModule_ModuleTypeSetValue)(key.raw(), apbf_type(), value) };
    if status != raw::REDISMODULE_OK as i32 {
        // SAFETY: refused, so still ours.
        drop(unsafe { Box::from_raw(value.cast::<Apbf>()) });
        return Err(Error::OutOfMemory);
    }
    Ok(NonNull::new(value.cast()).expect("a boxed value"))
}

/// The clock time decisions are made with (plus the test offset).
fn now_ms() -> u64 {
    // SAFETY: callable from any command.
    let ms = unsafe { api!(RedisModule_Milliseconds)() };
    (ms.max(0) as u64).saturating_add(config::apbf_clock_offset_ms())
}

/// `APBF.RESERVE key error_rate capacity COUNT | TIME seconds`
pub fn reserve(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if !(4..=6).contains(&argv.len()) {
        return Err(ArgError::WrongArity);
    }
    let error = parse_double(argv[2].bytes())
        .filter(|e| *e > 0.0 && *e < 1.0)
        .ok_or_else(|| bad("ERR error rate must be a number strictly between 0 and 1"))?;
    let capacity = parse_long_long(argv[3].bytes())
        .filter(|c| *c >= 1)
        .ok_or_else(|| bad("ERR capacity must be a positive integer (the most items per window)"))?;
    let window = match (argv.get(4).map(|a| a.bytes().to_ascii_uppercase()), argv.get(5)) {
        (None, None) | (Some(_), None)
            if argv.len() == 5 && argv[4].bytes().eq_ignore_ascii_case(b"COUNT") =>
        {
            Window::Count
        }
        (Some(w), Some(seconds)) if w == b"TIME" => {
            let s = parse_long_long(seconds.bytes())
                .filter(|s| (1..=10 * 365 * 86_400).contains(s))
                .ok_or_else(|| bad("ERR TIME takes a window in seconds, from 1 to 10 years"))?;
            Window::Time { millis: s as u64 * 1000 }
        }
        _ => return Err(bad("ERR the window must be COUNT (the last capacity items) or TIME seconds")),
    };
    let key = Key::open(ctx, &argv[1], true);
    if lookup(&key)?.is_some() {
        return Err(Error::ItemExists.into());
    }
    let f = Apbf::new(error, capacity as u64, window, now_ms())
        .ok_or_else(|| bad("ERR cannot size a window filter for this error rate and capacity"))?;
    if let Some(limit) = config::limits(ctx).max_bytes {
        if f.bytes() as u64 > limit {
            return Err(Error::TooLarge { bytes: f.bytes() as u64, limit }.into());
        }
    }
    let header = f.encode_header();
    store(&key, f)?;
    ctx.reply_simple(c"OK");
    ctx.replicate_chunk(c"APBF.LOADCHUNK", &argv[1], 0, &header);
    ctx.notify(c"apbf.reserve", &argv[1]);
    Ok(())
}

/// `APBF.ADD key item` and `APBF.MADD key item...`: 1 new within the window, 0 seen.
fn add_items(ctx: Ctx, argv: &[Arg], multi: bool) -> Outcome {
    let key = Key::open(ctx, &argv[1], true);
    let Some(mut f) = lookup(&key)? else { return Err(Error::NotFound.into()) };
    // SAFETY: owned by the keyspace; commands run one at a time.
    let f = unsafe { f.as_mut() };
    // Only the primary's clock ends generations; replays take its decision.
    let now = if ctx.is_replaying() { f.generation_started_ms() } else { now_ms() };
    let due = f.advance_to(now);
    if due > 0 {
        let started = f.generation_started_ms().to_string();
        ctx.replicate_chunk(c"APBF.ADVANCE", &argv[1], due as i64, started.as_bytes());
    }
    let items = &argv[2..];
    if multi {
        ctx.reply_array(items.len());
    }
    for item in items {
        ctx.reply_bool(f.add(item.bytes(), now));
    }
    ctx.replicate_verbatim();
    ctx.notify(c"apbf.add", &argv[1]);
    Ok(())
}

pub fn add(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() != 3 {
        return Err(ArgError::WrongArity);
    }
    add_items(ctx, argv, false)
}

pub fn madd(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() < 3 {
        return Err(ArgError::WrongArity);
    }
    add_items(ctx, argv, true)
}

/// Reads see generations due by now as passed, without changing anything.
fn with_filter<T>(ctx: Ctx, name: &Arg, f: impl FnOnce(Option<&Apbf>) -> T) -> Result<T, Error> {
    let key = Key::open(ctx, name, false);
    // SAFETY: owned by the keyspace, read only while the key is open.
    Ok(f(lookup(&key)?.map(|p| unsafe { &*p.as_ptr() })))
}

/// `APBF.EXISTS key item` (0 for a missing key).
pub fn exists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() != 3 {
        return Err(ArgError::WrongArity);
    }
    let now = now_ms();
    let found = with_filter(ctx, &argv[1], |f| f.is_some_and(|f| f.contains(argv[2].bytes(), now)))?;
    ctx.reply_bool(found);
    Ok(())
}

/// `APBF.MEXISTS key item...`
pub fn mexists(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() < 3 {
        return Err(ArgError::WrongArity);
    }
    let now = now_ms();
    with_filter(ctx, &argv[1], |f| {
        ctx.reply_array(argv.len() - 2);
        for item in &argv[2..] {
            ctx.reply_bool(f.is_some_and(|f| f.contains(item.bytes(), now)));
        }
    })?;
    Ok(())
}

/// `APBF.INFO key`
pub fn info(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() != 2 {
        return Err(ArgError::WrongArity);
    }
    let now = now_ms();
    let found = with_filter(ctx, &argv[1], |f| {
        let Some(f) = f else { return false };
        let s = f.shape();
        let (window, seconds) = match f.window() {
            Window::Count => ("count", -1),
            Window::Time { millis } => ("time", (millis / 1000) as i64),
        };
        let fields: [(&CStr, i64); 9] = [
            (c"Capacity", s.capacity() as i64),
            (c"Window seconds", seconds),
            (c"Slices", i64::from(s.slices())),
            (c"Hashes", i64::from(s.k)),
            (c"Generation size", s.generation as i64),
            (c"Current generation", f.generations().saturating_add(f.due_generations(now)) as i64),
            (c"Items in window", f.items_in_window(now) as i64),
            (c"Items in generation", f.items_in_generation(now) as i64),
            (c"Size", f.bytes() as i64),
        ];
        ctx.reply_map(2 + fields.len());
        ctx.reply_simple(c"Error rate");
        ctx.reply_bulk(bloomkit_core::fmt::format_g(f.error_rate()).as_bytes());
        ctx.reply_simple(c"Window");
        ctx.reply_bulk(window.as_bytes());
        for (label, value) in fields {
            ctx.reply_simple(label);
            ctx.reply_i64(value);
        }
        true
    })?;
    if !found {
        return Err(Error::NotFound.into());
    }
    Ok(())
}

/// `APBF.ADVANCE key n started_ms`: ends n generations, as the primary did.
pub fn advance(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() != 4 {
        return Err(ArgError::WrongArity);
    }
    let n = parse_long_long(argv[2].bytes())
        .filter(|n| *n >= 0)
        .ok_or_else(|| bad("ERR invalid generation count"))?;
    let started =
        parse_long_long(argv[3].bytes()).filter(|s| *s >= 0).ok_or_else(|| bad("ERR invalid start time"))?;
    let key = Key::open(ctx, &argv[1], true);
    let Some(mut f) = lookup(&key)? else { return Err(Error::NotFound.into()) };
    // SAFETY: owned by the keyspace; commands run one at a time.
    unsafe { f.as_mut() }.advance(n as u64, started as u64);
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    Ok(())
}

/// `APBF.LOADCHUNK key 0 header` creates; `APBF.LOADCHUNK key 1+offset data`
/// fills the slices (what AOF rewrite and replication of creation send).
pub fn loadchunk(ctx: Ctx, argv: &[Arg]) -> Outcome {
    if argv.len() != 4 {
        return Err(ArgError::WrongArity);
    }
    let iter = parse_long_long(argv[2].bytes()).filter(|i| *i >= 0).ok_or(Error::LoadChunkIterNotNumeric)?;
    let data = argv[3].bytes();
    let key = Key::open(ctx, &argv[1], true);
    match (lookup(&key)?, iter) {
        (None, 0) => {
            let limit = config::limits(ctx).max_bytes.map_or(usize::MAX, |l| l as usize);
            if data.len() != HEADER_LEN {
                return Err(bad("ERR invalid APBF header"));
            }
            let f =
                Apbf::from_header(data, limit).map_err(|e| bad(&format!("ERR invalid APBF header: {e}")))?;
            store(&key, f)?;
        }
        (Some(_), 0) => return Err(Error::ItemExists.into()),
        (None, _) => return Err(Error::NotFound.into()),
        (Some(mut f), offset) => {
            // SAFETY: owned by the keyspace; commands run one at a time.
            unsafe { f.as_mut() }
                .load_bits(offset as usize - 1, data)
                .map_err(|e| bad(&format!("ERR invalid APBF chunk: {e}")))?;
        }
    }
    ctx.reply_simple(c"OK");
    ctx.replicate_verbatim();
    Ok(())
}
