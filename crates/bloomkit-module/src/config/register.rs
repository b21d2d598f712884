//! The settings as the server sees them: registration as runtime configs
//! (numeric, boolean, enum and string ones, with RedisBloom 8's names on
//! Redis 8) and the get and set callbacks CONFIG GET/SET call.

use super::*;

/// The setting a callback is for: its privdata is the setting's address.
pub(super) fn setting_of(privdata: *mut c_void) -> Option<&'static Setting> {
    // SAFETY: the privdata registered with every config is a `&'static Setting`.
    unsafe { privdata.cast_const().cast::<Setting>().as_ref() }
}

pub(super) fn error_string(err: *mut *mut raw::RedisModuleString, message: &str) -> c_int {
    // SAFETY: the server passes a valid slot and takes ownership of the error string.
    unsafe { *err = crate::ffi::new_string(message) };
    raw::REDISMODULE_ERR as c_int
}

pub(super) extern "C" fn get_numeric(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    match setting_of(privdata).map(|s| s.value) {
        Some(Value::Integer { cell, .. }) => cell.load(Relaxed),
        _ => 0,
    }
}

pub(super) extern "C" fn set_numeric(
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

pub(super) extern "C" fn get_bool(_name: *const c_char, privdata: *mut c_void) -> c_int {
    match setting_of(privdata).map(|s| s.value) {
        Some(Value::Bool(cell)) => c_int::from(cell.load(Relaxed)),
        _ => 0,
    }
}

pub(super) extern "C" fn set_bool(
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

pub(super) extern "C" fn get_compat(_name: *const c_char, _privdata: *mut c_void) -> c_int {
    COMPAT.load(Relaxed).max(0) as c_int
}

pub(super) extern "C" fn set_compat(
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
pub(super) fn rate_text(privdata: *mut c_void) -> Option<&'static AtomicPtr<raw::RedisModuleString>> {
    match setting_of(privdata)?.value {
        Value::Rate { text, .. } => Some(text),
        _ => None,
    }
}

/// `0.25` as CONFIG GET answers RedisBloom 8's capped rate (owned by the module).
pub(super) static CAPPED_RATE_TEXT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

/// The rate's text as it was set; RedisBloom 8 keeps a rate above 0.25 as
/// 0.25, so under its level (on Redis 8, under its names) that is the
/// answer. Decided when asked, not when set: the configuration file may
/// set the rate before the level.
pub(super) extern "C" fn get_rate(
    _name: *const c_char,
    privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
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

pub(super) extern "C" fn set_rate(
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
pub(super) fn int_text(setting: &Setting, cell: &AtomicI64) -> *mut raw::RedisModuleString {
    let slot = &setting.int_text;
    let text = cell.load(Relaxed).to_string();
    // A new string the module owns; the previous one, no longer reachable
    // from the slot, is released once.
    let fresh = crate::ffi::new_string(&text);
    crate::ffi::free_string(slot.swap(fresh, Relaxed));
    fresh
}

pub(super) extern "C" fn get_int_text(
    _name: *const c_char,
    privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    match setting_of(privdata) {
        Some(setting @ Setting { value: Value::Integer { cell, .. }, .. }) => int_text(setting, cell),
        _ => std::ptr::null_mut(),
    }
}

pub(super) extern "C" fn set_int_text(
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
pub(super) fn register_one(ctx: Ctx, setting: &'static Setting, name: &CString, flags: u32) -> c_int {
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
pub(super) fn register_rate(
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
pub(super) fn register_compat(ctx: Ctx, name: &CString, flags: u32, privdata: *mut c_void) -> c_int {
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
