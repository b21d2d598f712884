//! What a `BF.*` key holds: RedisBloom's chain, or valkey-bloom's object.
//! Both types answer `BF.*`; this is the one place that tells them apart.

use std::ptr::NonNull;

use bloomkit_core::bf::Chain;
use bloomkit_core::vbloom::Object;
use bloomkit_core::Reply;

use crate::ffi::Key;
use crate::keys;

/// A `BF.*` key's filter, of either type.
pub enum BloomFilter {
    Chain(NonNull<Chain>),
    Valkey(NonNull<Object>),
}

/// The Bloom filter in a key, of either type: `Ok(None)` when the key is
/// empty, `WRONGTYPE` when it holds anything else.
pub fn lookup_bloom(key: &Key) -> Result<Option<BloomFilter>, Reply> {
    Ok(keys::lookup_either::<Chain, Object>(key)?.map(|found| match found {
        Ok(chain) => BloomFilter::Chain(chain),
        Err(object) => BloomFilter::Valkey(object),
    }))
}

/// The filter in a key, read only while the key is open.
pub enum Found<'a> {
    Chain(&'a Chain),
    Valkey(&'a Object),
}

impl BloomFilter {
    /// # Safety
    /// The key the filter came from must stay open while the result is used.
    pub unsafe fn get<'a>(&self) -> Found<'a> {
        match self {
            BloomFilter::Chain(c) => Found::Chain(&*c.as_ptr()),
            BloomFilter::Valkey(o) => Found::Valkey(&*o.as_ptr()),
        }
    }
}
