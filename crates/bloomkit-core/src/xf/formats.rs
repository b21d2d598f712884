//! The expandable filter's formats: the RDB value (over [`FieldWriter`] and
//! [`FieldReader`]), `DUMP` payloads of it, and `XF.SCANDUMP` /
//! `XF.LOADCHUNK` (a header, then the slot bytes in chunks).
//!
//! RDB fields, in order: error rate (double); capacity, max capacity,
//! items, level, fingerprint bits of the table, then `cursor + 1` and the
//! doubled table's fingerprint bits while a doubling is under way (0 and 0
//! otherwise) (unsigned); the table's slot words (little-endian bytes) and,
//! during a doubling, the doubled table's. The SCANDUMP header holds the
//! same numbers after an 8-byte magic, as little-endian `u64`s.
//!
//! Nothing decoded is trusted: every number is checked against the others
//! (the parameters' ranges, the level against the growth the capacities
//! allow, each table's fingerprint bits against what the schedule could
//! have chosen), the sizes are compared with the limit before anything is
//! allocated, and every slot is walked ([`Scan`]) so that only states the
//! operations keep load: runs where the occupied bits say, shifted bits
//! right, remainders with their stop bit, nothing in slots a doubling has
//! emptied, and no more items than entries. Nothing is derived that is not
//! stored, so what loads saves to the same bytes.

use super::errors::XfError;
use super::filter::{fingerprint_bits, Loading, Migration, XfFilter, XfParams, OVERHEAD};
use super::table::{Scan, Table};
use super::{CHUNK_BYTES, ENCODING_VERSION, TYPE_NAME};
use crate::common::dump::{own_type_id, PayloadReader, PayloadWriter};
use crate::common::fields::{FieldReader, FieldWriter};
use crate::common::memory::Limits;

/// The module id of `bkit-xflt` at [`ENCODING_VERSION`].
pub const MODULE_ID: u64 = own_type_id(TYPE_NAME, ENCODING_VERSION);

/// The SCANDUMP header's magic, then nine `u64`s.
pub const MAGIC: &[u8; 8] = b"BKXFLT00";
pub const HEADER_LEN: usize = 8 + 9 * 8;

/// Everything but the slots.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Header {
    params: XfParams,
    items: u64,
    level: u32,
    fbits: u32,
    /// `cursor + 1` and the doubled table's fingerprint bits, or zeros.
    migration: (u64, u64),
}

impl Header {
    fn of(f: &XfFilter) -> Header {
        Header {
            params: f.params,
            items: f.items,
            level: f.level,
            fbits: f.table.fbits(),
            migration: f.next.as_ref().map_or((0, 0), |mig| (mig.cursor + 1, u64::from(mig.table.fbits()))),
        }
    }

    fn numbers(&self) -> [u64; 8] {
        let p = &self.params;
        [
            p.capacity,
            p.max_capacity,
            self.items,
            u64::from(self.level),
            u64::from(self.fbits),
            self.migration.0,
            self.migration.1,
            0,
        ]
    }

    fn from_numbers(error_rate: f64, n: [u64; 7]) -> Result<Header, XfError> {
        let narrow = |v: u64| u32::try_from(v).map_err(|_| XfError::BadData("a count is out of range"));
        Ok(Header {
            params: XfParams { error_rate, capacity: n[0], max_capacity: n[1] },
            items: n[2],
            level: narrow(n[3])?,
            fbits: narrow(n[4])?,
            migration: (n[5], n[6]),
        })
    }

    /// The filter this header describes, its tables zeroed and its slots
    /// still to be checked: every number checked first, and the size
    /// compared with the limit before anything is allocated.
    fn shell(&self, limits: Limits) -> Result<XfFilter, XfError> {
        let bad = XfError::BadData;
        let p = self.params;
        p.check().map_err(|_| bad("the error rate or a capacity is out of range"))?;
        if self.items > p.max_capacity {
            return Err(bad("it holds more items than its maximum capacity"));
        }
        let horizon = p.horizon();
        let migrating = self.migration != (0, 0);
        if self.level > horizon || (migrating && self.level >= horizon) {
            return Err(bad("it has grown past its maximum capacity"));
        }
        let bits_ok = |level: u32, fbits: u64| {
            let least = fingerprint_bits(p.error_rate, level, horizon, 0.0);
            let most = if level == 0 {
                least
            } else {
                fingerprint_bits(p.error_rate, level, horizon, f64::INFINITY)
            };
            (u64::from(least)..=u64::from(most)).contains(&fbits)
        };
        if !bits_ok(self.level, u64::from(self.fbits)) {
            return Err(bad("a table's fingerprint length is not one the filter could have chosen"));
        }
        let m = p.first_quotients() << self.level;
        // What is saved is compared with the limit, so that whatever a
        // bloomkit before the run index (derived, 1 to 2% more) saved under
        // the limit loads under it.
        let mut bytes = Table::slot_bytes_for(m, self.fbits).ok_or(bad("the size is not representable"))?;
        let next = if migrating {
            let (cursor_plus_one, fbits) = self.migration;
            if !bits_ok(self.level + 1, fbits) {
                return Err(bad("a table's fingerprint length is not one the filter could have chosen"));
            }
            let new_bytes =
                Table::slot_bytes_for(2 * m, fbits as u32).ok_or(bad("the size is not representable"))?;
            bytes = bytes.checked_add(new_bytes).ok_or(bad("the size is not representable"))?;
            // `cursor + 1`: 0 is "no doubling", which the fingerprint bits contradict.
            let cursor = cursor_plus_one.checked_sub(1).ok_or(bad("a doubling under way has no position"))?;
            Some((cursor, fbits as u32))
        } else {
            None
        };
        limits.check(OVERHEAD.saturating_add(bytes))?;
        let table = Table::new(m, self.fbits)?;
        if let Some((cursor, _)) = next {
            if cursor > table.slots() {
                return Err(bad("the doubling's position is past the table's end"));
            }
        }
        let next = match next {
            Some((cursor, fbits)) => Some(Box::new(Migration { table: Table::new(2 * m, fbits)?, cursor })),
            None => None,
        };
        Ok(XfFilter {
            params: p,
            horizon,
            items: self.items,
            level: self.level,
            table,
            next,
            loading: None,
            retired: None,
        })
    }
}

impl XfFilter {
    /// Walks for each table: its quotients in use, the slots that must be empty.
    fn scans(&self) -> Vec<Scan> {
        match &self.next {
            None => vec![Scan::new(0..self.table.m(), 0)],
            Some(mig) => vec![
                Scan::new(mig.cursor.min(self.table.m())..self.table.m(), mig.cursor),
                Scan::new(0..mig.table.m(), 0),
            ],
        }
    }

    /// Checks every slot of a filled shell and counts its entries.
    fn checked(mut self) -> Result<XfFilter, XfError> {
        let mut scans = self.scans();
        self.finish_scans(&mut scans)?;
        Ok(self)
    }

    fn finish_scans(&mut self, scans: &mut [Scan]) -> Result<(), XfError> {
        let bad = XfError::BadData;
        let tables = [Some(&self.table), self.next.as_ref().map(|mig| &mig.table)];
        for (t, scan) in tables.into_iter().flatten().zip(scans.iter_mut()) {
            scan.feed(t, t.slots()).map_err(bad)?;
            if !t.padding_is_clear() {
                return Err(bad("bits past the last slot are set"));
            }
        }
        let table = std::mem::replace(&mut self.table, Table::new(1, 1)?);
        self.table = table.counted(&scans[0]);
        if let Some(mig) = self.next.as_mut() {
            let t = std::mem::replace(&mut mig.table, Table::new(1, 1)?);
            mig.table = t.counted(&scans[1]);
        }
        if self.items > self.entries() {
            return Err(bad("it counts more items than it has entries"));
        }
        Ok(())
    }

    // ---- RDB ----

    /// Writes the value at [`ENCODING_VERSION`]. A filter still being
    /// loaded by chunks is written as what it answers: empty.
    pub fn save(&self, w: &mut dyn FieldWriter) {
        if self.loading.is_some() {
            if let Ok(empty) = XfFilter::with_params(self.params, Limits::NONE) {
                return empty.save(w);
            }
        }
        let h = Header::of(self);
        w.double(h.params.error_rate);
        for v in &h.numbers()[..7] {
            w.unsigned(*v);
        }
        w.buffer(&self.table.bytes());
        if let Some(mig) = &self.next {
            w.buffer(&mig.table.bytes());
        }
    }

    /// Reads a value of encoding version 0, checked as the module docs say.
    pub fn load(r: &mut dyn FieldReader, encver: i32, limits: Limits) -> Result<XfFilter, XfError> {
        if encver != ENCODING_VERSION {
            return Err(XfError::BadData("unknown encoding version"));
        }
        let error = r.double()?;
        let mut n = [0u64; 7];
        for v in &mut n {
            *v = r.unsigned()?;
        }
        let mut f = Header::from_numbers(error, n)?.shell(limits)?;
        let data = r.buffer()?;
        fill(&mut f.table, &data)?;
        drop(data);
        if let Some(mig) = f.next.as_mut() {
            let data = r.buffer()?;
            fill(&mut mig.table, &data)?;
        }
        f.checked()
    }

    /// The value as a `DUMP` payload (what an AOF rewrite sends as `RESTORE`).
    pub fn dump_payload(&self) -> Vec<u8> {
        let mut w = PayloadWriter::new(MODULE_ID);
        self.save(&mut w);
        w.finish()
    }

    /// Reads a `DUMP` payload of a `bkit-xflt` value, its CRC checked.
    pub fn from_payload(payload: &[u8], limits: Limits) -> Result<XfFilter, XfError> {
        let mut r = PayloadReader::new(payload)?;
        if r.type_id != MODULE_ID {
            return Err(XfError::BadData("the payload holds another type"));
        }
        let f = XfFilter::load(&mut r, ENCODING_VERSION, limits)?;
        if !r.at_end() {
            return Err(XfError::BadData("the payload has fields past the value"));
        }
        Ok(f)
    }

    // ---- XF.SCANDUMP / XF.LOADCHUNK ----

    /// The header `XF.SCANDUMP key 0` returns (with iterator 1).
    pub fn encode_header(&self) -> [u8; HEADER_LEN] {
        let source;
        let f = if self.loading.is_some() {
            source = XfFilter::with_params(self.params, Limits::NONE).ok();
            source.as_ref().unwrap_or(self)
        } else {
            self
        };
        let h = Header::of(f);
        let mut out = [0u8; HEADER_LEN];
        out[..8].copy_from_slice(MAGIC);
        out[8..16].copy_from_slice(&h.params.error_rate.to_bits().to_le_bytes());
        for (i, v) in h.numbers()[..8].iter().enumerate() {
            out[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// The slot bytes the chunks after this header carry (what a transfer
    /// moves, for its progress), read without allocating anything; `None`
    /// for a header that is not one.
    pub fn header_data_len(header: &[u8]) -> Option<u64> {
        let h: &[u8; HEADER_LEN] = header.try_into().ok()?;
        if &h[..8] != MAGIC {
            return None;
        }
        let at = |i: usize| u64::from_le_bytes(h[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"));
        let params = XfParams { error_rate: f64::from_bits(at(0)), capacity: at(1), max_capacity: at(2) };
        params.check().ok()?;
        let (level, fbits) = (u32::try_from(at(4)).ok()?, u32::try_from(at(5)).ok()?);
        let m = params.first_quotients().checked_shl(level).filter(|m| m.leading_zeros() >= level)?;
        let sent = |m: u64, fbits: u32| Table::slot_bytes_for(m, fbits)?.checked_sub(8);
        let mut len = sent(m, fbits)?;
        if at(6) != 0 {
            len = len.checked_add(sent(m.checked_mul(2)?, u32::try_from(at(7)).ok()?)?)?;
        }
        Some(len)
    }

    /// A filter as the header describes, to be filled by the chunks that
    /// follow; until the last, it answers as empty and refuses writes.
    pub fn from_header(header: &[u8], limits: Limits) -> Result<XfFilter, XfError> {
        let h: &[u8; HEADER_LEN] = header.try_into().map_err(|_| XfError::BadData("the header's length"))?;
        if &h[..8] != MAGIC {
            return Err(XfError::BadData("not an expandable filter's header"));
        }
        let at = |i: usize| u64::from_le_bytes(h[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"));
        let mut n = [0u64; 7];
        for (i, v) in n.iter_mut().enumerate() {
            *v = at(i + 1);
        }
        if at(8) != 0 {
            return Err(XfError::BadData("a reserved header field is set"));
        }
        let mut f = Header::from_numbers(f64::from_bits(at(0)), n)?.shell(limits)?;
        let scans = f.scans();
        f.loading = Some(Box::new(Loading { loaded: 0, scans }));
        if f.data_len() == 0 {
            f.finish_load()?;
        }
        Ok(f)
    }

    fn data_len(&self) -> u64 {
        self.table.data_len() + self.next.as_ref().map_or(0, |mig| mig.table.data_len())
    }

    /// The reply to `XF.SCANDUMP key iter`: the next iterator and a chunk,
    /// `None` past the end (the reply is then `0` and an empty string).
    /// Chunks are at most [`CHUNK_BYTES`] and never span two tables.
    pub fn chunk_at(&self, iter: u64) -> Option<(u64, Vec<u8>)> {
        if iter == 0 {
            return Some((1, self.encode_header().to_vec()));
        }
        if self.loading.is_some() {
            return None;
        }
        let mut offset = iter - 1;
        let tables = [Some(&self.table), self.next.as_ref().map(|mig| &mig.table)];
        for t in tables.into_iter().flatten() {
            let len = t.data_len();
            if offset < len {
                let take = (len - offset).min(CHUNK_BYTES);
                let bytes = t.bytes_at(offset, take);
                return Some((iter + take, bytes));
            }
            offset -= len;
        }
        None
    }

    /// Every `(iterator, chunk)` pair a full SCANDUMP returns, header first:
    /// what `XF.LOADCHUNK key iterator chunk` takes in turn.
    pub fn chunks(&self) -> impl Iterator<Item = (u64, Vec<u8>)> + '_ {
        let mut iter = 0u64;
        std::iter::from_fn(move || {
            let (next, data) = self.chunk_at(iter)?;
            iter = next;
            Some((next, data))
        })
    }

    /// `XF.LOADCHUNK key iter data` after the header: `data` must continue
    /// the load where the previous chunk ended (`iter` is what SCANDUMP
    /// returned with it); its slots are checked as they arrive, and the
    /// filter answers once the last chunk is in.
    pub fn load_chunk(&mut self, iter: u64, data: &[u8]) -> Result<(), XfError> {
        let Some(loading) = self.loading.as_ref() else {
            return Err(XfError::BadChunk(
                "the filter is not being loaded; send the header (iterator 1) first",
            ));
        };
        let offset = iter
            .checked_sub(1)
            .and_then(|i| i.checked_sub(data.len() as u64))
            .ok_or(XfError::BadChunk("the iterator does not match the chunk's length"))?;
        if offset != loading.loaded || data.is_empty() {
            return Err(XfError::BadChunk(
                "chunks must be loaded whole and in the order XF.SCANDUMP gave them",
            ));
        }
        let old_len = self.table.data_len();
        let end = offset + data.len() as u64;
        if end > self.data_len() {
            return Err(XfError::BadChunk("the chunk runs past the filter's end"));
        }
        let split = old_len.saturating_sub(offset).min(data.len() as u64) as usize;
        let (first, second) = data.split_at(split);
        if !first.is_empty() {
            self.table.write_bytes(offset, first);
        }
        if !second.is_empty() {
            let mig = self.next.as_mut().expect("data past the first table means a second");
            mig.table.write_bytes(offset + split as u64 - old_len, second);
        }
        let mut loading = self.loading.take().expect("checked above");
        loading.loaded = end;
        // Check the slots wholly received.
        let tables = [Some(&self.table), self.next.as_ref().map(|mig| &mig.table)];
        let mut start = 0u64;
        let mut result = Ok(());
        for (t, scan) in tables.into_iter().flatten().zip(loading.scans.iter_mut()) {
            let have = end.saturating_sub(start).min(t.data_len());
            let slots = have * 8 / u64::from(t.fbits() + 4);
            if let Err(why) = scan.feed(t, slots) {
                result = Err(XfError::BadData(why));
                break;
            }
            start += t.data_len();
        }
        self.loading = Some(loading);
        result?;
        if end == self.data_len() {
            self.finish_load()?;
        }
        Ok(())
    }

    fn finish_load(&mut self) -> Result<(), XfError> {
        let mut loading = self.loading.take().expect("a load under way");
        let result = self.finish_scans(&mut loading.scans);
        if result.is_err() {
            self.loading = Some(loading);
        }
        result
    }
}

/// Copies an RDB string of slot bytes into a zeroed table: exactly its size.
fn fill(t: &mut Table, data: &[u8]) -> Result<(), XfError> {
    if data.len() as u64 != t.data_len() || !t.write_bytes(0, data) {
        return Err(XfError::BadData("a table's slot data has the wrong length"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Found by `accepted_input_round_trips`: a header that says a doubling
    /// is under way (its fingerprint bits) with a position of 0 ("none")
    /// was refused by a subtraction that overflowed (a panic) instead of an error.
    #[test]
    fn a_doubling_without_a_position_is_refused() {
        let mut f = XfFilter::new(0.01, 40, 1 << 20, Limits::NONE).unwrap();
        let mut i = 0u32;
        while f.next.is_none() {
            f.insert(&i.to_le_bytes(), Limits::NONE).unwrap();
            i += 1;
        }
        let mut header = f.encode_header();
        assert_ne!(header[16 + 8 * 6..24 + 8 * 6], [0u8; 8], "the doubled table's fingerprint bits");
        header[16 + 8 * 5..24 + 8 * 5].copy_from_slice(&0u64.to_le_bytes());
        assert!(matches!(XfFilter::from_header(&header, Limits::NONE), Err(XfError::BadData(_))));
    }

    use super::*;
    use crate::common::fields::FieldStream;

    fn saved(f: &XfFilter) -> Vec<u8> {
        let mut w = FieldStream::default();
        f.save(&mut w);
        w.bytes
    }

    fn grown(n: u64) -> XfFilter {
        let mut f = XfFilter::new(0.01, 100, 1 << 20, Limits::NONE).unwrap();
        for i in 0..n {
            f.insert(&i.to_le_bytes(), Limits::NONE).unwrap();
        }
        f
    }

    #[test]
    fn every_format_round_trips_mid_migration_too() {
        for n in [0u64, 50, 110, 210, 1000] {
            let f = grown(n);
            let bytes = saved(&f);
            let back =
                XfFilter::load(&mut FieldStream { bytes: bytes.clone(), pos: 0 }, 0, Limits::NONE).unwrap();
            assert_eq!(saved(&back), bytes);
            assert_eq!(back.info(), f.info());
            let again = XfFilter::from_payload(&f.dump_payload(), Limits::NONE).unwrap();
            assert_eq!(saved(&again), bytes);
            let mut chunks = f.chunks();
            let (iter, header) = chunks.next().unwrap();
            assert_eq!(iter, 1);
            let mut copy = XfFilter::from_header(&header, Limits::NONE).unwrap();
            for (iter, data) in chunks {
                assert!(copy.is_loading());
                copy.load_chunk(iter, &data).unwrap();
            }
            assert!(!copy.is_loading());
            assert_eq!(saved(&copy), bytes);
            for i in 0..n {
                assert!(copy.contains(&i.to_le_bytes()));
            }
        }
        assert!(grown(110).is_migrating() && grown(210).is_migrating());
    }

    #[test]
    fn truncations_and_flips_are_refused_or_round_trip() {
        let f = grown(300);
        let bytes = saved(&f);
        for len in 0..bytes.len() {
            let r =
                XfFilter::load(&mut FieldStream { bytes: bytes[..len].to_vec(), pos: 0 }, 0, Limits::NONE);
            assert!(r.is_err(), "length {len}");
        }
        let mut accepted = 0;
        for at in 0..bytes.len() {
            for bit in [0u8, 3, 7] {
                let mut b = bytes.clone();
                b[at] ^= 1 << bit;
                if let Ok(g) = XfFilter::load(&mut FieldStream { bytes: b.clone(), pos: 0 }, 0, Limits::NONE)
                {
                    accepted += 1;
                    let again = saved(&g);
                    assert_eq!(again, b, "flip at {at} bit {bit} loads but does not round-trip");
                }
            }
        }
        assert!(accepted < bytes.len() * 3);
    }

    #[test]
    fn chunks_out_of_order_are_refused() {
        let f = grown(1000);
        let chunks: Vec<(u64, Vec<u8>)> = f.chunks().collect();
        let mut copy = XfFilter::from_header(&chunks[0].1, Limits::NONE).unwrap();
        assert!(matches!(copy.insert(b"x", Limits::NONE), Err(XfError::Loading)));
        assert!(!copy.contains(&1u64.to_le_bytes()));
        let (iter, data) = &chunks[1];
        assert!(copy.load_chunk(*iter + 1, data).is_err());
        assert!(copy.load_chunk(*iter, &data[..data.len() - 1]).is_err());
        let empty = XfFilter::with_params(f.params(), Limits::NONE).unwrap();
        assert_eq!(saved(&copy), saved(&empty), "a filter being loaded saves as empty");
        assert!(XfFilter::from_header(&chunks[0].1, Limits::at_most(100)).is_err());
        let mut h = chunks[0].1.clone();
        h[0] ^= 1;
        assert!(XfFilter::from_header(&h, Limits::NONE).is_err());
    }
}
