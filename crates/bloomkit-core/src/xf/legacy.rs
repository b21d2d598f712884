//! Encoding 0: what bloomkit 0.1 saved (one quotient-filter table that
//! doubled into a second, murmur3 hashing), read and turned into an
//! encoding-1 filter with the same entries (see `DESIGN.md`, "Encoding 0").
//!
//! Only reading is here: the RDB value and DUMP payload of encoding 0, and
//! its SCANDUMP header (`BKXFLT00`) and slot chunks. Every number is
//! checked as bloomkit 0.1 checked it (the parameters, the level against
//! the growth the capacities allow, each table's fingerprint bits against
//! what its schedule could have chosen, every slot walked), before the
//! entries are moved: a table's entry at quotient `q` with fingerprint `fp`
//! is the address `q` at level `c + L` of the murmur root `m0` (`2^c >= m0`),
//! the same hashes, so it matches exactly what it matched before.

use super::block::{MAX_F, MAX_STORED_ENTRIES};
use super::errors::XfError;
use super::filter::{ceil_log2_u64, Hashing, XfFilter, XfParams, GROW_QBITS};
use super::legacy_table::{decode, Scan, Table};
use super::merge::{assemble, build_region, Abs, Built};
use crate::common::fields::FieldReader;
use crate::common::memory::Limits;

/// The SCANDUMP header's magic of encoding 0, then nine `u64`s.
pub const MAGIC: &[u8; 8] = b"BKXFLT00";
pub const HEADER_LEN: usize = 8 + 9 * 8;

/// bloomkit 0.1's growth load (19/20) and smallest table.
const LOAD_NUM: u64 = 19;
const LOAD_DEN: u64 = 20;
const MIN_QUOTIENTS: u64 = 64;

/// Quotients of bloomkit 0.1's first table for `capacity`.
pub fn first_quotients(capacity: u64) -> u64 {
    let m = (capacity * LOAD_DEN).div_ceil(LOAD_NUM);
    (m + m.div_ceil(64)).max(MIN_QUOTIENTS)
}

fn load_limit(m: u64) -> u64 {
    (u128::from(m) * u128::from(LOAD_NUM) / u128::from(LOAD_DEN)) as u64
}

/// Doublings bloomkit 0.1 planned until `max_capacity`.
pub fn horizon(p: &XfParams) -> u32 {
    let mut m = first_quotients(p.capacity);
    let mut k = 0;
    while load_limit(m) < p.max_capacity {
        m *= 2;
        k += 1;
    }
    k
}

/// bloomkit 0.1's fingerprint schedule (to check what a table says it chose).
fn old_fingerprint_bits(error: f64, level: u32, horizon: u32, mass: f64) -> u32 {
    let last = horizon.max(level);
    let weight = |j: u32| 1.0 / f64::from(j + 1);
    let all: f64 = (0..=last).map(weight).sum();
    let rest: f64 = (level..=last).map(weight).sum();
    let left = (error - mass).max(error * rest / all);
    let budget = left * weight(level) / rest;
    let per = if level == 0 { 0.95 } else { 0.475 };
    let bits = (per / budget).log2().ceil();
    (bits.max(1.0) as u32).min(MAX_F)
}

/// An encoding-0 value being read: its numbers and its tables.
pub struct V0 {
    params: XfParams,
    items: u64,
    level: u32,
    /// The table, and during a doubling the doubled one with the position.
    table: Table,
    next: Option<(Table, u64)>,
    scans: Vec<Scan>,
}

impl V0 {
    /// A value's numbers checked and its tables allocated (zeroed), as
    /// bloomkit 0.1 did; the slots come next.
    fn shell(error: f64, n: [u64; 7], limits: Limits) -> Result<V0, XfError> {
        let bad = XfError::BadData;
        let narrow = |v: u64| u32::try_from(v).map_err(|_| bad("a count is out of range"));
        let p = XfParams { error_rate: error, capacity: n[0], max_capacity: n[1] };
        p.check().map_err(|_| bad("the error rate or a capacity is out of range"))?;
        let (items, level, fbits) = (n[2], narrow(n[3])?, narrow(n[4])?);
        if items > p.max_capacity {
            return Err(bad("it holds more items than its maximum capacity"));
        }
        let h = horizon(&p);
        let migrating = (n[5], n[6]) != (0, 0);
        if level > h || (migrating && level >= h) {
            return Err(bad("it has grown past its maximum capacity"));
        }
        let bits_ok = |level: u32, fbits: u64| {
            let least = old_fingerprint_bits(p.error_rate, level, h, 0.0);
            let most =
                if level == 0 { least } else { old_fingerprint_bits(p.error_rate, level, h, f64::INFINITY) };
            (u64::from(least)..=u64::from(most)).contains(&fbits)
        };
        if !bits_ok(level, u64::from(fbits)) {
            return Err(bad("a table's fingerprint length is not one the filter could have chosen"));
        }
        let m = first_quotients(p.capacity) << level;
        let mut bytes = Table::slot_bytes_for(m, fbits).ok_or(bad("the size is not representable"))?;
        let next = if migrating {
            let (cursor_plus_one, fb) = (n[5], n[6]);
            if !bits_ok(level + 1, fb) {
                return Err(bad("a table's fingerprint length is not one the filter could have chosen"));
            }
            let more = Table::slot_bytes_for(2 * m, fb as u32).ok_or(bad("the size is not representable"))?;
            bytes = bytes.checked_add(more).ok_or(bad("the size is not representable"))?;
            let cursor = cursor_plus_one.checked_sub(1).ok_or(bad("a doubling under way has no position"))?;
            Some((cursor, fb as u32))
        } else {
            None
        };
        limits.check(bytes)?;
        let table = Table::new(m, fbits)?;
        if let Some((cursor, _)) = next {
            if cursor > table.slots() {
                return Err(bad("the doubling's position is past the table's end"));
            }
        }
        let next = match next {
            Some((cursor, fb)) => Some((Table::new(2 * m, fb)?, cursor)),
            None => None,
        };
        let mut v0 = V0 { params: p, items, level, table, next, scans: Vec::new() };
        v0.scans = v0.fresh_scans();
        Ok(v0)
    }

    /// Walks for each table from its start: the quotients in use, and the
    /// slots a doubling under way emptied.
    fn fresh_scans(&self) -> Vec<Scan> {
        let m = self.table.m();
        match &self.next {
            None => vec![Scan::new(0..m, 0)],
            Some((_, cursor)) => vec![Scan::new((*cursor).min(m)..m, *cursor), Scan::new(0..2 * m, 0)],
        }
    }

    fn tables_mut(&mut self) -> impl Iterator<Item = &mut Table> {
        std::iter::once(&mut self.table).chain(self.next.as_mut().map(|(t, _)| t))
    }

    pub fn params(&self) -> XfParams {
        self.params
    }

    /// `len` slot bytes from `offset` (of the concatenated tables).
    pub fn bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        let first = self.table.data_len();
        let mut out = Vec::with_capacity(len as usize);
        let end = offset + len;
        if offset < first {
            out.extend(self.table.bytes_at(offset, end.min(first) - offset));
        }
        if end > first {
            if let Some((t, _)) = &self.next {
                let from = offset.max(first) - first;
                out.extend(t.bytes_at(from, end - first - from));
            }
        }
        out
    }

    /// Slot bytes the value carries after its numbers.
    pub fn data_len(&self) -> u64 {
        self.table.data_len() + self.next.as_ref().map_or(0, |(t, _)| t.data_len())
    }

    /// Copies slot bytes in at `offset` (of the concatenated tables) and
    /// checks the slots now whole.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), XfError> {
        let end = offset + data.len() as u64;
        if end > self.data_len() {
            return Err(XfError::BadChunk("the chunk runs past the filter's end"));
        }
        let first_len = self.table.data_len();
        let split = first_len.saturating_sub(offset).min(data.len() as u64) as usize;
        let (a, b) = data.split_at(split);
        if !a.is_empty() {
            self.table.write_bytes(offset, a);
        }
        if !b.is_empty() {
            let (t, _) =
                self.next.as_mut().ok_or(XfError::BadChunk("the chunk runs past the filter's end"))?;
            t.write_bytes(offset + split as u64 - first_len, b);
        }
        let mut start = 0u64;
        let mut scans = std::mem::take(&mut self.scans);
        let mut result = Ok(());
        for (t, scan) in self.tables_mut().zip(scans.iter_mut()) {
            let have = end.saturating_sub(start).min(t.data_len());
            let slots = have * 8 / u64::from(t.fbits() + 4);
            if let Err(why) = scan.feed(t, slots) {
                result = Err(XfError::BadData(why));
                break;
            }
            start += t.data_len();
        }
        self.scans = scans;
        result
    }

    /// The encoding-1 filter with the same entries, once every slot is in.
    pub fn convert(&mut self, limits: Limits) -> Result<XfFilter, XfError> {
        let bad = XfError::BadData;
        let mut scans = std::mem::take(&mut self.scans);
        for (t, scan) in self.tables_mut().zip(scans.iter_mut()) {
            scan.feed(t, t.slots()).map_err(bad)?;
            if !t.padding_is_clear() {
                return Err(bad("bits past the last slot are set"));
            }
        }
        let m0 = first_quotients(self.params.capacity);
        let c = ceil_log2_u64(m0);
        let level = c + self.level;
        // Every entry as an absolute prefix: the quotient at `level` (the
        // doubled table's at `level + 1`), then its fingerprint.
        let mut abs: Vec<Abs> = Vec::new();
        let mut push = |t: &Table, lv: u32, skip_below: u64| {
            t.for_each(|q, r| {
                if q < skip_below {
                    return;
                }
                let (f, fp) = decode(r, t.fbits());
                abs.push(Abs::of(u128::from(q), lv, f, fp));
            })
        };
        match &self.next {
            None => push(&self.table, level, 0),
            Some((t2, cursor)) => {
                push(&self.table, level, *cursor);
                push(t2, level + 1, 0);
            }
        }
        abs.sort_unstable();
        let entries = abs.len() as u64;
        if self.items > entries {
            return Err(bad("it counts more items than it has entries"));
        }
        let deepest = if self.next.is_some() { level + 1 } else { level };
        let qbits = deepest.clamp(super::block::MIN_QBITS, GROW_QBITS);
        let depth = deepest - qbits;
        let mut built = Built::holding(MAX_STORED_ENTRIES);
        build_region(0, depth, qbits, &abs, &[], &mut built, limits)?;
        let (mut blocks, mass) = (built.blocks, built.mass);
        let last = c + horizon(&self.params);
        let hashing = Hashing::Murmur { m0 };
        assemble(self.params, hashing, self.items, qbits, c, last, &mut blocks, Some(mass), limits)
    }
}

impl super::loading::LegacyLoad for V0 {
    fn data_len(&self) -> u64 {
        V0::data_len(self)
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), XfError> {
        V0::write(self, offset, data)
    }

    fn bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        V0::bytes(self, offset, len)
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    /// A new shell of the same numbers, the slots received replayed into it.
    fn copy(&self, loaded: u64) -> Result<Box<dyn super::loading::LegacyLoad>, XfError> {
        let mut copy = V0 {
            params: self.params,
            items: self.items,
            level: self.level,
            table: Table::new(self.table.m(), self.table.fbits())?,
            next: match &self.next {
                Some((t, cursor)) => Some((Table::new(t.m(), t.fbits())?, *cursor)),
                None => None,
            },
            scans: self.fresh_scans(),
        };
        if loaded > 0 {
            copy.write(0, &self.bytes(0, loaded))?;
        }
        Ok(Box::new(copy))
    }
}

/// Reads an encoding-0 RDB value and converts it.
pub fn load(r: &mut dyn FieldReader, limits: Limits) -> Result<XfFilter, XfError> {
    let error = r.double()?;
    let mut n = [0u64; 7];
    for v in &mut n {
        *v = r.unsigned()?;
    }
    let mut v0 = V0::shell(error, n, limits)?;
    let data = r.buffer()?;
    if data.len() as u64 != v0.table.data_len() {
        return Err(XfError::BadData("a table's slot data has the wrong length"));
    }
    let mut all = data.into_vec();
    if v0.next.is_some() {
        let more = r.buffer()?;
        if more.len() as u64 != v0.data_len() - v0.table.data_len() {
            return Err(XfError::BadData("a table's slot data has the wrong length"));
        }
        all.extend_from_slice(&more);
    }
    if !all.is_empty() {
        v0.write(0, &all)?;
    }
    v0.convert(limits)
}

/// An encoding-0 SCANDUMP header: the value to fill with its chunks.
pub fn from_header(header: &[u8], limits: Limits) -> Result<V0, XfError> {
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
    V0::shell(f64::from_bits(at(0)), n, limits)
}

/// Slot bytes an encoding-0 header's chunks carry (a transfer's progress).
pub fn header_data_len(header: &[u8]) -> Option<u64> {
    let h: &[u8; HEADER_LEN] = header.try_into().ok()?;
    if &h[..8] != MAGIC {
        return None;
    }
    let at = |i: usize| u64::from_le_bytes(h[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"));
    let params = XfParams { error_rate: f64::from_bits(at(0)), capacity: at(1), max_capacity: at(2) };
    params.check().ok()?;
    let (level, fbits) = (u32::try_from(at(4)).ok()?, u32::try_from(at(5)).ok()?);
    let m = first_quotients(params.capacity).checked_shl(level).filter(|m| m.leading_zeros() >= level)?;
    let sent = |m: u64, fbits: u32| Table::slot_bytes_for(m, fbits)?.checked_sub(8);
    let mut len = sent(m, fbits)?;
    if at(6) != 0 {
        len = len.checked_add(sent(m.checked_mul(2)?, u32::try_from(at(7)).ok()?)?)?;
    }
    Some(len)
}
