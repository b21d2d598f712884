//! valkey-bloom's formats, byte for byte: the RDB value (`bloomfltr`,
//! encoding version 1) and the blob its AOF rewrite writes for `BF.LOAD`
//! (also its DUMP body). Everything is walked and checked, and its size
//! compared with the limit, before anything is allocated.

use super::object::*;
use super::*;
use crate::common::fields::{FieldReader, FieldWriter};
use crate::common::memory::{zeroed_bytes, Limits};

impl Object {
    /// Reads the RDB value valkey-bloom writes (also a DUMP payload's):
    /// `num_filters, expansion, fp_rate, tightening_ratio, is_seed_random`,
    /// then per sub-filter its serialized bytes and capacity, and the item
    /// count of the last one only (the others are full: items = capacity).
    pub fn load(r: &mut dyn FieldReader, encver: i32, limits: Limits) -> Result<Object, ValkeyError> {
        if !(0..=ENCODING_VERSION).contains(&encver) {
            return Err(bad("unknown encoding version"));
        }
        let nfilters = r.unsigned()?;
        let expansion = r.unsigned()?;
        let fp_rate = r.double()?;
        let tightening = r.double()?;
        let seed_random = match r.unsigned()? {
            0 => false,
            1 => true,
            _ => return Err(bad("is_seed_random is neither 0 nor 1")),
        };
        let expansion = Object::check_parameters(expansion, fp_rate, tightening)?;
        if nfilters == 0 {
            return Err(bad("an object has no sub-filters"));
        }
        if nfilters >= MAX_FILTERS {
            return Err(ValkeyError::MaxFilters);
        }
        let limit = object_limit(limits);
        // Room for the sub-filters the value claims, up to a few (a claim is
        // not trusted), then exactly as many as it held: a vector grown one
        // push at a time keeps room for four, 288 bytes more than one filter
        // takes.
        let mut filters: Vec<Filter> = Vec::new();
        filters.try_reserve_exact(nfilters.min(8) as usize).map_err(|_| ValkeyError::OutOfMemory)?;
        let mut data_bytes: u64 = 0;
        for i in 0..nfilters {
            let data = r.buffer()?;
            let capacity = r.unsigned()?;
            let items = if i + 1 == nfilters { r.unsigned()? } else { capacity };
            data_bytes =
                data_bytes.checked_add(FILTER_BYTES + bits_of(&data)).ok_or(bad("sizes overflow"))?;
            let size = accounted_size(grown_slots(i + 1), data_bytes).ok_or(bad("sizes overflow"))?;
            if limit.is_some_and(|l| size > l) {
                return Err(ValkeyError::MemoryLimit);
            }
            let filter = Filter::from_serialized(data, capacity, items)?;
            if !seed_random && filter.seed() != FIXED_SEED {
                return Err(bad("a fixed-seed object has a sub-filter with another seed"));
            }
            filters.try_reserve(1).map_err(|_| ValkeyError::OutOfMemory)?;
            filters.push(filter);
        }
        filters.shrink_to_fit();
        Ok(Object { expansion, fp_rate, tightening, seed_random, slots: grown_slots(nfilters), filters })
    }

    /// Writes the RDB value as valkey-bloom does.
    pub fn save(&self, w: &mut dyn FieldWriter) {
        w.unsigned(self.filters.len() as u64);
        w.unsigned(u64::from(self.expansion));
        w.double(self.fp_rate);
        w.double(self.tightening);
        w.unsigned(u64::from(self.seed_random));
        let last = self.filters.len() - 1;
        for (i, f) in self.filters.iter().enumerate() {
            w.buffer(&f.data);
            w.unsigned(f.capacity);
            if i == last {
                w.unsigned(f.items);
            }
        }
    }

    /// Reads a `BF.LOAD` blob: `0x01`, then bincode 1.x (little-endian,
    /// fixed-width) of `u32 expansion, f64 fp_rate, f64 tightening_ratio,
    /// bool is_seed_random, u64 count` and per sub-filter `u64 length,
    /// serialized filter, i64 items, i64 capacity`. The whole blob is walked
    /// and checked, and its size compared with the limit, before anything
    /// is allocated; valkey-bloom's errors come in its order.
    pub fn decode_blob(blob: &[u8], limits: Limits) -> Result<Object, ValkeyError> {
        let Some((&version, body)) = blob.split_first() else {
            return Err(ValkeyError::DecodeFailed);
        };
        if version != BLOB_VERSION {
            return Err(ValkeyError::UnsupportedVersion);
        }
        let mut r = Cursor(body);
        let expansion = u32::from_le_bytes(r.take()?);
        let fp_rate = f64::from_le_bytes(r.take()?);
        let tightening = f64::from_le_bytes(r.take()?);
        let seed_random = match r.take::<1>()? {
            [0] => false,
            [1] => true,
            _ => return Err(bad("is_seed_random is neither 0 nor 1")),
        };
        let count = u64::from_le_bytes(r.take()?);
        // First pass: the structure, without allocating.
        let start = r.0;
        let mut data_bytes: u64 = 0;
        for i in 0..count {
            let (data, items, capacity) = r.filter()?;
            parse_header(data)?;
            if items < 0 || capacity < 1 {
                return Err(bad("a sub-filter's item count is negative or its capacity below 1"));
            }
            // Only the newest sub-filter takes items: the others are full
            // (an RDB save stores no count for them, and they load full).
            if i + 1 < count && items != capacity {
                return Err(bad("a sub-filter other than the last is not full"));
            }
            data_bytes = data_bytes.checked_add(FILTER_BYTES + bits_of(data)).ok_or(bad("sizes overflow"))?;
        }
        let expansion = Object::check_parameters(u64::from(expansion), fp_rate, tightening)?;
        if count >= MAX_FILTERS {
            return Err(ValkeyError::MaxFilters);
        }
        if count == 0 {
            return Err(bad("an object has no sub-filters"));
        }
        let size = accounted_size(count, data_bytes).ok_or(bad("sizes overflow"))?;
        if object_limit(limits).is_some_and(|l| size > l) {
            return Err(ValkeyError::MemoryLimit);
        }
        // Second pass: the copy.
        let mut r = Cursor(start);
        let mut filters: Vec<Filter> = Vec::new();
        filters.try_reserve_exact(count as usize).map_err(|_| ValkeyError::OutOfMemory)?;
        for _ in 0..count {
            let (data, items, capacity) = r.filter()?;
            let mut copy = zeroed_bytes(data.len() as u64).map_err(|_| ValkeyError::OutOfMemory)?;
            copy.copy_from_slice(data);
            let f = Filter::from_serialized(copy, capacity as u64, items as u64)?;
            if !seed_random && f.seed() != FIXED_SEED {
                return Err(bad("a fixed-seed object has a sub-filter with another seed"));
            }
            filters.push(f);
        }
        Ok(Object { expansion, fp_rate, tightening, seed_random, slots: count, filters })
    }

    /// The `BF.LOAD` blob of this object (what valkey-bloom's AOF rewrite emits).
    pub fn encode_blob(&self) -> Result<Vec<u8>, ValkeyError> {
        let len = self
            .filters
            .iter()
            .try_fold(30usize, |n, f| n.checked_add(24 + f.data.len()))
            .ok_or(ValkeyError::OutOfMemory)?;
        let mut out = Vec::new();
        out.try_reserve_exact(len).map_err(|_| ValkeyError::OutOfMemory)?;
        out.push(BLOB_VERSION);
        out.extend_from_slice(&self.expansion.to_le_bytes());
        out.extend_from_slice(&self.fp_rate.to_le_bytes());
        out.extend_from_slice(&self.tightening.to_le_bytes());
        out.push(u8::from(self.seed_random));
        out.extend_from_slice(&(self.filters.len() as u64).to_le_bytes());
        for f in &self.filters {
            out.extend_from_slice(&(f.data.len() as u64).to_le_bytes());
            out.extend_from_slice(&f.data);
            out.extend_from_slice(&f.items.to_le_bytes());
            out.extend_from_slice(&f.capacity.to_le_bytes());
        }
        Ok(out)
    }
}

/// Reads of a `BF.LOAD` blob; running out is a decoding failure.
pub(super) struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    pub(super) fn take<const N: usize>(&mut self) -> Result<[u8; N], ValkeyError> {
        let (v, rest) = self.0.split_first_chunk::<N>().ok_or(bad("the blob is cut short"))?;
        self.0 = rest;
        Ok(*v)
    }

    pub(super) fn bytes(&mut self, len: u64) -> Result<&'a [u8], ValkeyError> {
        let len =
            usize::try_from(len).ok().filter(|l| *l <= self.0.len()).ok_or(bad("the blob is cut short"))?;
        let (v, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(v)
    }

    /// One sub-filter: its serialized bytes, item count and capacity.
    pub(super) fn filter(&mut self) -> Result<(&'a [u8], i64, i64), ValkeyError> {
        let len = u64::from_le_bytes(self.take()?);
        let data = self.bytes(len)?;
        let items = i64::from_le_bytes(self.take()?);
        let capacity = i64::from_le_bytes(self.take()?);
        Ok((data, items, capacity))
    }
}

impl crate::common::value::FamilyValue for Object {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const ENCODING_VERSION: i32 = ENCODING_VERSION;
    type Error = ValkeyError;

    fn load(r: &mut dyn FieldReader, how: crate::common::value::Loading) -> Result<Object, ValkeyError> {
        Object::load(r, how.encver, how.limits)
    }
    fn save(&mut self, w: &mut dyn FieldWriter) {
        Object::save(self, w)
    }
    fn size_bytes(&self) -> u64 {
        Object::size(self)
    }
    fn try_clone(&self) -> Result<Object, ValkeyError> {
        Object::try_clone(self)
    }
    fn relocate(&mut self, from: usize, to: &mut impl crate::common::memory::Relocate) -> Option<usize> {
        Object::relocate(self, from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vbloom::tests::object;

    #[test]
    fn blobs_round_trip_and_every_cut_is_refused() {
        let mut o = object(10, 0.01, 2);
        for i in 0..30u32 {
            o.add(&i.to_le_bytes(), Limits::NONE).unwrap();
        }
        let blob = o.encode_blob().unwrap();
        let back = Object::decode_blob(&blob, Limits::NONE).unwrap();
        assert_eq!(back.encode_blob().unwrap(), blob);
        for len in 0..blob.len() {
            assert!(Object::decode_blob(&blob[..len], Limits::NONE).is_err(), "cut to {len}");
        }
        assert_eq!(Object::decode_blob(&[], Limits::NONE).unwrap_err(), ValkeyError::DecodeFailed);
        assert_eq!(Object::decode_blob(&[2, 0], Limits::NONE).unwrap_err(), ValkeyError::UnsupportedVersion);
    }
}
