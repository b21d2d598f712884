//! The sketch's RDB value, RedisBloom's byte for byte, shared by the
//! module's loader, `RESTORE` payloads for AOF rewrites, and the fuzzers.
//!
//! - Encoding version 0 (RedisBloom 2.8 and 8.10): width, depth and total
//!   (unsigned), then the counters as one string of u32 little-endian.
//! - Encoding version 1 (Redis 8.12): width, depth, total, the cell size
//!   (unsigned), then the counters as one string of `width * depth` cells
//!   of that size, little-endian.
//!
//! Nothing decoded is trusted: the dimensions must be non-zero, the cell
//! size 1, 2, 4 or 8, the counters exactly `cell * width * depth` bytes, and
//! the size within the limit before the array is kept. What Redis 8.12
//! refuses is refused: a total above 2^63 - 1 (in version 1, and in
//! version 0 under its rules; 2.8 wrote such totals, so the older levels
//! take them), an 8-byte cell above 2^63 - 1.
//!
//! Which version is written follows the [`Rules`]: the older levels write
//! version 0 (4-byte cells, the only ones they hold: a version-1 sketch of
//! another size loads there as 4-byte cells), Redis 8.12's writes version
//! 1 for every sketch, as 8.12 does.

use super::cells::{CellSize, Cells};
use super::errors::CmsError;
use super::sketch::{array_bytes_of, CountMinSketch, OVERHEAD};
use super::{Rules, ENCODING_VERSION, ENCODING_VERSION_CELL_SIZE, TYPE_NAME};
use crate::common::dump::{own_type_id, PayloadWriter};
use crate::common::fields::{FieldReader, FieldWriter};
use crate::common::memory::Limits;

/// The largest total Redis 8.12 keeps (a RESP integer).
const MAX_TOTAL: u64 = i64::MAX as u64;

impl CountMinSketch {
    /// Writes the value at encoding version 0 (RedisBloom 2.8's rules).
    pub fn save(&self, w: &mut dyn FieldWriter) {
        self.save_with(w, Rules::Classic)
    }

    /// Writes the value at the encoding version of `rules`. Under
    /// [`Rules::Classic`] the counters are written as 4-byte cells whatever
    /// their size (which only a sketch built outside the module can have
    /// there: loading converts them).
    pub fn save_with(&self, w: &mut dyn FieldWriter, rules: Rules) {
        w.unsigned(self.width());
        w.unsigned(self.depth());
        w.unsigned(self.count());
        match rules {
            Rules::CellSized => {
                w.unsigned(self.cell_size().bytes());
                w.buffer(&self.counter_bytes());
            }
            Rules::Classic if self.cell_size() == CellSize::Four => w.buffer(&self.counter_bytes()),
            Rules::Classic => {
                let four: Vec<u8> = (0..self.cells())
                    .flat_map(|i| (self.cell(i).unwrap_or(0).min(u64::from(u32::MAX)) as u32).to_le_bytes())
                    .collect();
                w.buffer(&four);
            }
        }
    }

    /// Reads a value of encoding version 0 or 1 under RedisBloom 2.8's
    /// rules (see [`CountMinSketch::load_with`]).
    pub fn load(r: &mut dyn FieldReader, encver: i32, limits: Limits) -> Result<CountMinSketch, CmsError> {
        CountMinSketch::load_with(r, encver, limits, Rules::Classic)
    }

    /// Reads a value of encoding version 0 or 1, checked as the file says
    /// above. Under [`Rules::Classic`] a version-1 sketch of another cell
    /// size comes out in 4-byte cells (see
    /// [`CountMinSketch::into_four_byte_cells`]), so that what a level
    /// holds it can always save in the format its RedisBloom reads.
    pub fn load_with(
        r: &mut dyn FieldReader,
        encver: i32,
        limits: Limits,
        rules: Rules,
    ) -> Result<CountMinSketch, CmsError> {
        if encver != ENCODING_VERSION && encver != ENCODING_VERSION_CELL_SIZE {
            return Err(CmsError::BadData);
        }
        let width = r.unsigned()?;
        let depth = r.unsigned()?;
        let counter = r.unsigned()?;
        let cell = match encver {
            ENCODING_VERSION => CellSize::Four,
            _ => CellSize::from_bytes(r.unsigned()?).ok_or(CmsError::BadData)?,
        };
        if width == 0 || depth == 0 {
            return Err(CmsError::BadData);
        }
        if counter > MAX_TOTAL && (encver == ENCODING_VERSION_CELL_SIZE || rules == Rules::CellSized) {
            return Err(CmsError::BadData);
        }
        let bytes = array_bytes_of(width, depth, cell).ok_or(CmsError::BadData)?;
        // What the sketch will hold: 4-byte cells under the older rules.
        let kept = match rules {
            Rules::Classic => array_bytes_of(width, depth, CellSize::Four).ok_or(CmsError::BadData)?,
            Rules::CellSized => bytes,
        };
        limits.check(bytes.max(kept).saturating_add(OVERHEAD))?;
        let data = r.buffer()?;
        if data.len() as u64 != bytes {
            return Err(CmsError::BadData);
        }
        let cells = Cells::from_le_bytes(cell, &data)?;
        drop(data);
        if cell == CellSize::Eight && (0..cells.len()).any(|i| cells.get(i) > cell.max()) {
            return Err(CmsError::BadData);
        }
        let sketch = CountMinSketch::from_parts(width, depth, counter, cells)?;
        match rules {
            Rules::Classic => sketch.into_four_byte_cells(),
            Rules::CellSized => Ok(sketch),
        }
    }

    /// The `DUMP` payload of this sketch at encoding version 0.
    pub fn dump_payload(&self) -> Vec<u8> {
        self.dump_payload_with(Rules::Classic)
    }

    /// The `DUMP` payload of this sketch (uncompressed, RDB version 9) at
    /// the encoding version of `rules`: what an AOF rewrite emits as
    /// `RESTORE key 0 <payload>`, as RedisBloom does.
    pub fn dump_payload_with(&self, rules: Rules) -> Vec<u8> {
        let id = own_type_id(TYPE_NAME, rules.encoding_version());
        let mut w = PayloadWriter::new(id);
        self.save_with(&mut w, rules);
        w.finish()
    }
}

impl crate::common::value::FamilyValue for CountMinSketch {
    const TYPE_NAME: &'static str = super::TYPE_NAME;
    const ENCODING_VERSION: i32 = super::ENCODING_VERSION;
    type Error = CmsError;

    fn load(r: &mut dyn FieldReader, how: crate::common::value::Loading) -> Result<CountMinSketch, CmsError> {
        CountMinSketch::load(r, how.encver, how.limits)
    }
    fn save(&mut self, w: &mut dyn FieldWriter) {
        CountMinSketch::save(self, w)
    }
    fn size_bytes(&self) -> u64 {
        CountMinSketch::size_bytes(self)
    }
    fn try_clone(&self) -> Result<CountMinSketch, CmsError> {
        CountMinSketch::try_clone(self)
    }
    fn relocate(&mut self, from: usize, to: &mut impl crate::common::memory::Relocate) -> Option<usize> {
        CountMinSketch::relocate(self, from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cms::{CellSize, Dimensions};
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

    fn stream_v1(width: u64, depth: u64, counter: u64, cell: u64, data: &[u8]) -> FieldStream {
        let mut w = FieldStream::default();
        let f: &mut dyn FieldWriter = &mut w;
        f.unsigned(width);
        f.unsigned(depth);
        f.unsigned(counter);
        f.unsigned(cell);
        f.buffer(data);
        FieldStream { bytes: w.bytes, pos: 0 }
    }

    fn sized(cell: CellSize) -> CountMinSketch {
        let mut s =
            CountMinSketch::with_cell_size(Dimensions { width: 4, depth: 2 }, cell, Limits::NONE).unwrap();
        assert_eq!(s.add(b"foo", 3), Ok(3));
        assert_eq!(s.add(b"bar", 1), Ok(1));
        s
    }

    /// Redis 8.12's DUMP of `CMS.INITBYDIM k 4 2 CELL_SIZE n` after
    /// `CMS.INCRBY k foo 3 bar 1`, uncompressed, written out by hand: the
    /// type id of `CMSk-TYPE` at version 1, UINT width, depth, total and
    /// cell size, then the cells (foo's at 1 and 4 + 2, bar's at 3 and 4 + 1).
    #[test]
    fn version_1_payloads_are_redis_8_12s() {
        for cell in CellSize::ALL {
            let n = cell.bytes() as usize;
            let mut want = vec![0x07, 0x81, 0x08, 0xc4, 0xa4, 0xf9, 0x36, 0x0f, 0x10, 0x01];
            want.extend_from_slice(&[0x02, 4, 0x02, 2, 0x02, 4, 0x02, n as u8, 0x05]);
            // The string's length: 6 bits below 64, else 14 bits (0b01 first).
            if n < 8 {
                want.push(8 * n as u8);
            } else {
                want.extend_from_slice(&[0x40, 64]);
            }
            let mut cells = vec![0u8; 8 * n];
            for (at, v) in [(1, 3), (3, 1), (5, 1), (6, 3)] {
                cells[at * n] = v;
            }
            want.extend_from_slice(&cells);
            want.push(0x00);
            let s = sized(cell);
            assert_eq!((0..8).map(|i| s.cell(i).unwrap()).collect::<Vec<_>>(), [0, 3, 0, 1, 0, 1, 3, 0]);
            let ours = s.dump_payload_with(Rules::CellSized);
            assert_eq!(&ours[..ours.len() - 10], &want[..], "{cell:?}");
            let mut r = PayloadReader::new(&ours).unwrap();
            assert_eq!(r.type_id & 0x3ff, 1);
            let back = CountMinSketch::load_with(&mut r, 1, Limits::NONE, Rules::CellSized).unwrap();
            assert!(r.at_end());
            assert_eq!(back, s);
        }
    }

    #[test]
    fn version_1_round_trips_and_loads_at_the_older_levels_as_4_byte_cells() {
        for cell in CellSize::ALL {
            let s = sized(cell);
            let mut w = FieldStream::default();
            s.save_with(&mut w, Rules::CellSized);
            let bytes = w.bytes;
            let back = CountMinSketch::load_with(
                &mut FieldStream { bytes: bytes.clone(), pos: 0 },
                1,
                Limits::NONE,
                Rules::CellSized,
            )
            .unwrap();
            assert_eq!(back, s);
            let mut again = FieldStream::default();
            back.save_with(&mut again, Rules::CellSized);
            assert_eq!(again.bytes, bytes);
            // The older levels hold it in 4-byte cells and write version 0.
            let old = CountMinSketch::load_with(
                &mut FieldStream { bytes, pos: 0 },
                1,
                Limits::NONE,
                Rules::Classic,
            )
            .unwrap();
            assert_eq!(
                (old.cell_size(), old.query(b"foo"), old.query(b"bar"), old.count()),
                (CellSize::Four, 3, 1, 4)
            );
            let mut v0 = FieldStream::default();
            old.save_with(&mut v0, Rules::Classic);
            assert_eq!(v0.bytes, stream(4, 2, 4, &old.counter_bytes()).bytes);
        }
        // A 4-byte sketch under the older rules is version 0, as before.
        let s = vector_sketch();
        assert_eq!(s.dump_payload_with(Rules::Classic), s.dump_payload());
        assert_eq!(&s.dump_payload()[..10], &hex::decode("078108c4a4f9360f1000").unwrap()[..]);
        // And a version-0 value loads under 8.12's rules as 4-byte cells.
        let mut w = FieldStream::default();
        s.save(&mut w);
        let v0 = CountMinSketch::load_with(
            &mut FieldStream { bytes: w.bytes, pos: 0 },
            0,
            Limits::NONE,
            Rules::CellSized,
        )
        .unwrap();
        assert_eq!(v0, s);
    }

    #[test]
    fn version_1_refuses_what_redis_8_12_refuses() {
        let load = |mut s: FieldStream, rules| CountMinSketch::load_with(&mut s, 1, Limits::NONE, rules);
        for rules in [Rules::Classic, Rules::CellSized] {
            assert!(load(stream_v1(2, 2, 7, 1, &[0; 4]), rules).is_ok());
            for bad_cell in [0, 3, 5, 16, u64::MAX] {
                assert_eq!(load(stream_v1(2, 2, 7, bad_cell, &[0; 4]), rules), Err(CmsError::BadData));
            }
            assert_eq!(load(stream_v1(0, 2, 0, 1, &[]), rules), Err(CmsError::BadData));
            assert_eq!(load(stream_v1(2, 2, 0, 2, &[0; 7]), rules), Err(CmsError::BadData));
            assert_eq!(load(stream_v1(2, 2, 0, 2, &[0; 9]), rules), Err(CmsError::BadData));
            assert_eq!(
                load(stream_v1(2, 2, 1 << 63, 1, &[0; 4]), rules),
                Err(CmsError::BadData),
                "total past 2^63 - 1"
            );
            assert_eq!(load(stream_v1(u64::MAX, 2, 0, 8, &[]), rules), Err(CmsError::BadData));
            let mut big = [0u8; 8];
            big[7] = 0x80;
            assert_eq!(
                load(stream_v1(1, 1, 0, 8, &big), rules),
                Err(CmsError::BadData),
                "an 8-byte cell past 2^63 - 1"
            );
            big[7] = 0x7f;
            assert!(load(stream_v1(1, 1, 0, 8, &big), rules).is_ok());
            let whole = stream_v1(3, 2, 7, 2, &[1; 12]).bytes;
            for len in 0..whole.len() {
                assert!(
                    load(FieldStream { bytes: whole[..len].to_vec(), pos: 0 }, rules).is_err(),
                    "length {len}"
                );
            }
        }
        // A version-0 total past 2^63 - 1: 2.8 wrote such totals (it wraps at 2^64).
        let v0 =
            |rules| CountMinSketch::load_with(&mut stream(2, 2, 1 << 63, &[0; 16]), 0, Limits::NONE, rules);
        assert!(v0(Rules::Classic).is_ok());
        assert_eq!(v0(Rules::CellSized), Err(CmsError::BadData));
        // The limit is checked on what the level will hold: 1-byte cells
        // kept as 4-byte ones under the older rules.
        let limits = Limits::at_most(32 + 4000);
        let ok =
            CountMinSketch::load_with(&mut stream_v1(1000, 4, 0, 1, &[0; 4000]), 1, limits, Rules::CellSized);
        assert!(ok.is_ok());
        let old =
            CountMinSketch::load_with(&mut stream_v1(1000, 4, 0, 1, &[0; 4000]), 1, limits, Rules::Classic);
        assert!(matches!(old, Err(CmsError::TooLarge { .. })));
        for encver in [2, -1] {
            assert_eq!(
                load(stream_v1(2, 2, 7, 1, &[0; 4]), Rules::CellSized).map(|_| ()).and(
                    CountMinSketch::load_with(
                        &mut stream_v1(2, 2, 7, 1, &[0; 4]),
                        encver,
                        Limits::NONE,
                        Rules::CellSized
                    )
                    .map(|_| ())
                ),
                Err(CmsError::BadData)
            );
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
