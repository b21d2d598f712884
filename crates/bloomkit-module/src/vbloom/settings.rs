//! valkey-bloom's seven configs, registered on every server as it
//! registers them (`bf.bloom-capacity`, `bf.bloom-expansion`,
//! `bf.bloom-fp-rate`, `bf.bloom-tightening-ratio`,
//! `bf.bloom-memory-usage-limit`, `bf.bloom-use-random-seed`,
//! `bf.bloom-defrag-enabled`), with its defaults, ranges and messages, so
//! that a configuration written for it starts. The memory limit and the
//! defrag switch govern `bloomfltr` objects under every level; the others
//! are what `bf.compat valkey-bloom` creates new filters with: set under
//! another level they are refused (they would do nothing), saying so.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, Ordering::Relaxed};

use bloomkit_core::common::compat::Compat;
use bloomkit_core::vbloom::{self, ValkeyError, VbDefaults};
use bloomkit_core::{Limits, ReplyError};
use redis_module::raw;

use crate::config::{int, Naming, Setting, Value};

const VB: VbDefaults = VbDefaults::VALKEY_BLOOM;
static CAPACITY: AtomicI64 = AtomicI64::new(VB.capacity);
static EXPANSION: AtomicI64 = AtomicI64::new(VB.expansion as i64);
static FP_RATE: AtomicU64 = AtomicU64::new(VB.fp_rate.to_bits());
static TIGHTENING: AtomicU64 = AtomicU64::new(VB.tightening.to_bits());
static MEMORY_LIMIT: AtomicI64 = AtomicI64::new(vbloom::MEMORY_LIMIT as i64);
static RANDOM_SEED: AtomicBool = AtomicBool::new(VB.random_seed);
static DEFRAG: AtomicBool = AtomicBool::new(true);
/// The texts `CONFIG GET` answers for the rates, as they were set (owned by the module).
static FP_RATE_TEXT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());
static TIGHTENING_TEXT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

/// valkey-bloom's words for a ratio: the float as Rust reads it, then the range.
fn ratio(text: &[u8], range: ValkeyError) -> Result<f64, String> {
    match vbloom::args::parse_unit_ratio(text) {
        Ok(v) => Ok(v),
        Err(Some(_)) => Err(range.message().into_owned()),
        Err(None) => Err("Invalid floating-point value".to_string()),
    }
}

static BLOOM_CAPACITY: Setting =
    Setting::new("bloom-capacity", Naming::ValkeyBloom, int(&CAPACITY, 1, i64::MAX))
        .only_under(Compat::ValkeyBloom);
static BLOOM_EXPANSION: Setting =
    Setting::new("bloom-expansion", Naming::ValkeyBloom, int(&EXPANSION, 0, u32::MAX as i64))
        .only_under(Compat::ValkeyBloom);
static BLOOM_FP_RATE: Setting = Setting::new(
    "bloom-fp-rate",
    Naming::ValkeyBloom,
    Value::Rate {
        cell: &FP_RATE,
        text: &FP_RATE_TEXT,
        own_check: Some(|t| ratio(t, ValkeyError::ErrorRateRange)),
    },
)
.only_under(Compat::ValkeyBloom);
static BLOOM_TIGHTENING: Setting = Setting::new(
    "bloom-tightening-ratio",
    Naming::ValkeyBloom,
    Value::Rate {
        cell: &TIGHTENING,
        text: &TIGHTENING_TEXT,
        own_check: Some(|t| ratio(t, ValkeyError::TighteningRange)),
    },
)
.only_under(Compat::ValkeyBloom);
static BLOOM_MEMORY_LIMIT: Setting =
    Setting::new("bloom-memory-usage-limit", Naming::ValkeyBloom, int(&MEMORY_LIMIT, 0, i64::MAX));
static BLOOM_RANDOM_SEED: Setting =
    Setting::new("bloom-use-random-seed", Naming::ValkeyBloom, Value::Bool(&RANDOM_SEED))
        .only_under(Compat::ValkeyBloom);
static BLOOM_DEFRAG: Setting =
    Setting::new("bloom-defrag-enabled", Naming::ValkeyBloom, Value::Bool(&DEFRAG));

pub static SETTINGS: [&Setting; 7] = [
    &BLOOM_CAPACITY,
    &BLOOM_EXPANSION,
    &BLOOM_FP_RATE,
    &BLOOM_TIGHTENING,
    &BLOOM_MEMORY_LIMIT,
    &BLOOM_RANDOM_SEED,
    &BLOOM_DEFRAG,
];

/// What `bf.compat valkey-bloom` creates new filters with, where a command
/// leaves a parameter out: valkey-bloom's configs.
pub fn defaults() -> VbDefaults {
    VbDefaults {
        capacity: CAPACITY.load(Relaxed),
        fp_rate: f64::from_bits(FP_RATE.load(Relaxed)),
        tightening: f64::from_bits(TIGHTENING.load(Relaxed)),
        expansion: EXPANSION.load(Relaxed) as u32,
        random_seed: RANDOM_SEED.load(Relaxed),
    }
}

/// The limits of a `bloomfltr` object: the module's limits with the size
/// capped by `bf.bloom-memory-usage-limit` (valkey-bloom's per-object limit) as well.
pub fn limits(limits: Limits) -> Limits {
    let cap = MEMORY_LIMIT.load(Relaxed).max(0) as u64;
    Limits { max_bytes: limits.max_bytes.map(|b| b.min(cap)), ..limits }
}

/// Whether active defrag moves `bloomfltr` objects (`bf.bloom-defrag-enabled`).
pub fn defrag() -> bool {
    DEFRAG.load(Relaxed)
}
