//! bloomkit 0.1's quotient-filter table, as far as reading one needs: its
//! slots, the walk that checks them ([`Scan`]) and the walk that lists
//! their entries ([`Table::for_each`]).
//!
//! `m` canonical slots (quotients) plus a tail of `128 + m/256` slots, each
//! `F + 4` bits, bit-packed in `u64` words, then one padding word. A slot:
//! bit 0 `occupied` (some entry has this slot as its quotient), bit 1
//! `continuation` (this entry continues the run of the slot before), bit 2
//! `shifted` (not in its canonical slot), then an `F + 1`-bit remainder: an
//! `f`-bit fingerprint, a stop bit, zeros. Runs are in quotient order.

use crate::common::memory::OutOfMemory;

const OCCUPIED: u64 = 1;
const CONTINUATION: u64 = 2;
const SHIFTED: u64 = 4;

/// The longest fingerprint a table stores.
pub const MAX_FINGERPRINT_BITS: u32 = 52;

/// The slots past the last quotient that runs may spill into.
pub fn tail_slots(m: u64) -> u64 {
    128 + m.div_ceil(256)
}

/// The fingerprint length and value of a remainder field.
#[inline]
pub fn decode(r: u64, fbits: u32) -> (u32, u64) {
    let tz = r.trailing_zeros();
    (fbits - tz, r >> (tz + 1))
}

/// Words holding `len` slots of `width` bits.
fn words_for(len: u64, width: u32) -> Option<u64> {
    len.checked_mul(u64::from(width)).map(|bits| bits.div_ceil(64))
}

pub struct Table {
    m: u64,
    len: u64,
    fbits: u32,
    width: u32,
    /// `words_for(len, width)` words, then one padding word.
    words: Box<[u64]>,
}

impl Table {
    /// Bytes of the slots (what is saved).
    pub fn slot_bytes_for(m: u64, fbits: u32) -> Option<u64> {
        let len = m.checked_add(tail_slots(m))?;
        words_for(len, fbits + 4)?.checked_add(1)?.checked_mul(8)
    }

    pub fn new(m: u64, fbits: u32) -> Result<Table, OutOfMemory> {
        if m == 0 || !(1..=MAX_FINGERPRINT_BITS).contains(&fbits) {
            return Err(OutOfMemory);
        }
        let len = m.checked_add(tail_slots(m)).ok_or(OutOfMemory)?;
        let n = words_for(len, fbits + 4).and_then(|w| usize::try_from(w + 1).ok()).ok_or(OutOfMemory)?;
        let mut words: Vec<u64> = Vec::new();
        words.try_reserve_exact(n).map_err(|_| OutOfMemory)?;
        words.resize(n, 0);
        Ok(Table { m, len, fbits, width: fbits + 4, words: words.into_boxed_slice() })
    }

    pub fn m(&self) -> u64 {
        self.m
    }
    /// Physical slots (quotients and tail).
    pub fn slots(&self) -> u64 {
        self.len
    }
    pub fn fbits(&self) -> u32 {
        self.fbits
    }

    /// `len` bytes of the slot words from byte `offset`.
    pub fn bytes_at(&self, offset: u64, len: u64) -> Vec<u8> {
        (offset..offset + len).map(|at| (self.words[(at / 8) as usize] >> ((at % 8) * 8)) as u8).collect()
    }

    /// Bytes of the slot words (the padding word left out).
    pub fn data_len(&self) -> u64 {
        (self.words.len() as u64 - 1) * 8
    }

    /// Copies `data` into the slot words at byte `offset`.
    pub fn write_bytes(&mut self, offset: u64, data: &[u8]) -> bool {
        match offset.checked_add(data.len() as u64) {
            Some(end) if end <= self.data_len() => {}
            _ => return false,
        }
        for (i, &b) in data.iter().enumerate() {
            let at = offset + i as u64;
            let (w, s) = ((at / 8) as usize, (at % 8) * 8);
            self.words[w] = (self.words[w] & !(0xffu64 << s)) | (u64::from(b) << s);
        }
        true
    }

    /// The bit-packed padding past the last slot is zero.
    pub fn padding_is_clear(&self) -> bool {
        let bits = self.len * u64::from(self.width);
        let last = self.words.len() - 1;
        let used = (bits % 64) as u32;
        let in_last_data = if used == 0 { 0 } else { self.words[last - 1] >> used };
        in_last_data == 0 && self.words[last] == 0
    }

    #[inline]
    fn get(&self, i: u64) -> u64 {
        if i >= self.len {
            return 0;
        }
        let off = i * u64::from(self.width);
        let (w, s) = ((off / 64) as usize, off % 64);
        let x = u128::from(self.words[w]) | (u128::from(self.words[w + 1]) << 64);
        ((x >> s) as u64) & ((1u64 << self.width) - 1)
    }

    #[inline]
    fn occupied(&self, i: u64) -> bool {
        self.get(i) & OCCUPIED != 0
    }

    /// Calls `each(quotient, remainder)` for every entry, in slot order, of
    /// a table a [`Scan`] accepted (runs are in quotient order: each run
    /// belongs to the next occupied quotient).
    pub fn for_each(&self, mut each: impl FnMut(u64, u64)) {
        let mut q: Option<u64> = None;
        for i in 0..self.len {
            let v = self.get(i);
            let r = v >> 3;
            if r == 0 {
                continue;
            }
            if v & CONTINUATION == 0 {
                let mut next = q.map_or(0, |q| q + 1);
                while next < self.len && !self.occupied(next) {
                    next += 1;
                }
                q = Some(next);
            }
            each(q.unwrap_or(0), r);
        }
    }
}

/// A walk over a table's slots in order that checks every invariant
/// bloomkit 0.1's operations kept, resumable so that a load in chunks
/// checks each chunk as it arrives. `quotients` bounds the quotients that
/// may be used, `empty_before` the slots that must be empty (a doubling's
/// source).
#[derive(Clone, Debug)]
pub struct Scan {
    next: u64,
    pending: u64,
    last_q: Option<u64>,
    in_run: bool,
    quotients: std::ops::Range<u64>,
    empty_before: u64,
}

impl Scan {
    pub fn new(quotients: std::ops::Range<u64>, empty_before: u64) -> Scan {
        Scan { next: 0, pending: 0, last_q: None, in_run: false, quotients, empty_before }
    }

    /// Checks slots `self.next .. upto`; `Err` names what is wrong.
    pub fn feed(&mut self, t: &Table, upto: u64) -> Result<(), &'static str> {
        let upto = upto.min(t.len);
        while self.next < upto {
            let i = self.next;
            let v = t.get(i);
            let r = v >> 3;
            if v & OCCUPIED != 0 {
                if !self.quotients.contains(&i) {
                    return Err("a slot outside the quotients in use is marked occupied");
                }
                if r == 0 {
                    return Err("an occupied slot is empty");
                }
                self.pending += 1;
            }
            if r == 0 {
                if v & (CONTINUATION | SHIFTED) != 0 {
                    return Err("an empty slot has metadata bits set");
                }
                if self.pending > 0 {
                    return Err("a run is missing");
                }
                self.in_run = false;
            } else {
                if i < self.empty_before {
                    return Err("a slot already migrated holds an entry");
                }
                if r.trailing_zeros() > t.fbits {
                    return Err("a remainder has no stop bit");
                }
                if v & CONTINUATION != 0 {
                    if !self.in_run || v & SHIFTED == 0 {
                        return Err("a continuation does not follow a run");
                    }
                } else {
                    if self.pending == 0 {
                        return Err("a run starts with no occupied quotient for it");
                    }
                    self.pending -= 1;
                    let mut q = self.last_q.map_or(0, |q| q + 1);
                    while !t.occupied(q) {
                        q += 1;
                    }
                    if (v & SHIFTED != 0) != (i != q) {
                        return Err("a run's shifted bit is wrong");
                    }
                    self.last_q = Some(q);
                    self.in_run = true;
                }
            }
            self.next += 1;
        }
        if self.next == t.len && self.pending > 0 {
            return Err("a run is missing at the end");
        }
        Ok(())
    }
}
