//! The RDB encoding of the `MBbloom--` data type, as a sequence of fields.
//!
//! The field order of every encoding version, over the typed reads and
//! writes of [`crate::common::fields`], so that the real loader and a
//! fuzzer share one implementation.
//!
//! Version 4 (current): items, nfilters, options, growth, then per sub-filter
//! capacity, error, hashes, bpe, bits, n2, bit array, items.
//! Version 2-3 have no growth (it is 2); 1 has no options (32-bit hashes,
//! power-of-two filters); 0 has no bits or n2 (bits = capacity x bpe).

use super::chain::{Chain, Counts};
use super::errors::BfError;
use super::sub_filter::SubFilter;
use crate::common::fields::{FieldReader, FieldWriter};
use crate::common::memory::Limits;
use crate::common::sizing::Shape;

/// The encoding version bloomkit writes, and the newest it reads.
pub const ENCODING_VERSION: i32 = 4;
/// The type name: RedisBloom's, so that its RDB files and DUMP payloads load.
pub const TYPE_NAME: &str = "MBbloom--";

/// Reads a chain of any encoding version from 0 to [`ENCODING_VERSION`].
pub fn load(r: &mut dyn FieldReader, encver: i32, limits: Limits, counts: Counts) -> Result<Chain, BfError> {
    if !(0..=ENCODING_VERSION).contains(&encver) {
        return Err(BfError::BadData);
    }
    let items = r.unsigned()?;
    let nfilters = r.unsigned()?;
    let options = if encver >= 2 { narrow(r.unsigned()?)? } else { 0 };
    let growth = if encver >= 4 { narrow(r.unsigned()?)? } else { 2 };
    if nfilters == 0 {
        return Err(BfError::BadData);
    }
    let mut filters: Vec<SubFilter> = Vec::new();
    let mut total: u64 = 0;
    for _ in 0..nfilters {
        let capacity = r.unsigned()?;
        let error = r.double()?;
        let hashes = narrow(r.unsigned()?)?;
        let bpe = r.double()?;
        let (bits, n2) = if encver == 0 {
            ((capacity as f64 * bpe) as u64, 0)
        } else {
            let bits = r.unsigned()?;
            let n2 = u8::try_from(r.unsigned()?).map_err(|_| BfError::BadData)?;
            (bits, n2)
        };
        let array = r.buffer()?;
        let link_items = r.unsigned()?;
        total = total.checked_add(array.len() as u64).ok_or(BfError::BadData)?;
        let size = Chain::accounted_size(filters.len() as u64 + 1, total).ok_or(BfError::BadData)?;
        if let Some(limit) = limits.max_bytes {
            if size > limit {
                return Err(BfError::TooLarge { bytes: size, limit });
            }
        }
        let shape = Shape { capacity, error, bpe, hashes, bits, bytes: array.len() as u64, n2 };
        filters.try_reserve(1).map_err(|_| BfError::OutOfMemory)?;
        filters.push(SubFilter::from_parts(shape, link_items, array)?);
    }
    Chain::from_loaded_parts(items, options, growth, filters, counts)
}

/// Writes a chain at [`ENCODING_VERSION`].
pub fn save(chain: &Chain, w: &mut dyn FieldWriter) {
    w.unsigned(chain.items());
    w.unsigned(chain.filters().len() as u64);
    w.unsigned(u64::from(chain.options()));
    w.unsigned(u64::from(chain.growth()));
    for f in chain.filters() {
        let s = &f.shape();
        w.unsigned(s.capacity);
        w.double(s.error);
        w.unsigned(u64::from(s.hashes));
        w.double(s.bpe);
        w.unsigned(s.bits);
        w.unsigned(u64::from(s.n2));
        w.buffer(f.bytes());
        w.unsigned(f.items);
    }
}

fn narrow(v: u64) -> Result<u32, BfError> {
    u32::try_from(v).map_err(|_| BfError::BadData)
}

/// The server's own data keeps counts a client's `RESTORE` would be refused
/// ([`Counts::Trusted`]).
impl crate::common::value::FamilyValue for Chain {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const ENCODING_VERSION: i32 = ENCODING_VERSION;
    type Error = BfError;

    fn load(r: &mut dyn FieldReader, how: crate::common::value::Loading) -> Result<Chain, BfError> {
        let counts = if how.own_data { Counts::Trusted } else { Counts::Checked };
        load(r, how.encver, how.limits, counts)
    }
    fn save(&mut self, w: &mut dyn FieldWriter) {
        save(self, w)
    }
    fn size_bytes(&self) -> u64 {
        Chain::size_bytes(self)
    }
    fn try_clone(&self) -> Result<Chain, BfError> {
        Chain::try_clone(self)
    }
    fn relocate(&mut self, from: usize, to: &mut impl crate::common::memory::Relocate) -> Option<usize> {
        Chain::relocate(self, from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bf::chain::ChainParams;
    use crate::common::fields::FieldStream;

    fn sample() -> Chain {
        let p = ChainParams { capacity: 5, error: 0.01, expansion: 2, scaling: true };
        let mut c = Chain::new(p, Limits::NONE).unwrap();
        for i in 0..40u32 {
            c.add(&i.to_le_bytes(), Limits::NONE).unwrap();
        }
        c
    }

    fn saved(c: &Chain) -> Vec<u8> {
        let mut w = FieldStream::default();
        save(c, &mut w);
        w.bytes
    }

    #[test]
    fn round_trip() {
        let c = sample();
        let bytes = saved(&c);
        let loaded =
            load(&mut FieldStream { bytes: bytes.clone(), pos: 0 }, 4, Limits::NONE, Counts::Checked)
                .unwrap();
        assert_eq!(saved(&loaded), bytes);
        for i in 0..40u32 {
            assert!(loaded.contains(&i.to_le_bytes()));
        }
    }

    #[test]
    fn every_truncation_is_refused() {
        let bytes = saved(&sample());
        for len in 0..bytes.len() {
            let mut r = FieldStream { bytes: bytes[..len].to_vec(), pos: 0 };
            assert!(load(&mut r, 4, Limits::NONE, Counts::Checked).is_err(), "length {len}");
        }
    }

    /// RedisBloom 2.8.2 stores `EXPANSION 4294967296` as a growth of 0 on a
    /// scaling filter. Such an RDB value is refused from a client (RESTORE)
    /// but loads from the server's own file, and the filter then works: it
    /// cannot scale, and says so.
    #[test]
    fn trusted_values_load_what_checked_ones_refuse() {
        let mut chain =
            Chain::new(ChainParams { capacity: 10, error: 0.01, expansion: 2, scaling: true }, Limits::NONE)
                .unwrap();
        for i in 0..10u32 {
            chain.add(&i.to_le_bytes(), Limits::NONE).unwrap();
        }
        let mut w = FieldStream::default();
        save(&chain, &mut w);
        // The growth field is the fourth unsigned: tag byte, then 8 bytes.
        let at = 3 * 9 + 1;
        w.bytes[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
        let read =
            |counts| load(&mut FieldStream { bytes: w.bytes.clone(), pos: 0 }, 4, Limits::NONE, counts);
        assert_eq!(read(Counts::Checked).err(), Some(BfError::BadData));
        let mut trusted = read(Counts::Trusted).unwrap();
        assert_eq!(trusted.growth(), 0);
        let full = (100..200u32).map(|i| trusted.add(&i.to_le_bytes(), Limits::NONE)).find(|r| r.is_err());
        assert_eq!(full, Some(Err(BfError::CannotScale)), "a growth of 0 cannot scale, and says so");
    }
}
