//! XF's settings: what a write that creates a filter (`XF.ADD`, `XF.MADD`,
//! `XF.ADDNX`, `XF.MADDNX`, `XF.INSERT` without options) gives it, and what
//! `XF.RESERVE` and `XF.INSERT` leave out.
//!
//! | config | load argument | default | range |
//! |---|---|---|---|
//! | `bf.xf-error-rate` | `XF_ERROR_RATE` | 0.01 | [1e-9, 0.5] |
//! | `bf.xf-capacity` | `XF_CAPACITY` | 100 | [1, 2^40] |
//! | `bf.xf-max-capacity` | `XF_MAX_CAPACITY` | 2^36 | [1, 2^40] |
//! | `bf.xf-max-merge-entries` | `XF_MAX_MERGE_ENTRIES` | 2^24 | [1, 2^48] |
//! | `bf.xf-merge-threads` | `XF_MERGE_THREADS` | 2 | [1, 8] |
//!
//! The capacity is where a filter starts (it grows past it); the maximum
//! capacity is where the rate guarantee ends and new items are refused. A
//! default capacity above a `MAXCAPACITY` a command gives shrinks to it.
//! The most entries one `XF.MERGE` reads bounds how long it holds the
//! server (replicas and AOF replays never refuse what the primary did).
//! A merge of at least 2^19 items runs on up to `bf.xf-merge-threads`
//! threads (the server's own included, and no more than it has cores):
//! the server waits for it half as long on two, with the same result byte
//! for byte, so replicas that merge on another number still agree; 1 keeps
//! merges on the server's thread alone.

use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU64, Ordering::Relaxed};

use bloomkit_core::common::parse::parse_double;
use bloomkit_core::xf::{XfDefaults, XfError, DEFAULT_CAPACITY, DEFAULT_MAX_CAPACITY, MAX_CAPACITY_LIMIT};
use bloomkit_core::xf::{DEFAULT_MAX_MERGE_ENTRIES, MAX_MERGE_ENTRIES_LIMIT};
use bloomkit_core::xf::{MAX_ERROR_RATE, MIN_ERROR_RATE};
use bloomkit_core::ReplyError;
use redis_module::raw;

use crate::config::{int, Naming, Setting, Value};

static ERROR_RATE: AtomicU64 = AtomicU64::new(0x3F84_7AE1_47AE_147B); // 0.01
static ERROR_RATE_TEXT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());
static CAPACITY: AtomicI64 = AtomicI64::new(DEFAULT_CAPACITY as i64);
static MAX_CAPACITY: AtomicI64 = AtomicI64::new(DEFAULT_MAX_CAPACITY as i64);
static MAX_MERGE_ENTRIES: AtomicI64 = AtomicI64::new(DEFAULT_MAX_MERGE_ENTRIES as i64);
static MERGE_THREADS: AtomicI64 = AtomicI64::new(2);

/// XF's own range (not the open interval other rates take), and its message.
fn xf_rate(text: &[u8]) -> Result<f64, String> {
    parse_double(text)
        .filter(|r| (MIN_ERROR_RATE..=MAX_ERROR_RATE).contains(r))
        .ok_or_else(|| XfError::BadErrorRate.message().trim_start_matches("ERR ").to_string())
}

static XF_ERROR_RATE: Setting = Setting::new(
    "xf-error-rate",
    Naming::Prefixed,
    Value::Rate { cell: &ERROR_RATE, text: &ERROR_RATE_TEXT, own_check: Some(xf_rate) },
);
static XF_CAPACITY: Setting =
    Setting::new("xf-capacity", Naming::Prefixed, int(&CAPACITY, 1, MAX_CAPACITY_LIMIT as i64));
static XF_MAX_CAPACITY: Setting =
    Setting::new("xf-max-capacity", Naming::Prefixed, int(&MAX_CAPACITY, 1, MAX_CAPACITY_LIMIT as i64));

static XF_MAX_MERGE_ENTRIES: Setting = Setting::new(
    "xf-max-merge-entries",
    Naming::Prefixed,
    int(&MAX_MERGE_ENTRIES, 1, MAX_MERGE_ENTRIES_LIMIT as i64),
);

static XF_MERGE_THREADS: Setting =
    Setting::new("xf-merge-threads", Naming::Prefixed, int(&MERGE_THREADS, 1, 8));

pub static SETTINGS: [&Setting; 5] =
    [&XF_ERROR_RATE, &XF_CAPACITY, &XF_MAX_CAPACITY, &XF_MAX_MERGE_ENTRIES, &XF_MERGE_THREADS];

/// `bf.xf-max-merge-entries`.
pub fn max_merge_entries() -> u64 {
    MAX_MERGE_ENTRIES.load(Relaxed) as u64
}

/// `bf.xf-merge-threads`, at most the cores the server may run on.
pub fn merge_threads() -> usize {
    (MERGE_THREADS.load(Relaxed).max(1) as usize).min(*CORES.get_or_init(cores))
}

/// The cores the server may run on, asked once (on Linux the question
/// reads the cgroup's files): a server's affinity and quota do not change
/// under it in practice, and a restart asks again.
static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// What a write creates a missing key with, and what `XF.RESERVE` leaves
/// out. A capacity above the maximum capacity is taken as the maximum.
pub fn defaults() -> XfDefaults {
    let max_capacity = MAX_CAPACITY.load(Relaxed) as u64;
    XfDefaults {
        error_rate: f64::from_bits(ERROR_RATE.load(Relaxed)),
        capacity: (CAPACITY.load(Relaxed) as u64).min(max_capacity),
        max_capacity,
    }
}
