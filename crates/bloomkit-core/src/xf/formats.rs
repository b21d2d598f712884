//! The expandable filter's formats (encoding 1): the RDB value (over
//! [`FieldWriter`] and [`FieldReader`]), `DUMP` payloads of it, and
//! `XF.SCANDUMP` / `XF.LOADCHUNK` (a header, then the blocks, whole, in
//! chunks of at most [`CHUNK_BYTES`]). Encoding 0 (bloomkit 0.1) is read by
//! [`super::legacy`].
//!
//! The header's numbers, as little-endian `u64`s after the 8-byte magic
//! `BKXFLT01`: the error rate's bits, capacity, max capacity, items, the
//! hashing (0 keyed by a seed carried here, 1 murmur3, 2 keyed by a
//! server's deployment key, of which only the id is carried), the seed's two
//! halves (murmur3: the root and 0; deployment: the key's id and 0), the shape (quotient bits, first and last level, a byte each),
//! the directory's depth `D`, the number of blocks, and the bytes of blocks
//! the chunks carry. A block is stored in its one canonical form (see
//! [`Block::canonical_words`]), as little-endian words; its metadata word
//! says its length. Blocks come in address order; a block of depth `d`
//! covers `2^(D - d)` of the directory's `2^D` slots, so the blocks received
//! say which slots are filled. A chunk's iterator is the next slot plus one.
//!
//! The RDB value is the header's numbers as fields, then the state (0
//! complete, 1 a chunked load under way, 2 a chunked load of an encoding-0
//! dump under way), then, for 0 and 1, the slots filled and the blocks in
//! buffers of at most a chunk's size; for 2, the encoding-0 header and the
//! bytes received. **A filter in the middle of a chunked load is a value
//! like any other**: saved, copied, rewritten into the AOF (as the chunks it
//! has) and replicated with what it has, so the next chunk continues it
//! wherever the key went.
//!
//! Nothing decoded is trusted: the numbers against their ranges and each
//! other, sizes against the limit before they are allocated, every block
//! walked ([`Block::from_canonical`]) and placed (its depth against the
//! directory, its slots aligned), so that only states the operations make
//! load, and what loads saves to the same bytes.

use super::block::{Block, MAX_DEPTH};
use super::errors::XfError;
use super::filter::{ceil_log2_u64, own_bytes, HashKind, Hashing, Seed, Store, XfFilter, XfParams};
use super::legacy;
use super::loading::{Blocks, Loading};
use super::merge::assemble;
use super::{ENCODING_VERSION, TYPE_NAME};
use crate::common::dump::{own_type_id, PayloadReader, PayloadWriter};
use crate::common::fields::{FieldReader, FieldWriter};
use crate::common::memory::{Limits, OutOfMemory};

/// The module id of `bkit-xflt` at [`ENCODING_VERSION`], and of encoding 0.
pub const MODULE_ID: u64 = own_type_id(TYPE_NAME, ENCODING_VERSION);
pub const MODULE_ID_V0: u64 = own_type_id(TYPE_NAME, 0);

/// The SCANDUMP header's magic, then eleven `u64`s.
pub const MAGIC: &[u8; 8] = b"BKXFLT01";
pub const HEADER_LEN: usize = 8 + 11 * 8;

/// Everything but the blocks.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Header {
    params: XfParams,
    items: u64,
    hashing: Hashing,
    qbits: u32,
    first_level: u32,
    last_level: u32,
    depth: u32,
    blocks: u64,
    data_bytes: u64,
}

impl Header {
    fn numbers(&self) -> [u64; 11] {
        let p = &self.params;
        let (kind, s0, s1) = match self.hashing {
            Hashing::Keyed(Seed([a, b])) => (0, a, b),
            Hashing::Murmur { m0 } => (1, m0, 0),
            // A deployment key is the server's: only its id is written.
            Hashing::Deployment(_) | Hashing::Sealed { .. } => (2, self.hashing.key_id().unwrap_or(0), 0),
        };
        [
            p.error_rate.to_bits(),
            p.capacity,
            p.max_capacity,
            self.items,
            kind,
            s0,
            s1,
            u64::from(self.qbits) | u64::from(self.first_level) << 8 | u64::from(self.last_level) << 16,
            u64::from(self.depth),
            self.blocks,
            self.data_bytes,
        ]
    }

    /// The numbers checked against their ranges and each other.
    fn from_numbers(n: [u64; 11]) -> Result<Header, XfError> {
        let bad = XfError::BadData;
        let params = XfParams { error_rate: f64::from_bits(n[0]), capacity: n[1], max_capacity: n[2] };
        params.check().map_err(|_| bad("the error rate or a capacity is out of range"))?;
        if n[3] > params.max_capacity {
            return Err(bad("it holds more items than its maximum capacity"));
        }
        let hashing = match (n[4], n[5], n[6]) {
            (0, a, b) => Hashing::Keyed(Seed([a, b])),
            (1, m0, 0) if (64..1 << 42).contains(&m0) => Hashing::Murmur { m0 },
            // Loaded sealed: the caller gives it its key (`XfFilter::unseal`).
            (2, id, 0) => Hashing::Sealed { id },
            _ => return Err(bad("the hashing is not one bloomkit writes")),
        };
        if n[7] >> 24 != 0 {
            return Err(bad("the shape has unknown bits set"));
        }
        let (qbits, first, last) =
            ((n[7] & 0xff) as u32, (n[7] >> 8 & 0xff) as u32, (n[7] >> 16 & 0xff) as u32);
        if !(super::block::MIN_QBITS..=super::filter::GROW_QBITS).contains(&qbits)
            || first > last
            || last > 100
        {
            return Err(bad("the shape is out of range"));
        }
        let depth =
            u32::try_from(n[8]).ok().filter(|&d| d <= MAX_DEPTH).ok_or(bad("the directory is too deep"))?;
        let blocks = n[9];
        if blocks == 0 || blocks > 1u64 << depth || !super::filter::directory_fits(1u64 << depth, blocks + 1)
        {
            return Err(bad("the number of blocks does not fit the directory"));
        }
        if depth > 0 && qbits != super::filter::GROW_QBITS {
            return Err(bad("a filter of several blocks has blocks of another size"));
        }
        let root = hashing.root_bits();
        if first < root {
            return Err(bad("the shape is out of range"));
        }
        Ok(Header {
            params,
            items: n[3],
            hashing,
            qbits,
            first_level: first,
            last_level: last,
            depth,
            blocks,
            data_bytes: n[10],
        })
    }

    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..8].copy_from_slice(MAGIC);
        for (i, v) in self.numbers().iter().enumerate() {
            out[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Result<Header, XfError> {
        let h: &[u8; HEADER_LEN] = bytes.try_into().map_err(|_| XfError::BadData("the header's length"))?;
        if &h[..8] != MAGIC {
            return Err(XfError::BadData("not an expandable filter's header"));
        }
        let mut n = [0u64; 11];
        for (i, v) in n.iter_mut().enumerate() {
            *v = u64::from_le_bytes(h[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"));
        }
        Header::from_numbers(n)
    }

    /// An empty shell of this header, loading.
    fn loading(&self) -> XfFilter {
        XfFilter {
            params: self.params,
            seed: self.hashing.split().0,
            kind: self.hashing.split().1,
            items: self.items,
            mass: 0,
            qbits: self.qbits as u8,
            first_level: self.first_level as u8,
            last_level: self.last_level as u8,
            store: Store::Loading(Box::new(Loading::V1(Blocks {
                depth: self.depth,
                total: self.blocks,
                data_bytes: self.data_bytes,
                blocks: Vec::new(),
                slots: 0,
                received: 0,
                block_bytes: 0,
            }))),
        }
    }
}

/// Filling a load's blocks (the state is `loading`'s).
trait Take {
    fn take(&mut self, data: &[u8], qbits: u32, base_bytes: u64, limits: Limits) -> Result<(), XfError>;
}

impl Take for Blocks {
    /// Places the blocks of `data` after those received: every block
    /// checked and aligned, the limit checked; all or nothing.
    fn take(&mut self, data: &[u8], qbits: u32, base_bytes: u64, limits: Limits) -> Result<(), XfError> {
        let mut words = bytes_to_words(data)?;
        let mut placed: Vec<Block> = Vec::new();
        let mut slots = self.slots;
        let all = 1u64 << self.depth;
        let mut added = 0u64;
        let mut at = 0usize;
        while at < words.len() {
            if self.blocks.len() as u64 + placed.len() as u64 >= self.total {
                return Err(XfError::BadChunk("more blocks than the header says"));
            }
            let len = Block::canonical_len(words[at])
                .ok_or(XfError::BadData("a block's metadata is out of range"))?;
            if at + len > words.len() {
                return Err(XfError::BadChunk("a block runs past the chunk's end"));
            }
            let mut own: Vec<u64> = Vec::new();
            own.try_reserve_exact(len).map_err(|_| OutOfMemory)?;
            own.extend_from_slice(&words[at..at + len]);
            let depth = super::block::Meta::depth_of(words[at]);
            if depth > self.depth || (self.depth == 0) != (depth == 0) {
                return Err(XfError::BadData("a block is deeper than the directory"));
            }
            let b = Block::from_canonical(own.into_boxed_slice(), qbits, depth).map_err(XfError::BadData)?;
            let span = 1u64 << (self.depth - depth);
            if !slots.is_multiple_of(span) || slots + span > all {
                return Err(XfError::BadData("a block is not where its depth places it"));
            }
            slots += span;
            added += b.bytes();
            limits.check(base_bytes + self.block_bytes + added)?;
            placed.try_reserve(1).map_err(|_| OutOfMemory)?;
            placed.push(b);
            at += len;
        }
        words.clear();
        let grown = self.blocks.len() + placed.len();
        super::block::reserve_list(&mut self.blocks, grown)?;
        self.received += data.len() as u64;
        self.blocks.extend(placed);
        self.block_bytes += added;
        self.slots = slots;
        Ok(())
    }
}

/// Little-endian bytes as words (a whole number of them).
/// The blocks a data chunk of `XF.SCANDUMP` holds, in order: each one's
/// bytes and depth (what a client needs to cut a load into smaller pieces
/// at block boundaries); `None` if a block's metadata is out of range.
pub fn chunk_blocks(data: &[u8]) -> Option<Vec<(usize, u32)>> {
    let words = bytes_to_words(data).ok()?;
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < words.len() {
        let len = Block::canonical_len(words[at]).filter(|&len| len > 0 && at + len <= words.len())?;
        out.push((len * 8, super::block::Meta::depth_of(words[at])));
        at += len;
    }
    Some(out)
}

fn bytes_to_words(data: &[u8]) -> Result<Vec<u64>, XfError> {
    if !data.len().is_multiple_of(8) {
        return Err(XfError::BadChunk("a chunk is not a whole number of 8-byte words"));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(data.len() / 8).map_err(|_| OutOfMemory)?;
    v.extend(data.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))));
    Ok(v)
}

impl XfFilter {
    fn header(&self) -> Header {
        let (depth, blocks, data_bytes) = match &self.store {
            Store::One(b) => (0, 1, canonical_bytes(b)),
            Store::Many(d) => {
                (d.slots.depth(), d.slots.count() as u64, d.slots.iter().map(canonical_bytes).sum())
            }
            Store::Loading(l) => match &**l {
                Loading::V1(b) => (b.depth, b.total, b.data_bytes),
                Loading::V0 { .. } => (0, 1, 0),
            },
        };
        Header {
            params: self.params,
            items: self.items,
            hashing: self.hashing(),
            qbits: u32::from(self.qbits),
            first_level: u32::from(self.first_level),
            last_level: u32::from(self.last_level),
            depth,
            blocks,
            data_bytes,
        }
    }

    // ---- RDB ----

    /// Writes the value at [`ENCODING_VERSION`].
    pub fn save(&self, w: &mut dyn FieldWriter) {
        let h = self.header();
        let n = h.numbers();
        w.double(self.params.error_rate);
        for v in &n[1..] {
            w.unsigned(*v);
        }
        match &self.store {
            Store::Loading(l) => match &**l {
                Loading::V1(b) => {
                    w.unsigned(1);
                    w.unsigned(b.slots);
                    self.save_blocks(w);
                }
                Loading::V0 { header, v0, loaded } => {
                    w.unsigned(2);
                    w.buffer(&header[..]);
                    w.unsigned(*loaded);
                    w.buffer(&v0.bytes(0, *loaded));
                }
            },
            _ => {
                w.unsigned(0);
                w.unsigned(1u64 << h.depth);
                self.save_blocks(w);
            }
        }
    }

    /// The blocks as buffers of at most a chunk's size, their count first.
    fn save_blocks(&self, w: &mut dyn FieldWriter) {
        let chunks: Vec<Vec<u8>> = self.block_chunks().map(|(_, c)| c).collect();
        w.unsigned(chunks.len() as u64);
        for c in &chunks {
            w.buffer(c);
        }
    }

    /// Reads a value of encoding 1 (or 0, bloomkit 0.1's, converted).
    pub fn load(r: &mut dyn FieldReader, encver: i32, limits: Limits) -> Result<XfFilter, XfError> {
        match encver {
            0 => return legacy::load(r, limits),
            ENCODING_VERSION => {}
            _ => return Err(XfError::BadData("unknown encoding version")),
        }
        let mut n = [0u64; 11];
        n[0] = r.double()?.to_bits();
        for v in &mut n[1..] {
            *v = r.unsigned()?;
        }
        let h = Header::from_numbers(n)?;
        let mut f = h.loading();
        match r.unsigned()? {
            state @ (0 | 1) => {
                let slots = r.unsigned()?;
                let chunks = r.unsigned()?;
                if chunks > h.blocks {
                    return Err(XfError::BadData("more chunks than blocks"));
                }
                for _ in 0..chunks {
                    let data = r.buffer()?;
                    f.take_chunk_data(&data, limits)?;
                }
                let Store::Loading(l) = &f.store else { unreachable!("a shell loads") };
                let Loading::V1(b) = &**l else { unreachable!("a shell of encoding 1") };
                if b.slots != slots {
                    return Err(XfError::BadData("the blocks do not fill the slots it says"));
                }
                if state == 0 {
                    if !b.complete() {
                        return Err(XfError::BadData("the blocks do not cover every hash"));
                    }
                    f.finish_load(limits)?;
                } else if b.complete() {
                    return Err(XfError::BadData("a load under way has every block"));
                }
                Ok(f)
            }
            2 => {
                let header = r.buffer()?;
                let loaded = r.unsigned()?;
                let data = r.buffer()?;
                if data.len() as u64 != loaded {
                    return Err(XfError::BadData("the bytes received do not match their count"));
                }
                let mut g = XfFilter::start_legacy_load(&header, limits)?;
                if loaded > 0 {
                    g.load_chunk(1 + loaded, &data, limits)?;
                }
                if !g.is_loading() {
                    return Err(XfError::BadData("a load under way has every block"));
                }
                Ok(g)
            }
            _ => Err(XfError::BadData("unknown state")),
        }
    }

    /// The value as a `DUMP` payload (what an AOF rewrite sends as `RESTORE`).
    pub fn dump_payload(&self) -> Vec<u8> {
        let mut w = PayloadWriter::new(MODULE_ID);
        self.save(&mut w);
        w.finish()
    }

    /// Reads a `DUMP` payload of a `bkit-xflt` value (either encoding), its CRC checked.
    pub fn from_payload(payload: &[u8], limits: Limits) -> Result<XfFilter, XfError> {
        let mut r = PayloadReader::new(payload)?;
        let encver = match r.type_id {
            MODULE_ID => ENCODING_VERSION,
            MODULE_ID_V0 => 0,
            _ => return Err(XfError::BadData("the payload holds another type")),
        };
        let f = XfFilter::load(&mut r, encver, limits)?;
        if !r.at_end() {
            return Err(XfError::BadData("the payload has fields past the value"));
        }
        Ok(f)
    }

    // ---- XF.SCANDUMP / XF.LOADCHUNK ----

    /// The header `XF.SCANDUMP key 0` returns (with iterator 1).
    pub fn encode_header(&self) -> Vec<u8> {
        match &self.store {
            Store::Loading(l) => match &**l {
                Loading::V0 { header, .. } => header.to_vec(),
                Loading::V1(_) => self.header().encode().to_vec(),
            },
            _ => self.header().encode().to_vec(),
        }
    }

    /// The block bytes the chunks after this header carry (a transfer's
    /// progress), read without allocating anything; `None` for a header
    /// that is not one (an encoding-0 header's slot bytes too).
    pub fn header_data_len(header: &[u8]) -> Option<u64> {
        if header.len() == HEADER_LEN {
            return Header::decode(header).ok().map(|h| h.data_bytes);
        }
        legacy::header_data_len(header)
    }

    /// A filter as the header describes, to be filled by the chunks that
    /// follow; until the last, it answers as empty and refuses writes.
    /// Takes encoding 0's header too (a dump made by bloomkit 0.1).
    pub fn from_header(header: &[u8], limits: Limits) -> Result<XfFilter, XfError> {
        if header.starts_with(legacy::MAGIC) {
            return XfFilter::start_legacy_load(header, limits);
        }
        let h = Header::decode(header)?;
        limits.check(own_bytes())?;
        Ok(h.loading())
    }

    fn start_legacy_load(header: &[u8], limits: Limits) -> Result<XfFilter, XfError> {
        let v0 = legacy::from_header(header, limits)?;
        let hdr: Box<[u8; 80]> =
            Box::new(header.try_into().map_err(|_| XfError::BadData("the header's length"))?);
        let params = v0.params();
        let m0 = legacy::first_quotients(params.capacity);
        let root = ceil_log2_u64(m0);
        let mut f = XfFilter {
            params,
            seed: [m0, 0],
            kind: HashKind::Murmur,
            items: 0,
            mass: 0,
            qbits: root.min(super::filter::GROW_QBITS) as u8,
            first_level: root as u8,
            last_level: (root + legacy::horizon(&params)).min(255) as u8,
            store: Store::Loading(Box::new(Loading::V0 { header: hdr, v0: Box::new(v0), loaded: 0 })),
        };
        if let Store::Loading(l) = &f.store {
            if let Loading::V0 { v0, .. } = &**l {
                if v0.data_len() == 0 {
                    f.finish_load(limits)?;
                }
            }
        }
        Ok(f)
    }

    /// Chunks of whole blocks from directory slot `slot` on, in address
    /// order: `(next slot, bytes)`, `None` at the end or off a block's start.
    fn blocks_from(&self, slot: u64) -> Option<(u64, Vec<u8>)> {
        if self.is_loading() {
            return None;
        }
        let depth = self.dir_depth();
        let all = 1u64 << depth;
        let mut at = slot;
        let mut out: Vec<u8> = Vec::new();
        while at < all {
            let b = self.block(at as usize);
            let span = 1u64 << (depth - b.depth());
            if !at.is_multiple_of(span) {
                return None;
            }
            let words = b.canonical_words().ok()?;
            if !out.is_empty() && (out.len() + words.len() * 8) as u64 > super::CHUNK_BYTES {
                break;
            }
            out.extend(words.iter().flat_map(|w| w.to_le_bytes()));
            at += span;
        }
        if out.is_empty() {
            return None;
        }
        Some((at, out))
    }

    /// The reply to `XF.SCANDUMP key iter`: the next iterator and a chunk,
    /// `None` past the end (the reply is then `0` and an empty string).
    pub fn chunk_at(&self, iter: u64) -> Option<(u64, Vec<u8>)> {
        if iter == 0 {
            return Some((1, self.encode_header()));
        }
        let (next, data) = self.blocks_from(iter - 1)?;
        Some((next + 1, data))
    }

    /// The block chunks of the value, received ones for a load under way:
    /// `(iterator, chunk)` as LOADCHUNK takes them.
    fn block_chunks(&self) -> Box<dyn Iterator<Item = (u64, Vec<u8>)> + '_> {
        match &self.store {
            Store::Loading(l) => match &**l {
                Loading::V1(b) => {
                    // Received blocks, regrouped: their slots follow from their depths.
                    let mut out = Vec::new();
                    let mut cur: Vec<u8> = Vec::new();
                    let mut slots = 0u64;
                    for blk in &b.blocks {
                        let words = blk.canonical_words().unwrap_or_default();
                        if !cur.is_empty() && (cur.len() + words.len() * 8) as u64 > super::CHUNK_BYTES {
                            out.push((slots + 1, std::mem::take(&mut cur)));
                        }
                        cur.extend(words.iter().flat_map(|w| w.to_le_bytes()));
                        slots += 1u64 << (b.depth - blk.depth());
                    }
                    if !cur.is_empty() {
                        out.push((slots + 1, cur));
                    }
                    Box::new(out.into_iter())
                }
                Loading::V0 { v0, loaded, .. } => {
                    let (v0, loaded) = (&**v0, *loaded);
                    let mut offset = 0u64;
                    Box::new(std::iter::from_fn(move || {
                        if offset >= loaded {
                            return None;
                        }
                        let take = (loaded - offset).min(super::CHUNK_BYTES);
                        let data = v0.bytes(offset, take);
                        offset += take;
                        Some((1 + offset, data))
                    }))
                }
            },
            _ => {
                let mut iter = 1u64;
                Box::new(std::iter::from_fn(move || {
                    let (next, data) = self.blocks_from(iter - 1)?;
                    iter = next + 1;
                    Some((iter, data))
                }))
            }
        }
    }

    /// Every `(iterator, chunk)` pair a SCANDUMP returns, header first:
    /// what `XF.LOADCHUNK key iterator chunk` takes in turn. A filter in the
    /// middle of a load gives what it received (its AOF rewrite and digest).
    pub fn chunks(&self) -> impl Iterator<Item = (u64, Vec<u8>)> + '_ {
        std::iter::once((1, self.encode_header())).chain(self.block_chunks())
    }

    /// `XF.LOADCHUNK key iter data` after the header: `data` must continue
    /// the load where the previous chunk ended (`iter` is what SCANDUMP
    /// returned with it); its blocks are checked as they arrive, and the
    /// filter answers once the last is in. An error changes nothing.
    pub fn load_chunk(&mut self, iter: u64, data: &[u8], limits: Limits) -> Result<(), XfError> {
        let Store::Loading(l) = &mut self.store else {
            return Err(XfError::BadChunk(
                "the filter is not being loaded; send the header (iterator 1) first",
            ));
        };
        if data.is_empty() {
            return Err(XfError::BadChunk("a chunk is empty"));
        }
        let done = match &mut **l {
            Loading::V1(b) => {
                let before = (b.slots, b.blocks.len());
                b.take(data, u32::from(self.qbits), own_bytes(), limits)?;
                if iter != b.slots + 1 {
                    // Undo: the chunk did not end where its iterator says.
                    b.blocks.truncate(before.1);
                    b.slots = before.0;
                    b.received -= data.len() as u64;
                    return Err(XfError::BadChunk(
                        "chunks must be loaded whole and in the order XF.SCANDUMP gave them",
                    ));
                }
                b.complete()
            }
            Loading::V0 { v0, loaded, .. } => {
                let offset = iter
                    .checked_sub(1)
                    .and_then(|i| i.checked_sub(data.len() as u64))
                    .ok_or(XfError::BadChunk("the iterator does not match the chunk's length"))?;
                if offset != *loaded {
                    return Err(XfError::BadChunk(
                        "chunks must be loaded whole and in the order XF.SCANDUMP gave them",
                    ));
                }
                v0.write(offset, data)?;
                *loaded += data.len() as u64;
                *loaded == v0.data_len()
            }
        };
        if done {
            self.finish_load(limits)?;
        }
        Ok(())
    }

    /// For the RDB reader: a buffer of blocks (no iterator to check).
    fn take_chunk_data(&mut self, data: &[u8], limits: Limits) -> Result<(), XfError> {
        let qbits = u32::from(self.qbits);
        let Store::Loading(l) = &mut self.store else { unreachable!("a shell") };
        let Loading::V1(b) = &mut **l else { unreachable!("encoding 1") };
        b.take(data, qbits, own_bytes(), limits)
    }

    /// Every block in: the filter as the blocks make it (checked whole).
    /// An error leaves the load as it was.
    fn finish_load(&mut self, limits: Limits) -> Result<(), XfError> {
        let hashing = self.hashing();
        let Store::Loading(l) = &mut self.store else { return Ok(()) };
        let built = match &mut **l {
            Loading::V1(b) => {
                if b.blocks.len() as u64 != b.total {
                    return Err(XfError::BadData("fewer blocks than the header says"));
                }
                if b.received != b.data_bytes {
                    return Err(XfError::BadData("the blocks' bytes do not match the header"));
                }
                assemble(
                    self.params,
                    hashing,
                    self.items,
                    u32::from(self.qbits),
                    u32::from(self.first_level),
                    u32::from(self.last_level),
                    &mut b.blocks,
                    None,
                    limits,
                )?
            }
            Loading::V0 { v0, .. } => match v0.as_any_mut().downcast_mut::<legacy::V0>() {
                Some(v0) => v0.convert(limits)?,
                None => return Err(XfError::BadData("an encoding-0 load of another kind")),
            },
        };
        *self = built;
        Ok(())
    }
}

/// Bytes of a block's canonical form.
fn canonical_bytes(b: &Block) -> u64 {
    b.canonical_word_count().map_or(0, |w| w as u64 * 8)
}

impl crate::common::value::FamilyValue for XfFilter {
    const TYPE_NAME: &'static str = super::TYPE_NAME;
    const ENCODING_VERSION: i32 = super::ENCODING_VERSION;
    type Error = XfError;

    fn load(r: &mut dyn FieldReader, how: crate::common::value::Loading) -> Result<XfFilter, XfError> {
        XfFilter::load(r, how.encver, how.limits)
    }
    fn save(&mut self, w: &mut dyn FieldWriter) {
        XfFilter::save(self, w)
    }
    fn size_bytes(&self) -> u64 {
        XfFilter::size_bytes(self)
    }
    fn try_clone(&self) -> Result<XfFilter, XfError> {
        XfFilter::try_clone(self)
    }
    fn relocate(&mut self, from: usize, to: &mut impl crate::common::memory::Relocate) -> Option<usize> {
        XfFilter::relocate(self, from, to)
    }
}
