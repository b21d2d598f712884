//! The sketch's RDB value, RedisBloom's byte for byte (encoding version 0,
//! the only one it wrote), shared by the module's loader, `RESTORE`
//! payloads for AOF rewrites, and the fuzzers. Nothing decoded is trusted:
//! the dimensions must be non-zero, the counters exactly `4 * width * depth`
//! bytes, and the size within the limit before the array is kept.

use super::errors::CmsError;
use super::sketch::{array_bytes, CountMinSketch, OVERHEAD};
use super::{ENCODING_VERSION, TYPE_NAME};
use crate::common::dump::{own_type_id, PayloadWriter};
use crate::common::fields::{FieldReader, FieldWriter};
use crate::common::memory::Limits;

impl CountMinSketch {
    /// Writes width, depth and total (unsigned), then the counters as one
    /// string of u32 little-endian.
    pub fn save(&self, w: &mut dyn FieldWriter) {
        w.unsigned(self.width());
        w.unsigned(self.depth());
        w.unsigned(self.count());
        w.buffer(&self.counter_bytes());
    }

    /// Reads a value of [`ENCODING_VERSION`]. The dimensions are checked and
    /// the size compared with `limits` before the counters are read.
    pub fn load(r: &mut dyn FieldReader, encver: i32, limits: Limits) -> Result<CountMinSketch, CmsError> {
        if encver != ENCODING_VERSION {
            return Err(CmsError::BadData);
        }
        let width = r.unsigned()?;
        let depth = r.unsigned()?;
        let counter = r.unsigned()?;
        if width == 0 || depth == 0 {
            return Err(CmsError::BadData);
        }
        let bytes = array_bytes(width, depth).ok_or(CmsError::BadData)?;
        limits.check(bytes.saturating_add(OVERHEAD))?;
        let data = r.buffer()?;
        if data.len() as u64 != bytes {
            return Err(CmsError::BadData);
        }
        let mut counters = Vec::new();
        counters.try_reserve_exact(data.len() / 4).map_err(|_| CmsError::InsufficientMemory)?;
        counters.extend(data.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))));
        drop(data);
        CountMinSketch::from_parts(width, depth, counter, counters)
    }

    /// The `DUMP` payload of this sketch (uncompressed, RDB version 9):
    /// what an AOF rewrite emits as `RESTORE key 0 <payload>`, as RedisBloom does.
    pub fn dump_payload(&self) -> Vec<u8> {
        let id = own_type_id(TYPE_NAME, ENCODING_VERSION);
        let mut w = PayloadWriter::new(id);
        self.save(&mut w);
        w.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cms::Dimensions;
    use crate::common::dump::PayloadReader;
    use crate::common::fields::FieldStream;

    /// `CMS.INITBYDIM cms 8 2; CMS.INCRBY cms foo 3 bar 1; DUMP cms` on
    /// RedisBloom 2.8.2 (redis 7.0.15, rdbcompression yes).
    const DUMP_VECTOR: &str = "078108c4a4f9360f100002080202020405c3174040010000e009000003a0120001e0\
                               0207c013e00500010000000a0020a5dc2557776228";

    fn vector_sketch() -> CountMinSketch {
        let mut s = CountMinSketch::new(Dimensions { width: 8, depth: 2 }, Limits::NONE).unwrap();
        assert_eq!([s.increment(b"foo", 3), s.increment(b"bar", 1)], [3, 1]);
        s
    }

    #[test]
    fn redisbloom_dump_vector_decodes_to_the_same_sketch() {
        let payload = hex::decode(DUMP_VECTOR).unwrap();
        let mut r = PayloadReader::new(&payload).unwrap();
        assert_eq!(r.type_id, 0x08c4a4f9360f1000);
        let loaded = CountMinSketch::load(&mut r, 0, Limits::NONE).unwrap();
        assert!(r.at_end());
        assert_eq!(loaded, vector_sketch());
        assert_eq!((loaded.width(), loaded.depth(), loaded.count()), (8, 2, 4));
    }

    #[test]
    fn our_payload_encodes_the_same_fields() {
        let ours = vector_sketch().dump_payload();
        // Uncompressed: the fields RedisBloom saves, in its order.
        let mut want = hex::decode("078108c4a4f9360f1000020802020204054040").unwrap();
        want.extend_from_slice(&vector_sketch().counter_bytes());
        want.push(0);
        assert_eq!(&ours[..ours.len() - 10], &want[..]);
        let back = CountMinSketch::load(&mut PayloadReader::new(&ours).unwrap(), 0, Limits::NONE).unwrap();
        assert_eq!(back, vector_sketch());
    }

    fn stream(width: u64, depth: u64, counter: u64, data: &[u8]) -> FieldStream {
        let mut w = FieldStream::default();
        let f: &mut dyn FieldWriter = &mut w;
        f.unsigned(width);
        f.unsigned(depth);
        f.unsigned(counter);
        f.buffer(data);
        FieldStream { bytes: w.bytes, pos: 0 }
    }

    #[test]
    fn damaged_values_are_refused() {
        let load = |mut s: FieldStream| CountMinSketch::load(&mut s, 0, Limits::NONE);
        assert!(load(stream(2, 2, 0, &[0; 16])).is_ok());
        assert_eq!(load(stream(0, 2, 0, &[])), Err(CmsError::BadData));
        assert_eq!(load(stream(2, 0, 0, &[])), Err(CmsError::BadData));
        assert_eq!(load(stream(2, 2, 0, &[0; 15])), Err(CmsError::BadData));
        assert_eq!(load(stream(2, 2, 0, &[0; 17])), Err(CmsError::BadData));
        assert_eq!(load(stream(u64::MAX, 2, 0, &[])), Err(CmsError::BadData));
        assert_eq!(load(stream(1 << 62, 1, 0, &[])), Err(CmsError::BadData));
        assert!(matches!(
            CountMinSketch::load(&mut stream(1 << 30, 4, 0, &[]), 0, Limits::at_most(1 << 20)),
            Err(CmsError::TooLarge { .. })
        ));
        assert_eq!(
            CountMinSketch::load(&mut stream(2, 2, 0, &[0; 16]), 1, Limits::NONE),
            Err(CmsError::BadData)
        );
        let whole = stream(3, 2, 7, &[1; 24]).bytes;
        for len in 0..whole.len() {
            let mut r = FieldStream { bytes: whole[..len].to_vec(), pos: 0 };
            assert!(CountMinSketch::load(&mut r, 0, Limits::NONE).is_err(), "length {len}");
        }
    }

    #[test]
    fn save_load_round_trip() {
        let mut s = CountMinSketch::new(Dimensions { width: 300, depth: 5 }, Limits::NONE).unwrap();
        for i in 0..1000u32 {
            s.increment(&i.to_le_bytes(), u64::from(i % 7));
        }
        let mut w = FieldStream::default();
        s.save(&mut w);
        let back =
            CountMinSketch::load(&mut FieldStream { bytes: w.bytes, pos: 0 }, 0, Limits::NONE).unwrap();
        assert_eq!(back, s);
    }
}
