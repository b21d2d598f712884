//! The settings mechanism: values, names, checks, registration as runtime
//! configs (CONFIG SET/GET/REWRITE, the configuration file) and load
//! arguments, for every family's rows ([`Setting`], in its `settings.rs`)
//! and the module's own, listed here:
//!
//! | config | load argument | default | range |
//! |---|---|---|---|
//! | `bf.compat` | `COMPAT` | `redisbloom-8.12` on Redis 8.12+, `redisbloom-8` on Redis 8, else `redisbloom-2.8` | `redisbloom-2.8`, `redisbloom-8`, `redisbloom-8.12`, `valkey-bloom` |
//! | `bf.max-filter-bytes` | `MAX_FILTER_BYTES` | 8 GiB | [64, 2^50] |
//! | `bf.huge-pages` | `HUGE_PAGES` | no | yes, no |
//! | `bf.maxmemory-guard` | `MAXMEMORY_GUARD` | yes | yes, no |
//!
//! RedisBloom 8 registers its configs without the module's prefix, which
//! only Redis 8 allows; elsewhere they carry `bf.`. A load argument may be
//! any setting's name (with or without `bf.`, `_` for `-`, any case) or one
//! of its aliases (RedisBloom 2.8's names). Two names of one value share
//! its range, so that `CONFIG REWRITE` never writes a line the other name
//! would refuse; on Redis 8 they are one config, bloomkit's name the alias
//! of RedisBloom 8's, so that `CONFIG REWRITE` writes one line.

use std::ffi::{c_char, c_int, c_longlong, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, Ordering::Relaxed};

use bloomkit_core::bf::args::ERROR_RATE_CAP_8;
use bloomkit_core::common::compat::Compat;
use bloomkit_core::common::parse::{parse_double, parse_long_long};
use bloomkit_core::common::sizing::is_rate;
use bloomkit_core::Limits;
use redis_module::raw;

use crate::ffi::{api, cstring, Arg, Ctx, ServerKind};

/// The compatibility level, as an index into [`Compat::ALL`]; -1 until the
/// load sets it from the server (or a load argument does).
static COMPAT: AtomicI64 = AtomicI64::new(-1);
/// 8 GiB: a filter whose array is 2^32 bytes or buckets (4 GiB, the
/// largest RedisBloom 8's own tests load: a cuckoo filter of 2^32 buckets
/// from a `CF.LOADCHUNK` header) fits with its bookkeeping and room to
/// grow once; 4 GiB refused it by the 56 bytes of its header.
static MAX_FILTER_BYTES: AtomicI64 = AtomicI64::new(8 << 30);
/// Whether large arrays ask for transparent huge pages (see `alloc.rs`).
/// Off by default: the first writes to a new filter then commit it 2 MiB at
/// a time, and one batch touching every 2 MiB of a new sub-filter commits
/// all of it in one command (0.7 s without answering a PING for a 290 MB
/// sub-filter here, against 23 ms on 4 KiB pages).
static HUGE_PAGES: AtomicBool = AtomicBool::new(false);
/// Whether creations and scale-outs that would pass `maxmemory` are refused.
static MAXMEMORY_GUARD: AtomicBool = AtomicBool::new(true);
/// The server's `maxmemory` where its policy is `noeviction` (else 0), read
/// at load and again whenever a CONFIG SET changes either, so that a write
/// reads one ratio instead of the INFO section. Under an eviction policy the
/// server makes room itself, by evicting keys before each command, as it
/// does for RedisBloom's filters; refusing there would refuse for good.
static MAXMEMORY: AtomicU64 = AtomicU64::new(0);
/// True while `RedisModule_LoadConfigs` applies the configuration file.
static LOADING_CONFIGS: AtomicBool = AtomicBool::new(false);
/// Whether test hooks may be set: the load argument `TEST_HOOKS yes`, and
/// nothing else (it is no config, so `CONFIG SET` cannot turn it on).
static TEST_HOOKS: AtomicBool = AtomicBool::new(false);
/// Where a setting's config name is registered.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// `bf.<name>` on every server: bloomkit's own settings.
    Prefixed,
    /// RedisBloom 8's names: unprefixed where the server allows it (Redis
    /// 8), `bf.<name>` elsewhere.
    RedisBloom8,
    /// valkey-bloom's: `bf.<name>` everywhere, integer ranges checked by
    /// the server (whose message valkey-bloom's users see), rates answered
    /// with valkey-bloom's texts.
    ValkeyBloom,
}

/// A range that follows other settings: `(min, max)` as they now are.
pub type Linked = fn(i64, i64) -> (i64, i64);

/// A family's own check of a rate's text: the rate, or its message.
pub type RateCheck = fn(&[u8]) -> Result<f64, String>;

/// What a setting holds, and its range.
#[derive(Clone, Copy)]
pub enum Value {
    /// A ratio strictly between 0 and 1, kept as `f64` bits, with the text
    /// it was set to (what `CONFIG GET` answers).
    Rate {
        cell: &'static AtomicU64,
        text: &'static AtomicPtr<raw::RedisModuleString>,
        /// The family's own reading of the text and its messages
        /// (valkey-bloom's); `None` for bloomkit's.
        own_check: Option<RateCheck>,
    },
    Integer {
        cell: &'static AtomicI64,
        min: i64,
        max: i64,
        /// RedisBloom 8's ranges that follow other settings (the cuckoo
        /// sizes): the range as those settings now are.
        linked: Option<Linked>,
    },
    Bool(&'static AtomicBool),
    Compat,
}

/// One config: what it holds, under which name, and what the server was
/// told about it. A family declares its rows as statics in its
/// `settings.rs` and lists them in its `FAMILY`.
pub struct Setting {
    pub name: &'static str,
    pub naming: Naming,
    pub value: Value,
    /// Load-argument names besides the setting's own (normalised: lower
    /// case, `-` for `_`): RedisBloom 2.8's `ERROR_RATE`, `INITIAL_SIZE` and
    /// `CF_MAX_EXPANSIONS` are the settings' own names so normalised.
    pub aliases: &'static [&'static str],
    /// The registered default, as [`store`] takes it.
    default: AtomicI64,
    /// The value before load arguments and the configuration file, as
    /// [`store`] takes it (what "left alone" means).
    initial: AtomicI64,
    /// The level under which alone the setting does anything
    /// (valkey-bloom's settings for the filters that level creates).
    pub only_under: Option<Compat>,
    /// A test hook (APBF's clock offset): settable only where the module
    /// was loaded with `TEST_HOOKS yes`, so that no `CONFIG SET` on a
    /// production server reaches it.
    pub test_hook: bool,
    /// The text `CONFIG GET` answers for RedisBloom 8's integer configs on
    /// Redis 8, registered as strings so that their refusals are RedisBloom
    /// 8's (owned by the module).
    int_text: AtomicPtr<raw::RedisModuleString>,
}

impl Setting {
    pub const fn new(name: &'static str, naming: Naming, value: Value) -> Setting {
        Setting {
            name,
            naming,
            value,
            aliases: &[],
            default: AtomicI64::new(0),
            initial: AtomicI64::new(0),
            only_under: None,
            test_hook: false,
            int_text: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// A test hook: refused (by CONFIG SET, load arguments and the
    /// configuration file alike) unless the module was loaded with
    /// `TEST_HOOKS yes`. It stays registered, so that a configuration file
    /// that names it at its default still starts.
    pub const fn test_hook(self) -> Setting {
        Setting { test_hook: true, ..self }
    }

    pub const fn with_aliases(self, aliases: &'static [&'static str]) -> Setting {
        Setting { aliases, ..self }
    }

    /// A setting that does something only under `level`: set under another
    /// it is refused (CONFIG SET) or stops the start (load arguments, the
    /// configuration file), saying which setting to add, rather than being
    /// silently kept and ignored.
    pub const fn only_under(self, level: Compat) -> Setting {
        Setting { only_under: Some(level), ..self }
    }

    /// Why this setting cannot be set now, if it cannot.
    fn refusal(&self) -> Option<String> {
        if self.test_hook && !TEST_HOOKS.load(Relaxed) {
            return Some(format!(
                "bf.{} is a test hook, settable only where the module was loaded with the argument \
                 TEST_HOOKS yes (--loadmodule libbloomkit.so TEST_HOOKS yes), which no production \
                 server should have",
                self.name
            ));
        }
        let level = self.only_under?;
        let now = compat();
        (now != level).then(|| {
            format!(
                "bf.{} shapes the filters `bf.compat {}` creates, and the level is {}: add `bf.compat {}` \
                 to the configuration (or load arguments) and restart, or leave bf.{} out",
                self.name,
                level.name(),
                now.name(),
                level.name(),
                self.name
            )
        })
    }
}

/// An integer setting in `[min, max]`.
pub const fn int(cell: &'static AtomicI64, min: i64, max: i64) -> Value {
    Value::Integer { cell, min, max, linked: None }
}

/// A rate (strictly between 0 and 1) with bloomkit's range message.
pub const fn rate(cell: &'static AtomicU64, text: &'static AtomicPtr<raw::RedisModuleString>) -> Value {
    Value::Rate { cell, text, own_check: None }
}

const MAX_FILTER_BYTES_RANGE: (i64, i64) = (64, 1 << 50);

static COMPAT_SETTING: Setting = Setting::new("compat", Naming::Prefixed, Value::Compat);
static MAX_FILTER_BYTES_SETTING: Setting = Setting::new(
    "max-filter-bytes",
    Naming::Prefixed,
    int(&MAX_FILTER_BYTES, MAX_FILTER_BYTES_RANGE.0, MAX_FILTER_BYTES_RANGE.1),
);
static HUGE_PAGES_SETTING: Setting = Setting::new("huge-pages", Naming::Prefixed, Value::Bool(&HUGE_PAGES));
static MAXMEMORY_GUARD_SETTING: Setting =
    Setting::new("maxmemory-guard", Naming::Prefixed, Value::Bool(&MAXMEMORY_GUARD));
/// The module's own settings, registered after the families'.
static MODULE_SETTINGS: [&Setting; 4] =
    [&COMPAT_SETTING, &MAX_FILTER_BYTES_SETTING, &HUGE_PAGES_SETTING, &MAXMEMORY_GUARD_SETTING];

/// Every setting: the families' rows (given once, at load), then the module's.
static SETTINGS: std::sync::OnceLock<Vec<&'static Setting>> = std::sync::OnceLock::new();

fn settings() -> &'static [&'static Setting] {
    SETTINGS.get().map_or(&MODULE_SETTINGS[..], Vec::as_slice)
}

/// Takes the families' settings (at load, before anything else here).
pub fn init(families: impl Iterator<Item = &'static Setting>) {
    let all: Vec<&'static Setting> = families.chain(MODULE_SETTINGS.iter().copied()).collect();
    for setting in &all {
        setting.initial.store(current(setting.value), Relaxed);
    }
    let _ = SETTINGS.set(all);
}

/// Values the configuration file gave while it is applied, by the value
/// they set: two names of one value (`bf.error-rate`, `bf-error-rate`)
/// with two values would otherwise leave one silently unused.
static FILE_VALUES: std::sync::Mutex<Vec<(usize, &'static str, i64)>> = std::sync::Mutex::new(Vec::new());
static FILE_CONFLICTS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn cell_of(value: Value) -> usize {
    match value {
        Value::Rate { cell, .. } => std::ptr::from_ref(cell) as usize,
        Value::Integer { cell, .. } => std::ptr::from_ref(cell) as usize,
        Value::Bool(cell) => std::ptr::from_ref(cell) as usize,
        Value::Compat => std::ptr::from_ref(&COMPAT) as usize,
    }
}

/// Notes a value the configuration file gives (see [`FILE_VALUES`]).
fn note_file_value(setting: &'static Setting, checked: i64) {
    let cell = cell_of(setting.value);
    let mut seen = FILE_VALUES.lock().unwrap_or_else(|e| e.into_inner());
    for &(other_cell, other, value) in seen.iter() {
        if other_cell == cell && other != setting.name && value != checked {
            let redis_8 = REDIS_8.load(Relaxed);
            let name = |s: &str| find_exact(s).map_or_else(|| format!("bf.{s}"), |s| config_name(s, redis_8));
            FILE_CONFLICTS.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                "the configuration sets {} and {}, two names of one setting, to different values: \
                 keep one line",
                name(other),
                name(setting.name)
            ));
        }
    }
    seen.push((cell, setting.name, checked));
}

#[cfg_attr(test, allow(dead_code))] // read by the allocator, which tests do not install
pub fn huge_pages() -> bool {
    HUGE_PAGES.load(Relaxed)
}

/// Whether the server is Redis 8 or later (set at load), whose RedisBloom
/// is RedisBloom 8.
static REDIS_8: AtomicBool = AtomicBool::new(false);
/// Whether the server is Redis 8.12 or later (set at load), whose
/// RedisBloom has the Count-Min Sketch of `redisbloom-8.12`.
static REDIS_8_12: AtomicBool = AtomicBool::new(false);

/// The RedisBloom level RedisBloom's types and the other families answer
/// at: the setting, or under `valkey-bloom` (which speaks for `BF.*` on
/// valkey-bloom's filters only) the server's own default, RedisBloom 8 on
/// Redis 8 and 2.8 elsewhere.
/// `redisbloom-8.12` answers as `redisbloom-8` but for the Count-Min
/// Sketch ([`level_8_12`]).
pub fn redisbloom_level() -> Compat {
    match compat() {
        Compat::ValkeyBloom if REDIS_8.load(Relaxed) => Compat::RedisBloom8,
        Compat::ValkeyBloom => Compat::RedisBloom28,
        Compat::RedisBloom812 => Compat::RedisBloom8,
        level => level,
    }
}

/// Whether the families that changed in Redis 8.12 (the Count-Min
/// Sketch) answer as there: under `redisbloom-8.12`, or under
/// `valkey-bloom` on a Redis 8.12 or later. Fixed once the module is
/// loaded: `bf.compat` cannot enter or leave `redisbloom-8.12` at run time
/// (see [`set_compat`]), since it decides an encoding version.
pub fn level_8_12() -> bool {
    match compat() {
        Compat::RedisBloom812 => true,
        Compat::ValkeyBloom => REDIS_8_12.load(Relaxed),
        _ => false,
    }
}

/// The compatibility level in force.
pub fn compat() -> Compat {
    usize::try_from(COMPAT.load(Relaxed))
        .ok()
        .and_then(|i| Compat::ALL.get(i).copied())
        .unwrap_or(Compat::RedisBloom28)
}

/// What this command may allocate: a filter up to `bf.max-filter-bytes`,
/// and (with `bf.maxmemory-guard yes` under a `maxmemory`) no more than the
/// server has left. Nothing is refused when replaying what a primary or the
/// AOF already accepted, so that a replica never diverges.
pub fn limits(ctx: Ctx) -> Limits {
    if ctx.is_replaying() {
        return Limits::NONE;
    }
    let guarded = MAXMEMORY.load(Relaxed) > 0
        && MAXMEMORY_GUARD.load(Relaxed)
        && crate::ffi::used_memory_ratio().is_some();
    let headroom = guarded.then_some(memory_headroom as fn() -> u64);
    Limits { headroom, ..Limits::at_most(MAX_FILTER_BYTES.load(Relaxed) as u64) }
}

/// `maxmemory - used_memory`, asked by core only when a creation or
/// scale-out is about to allocate (see [`limits`] for when it is asked at all).
fn memory_headroom() -> u64 {
    let maxmemory = MAXMEMORY.load(Relaxed);
    let ratio = crate::ffi::used_memory_ratio().unwrap_or(0.0);
    let used = (ratio * maxmemory as f64) as u64;
    maxmemory.saturating_sub(used)
}

/// Reads the server's `maxmemory` into [`MAXMEMORY`] (0 unless its policy is
/// `noeviction`).
fn refresh_maxmemory(ctx: *mut raw::RedisModuleCtx) {
    if let Some((maxmemory, noeviction)) = crate::ffi::maxmemory(ctx) {
        MAXMEMORY.store(if noeviction { maxmemory } else { 0 }, Relaxed);
    }
}

/// A CONFIG SET that changed `maxmemory` or its policy: read them again.
extern "C" fn on_config_change(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    data: *mut c_void,
) {
    crate::ffi::guard((), || {
        // SAFETY: for the config event the server passes a
        // RedisModuleConfigChange whose names live during the call.
        let changed = unsafe {
            let change = &*(data as *const raw::RedisModuleConfigChangeV1);
            (0..change.num_changes as usize).any(|i| {
                let name = *change.config_names.add(i);
                !name.is_null() && {
                    let name = CStr::from_ptr(name).to_bytes();
                    name.eq_ignore_ascii_case(b"maxmemory") || name.eq_ignore_ascii_case(b"maxmemory-policy")
                }
            })
        };
        if changed {
            refresh_maxmemory(ctx);
        }
    })
}

/// The limit for RDB loads: RESTORE obeys it; loading at startup does not,
/// since refusing a value there would stop the server from starting.
pub fn limits_for_load(loading: bool) -> Limits {
    if loading {
        Limits::NONE
    } else {
        Limits::at_most(MAX_FILTER_BYTES.load(Relaxed) as u64)
    }
}

/// Checks a value for a setting; the message names the setting as given.
fn check(name: &str, value: Value, text: &[u8]) -> Result<i64, String> {
    let shown = String::from_utf8_lossy(text);
    match value {
        Value::Rate { own_check: None, .. } => match parse_double(text) {
            Some(v) if is_rate(v) => Ok(v.to_bits() as i64),
            _ => Err(format!(
                "{name} must be in the range (0, 1), a number strictly between them; got '{shown}'"
            )),
        },
        Value::Rate { own_check: Some(check), .. } => check(text).map(|v| v.to_bits() as i64),
        Value::Integer { min, max, .. } => match parse_long_long(text) {
            Some(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(format!("{name} must be in the range [{min}, {max}], an integer; got '{shown}'")),
        },
        Value::Bool(_) => match text.to_ascii_lowercase().as_slice() {
            b"yes" => Ok(1),
            b"no" => Ok(0),
            _ => Err(format!("{name} must be yes or no, got '{shown}'")),
        },
        Value::Compat => Compat::from_name(&shown)
            .map(|c| Compat::ALL.iter().position(|a| *a == c).expect("listed") as i64)
            .ok_or_else(|| {
                let names: Vec<_> = Compat::ALL.iter().map(|c| c.name()).collect();
                format!("{name} must be one of {}, got '{shown}'", names.join(", "))
            }),
    }
}

/// Checks a value for one of RedisBloom 8's configs under its own name on
/// Redis 8, with RedisBloom 8's texts (after the server's `CONFIG SET
/// failed` prefix) and its linked cuckoo ranges: `cf-initial-size` at least
/// twice `cf-bucket-size`, `cf-bucket-size` at most min(255, half of
/// `cf-initial-size`), each as last set. `bf-error-rate` above 0.25 is
/// stored as 0.25. While the configuration file is applied only the fixed
/// ranges are checked, so that the order of its lines cannot stop a start.
fn check_v8(name: &str, value: Value, text: &[u8]) -> Result<i64, String> {
    let invalid = || format!("Invalid value for `{name}`");
    match value {
        Value::Rate { .. } => {
            let v = parse_double(text).ok_or_else(invalid)?;
            if !is_rate(v) {
                return Err(format!("Value for `{name}` must be in the range (0.000000, 1.000000)"));
            }
            // Stored as given: under the `redisbloom-8` level CONFIG GET
            // answers it capped (see get_rate) and new filters use it so.
            Ok(v.to_bits() as i64)
        }
        Value::Integer { min, max, linked, .. } => {
            let v = parse_long_long(text).ok_or_else(invalid)?;
            let (min, max) = match linked {
                Some(linked) if !LOADING_CONFIGS.load(Relaxed) => linked(min, max),
                _ => (min, max),
            };
            if !(min..=max).contains(&v) {
                return Err(format!("Value for `{name}` must be in the range [{min}, {max}]"));
            }
            Ok(v)
        }
        _ => check(name, value, text),
    }
}

/// Whether a setting answers as RedisBloom 8's config of that name: on
/// Redis 8, where it is registered under that name.
fn answers_as_redisbloom_8(setting: &Setting) -> bool {
    setting.naming == Naming::RedisBloom8 && REDIS_8.load(Relaxed)
}

/// What a setting holds now, as [`store`] takes it.
fn current(value: Value) -> i64 {
    match value {
        Value::Rate { cell, .. } => cell.load(Relaxed) as i64,
        Value::Integer { cell, .. } => cell.load(Relaxed),
        Value::Bool(cell) => i64::from(cell.load(Relaxed)),
        Value::Compat => COMPAT.load(Relaxed),
    }
}

/// A setter's store. While the configuration file is applied, the server
/// also sets every config the file leaves out to its registered default;
/// two names share one value (`bf.initial-size`, `bf-initial-size`), so that
/// default would undo what the file gave the other name. A default then
/// changes nothing (it equals the value, or the twin's from the file).
fn store_from_server(setting: &'static Setting, checked: i64) {
    if LOADING_CONFIGS.load(Relaxed) {
        if checked == setting.default.load(Relaxed) {
            return;
        }
        note_file_value(setting, checked);
    }
    store(setting.value, checked);
}

fn store(value: Value, checked: i64) {
    match value {
        Value::Rate { cell, .. } => cell.store(checked as u64, Relaxed),
        Value::Integer { cell, .. } => cell.store(checked, Relaxed),
        Value::Bool(cell) => cell.store(checked != 0, Relaxed),
        Value::Compat => COMPAT.store(checked, Relaxed),
    }
}

/// A load argument's name, normalised: lower case, `-` for `_`, no `bf.`.
pub(crate) fn normalised(name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name).to_ascii_lowercase().replace('_', "-");
    name.strip_prefix("bf.").map(str::to_owned).unwrap_or(name)
}

/// The other name of the same value (`bf.error-rate` for RedisBloom 8's
/// `bf-error-rate`, and back), if the setting has one.
fn twin(setting: &Setting) -> Option<&'static Setting> {
    let pair = |n: Naming| matches!(n, Naming::Prefixed | Naming::RedisBloom8);
    let cell = cell_of(setting.value);
    settings().iter().copied().find(|s| {
        pair(setting.naming) && pair(s.naming) && s.naming != setting.naming && cell_of(s.value) == cell
    })
}

/// The name a setting is registered under on a server with (`redis_8`) or
/// without RedisBloom 8's unprefixed names, as the configuration file and
/// CONFIG SET spell it.
fn config_name(setting: &Setting, redis_8: bool) -> String {
    match setting.naming {
        Naming::RedisBloom8 if redis_8 => setting.name.to_owned(),
        _ => format!("bf.{}", setting.name),
    }
}

/// On Redis 8 the two names of one value are one config (RedisBloom 8's,
/// with bloomkit's as its alias), so that `CONFIG REWRITE` writes one line.
/// But the server applies one of two lines naming one config and then
/// stops, calling the other "unresolved", and an earlier bloomkit's
/// `CONFIG REWRITE` wrote both lines. So the RedisBloom 8 settings whose two
/// names are both in the configuration file are registered as two configs
/// for this run, as before (lines of different values then stop the start,
/// naming both, and equal ones start), with a log line saying to delete
/// one. Names are read as the server reads them: the first word, any
/// case, quotes removed.
fn named_twice_in_file(ctx: Ctx) -> Vec<&'static Setting> {
    let Some(path) = crate::ffi::server_info_field(ctx.0, c"server", c"config_file") else {
        return Vec::new();
    };
    let Ok(bytes) = std::fs::read(&path) else { return Vec::new() };
    let text = String::from_utf8_lossy(&bytes);
    let named = |name: &str| {
        text.lines().any(|line| {
            line.split_whitespace()
                .next()
                .is_some_and(|word| word.trim_matches(|c| c == '"' || c == '\'').eq_ignore_ascii_case(name))
        })
    };
    let mut split = Vec::new();
    for &setting in settings() {
        if setting.naming != Naming::RedisBloom8 {
            continue;
        }
        if let Some(t) = twin(setting) {
            let (ours, theirs) = (config_name(t, true), config_name(setting, true));
            if named(&ours) && named(&theirs) {
                crate::ffi::log(
                    ctx.0,
                    c"warning",
                    &format!(
                        "{path} names both {theirs} and {ours}, two names of one setting: both stay \
                         configs for this run and CONFIG REWRITE writes both; delete one line to have \
                         {theirs} alone"
                    ),
                );
                split.push(setting);
                split.push(t);
            }
        }
    }
    split
}

/// The setting registered as `name` (its own name, no alias).
fn find_exact(name: &str) -> Option<&'static Setting> {
    settings().iter().copied().find(|s| s.name == name)
}

fn find(name: &str) -> Option<&'static Setting> {
    settings().iter().copied().find(|s| s.name == name || s.aliases.contains(&name))
}

/// `loadmodule libbloomkit.so [NAME VALUE ...]`: RedisBloom 2.8's
/// `ERROR_RATE`, `INITIAL_SIZE` and `CF_MAX_EXPANSIONS`, RedisBloom 8's
/// config names, and bloomkit's. They become the configs' defaults.
/// `elsewhere`: arguments (normalised names) a family reads itself, passed
/// over here (XF's `XF_SECRET_FILE`).
pub fn apply_load_args(args: &[Arg], elsewhere: &[&str]) -> Result<(), String> {
    for pair in args.chunks(2) {
        let given = String::from_utf8_lossy(pair[0].bytes()).into_owned();
        if normalised(pair[0].bytes()) == "test-hooks" {
            let value = pair.get(1).map(Arg::bytes).unwrap_or_default();
            let on = check(&given, Value::Bool(&TEST_HOOKS), value)?;
            TEST_HOOKS.store(on != 0, Relaxed);
            continue;
        }
        if elsewhere.contains(&normalised(pair[0].bytes()).as_str()) {
            continue;
        }
        let Some(setting) = find(&normalised(pair[0].bytes())) else {
            let known: Vec<_> = settings().iter().map(|s| s.name).collect();
            return Err(format!(
                "unknown module argument '{given}'; allowed: ERROR_RATE, INITIAL_SIZE, CF_MAX_EXPANSIONS, EXPANSION, \
                 TEST_HOOKS, XF_SECRET_FILE, or any of {} (with or without bf.)",
                known.join(", ")
            ));
        };
        let Some(value) = pair.get(1).map(Arg::bytes) else {
            return Err(format!("module argument {given} needs a value"));
        };
        store(setting.value, check(&given, setting.value, value)?);
    }
    Ok(())
}

/// Redis's major and minor version; 0.0 for Valkey (whatever Redis
/// version it reports) or when the server does not say.
fn redis_version(ctx: Ctx) -> (u32, u32) {
    match crate::ffi::server_version(ctx.0) {
        Some((ServerKind::Redis, major, minor)) => (major, minor),
        _ => (0, 0),
    }
}

/// The setting a callback is for: its privdata is the setting's address.
fn setting_of(privdata: *mut c_void) -> Option<&'static Setting> {
    // SAFETY: the privdata registered with every config is a `&'static Setting`.
    unsafe { privdata.cast_const().cast::<Setting>().as_ref() }
}

fn error_string(err: *mut *mut raw::RedisModuleString, message: &str) -> c_int {
    // SAFETY: the server passes a valid slot and takes ownership of the error string.
    unsafe { *err = crate::ffi::new_string(message) };
    raw::REDISMODULE_ERR as c_int
}

extern "C" fn get_numeric(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    match setting_of(privdata).map(|s| s.value) {
        Some(Value::Integer { cell, .. }) => cell.load(Relaxed),
        _ => 0,
    }
}

extern "C" fn set_numeric(
    name: *const c_char,
    value: c_longlong,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    let Some(setting) = setting_of(privdata) else { return raw::REDISMODULE_ERR as c_int };
    // SAFETY: the server passes the config's NUL-terminated name.
    let shown = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    match check(&shown, setting.value, value.to_string().as_bytes()) {
        Ok(_) if !LOADING_CONFIGS.load(Relaxed) && setting.refusal().is_some() => {
            error_string(err, &setting.refusal().unwrap_or_default())
        }
        Ok(v) => {
            store_from_server(setting, v);
            raw::REDISMODULE_OK as c_int
        }
        Err(message) => error_string(err, &message),
    }
}

extern "C" fn get_bool(_name: *const c_char, privdata: *mut c_void) -> c_int {
    match setting_of(privdata).map(|s| s.value) {
        Some(Value::Bool(cell)) => c_int::from(cell.load(Relaxed)),
        _ => 0,
    }
}

extern "C" fn set_bool(
    _name: *const c_char,
    value: c_int,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    match setting_of(privdata) {
        Some(setting @ Setting { value: Value::Bool(_), .. }) => {
            if !LOADING_CONFIGS.load(Relaxed) {
                if let Some(message) = setting.refusal() {
                    return error_string(err, &message);
                }
            }
            store_from_server(setting, i64::from(value != 0));
            raw::REDISMODULE_OK as c_int
        }
        _ => raw::REDISMODULE_ERR as c_int,
    }
}

extern "C" fn get_compat(_name: *const c_char, _privdata: *mut c_void) -> c_int {
    COMPAT.load(Relaxed).max(0) as c_int
}

extern "C" fn set_compat(
    _name: *const c_char,
    value: c_int,
    _privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // The server accepts only the registered names. `valkey-bloom` decides
    // how BF.* is registered (names, flags, categories), which happens once,
    // when the module loads: it can be entered or left only then.
    let valkey = Compat::ALL.iter().position(|c| *c == Compat::ValkeyBloom).expect("listed") as i64;
    let now = COMPAT.load(Relaxed);
    let value = i64::from(value);
    if !LOADING_CONFIGS.load(Relaxed) && value != now && (value == valkey || now == valkey) {
        return error_string(
            err,
            "bf.compat valkey-bloom is chosen when the module loads, since it registers the BF.* commands \
             as valkey-bloom does (names, flags, ACL categories); set it in the configuration file or as a \
             load argument and restart the server",
        );
    }
    // The CMSk-TYPE encoding version is registered once, when the module
    // loads: redisbloom-8.12 (version 1) can be entered or left only then.
    let v812 = Compat::ALL.iter().position(|c| *c == Compat::RedisBloom812).expect("listed") as i64;
    if !LOADING_CONFIGS.load(Relaxed) && value != now && (value == v812 || now == v812) {
        return error_string(
            err,
            "bf.compat redisbloom-8.12 is chosen when the module loads, since it decides the encoding \
             version Count-Min Sketches are saved at (1 for Redis 8.12, 0 for the RedisBloom of the other \
             levels); set it in the configuration file or as a load argument and restart the server",
        );
    }
    store_from_server(&COMPAT_SETTING, value);
    raw::REDISMODULE_OK as c_int
}

/// The text a rate setting was set to.
fn rate_text(privdata: *mut c_void) -> Option<&'static AtomicPtr<raw::RedisModuleString>> {
    match setting_of(privdata)?.value {
        Value::Rate { text, .. } => Some(text),
        _ => None,
    }
}

/// `0.25` as CONFIG GET answers RedisBloom 8's capped rate (owned by the module).
static CAPPED_RATE_TEXT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

/// The rate's text as it was set; RedisBloom 8 keeps a rate above 0.25 as
/// 0.25, so under its level (on Redis 8, under its names) that is the
/// answer. Decided when asked, not when set: the configuration file may
/// set the rate before the level.
extern "C" fn get_rate(_name: *const c_char, privdata: *mut c_void) -> *mut raw::RedisModuleString {
    let Some(text) = rate_text(privdata) else { return std::ptr::null_mut() };
    let capped = setting_of(privdata).is_some_and(|s| {
        answers_as_redisbloom_8(s)
            && redisbloom_level() == Compat::RedisBloom8
            && matches!(s.value, Value::Rate { cell, .. } if f64::from_bits(cell.load(Relaxed)) > ERROR_RATE_CAP_8)
    });
    if !capped {
        return text.load(Relaxed);
    }
    let mut cap = CAPPED_RATE_TEXT.load(Relaxed);
    if cap.is_null() {
        let t = format!("{ERROR_RATE_CAP_8}");
        // A new string whose one reference the module keeps for good.
        cap = crate::ffi::new_string(&t);
        CAPPED_RATE_TEXT.store(cap, Relaxed);
    }
    cap
}

extern "C" fn set_rate(
    name: *const c_char,
    value: *mut raw::RedisModuleString,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    let (Some(setting), Some(text)) = (setting_of(privdata), rate_text(privdata)) else {
        return raw::REDISMODULE_ERR as c_int;
    };
    // SAFETY: the server passes the config's NUL-terminated name.
    let shown = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    let arg = Arg::from_raw(value);
    let given = arg.bytes();
    let v8 = answers_as_redisbloom_8(setting);
    let checked =
        if v8 { check_v8(&shown, setting.value, given) } else { check(&shown, setting.value, given) };
    match checked {
        Ok(bits) => {
            if LOADING_CONFIGS.load(Relaxed) {
                if bits == setting.default.load(Relaxed) {
                    return raw::REDISMODULE_OK as c_int; // see store_from_server
                }
                note_file_value(setting, bits);
            } else if let Some(message) = setting.refusal() {
                return error_string(err, &message);
            }
            store(setting.value, bits);
            // Retaining the server's string keeps it valid for our getter.
            crate::ffi::retain_string(value);
            crate::ffi::free_string(text.swap(value, Relaxed));
            raw::REDISMODULE_OK as c_int
        }
        Err(message) => error_string(err, &message),
    }
}

/// The text of an integer setting registered as a string (see [`Setting::int_text`]).
fn int_text(setting: &Setting, cell: &AtomicI64) -> *mut raw::RedisModuleString {
    let slot = &setting.int_text;
    let text = cell.load(Relaxed).to_string();
    // A new string the module owns; the previous one, no longer reachable
    // from the slot, is released once.
    let fresh = crate::ffi::new_string(&text);
    crate::ffi::free_string(slot.swap(fresh, Relaxed));
    fresh
}

extern "C" fn get_int_text(_name: *const c_char, privdata: *mut c_void) -> *mut raw::RedisModuleString {
    match setting_of(privdata) {
        Some(setting @ Setting { value: Value::Integer { cell, .. }, .. }) => int_text(setting, cell),
        _ => std::ptr::null_mut(),
    }
}

extern "C" fn set_int_text(
    name: *const c_char,
    value: *mut raw::RedisModuleString,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    let Some(setting) = setting_of(privdata) else { return raw::REDISMODULE_ERR as c_int };
    // SAFETY: the server passes the config's NUL-terminated name.
    let shown = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    match check_v8(&shown, setting.value, Arg::from_raw(value).bytes()) {
        Ok(v) => {
            store_from_server(setting, v);
            raw::REDISMODULE_OK as c_int
        }
        Err(message) => error_string(err, &message),
    }
}

/// Registers one setting under `name` with `flags`.
fn register_one(ctx: Ctx, setting: &'static Setting, name: &CString, flags: u32) -> c_int {
    let privdata = std::ptr::from_ref(setting).cast_mut().cast::<c_void>();
    let flags = raw::REDISMODULE_CONFIG_DEFAULT | flags;
    // SAFETY (every arm): valid context during OnLoad, NUL-terminated names
    // and values that the server copies, callbacks with the declared
    // signatures; privdata is the setting, which lives forever.
    match setting.value {
        Value::Rate { cell, text, .. } => register_rate(ctx, name, flags, privdata, cell, text),
        // The range is checked by the setter, so that its message names it
        // as RedisBloom 8's does ("must be in the range"); valkey-bloom's
        // by the server, as valkey-bloom registers them.
        // RedisBloom 8's integer configs, under their names on Redis 8: as
        // strings, so that what the server would parse or refuse itself
        // (`+5`, `007`, `1.5`) gets RedisBloom 8's texts.
        Value::Integer { cell, .. } if answers_as_redisbloom_8(setting) => unsafe {
            let default = cstring(&cell.load(Relaxed).to_string());
            api!(RedisModule_RegisterStringConfig)(
                ctx.0,
                name.as_ptr(),
                default.as_ptr(),
                flags,
                Some(get_int_text),
                Some(set_int_text),
                None,
                privdata,
            )
        },
        Value::Integer { cell, min, max, .. } => unsafe {
            let (min, max) =
                if setting.naming == Naming::ValkeyBloom { (min, max) } else { (i64::MIN, i64::MAX) };
            api!(RedisModule_RegisterNumericConfig)(
                ctx.0,
                name.as_ptr(),
                cell.load(Relaxed),
                flags,
                min,
                max,
                Some(get_numeric),
                Some(set_numeric),
                None,
                privdata,
            )
        },
        Value::Bool(cell) => unsafe {
            api!(RedisModule_RegisterBoolConfig)(
                ctx.0,
                name.as_ptr(),
                c_int::from(cell.load(Relaxed)),
                flags,
                Some(get_bool),
                Some(set_bool),
                None,
                privdata,
            )
        },
        Value::Compat => register_compat(ctx, name, flags, privdata),
    }
}

/// [`register_one`] for a rate: a string config, whose text starts as the
/// default's (what `CONFIG GET` answers until it is set).
fn register_rate(
    ctx: Ctx,
    name: &CString,
    flags: u32,
    privdata: *mut c_void,
    cell: &AtomicU64,
    cell_text: &AtomicPtr<raw::RedisModuleString>,
) -> c_int {
    let text = format!("{}", f64::from_bits(cell.load(Relaxed)));
    let default = cstring(&text);
    // SAFETY: as in `register_one`.
    unsafe {
        if cell_text.load(Relaxed).is_null() {
            cell_text.store(crate::ffi::new_string(&text), Relaxed);
        }
        api!(RedisModule_RegisterStringConfig)(
            ctx.0,
            name.as_ptr(),
            default.as_ptr(),
            flags,
            Some(get_rate),
            Some(set_rate),
            None,
            privdata,
        )
    }
}

/// [`register_one`] for `bf.compat`: an enum config of the levels' names;
/// the server copies the names and values during the call.
fn register_compat(ctx: Ctx, name: &CString, flags: u32, privdata: *mut c_void) -> c_int {
    let names: Vec<CString> = Compat::ALL.iter().map(|c| cstring(c.name())).collect();
    let pointers: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let values: Vec<c_int> = (0..Compat::ALL.len() as c_int).collect();
    // SAFETY: as in `register_one`.
    unsafe {
        api!(RedisModule_RegisterEnumConfig)(
            ctx.0,
            name.as_ptr(),
            COMPAT.load(Relaxed) as c_int,
            flags,
            pointers.as_ptr().cast_mut(),
            values.as_ptr(),
            values.len() as c_int,
            Some(get_compat),
            Some(set_compat),
            None,
            privdata,
        )
    }
}

/// Registers every setting as a runtime config, with the load arguments as
/// their defaults, then applies the values of the server's configuration.
pub fn register(ctx: Ctx) -> Result<(), String> {
    // Redis 8 ships RedisBloom 8 and lets modules register unprefixed names;
    // Redis 7 and Valkey (major 0 here) do neither.
    let (major, minor) = redis_version(ctx);
    let redis_8 = major >= 8;
    let redis_8_12 = (major, minor) >= (8, 12);
    REDIS_8.store(redis_8, Relaxed);
    REDIS_8_12.store(redis_8_12, Relaxed);
    // The level a server gets unless told otherwise.
    let level = match (redis_8_12, redis_8) {
        (true, _) => Compat::RedisBloom812,
        (_, true) => Compat::RedisBloom8,
        _ => Compat::RedisBloom28,
    };
    let level = Compat::ALL.iter().position(|c| *c == level).expect("listed") as i64;
    SERVER_DEFAULT_COMPAT.store(level, Relaxed);
    if COMPAT.load(Relaxed) < 0 {
        COMPAT.store(level, Relaxed);
    }
    refresh_maxmemory(ctx.0);
    crate::ffi::subscribe(ctx.0, raw::REDISMODULE_EVENT_CONFIG, on_config_change);
    if !crate::ffi::has_module_configs() {
        return Ok(()); // servers before 7.0: load arguments only
    }
    let split = if redis_8 { named_twice_in_file(ctx) } else { Vec::new() };
    let aliased = |s: &Setting| twin(s).is_some() && !split.iter().any(|t| std::ptr::eq(*t, s));
    for &setting in settings() {
        setting.default.store(current(setting.value), Relaxed);
        let (name, flags) = match setting.naming {
            // One config with two names: CONFIG REWRITE writes one line.
            Naming::RedisBloom8 if redis_8 => match twin(setting).filter(|_| aliased(setting)) {
                Some(t) => {
                    (format!("{}|{}", setting.name, config_name(t, true)), raw::REDISMODULE_CONFIG_UNPREFIXED)
                }
                None => (setting.name.to_owned(), raw::REDISMODULE_CONFIG_UNPREFIXED),
            },
            Naming::Prefixed if redis_8 && aliased(setting) => continue,
            _ => (setting.name.to_owned(), 0),
        };
        let c_name = cstring(&name);
        if register_one(ctx, setting, &c_name, flags) != raw::REDISMODULE_OK as c_int {
            let shown = if flags == 0 { format!("bf.{name}") } else { name };
            return Err(format!("could not register config {shown}"));
        }
    }
    LOADING_CONFIGS.store(true, Relaxed);
    // Applies values from the config file / command line.
    let loaded = crate::ffi::load_configs(ctx.0);
    LOADING_CONFIGS.store(false, Relaxed);
    if !loaded {
        return Err("invalid bf.* value in the server configuration".into());
    }
    let conflicts = std::mem::take(&mut *FILE_CONFLICTS.lock().unwrap_or_else(|e| e.into_inner()));
    FILE_VALUES.lock().unwrap_or_else(|e| e.into_inner()).clear();
    if !conflicts.is_empty() {
        return Err(conflicts.join("; "));
    }
    check_levels()
}

/// The level this server gets when none is given (set at load, as an
/// index into [`Compat::ALL`]), for the load line.
static SERVER_DEFAULT_COMPAT: AtomicI64 = AtomicI64::new(-1);

/// The server log's line at load: bloomkit's release (which `MODULE LIST`
/// does not show: its version is RedisBloom's interface, `module_version`),
/// the compatibility level and whether it is this server's default, every
/// setting a load argument or the configuration file moved off its
/// default, and test hooks when they are on. One line, so that an
/// operator reading the log after a restart sees what the module runs with.
pub fn load_line(module_version: i32) -> String {
    let redis_8 = REDIS_8.load(Relaxed);
    let level = compat();
    let level_default = COMPAT.load(Relaxed) == SERVER_DEFAULT_COMPAT.load(Relaxed);
    let mut changed: Vec<String> = Vec::new();
    let mut cells = Vec::new();
    for &setting in settings() {
        let value = current(setting.value);
        // (Two names of one value are one setting: said once.)
        if matches!(setting.value, Value::Compat)
            || value == setting.initial.load(Relaxed)
            || cells.contains(&cell_of(setting.value))
        {
            continue;
        }
        cells.push(cell_of(setting.value));
        let shown = match setting.value {
            Value::Rate { .. } => f64::from_bits(value as u64).to_string(),
            Value::Bool(_) => if value != 0 { "yes" } else { "no" }.to_string(),
            _ => value.to_string(),
        };
        changed.push(format!("{} {shown}", config_name(setting, redis_8)));
    }
    let settings = match changed.is_empty() {
        true => "every setting at its default".to_string(),
        false => format!("settings off their defaults: {}", changed.join(", ")),
    };
    let hooks = match TEST_HOOKS.load(Relaxed) {
        true => "; TEST_HOOKS yes: test hooks can be set (never on a production server)",
        false => "",
    };
    format!(
        "bloomkit {} loaded (MODULE LIST shows version {module_version}, the RedisBloom interface it \
         implements; INFO bf shows bf_bloomkit_version): bf.compat {} ({}), {settings}{hooks}",
        env!("CARGO_PKG_VERSION"),
        level.name(),
        if level_default { "this server's default" } else { "chosen" },
    )
}

/// A setting given (by a load argument or the configuration file) that
/// does nothing at the level in force stops the start, saying what to add.
fn check_levels() -> Result<(), String> {
    for &setting in settings() {
        if current(setting.value) != setting.initial.load(Relaxed) {
            if let Some(message) = setting.refusal() {
                return Err(message);
            }
        }
    }
    Ok(())
}
