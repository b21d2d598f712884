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

use super::errors::TopkError;
use super::sketch::{allocate, decay_table, Bucket, Slot, TopK, TopkParams};
use super::*;
use crate::common::fields::{FieldError, FieldReader, FieldWriter};
use crate::common::memory::Limits;

/// `RDB_TYPE_MODULE_2` and the module id of `TopK-TYPE` at encoding 0.
const RDB_TYPE_MODULE_2: u8 = 7;
pub const MODULE_ID: u64 = 0x4e8a_4af9_360f_1000;

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
            let empty = fp == 0 && count == 0 && itemlen == 0 && item.is_empty();
            *slot = Slot { fp, count, item: (!empty).then(|| item.into()) };
        }
        Ok(TopK { k, width, depth, decay, buckets, heap, table: decay_table(decay), draws })
    }

    /// The value as a `DUMP` payload (RDB version 9, which every server
    /// that loads module values reads): what the AOF rewrite sends as
    /// `RESTORE key 0 <payload>`, as RedisBloom's does.
    pub fn dump_payload(&self) -> Vec<u8> {
        let mut w = PayloadWriter::default();
        self.save(&mut w);
        w.finish()
    }

    /// Reads a `DUMP` payload of a `TopK-TYPE` value (the CRC is not checked).
    pub fn from_payload(payload: &[u8], limits: Limits) -> Result<TopK, TopkError> {
        let mut r = PayloadReader::new(payload)?;
        let t = TopK::load(&mut r, ENCODING_VERSION, limits)?;
        r.end()?;
        Ok(t)
    }
}

/// Writes fields as RDB opcodes (as `RedisModule_Save*` does, strings
/// uncompressed) and frames them as a `DUMP` payload.
#[derive(Default)]
pub struct PayloadWriter(Vec<u8>);

impl PayloadWriter {
    fn length(&mut self, v: u64) {
        match v {
            0..=0x3f => self.0.push(v as u8),
            0x40..=0x3fff => self.0.extend_from_slice(&[0x40 | (v >> 8) as u8, v as u8]),
            0x4000..=0xffff_ffff => {
                self.0.push(0x80);
                self.0.extend_from_slice(&(v as u32).to_be_bytes());
            }
            _ => {
                self.0.push(0x81);
                self.0.extend_from_slice(&v.to_be_bytes());
            }
        }
    }

    /// The payload: type, module id, the fields, EOF, RDB version 9, CRC.
    pub fn finish(self) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.0.len() + 13);
        body.push(RDB_TYPE_MODULE_2);
        body.push(0x81);
        body.extend_from_slice(&MODULE_ID.to_be_bytes());
        body.extend_from_slice(&self.0);
        body.push(0);
        body.extend_from_slice(&crate::common::payload::MODULE_VALUE_RDB_VERSION.to_le_bytes());
        crate::common::payload::seal(&body)
    }
}

impl FieldWriter for PayloadWriter {
    fn unsigned(&mut self, v: u64) {
        self.0.push(2);
        self.length(v);
    }
    fn double(&mut self, v: f64) {
        self.0.push(4);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn buffer(&mut self, v: &[u8]) {
        self.0.push(5);
        self.length(v.len() as u64);
        self.0.extend_from_slice(v);
    }
}

/// Reads the fields of a `DUMP` payload of a `TopK-TYPE` value as the
/// server hands them to a module: opcodes, RDB lengths, strings (LZF
/// strings decompressed). For tests, tools and the fuzzer: it trusts
/// nothing, and bounds every length by the bytes that are there.
pub struct PayloadReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> PayloadReader<'a> {
    /// After the value type and the module id, which must be `TopK-TYPE`'s.
    pub fn new(bytes: &'a [u8]) -> Result<PayloadReader<'a>, TopkError> {
        let mut r = PayloadReader { bytes, pos: 0 };
        if r.byte()? != RDB_TYPE_MODULE_2 || r.length()? != (MODULE_ID, false) {
            return Err(TopkError::BadData);
        }
        Ok(r)
    }

    /// The value must end here: EOF, then the version and CRC (10 bytes).
    pub fn end(&mut self) -> Result<(), TopkError> {
        if self.byte()? != 0 || self.bytes.len() - self.pos != 10 {
            return Err(TopkError::BadData);
        }
        Ok(())
    }

    fn byte(&mut self) -> Result<u8, FieldError> {
        let b = *self.bytes.get(self.pos).ok_or(FieldError)?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], FieldError> {
        let n = usize::try_from(n).map_err(|_| FieldError)?;
        let end = self.pos.checked_add(n).ok_or(FieldError)?;
        let v = self.bytes.get(self.pos..end).ok_or(FieldError)?;
        self.pos = end;
        Ok(v)
    }

    /// An RDB length: `(value, is_special_encoding)`.
    fn length(&mut self) -> Result<(u64, bool), FieldError> {
        let t = self.byte()?;
        Ok(match t >> 6 {
            0 => (u64::from(t & 0x3f), false),
            1 => ((u64::from(t & 0x3f) << 8) | u64::from(self.byte()?), false),
            2 if t == 0x80 => (u64::from(u32::from_be_bytes(self.take(4)?.try_into().expect("4"))), false),
            2 if t == 0x81 => (u64::from_be_bytes(self.take(8)?.try_into().expect("8")), false),
            3 => (u64::from(t & 0x3f), true),
            _ => return Err(FieldError),
        })
    }

    fn opcode(&mut self, want: u64) -> Result<(), FieldError> {
        match self.length()? {
            (op, false) if op == want => Ok(()),
            _ => Err(FieldError),
        }
    }
}

/// LZF decompression, bounds-checked: `Err` unless `data` expands to
/// exactly `out_len` bytes.
fn lzf(data: &[u8], out_len: u64) -> Result<Vec<u8>, FieldError> {
    // A back-reference of 2 or 3 input bytes writes at most 264 bytes.
    if out_len > (data.len() as u64).saturating_mul(132) {
        return Err(FieldError);
    }
    let out_len = usize::try_from(out_len).map_err(|_| FieldError)?;
    let mut out = Vec::new();
    out.try_reserve_exact(out_len).map_err(|_| FieldError)?;
    let mut i = 0;
    while i < data.len() {
        let ctrl = usize::from(data[i]);
        i += 1;
        if ctrl < 32 {
            let lit = data.get(i..i + ctrl + 1).ok_or(FieldError)?;
            out.extend_from_slice(lit);
            i += ctrl + 1;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*data.get(i).ok_or(FieldError)?);
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*data.get(i).ok_or(FieldError)?) + 1;
            i += 1;
            if back > out.len() {
                return Err(FieldError);
            }
            for _ in 0..len + 2 {
                out.push(out[out.len() - back]);
            }
        }
        if out.len() > out_len {
            return Err(FieldError);
        }
    }
    if out.len() != out_len {
        return Err(FieldError);
    }
    Ok(out)
}

impl FieldReader for PayloadReader<'_> {
    fn unsigned(&mut self) -> Result<u64, FieldError> {
        self.opcode(2)?;
        Ok(self.length()?.0)
    }
    fn double(&mut self) -> Result<f64, FieldError> {
        self.opcode(4)?;
        Ok(f64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn buffer(&mut self) -> Result<Box<[u8]>, FieldError> {
        self.opcode(5)?;
        match self.length()? {
            (len, false) => Ok(self.take(len)?.into()),
            (3, true) => {
                let (clen, ulen) = (self.length()?.0, self.length()?.0);
                Ok(lzf(self.take(clen)?, ulen)?.into())
            }
            _ => Err(FieldError),
        }
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
