//! The RDB value of a Top-K sketch (`TopK-TYPE`, encoding version 0), as
//! RedisBloom 2.8.2 writes it, and DUMP payloads of it.
//!
//! Fields, in order: k, width, depth (unsigned), decay (double), the buckets
//! as one string (`width x depth` entries of `{fp u32, count u32}`, little
//! endian, row-major), the heap as one string (`k` slots of 24 bytes:
//! `{fp u32, itemlen u32, item pointer 8 bytes, count u32, padding 4}`),
//! then one string per slot: its item and a NUL (just a NUL for an empty
//! slot).
//!
//! RedisBloom writes live addresses in the pointer bytes and never reads
//! them. bloomkit writes zeros there, except in slot 0, whose pointer bytes
//! carry the sketch's draw counter (see [`super::sketch`]); on load the
//! counter is read back from slot 0's pointer bytes, whatever wrote them.
//!
//! Items are written whole (2.8.2 cuts them at their first NUL, which its
//! own loader reads back wrongly); RedisBloom's loader takes the length from
//! the heap string and reads ours right. A value from 2.8.2 whose stored
//! item is shorter than its heap length (an item cut at a NUL) loads as the
//! stored text, as RedisBloom 8 loads it: the lost bytes cannot come back.
//! A slot no writer makes (a text longer than the heap's length, one cut
//! anywhere but before a NUL, an empty slot with a length) is refused: each
//! would load as a sketch that saves differently (see [`canonical_slot`]).

use super::errors::TopkError;
use super::sketch::{allocate, Bucket, Slot, TopK, TopkParams};
use super::*;
use crate::common::dump::{own_type_id, PayloadReader, PayloadWriter};
use crate::common::fields::{FieldReader, FieldWriter};
use crate::common::memory::Limits;

/// The module id of `TopK-TYPE` at encoding 0.
pub const MODULE_ID: u64 = own_type_id(TYPE_NAME, ENCODING_VERSION);

impl TopK {
    /// Writes the value at [`ENCODING_VERSION`].
    pub fn save(&self, w: &mut dyn FieldWriter) {
        w.unsigned(u64::from(self.k));
        w.unsigned(u64::from(self.width));
        w.unsigned(u64::from(self.depth));
        w.double(self.decay);
        let mut buckets = Vec::with_capacity(self.buckets.len() * 8);
        for b in &self.buckets {
            buckets.extend_from_slice(&b.fp.to_le_bytes());
            buckets.extend_from_slice(&b.count.to_le_bytes());
        }
        w.buffer(&buckets);
        drop(buckets);
        let mut heap = Vec::with_capacity(self.heap.len() * SLOT_BYTES as usize);
        for (i, s) in self.heap.iter().enumerate() {
            heap.extend_from_slice(&s.fp.to_le_bytes());
            heap.extend_from_slice(&(s.bytes().len() as u32).to_le_bytes());
            heap.extend_from_slice(&(if i == 0 { self.draws } else { 0 }).to_le_bytes());
            heap.extend_from_slice(&s.count.to_le_bytes());
            heap.extend_from_slice(&[0; 4]);
        }
        w.buffer(&heap);
        drop(heap);
        let mut item = Vec::new();
        for s in &self.heap {
            item.clear();
            item.extend_from_slice(s.bytes());
            item.push(0);
            w.buffer(&item);
        }
    }

    /// Reads a value of encoding version 0. The parameters are checked, and
    /// the size compared with the limit, before anything is allocated; the
    /// bucket and heap strings must be exactly `8 x width x depth` and
    /// `24 x k` bytes (RedisBloom 2.8.20's checks; 2.8.2 asserts).
    pub fn load(r: &mut dyn FieldReader, encver: i32, limits: Limits) -> Result<TopK, TopkError> {
        if encver != ENCODING_VERSION {
            return Err(TopkError::BadData);
        }
        let narrow = |v: u64| match u32::try_from(v) {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(TopkError::BadData),
        };
        let k = narrow(r.unsigned()?)?;
        let width = narrow(r.unsigned()?)?;
        let depth = narrow(r.unsigned()?)?;
        let decay = r.double()?;
        if !(decay > 0.0 && decay <= 1.0) {
            return Err(TopkError::BadData);
        }
        let params = TopkParams { k, width, depth, decay };
        limits.check(params.size_bytes().ok_or(TopkError::BadData)?)?;
        let raw_buckets = r.buffer()?;
        if raw_buckets.len() as u64 != u64::from(width) * u64::from(depth) * BUCKET_BYTES {
            return Err(TopkError::BadData);
        }
        let raw_heap = r.buffer()?;
        if raw_heap.len() as u64 != u64::from(k) * SLOT_BYTES {
            return Err(TopkError::BadData);
        }
        let (mut buckets, mut heap) = allocate(k, width, depth)?;
        let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        for (b, raw) in buckets.iter_mut().zip(raw_buckets.chunks_exact(8)) {
            *b = Bucket { fp: u32_at(raw, 0), count: u32_at(raw, 4) };
        }
        drop(raw_buckets);
        let draws = u64::from_le_bytes(raw_heap[8..16].try_into().expect("8 bytes"));
        for (slot, raw) in heap.iter_mut().zip(raw_heap.chunks_exact(SLOT_BYTES as usize)) {
            let (fp, itemlen, count) = (u32_at(raw, 0), u32_at(raw, 4), u32_at(raw, 16));
            let stored = r.buffer()?;
            let item: &[u8] = match stored.split_last() {
                Some((0, text)) => text,
                None => &[],
                // Every writer ends the string with a NUL.
                Some(_) => return Err(TopkError::BadData),
            };
            // A slot never filled is all zeros with an empty string. Any
            // other slot holds an item, the empty string included (its
            // fingerprint is not 0). The item is the stored text even when
            // the heap's length says otherwise (2.8.2 cut items at a NUL).
            if !canonical_slot(fp, itemlen, count, item) {
                return Err(TopkError::BadData);
            }
            let empty = fp == 0 && count == 0 && item.is_empty();
            *slot = Slot { fp, count, item: (!empty).then(|| item.into()) };
        }
        Ok(TopK::assemble(TopkParams { k, width, depth, decay }, buckets, heap, draws))
    }

    /// The value as a `DUMP` payload (RDB version 9, which every server
    /// that loads module values reads): what the AOF rewrite sends as
    /// `RESTORE key 0 <payload>`, as RedisBloom's does.
    pub fn dump_payload(&self) -> Vec<u8> {
        let mut w = PayloadWriter::new(MODULE_ID);
        self.save(&mut w);
        w.finish()
    }

    /// Reads a `DUMP` payload of a `TopK-TYPE` value, its CRC checked.
    pub fn from_payload(payload: &[u8], limits: Limits) -> Result<TopK, TopkError> {
        let mut r = PayloadReader::new(payload)?;
        if r.type_id != MODULE_ID {
            return Err(TopkError::BadData);
        }
        let t = TopK::load(&mut r, ENCODING_VERSION, limits)?;
        if !r.at_end() {
            return Err(TopkError::BadData);
        }
        Ok(t)
    }
}

/// Whether a heap slot as stored is one some writer makes, so that what
/// loads saves back to the same slot (load, save and load give the same
/// sketch):
/// - the stored text is at most the heap's length: bloomkit and RedisBloom 8
///   write `itemlen` bytes; 2.8.2 writes the item up to its first NUL, so a
///   shorter text holds no NUL (the item was cut just before one);
/// - fingerprint 0, count 0 and an empty text is an empty slot, and an
///   empty slot has length 0: with another length it would load as an
///   empty-string item, which saves as an empty slot (its length is the
///   text's), so the copy would answer otherwise (`TOPK.ADD` expelling a
///   phantom `""` from one, nothing from the other).
fn canonical_slot(fp: u32, itemlen: u32, count: u32, text: &[u8]) -> bool {
    let stored = text.len() as u64;
    let fits = match stored.cmp(&u64::from(itemlen)) {
        std::cmp::Ordering::Equal => true,
        std::cmp::Ordering::Less => !text.contains(&0),
        std::cmp::Ordering::Greater => false,
    };
    let empty_looking = fp == 0 && count == 0 && text.is_empty();
    fits && !(empty_looking && itemlen != 0)
}

impl crate::common::value::FamilyValue for TopK {
    const TYPE_NAME: &'static str = super::TYPE_NAME;
    const ENCODING_VERSION: i32 = super::ENCODING_VERSION;
    type Error = TopkError;

    fn load(r: &mut dyn FieldReader, how: crate::common::value::Loading) -> Result<TopK, TopkError> {
        TopK::load(r, how.encver, how.limits)
    }
    fn save(&mut self, w: &mut dyn FieldWriter) {
        TopK::save(self, w)
    }
    fn size_bytes(&self) -> u64 {
        TopK::size_bytes(self)
    }
    fn try_clone(&self) -> Result<TopK, TopkError> {
        TopK::try_clone(self)
    }
    fn relocate(&mut self, from: usize, to: &mut impl crate::common::memory::Relocate) -> Option<usize> {
        TopK::relocate(self, from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::fields::FieldStream;
    use crate::topk::sketch::fingerprint;
    use crate::topk::sketch::tests::sketch;

    /// RedisBloom 2.8.2's DUMP of `TOPK.RESERVE tk 2 8 2 0.9; TOPK.ADD tk a b a`.
    const VECTOR: &str = "07814e8a4af9360f100002020208020204cdccccccccccec3f05c3274080010000e015000497eddf2a01e002220417f53cf202e0020fc000e00727c000e00f2f800001000005c327300f97eddf2a01000000687727bd097f0000400b40000317f53cf2400b01787a80170002401420000502620005026100000a002056ccf039905a6e";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn redisbloom_dump_vector_decodes() {
        let t = TopK::from_payload(&hex(VECTOR), Limits::NONE).unwrap();
        assert_eq!(t.params(), TopkParams { k: 2, width: 8, depth: 2, decay: 0.9 });
        let (a, b) = (fingerprint(b"a"), fingerprint(b"b"));
        assert_eq!(t.buckets[6], Bucket { fp: a, count: 2 });
        assert_eq!(t.buckets[12], Bucket { fp: a, count: 2 });
        assert_eq!(t.buckets[4], Bucket { fp: b, count: 1 });
        assert_eq!(t.buckets[9], Bucket { fp: b, count: 1 });
        assert_eq!(t.buckets.iter().filter(|b| b.count > 0).count(), 4);
        assert_eq!(t.heap[0], Slot { fp: b, count: 1, item: Some(b"b".as_slice().into()) });
        assert_eq!(t.heap[1], Slot { fp: a, count: 2, item: Some(b"a".as_slice().into()) });
        // The decay table is filled on load (2.8.2 leaves it zero).
        assert_eq!(t.table[1], 0.9);
        // The same stream here gives the same fields (pointer bytes aside).
        let mut ours = sketch(2, 8, 2, 0.9);
        for item in ["a", "b", "a"] {
            ours.add(item.as_bytes(), 1);
        }
        assert_eq!((&ours.buckets, &ours.heap), (&t.buckets, &t.heap));
        // Ours encodes, and decodes back to the same sketch.
        let back = TopK::from_payload(&ours.dump_payload(), Limits::NONE).unwrap();
        assert_eq!((&back.buckets, &back.heap, back.draws), (&ours.buckets, &ours.heap, ours.draws));
    }

    fn saved(t: &TopK) -> Vec<u8> {
        let mut w = FieldStream::default();
        t.save(&mut w);
        w.bytes
    }

    fn header(k: u64, w: u64, d: u64, decay: f64) -> Vec<u8> {
        let mut s = FieldStream::default();
        FieldWriter::unsigned(&mut s, k);
        FieldWriter::unsigned(&mut s, w);
        FieldWriter::unsigned(&mut s, d);
        FieldWriter::double(&mut s, decay);
        s.bytes
    }

    fn loaded(bytes: Vec<u8>, limits: Limits) -> Result<TopK, TopkError> {
        TopK::load(&mut FieldStream { bytes, pos: 0 }, 0, limits)
    }

    #[test]
    fn binary_and_empty_items_survive_a_round_trip() {
        let mut t = sketch(5, 16, 3, 0.8);
        for item in [&b"a\0b"[..], b"", b"x", b"a\0b", b"\0"] {
            t.add(item, 2);
        }
        let back = loaded(saved(&t), Limits::NONE).unwrap();
        assert_eq!(back.heap, t.heap);
        assert_eq!(back.buckets, t.buckets);
        assert_eq!(back.draws, t.draws);
        assert!(back.query(b"a\0b") && back.query(b"") && back.query(b"\0") && !back.query(b"a"));
        let empty = back.heap.iter().filter(|s| s.item.as_deref() == Some(&[][..])).count();
        assert_eq!(empty, 1, "the empty-string item stays an item");
        assert!(back.heap.iter().any(|s| s.item.is_none()), "the never-filled slot stays empty");
    }

    #[test]
    fn a_cut_item_from_2_8_2_loads_as_its_stored_text() {
        let mut t = sketch(1, 8, 1, 1.0);
        t.add(b"ab\0cd", 1);
        let mut w = FieldStream::default();
        // As 2.8.2 writes it: the heap says 5 bytes, the string holds "ab\0".
        let mut bytes = saved(&t);
        let cut = bytes.len() - 9 - 6;
        bytes.truncate(cut);
        w.bytes = bytes;
        FieldWriter::buffer(&mut w, b"ab\0");
        let back = loaded(w.bytes, Limits::NONE).unwrap();
        // RedisBloom 8's reading: the stored text, with the fingerprint of
        // the whole item, so LIST shows it and no query matches it.
        assert_eq!(back.heap[0].bytes(), b"ab");
        assert_eq!(back.list().len(), 1);
        assert!(!back.query(b"ab") && !back.query(b"ab\0cd"));
    }

    #[test]
    fn damaged_values_are_refused() {
        let t = sketch(2, 4, 2, 0.5);
        let good = saved(&t);
        assert!(loaded(good.clone(), Limits::NONE).is_ok());
        for len in 0..good.len() {
            assert!(loaded(good[..len].to_vec(), Limits::NONE).is_err(), "cut at {len}");
        }
        for (k, w, d, decay) in [
            (0, 4, 2, 0.5),
            (2, 0, 2, 0.5),
            (2, 4, 0, 0.5),
            (1 << 32, 4, 2, 0.5),
            (2, 4, 2, 0.0),
            (2, 4, 2, 1.5),
            (2, 4, 2, f64::NAN),
            // Blob sizes must be exact.
            (2, 4, 3, 0.5),
            (3, 4, 2, 0.5),
        ] {
            let mut bytes = header(k, w, d, decay);
            bytes.extend_from_slice(&good[36..]);
            assert_eq!(loaded(bytes, Limits::NONE).err(), Some(TopkError::BadData), "{k} {w} {d} {decay}");
        }
        // The limit is checked before the blobs are read.
        let max = u64::from(u32::MAX);
        assert!(matches!(
            loaded(header(max, max, 1, 0.5), Limits::at_most(1 << 30)),
            Err(TopkError::TooLarge { .. })
        ));
        assert!(loaded(good, Limits::at_most(100)).is_err());
        // A wrong encoding version.
        assert!(TopK::load(&mut FieldStream { bytes: saved(&t), pos: 0 }, 1, Limits::NONE).is_err());
    }

    /// What a loaded sketch must do: save to fields that load to the same
    /// sketch (draw counter included), which saves to the same fields.
    fn assert_round_trips(t: &TopK) {
        let bytes = saved(t);
        let back = loaded(bytes.clone(), Limits::NONE).expect("a loaded sketch's save loads");
        assert_eq!(back.params(), t.params());
        assert_eq!((&back.buckets, &back.heap, back.draws), (&t.buckets, &t.heap, t.draws));
        assert_eq!(saved(&back), bytes);
    }

    /// Where slot `i`'s 24 bytes start in a sketch's saved fields.
    fn slot_at(t: &TopK, i: usize) -> usize {
        36 + 9 + t.buckets.len() * 8 + 9 + 24 * i
    }

    fn set_itemlen(bytes: &mut [u8], at: usize, len: u32) {
        bytes[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
    }

    /// Issue 31: an empty slot (fingerprint 0, count 0, empty text) with a
    /// non-zero length loaded as an empty-string item, which saves as an
    /// empty slot: the sketch's `TOPK.ADD` then expelled a phantom `""`
    /// where its copy expelled nothing. Refused now.
    #[test]
    fn an_empty_slot_with_a_length_is_refused() {
        let mut t = sketch(3, 8, 2, 1.0);
        t.add(b"x", 1);
        assert!(t.heap[2].item.is_none(), "slot 2 is empty");
        let mut bytes = saved(&t);
        set_itemlen(&mut bytes, slot_at(&t, 2), 5);
        assert_eq!(loaded(bytes, Limits::NONE).err(), Some(TopkError::BadData));
        // An empty slot as RedisBloom 8.9 may write it, with no string at
        // all, loads as an empty slot.
        let mut w = FieldStream::default();
        let good = saved(&t);
        let last = good.len() - 10;
        w.bytes = good[..last].to_vec();
        FieldWriter::buffer(&mut w, b"");
        let back = loaded(w.bytes, Limits::NONE).unwrap();
        assert_eq!(back.heap, t.heap);
        assert_round_trips(&back);
    }

    /// No writer stores more text than the heap's length, or cuts an item
    /// anywhere but just before its first NUL (2.8.2): such slots are
    /// refused. What 2.8.2 writes still loads and round-trips, an item cut
    /// to nothing included.
    #[test]
    fn item_lengths_must_match_a_writer() {
        let mut t = sketch(2, 8, 1, 1.0);
        t.add(b"abc", 2);
        let at = slot_at(&t, t.heap.iter().position(|s| s.bytes() == b"abc").unwrap());
        let mut bytes = saved(&t);
        set_itemlen(&mut bytes, at, 2);
        assert_eq!(loaded(bytes, Limits::NONE).err(), Some(TopkError::BadData), "text past the length");
        let mut t = sketch(1, 8, 1, 1.0);
        t.add(b"a\0b", 1);
        let mut bytes = saved(&t);
        set_itemlen(&mut bytes, slot_at(&t, 0), 5);
        assert_eq!(loaded(bytes, Limits::NONE).err(), Some(TopkError::BadData), "cut after a NUL");
        // 2.8.2's writing of "\0xy": the heap says 3 bytes, the string is a NUL.
        let mut t = sketch(1, 8, 1, 1.0);
        t.add(b"\0xy", 1);
        let mut bytes = saved(&t);
        let cut = bytes.len() - 9 - 4;
        bytes.truncate(cut);
        let mut w = FieldStream { bytes, pos: 0 };
        FieldWriter::buffer(&mut w, b"\0");
        let back = loaded(w.bytes, Limits::NONE).unwrap();
        assert_eq!(back.heap[0].item.as_deref(), Some(&b""[..]));
        assert_eq!(back.heap[0].fp, fingerprint(b"\0xy"));
        assert_round_trips(&back);
    }

    /// Every one-byte change of a saved sketch (a few values at every
    /// position) is refused or loads to a sketch that round-trips.
    #[test]
    fn whatever_loads_round_trips() {
        let mut t = sketch(6, 4, 2, 0.9);
        for item in [&b"a"[..], b"", b"a\0b", b"zz"] {
            t.add(item, 1);
        }
        t.add(b"a", 3);
        assert!(t.heap.iter().any(|s| s.item.is_none()), "an empty slot is part of the case");
        let good = saved(&t);
        let mut accepted = 0;
        for at in 0..good.len() {
            for v in [0u8, 1, 3, 0x80, 0xff, good[at] ^ 1] {
                let mut bytes = good.clone();
                bytes[at] = v;
                if let Ok(back) = loaded(bytes, Limits::NONE) {
                    accepted += 1;
                    assert_round_trips(&back);
                }
            }
        }
        assert!(accepted > good.len(), "{accepted}");
    }

    #[test]
    fn damaged_payloads_never_panic() {
        let payload = hex(VECTOR);
        for cut in 0..payload.len() {
            let _ = TopK::from_payload(&payload[..cut], Limits::NONE);
        }
        for i in 0..payload.len() {
            for flip in [1u8, 0x40, 0xff] {
                let mut p = payload.clone();
                p[i] ^= flip;
                let _ = TopK::from_payload(&p, Limits::at_most(1 << 20));
            }
        }
    }
}
