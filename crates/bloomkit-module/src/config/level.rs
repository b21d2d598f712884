//! The compatibility level (`bf.compat`): which RedisBloom release, or
//! valkey-bloom, the families answer as, the server's own default, and the
//! line the server log gets at load.

use super::*;

/// Whether the server is Redis 8 or later (set at load), whose RedisBloom
/// is RedisBloom 8.
pub(super) static REDIS_8: AtomicBool = AtomicBool::new(false);

/// Whether the server is Redis 8.12 or later (set at load), whose
/// RedisBloom has the Count-Min Sketch of `redisbloom-8.12`.
pub(super) static REDIS_8_12: AtomicBool = AtomicBool::new(false);

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
/// (see `register::set_compat`), since it decides an encoding version.
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

/// Redis's major and minor version; 0.0 for Valkey (whatever Redis
/// version it reports) or when the server does not say.
pub(super) fn redis_version(ctx: Ctx) -> (u32, u32) {
    match crate::ffi::server_version(ctx.0) {
        Some((ServerKind::Redis, major, minor)) => (major, minor),
        _ => (0, 0),
    }
}

/// The level this server gets when none is given (set at load, as an
/// index into [`Compat::ALL`]), for the load line.
pub(super) static SERVER_DEFAULT_COMPAT: AtomicI64 = AtomicI64::new(-1);

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
pub(super) fn check_levels() -> Result<(), String> {
    for &setting in settings() {
        if current(setting.value) != setting.initial.load(Relaxed) {
            if let Some(message) = setting.refusal() {
                return Err(message);
            }
        }
    }
    Ok(())
}
