//! The settings of every family ([`Setting`] rows, in its `settings.rs`)
//! and the module's own, listed here. This file has the mechanism:
//! values, names, checks and load arguments; `register.rs` registers them
//! as runtime configs (CONFIG SET/GET/REWRITE, the configuration file),
//! `level.rs` keeps the compatibility level, `limits.rs` what a command
//! may allocate.
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

mod level;
mod limits;
mod register;

use level::*;
pub use level::{compat, level_8_12, load_line, redisbloom_level};
use limits::*;
pub use limits::{huge_pages, limits, limits_for_load};
pub use register::register;

/// The compatibility level, as an index into [`Compat::ALL`]; -1 until the
/// load sets it from the server (or a load argument does).
static COMPAT: AtomicI64 = AtomicI64::new(-1);

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
