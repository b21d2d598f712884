//! BF's settings: RedisBloom 8's configs (`bf-error-rate`, `bf-initial-size`,
//! `bf-expansion-factor`: unprefixed on Redis 8, `bf.` elsewhere) and the
//! same three values under bloomkit's names (`bf.error-rate`,
//! `bf.initial-size`, `bf.expansion-factor`), with RedisBloom 2.8's load
//! arguments `ERROR_RATE`, `INITIAL_SIZE` and `EXPANSION`.
//!
//! | config (Redis 8) | load argument | default | range |
//! |---|---|---|---|
//! | `bf-error-rate` | `ERROR_RATE` | 0.01 | (0, 1) |
//! | `bf-initial-size` | `INITIAL_SIZE` | 100 | [1, 2^30] |
//! | `bf-expansion-factor` | `EXPANSION` | 2 | [0, 32768], 0: non-scaling |

use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU64, Ordering::Relaxed};

use bloomkit_core::bf::args::{Defaults, ERROR_RATE_CAP_8, MAX_CAPACITY_8, MAX_EXPANSION};
use bloomkit_core::common::compat::Compat;
use redis_module::raw;

use crate::config::{self, int, rate, Naming, Setting};

static ERROR_RATE: AtomicU64 = AtomicU64::new(0x3F84_7AE1_47AE_147B); // 0.01
/// The text `CONFIG GET` answers for the rate, as it was set (owned by the module).
static ERROR_RATE_TEXT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());
static INITIAL_SIZE: AtomicI64 = AtomicI64::new(100);
static EXPANSION: AtomicI64 = AtomicI64::new(2);

static BK_ERROR_RATE: Setting =
    Setting::new("error-rate", Naming::Prefixed, rate(&ERROR_RATE, &ERROR_RATE_TEXT));
static BK_INITIAL_SIZE: Setting =
    Setting::new("initial-size", Naming::Prefixed, int(&INITIAL_SIZE, 1, MAX_CAPACITY_8));
static BK_EXPANSION: Setting =
    Setting::new("expansion-factor", Naming::Prefixed, int(&EXPANSION, 0, MAX_EXPANSION))
        .with_aliases(&["expansion"]);
static RB8_ERROR_RATE: Setting =
    Setting::new("bf-error-rate", Naming::RedisBloom8, rate(&ERROR_RATE, &ERROR_RATE_TEXT));
static RB8_INITIAL_SIZE: Setting =
    Setting::new("bf-initial-size", Naming::RedisBloom8, int(&INITIAL_SIZE, 1, MAX_CAPACITY_8));
static RB8_EXPANSION: Setting =
    Setting::new("bf-expansion-factor", Naming::RedisBloom8, int(&EXPANSION, 0, MAX_EXPANSION));

pub static SETTINGS: [&Setting; 6] =
    [&BK_ERROR_RATE, &BK_INITIAL_SIZE, &BK_EXPANSION, &RB8_ERROR_RATE, &RB8_INITIAL_SIZE, &RB8_EXPANSION];

/// What a write uses for a Bloom filter it creates without parameters.
/// RedisBloom 8 uses an error rate above 0.25 as 0.25.
pub fn defaults() -> Defaults {
    let mut error = f64::from_bits(ERROR_RATE.load(Relaxed));
    if config::redisbloom_level() == Compat::RedisBloom8 {
        error = error.min(ERROR_RATE_CAP_8);
    }
    Defaults { error, capacity: INITIAL_SIZE.load(Relaxed) as u64, expansion: EXPANSION.load(Relaxed) as u32 }
}
