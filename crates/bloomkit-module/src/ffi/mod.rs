//! The few module-API calls bloomkit makes, behind small safe wrappers:
//! every raw call of the module's runtime is here ([`io`]: the RDB fields);
//! registration (commands, configs, data types) keeps its own.
//!
//! Handlers see argv as `&[Arg]` (a view, no copy) and a `Ctx` that replies;
//! nothing here allocates on the hot path.

pub mod io;

use std::ffi::{c_int, CStr, CString};
use std::ptr::NonNull;

use redis_module::raw;

/// Calls a module-API function that every supported server provides.
macro_rules! api {
    ($name:ident) => {{
        // SAFETY: the function pointers are filled in once by RedisModule_Init
        // on the main thread before any command or callback runs.
        #[allow(unused_unsafe)]
        let function =
            unsafe { raw::$name }.expect(concat!("the server does not export ", stringify!($name)));
        function
    }};
}
pub(crate) use api;

/// Whether the server provides an optional API (newer servers only).
macro_rules! has_api {
    ($name:ident) => {{
        // SAFETY: as for `api!`.
        #[allow(unused_unsafe)]
        let present = unsafe { raw::$name }.is_some();
        present
    }};
}
pub(crate) use has_api;

/// A callback for a server event ([`subscribe`]).
pub type EventCallback =
    extern "C" fn(*mut raw::RedisModuleCtx, raw::RedisModuleEvent, u64, *mut std::ffi::c_void);

/// Calls `callback` on every server event `id` (`REDISMODULE_EVENT_*`), on
/// servers that have events (all but the oldest); whether it subscribed.
pub fn subscribe(ctx: *mut raw::RedisModuleCtx, id: u64, callback: EventCallback) -> bool {
    if !has_api!(RedisModule_SubscribeToServerEvent) {
        return false;
    }
    let event = raw::RedisModuleEvent { id, dataver: 1 };
    // SAFETY: a valid context during OnLoad; a callback of the declared signature.
    unsafe {
        api!(RedisModule_SubscribeToServerEvent)(ctx, event, Some(callback)) == raw::REDISMODULE_OK as c_int
    }
}

/// The server's used memory over its `maxmemory`, where the server says
/// (Redis 7+, Valkey).
pub fn used_memory_ratio() -> Option<f64> {
    // SAFETY: no arguments; reads the allocator's counter.
    has_api!(RedisModule_GetUsedMemoryRatio)
        .then(|| f64::from(unsafe { api!(RedisModule_GetUsedMemoryRatio)() }))
}

/// The server's `maxmemory`, and whether its policy is `noeviction` (from
/// `INFO memory`), where the server can say (Redis 6.2+, Valkey).
pub fn maxmemory(ctx: *mut raw::RedisModuleCtx) -> Option<(u64, bool)> {
    server_info(ctx, c"memory", |info| {
        let noeviction = info.text(c"maxmemory_policy").is_some_and(|p| p == "noeviction");
        info.unsigned(c"maxmemory").map(|m| (m, noeviction))
    })
    .flatten()
}

/// Adds an ACL category, where the server lets modules add one.
pub fn add_acl_category(ctx: *mut raw::RedisModuleCtx, name: &CStr) -> Result<(), String> {
    if has_api!(RedisModule_AddACLCategory) {
        // SAFETY: valid context during OnLoad.
        if unsafe { api!(RedisModule_AddACLCategory)(ctx, name.as_ptr()) } != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not add the ACL category {}", name.to_string_lossy()));
        }
    }
    Ok(())
}

/// Whether the server takes command metadata (`COMMAND DOCS`, key specs:
/// Redis 7+, Valkey).
pub fn has_command_info() -> bool {
    has_api!(RedisModule_SetCommandInfo)
}

/// The command this module registered as `name`.
pub fn get_command(ctx: *mut raw::RedisModuleCtx, name: &CStr) -> *mut raw::RedisModuleCommand {
    // SAFETY: valid context during OnLoad; the server only reads the name.
    unsafe { api!(RedisModule_GetCommand)(ctx, name.as_ptr()) }
}

/// Whether the server has module configs (`CONFIG SET bf.*`: Redis 7+, Valkey).
pub fn has_module_configs() -> bool {
    has_api!(RedisModule_RegisterNumericConfig)
}

/// Applies the configs registered so far from the configuration file and
/// command line; whether the server accepted every value.
pub fn load_configs(ctx: *mut raw::RedisModuleCtx) -> bool {
    // SAFETY: valid context during OnLoad.
    unsafe { api!(RedisModule_LoadConfigs)(ctx) == raw::REDISMODULE_OK as c_int }
}

/// Asks the server to hand load errors back (a corrupt value in RESTORE or
/// an RDB file is then an error, not an exit).
pub fn handle_io_errors(ctx: *mut raw::RedisModuleCtx) {
    // SAFETY: valid context during OnLoad.
    unsafe { api!(RedisModule_SetModuleOptions)(ctx, raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as c_int) };
}

/// Registers the module's `INFO` sections' writer; whether it was taken.
pub fn register_info(ctx: *mut raw::RedisModuleCtx, info: raw::RedisModuleInfoFunc) -> bool {
    // SAFETY: valid context during OnLoad; a callback of the declared signature.
    unsafe { api!(RedisModule_RegisterInfoFunc)(ctx, info) == raw::REDISMODULE_OK as c_int }
}

/// The server's clock, in milliseconds (the one its expirations use).
pub fn milliseconds() -> i64 {
    // SAFETY: no arguments.
    unsafe { api!(RedisModule_Milliseconds)() }
}

/// One command argument; `&[Arg]` is a view of the server's argv.
#[repr(transparent)]
pub struct Arg(*mut raw::RedisModuleString);

impl Arg {
    /// The argument's bytes, valid for the duration of the command.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        let mut len = 0usize;
        // SAFETY: the server keeps argv alive until the handler returns; the
        // pointer and length it gives describe the string's bytes.
        unsafe {
            let ptr = api!(RedisModule_StringPtrLen)(self.0, &mut len);
            std::slice::from_raw_parts(ptr.cast::<u8>(), len)
        }
    }

    pub fn raw(&self) -> *mut raw::RedisModuleString {
        self.0
    }

    /// Wraps a string the server lends to a callback.
    pub fn from_raw(s: *mut raw::RedisModuleString) -> Arg {
        Arg(s)
    }
}

impl AsRef<[u8]> for Arg {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

/// # Safety
/// `argv` must point to `argc` valid strings for the lifetime of the result.
pub unsafe fn args<'a>(argv: *mut *mut raw::RedisModuleString, argc: c_int) -> &'a [Arg] {
    if argv.is_null() || argc <= 0 {
        return &[];
    }
    std::slice::from_raw_parts(argv.cast::<Arg>(), argc as usize)
}

/// The command's context: replies, replication, notifications.
#[derive(Clone, Copy)]
pub struct Ctx(pub *mut raw::RedisModuleCtx);

/// An array reply opened before its length is known (a batch that stops at
/// its first error): its elements are replied, then [`PostponedArray::close`]
/// sets the length. The one place the pair of raw calls is written.
#[must_use = "a postponed array must be closed with its length"]
pub struct PostponedArray(Ctx);

impl PostponedArray {
    /// Sets the length: exactly the elements replied since it opened.
    pub fn close(self, len: usize) {
        // SAFETY: a valid context; closes the array `Ctx::postponed_array` opened.
        unsafe { api!(RedisModule_ReplySetArrayLength)(self.0 .0, len as _) };
    }
}

impl Ctx {
    /// Opens an array reply whose length [`PostponedArray::close`] sets.
    pub fn postponed_array(self) -> PostponedArray {
        // SAFETY: a valid context for the duration of the command.
        unsafe { api!(RedisModule_ReplyWithArray)(self.0, raw::REDISMODULE_POSTPONED_LEN as _) };
        PostponedArray(self)
    }

    pub fn flags(self) -> u32 {
        // SAFETY: a valid context for the duration of the call.
        unsafe { api!(RedisModule_GetContextFlags)(self.0) as u32 }
    }

    pub fn is_resp3(self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_RESP3 != 0
    }

    /// True for commands from a primary or replayed from the AOF: what they do
    /// was already accepted once and must not be refused now.
    pub fn is_replaying(self) -> bool {
        self.flags() & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) != 0
    }

    /// Whether the server calls the command only to learn where its keys
    /// are, not to run it: it does so for a command registered
    /// `getkeys-api` wherever it reads keys by position rather than by key
    /// spec (a cluster's slot check and routing, on every server).
    pub fn is_keys_position_request(self) -> bool {
        // SAFETY: valid context (the function only reads its flags).
        unsafe { api!(RedisModule_IsKeysPositionRequest)(self.0) != 0 }
    }

    /// In a keys-position request, names argument `pos` a key with these
    /// key-spec flags (`REDISMODULE_CMD_KEY_*`); the server ignores it in
    /// any other call. Servers before 7.0 take the position alone.
    pub fn key_at_pos(self, pos: usize, flags: u32) {
        let Ok(pos) = c_int::try_from(pos) else { return };
        // SAFETY: valid context; the server only appends to the key list
        // it gave the context.
        unsafe {
            match raw::RedisModule_KeyAtPosWithFlags {
                Some(f) => f(self.0, pos, flags as c_int),
                None => api!(RedisModule_KeyAtPos)(self.0, pos),
            }
        }
    }

    pub fn reply_i64(self, v: i64) {
        // SAFETY: valid context.
        unsafe { api!(RedisModule_ReplyWithLongLong)(self.0, v) };
    }

    /// `:1`/`:0` in RESP2, `#t`/`#f` in RESP3, as RedisBloom answers.
    #[inline]
    pub fn reply_bool(self, v: bool) {
        // SAFETY: valid context.
        unsafe {
            match raw::RedisModule_ReplyWithBool {
                Some(f) => f(self.0, c_int::from(v)),
                None => api!(RedisModule_ReplyWithLongLong)(self.0, i64::from(v)),
            }
        };
    }

    pub fn reply_simple(self, s: &'static std::ffi::CStr) {
        // SAFETY: valid context and NUL-terminated string.
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.0, s.as_ptr()) };
    }

    pub fn reply_bulk(self, bytes: &[u8]) {
        // SAFETY: valid context; the server copies the bytes.
        unsafe { api!(RedisModule_ReplyWithStringBuffer)(self.0, bytes.as_ptr().cast(), bytes.len()) };
    }

    pub fn reply_double(self, v: f64) {
        // SAFETY: valid context.
        unsafe { api!(RedisModule_ReplyWithDouble)(self.0, v) };
    }

    pub fn reply_null(self) {
        // SAFETY: valid context.
        unsafe { api!(RedisModule_ReplyWithNull)(self.0) };
    }

    pub fn reply_array(self, len: usize) {
        // SAFETY: valid context.
        unsafe { api!(RedisModule_ReplyWithArray)(self.0, len as _) };
    }

    /// A map of `len` pairs: a flat array of `2 * len` in RESP2.
    pub fn reply_map(self, len: usize) {
        // SAFETY: valid context.
        unsafe {
            match raw::RedisModule_ReplyWithMap {
                Some(f) => f(self.0, len as _),
                None => api!(RedisModule_ReplyWithArray)(self.0, (2 * len) as _),
            }
        };
    }

    pub fn reply_error(self, message: &str) {
        // Every family words a refusal for maxmemory with the server's own
        // text; counted here, where every error reply passes (also those
        // inside a batch's array).
        if message.starts_with(OOM_PREFIX) {
            MAXMEMORY_REFUSALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let message =
            CString::new(message.replace(['\r', '\n', '\0'], " ")).expect("NUL bytes were replaced");
        // SAFETY: valid context and NUL-terminated string; the server copies it.
        unsafe { api!(RedisModule_ReplyWithError)(self.0, message.as_ptr()) };
    }

    pub fn wrong_arity(self) {
        // SAFETY: valid context.
        unsafe { api!(RedisModule_WrongArity)(self.0) };
    }

    pub fn replicate_verbatim(self) {
        // SAFETY: valid context.
        unsafe { api!(RedisModule_ReplicateVerbatim)(self.0) };
    }

    /// Replicates `command key number data`: how both data types send
    /// creations and time decisions.
    pub fn replicate_chunk(self, command: &std::ffi::CStr, key: &Arg, number: i64, data: &[u8]) {
        // SAFETY: "slb" = a module string, a long long, a buffer and its length.
        unsafe {
            api!(RedisModule_Replicate)(
                self.0,
                command.as_ptr(),
                c"slb".as_ptr(),
                key.raw(),
                number as std::ffi::c_longlong,
                data.as_ptr(),
                data.len(),
            )
        };
    }

    /// Replicates `command key [keyword] item...`: what a batch write
    /// actually did when an error cut it short, so that a replica (which
    /// skips the limits) does not go further (`BF.MADD key ...` for Bloom
    /// filters of both types, `CF.INSERT key ITEMS ...` for cuckoo filters).
    pub fn replicate_items(
        self,
        command: &std::ffi::CStr,
        key: &Arg,
        keyword: Option<&std::ffi::CStr>,
        items: &[Arg],
    ) {
        self.replicate_words(command, key, keyword.map(std::ffi::CStr::to_bytes).as_slice(), items);
    }

    /// Replicates `command key word... item...`: a command whose arguments
    /// the module makes (`BF.INSERT key CAPACITY c ... ITEMS ...`, how a
    /// valkey-bloom object's creation reaches replicas).
    pub fn replicate_words(self, command: &std::ffi::CStr, key: &Arg, words: &[&[u8]], items: &[Arg]) {
        // SAFETY: strings made here are freed below; the server takes its
        // own reference to every string of a "v" vector.
        unsafe {
            let made: Vec<*mut raw::RedisModuleString> = words
                .iter()
                .map(|w| api!(RedisModule_CreateString)(self.0, w.as_ptr().cast(), w.len()))
                .collect();
            let mut argv = Vec::with_capacity(1 + made.len() + items.len());
            argv.push(key.raw());
            argv.extend_from_slice(&made);
            argv.extend(items.iter().map(Arg::raw));
            api!(RedisModule_Replicate)(self.0, command.as_ptr(), c"v".as_ptr(), argv.as_ptr(), argv.len());
            for s in made {
                api!(RedisModule_FreeString)(self.0, s);
            }
        }
    }

    /// Replicates `APBF.ADVANCE key n started_ms now_ms`: a primary's time decision.
    pub fn replicate_advance(self, key: &Arg, n: u64, started_ms: u64, now_ms: u64) {
        let [n, started_ms, now_ms] =
            [n, started_ms, now_ms].map(|v| v.min(i64::MAX as u64) as std::ffi::c_longlong);
        // SAFETY: "slll" = a module string and three long longs.
        unsafe {
            api!(RedisModule_Replicate)(
                self.0,
                c"APBF.ADVANCE".as_ptr(),
                c"slll".as_ptr(),
                key.raw(),
                n,
                started_ms,
                now_ms,
            )
        };
    }

    pub fn notify(self, event: &'static std::ffi::CStr, key: &Arg) {
        // SAFETY: valid context, event name and key string.
        unsafe {
            api!(RedisModule_NotifyKeyspaceEvent)(
                self.0,
                raw::REDISMODULE_NOTIFY_GENERIC as c_int,
                event.as_ptr(),
                key.raw(),
            )
        };
    }
}

/// Fills `out` from the server's random source (seeded at start, not
/// shared with scripts).
pub fn random_bytes(out: &mut [u8]) {
    // SAFETY: writes exactly `out.len()` bytes into `out`.
    unsafe { api!(RedisModule_GetRandomBytes)(out.as_mut_ptr(), out.len()) };
}

/// Which server the module runs in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ServerKind {
    Redis,
    Valkey,
}

/// The server and its version as (major, minor): Valkey's own version on
/// Valkey, which also reports a Redis-compatible one; `None` when the
/// server does not say (before `RedisModule_GetServerInfo`).
pub fn server_version(ctx: *mut raw::RedisModuleCtx) -> Option<(ServerKind, u32, u32)> {
    let (valkey, named_valkey, redis) = server_info(ctx, c"server", |info| {
        let named_valkey = info.text(c"server_name").is_some_and(|n| n == "valkey");
        (info.text(c"valkey_version"), named_valkey, info.text(c"redis_version"))
    })?;
    let (kind, version) = match valkey {
        Some(v) => (ServerKind::Valkey, v),
        None if named_valkey => (ServerKind::Valkey, String::new()),
        None => (ServerKind::Redis, redis.unwrap_or_default()),
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    Some((kind, parts.next().unwrap_or(0), parts.next().unwrap_or(0)))
}

/// One field of one INFO section, as text (`None` before
/// `RedisModule_GetServerInfo`, or when the server does not give it).
pub fn server_info_field(
    ctx: *mut raw::RedisModuleCtx,
    section: &std::ffi::CStr,
    name: &std::ffi::CStr,
) -> Option<String> {
    if !has_api!(RedisModule_GetServerInfo) {
        return None;
    }
    server_info(ctx, section, |info| info.text(name)).flatten().filter(|v| !v.is_empty())
}

/// One INFO section of the server while [`server_info`] holds it.
struct InfoFields(*mut raw::RedisModuleServerInfoData);

impl InfoFields {
    /// A field as text, copied out.
    fn text(&self, name: &CStr) -> Option<String> {
        // SAFETY: held data; the text is copied before the data is freed.
        unsafe {
            let p = api!(RedisModule_ServerInfoGetFieldC)(self.0, name.as_ptr());
            (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
        }
    }

    /// A field as an unsigned number, if it is one.
    fn unsigned(&self, name: &CStr) -> Option<u64> {
        let mut err: c_int = 0;
        // SAFETY: held data; `err` is written by the call.
        let value = unsafe { api!(RedisModule_ServerInfoGetFieldUnsigned)(self.0, name.as_ptr(), &mut err) };
        (err == 0).then_some(value)
    }
}

/// Reads one INFO section with `read` (`None` before
/// `RedisModule_GetServerInfo`, or when the server gives no data): the one
/// place the section is asked for and freed.
fn server_info<T>(
    ctx: *mut raw::RedisModuleCtx,
    section: &CStr,
    read: impl FnOnce(&InfoFields) -> T,
) -> Option<T> {
    if !has_api!(RedisModule_GetServerInfo) {
        return None;
    }
    // SAFETY: a valid (or null, which the call allows) context.
    let info = unsafe { api!(RedisModule_GetServerInfo)(ctx, section.as_ptr()) };
    if info.is_null() {
        return None;
    }
    let fields = InfoFields(info);
    let out = read(&fields);
    // SAFETY: the data the call above gave, freed once.
    unsafe { api!(RedisModule_FreeServerInfo)(ctx, info) };
    Some(out)
}

/// Writes to the server log (`ctx` may be null).
pub fn log(ctx: *mut raw::RedisModuleCtx, level: &'static std::ffi::CStr, message: &str) {
    let Ok(message) = CString::new(message.replace('\0', " ")) else { return };
    // SAFETY: NUL-terminated strings; "%s" consumes exactly one.
    unsafe {
        api!(RedisModule_Log)(ctx, level.as_ptr(), c"%s".as_ptr(), message.as_ptr());
    }
}

/// What a key holds, from bloomkit's point of view.
pub enum Slot<T> {
    Empty,
    Ours(NonNull<T>),
    OtherType,
}

/// An open key, closed on drop.
pub struct Key {
    ctx: Ctx,
    ptr: *mut raw::RedisModuleKey,
}

impl Key {
    pub fn open(ctx: Ctx, name: &Arg, write: bool) -> Key {
        let mode = if write { raw::REDISMODULE_READ | raw::REDISMODULE_WRITE } else { raw::REDISMODULE_READ };
        // SAFETY: valid context and key name.
        let ptr = unsafe { api!(RedisModule_OpenKey)(ctx.0, name.raw(), mode as c_int) };
        Key { ctx, ptr: ptr.cast() }
    }

    /// The value, if the key holds one of `ty`.
    pub fn slot<T>(&self, ty: *mut raw::RedisModuleType) -> Slot<T> {
        if self.ptr.is_null() {
            return Slot::Empty;
        }
        // SAFETY: an open key.
        unsafe {
            let kind = api!(RedisModule_KeyType)(self.ptr);
            if kind == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
                return Slot::Empty;
            }
            if kind == raw::REDISMODULE_KEYTYPE_MODULE as c_int
                && api!(RedisModule_ModuleTypeGetType)(self.ptr) == ty
            {
                match NonNull::new(api!(RedisModule_ModuleTypeGetValue)(self.ptr).cast::<T>()) {
                    Some(v) => Slot::Ours(v),
                    None => Slot::Empty,
                }
            } else {
                Slot::OtherType
            }
        }
    }

    /// Makes `value` (of module type `ty`) the key's value; the keyspace owns
    /// it when this answers true (false: refused, still the caller's).
    pub fn set_module_value(&self, ty: *mut raw::RedisModuleType, value: *mut std::ffi::c_void) -> bool {
        // SAFETY: a key opened for writing; the type's callbacks own the value from here.
        unsafe { api!(RedisModule_ModuleTypeSetValue)(self.ptr, ty, value) == raw::REDISMODULE_OK as c_int }
    }

    /// Whether the key holds nothing (of any type).
    pub fn is_empty(&self) -> bool {
        // SAFETY: an open key (or null, which `slot` treats as empty).
        self.ptr.is_null()
            || unsafe { api!(RedisModule_KeyType)(self.ptr) } == raw::REDISMODULE_KEYTYPE_EMPTY as c_int
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: opened by us, closed once.
            unsafe { api!(RedisModule_CloseKey)(self.ptr) };
        }
        let _ = self.ctx;
    }
}

/// C strings for the API, built at registration (not on any hot path).
pub fn cstring(s: &str) -> CString {
    CString::new(s).expect("static names have no NUL")
}

pub type RawArgv = *mut *mut raw::RedisModuleString;

/// The start of the server's OOM error, which the families' refusals for
/// `maxmemory` reply with.
const OOM_PREFIX: &str = "OOM command not allowed";

/// Creations and growths of any type refused because they would pass
/// `maxmemory`: counted where every error reply passes ([`Ctx::reply_error`]).
pub static MAXMEMORY_REFUSALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Writes `command key number data` to a rewritten AOF: both data types
/// rewrite themselves as LOADCHUNK commands.
pub fn emit_aof_chunk(
    aof: *mut raw::RedisModuleIO,
    command: &std::ffi::CStr,
    key: *mut raw::RedisModuleString,
    number: i64,
    data: &[u8],
) {
    // SAFETY: a valid AOF handle and key; "slb" takes a string, a long long,
    // and a buffer with its length.
    unsafe {
        api!(RedisModule_EmitAOF)(
            aof,
            command.as_ptr(),
            c"slb".as_ptr(),
            key,
            number as std::ffi::c_longlong,
            data.as_ptr(),
            data.len(),
        )
    };
}

/// Writes `command key data` to a rewritten AOF (valkey-bloom's `BF.LOAD`).
pub fn emit_aof_command(
    aof: *mut raw::RedisModuleIO,
    command: &std::ffi::CStr,
    key: *mut raw::RedisModuleString,
    data: &[u8],
) {
    // SAFETY: a valid AOF handle and key; "sb" takes a string and a buffer with its length.
    unsafe {
        api!(RedisModule_EmitAOF)(aof, command.as_ptr(), c"sb".as_ptr(), key, data.as_ptr(), data.len())
    };
}

/// Where `DEBUG DIGEST-VALUE` goes: buffers, integers, then the end of the
/// value's sequence (added once, after [`Value::digest`]).
pub struct DigestOut(pub(crate) *mut raw::RedisModuleDigest);

impl DigestOut {
    /// Each buffer, then the end of the sequence (what most types need).
    pub fn buffers(&mut self, buffers: &[&[u8]]) {
        for b in buffers {
            self.buffer(b);
        }
        self.end();
    }

    /// One buffer of the sequence (end it with [`DigestOut::end`]).
    pub fn buffer(&mut self, b: &[u8]) {
        // SAFETY: a valid digest handle; the server only reads the bytes.
        unsafe { api!(RedisModule_DigestAddStringBuffer)(self.0, b.as_ptr().cast_mut().cast(), b.len()) };
    }

    /// One integer of the sequence.
    pub fn long(&mut self, v: i64) {
        // SAFETY: a valid digest handle.
        unsafe { api!(RedisModule_DigestAddLongLong)(self.0, v) };
    }

    pub fn end(&mut self) {
        // SAFETY: a valid digest handle.
        unsafe { api!(RedisModule_DigestEndSequence)(self.0) };
    }
}

/// A new string with no context (kept past any command); the caller owns
/// its one reference ([`free_string`]) or hands it to the server.
pub fn new_string(text: &str) -> *mut raw::RedisModuleString {
    // SAFETY: a null context is allowed; the server copies the bytes.
    unsafe { api!(RedisModule_CreateString)(std::ptr::null_mut(), text.as_ptr().cast(), text.len()) }
}

/// Takes a reference to a string the server passed (it stays valid until
/// [`free_string`]).
pub fn retain_string(s: *mut raw::RedisModuleString) {
    // SAFETY: a valid string; a null context retains it for good.
    unsafe { api!(RedisModule_RetainString)(std::ptr::null_mut(), s) };
}

/// Releases one reference the module holds (from [`new_string`] or
/// [`retain_string`]); null is nothing.
pub fn free_string(s: *mut raw::RedisModuleString) {
    if !s.is_null() {
        // SAFETY: a reference the module owns, released once.
        unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), s) };
    }
}

/// Starts a section of `INFO bf`.
pub fn add_section(ctx: *mut raw::RedisModuleInfoCtx, name: &CStr) {
    // SAFETY: valid info context; NUL-terminated name.
    unsafe { api!(RedisModule_InfoAddSection)(ctx, name.as_ptr()) };
}

/// Adds a field to the current section.
pub fn add_field(ctx: *mut raw::RedisModuleInfoCtx, name: &CStr, value: u64) {
    // SAFETY: valid info context; NUL-terminated name.
    unsafe { api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), value) };
}

/// Adds a text field to the current section.
pub fn add_text(ctx: *mut raw::RedisModuleInfoCtx, name: &CStr, value: &str) {
    let Ok(value) = CString::new(value) else { return };
    // SAFETY: valid info context; NUL-terminated name and value.
    unsafe { api!(RedisModule_InfoAddFieldCString)(ctx, name.as_ptr(), value.as_ptr().cast_mut()) };
}

/// Runs a callback, turning a panic into `fallback` so that it never unwinds
/// into the server.
pub fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Whether the server has the defrag API a type's `defrag` callback uses
/// (Redis 6.2+, Valkey): without it the callback is not registered.
pub fn defrag_supported() -> bool {
    has_api!(RedisModule_DefragAlloc)
        && has_api!(RedisModule_DefragShouldStop)
        && has_api!(RedisModule_DefragCursorGet)
        && has_api!(RedisModule_DefragCursorSet)
}

/// A type's `defrag` callback's context: moves blocks through
/// `RedisModule_DefragAlloc`, answers the walk's "time is up?", and counts.
///
/// The server calls the callback in two ways. For a value whose
/// `free_effort` is at most `active-defrag-max-scan-fields`, at once with no
/// cursor and no time limit: the whole value is done in one call. Otherwise
/// ("late defrag") with a cursor and an end time: the walk stops when
/// `RedisModule_DefragShouldStop` says so and resumes from the cursor on a
/// later call (0 = start of a value).
pub struct Defrag {
    ctx: *mut raw::RedisModuleDefragCtx,
    /// The cursor the server keeps for a late defrag, `None` otherwise.
    cursor: Option<u64>,
    /// Which block sizes the allocator lets move (`alloc::defrag_may_move`,
    /// passed in: alloc.rs imports this file through config/).
    may_move: fn(usize) -> bool,
    pub hits: u64,
    pub misses: u64,
    pub large_kept: u64,
}

impl Defrag {
    /// # Safety
    /// `ctx` must be the context the server passed to the running callback.
    pub unsafe fn new(ctx: *mut raw::RedisModuleDefragCtx, may_move: fn(usize) -> bool) -> Defrag {
        let mut cursor: std::ffi::c_ulong = 0;
        // SAFETY: a valid context; the call only reads the server's cursor
        // into `cursor` (or fails when there is none).
        let late =
            unsafe { api!(RedisModule_DefragCursorGet)(ctx, &mut cursor) } == raw::REDISMODULE_OK as c_int;
        Defrag { ctx, cursor: late.then_some(cursor as u64), may_move, hits: 0, misses: 0, large_kept: 0 }
    }

    /// The cursor of a late defrag (0 when the value starts), `None` when
    /// the server wants the value done in one call.
    pub fn cursor(&self) -> Option<u64> {
        self.cursor
    }

    /// Leaves `cursor` (not 0) for the next call; false when the server
    /// keeps no cursor for this call.
    pub fn set_cursor(&mut self, cursor: u64) -> bool {
        debug_assert!(cursor != 0, "0 tells the server the value is done");
        // SAFETY: the context of the running callback.
        self.cursor.is_some()
            && unsafe { api!(RedisModule_DefragCursorSet)(self.ctx, cursor as std::ffi::c_ulong) }
                == raw::REDISMODULE_OK as c_int
    }

    /// Asks the server to move the block at `ptr`, `len` bytes allocated
    /// through the global allocator for alignment `align`: the new address,
    /// or `None` when it stays (the block is then untouched).
    ///
    /// # Safety
    /// `ptr` must be a live block from the global allocator (the server's,
    /// see `alloc.rs`) that the caller owns and that nothing else points to.
    /// When `Some` is returned the old block has been freed: the caller must
    /// replace every use of `ptr` by the new address before anything reads it.
    unsafe fn relocate(
        &mut self,
        ptr: *mut std::ffi::c_void,
        len: usize,
        align: usize,
    ) -> Option<NonNull<std::ffi::c_void>> {
        // alloc.rs pads every size to the alignment; it assumes 16-byte
        // aligned blocks, which a same-size copy also gets.
        if align > 16 || !(self.may_move)(len.next_multiple_of(align)) {
            self.large_kept += 1;
            return None;
        }
        // SAFETY: the caller's block, allocated by the server's allocator
        // (RedisModule_TryAlloc and friends). The server copies its usable
        // size into a block of the same size class (hence the same
        // alignment: every class of 16 bytes or more is 16-aligned, smaller
        // blocks hold types of at most their size's alignment) and frees it.
        let moved = NonNull::new(unsafe { api!(RedisModule_DefragAlloc)(self.ctx, ptr) });
        match moved {
            Some(_) => self.hits += 1,
            None => self.misses += 1,
        }
        moved
    }

    /// Moves the value the keyspace holds (`*value`, a `Box<T>` leaked by
    /// `into_value`), updating the keyspace's pointer.
    ///
    /// # Safety
    /// `value` must be the pointer the server passed to the callback, its
    /// target a `Box<T>` made by the type's `into_value`, with no reference
    /// to it alive.
    pub unsafe fn value<T>(&mut self, value: *mut *mut std::ffi::c_void) {
        // SAFETY: the caller's guarantees; the box's block is
        // `size_of::<T>()` bytes for `align_of::<T>()`, and the keyspace's
        // pointer is updated before anything else reads it.
        unsafe {
            if let Some(new) = self.relocate(*value, std::mem::size_of::<T>(), std::mem::align_of::<T>()) {
                *value = new.as_ptr();
            }
        }
    }
}

impl bloomkit_core::common::memory::Relocate for Defrag {
    fn bytes(&mut self, buffer: &mut Box<[u8]>) {
        let len = buffer.len();
        if len == 0 {
            return; // no allocation behind an empty box
        }
        // Taken out of the value while the server may free its block, so
        // that no reference to the old address survives the call.
        let old = Box::into_raw(std::mem::take(buffer)).cast::<u8>();
        // SAFETY: a block of `len` bytes the value owned, from the global
        // allocator, now owned here only.
        let ptr = match unsafe { self.relocate(old.cast(), len, 1) } {
            Some(new) => new.as_ptr().cast::<u8>(),
            None => old,
        };
        // SAFETY: `ptr` is the live block holding the buffer's `len` bytes
        // (the copy, when the old one was freed), from the server's
        // allocator, which `Box` frees through the global allocator.
        *buffer = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) };
    }

    fn vec<T>(&mut self, buffer: &mut Vec<T>) {
        let (capacity, size) = (buffer.capacity(), std::mem::size_of::<T>());
        if capacity == 0 || size == 0 {
            return; // no allocation
        }
        // Taken out of the value, never dropped here: its block either moves
        // (and the server freed the old one) or comes back as it was.
        let mut old = std::mem::ManuallyDrop::new(std::mem::take(buffer));
        let (ptr, len) = (old.as_mut_ptr(), old.len());
        // SAFETY: the vector's block, `capacity * size` bytes for
        // `align_of::<T>()`, from the global allocator, owned here only.
        let ptr = match unsafe { self.relocate(ptr.cast(), capacity * size, std::mem::align_of::<T>()) } {
            Some(new) => new.as_ptr().cast::<T>(),
            None => ptr,
        };
        // SAFETY: `ptr` is the live block holding the same `len` elements
        // (moved bitwise, as Rust moves any value) with room for `capacity`,
        // from the server's allocator, aligned for T (see `relocate`).
        *buffer = unsafe { Vec::from_raw_parts(ptr, len, capacity) };
    }

    fn should_stop(&mut self) -> bool {
        // Only a late defrag can resume; the other call must finish.
        // SAFETY: the context of the running callback.
        self.cursor.is_some() && unsafe { api!(RedisModule_DefragShouldStop)(self.ctx) } != 0
    }
}
