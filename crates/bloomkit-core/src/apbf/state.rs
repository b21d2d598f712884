//! The sliding-window filter's state as bytes: one format for RDB values,
//! DUMP payloads, `APBF.SCANDUMP`/`APBF.LOADCHUNK` chunks and state files
//! (a header, then the body), plus the first format, read and never
//! written. Nothing decoded is trusted: sizes are checked before allocating.

use super::*;
use crate::common::memory::{Limits, Modulus};
use crate::common::sizing::is_rate;

impl Apbf {
    /// The filter as bytes (RDB, DUMP): [`Apbf::encode_header`], then the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.encode_header();
        out.extend_from_slice(&self.bits);
        out
    }

    /// Everything but the body, in [`HEADER_LEN`] bytes.
    pub fn encode_header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN);
        out.extend_from_slice(MAGIC);
        for v in [
            u64::from(self.shape.k),
            u64::from(self.shape.l),
            self.shape.slice_bits,
            self.shape.generation,
            self.error.to_bits(),
            match self.window {
                Window::Count => 0,
                Window::Time { millis } => millis,
            },
            u64::from(self.front),
            self.in_generation,
            self.generation_started_ms,
            self.generations,
            u64::from(self.shape.window_generations),
            self.tick_ms,
            self.clock_ms,
            self.early_losses,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// The state's body: the slices, physical order, then the generation
    /// counts and times.
    pub fn bits(&self) -> &[u8] {
        &self.bits
    }

    /// Reads [`Apbf::encode`]'s bytes (or those of the first format),
    /// checking every field against the others, the length and `max_bytes`
    /// before allocating anything.
    pub fn decode(data: &[u8], max_bytes: Option<u64>) -> Result<Apbf, ApbfError> {
        let (f, header_len) = Apbf::check_state(data, max_bytes)?;
        let mut bits = Vec::new();
        bits.try_reserve_exact(f.state_len()).map_err(|_| ApbfError::OutOfMemory)?;
        bits.extend_from_slice(&data[header_len..]);
        f.with_body(bits)
    }

    /// [`Apbf::decode`] over a buffer it may keep (RDB and DUMP loads), so
    /// that a large filter is not held twice while it loads.
    pub fn decode_owned(mut data: Vec<u8>, max_bytes: Option<u64>) -> Result<Apbf, ApbfError> {
        let (f, header_len) = Apbf::check_state(&data, max_bytes)?;
        data.drain(..header_len);
        // The header's room is given back (a loaded filter would keep it).
        data.shrink_to_fit();
        f.with_body(data)
    }

    /// The filter a whole state describes, with an empty body, and its
    /// header's length; the body's length is checked.
    pub(super) fn check_state(data: &[u8], max_bytes: Option<u64>) -> Result<(Apbf, usize), ApbfError> {
        let header_len = Apbf::header_len(data)?;
        let (header, body) = data.split_at(header_len.min(data.len()));
        let f = Apbf::parse_header(header, max_bytes)?;
        let expected = if header_len == HEADER_LEN_V1 { f.last_add_at(0) } else { f.state_len() };
        if body.len() != expected {
            return Err(ApbfError::BadState("the body has the wrong length"));
        }
        Ok((f, header_len))
    }

    /// Bytes of the body, from the shape (checked when the header was).
    pub(super) fn state_len(&self) -> usize {
        self.shape.bytes().unwrap_or(0) as usize
    }

    /// Takes a checked body (a first-format one lacks the add times).
    pub(super) fn with_body(mut self, mut bits: Vec<u8>) -> Result<Apbf, ApbfError> {
        let first_format = bits.len() < self.state_len();
        if first_format {
            bits.try_reserve_exact(self.state_len() - bits.len()).map_err(|_| ApbfError::OutOfMemory)?;
            bits.resize(self.state_len(), 0);
        }
        self.bits = bits;
        if first_format {
            self.date_v1_generations();
        }
        self.undated_v1 = false;
        Ok(self)
    }

    /// The length of the header `data` starts with, from its magic.
    pub fn header_len(data: &[u8]) -> Result<usize, ApbfError> {
        match data.get(..MAGIC.len()) {
            Some(m) if m == MAGIC => Ok(HEADER_LEN),
            Some(m) if m == MAGIC_V1 => Ok(HEADER_LEN_V1),
            _ => Err(ApbfError::BadState("not a sliding-window filter state")),
        }
    }

    /// A filter with a header's fields and an empty body, checked and
    /// compared with `max_bytes` before anything is allocated. Takes the
    /// header of either format: a first-format filter keeps its shape (one
    /// generation of slack, ticks of `W / l`), gaining volume ends.
    pub fn from_header(header: &[u8], max_bytes: Option<u64>) -> Result<Apbf, ApbfError> {
        let mut f = Apbf::parse_header(header, max_bytes)?;
        f.bits = Apbf::allocate(&f.shape, Limits { max_bytes, headroom: None })?;
        Ok(f)
    }

    /// Every check of a header, with no body allocated.
    pub(super) fn parse_header(header: &[u8], max_bytes: Option<u64>) -> Result<Apbf, ApbfError> {
        let bad = ApbfError::BadState;
        let v1 = match Apbf::header_len(header)? {
            len if len != header.len() => return Err(bad("the header has the wrong length")),
            len => len == HEADER_LEN_V1,
        };
        let field = |i: usize| u64::from_le_bytes(header[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"));
        let (k, l, slice_bits, generation) = (field(0), field(1), field(2), field(3));
        let error = f64::from_bits(field(4));
        let max = u64::from(MAX_SLICES);
        if k == 0 || l == 0 || k > max || l > max || k + l > max {
            return Err(bad("slice counts out of range"));
        }
        if slice_bits == 0 || generation == 0 || !is_rate(error) {
            return Err(bad("sizes out of range"));
        }
        let window = match field(5) {
            0 => Window::Count,
            millis => Window::Time { millis },
        };
        let (front, in_generation) = (field(6), field(7));
        // The first format let time windows grow a generation without bound,
        // and such a filter saves in this format as it is (the next add ends
        // that generation): a time window's count is not held to `g` in
        // either format, so that what the first format loads loads again.
        if front >= k + l || (window == Window::Count && in_generation >= generation) {
            return Err(bad("ring position out of range"));
        }
        let (window_generations, tick_ms, clock_ms, early_losses) = if v1 {
            let tick = match window {
                Window::Count => 0,
                Window::Time { millis } => millis.div_ceil(l),
            };
            (l, tick, field(8), 0)
        } else {
            (field(10), field(11), field(12), field(13))
        };
        let timed = window != Window::Count;
        if window_generations == 0 || window_generations > l || (timed != (tick_ms > 0)) {
            return Err(bad("window generations or tick out of range"));
        }
        // Times travel in replication as signed 64-bit integers.
        if field(8) > i64::MAX as u64 || clock_ms > i64::MAX as u64 {
            return Err(bad("times out of range"));
        }
        let shape = ApbfShape {
            k: k as u32,
            l: l as u32,
            slice_bits,
            generation,
            window_generations: window_generations as u32,
        };
        let bytes = shape.bytes().filter(|&b| usize::try_from(b).is_ok()).ok_or(bad("sizes out of range"))?;
        if let Some(limit) = max_bytes {
            if bytes > limit {
                return Err(ApbfError::TooLarge { bytes, limit });
            }
        }
        Ok(Apbf {
            shape,
            error,
            window,
            tick_ms,
            bits: Vec::new(),
            front: front as u32,
            in_generation,
            generation_started_ms: field(8),
            generations: field(9),
            clock_ms,
            early_losses,
            undated_v1: v1 && window != Window::Count,
            modulus: Modulus::new(slice_bits),
        })
    }

    /// A first-format time window kept no add times: each generation's is
    /// taken as the latest it can have been (its end, or for the current
    /// one a tick after its start).
    pub(super) fn date_v1_generations(&mut self) {
        if self.window == Window::Count {
            return;
        }
        for j in 0..self.shape.slices() {
            let p = self.physical(j);
            if self.count(p) > 0 {
                let ago = u64::from(j.saturating_sub(1)).saturating_mul(self.tick_ms);
                let ended = self.generation_started_ms.saturating_sub(ago);
                // The current generation: the latest its adds can have been
                // made at before the first format's clock ended it.
                let current = self.generation_started_ms.saturating_add(self.tick_ms.saturating_sub(1));
                let at = if j == 0 { current } else { ended };
                self.set_last_add(p, at);
            }
        }
    }

    /// One step of `APBF.SCANDUMP`, the inverse of `APBF.LOADCHUNK`: iter 0
    /// is the header (next: 1); iter `1 + offset` is the body from `offset`,
    /// at most [`crate::common::MAX_CHUNK`] bytes (next: 1 + its end); past
    /// the body, `(0, [])`. Each `(iter, data)` loads with
    /// `APBF.LOADCHUNK key iter data`.
    pub fn scan_chunk(&self, iter: u64) -> (u64, std::borrow::Cow<'_, [u8]>) {
        if iter == 0 {
            return (1, std::borrow::Cow::Owned(self.encode_header()));
        }
        let start = usize::try_from(iter - 1).unwrap_or(usize::MAX);
        if start >= self.bits.len() {
            return (0, std::borrow::Cow::Borrowed(&[]));
        }
        let end = start.saturating_add(crate::common::MAX_CHUNK as usize).min(self.bits.len());
        (1 + end as u64, std::borrow::Cow::Borrowed(&self.bits[start..end]))
    }

    /// Copies `data` into the body from byte `offset` (chunked loading).
    pub fn load_bits(&mut self, offset: u64, data: &[u8]) -> Result<(), ApbfError> {
        let start = usize::try_from(offset).map_err(|_| ApbfError::BadChunk)?;
        let end =
            start.checked_add(data.len()).filter(|&e| e <= self.bits.len()).ok_or(ApbfError::BadChunk)?;
        self.bits[start..end].copy_from_slice(data);
        if self.undated_v1 {
            self.date_v1_generations();
        }
        Ok(())
    }
}

/// The length of the body that follows a header of either format (what
/// `APBF.SCANDUMP` sends and a state file holds after it), checked.
pub fn state_body_len(header: &[u8]) -> Result<u64, ApbfError> {
    let f = Apbf::parse_header(header, None)?;
    Ok(if header.len() == HEADER_LEN_V1 { f.last_add_at(0) } else { f.state_len() } as u64)
}

/// The first bytes of an encoded filter (and of a saved one).
pub const MAGIC: &[u8; 8] = b"BKAPBF02";
/// The first format (bloomkit 0.1 before burst-safe windows): read, never written.
pub const MAGIC_V1: &[u8; 8] = b"BKAPBF01";
/// Bytes of [`Apbf::encode_header`].
pub const HEADER_LEN: usize = 8 + 14 * 8;
/// Bytes of a first-format header.
pub const HEADER_LEN_V1: usize = 8 + 10 * 8;

/// The state as one string (the RDB value): encoding 1, the first format
/// (`BKAPBF01`), and 2, burst-safe windows (`BKAPBF02`), both load; 2 is
/// written.
impl crate::common::value::FamilyValue for Apbf {
    const TYPE_NAME: &'static str = super::TYPE_NAME;
    const ENCODING_VERSION: i32 = 2;
    type Error = ApbfError;

    fn load(
        r: &mut dyn crate::common::fields::FieldReader,
        how: crate::common::value::Loading,
    ) -> Result<Apbf, ApbfError> {
        if !(1..=Self::ENCODING_VERSION).contains(&how.encver) {
            return Err(ApbfError::BadState("its encoding version is unknown"));
        }
        let buffer = r.buffer().map_err(|_| ApbfError::BadState("it is cut short"))?;
        Apbf::decode_owned(buffer.into_vec(), how.limits.max_bytes)
    }
    fn save(&mut self, w: &mut dyn crate::common::fields::FieldWriter) {
        w.buffer(&self.encode())
    }
    /// The struct and its state.
    fn size_bytes(&self) -> u64 {
        (std::mem::size_of::<Apbf>() + self.bytes()) as u64
    }
    fn try_clone(&self) -> Result<Apbf, ApbfError> {
        Apbf::try_clone(self)
    }
    fn relocate(&mut self, from: usize, to: &mut impl crate::common::memory::Relocate) -> Option<usize> {
        Apbf::relocate(self, from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apbf::filter::tests::new;

    #[test]
    fn encoding_round_trips_and_rejects_damage() {
        let mut f = new(0.01, 500, Window::Time { millis: 60_000 }, 1_000);
        for i in 0..700u32 {
            f.add(&i.to_le_bytes(), 1_000 + u64::from(i));
        }
        let bytes = f.encode();
        assert_eq!(Apbf::decode(&bytes, None).unwrap(), f);
        assert_eq!(f.try_clone().unwrap(), f);
        assert!(Apbf::decode(&bytes[..bytes.len() - 1], None).is_err());
        assert!(matches!(
            Apbf::decode(&bytes, Some(bytes.len() as u64 / 2)),
            Err(ApbfError::TooLarge { .. })
        ));
        let mut bad = bytes.clone();
        bad[8] = 0; // k = 0
        assert!(Apbf::decode(&bad, None).is_err());
        let mut bad = bytes.clone();
        bad[8 + 6 * 8] = 0xff; // front beyond the ring
        assert!(Apbf::decode(&bad, None).is_err());
        let mut bad = bytes;
        bad[8 + 11 * 8..8 + 12 * 8].fill(0); // a time window without a tick
        assert!(Apbf::decode(&bad, None).is_err());
    }

    #[test]
    fn scan_chunks_load_back_into_the_same_filter() {
        let mut f = new(0.01, 300, Window::Time { millis: 60_000 }, 5);
        for i in 0..500u32 {
            f.add(&i.to_le_bytes(), 5 + u64::from(i));
        }
        let (next, header) = f.scan_chunk(0);
        let mut g = Apbf::from_header(&header, None).unwrap();
        let mut iter = next;
        loop {
            let (next, data) = f.scan_chunk(iter);
            if next == 0 {
                break;
            }
            g.load_bits(iter - 1, &data).unwrap();
            iter = next;
        }
        assert_eq!(g, f);
        assert_eq!(f.scan_chunk(u64::MAX).0, 0);
    }

    /// A state of the first format (as written by bloomkit before volume
    /// ends) still loads, keeps its answers, and gains volume ends.
    #[test]
    fn first_format_states_load() {
        let mut f = new(0.01, 500, Window::Time { millis: 60_000 }, 1_000);
        for i in 0..300u32 {
            f.add(&i.to_le_bytes(), 1_000 + u64::from(i));
        }
        // Rebuild the first format's bytes: the old magic, ten fields, and
        // a body without the add times.
        let v2 = f.encode();
        let mut v1 = MAGIC_V1.to_vec();
        v1.extend_from_slice(&v2[8..8 + 10 * 8]);
        let body = &v2[HEADER_LEN..];
        v1.extend_from_slice(&body[..body.len() - 8 * f.shape().slices() as usize]);
        let old = Apbf::decode(&v1, None).unwrap();
        for i in 0..300u32 {
            assert!(old.contains(&i.to_le_bytes(), 2_000));
        }
        assert!(Apbf::from_header(&v1[..HEADER_LEN_V1], None).is_ok());
    }

    /// The first format's bytes of a filter: its magic, ten fields and a
    /// body without the add times.
    fn first_format(f: &Apbf) -> Vec<u8> {
        let v2 = f.encode();
        let mut v1 = MAGIC_V1.to_vec();
        v1.extend_from_slice(&v2[8..8 + 10 * 8]);
        let body = &v2[HEADER_LEN..];
        v1.extend_from_slice(&body[..body.len() - 8 * f.shape().slices() as usize]);
        v1
    }

    /// Found reviewing the formats for round trips (issue 31): the first
    /// format let a time window's generation hold more than `g` adds, and
    /// such a state loaded, but its save (in this format) was refused, so
    /// a server that loaded it could not load its own RDB file again.
    #[test]
    fn a_first_format_overfull_generation_saves_and_loads_again() {
        let mut f = new(0.01, 500, Window::Time { millis: 60_000 }, 1_000);
        for i in 0..100u32 {
            f.add(&i.to_le_bytes(), 1_000 + u64::from(i));
        }
        let mut v1 = first_format(&f);
        let g = f.shape().generation;
        v1[8 + 7 * 8..8 + 8 * 8].copy_from_slice(&(g + 3).to_le_bytes());
        let old = Apbf::decode(&v1, None).unwrap();
        assert_eq!(old.items_in_generation(1_100), g + 3);
        let saved = old.encode();
        let mut back = Apbf::decode(&saved, None).expect("its own save loads");
        assert_eq!(back, old);
        assert_eq!(back.encode(), saved);
        // The next add ends the overfull generation, in both.
        let mut old = old;
        assert_eq!(old.add(b"new", 1_200), back.add(b"new", 1_200));
        assert_eq!(old, back);
        assert_eq!(old.items_in_generation(1_200), 0);
        // A count window's generation is still held to `g`.
        let c = new(0.01, 500, Window::Count, 0);
        let mut bytes = c.encode();
        let g = c.shape().generation;
        bytes[8 + 7 * 8..8 + 8 * 8].copy_from_slice(&g.to_le_bytes());
        assert!(Apbf::decode(&bytes, None).is_err());
        let mut v1 = first_format(&c);
        v1[8 + 7 * 8..8 + 8 * 8].copy_from_slice(&g.to_le_bytes());
        assert!(Apbf::decode(&v1, None).is_err());
    }
}
