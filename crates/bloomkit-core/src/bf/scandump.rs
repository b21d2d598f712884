//! `BF.SCANDUMP` / `BF.LOADCHUNK`: RedisBloom's header and chunk stream.
//!
//! The header (iterator 0 → 1) is packed little-endian:
//! `items u64, nfilters u32, options u32, growth u32`, then per sub-filter
//! `bytes u64, bits u64, items u64, error f64, bpe f64, hashes u32, capacity u64, n2 u8`.
//! After it come the bit arrays in order, at most [`MAX_CHUNK`] bytes at a
//! time and never across a sub-filter; each chunk's iterator is one past its
//! end offset in the concatenated arrays.
//!
//! Decoding trusts nothing: every length, count and product is checked before
//! anything is allocated, and against the caller's size limit.

use super::chain::Chain;
use super::errors::BfError;
use super::sub_filter::{SubFilter, MAX_HASHES};
use crate::common::memory::{zeroed_bytes, Bound, Limits};
use crate::common::sizing::Shape;
use crate::common::MAX_CHUNK;

const HEADER_LEN: usize = 8 + 4 + 4 + 4;
const LINK_LEN: usize = 8 + 8 + 8 + 8 + 8 + 4 + 8 + 1;

/// The header that iterator 0 returns and `BF.LOADCHUNK key 1` accepts.
pub fn encode_header(chain: &Chain) -> Vec<u8> {
    let filters = chain.filters();
    let mut out = Vec::with_capacity(HEADER_LEN + LINK_LEN * filters.len());
    out.extend_from_slice(&chain.items().to_le_bytes());
    out.extend_from_slice(&(filters.len() as u32).to_le_bytes());
    out.extend_from_slice(&chain.options().to_le_bytes());
    out.extend_from_slice(&chain.growth().to_le_bytes());
    for f in filters {
        let s = &f.shape();
        out.extend_from_slice(&s.bytes.to_le_bytes());
        out.extend_from_slice(&s.bits.to_le_bytes());
        out.extend_from_slice(&f.items.to_le_bytes());
        out.extend_from_slice(&s.error.to_le_bytes());
        out.extend_from_slice(&s.bpe.to_le_bytes());
        out.extend_from_slice(&s.hashes.to_le_bytes());
        out.extend_from_slice(&s.capacity.to_le_bytes());
        out.push(s.n2);
    }
    out
}

/// Little-endian reads over a slice, failing on the first short read.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], BfError> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or(BfError::BadData)?;
        self.0 = rest;
        Ok(*head)
    }
    fn u8(&mut self) -> Result<u8, BfError> {
        Ok(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, BfError> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, BfError> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn f64(&mut self) -> Result<f64, BfError> {
        Ok(f64::from_le_bytes(self.take()?))
    }
}

/// What a header describes, checked, with nothing allocated for the bits.
#[derive(Debug)]
pub struct Header {
    pub items: u64,
    pub options: u32,
    pub growth: u32,
    /// Each sub-filter's shape and item count, in order.
    pub links: Vec<(Shape, u64)>,
}

impl Header {
    /// The filter's `Size` as `BF.INFO` reports it.
    pub fn size_bytes(&self) -> Option<u64> {
        let data = self.links.iter().try_fold(0u64, |total, (s, _)| total.checked_add(s.bytes))?;
        Chain::accounted_size(self.links.len() as u64, data)
    }
}

/// Parses and checks a header: lengths, counts and every sub-filter's shape.
pub fn parse_header(buf: &[u8]) -> Result<Header, BfError> {
    let mut r = Reader(buf);
    let items = r.u64()?;
    let nfilters = r.u32()?;
    let options = r.u32()?;
    let growth = r.u32()?;
    let expected_len =
        (nfilters as u64).checked_mul(LINK_LEN as u64).and_then(|links| links.checked_add(HEADER_LEN as u64));
    if expected_len != Some(buf.len() as u64) || nfilters == 0 {
        return Err(BfError::BadData);
    }
    // nfilters is bounded by the buffer's length, checked above.
    let mut links = Vec::with_capacity(nfilters as usize);
    for _ in 0..nfilters {
        let bytes = r.u64()?;
        let bits = r.u64()?;
        let link_items = r.u64()?;
        let error = r.f64()?;
        let bpe = r.f64()?;
        let hashes = r.u32()?;
        let capacity = r.u64()?;
        let n2 = r.u8()?;
        let shape = Shape { capacity, error, bpe, hashes, bits, bytes, n2 };
        validate_shape(&shape)?;
        links.push((shape, link_items));
    }
    super::chain::check_counts(items, options, growth, links.iter().map(|(s, n)| (s.capacity, *n)))?;
    let header = Header { items, options, growth, links };
    header.size_bytes().ok_or(BfError::BadData)?;
    Ok(header)
}

/// An empty chain of the shape a header describes (bits arrive in chunks).
pub fn decode_header(buf: &[u8], limits: Limits) -> Result<Chain, BfError> {
    let header = parse_header(buf)?;
    // Checked before any bit array is allocated, so that a header asking
    // for more than the limit costs nothing.
    let size = header.size_bytes().ok_or(BfError::BadData)?;
    limits.check(size).map_err(|e| match e.bound {
        Bound::Filter => BfError::HeaderTooLarge { bytes: e.bytes, limit: e.limit },
        Bound::Memory => BfError::OverMaxmemory,
    })?;
    let mut filters = Vec::new();
    filters.try_reserve_exact(header.links.len()).map_err(|_| BfError::OutOfMemory)?;
    for (shape, link_items) in header.links {
        let bits = zeroed_bytes(shape.bytes)?;
        filters.push(SubFilter::from_parts(shape, link_items, bits)?);
    }
    Chain::from_parts(header.items, header.options, header.growth, filters)
}

/// Checks of one sub-filter's shape, before anything is allocated (the same
/// as `SubFilter::from_parts`, which re-checks against the real array).
fn validate_shape(s: &Shape) -> Result<(), BfError> {
    let modulus_fits = if s.n2 > 0 {
        s.n2 <= 63 && (1u64 << s.n2) <= s.bytes.saturating_mul(8)
    } else {
        s.bits >= 1 && s.bits <= s.bytes.saturating_mul(8)
    };
    let valid = modulus_fits
        && s.bytes > 0
        && s.hashes >= 1
        && s.hashes <= MAX_HASHES
        && s.error > 0.0
        && s.error < 1.0
        && s.bpe > 0.0
        && s.capacity >= 1;
    if valid {
        Ok(())
    } else {
        Err(BfError::BadData)
    }
}

/// Where offset `pos` of the concatenated bit arrays falls: (sub-filter, offset in it).
/// `pos` is unsigned, as in RedisBloom, so that negative iterators find nothing.
fn locate(chain: &Chain, pos: u64) -> Option<(usize, u64)> {
    let mut start: u64 = 0;
    for (i, f) in chain.filters().iter().enumerate() {
        let end = start.saturating_add(f.shape().bytes);
        if pos < end {
            return Some((i, pos - start));
        }
        start = end;
    }
    None
}

/// The reply to `BF.SCANDUMP key iter` for `iter != 0`: the next iterator and
/// the chunk, or `(0, [])` once the arrays are exhausted.
pub fn chunk_at(chain: &Chain, iter: i64) -> (i64, &[u8]) {
    let Some((index, offset)) = locate(chain, (iter as u64).wrapping_sub(1)) else {
        return (0, &[]);
    };
    let bytes = chain.filters()[index].bytes();
    let len = (bytes.len() as u64 - offset).min(MAX_CHUNK);
    let start = offset as usize;
    (iter.wrapping_add(len as i64), &bytes[start..start + len as usize])
}

/// `BF.LOADCHUNK key iter data` on an existing chain: copies the chunk that
/// ends just before `iter` into place.
pub fn load_chunk(chain: &mut Chain, iter: i64, data: &[u8]) -> Result<(), BfError> {
    if iter <= 0 || (iter as u64) < data.len() as u64 {
        return Err(BfError::BadData);
    }
    let start = (iter as u64 - data.len() as u64).wrapping_sub(1);
    let (index, offset) = locate(chain, start).ok_or(BfError::NoLinkAtOffset)?;
    let target = chain.filters_mut()[index].bytes_mut();
    if data.len() as u64 > target.len() as u64 - offset {
        return Err(BfError::ChunkTooBig);
    }
    let offset = offset as usize;
    target[offset..offset + data.len()].copy_from_slice(data);
    Ok(())
}

/// Every `(iter, chunk)` pair a full SCANDUMP returns after the header.
pub fn chunks(chain: &Chain) -> impl Iterator<Item = (i64, &[u8])> {
    let mut iter = 1i64;
    std::iter::from_fn(move || {
        let (next, data) = chunk_at(chain, iter);
        iter = next;
        (next != 0).then_some((next, data))
    })
}

#[cfg(test)]
mod tests {
    use super::super::chain::ChainParams;
    use super::*;
    use crate::common::memory::Limits;
    use crate::common::reply::ReplyError;
    use crate::common::sizing::options;

    fn sample() -> Chain {
        let p = ChainParams { capacity: 10, error: 0.1, expansion: 3, scaling: true };
        let mut c = Chain::new(p, Limits::NONE).unwrap();
        for i in 0..100u32 {
            c.add(&i.to_le_bytes(), Limits::NONE).unwrap();
        }
        c
    }

    #[test]
    fn round_trip() {
        let c = sample();
        let header = encode_header(&c);
        let mut copy = decode_header(&header, Limits::NONE).unwrap();
        for (iter, data) in chunks(&c) {
            load_chunk(&mut copy, iter, data).unwrap();
        }
        assert_eq!(encode_header(&copy), header);
        for (a, b) in c.filters().iter().zip(copy.filters()) {
            assert_eq!(a.bytes(), b.bytes());
        }
    }

    #[test]
    fn every_truncation_of_a_header_is_refused() {
        let header = encode_header(&sample());
        for len in 0..header.len() {
            assert_eq!(decode_header(&header[..len], Limits::NONE).err(), Some(BfError::BadData));
        }
        let mut longer = header.clone();
        longer.push(0);
        assert!(decode_header(&longer, Limits::NONE).is_err());
    }

    #[test]
    fn header_limits_are_checked_before_allocation() {
        let mut header = encode_header(&sample());
        // bytes of the first sub-filter: 2^60
        header[20..28].copy_from_slice(&(1u64 << 60).to_le_bytes());
        let limits = Limits::at_most(1 << 30);
        let refused = decode_header(&header, limits).unwrap_err();
        assert!(matches!(refused, BfError::HeaderTooLarge { .. }));
        // RedisBloom's phrase first, then why.
        assert!(refused.message().starts_with("ERR received bad data: the filter would take"), "{refused}");
    }

    /// A header whose counts lie is refused before anything is allocated:
    /// options bits nobody defines, a total other than the sum of the
    /// sub-filters' counts, a sub-filter over its capacity, a growth of 0 on
    /// a scaling filter.
    #[test]
    fn headers_whose_counts_lie_are_refused() {
        let chain = sample();
        let good = encode_header(&chain);
        assert!(decode_header(&good, Limits::NONE).is_ok());
        let (items_at, options_at, growth_at) = (0..8, 12..16, 16..20);
        // First link: bytes, bits, then its item count at 20 + 16.
        let (link_items_at, link_capacity_at) = (36..44, 20 + 8 * 5 + 4..20 + 8 * 5 + 12);
        let capacity = u64::from_le_bytes(good[link_capacity_at.clone()].try_into().unwrap());
        let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
        let mut with = |what, range: std::ops::Range<usize>, value: &[u8]| {
            let mut h = good.clone();
            h[range].copy_from_slice(value);
            cases.push((what, h));
        };
        with("unknown options bit", options_at.clone(), &(options::DEFAULT | 16).to_le_bytes());
        with("total above the sum", items_at.clone(), &(chain.items() + 1).to_le_bytes());
        with("total of 2^32", items_at, &(1u64 << 32).to_le_bytes());
        with("growth 0 on a scaling filter", growth_at, &0u32.to_le_bytes());
        let mut over = good.clone();
        over[link_items_at.clone()].copy_from_slice(&(capacity + 1).to_le_bytes());
        over[0..8].copy_from_slice(&(capacity + 1 + chain.items() - chain.filters()[0].items).to_le_bytes());
        cases.push(("a sub-filter over its capacity", over));
        for (what, header) in cases {
            assert_eq!(decode_header(&header, Limits::NONE).err(), Some(BfError::BadData), "{what}");
        }
        // A non-scaling filter may have a growth of 0 (RedisBloom 8's EXPANSION 0).
        let mut h = good.clone();
        h[options_at].copy_from_slice(&(options::DEFAULT | options::NO_SCALING).to_le_bytes());
        h[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert!(decode_header(&h, Limits::NONE).is_ok());
    }
}
