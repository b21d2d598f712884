//! CF's settings: RedisBloom 8's configs (unprefixed on Redis 8, `bf.`
//! elsewhere), `CF_MAX_EXPANSIONS` also as RedisBloom 2.8's load argument.
//! At the `redisbloom-8` level the two sizes are linked as RedisBloom 8
//! links them: `cf-initial-size` at least twice `cf-bucket-size`,
//! `cf-bucket-size` at most half of `cf-initial-size`, each as last set.
//!
//! | config (Redis 8) | default | range |
//! |---|---|---|
//! | `cf-bucket-size` | 2 | [1, 255] |
//! | `cf-initial-size` | 1024 | [4, 2^30] |
//! | `cf-max-iterations` | 20 | [1, 65535] |
//! | `cf-expansion-factor` | 1 | [0, 32768] |
//! | `cf-max-expansions` | 32 | [1, 65536] |

use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

use bloomkit_core::cf::args::MAX_CAPACITY_8;
use bloomkit_core::cf::{CfDefaults, MAX_BUCKET_SIZE, MAX_EXPANSION};

use crate::config::{int, Naming, Setting, Value};

static BUCKET_SIZE: AtomicI64 = AtomicI64::new(2);
static INITIAL_SIZE: AtomicI64 = AtomicI64::new(1024);
static MAX_ITERATIONS: AtomicI64 = AtomicI64::new(20);
static EXPANSION: AtomicI64 = AtomicI64::new(1);
static MAX_EXPANSIONS: AtomicI64 = AtomicI64::new(32);

static CF_BUCKET_SIZE: Setting = Setting::new(
    "cf-bucket-size",
    Naming::RedisBloom8,
    Value::Integer {
        cell: &BUCKET_SIZE,
        min: 1,
        max: MAX_BUCKET_SIZE as i64,
        linked: Some(|min, max| (min, max.min(INITIAL_SIZE.load(Relaxed) / 2))),
    },
);
static CF_INITIAL_SIZE: Setting = Setting::new(
    "cf-initial-size",
    Naming::RedisBloom8,
    Value::Integer {
        cell: &INITIAL_SIZE,
        min: 4,
        max: MAX_CAPACITY_8,
        linked: Some(|_, max| (2 * BUCKET_SIZE.load(Relaxed), max)),
    },
);
static CF_MAX_ITERATIONS: Setting =
    Setting::new("cf-max-iterations", Naming::RedisBloom8, int(&MAX_ITERATIONS, 1, u16::MAX as i64));
static CF_EXPANSION: Setting =
    Setting::new("cf-expansion-factor", Naming::RedisBloom8, int(&EXPANSION, 0, MAX_EXPANSION as i64));
static CF_MAX_EXPANSIONS: Setting =
    Setting::new("cf-max-expansions", Naming::RedisBloom8, int(&MAX_EXPANSIONS, 1, 65536));

pub static SETTINGS: [&Setting; 5] =
    [&CF_BUCKET_SIZE, &CF_INITIAL_SIZE, &CF_MAX_ITERATIONS, &CF_EXPANSION, &CF_MAX_EXPANSIONS];

/// What a write uses for a cuckoo filter it creates, and for the options
/// `CF.RESERVE` leaves out.
pub fn defaults() -> CfDefaults {
    CfDefaults {
        capacity: INITIAL_SIZE.load(Relaxed) as u64,
        bucket_size: BUCKET_SIZE.load(Relaxed) as u16,
        max_iterations: MAX_ITERATIONS.load(Relaxed) as u16,
        expansion: EXPANSION.load(Relaxed) as u16,
        max_expansions: MAX_EXPANSIONS.load(Relaxed) as usize,
    }
}
