//! Moving filters of every kind between servers and files, for the CLI
//! and for library users. Each kind has its file: Bloom filters
//! (`bloom.rs`), sliding windows (`window.rs`), cuckoo filters
//! (`cuckoo.rs`), expandable filters (`xf.rs`), values moved whole
//! (`value.rs`) and bitmap filters
//! (`bitmap.rs`); their functions are all re-exported here. This
//! file holds what they share (the server connection, progress, chunk
//! scanning, and staging keys renamed in one transaction once a load has
//! been checked, so a half-loaded filter is never visible) and the calls
//! that tell a key's or a file's kind and hand it to its file.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bloomkit_core::family;
use redis::{Cmd, FromRedisValue};

use crate::error::{Error, Failure, Result};

/// A transfer that cannot complete safely, said in words.
macro_rules! transfer {
    ($($arg:tt)*) => { $crate::Error::Transfer(format!($($arg)*)) };
}

mod bitmap;
mod bloom;
mod checked;
mod cuckoo;
mod many;
mod value;
mod window;
mod xf;
pub use bitmap::*;
pub use bloom::*;
pub use cuckoo::{restore_cuckoo, CUCKOO_MAGIC};
pub use many::{copy_small_keys, MANY_BATCH, SMALL_VALUE_BYTES};
pub use value::*;
pub use window::{copy_window, dump_window, load_window, restore_window, window_info};
pub use xf::{copy_xf, dump_xf, restore_xf, xf_info, XF_MAGIC};
pub(crate) use xf::{read_file as read_xf_file, write_file as write_xf_file};

/// Told how far a transfer has come, in bytes of filter data.
pub trait Progress {
    fn set_length(&self, _bytes: u64) {}
    fn inc(&self, _bytes: u64) {}
}

/// No progress to show.
impl Progress for () {}

/// A connection to `url` (a URL or `host:port`, see [`crate::server_url`]),
/// with `$REDISCLI_AUTH`'s password when the URL has none
/// ([`crate::connection_info`]), or an error that says what to check: a
/// malformed address, a server that does not answer within five seconds,
/// or a password it wants or refused. Errors show the URL with its
/// password hidden.
pub fn connect(url: &str) -> Result<redis::Connection> {
    let shown = crate::redact_url(&crate::server_url(url)?);
    let info = crate::connection_info(url)?;
    let client = redis::Client::open(info).map_err(|_| Error::InvalidUrl(shown.clone()))?;
    client.get_connection_with_timeout(Duration::from_secs(5)).map_err(|e| {
        let failure = |e: &redis::RedisError| Failure::from_redis(format!("{shown}: {e}"), e.clone());
        match Error::from_redis(e.clone(), "") {
            Error::Auth(_) => Error::Auth(failure(&e)),
            Error::Timeout(_) => Error::Timeout(failure(&e)),
            _ => Error::Connection(failure(&e)),
        }
    })
}

/// A server connection for transfers, with its URL for messages.
pub struct Server {
    /// The server's URL as messages show it: its password hidden
    /// ([`crate::redact_url`]).
    pub url: String,
    con: redis::Connection,
    /// Once set (by a signal handler, say), every further command fails
    /// with [`Error::Interrupted`], so a transfer stops at its next command
    /// and goes through its cleanup: the staging keys it made are removed.
    interrupt: Option<Arc<AtomicBool>>,
    /// Leftover staging keys of interrupted transfers removed by this
    /// connection's transfers, for the caller to report.
    removed_leftovers: Vec<String>,
    /// Whether transfers through this connection carry TTLs (see
    /// [`Server::drop_ttls`]).
    keep_ttls: bool,
    /// When the keys the next commit renames into place expire (Unix ms),
    /// set by the transfer that loads them; `None`: they do not.
    expire_at: Option<u64>,
    /// The TTL the last transfer through this connection recorded (dump) or
    /// set (restore, copy), for the caller to report.
    last_ttl: Option<Duration>,
}

/// Shows the URL as messages do, its password hidden.
impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("url", &self.url).finish_non_exhaustive()
    }
}

impl Server {
    /// Connects, or says what to check: a malformed URL, or a server that
    /// does not answer within five seconds.
    pub fn connect(url: &str) -> Result<Server> {
        Server::over(connect(url)?, url)
    }

    /// A connection already open to `url` ([`crate::Place::open`]'s).
    pub(crate) fn over(con: redis::Connection, url: &str) -> Result<Server> {
        let url = crate::redact_url(&crate::server_url(url)?);
        Ok(Server {
            url,
            con,
            interrupt: None,
            removed_leftovers: Vec::new(),
            keep_ttls: true,
            expire_at: None,
            last_ttl: None,
        })
    }

    /// Transfers through this connection neither record a key's TTL (dump,
    /// and copy from it) nor set one (restore, and copy to it): the keys
    /// they write do not expire. By default a key's remaining TTL goes
    /// with it, in files too.
    pub fn drop_ttls(&mut self) {
        self.keep_ttls = false;
    }

    /// The TTL the last transfer through this connection recorded in a file
    /// (dump) or gave its key (restore, copy), as it was then; `None` when
    /// the key had none, or TTLs are dropped.
    pub fn last_ttl(&self) -> Option<Duration> {
        self.last_ttl
    }

    /// Stops transfers when `flag` becomes true: the next command fails
    /// with [`Error::Interrupted`] and the transfer removes what it staged
    /// (the cleanup's own commands still run). A command in flight finishes
    /// first; transfers send chunks of at most a few MiB, so that is soon.
    pub fn interrupt_on(&mut self, flag: Arc<AtomicBool>) {
        self.interrupt = Some(flag);
    }

    fn interrupted(&self) -> bool {
        self.interrupt.as_ref().is_some_and(|f| f.load(Ordering::SeqCst))
    }

    /// The leftover staging keys (of transfers killed before they could
    /// clean up) that transfers over this connection found and removed
    /// since the last call.
    pub fn take_removed_leftovers(&mut self) -> Vec<String> {
        std::mem::take(&mut self.removed_leftovers)
    }

    /// The connection, for filters ([`crate::RedisFilter`]).
    pub fn connection(&mut self) -> &mut redis::Connection {
        &mut self.con
    }

    /// Runs a command; errors are classified as every client call's are.
    pub fn call<T: FromRedisValue>(&mut self, cmd: &Cmd, key: &str) -> Result<T> {
        if self.interrupted() {
            return Err(Error::Interrupted);
        }
        self.call_anyway(cmd, key)
    }

    /// A command sent even after an interruption: cleanup.
    fn call_anyway<T: FromRedisValue>(&mut self, cmd: &Cmd, key: &str) -> Result<T> {
        cmd.query(&mut self.con).map_err(|e| Error::from_redis(e, key))
    }

    pub fn exists(&mut self, key: &str) -> Result<bool> {
        self.call(redis::cmd("EXISTS").arg(key), key)
    }
}

/// A filter over a transfer connection ([`crate::Place::into_filter`]), so
/// that one connection finds a key's kind, runs the filter and reads its
/// state at the end. An interruption stops it as it stops transfers.
impl crate::Transport for Server {
    fn run(&mut self, cmds: &[&Cmd]) -> redis::RedisResult<Vec<redis::Value>> {
        if self.interrupted() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "interrupted",
                crate::error::INTERRUPTED.into(),
            )));
        }
        self.con.run(cmds)
    }
}

/// Who can load a kind of key, for [`require_command`]'s message.
pub(crate) enum Loader {
    /// bloomkit's own types (XF, APBF): only bloomkit has their commands.
    Bloomkit,
    /// RedisBloom's types: bloomkit or RedisBloom.
    BloomkitOrRedisBloom,
    /// valkey-bloom's filters: bloomkit or valkey-bloom.
    BloomkitOrValkeyBloom,
}

/// Refuses, before anything is written, a load into a server that lacks
/// `command` (its module is not loaded), naming the module to load: the
/// server's own answer would blame the file (an unknown command echoes the
/// chunk's bytes, which the redis crate cannot read as text, and RESTORE of
/// an unknown type says `Bad data format`). A server that will not answer
/// `COMMAND INFO` (an ACL user without it) is tried as it is.
pub(crate) fn require_command(server: &mut Server, command: &str, what: &str, loader: Loader) -> Result<()> {
    let Ok(reply) = server.call::<redis::Value>(redis::cmd("COMMAND").arg("INFO").arg(command), command)
    else {
        return Ok(());
    };
    let known = match &reply {
        redis::Value::Array(items) => items.first().is_some_and(|i| !matches!(i, redis::Value::Nil)),
        _ => true,
    };
    if known {
        return Ok(());
    }
    let module = match loader {
        Loader::Bloomkit => "bloomkit's module (loadmodule /path/to/libbloomkit.so); no other module has it",
        Loader::BloomkitOrRedisBloom => {
            "bloomkit's module (loadmodule /path/to/libbloomkit.so) or RedisBloom"
        }
        Loader::BloomkitOrValkeyBloom => {
            "bloomkit's module (loadmodule /path/to/libbloomkit.so) or valkey-bloom"
        }
    };
    Err(transfer!(
        "the server at {} has no {command} command, so it cannot hold {what}: load {module} there, \
         then try again (nothing was changed; the file or source is not at fault)",
        server.url
    ))
}

/// The chunks a SCANDUMP-style command (`BF.SCANDUMP`, `APBF.SCANDUMP`,
/// `CF.SCANDUMP`) answers from `iter` on, until its next iterator is 0;
/// `each` gets each chunk with the iterator that loads it back (LOADCHUNK's).
pub fn scan_chunks(
    server: &mut Server,
    command: &str,
    key: &str,
    mut iter: i64,
    mut each: impl FnMut(i64, Vec<u8>) -> Result<()>,
) -> Result<()> {
    loop {
        // The last answer's data may be nil (CF.SCANDUMP).
        let (next, data): (i64, Option<Vec<u8>>) =
            server.call(redis::cmd(command).arg(key).arg(iter), key)?;
        if next == 0 {
            return Ok(());
        }
        each(next, data.unwrap_or_default())?;
        iter = next;
    }
}

/// A key name beside `key` for loading into before an atomic rename, in
/// the same hash slot so that RENAME works on a Redis Cluster: `key`'s own
/// hash tag is kept, or `key` becomes the tag. The process id tells two
/// transfers into one key apart.
fn staging_key(key: &str) -> String {
    format!("{}:{}", staging_prefix(key), std::process::id())
}

/// `{key}:bloomkit-staging` (or `key:bloomkit-staging` when `key` has its
/// own hash tag): the staging keys' common prefix, and the name of the set
/// that lists the staging keys in use for `key`, so that a later run finds
/// the ones a killed transfer left without scanning the keyspace.
fn staging_prefix(key: &str) -> String {
    if crate::has_hash_tag(key) || key.contains(['{', '}']) {
        format!("{key}:bloomkit-staging")
    } else {
        format!("{{{key}}}:bloomkit-staging")
    }
}

/// A staging key lives an hour at most: a transfer killed midway (SIGKILL,
/// a lost connection, a crash) leaves nothing behind for good, and the next
/// transfer into the same key removes it sooner ([`remove_leftovers`]).
const STAGING_TTL_MS: u64 = 3_600_000;

/// A staging key unused for this long belongs to a transfer that is gone:
/// a live one writes to its staging key at every chunk.
pub const LEFTOVER_IDLE_SECONDS: u64 = 5;

/// Gives a staging key, just created, its safety TTL.
fn arm_staging(server: &mut Server, staging: &str) -> Result<()> {
    server.call::<i64>(redis::cmd("PEXPIRE").arg(staging).arg(STAGING_TTL_MS), staging).map(|_| ())
}

/// A staging key another transfer into `key` made and did not remove.
#[derive(Debug, Clone, PartialEq)]
pub struct Leftover {
    pub key: String,
    /// Seconds since anything wrote to it (`OBJECT IDLETIME`; `None` where
    /// the server's eviction policy does not keep it).
    pub idle_seconds: Option<u64>,
    /// Seconds before its safety TTL removes it.
    pub ttl_seconds: Option<u64>,
}

impl Leftover {
    /// Whether its transfer is gone: unused for [`LEFTOVER_IDLE_SECONDS`],
    /// or of unknown age (an LFU eviction policy keeps no idle time).
    pub fn is_stale(&self) -> bool {
        self.idle_seconds.is_none_or(|s| s >= LEFTOVER_IDLE_SECONDS)
    }
}

/// The staging keys of other transfers into `key` that still exist on the
/// server (those of this process excluded): what `bloomkit info` reports.
/// Transfers record their staging keys in a set beside them while they
/// run, so a transfer killed before its cleanup leaves its name there.
pub fn leftover_staging(server: &mut Server, key: &str) -> Result<Vec<Leftover>> {
    let registry = staging_prefix(key);
    let mine = staging_key(key);
    let names: Vec<String> = server.call_anyway(redis::cmd("SMEMBERS").arg(&registry), &registry)?;
    let mut found = Vec::new();
    for name in names.into_iter().filter(|n| *n != mine) {
        let ttl: i64 = server.call_anyway(redis::cmd("PTTL").arg(&name), &name)?;
        if ttl == -2 {
            // Gone already (its TTL ran out): forget it.
            server.call_anyway::<i64>(redis::cmd("SREM").arg(&registry).arg(&name), &registry)?;
            continue;
        }
        let idle: Option<u64> =
            server.call_anyway::<u64>(redis::cmd("OBJECT").arg("IDLETIME").arg(&name), &name).ok();
        found.push(Leftover { key: name, idle_seconds: idle, ttl_seconds: u64::try_from(ttl / 1000).ok() });
    }
    Ok(found)
}

/// Removes the leftover staging keys of `key` whose transfers are gone
/// ([`Leftover::is_stale`]); a live transfer's is left alone. What was
/// removed is kept for [`Server::take_removed_leftovers`].
fn remove_leftovers(server: &mut Server, key: &str) -> Result<()> {
    let registry = staging_prefix(key);
    for leftover in leftover_staging(server, key)? {
        if leftover.is_stale() {
            server.call_anyway::<i64>(redis::cmd("UNLINK").arg(&leftover.key), &leftover.key)?;
            server.call_anyway::<i64>(redis::cmd("SREM").arg(&registry).arg(&leftover.key), &registry)?;
            server.removed_leftovers.push(leftover.key);
        }
    }
    Ok(())
}

/// Loads into staging keys (one per key, each in its key's hash slot) with
/// `load`, then renames them over `keys` in one transaction, so that a
/// half-loaded filter is never visible and a failure leaves `keys` as they
/// were. Without `replace`, existing keys are refused, and a key created
/// meanwhile aborts the transaction (WATCH). Loaders give each staging key
/// a TTL as they create it (`arm_staging`).
///
/// On any failure, an interruption ([`Server::interrupt_on`]) included,
/// the staging keys are removed before the error is returned. The staging
/// keys are listed in a set beside the first key while the load runs, so
/// that if this process is killed outright, the next transfer into the
/// same key finds and removes them (`remove_leftovers`), and
/// [`leftover_staging`] reports them.
pub fn stage_and_commit(
    server: &mut Server,
    keys: &[String],
    replace: bool,
    load: impl FnOnce(&mut Server, &[String]) -> Result<()>,
) -> Result<()> {
    let staging: Vec<String> = keys.iter().map(|k| staging_key(k)).collect();
    let registry = staging_prefix(&keys[0]);
    let result = (|| -> Result<()> {
        remove_leftovers(server, &keys[0])?;
        if !replace {
            server.call::<()>(redis::cmd("WATCH").arg(keys), &keys[0])?;
            for key in keys {
                if server.exists(key)? {
                    return Err(transfer!(
                        "key '{key}' already exists on {}; pass --replace to overwrite it",
                        server.url
                    ));
                }
            }
        }
        server.call::<i64>(redis::cmd("DEL").arg(&staging), &staging[0])?;
        server.call::<i64>(redis::cmd("SADD").arg(&registry).arg(&staging), &registry)?;
        server.call::<i64>(redis::cmd("PEXPIRE").arg(&registry).arg(STAGING_TTL_MS), &registry)?;
        load(server, &staging)?;
        if server.interrupted() {
            return Err(Error::Interrupted);
        }
        // The TTL the keys carry, as it is left at this moment.
        let ttl_ms = match server.expire_at {
            Some(at) => match at.checked_sub(now_unix_ms()).filter(|ms| *ms > 0) {
                Some(ms) => Some(ms),
                None => {
                    return Err(transfer!(
                        "'{}' expired while it was being loaded (its TTL ran out); nothing was written \
                         (without --no-ttl its TTL goes with it)",
                        keys[0]
                    ))
                }
            },
            None => None,
        };
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (from, to) in staging.iter().zip(keys) {
            pipe.cmd("RENAME").arg(from).arg(to).ignore();
            // RENAME carries the staging key's safety TTL over: the key
            // gets its own instead, or none.
            match ttl_ms {
                Some(ms) => pipe.cmd("PEXPIRE").arg(to).arg(ms).ignore(),
                None => pipe.cmd("PERSIST").arg(to).ignore(),
            };
        }
        server.last_ttl = ttl_ms.map(Duration::from_millis);
        let committed: Option<()> =
            pipe.query(&mut server.con).map_err(|e| Error::from_redis(e, &keys[0]))?;
        if committed.is_none() {
            return Err(transfer!(
                "key '{}' appeared on {} while loading; pass --replace to overwrite it",
                keys[0],
                server.url
            ));
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = server.call_anyway::<()>(&redis::cmd("UNWATCH"), &keys[0]);
        // UNLINK: a staging key can hold gigabytes, freed off the main thread.
        let _ = server.call_anyway::<i64>(redis::cmd("UNLINK").arg(&staging), &staging[0]);
    }
    let _ = server.call_anyway::<i64>(redis::cmd("SREM").arg(&registry).arg(&staging), &registry);
    result
}

/// The label and value pairs of an `*.INFO` command (`BF.INFO` of a
/// valkey-bloom filter, `CF.INFO`, `APBF.INFO`, the sketches' INFO).
pub fn info_fields(server: &mut Server, key: &str, command: &str) -> Result<Vec<(String, String)>> {
    let values: Vec<redis::Value> = server.call(redis::cmd(command).arg(key), key)?;
    let text = |v: &redis::Value| match v {
        redis::Value::Int(i) => i.to_string(),
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Double(d) => d.to_string(),
        redis::Value::Nil => String::new(),
        other => format!("{other:?}"),
    };
    Ok(values.chunks(2).map(|p| (text(&p[0]), p.get(1).map(text).unwrap_or_default())).collect())
}

/// What a key holds, from `TYPE`.
#[derive(Debug, PartialEq)]
pub enum Kind {
    Bloom,
    Window,
    /// valkey-bloom's `bloomfltr`, served by bloomkit too.
    ValkeyBloom,
    /// A cuckoo filter (`MBbloomCF`).
    Cuckoo,
    /// bloomkit's expandable filter (`bkit-xflt`).
    Xf,
    /// One of RedisBloom's sketches, moved whole.
    Sketch(Sketch),
    /// A string: a bitmap filter, if the options describe one.
    String,
    Missing,
    Other(String),
}

/// RedisBloom's other families: small, self-contained values, moved whole
/// with `DUMP` / `RESTORE` like valkey-bloom's filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sketch {
    /// A Count-Min Sketch (`CMSk-TYPE`).
    CountMin,
    /// A Top-K (`TopK-TYPE`).
    TopK,
    /// A t-digest (`TDIS-TYPE`).
    TDigest,
}

impl Sketch {
    pub const ALL: [Sketch; 3] = [Sketch::CountMin, Sketch::TopK, Sketch::TDigest];

    /// Its entry in core's list of families.
    pub fn family(self) -> &'static family::Kind {
        match self {
            Sketch::CountMin => &family::CMS,
            Sketch::TopK => &family::TOPK,
            Sketch::TDigest => &family::TDIGEST,
        }
    }

    /// The data type's name, as `TYPE` answers it.
    pub fn type_name(self) -> &'static str {
        self.family().type_name
    }

    /// The command that describes one.
    pub fn info_command(self) -> &'static str {
        self.family().info_command
    }

    /// What to call it in messages.
    pub fn name(self) -> &'static str {
        self.family().name
    }

    pub fn from_type_name(name: &str) -> Option<Sketch> {
        Sketch::ALL.into_iter().find(|s| s.type_name() == name)
    }
}

impl Kind {
    /// A kind from `TYPE`'s answer.
    pub fn from_type_name(t: &str) -> Kind {
        match t {
            "string" => Kind::String,
            "none" => Kind::Missing,
            _ => family::by_type_name(t).map_or_else(|| Kind::Other(t.to_string()), Kind::of),
        }
    }

    /// The kind of a family's keys.
    pub fn of(f: &family::Kind) -> Kind {
        let families = [
            (&family::BF, Kind::Bloom),
            (&family::APBF, Kind::Window),
            (&family::VBLOOM, Kind::ValkeyBloom),
            (&family::CF, Kind::Cuckoo),
            (&family::XF, Kind::Xf),
        ];
        let mut all = families.into_iter().chain(Sketch::ALL.map(|s| (s.family(), Kind::Sketch(s))));
        all.find(|(g, _)| *g == f).map_or_else(|| Kind::Other(f.type_name.to_string()), |(_, k)| k)
    }

    /// Its entry in core's list of families (none for strings, missing
    /// keys and other types).
    pub fn family(&self) -> Option<&'static family::Kind> {
        match self {
            Kind::Bloom => Some(&family::BF),
            Kind::Window => Some(&family::APBF),
            Kind::ValkeyBloom => Some(&family::VBLOOM),
            Kind::Cuckoo => Some(&family::CF),
            Kind::Xf => Some(&family::XF),
            Kind::Sketch(s) => Some(s.family()),
            Kind::String | Kind::Missing | Kind::Other(_) => None,
        }
    }

    /// Whether `copy_key` moves it without bitmap parameters.
    pub fn is_module_value(&self) -> bool {
        self.family().is_some()
    }
}

pub fn kind(server: &mut Server, key: &str) -> Result<Kind> {
    let t: String = server.call(redis::cmd("TYPE").arg(key), key)?;
    Ok(Kind::from_type_name(&t))
}

/// Every key on the server (matching `pattern`, a `SCAN MATCH` glob) that
/// holds a filter or sketch bloomkit moves without parameters, in `SCAN`
/// order, and how many other keys were passed over. A key deleted during the
/// scan is skipped.
pub fn module_keys(server: &mut Server, pattern: &str) -> Result<(Vec<String>, usize)> {
    let mut cursor: u64 = 0;
    let (mut keys, mut others) = (Vec::new(), 0);
    loop {
        let (next, batch): (u64, Vec<String>) = server
            .call(redis::cmd("SCAN").arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(1000), pattern)?;
        let mut pipe = redis::pipe();
        for key in &batch {
            pipe.cmd("TYPE").arg(key);
        }
        let types: Vec<String> = if batch.is_empty() {
            Vec::new()
        } else {
            pipe.query(&mut server.con).map_err(|e| Error::from_redis(e, pattern))?
        };
        for (key, t) in batch.into_iter().zip(types) {
            match Kind::from_type_name(&t) {
                kind if kind.is_module_value() => keys.push(key),
                Kind::Missing => {}
                _ => others += 1,
            }
        }
        if next == 0 {
            // SCAN may return a key twice; keep its first place.
            let mut seen = std::collections::HashSet::new();
            keys.retain(|k| seen.insert(k.clone()));
            return Ok((keys, others));
        }
        cursor = next;
    }
}

/// What a key holds, in words for messages: "a Bloom filter", "an
/// expandable filter (XF)", "a hash", "nothing".
pub fn describe_kind(kind: &Kind) -> String {
    if let Some(f) = kind.family() {
        return f.a();
    }
    match kind {
        Kind::Missing => "nothing".into(),
        Kind::Other(t) => format!("a {t}"),
        _ => "a string".into(),
    }
}

/// The error for a key that holds something bloomkit cannot read, naming it.
pub fn unreadable(server: &Server, key: &str, kind: &Kind) -> Error {
    match kind {
        Kind::Missing => transfer!("key '{key}' does not exist on {}", server.url),
        Kind::String => transfer!(
            "key '{key}' on {} holds a string: if it is a bitmap filter, pass --bitmap (and --layout \
             if another system wrote it) with the --capacity and --error-rate it was made with, or \
             --bits and --hashes",
            server.url
        ),
        Kind::Other(t) => transfer!(
            "key '{key}' on {} holds a {t}, not a filter bloomkit can read (a Bloom filter, a \
             sliding-window filter, a cuckoo filter, an expandable filter, one of RedisBloom's \
             sketches, or a bitmap filter with --bitmap)",
            server.url
        ),
        Kind::Bloom | Kind::Window | Kind::ValkeyBloom | Kind::Cuckoo | Kind::Xf | Kind::Sketch(_) => {
            transfer!("key '{key}' on {} is a filter of another kind", server.url)
        }
    }
}

// ---- TTLs ----

/// The first bytes of a file whose key had a TTL: then when it expires,
/// as Unix milliseconds (u64, little-endian), and a CRC-32 of the 16 bytes
/// before it; then the filter's own file. A file without it (every file
/// bloomkit wrote before TTLs, and the dump of a key without one) restores
/// with no TTL, as before.
pub const EXPIRY_MAGIC: &[u8; 8] = b"BKEXPIRE";

/// The length of the expiry record: magic, time, checksum.
pub const EXPIRY_LEN: usize = 20;

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The expiry record for a key expiring at `at` (Unix ms).
pub fn expiry_record(at: u64) -> [u8; EXPIRY_LEN] {
    let mut record = [0u8; EXPIRY_LEN];
    record[..8].copy_from_slice(EXPIRY_MAGIC);
    record[8..16].copy_from_slice(&at.to_le_bytes());
    let crc = crc32fast::hash(&record[..16]);
    record[16..].copy_from_slice(&crc.to_le_bytes());
    record
}

/// When the key of an expiry record expires (Unix ms); the record's magic
/// was read, `rest` is its other 12 bytes.
pub fn read_expiry(rest: &[u8; EXPIRY_LEN - 8]) -> Result<u64> {
    let mut record = [0u8; EXPIRY_LEN];
    record[..8].copy_from_slice(EXPIRY_MAGIC);
    record[8..].copy_from_slice(rest);
    let crc = u32::from_le_bytes(record[16..].try_into().expect("4 bytes"));
    if crc32fast::hash(&record[..16]) != crc {
        return Err(transfer!("the file's expiry record does not match its checksum: it is damaged"));
    }
    Ok(u64::from_le_bytes(record[8..16].try_into().expect("8 bytes")))
}

/// The keys that hold a key's value: the key itself, or for a bitmap filter
/// the keys of its layout (a split bitmap's parts, a Redisson config).
fn value_keys(key: &str, bitmap: Option<&BitmapParams>) -> Vec<String> {
    match bitmap.map(|b| b.layout(key)) {
        Some(Ok(layout)) => layout.keys(),
        _ => vec![key.to_string()],
    }
}

/// When the value of `key` expires (Unix ms, by this machine's clock),
/// from the remaining TTL of the first of its keys that exists; `None` when
/// it has none or TTLs are dropped.
fn expiry_of(server: &mut Server, key: &str, bitmap: Option<&BitmapParams>) -> Result<Option<u64>> {
    if !server.keep_ttls {
        return Ok(None);
    }
    for k in value_keys(key, bitmap) {
        let ttl: i64 = server.call(redis::cmd("PTTL").arg(&k), &k)?;
        match ttl {
            -2 => continue,
            ms if ms >= 0 => return Ok(Some(now_unix_ms() + ms as u64)),
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// Gives `server`'s next commit the expiry `at` (and clears it after `f`).
fn expiring<T>(server: &mut Server, at: Option<u64>, f: impl FnOnce(&mut Server) -> Result<T>) -> Result<T> {
    server.expire_at = at.filter(|_| server.keep_ttls);
    server.last_ttl = None;
    let result = f(server);
    server.expire_at = None;
    result
}

// ---- every kind, one call ----

/// Streams a cuckoo filter into a file: its chunks, then its `CF.INFO`.
/// A filter with no items has no chunks, and is written whole (a
/// module-value file), where it is small.
pub fn dump_cuckoo(server: &mut Server, key: &str, out: impl Write, progress: &dyn Progress) -> Result<u64> {
    match cuckoo::has_chunks(server, key)? {
        true => cuckoo::dump_chunks(server, key, out, progress),
        false => dump_value(server, key, out, progress),
    }
}

/// Copies a cuckoo filter chunk by chunk (a write to the source meanwhile
/// is refused rather than copied torn), or whole when it has no items.
pub fn copy_cuckoo(
    from: &mut Server,
    to: &mut Server,
    key: &str,
    replace: bool,
    progress: &dyn Progress,
) -> Result<()> {
    match cuckoo::has_chunks(from, key)? {
        true => cuckoo::copy_chunks(from, to, key, replace, progress),
        false => copy_value(from, to, key, replace, progress).map(drop),
    }
}

fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::Bloom => "Bloom filter",
        Kind::Window => "sliding-window filter",
        Kind::ValkeyBloom => "valkey-bloom filter",
        Kind::Cuckoo => "cuckoo filter",
        Kind::Xf => "expandable filter",
        Kind::Sketch(s) => s.name(),
        _ => "bitmap filter",
    }
}

/// Dumps `key` of any kind to `out` (a bitmap filter with `bitmap`'s
/// parameters); returns what it was.
pub fn dump_key(
    server: &mut Server,
    key: &str,
    bitmap: Option<BitmapParams>,
    out: impl Write,
    progress: &dyn Progress,
) -> Result<&'static str> {
    let kind = kind(server, key)?;
    let mut out = out;
    let at = match kind.is_module_value() || bitmap.is_some() {
        true => expiry_of(server, key, bitmap.as_ref())?,
        false => None,
    };
    server.last_ttl = at.map(|at| Duration::from_millis(at.saturating_sub(now_unix_ms())));
    if let Some(at) = at {
        out.write_all(&expiry_record(at))?;
    }
    match (&kind, bitmap) {
        (Kind::Bloom, _) => dump(server, key, out, progress)?,
        (Kind::Window, _) => {
            dump_window(server, key, out, progress)?;
        }
        (Kind::ValkeyBloom | Kind::Sketch(_), _) => {
            dump_value(server, key, out, progress)?;
        }
        (Kind::Cuckoo, _) => {
            dump_cuckoo(server, key, out, progress)?;
        }
        (Kind::Xf, _) => {
            dump_xf(server, key, out, progress)?;
        }
        (Kind::String | Kind::Missing, Some(b)) => {
            dump_bitmap(server, key, &b, out, progress)?;
        }
        (other, _) => return Err(unreadable(server, key, other)),
    }
    Ok(kind_name(&kind))
}

/// Restores a file of any kind into `key`, told by its first bytes;
/// returns what it held.
pub fn restore_file(
    server: &mut Server,
    key: &str,
    mut input: impl Read,
    replace: bool,
    progress: &dyn Progress,
) -> Result<&'static str> {
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic).map_err(|e| transfer!("the file is too short to be a filter: {e}"))?;
    let mut at = None;
    if &magic == EXPIRY_MAGIC {
        let mut rest = [0u8; EXPIRY_LEN - 8];
        input.read_exact(&mut rest).map_err(|_| transfer!("the file ends inside its expiry record"))?;
        at = Some(read_expiry(&rest)?);
        input
            .read_exact(&mut magic)
            .map_err(|_| transfer!("the file holds an expiry record and no filter"))?;
    }
    if let Some(at) = at.filter(|_| server.keep_ttls) {
        let now = now_unix_ms();
        if at <= now {
            return Err(transfer!(
                "the file's key expired {}s ago (its dump recorded a TTL): restore it without one with \
                 --no-ttl, or not at all; nothing was written",
                (now - at) / 1000
            ));
        }
    }
    expiring(server, at, |server| restore_kind(server, key, &magic, input, replace, progress))
}

/// [`restore_file`] once the file's magic (after any expiry record) is read.
fn restore_kind(
    server: &mut Server,
    key: &str,
    magic: &[u8; 8],
    input: impl Read,
    replace: bool,
    progress: &dyn Progress,
) -> Result<&'static str> {
    let magic = *magic;
    if &magic == BLOOM_MAGIC {
        restore(server, key, std::io::Cursor::new(magic).chain(input), replace, progress)?;
        return Ok("Bloom filter");
    }
    if &magic == CUCKOO_MAGIC {
        restore_cuckoo(server, key, input, replace, progress)?;
        return Ok("cuckoo filter");
    }
    if &magic == XF_MAGIC {
        restore_xf(server, key, input, replace, progress)?;
        return Ok("expandable filter");
    }
    if &magic == VALUE_MAGIC {
        let type_name = restore_value(server, key, input, replace, progress)?;
        return Ok(match Kind::from_type_name(&type_name) {
            Kind::ValkeyBloom => "valkey-bloom filter",
            Kind::Cuckoo => "cuckoo filter",
            Kind::Sketch(s) => s.name(),
            _ => "filter",
        });
    }
    if &magic == BITMAP_MAGIC {
        restore_bitmap(server, key, input, replace, progress)?;
        return Ok("bitmap filter");
    }
    if window::is_window_file(&magic) {
        window::restore_window_file(server, key, &magic, input, replace, progress)?;
        return Ok("sliding-window filter");
    }
    Err(transfer!(
        "not a filter file: it starts with neither BLOOMKIT (a Bloom filter), BKAPBF (a \
         sliding-window filter), BKBITMAP (a bitmap filter), BKCUCKOO (a cuckoo filter), BKXFFILE \
         (an expandable filter) nor BKMODVAL (a valkey-bloom filter, a sketch, or an empty cuckoo \
         filter)"
    ))
}

/// Copies `key` of any kind from one server to another; returns what it was.
pub fn copy_key(
    from: &mut Server,
    to: &mut Server,
    key: &str,
    bitmap: Option<BitmapParams>,
    replace: bool,
    progress: &dyn Progress,
) -> Result<&'static str> {
    let kind = kind(from, key)?;
    let at = match (to.keep_ttls, kind.is_module_value() || bitmap.is_some()) {
        (true, true) => expiry_of(from, key, bitmap.as_ref())?,
        _ => None,
    };
    expiring(to, at, |to| copy_kind(from, to, key, &kind, bitmap, replace, progress))?;
    Ok(kind_name(&kind))
}

/// [`copy_key`] once the key's kind and TTL are known.
fn copy_kind(
    from: &mut Server,
    to: &mut Server,
    key: &str,
    kind: &Kind,
    bitmap: Option<BitmapParams>,
    replace: bool,
    progress: &dyn Progress,
) -> Result<()> {
    match (kind, bitmap) {
        (Kind::Bloom, _) => copy(from, to, key, replace, progress)?,
        (Kind::Window, _) => copy_window(from, to, key, replace, progress)?,
        (Kind::ValkeyBloom | Kind::Sketch(_), _) => {
            copy_value(from, to, key, replace, progress)?;
        }
        (Kind::Cuckoo, _) => copy_cuckoo(from, to, key, replace, progress)?,
        (Kind::Xf, _) => copy_xf(from, to, key, replace, progress)?,
        // (A split bitmap's own key is missing: its parts are `{key}:i`.)
        (Kind::String | Kind::Missing, Some(b)) => copy_bitmap(from, to, key, &b, replace, progress)?,
        (other, _) => return Err(unreadable(from, key, other)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{describe_kind, staging_key, Kind};
    use bloomkit_core::family::KINDS;

    /// Every family of core's list is a kind the transfers know, and back:
    /// a family added to core and not here fails.
    #[test]
    fn every_family_is_a_kind_that_moves() {
        for f in &KINDS {
            let kind = Kind::from_type_name(f.type_name);
            assert_eq!(kind.family(), Some(f), "{f:?}");
            assert!(kind.is_module_value() && describe_kind(&kind) == f.a(), "{f:?}");
        }
        assert_eq!(Kind::from_type_name("hash"), Kind::Other("hash".into()));
        assert_eq!(describe_kind(&Kind::from_type_name("string")), "a string");
    }

    /// Redis Cluster's slot of a key (CRC16/XMODEM of its hash tag or of it).
    fn slot(key: &str) -> u16 {
        let k = key.as_bytes();
        let hashed = match k.iter().position(|&b| b == b'{') {
            Some(open) => match k[open + 1..].iter().position(|&b| b == b'}') {
                Some(close) if close > 0 => &k[open + 1..open + 1 + close],
                _ => k,
            },
            None => k,
        };
        crc16::State::<crc16::XMODEM>::calculate(hashed) % 16384
    }

    #[test]
    fn staging_keys_share_the_slot() {
        // (A key with braces but no tag, such as "x{}y", cannot be matched.)
        for key in ["clicks", "user:{42}:seen", "a:b:c", "{tag}rest"] {
            assert_eq!(slot(&staging_key(key)), slot(key), "{key} -> {}", staging_key(key));
            assert_ne!(staging_key(key), key);
        }
    }
}
