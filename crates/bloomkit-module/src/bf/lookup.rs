//! What a `BF.*` key holds: RedisBloom's chain, or valkey-bloom's object.
//! Both types answer `BF.*`; this is the one place that tells them apart.

use bloomkit_core::bf::Chain;
use bloomkit_core::vbloom::Object;
use bloomkit_core::Reply;

use crate::ffi::Key;
use crate::keys;

/// The filter in a key, read while the key is open.
pub enum Found<'k> {
    Chain(&'k Chain),
    Valkey(&'k Object),
}

/// The filter in a key opened for writing.
pub enum FoundMut<'k> {
    Chain(&'k mut Chain),
    Valkey(&'k mut Object),
}

/// The Bloom filter in a key, of either type: `Ok(None)` when the key is
/// empty, `WRONGTYPE` when it holds anything else.
pub fn lookup_bloom(key: &Key) -> Result<Option<Found<'_>>, Reply> {
    Ok(keys::lookup_either::<Chain, Object>(key)?.map(|found| match found {
        Ok(chain) => Found::Chain(chain),
        Err(object) => Found::Valkey(object),
    }))
}

/// [`lookup_bloom`] for a write.
pub fn lookup_bloom_mut(key: &mut Key) -> Result<Option<FoundMut<'_>>, Reply> {
    Ok(keys::lookup_either_mut::<Chain, Object>(key)?.map(|found| match found {
        Ok(chain) => FoundMut::Chain(chain),
        Err(object) => FoundMut::Valkey(object),
    }))
}
