//! The `TDIS-TYPE` data type: everything a t-digest owes the server.
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::tdigest`; this file only connects it to the module IO calls.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bloomkit_core::common::payload::MODULE_VALUE_RDB_VERSION;
use bloomkit_core::tdigest::TDigest;

use crate::stats::Counters;
use crate::value::{DigestOut, Rewrite, Value};

/// How many snapshots (forks: BGSAVE, full syncs, AOF rewrites) this
/// process has started. A snapshot writes each digest compressed; a digest
/// whose buffer held values then owes that compression to its next write
/// (`TDigest::owes_compression`), so that the primary, its replicas and
/// its AOF go on from the same point as the snapshot.
static SNAPSHOT_EPOCH: AtomicU64 = AtomicU64::new(0);

pub fn snapshot_epoch() -> u64 {
    SNAPSHOT_EPOCH.load(Relaxed)
}

/// The server forked a child (in the parent, right after `fork()`, before
/// any other command, so the child's copy is the state at this epoch):
/// called by the module's one fork handler (`lib.rs`).
pub fn forked() {
    SNAPSHOT_EPOCH.fetch_add(1, Relaxed);
}

/// What a t-digest's memory figures (`TDIGEST.INFO`'s "Memory usage",
/// `MEMORY USAGE`) add to its arrays: RedisBloom 8 counts 72 bytes more
/// than 2.8.2 at every compression.
pub fn memory_extra() -> u64 {
    if crate::config::redisbloom_level() == bloomkit_core::common::compat::Compat::RedisBloom8 {
        72
    } else {
        0
    }
}

impl Value for TDigest {
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    fn memory(&self) -> usize {
        (self.size_bytes() + memory_extra()) as usize
    }

    /// Every field and every node in use of the compressed form, what every
    /// estimate, DUMP and snapshot of it reads: a primary, a replica that
    /// kept the buffer and one that loaded the snapshot agree (their next
    /// write compresses the buffer at the same point). The value itself is
    /// not changed.
    fn digest(&mut self, out: &mut DigestOut) {
        let _ = self.estimates();
        let t = self.estimated();
        let mut header = Vec::with_capacity(80);
        for v in [t.compression().to_bits(), t.min().to_bits(), t.max().to_bits()] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        for v in [
            t.capacity() as i64,
            t.merged_nodes() as i64,
            t.unmerged_nodes() as i64,
            t.total_compressions(),
            t.merged_weight(),
            t.unmerged_weight(),
        ] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        let (means, weights) = t.nodes();
        let means: Vec<u8> = means.iter().flat_map(|m| m.to_bits().to_le_bytes()).collect();
        let weights: Vec<u8> = weights.iter().flat_map(|w| w.to_le_bytes()).collect();
        out.buffers(&[&header, &means, &weights]);
    }

    /// As RedisBloom rewrites it: `RESTORE key 0 <payload>` of its
    /// compressed form (this runs in the rewrite's child, on its own copy).
    fn rewrite(&mut self, aof: &mut Rewrite) {
        if self.estimates().is_err() {
            let _ = self.compress(); // the child's own copy
        }
        aof.chunk(c"RESTORE", 0, &self.estimated().dump_payload(MODULE_VALUE_RDB_VERSION));
    }
}
