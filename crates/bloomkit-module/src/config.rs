//! Defaults and limits: RedisBloom's load-time arguments and runtime configs.
//!
//! | config                  | load argument   | default | range            |
//! |-------------------------|-----------------|---------|------------------|
//! | `bf.error-rate`         | `ERROR_RATE`    | 0.01    | (0, 1)           |
//! | `bf.initial-size`       | `INITIAL_SIZE`  | 100     | [1, 2^40]        |
//! | `bf.expansion-factor`   | `EXPANSION`     | 2       | [1, 32768]       |
//! | `bf.max-filter-bytes`   | `MAX_FILTER_BYTES` | 4 GiB | [64, 2^50]     |
//! | `bf.huge-pages`         | `HUGE_PAGES`    | no      | yes, no          |

use std::ffi::{c_char, c_int, c_longlong, c_void};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, Ordering::Relaxed};

use bloomkit_core::bf::args::{Defaults, MAX_EXPANSION};
use bloomkit_core::common::parse::{parse_double, parse_long_long};
use bloomkit_core::Limits;
use redis_module::raw;

use crate::ffi::{api, cstring, has_api, Arg, Ctx};

static ERROR_RATE: AtomicU64 = AtomicU64::new(0x3F84_7AE1_47AE_147B); // 0.01
static INITIAL_SIZE: AtomicI64 = AtomicI64::new(100);
static EXPANSION: AtomicI64 = AtomicI64::new(2);
static MAX_FILTER_BYTES: AtomicI64 = AtomicI64::new(4 << 30);
/// Whether large arrays ask for transparent huge pages (see `alloc.rs`).
/// Off by default: the first writes to a new filter then commit it 2 MiB at
/// a time, and one batch touching every 2 MiB of a new sub-filter commits
/// all of it in one command (0.7 s without answering a PING for a 290 MB
/// sub-filter here, against 23 ms on 4 KiB pages).
static HUGE_PAGES: AtomicBool = AtomicBool::new(false);
/// Added to the clock of APBF time windows: a test hook that moves time
/// without sleeping (`CONFIG SET bf.apbf-clock-offset-ms`).
static APBF_CLOCK_OFFSET: AtomicI64 = AtomicI64::new(0);
const MAX_CLOCK_OFFSET: i64 = 100 * 365 * 86_400_000;

#[cfg_attr(test, allow(dead_code))] // read by the allocator, which tests do not install
pub fn huge_pages() -> bool {
    HUGE_PAGES.load(Relaxed)
}

pub fn apbf_clock_offset_ms() -> u64 {
    APBF_CLOCK_OFFSET.load(Relaxed).max(0) as u64
}
/// The text `CONFIG GET bf.error-rate` answers (owned by the module).
static ERROR_RATE_TEXT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

const MAX_INITIAL_SIZE: i64 = 1 << 40;
const MIN_FILTER_BYTES: i64 = 64;
const MAX_FILTER_BYTES_LIMIT: i64 = 1 << 50;

/// What a write uses for a filter it creates without parameters.
pub fn defaults() -> Defaults {
    Defaults {
        error: f64::from_bits(ERROR_RATE.load(Relaxed)),
        capacity: INITIAL_SIZE.load(Relaxed) as u64,
        expansion: EXPANSION.load(Relaxed) as u32,
    }
}

/// The size limit for this command: none when replaying what a primary or
/// the AOF already accepted, so that a replica never diverges.
pub fn limits(ctx: Ctx) -> Limits {
    if ctx.is_replaying() {
        Limits::NONE
    } else {
        Limits { max_bytes: Some(MAX_FILTER_BYTES.load(Relaxed) as u64) }
    }
}

/// The limit for RDB loads: RESTORE obeys it; loading at startup does not,
/// since refusing a value there would stop the server from starting.
pub fn limits_for_load(loading: bool) -> Limits {
    if loading {
        Limits::NONE
    } else {
        Limits { max_bytes: Some(MAX_FILTER_BYTES.load(Relaxed) as u64) }
    }
}

fn check_error_rate(text: &[u8]) -> Result<f64, String> {
    match parse_double(text) {
        Some(v) if v > 0.0 && v < 1.0 => Ok(v),
        _ => Err(format!(
            "bf.error-rate must be a number strictly between 0 and 1, got '{}'",
            String::from_utf8_lossy(text)
        )),
    }
}

fn check_integer(name: &str, text: &[u8], min: i64, max: i64) -> Result<i64, String> {
    match parse_long_long(text) {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(format!(
            "{name} must be an integer from {min} to {max}, got '{}'",
            String::from_utf8_lossy(text)
        )),
    }
}

fn check_yes_no(name: &str, text: &[u8]) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_slice() {
        b"yes" => Ok(true),
        b"no" => Ok(false),
        _ => Err(format!("{name} must be yes or no, got '{}'", String::from_utf8_lossy(text))),
    }
}

/// `loadmodule libbloomkit.so [ERROR_RATE p] [INITIAL_SIZE n] [EXPANSION n] [MAX_FILTER_BYTES n] [HUGE_PAGES yes|no]`.
pub fn apply_load_args(args: &[Arg]) -> Result<(), String> {
    let mut pairs = args.chunks(2);
    for pair in &mut pairs {
        let name = String::from_utf8_lossy(pair[0].bytes()).to_ascii_uppercase();
        let Some(value) = pair.get(1).map(Arg::bytes) else {
            return Err(format!("module argument {name} needs a value"));
        };
        match name.as_str() {
            "ERROR_RATE" => ERROR_RATE.store(check_error_rate(value)?.to_bits(), Relaxed),
            "INITIAL_SIZE" => INITIAL_SIZE.store(check_integer("INITIAL_SIZE", value, 1, MAX_INITIAL_SIZE)?, Relaxed),
            "EXPANSION" => EXPANSION.store(check_integer("EXPANSION", value, 1, MAX_EXPANSION)?, Relaxed),
            "MAX_FILTER_BYTES" => MAX_FILTER_BYTES.store(
                check_integer("MAX_FILTER_BYTES", value, MIN_FILTER_BYTES, MAX_FILTER_BYTES_LIMIT)?,
                Relaxed,
            ),
            "HUGE_PAGES" => HUGE_PAGES.store(check_yes_no("HUGE_PAGES", value)?, Relaxed),
            _ => {
                return Err(format!(
                    "unknown module argument '{name}'; allowed: ERROR_RATE, INITIAL_SIZE, EXPANSION, MAX_FILTER_BYTES, \
                     HUGE_PAGES"
                ))
            }
        }
    }
    Ok(())
}

/// Which numeric config a callback serves (passed as privdata).
#[derive(Clone, Copy)]
#[repr(usize)]
enum Numeric {
    InitialSize = 1,
    Expansion = 2,
    MaxFilterBytes = 3,
    ApbfClockOffset = 4,
}

impl Numeric {
    fn from_privdata(p: *mut c_void) -> Option<Numeric> {
        match p as usize {
            1 => Some(Numeric::InitialSize),
            2 => Some(Numeric::Expansion),
            3 => Some(Numeric::MaxFilterBytes),
            4 => Some(Numeric::ApbfClockOffset),
            _ => None,
        }
    }
    fn cell(self) -> &'static AtomicI64 {
        match self {
            Numeric::InitialSize => &INITIAL_SIZE,
            Numeric::Expansion => &EXPANSION,
            Numeric::MaxFilterBytes => &MAX_FILTER_BYTES,
            Numeric::ApbfClockOffset => &APBF_CLOCK_OFFSET,
        }
    }
}

extern "C" fn get_numeric(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    Numeric::from_privdata(privdata).map_or(0, |n| n.cell().load(Relaxed))
}

extern "C" fn set_numeric(
    _name: *const c_char,
    value: c_longlong,
    privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // The server already enforced the registered range.
    match Numeric::from_privdata(privdata) {
        Some(n) => {
            n.cell().store(value, Relaxed);
            raw::REDISMODULE_OK as c_int
        }
        None => raw::REDISMODULE_ERR as c_int,
    }
}

extern "C" fn get_huge_pages(_name: *const c_char, _privdata: *mut c_void) -> c_int {
    c_int::from(HUGE_PAGES.load(Relaxed))
}

extern "C" fn set_huge_pages(
    _name: *const c_char,
    value: c_int,
    _privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    HUGE_PAGES.store(value != 0, Relaxed);
    raw::REDISMODULE_OK as c_int
}

extern "C" fn get_error_rate(_name: *const c_char, _privdata: *mut c_void) -> *mut raw::RedisModuleString {
    ERROR_RATE_TEXT.load(Relaxed)
}

extern "C" fn set_error_rate(
    _name: *const c_char,
    value: *mut raw::RedisModuleString,
    _privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    let arg = Arg::from_raw(value);
    match check_error_rate(arg.bytes()) {
        Ok(rate) => {
            ERROR_RATE.store(rate.to_bits(), Relaxed);
            // SAFETY: retaining the server's string keeps it valid for our getter.
            unsafe { api!(RedisModule_RetainString)(std::ptr::null_mut(), value) };
            let old = ERROR_RATE_TEXT.swap(value, Relaxed);
            if !old.is_null() {
                // SAFETY: our own retained reference, released once.
                unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), old) };
            }
            raw::REDISMODULE_OK as c_int
        }
        Err(message) => {
            // SAFETY: the server takes ownership of the error string.
            unsafe {
                *err = api!(RedisModule_CreateString)(
                    std::ptr::null_mut(),
                    message.as_ptr().cast(),
                    message.len(),
                )
            };
            raw::REDISMODULE_ERR as c_int
        }
    }
}

/// Registers the runtime configs, with the load arguments as their defaults.
pub fn register(ctx: Ctx) -> Result<(), String> {
    if !has_api!(RedisModule_RegisterNumericConfig) {
        return Ok(()); // servers before 7.0: load arguments only
    }
    let rate_text = format!("{}", f64::from_bits(ERROR_RATE.load(Relaxed)));
    let name = cstring("error-rate");
    let default = cstring(&rate_text);
    // SAFETY: valid context, NUL-terminated names, callbacks with the declared signatures.
    let status = unsafe {
        ERROR_RATE_TEXT.store(
            api!(RedisModule_CreateString)(std::ptr::null_mut(), rate_text.as_ptr().cast(), rate_text.len()),
            Relaxed,
        );
        api!(RedisModule_RegisterStringConfig)(
            ctx.0,
            name.as_ptr(),
            default.as_ptr(),
            raw::REDISMODULE_CONFIG_DEFAULT,
            Some(get_error_rate),
            Some(set_error_rate),
            None,
            std::ptr::null_mut(),
        )
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err("could not register config bf.error-rate".into());
    }
    let numerics = [
        ("initial-size", Numeric::InitialSize, 1, MAX_INITIAL_SIZE),
        ("expansion-factor", Numeric::Expansion, 1, MAX_EXPANSION),
        ("max-filter-bytes", Numeric::MaxFilterBytes, MIN_FILTER_BYTES, MAX_FILTER_BYTES_LIMIT),
        ("apbf-clock-offset-ms", Numeric::ApbfClockOffset, 0, MAX_CLOCK_OFFSET),
    ];
    for (config, which, min, max) in numerics {
        let name = cstring(config);
        // SAFETY: as above; privdata is a tag, never dereferenced.
        let status = unsafe {
            api!(RedisModule_RegisterNumericConfig)(
                ctx.0,
                name.as_ptr(),
                which.cell().load(Relaxed),
                raw::REDISMODULE_CONFIG_DEFAULT,
                min,
                max,
                Some(get_numeric),
                Some(set_numeric),
                None,
                which as usize as *mut c_void,
            )
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not register config bf.{config}"));
        }
    }
    let name = cstring("huge-pages");
    // SAFETY: as above.
    let status = unsafe {
        api!(RedisModule_RegisterBoolConfig)(
            ctx.0,
            name.as_ptr(),
            c_int::from(HUGE_PAGES.load(Relaxed)),
            raw::REDISMODULE_CONFIG_DEFAULT,
            Some(get_huge_pages),
            Some(set_huge_pages),
            None,
            std::ptr::null_mut(),
        )
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err("could not register config bf.huge-pages".into());
    }
    // SAFETY: valid context; applies values from the config file / command line.
    let status = unsafe { api!(RedisModule_LoadConfigs)(ctx.0) };
    if status != raw::REDISMODULE_OK as c_int {
        return Err("invalid bf.* value in the server configuration".into());
    }
    Ok(())
}
