//! Bloom filters and their relatives as RedisBloom, valkey-bloom and the
//! systems that share bits with them lay them out, with no Redis in sight.
//!
//! One folder per family, each with its arguments, errors and formats:
//!
//! - [`bf`]: RedisBloom's scalable Bloom filter (`BF.*`, `MBbloom--`);
//! - [`cf`]: RedisBloom's cuckoo filter (`CF.*`, `MBbloomCF`);
//! - [`cms`]: RedisBloom's Count-Min Sketch (`CMS.*`, `CMSk-TYPE`);
//! - [`topk`]: RedisBloom's Top-K (`TOPK.*`, `TopK-TYPE`);
//! - [`tdigest`]: RedisBloom's t-digest (`TDIGEST.*`, `TDIS-TYPE`);
//! - [`apbf`]: bloomkit's sliding-window filter (`APBF.*`, `bkit-apbf`);
//! - [`vbloom`]: valkey-bloom's filters (`BF.*` on `bloomfltr` keys);
//! - [`bitmap`]: the bitmap layouts other systems keep in plain strings
//!   (Guava, Redisson, the PHP BKDR scheme) and Guava's serialized file;
//! - [`local`]: the cache-line-blocked filter for in-process work.
//!
//! [`family`] lists every family (the list the module, the client and the
//! CLI derive theirs from). What they share lives in [`common`], which
//! imports no family. The module
//! crate only moves bytes between Redis and these types, so all of it is
//! testable and fuzzable on its own.

pub mod common;
pub mod family;

pub mod apbf;
pub mod bf;
pub mod bitmap;
pub mod cf;
pub mod cms;
pub mod local;
pub mod tdigest;
pub mod topk;
pub mod vbloom;
pub mod xf;

pub use common::memory::Limits;
pub use common::reply::{Reply, ReplyError};
