//! The cuckoo filter's formats, RedisBloom's byte for byte: the
//! `CF.SCANDUMP` header and chunks (`CF.LOADCHUNK`), and the RDB value
//! (every encoding version RedisBloom wrote), shared by the loader and the
//! fuzzers. Nothing decoded is trusted: sizes are checked before allocating.

use super::errors::CfError;
use super::filter::{CuckooFilter, Params, Shape, SubFilter};
use super::*;
use crate::common::fields::{FieldReader, FieldWriter};
use crate::common::memory::Limits;
use crate::common::MAX_CHUNK;

impl CuckooFilter {
    // ---- CF.SCANDUMP / CF.LOADCHUNK ----

    /// The header that `CF.SCANDUMP key 0` returns and `CF.LOADCHUNK key 1` accepts:
    /// items, buckets, deletes, filters (u64), bucket size, max iterations, expansion (u16).
    pub fn encode_header(&self) -> [u8; HEADER_LEN] {
        let s = self.shape();
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(&self.items.to_le_bytes());
        out[8..16].copy_from_slice(&s.buckets.to_le_bytes());
        out[16..24].copy_from_slice(&self.deletes.to_le_bytes());
        out[24..32].copy_from_slice(&(self.filters().len() as u64).to_le_bytes());
        out[32..34].copy_from_slice(&s.bucket_size.to_le_bytes());
        out[34..36].copy_from_slice(&s.max_iterations.to_le_bytes());
        out[36..38].copy_from_slice(&s.expansion.to_le_bytes());
        out
    }

    /// An empty filter of the shape a header describes (the data arrives in
    /// chunks); checked, and compared with the limit before allocating.
    pub fn from_header(buf: &[u8], limits: Limits) -> Result<CuckooFilter, CfError> {
        let buf: &[u8; HEADER_LEN] = buf.try_into().map_err(|_| CfError::InvalidHeader)?;
        let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
        let u16_at = |i: usize| u16::from_le_bytes(buf[i..i + 2].try_into().expect("2 bytes"));
        let filters = usize::try_from(u64_at(24)).unwrap_or(usize::MAX);
        let shape = Shape {
            buckets: u64_at(8),
            filters,
            bucket_size: u16_at(32),
            max_iterations: u16_at(34),
            expansion: u16_at(36),
        };
        // A shape 2.8.2 could not have written answers as it would refuse
        // it; one past the size limit too, with the reason after its words.
        // The item count is not held to the slots: a filter compacted after a
        // header-only load, or loaded from an RDB file, may hold such a count,
        // and its own header must load elsewhere (CF.LOADCHUNK, bloomkit copy).
        CuckooFilter::allocate(u64_at(0), u64_at(16), shape, limits).map_err(|e| match e {
            CfError::CannotSize => CfError::CannotCreate,
            CfError::TooLarge { bytes, limit } => CfError::HeaderTooLarge { bytes, limit },
            e => e,
        })
    }

    /// The reply to `CF.SCANDUMP key pos` for `pos >= 1`: the next position
    /// and a chunk, or `None` past the end. As in RedisBloom, a sub-filter no
    /// larger than [`MAX_CHUNK`] comes whole from its start, whatever `pos`
    /// falls inside it; a larger one in chunks from `pos`.
    pub fn chunk_at(&self, pos: i64) -> Option<(i64, &[u8])> {
        let mut offset = u64::try_from(pos.checked_sub(1)?).ok()?;
        for f in self.filters() {
            let size = f.bytes().len() as u64;
            if offset >= size {
                offset -= size;
                continue;
            }
            let (start, len) =
                if size <= MAX_CHUNK { (0, size) } else { (offset, (size - offset).min(MAX_CHUNK)) };
            let chunk = &f.bytes()[start as usize..(start + len) as usize];
            return Some((pos.saturating_add(len as i64), chunk));
        }
        None
    }

    /// `CF.LOADCHUNK key pos data` on an existing filter: copies `data` so that
    /// it ends just before `pos - 1` in the concatenated sub-filters. As in
    /// RedisBloom, an offset past the end lands in the last sub-filter at
    /// what is left of it; anything not fitting whole is refused.
    pub fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), CfError> {
        if data.is_empty() {
            return Err(CfError::BadChunk);
        }
        let mut offset = i128::from(pos) - data.len() as i128 - 1;
        let last = self.filters().len() - 1;
        let mut target = last;
        for (i, f) in self.filters().iter().enumerate() {
            let size = f.bytes().len() as i128;
            if offset < size {
                target = i;
                break;
            }
            offset -= size;
        }
        let f = &mut self.filters_mut()[target];
        let end = offset.checked_add(data.len() as i128).filter(|_| offset >= 0);
        match end {
            Some(end) if end <= f.bytes().len() as i128 => {
                f.bytes_mut()[offset as usize..end as usize].copy_from_slice(data);
                Ok(())
            }
            _ => Err(CfError::BadChunk),
        }
    }

    /// Every `(pos, chunk)` pair a full SCANDUMP returns after the header.
    pub fn chunks(&self) -> impl Iterator<Item = (i64, &[u8])> {
        let mut pos = 1i64;
        std::iter::from_fn(move || {
            let (next, data) = self.chunk_at(pos)?;
            pos = next;
            Some((next, data))
        })
    }

    // ---- RDB ----

    /// Writes the value at [`ENCODING_VERSION`]: filters, buckets, items,
    /// deletes, bucket size, max iterations, expansion, then per sub-filter
    /// its bucket count and its slots as one string.
    pub fn save(&self, w: &mut dyn FieldWriter) {
        let s = self.shape();
        w.unsigned(self.filters().len() as u64);
        w.unsigned(s.buckets);
        w.unsigned(self.items);
        w.unsigned(self.deletes);
        w.unsigned(u64::from(s.bucket_size));
        w.unsigned(u64::from(s.max_iterations));
        w.unsigned(u64::from(s.expansion));
        for f in self.filters().iter() {
            w.unsigned(f.buckets());
            w.buffer(f.bytes());
        }
    }

    /// Reads a value of encoding version 0 to 4 (before 4: no deletes and
    /// default bucket size, iterations and expansion; every sub-filter the
    /// size of the first). The shape is checked, and its size compared with
    /// the limit, before any sub-filter is read.
    pub fn load(r: &mut dyn FieldReader, encver: i32, limits: Limits) -> Result<CuckooFilter, CfError> {
        if !(0..=ENCODING_VERSION).contains(&encver) {
            return Err(CfError::BadData);
        }
        let narrow = |v: u64| u16::try_from(v).map_err(|_| CfError::BadData);
        let filters = usize::try_from(r.unsigned()?).map_err(|_| CfError::BadData)?;
        let buckets = r.unsigned()?;
        let items = r.unsigned()?;
        let (deletes, bucket_size, max_iterations, expansion) = if encver >= 4 {
            (r.unsigned()?, narrow(r.unsigned()?)?, narrow(r.unsigned()?)?, narrow(r.unsigned()?)?)
        } else {
            (0, DEFAULT_BUCKET_SIZE, DEFAULT_MAX_ITERATIONS, DEFAULT_EXPANSION)
        };
        let shape = Shape { buckets, filters, bucket_size, max_iterations, expansion };
        shape.validate().map_err(|_| CfError::BadData)?;
        // No check of the item count against the slots here, unlike a
        // header's: CF.COMPACT can free sub-filters a header-only load left
        // empty, so a running filter may hold such a count, and its RDB
        // value must load again.
        limits.check(shape.size_bytes()?)?;
        let mut subs = Vec::new();
        subs.try_reserve_exact(filters).map_err(|_| CfError::OutOfMemory)?;
        for i in 0..filters {
            let expected = if encver >= 4 { shape.sub_buckets(i)? } else { buckets };
            let sub_buckets = if encver >= 4 { r.unsigned()? } else { buckets };
            if sub_buckets != expected {
                return Err(CfError::BadData);
            }
            let data = r.buffer()?;
            subs.push(SubFilter::new(sub_buckets, bucket_size, data).ok_or(CfError::BadData)?);
        }
        Ok(CuckooFilter::assemble(items, deletes, Params::of(&shape), subs))
    }
}

impl crate::common::value::FamilyValue for CuckooFilter {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const ENCODING_VERSION: i32 = ENCODING_VERSION;
    type Error = CfError;

    fn load(r: &mut dyn FieldReader, how: crate::common::value::Loading) -> Result<CuckooFilter, CfError> {
        CuckooFilter::load(r, how.encver, how.limits)
    }
    fn save(&mut self, w: &mut dyn FieldWriter) {
        CuckooFilter::save(self, w)
    }
    fn size_bytes(&self) -> u64 {
        CuckooFilter::size_bytes(self)
    }
    fn try_clone(&self) -> Result<CuckooFilter, CfError> {
        CuckooFilter::try_clone(self)
    }
    fn relocate(&mut self, from: usize, to: &mut impl crate::common::memory::Relocate) -> Option<usize> {
        CuckooFilter::relocate(self, from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cf::filter::tests::{add, params, slots};
    use crate::common::fields::FieldStream;
    use crate::common::reply::ReplyError;

    #[test]
    fn scandump_round_trip_and_quirks() {
        let mut f = CuckooFilter::new(params(100, 2, 20, 2), Limits::NONE).unwrap();
        for i in 0..400u32 {
            add(&mut f, &i.to_le_bytes());
        }
        let mut copy = CuckooFilter::from_header(&f.encode_header(), Limits::NONE).unwrap();
        for (pos, data) in f.chunks() {
            copy.load_chunk(pos, data).unwrap();
        }
        assert_eq!(slots(&copy), slots(&f));
        // Inside a small sub-filter, SCANDUMP returns it whole from its start.
        let (next, data) = f.chunk_at(10).unwrap();
        assert_eq!((next, data.len()), (10 + 128, 128));
        assert_eq!(f.chunk_at(-1), None);
        // LOADCHUNK past the end lands in the last sub-filter.
        let total: usize = f.filters().iter().map(|s| s.bytes().len()).sum();
        assert!(copy.load_chunk(total as i64 + 3, b"zz").is_ok());
        assert_eq!(copy.load_chunk(2, b"zz").err(), Some(CfError::BadChunk));
        assert_eq!(copy.load_chunk(5, b"").err(), Some(CfError::BadChunk));
        assert_eq!(copy.load_chunk(i64::MIN, b"zz").err(), Some(CfError::BadChunk));
        assert_eq!(copy.load_chunk(i64::MAX, b"zz").err(), Some(CfError::BadChunk));
    }

    #[test]
    fn damaged_headers_are_refused() {
        let f = CuckooFilter::new(params(100, 2, 20, 1), Limits::NONE).unwrap();
        let header = f.encode_header();
        let with = |at: usize, bytes: &[u8]| {
            let mut h = header;
            h[at..at + bytes.len()].copy_from_slice(bytes);
            CuckooFilter::from_header(&h, Limits::NONE).err()
        };
        let cannot = Some(CfError::CannotCreate);
        assert_eq!(with(8, &7u64.to_le_bytes()), cannot, "buckets not a power of two");
        assert_eq!(with(8, &0u64.to_le_bytes()), cannot, "zero buckets");
        assert_eq!(with(24, &0u64.to_le_bytes()), cannot, "zero sub-filters");
        assert_eq!(with(32, &0u16.to_le_bytes()), cannot, "bucket size 0");
        assert_eq!(with(32, &256u16.to_le_bytes()), cannot, "bucket size 256");
        assert_eq!(with(34, &0u16.to_le_bytes()), cannot, "no iterations");
        assert_eq!(with(36, &3u16.to_le_bytes()), cannot, "expansion not a power of two");
        let mut h = header;
        h[24..32].copy_from_slice(&2u64.to_le_bytes());
        h[36..38].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(CuckooFilter::from_header(&h, Limits::NONE).err(), cannot, "expansion 0, two sub-filters");
        h[36..38].copy_from_slice(&32768u16.to_le_bytes());
        h[24..32].copy_from_slice(&60u64.to_le_bytes());
        assert_eq!(CuckooFilter::from_header(&h, Limits::NONE).err(), cannot, "size past 2^64");
        assert_eq!(
            CuckooFilter::from_header(&header[..37], Limits::NONE).err(),
            Some(CfError::InvalidHeader)
        );
        let limited = Limits::at_most(1 << 20);
        let mut h = header;
        h[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let refused = CuckooFilter::from_header(&h, limited).unwrap_err();
        assert!(matches!(refused, CfError::HeaderTooLarge { .. }));
        assert!(
            refused.message().starts_with("Couldn't create filter! The cuckoo filter would take"),
            "{refused}"
        );
    }

    fn saved(f: &CuckooFilter) -> Vec<u8> {
        let mut w = FieldStream::default();
        f.save(&mut w);
        w.bytes
    }

    #[test]
    fn rdb_round_trip_and_truncations() {
        let mut f = CuckooFilter::new(params(20, 2, 20, 2), Limits::NONE).unwrap();
        for i in 0..200u32 {
            add(&mut f, &i.to_le_bytes());
        }
        f.delete(&Lookup::new(&3u32.to_le_bytes()));
        let bytes = saved(&f);
        let loaded =
            CuckooFilter::load(&mut FieldStream { bytes: bytes.clone(), pos: 0 }, 4, Limits::NONE).unwrap();
        assert_eq!(saved(&loaded), bytes);
        for len in 0..bytes.len() {
            let mut r = FieldStream { bytes: bytes[..len].to_vec(), pos: 0 };
            assert!(CuckooFilter::load(&mut r, 4, Limits::NONE).is_err(), "length {len}");
        }
        assert!(CuckooFilter::load(&mut FieldStream { bytes, pos: 0 }, 5, Limits::NONE).is_err());
    }

    #[test]
    fn rdb_version_3_has_no_parameters() {
        let mut stream = FieldStream::default();
        let w: &mut dyn FieldWriter = &mut stream;
        for v in [2u64, 4, 7] {
            w.unsigned(v); // filters, buckets, items
        }
        w.buffer(&[0, 9, 0, 0, 0, 0, 0, 0]);
        w.buffer(&[0; 8]);
        let f =
            CuckooFilter::load(&mut FieldStream { bytes: stream.bytes, pos: 0 }, 3, Limits::NONE).unwrap();
        assert_eq!(
            f.debug_line(),
            "bktsize:2 buckets:4 items:7 deletes:0 filters:2 max_iterations:20 expansion:1"
        );
    }

    /// Found by cf_hostile and the cuckoo_codecs fuzzer: a header-only load
    /// then CF.COMPACT (which frees the sub-filters no chunk filled) leaves
    /// more items than slots. That filter's RDB value and its own SCANDUMP
    /// header must still load.
    #[test]
    fn a_compacted_header_only_filter_saves_and_loads() {
        let mut f = CuckooFilter::new(params(64, 2, 20, 2), Limits::NONE).unwrap();
        for i in 0..300u32 {
            add(&mut f, &i.to_le_bytes());
        }
        let mut loaded = CuckooFilter::from_header(&f.encode_header(), Limits::NONE).unwrap();
        loaded.compact(true);
        let slots: u64 =
            loaded.filters().iter().map(|f| f.buckets() * u64::from(loaded.shape().bucket_size)).sum();
        assert!(loaded.items() > slots, "the case this test is about");
        let bytes = saved(&loaded);
        let back =
            CuckooFilter::load(&mut FieldStream { bytes, pos: 0 }, ENCODING_VERSION, Limits::NONE).unwrap();
        assert_eq!(back.debug_line(), loaded.debug_line());
        // And its own header loads (found by the cuckoo_codecs fuzzer).
        assert!(CuckooFilter::from_header(&loaded.encode_header(), Limits::NONE).is_ok());
    }
}
