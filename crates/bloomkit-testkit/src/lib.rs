//! What the integration tests of every crate share.
//!
//! - [`servers`]: `TestServer` starts a `redis-server` or `valkey-server` on a
//!   free loopback port with modules loaded, waits until it answers, and
//!   stops it on drop; [`per_server!`] makes one test per server binary.
//! - [`resp`]: `Conn`, a raw RESP client that keeps every reply's exact
//!   bytes, so differential tests compare byte for byte.
//! - [`cluster`]: a Redis Cluster of test servers.
//! - [`aof`], [`replication`]: AOF arguments and contents, a dropped
//!   replica link and its partial resync.
//! - [`persistence`], [`hostile`], [`oracle`]: the shared suites a family
//!   opts into (persistence through RDB, AOF, replicas, DEBUG RELOAD, COPY and
//!   DUMP/RESTORE; hostile input; the differential oracle, RedisBloom 2.8.2).
//! - [`rng`], [`vectors`], [`process`], [`figures`]: a deterministic
//!   generator, the items of cross-implementation fixtures, child processes
//!   with deadlines, and measured figures for RELIABILITY.md.
//!
//! Where things are found (override with environment variables):
//! - `BLOOMKIT_REDIS_SERVER`: redis-server (default: on PATH)
//! - `BLOOMKIT_VALKEY_SERVER`: valkey-server 9 (default: `.test-servers/valkey-server`)
//! - `BLOOMKIT_REDIS8_SERVER`, `BLOOMKIT_VALKEY8_SERVER`: redis-server 8 and
//!   valkey-server 8 for the version matrix (default: `.test-servers/redis8-server`,
//!   `.test-servers/valkey8-server`)
//! - `BLOOMKIT_REDISBLOOM`: RedisBloom 2.8.2 (default: `.test-servers/redisbloom.so`)
//! - `BLOOMKIT_MODULE`: libbloomkit.so (default: the target directory of the running test)
//!
//! `scripts/test-servers.sh` installs them.
//!
//! `BLOOMKIT_SERVER_WRAPPER` (e.g. `valgrind --log-file=/tmp/vg.%p`) runs every
//! server under another program; `BLOOMKIT_START_SECONDS` then gives slow
//! starts more time (default 20). `BLOOMKIT_LONG_TESTS=1` runs the long forms
//! of the tests that have one ([`long_tests`]).
//!
//! `BLOOMKIT_HASH_SEED` fixes the hashing secret of every filter made in the
//! test process and in every server it starts: `scripts/test.sh` sets it,
//! `scripts/seed-sweep.sh` varies it. Set empty (or unset), the servers a
//! test process starts share one secret drawn for it ([`hash_seed`]), as the
//! servers of one deployment share their secret file.

pub mod aof;
pub mod cluster;
pub mod figures;
pub mod hostile;
pub mod oracle;
pub mod persistence;
pub mod process;
pub mod replication;
pub mod resp;
pub mod rng;
pub mod servers;
pub mod vectors;

pub use aof::{aof_args, aof_commands};
pub use cluster::TestCluster;
pub use figures::figure;
pub use process::{free_port, output_within, wait_until, wait_within};
pub use replication::drop_link_and_resync;
pub use resp::{Conn, Reply};
pub use rng::Rng;
pub use servers::{
    bloomkit_module, hash_seed, redisbloom_module, server_binary, Module, Server, TestServer,
    HOSTILE_ADDRESS_SPACE, HOSTILE_FILTER_LIMIT,
};
pub use vectors::guava_items;

/// Whether the long forms of tests run (`BLOOMKIT_LONG_TESTS=1`): more
/// seeds, items and repetitions where the default form proves the same
/// thing with fewer. CI runs the default; the long form is for hand runs.
pub fn long_tests() -> bool {
    std::env::var("BLOOMKIT_LONG_TESTS").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `default` normally, `long` under `BLOOMKIT_LONG_TESTS=1`.
pub fn lean_or_long<T>(default: T, long: T) -> T {
    if long_tests() {
        long
    } else {
        default
    }
}
