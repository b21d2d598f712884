//! The `TopK-TYPE` data type: what a Top-K sketch owes the server, through
//! the shared callbacks of [`crate::value`].
//!
//! Same name and encoding version as RedisBloom, so that its RDB files and
//! DUMP payloads load here and ours load there. The field order lives in
//! `bloomkit_core::topk::formats`.

use bloomkit_core::topk::TopK;

use crate::stats::Counters;
use crate::value::{DigestOut, Rewrite, Value};

// Loading refuses a value that does not describe a sketch (RedisBloom
// 2.8.2 asserts and aborts the server); `MEMORY USAGE` is RedisBloom's
// figure, `2088 + 8 x width x depth + 24 x k`.
impl Value for TopK {
    const COUNTERS: &'static Counters = &super::counters::COUNTERS;

    /// The parameters, every bucket, every slot (item included) and the
    /// draw counter.
    fn digest(&mut self, out: &mut DigestOut) {
        let p = self.params();
        let mut header = Vec::with_capacity(28);
        for v in [p.k, p.width, p.depth] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        header.extend_from_slice(&p.decay.to_bits().to_le_bytes());
        header.extend_from_slice(&self.draws().to_le_bytes());
        let mut buckets = Vec::with_capacity(self.buckets().len() * 8);
        for b in self.buckets() {
            buckets.extend_from_slice(&b.fp.to_le_bytes());
            buckets.extend_from_slice(&b.count.to_le_bytes());
        }
        let mut slots = Vec::new();
        for s in self.heap() {
            slots.extend_from_slice(&s.fp.to_le_bytes());
            slots.extend_from_slice(&s.count.to_le_bytes());
            slots.push(u8::from(s.item.is_some()));
            slots.extend_from_slice(&(s.bytes().len() as u64).to_le_bytes());
            slots.extend_from_slice(s.bytes());
        }
        out.buffers(&[&header, &buckets, &slots]);
    }

    /// As RedisBloom rewrites it: `RESTORE key 0 <payload>`, a DUMP payload
    /// of the value (RDB version 9, which every server reads).
    fn rewrite(&mut self, aof: &mut Rewrite) {
        aof.chunk(c"RESTORE", 0, &self.dump_payload());
    }
}
