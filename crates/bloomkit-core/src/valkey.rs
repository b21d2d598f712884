//! valkey-bloom's filters (data type `bloomfltr`, encoding version 1), so
//! that a Valkey user can switch to bloomkit on the same data directory and
//! every filter answers as before, and can switch back.
//!
//! An [`Object`] is a list of sub-filters, oldest first, each one serialized
//! as the `bloomfilter` crate (3.x) lays it out:
//!
//! ```text
//! u8 version = 1 | u64 LE bitmap bytes L | u32 LE k | [32] seed | L bytes of bits
//! ```
//!
//! Bit `b` is byte `b / 8`, mask `1 << (b % 8)`. An item's bits come from
//! two SipHash-1-3 hashes of its bytes (as Rust's `Hash for [u8]` feeds
//! them: an 8-byte little-endian length, then the bytes), keyed by the two
//! halves of the seed: `h0`, `h1`, then `(h0 + i*h1 mod 2^64) mod P` for
//! `i >= 2`, each taken modulo `8L`. Every sub-filter of an object shares the
//! first one's seed: a scale-out copies it, so replicas and AOF replays that
//! apply the same writes to the same object make the same sub-filters.
//!
//! The formats around it: the RDB value ([`Object::load`], [`Object::save`])
//! and the `BF.LOAD` blob of valkey-bloom's AOF rewrite
//! ([`Object::decode_blob`], [`Object::encode_blob`]). Replies, error texts,
//! sizing, scaling and `BF.INFO` figures are valkey-bloom 1.0's, as observed
//! (`tests/valkey_bloom.rs` checks them against the data it wrote).
//!
//! Everything read is checked, and every size computed with checked
//! arithmetic and compared with the limit, before anything is allocated.

use std::borrow::Cow;
use std::f64::consts::LN_2;
use std::fmt;
use std::hash::Hasher;

use siphasher::sip::SipHasher13;

use crate::args::ArgError;
use crate::bloom::{zeroed_bytes, Modulus, MAX_HASHES};
use crate::chain::Limits;
use crate::error::Error;
use crate::rdb::{FieldReader, FieldWriter};

/// The registered type name: valkey-bloom's, so that its RDB files and DUMP payloads load.
pub const TYPE_NAME: &str = "bloomfltr";
/// The encoding version valkey-bloom writes and bloomkit reads and writes.
pub const ENCODING_VERSION: i32 = 1;
/// The seed of objects made with `bf.bloom-use-random-seed no`.
pub const FIXED_SEED: [u8; 32] = [
    0x59, 0x0f, 0xf5, 0x22, 0xea, 0x78, 0x11, 0xda, 0xa7, 0x14, 0xd8, 0x09, 0x3b, 0x3e, 0x7b, 0xd9, 0x1d,
    0x89, 0x8a, 0x73, 0x3e, 0x98, 0x88, 0x87, 0x30, 0x7f, 0x97, 0xcd, 0x28, 0x07, 0x33, 0x83,
];
/// valkey-bloom's default `bf.bloom-memory-usage-limit`. An object never
/// grows past it here either (nor past `bf.max-filter-bytes`), so that what
/// bloomkit writes still loads in a valkey-bloom with default settings, and
/// `BF.INFO … MAXSCALEDCAPACITY` answers as valkey-bloom does.
pub const MEMORY_LIMIT: u64 = 128 << 20;
/// valkey-bloom's cap on an object's sub-filter count.
pub const MAX_FILTERS: u64 = i32::MAX as u64;
/// The first byte of a `BF.LOAD` blob.
pub const BLOB_VERSION: u8 = 1;
/// The first byte of a serialized sub-filter.
const FILTER_VERSION: u8 = 1;
/// Bytes before the bits of a serialized sub-filter.
pub const FILTER_HEADER: usize = 45;
/// The largest prime below 2^64: hashes after the second are reduced by it.
const PRIME: u64 = 0xFFFF_FFFF_FFFF_FFC5;
/// The Rust struct sizes valkey-bloom counts in `BF.INFO Size` and `MEMORY
/// USAGE` (x86-64): the object, one pointer per slot of its filter vector,
/// and each sub-filter's bookkeeping before its bits.
const OBJECT_BYTES: u64 = 48;
const SLOT_BYTES: u64 = 8;
const FILTER_BYTES: u64 = 208;

/// valkey-bloom's own defaults, used where its `BF.INSERT` options are
/// checked without creating anything (`VALIDATESCALETO`).
const DEFAULT_CAPACITY: i64 = 100;
const DEFAULT_FP_RATE: f64 = 0.01;
const DEFAULT_TIGHTENING: f64 = 0.5;
const DEFAULT_EXPANSION: u32 = 2;

/// Every error a `bloomfltr` key answers with, valkey-bloom's texts to the
/// letter, plus bloomkit's own where valkey-bloom has no such command.
#[derive(Clone, Debug, PartialEq)]
pub enum ValkeyError {
    BadErrorRate,
    ErrorRateRange,
    BadCapacity,
    CapacityRange,
    BadExpansion,
    BadTightening,
    TighteningRange,
    InvalidSeed,
    UnknownArgument,
    /// `BF.RESERVE` with an unknown option: valkey-bloom answers a bare `ERROR`.
    Syntax,
    NonScalingAndValidateScaleTo,
    ValidateScaleToTooLarge,
    ValidateScaleToFpZero,
    ItemExists,
    InvalidInfoField,
    NonScalingFull,
    MemoryLimit,
    MaxFilters,
    FpReachesZero,
    /// `BF.LOAD` of an empty blob.
    DecodeFailed,
    UnsupportedVersion,
    /// `BF.LOAD` onto an existing key.
    KeyExists,
    /// A blob or RDB value that does not describe a valid object, and why.
    BadData(&'static str),
    /// `BF.SCANDUMP` / `BF.LOADCHUNK` on a `bloomfltr` key (valkey-bloom has neither).
    NoChunks,
    OutOfMemory,
}

impl ValkeyError {
    /// The error reply, exactly as sent to the client.
    pub fn message(&self) -> Cow<'static, str> {
        use ValkeyError::*;
        Cow::Borrowed(match self {
            BadErrorRate => "ERR bad error rate",
            ErrorRateRange => "ERR (0 < error rate range < 1)",
            BadCapacity => "ERR bad capacity",
            CapacityRange => "ERR (capacity should be larger than 0)",
            BadExpansion => "ERR bad expansion",
            BadTightening => "ERR bad tightening ratio",
            TighteningRange => "ERR (0 < tightening ratio range < 1)",
            InvalidSeed => "ERR invalid seed",
            UnknownArgument => "ERR unknown argument received",
            Syntax => "ERROR",
            NonScalingAndValidateScaleTo => "ERR cannot use NONSCALING and VALIDATESCALETO options together",
            ValidateScaleToTooLarge => {
                "ERR provided VALIDATESCALETO causes bloom object to exceed memory limit"
            }
            ValidateScaleToFpZero => "ERR provided VALIDATESCALETO causes false positive to degrade to 0",
            ItemExists => "ERR item exists",
            InvalidInfoField => "ERR invalid information value",
            NonScalingFull => "ERR non scaling filter is full",
            MemoryLimit => "ERR operation exceeds bloom object memory limit",
            MaxFilters => "ERR bloom object reached max number of filters",
            FpReachesZero => "ERR false positive degrades to 0 on scale out",
            DecodeFailed => "ERR bloom object decoding failed",
            UnsupportedVersion => "ERR bloom object decoding failed. Unsupported version",
            KeyExists => "BUSYKEY Target key name already exists.",
            BadData(why) => return Cow::Owned(format!("ERR bloom object decoding failed: {why}")),
            NoChunks => {
                "ERR this key holds a valkey-bloom filter (type bloomfltr), which has no \
                 BF.SCANDUMP/BF.LOADCHUNK; copy it with DUMP and RESTORE"
            }
            OutOfMemory => "ERR out of memory while allocating the filter; nothing was changed",
        })
    }
}

impl fmt::Display for ValkeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for ValkeyError {}

fn bad(why: &'static str) -> Error {
    Error::Valkey(ValkeyError::BadData(why))
}

fn err(e: ValkeyError) -> Error {
    Error::Valkey(e)
}

/// The limit an object obeys: [`MEMORY_LIMIT`] and `bf.max-filter-bytes`,
/// whichever is lower; none while replaying what was accepted once.
pub fn object_limit(limits: Limits) -> Option<u64> {
    limits.max_bytes.map(|b| b.min(MEMORY_LIMIT))
}

/// The `bloomfilter` crate's `compute_bitmap_size`: bytes of bits for a
/// capacity and error rate (the same float operations, so the same bytes);
/// `None` where the size is not representable.
pub fn bitmap_bytes(capacity: u64, fp_rate: f64) -> Option<u64> {
    let l = ((capacity as f64) * fp_rate.ln() / (-8.0 * (LN_2 * LN_2))).ceil();
    (l.is_finite() && l >= 1.0 && l <= (u64::MAX / 8) as f64).then_some(l as u64)
}

/// The crate's `optimal_k_num`: `max(1, round(m / n * ln 2))`.
fn hashes_for(bits: u64, capacity: u64) -> u32 {
    let k = (bits as f64 / capacity as f64 * 2f64.ln()).round();
    (k as u32).max(1)
}

/// valkey-bloom's `calculate_fp_rate`: the rate of sub-filter `n` (from 0),
/// refused once it is no longer a normal positive double.
fn rate_of(fp_rate: f64, n: u64, tightening: f64) -> Result<f64, ValkeyError> {
    let n = i32::try_from(n).map_err(|_| ValkeyError::FpReachesZero)?;
    match fp_rate * tightening.powi(n) {
        x if x > f64::MIN_POSITIVE => Ok(x),
        _ => Err(ValkeyError::FpReachesZero),
    }
}

/// The slots Rust's `Vec` has after growing to `len` from a capacity of 1
/// (how valkey-bloom builds objects and loads them from RDB).
fn grown_slots(len: u64) -> u64 {
    if len <= 1 {
        1
    } else {
        len.max(4).next_power_of_two()
    }
}

/// One SipHash-1-3 of an item as `Hash for [u8]` feeds it.
fn sip(keys: (u64, u64), item: &[u8]) -> u64 {
    let mut h = SipHasher13::new_with_keys(keys.0, keys.1);
    h.write(&(item.len() as u64).to_le_bytes());
    h.write(item);
    h.finish()
}

/// An item's two hashes for one seed, remembered so that sub-filters
/// sharing a seed (all of them, normally) hash the item once.
struct HashCache<'a> {
    item: &'a [u8],
    last: Option<(SipKeys, (u64, u64))>,
}

/// A seed as its two SipHash key pairs.
type SipKeys = [(u64, u64); 2];

impl<'a> HashCache<'a> {
    fn new(item: &'a [u8]) -> HashCache<'a> {
        HashCache { item, last: None }
    }

    fn of(&mut self, f: &Filter) -> (u64, u64) {
        match self.last {
            Some((keys, h)) if keys == f.keys => h,
            _ => {
                let h = (sip(f.keys[0], self.item), sip(f.keys[1], self.item));
                self.last = Some((f.keys, h));
                h
            }
        }
    }
}

/// One sub-filter, kept as its serialized bytes so that saving is a copy.
#[derive(Debug)]
pub struct Filter {
    data: Box<[u8]>,
    bits: u64,
    k: u32,
    keys: SipKeys,
    modulus: Modulus,
    capacity: u64,
    items: u64,
}

impl Filter {
    /// A sub-filter over its serialized bytes, after checking that they are one.
    fn from_serialized(data: Box<[u8]>, capacity: u64, items: u64) -> Result<Filter, Error> {
        let (bytes, k, seed) = parse_header(&data)?;
        if capacity == 0 || capacity > i64::MAX as u64 {
            return Err(bad("a sub-filter's capacity is outside 1 to 2^63-1"));
        }
        // valkey-bloom counts an item only while there is room, so no
        // sub-filter holds more than its capacity.
        if items > capacity {
            return Err(bad("a sub-filter holds more items than its capacity"));
        }
        let bits = bytes * 8;
        Ok(Filter { data, bits, k, keys: sip_keys(&seed), modulus: Modulus::new(bits), capacity, items })
    }

    /// An empty sub-filter, sized as valkey-bloom sizes one.
    fn new(capacity: u64, fp_rate: f64, seed: &[u8; 32]) -> Result<Filter, Error> {
        let bytes = bitmap_bytes(capacity, fp_rate).ok_or(err(ValkeyError::MemoryLimit))?;
        let total = bytes.checked_add(FILTER_HEADER as u64).ok_or(err(ValkeyError::MemoryLimit))?;
        let mut data = zeroed_bytes(total).map_err(|_| err(ValkeyError::OutOfMemory))?;
        let k = hashes_for(bytes * 8, capacity);
        data[0] = FILTER_VERSION;
        data[1..9].copy_from_slice(&bytes.to_le_bytes());
        data[9..13].copy_from_slice(&k.to_le_bytes());
        data[13..45].copy_from_slice(seed);
        Filter::from_serialized(data, capacity, 0)
    }

    fn try_clone(&self) -> Result<Filter, Error> {
        let mut data = zeroed_bytes(self.data.len() as u64).map_err(|_| err(ValkeyError::OutOfMemory))?;
        data.copy_from_slice(&self.data);
        Ok(Filter { data, ..*self })
    }

    #[inline]
    fn bit(&self, i: u32, (h0, h1): (u64, u64)) -> u64 {
        let x = match i {
            0 => h0,
            1 => h1,
            _ => h0.wrapping_add(u64::from(i).wrapping_mul(h1)) % PRIME,
        };
        self.modulus.reduce(x)
    }

    fn check(&self, h: (u64, u64)) -> bool {
        (0..self.k).all(|i| {
            let b = self.bit(i, h);
            // In bounds: the modulus is 8 x the bitmap's length.
            self.data[FILTER_HEADER + (b >> 3) as usize] & (1 << (b & 7)) != 0
        })
    }

    fn set(&mut self, h: (u64, u64)) {
        for i in 0..self.k {
            let b = self.bit(i, h);
            self.data[FILTER_HEADER + (b >> 3) as usize] |= 1 << (b & 7);
        }
    }

    /// The serialized filter: header and bits, as saved.
    pub fn serialized(&self) -> &[u8] {
        &self.data
    }

    /// Bytes of bits (`L`).
    pub fn bitmap_len(&self) -> u64 {
        self.bits / 8
    }

    pub fn hashes(&self) -> u32 {
        self.k
    }

    pub fn seed(&self) -> [u8; 32] {
        self.data[13..45].try_into().expect("a 45-byte header")
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    /// What `BF.INFO Size` counts for this sub-filter.
    fn accounted(&self) -> u64 {
        FILTER_BYTES + self.bitmap_len()
    }
}

/// Checks a serialized filter's header against its length: `(L, k, seed)`.
fn parse_header(data: &[u8]) -> Result<(u64, u32, [u8; 32]), Error> {
    let Some((header, bits)) = data.split_first_chunk::<FILTER_HEADER>() else {
        return Err(bad("a sub-filter is shorter than its 45-byte header"));
    };
    if header[0] != FILTER_VERSION {
        return Err(bad("a sub-filter's format version is not 1"));
    }
    let bytes = u64::from_le_bytes(header[1..9].try_into().expect("8 bytes"));
    let k = u32::from_le_bytes(header[9..13].try_into().expect("4 bytes"));
    if bytes == 0 || bytes != bits.len() as u64 || bytes > u64::MAX / 8 {
        return Err(bad("a sub-filter's bitmap length does not match its bytes"));
    }
    if !(1..=MAX_HASHES).contains(&k) {
        return Err(bad("a sub-filter's hash count is outside 1 to 1100"));
    }
    Ok((bytes, k, header[13..45].try_into().expect("32 bytes")))
}

/// Bytes of bits in a serialized filter (what `Size` counts of it).
fn bits_of(data: &[u8]) -> u64 {
    (data.len() as u64).saturating_sub(FILTER_HEADER as u64)
}

/// The two SipHash keys of a seed: each 16-byte half as two u64 LE.
fn sip_keys(seed: &[u8; 32]) -> SipKeys {
    let word = |i: usize| u64::from_le_bytes(seed[i..i + 8].try_into().expect("8 bytes"));
    [(word(0), word(8)), (word(16), word(24))]
}

/// A valkey-bloom object: its parameters and sub-filters, oldest first.
#[derive(Debug)]
pub struct Object {
    /// 0 for a non-scaling object.
    expansion: u32,
    fp_rate: f64,
    tightening: f64,
    seed_random: bool,
    filters: Vec<Filter>,
    /// The capacity valkey-bloom's filter vector would have: part of its
    /// `Size` figure (1 after creation or RDB load, grown as Rust grows a
    /// `Vec`; exact after `BF.LOAD`).
    slots: u64,
}

impl Object {
    /// An empty object as valkey-bloom's `BF.RESERVE`/`BF.INSERT` make one
    /// (`expansion` 0 for non-scaling). bloomkit's commands create
    /// RedisBloom filters; this rebuilds valkey-bloom's for tests and tools.
    pub fn new(
        capacity: u64,
        fp_rate: f64,
        tightening: f64,
        expansion: u32,
        seed: &[u8; 32],
        limits: Limits,
    ) -> Result<Object, Error> {
        Object::check_parameters(u64::from(expansion), fp_rate, tightening)?;
        if capacity == 0 || capacity > i64::MAX as u64 {
            return Err(err(ValkeyError::BadCapacity));
        }
        let size =
            bitmap_bytes(capacity, fp_rate).and_then(|b| accounted_size(1, b.checked_add(FILTER_BYTES)?));
        if let Some(limit) = object_limit(limits) {
            if size.is_none_or(|s| s > limit) {
                return Err(err(ValkeyError::MemoryLimit));
            }
        }
        let filter = Filter::new(capacity, fp_rate, seed)?;
        let mut filters = Vec::new();
        filters.try_reserve_exact(1).map_err(|_| err(ValkeyError::OutOfMemory))?;
        filters.push(filter);
        Ok(Object { expansion, fp_rate, tightening, seed_random: *seed != FIXED_SEED, filters, slots: 1 })
    }

    /// The object's parameters, checked as valkey-bloom checks them on load.
    fn check_parameters(expansion: u64, fp_rate: f64, tightening: f64) -> Result<u32, Error> {
        let expansion = u32::try_from(expansion).map_err(|_| err(ValkeyError::BadExpansion))?;
        let open_unit = |x: f64| x > 0.0 && x < 1.0;
        if !open_unit(fp_rate) || !open_unit(tightening) {
            return Err(err(ValkeyError::ErrorRateRange));
        }
        Ok(expansion)
    }

    /// Reads the RDB value valkey-bloom writes (also a DUMP payload's):
    /// `num_filters, expansion, fp_rate, tightening_ratio, is_seed_random`,
    /// then per sub-filter its serialized bytes and capacity, and the item
    /// count of the last one only (the others are full: items = capacity).
    pub fn load(r: &mut dyn FieldReader, encver: i32, limits: Limits) -> Result<Object, Error> {
        if !(0..=ENCODING_VERSION).contains(&encver) {
            return Err(bad("unknown encoding version"));
        }
        let nfilters = r.unsigned()?;
        let expansion = r.unsigned()?;
        let fp_rate = r.double()?;
        let tightening = r.double()?;
        let seed_random = match r.unsigned()? {
            0 => false,
            1 => true,
            _ => return Err(bad("is_seed_random is neither 0 nor 1")),
        };
        let expansion = Object::check_parameters(expansion, fp_rate, tightening)?;
        if nfilters == 0 {
            return Err(bad("an object has no sub-filters"));
        }
        if nfilters >= MAX_FILTERS {
            return Err(err(ValkeyError::MaxFilters));
        }
        let limit = object_limit(limits);
        let mut filters: Vec<Filter> = Vec::new();
        let mut data_bytes: u64 = 0;
        for i in 0..nfilters {
            let data = r.buffer()?;
            let capacity = r.unsigned()?;
            let items = if i + 1 == nfilters { r.unsigned()? } else { capacity };
            data_bytes =
                data_bytes.checked_add(FILTER_BYTES + bits_of(&data)).ok_or(bad("sizes overflow"))?;
            let size = accounted_size(grown_slots(i + 1), data_bytes).ok_or(bad("sizes overflow"))?;
            if limit.is_some_and(|l| size > l) {
                return Err(err(ValkeyError::MemoryLimit));
            }
            let filter = Filter::from_serialized(data, capacity, items)?;
            if !seed_random && filter.seed() != FIXED_SEED {
                return Err(bad("a fixed-seed object has a sub-filter with another seed"));
            }
            filters.try_reserve(1).map_err(|_| err(ValkeyError::OutOfMemory))?;
            filters.push(filter);
        }
        Ok(Object { expansion, fp_rate, tightening, seed_random, slots: grown_slots(nfilters), filters })
    }

    /// Writes the RDB value as valkey-bloom does.
    pub fn save(&self, w: &mut dyn FieldWriter) {
        w.unsigned(self.filters.len() as u64);
        w.unsigned(u64::from(self.expansion));
        w.double(self.fp_rate);
        w.double(self.tightening);
        w.unsigned(u64::from(self.seed_random));
        let last = self.filters.len() - 1;
        for (i, f) in self.filters.iter().enumerate() {
            w.buffer(&f.data);
            w.unsigned(f.capacity);
            if i == last {
                w.unsigned(f.items);
            }
        }
    }

    /// Reads a `BF.LOAD` blob: `0x01`, then bincode 1.x (little-endian,
    /// fixed-width) of `u32 expansion, f64 fp_rate, f64 tightening_ratio,
    /// bool is_seed_random, u64 count` and per sub-filter `u64 length,
    /// serialized filter, i64 items, i64 capacity`. The whole blob is walked
    /// and checked, and its size compared with the limit, before anything
    /// is allocated; valkey-bloom's errors come in its order.
    pub fn decode_blob(blob: &[u8], limits: Limits) -> Result<Object, Error> {
        let Some((&version, body)) = blob.split_first() else {
            return Err(err(ValkeyError::DecodeFailed));
        };
        if version != BLOB_VERSION {
            return Err(err(ValkeyError::UnsupportedVersion));
        }
        let mut r = Cursor(body);
        let expansion = u32::from_le_bytes(r.take()?);
        let fp_rate = f64::from_le_bytes(r.take()?);
        let tightening = f64::from_le_bytes(r.take()?);
        let seed_random = match r.take::<1>()? {
            [0] => false,
            [1] => true,
            _ => return Err(bad("is_seed_random is neither 0 nor 1")),
        };
        let count = u64::from_le_bytes(r.take()?);
        // First pass: the structure, without allocating.
        let start = r.0;
        let mut data_bytes: u64 = 0;
        for i in 0..count {
            let (data, items, capacity) = r.filter()?;
            parse_header(data)?;
            if items < 0 || capacity < 1 {
                return Err(bad("a sub-filter's item count is negative or its capacity below 1"));
            }
            // Only the newest sub-filter takes items: the others are full
            // (an RDB save stores no count for them, and they load full).
            if i + 1 < count && items != capacity {
                return Err(bad("a sub-filter other than the last is not full"));
            }
            data_bytes = data_bytes.checked_add(FILTER_BYTES + bits_of(data)).ok_or(bad("sizes overflow"))?;
        }
        let expansion = Object::check_parameters(u64::from(expansion), fp_rate, tightening)?;
        if count >= MAX_FILTERS {
            return Err(err(ValkeyError::MaxFilters));
        }
        if count == 0 {
            return Err(bad("an object has no sub-filters"));
        }
        let size = accounted_size(count, data_bytes).ok_or(bad("sizes overflow"))?;
        if object_limit(limits).is_some_and(|l| size > l) {
            return Err(err(ValkeyError::MemoryLimit));
        }
        // Second pass: the copy.
        let mut r = Cursor(start);
        let mut filters: Vec<Filter> = Vec::new();
        filters.try_reserve_exact(count as usize).map_err(|_| err(ValkeyError::OutOfMemory))?;
        for _ in 0..count {
            let (data, items, capacity) = r.filter()?;
            let mut copy = zeroed_bytes(data.len() as u64).map_err(|_| err(ValkeyError::OutOfMemory))?;
            copy.copy_from_slice(data);
            let f = Filter::from_serialized(copy, capacity as u64, items as u64)?;
            if !seed_random && f.seed() != FIXED_SEED {
                return Err(bad("a fixed-seed object has a sub-filter with another seed"));
            }
            filters.push(f);
        }
        Ok(Object { expansion, fp_rate, tightening, seed_random, slots: count, filters })
    }

    /// The `BF.LOAD` blob of this object (what valkey-bloom's AOF rewrite emits).
    pub fn encode_blob(&self) -> Result<Vec<u8>, Error> {
        let len = self
            .filters
            .iter()
            .try_fold(30usize, |n, f| n.checked_add(24 + f.data.len()))
            .ok_or(err(ValkeyError::OutOfMemory))?;
        let mut out = Vec::new();
        out.try_reserve_exact(len).map_err(|_| err(ValkeyError::OutOfMemory))?;
        out.push(BLOB_VERSION);
        out.extend_from_slice(&self.expansion.to_le_bytes());
        out.extend_from_slice(&self.fp_rate.to_le_bytes());
        out.extend_from_slice(&self.tightening.to_le_bytes());
        out.push(u8::from(self.seed_random));
        out.extend_from_slice(&(self.filters.len() as u64).to_le_bytes());
        for f in &self.filters {
            out.extend_from_slice(&(f.data.len() as u64).to_le_bytes());
            out.extend_from_slice(&f.data);
            out.extend_from_slice(&f.items.to_le_bytes());
            out.extend_from_slice(&f.capacity.to_le_bytes());
        }
        Ok(out)
    }

    /// True when every bit of the item is set in some sub-filter.
    pub fn contains(&self, item: &[u8]) -> bool {
        let mut h = HashCache::new(item);
        self.filters.iter().any(|f| f.check(h.of(f)))
    }

    /// valkey-bloom's `add_item`: a present item (false positives included)
    /// changes nothing; otherwise it goes into the newest sub-filter, or, when
    /// that one holds its capacity, into a new one of `capacity x expansion`
    /// at `fp_rate x tightening^n`, with the same seed.
    pub fn add(&mut self, item: &[u8], limits: Limits) -> Result<bool, Error> {
        let mut h = HashCache::new(item);
        if self.filters.iter().any(|f| f.check(h.of(f))) {
            return Ok(false);
        }
        let newest = self.filters.last_mut().expect("an object has at least one sub-filter");
        if newest.items < newest.capacity {
            newest.set(h.of(newest));
            newest.items += 1;
            return Ok(true);
        }
        let mut filter = self.next_filter(limits)?;
        self.filters.try_reserve(1).map_err(|_| err(ValkeyError::OutOfMemory))?;
        filter.set(h.of(&filter));
        filter.items = 1;
        self.filters.push(filter);
        if self.filters.len() as u64 > self.slots {
            self.slots = (self.slots * 2).max(self.filters.len() as u64).max(4);
        }
        Ok(true)
    }

    /// The sub-filter a scale-out adds, checked as valkey-bloom checks it.
    fn next_filter(&self, limits: Limits) -> Result<Filter, Error> {
        if self.expansion == 0 {
            return Err(err(ValkeyError::NonScalingFull));
        }
        let n = self.filters.len() as u64;
        if n >= MAX_FILTERS {
            return Err(err(ValkeyError::MaxFilters));
        }
        let fp = rate_of(self.fp_rate, n, self.tightening).map_err(err)?;
        let newest = self.filters.last().expect("an object has at least one sub-filter");
        let capacity = newest
            .capacity
            .checked_mul(u64::from(self.expansion))
            .filter(|c| *c <= i64::MAX as u64)
            .ok_or(err(ValkeyError::BadCapacity))?;
        if let Some(limit) = object_limit(limits) {
            let needed = bitmap_bytes(capacity, fp)
                .and_then(|b| b.checked_add(FILTER_BYTES))
                .and_then(|b| b.checked_add(self.size()));
            if needed.is_none_or(|n| n > limit) {
                return Err(err(ValkeyError::MemoryLimit));
            }
        }
        Filter::new(capacity, fp, &self.filters[0].seed())
    }

    /// Adds each item in order as [`Object::add`]; `result` sees each
    /// outcome and returns false to stop.
    pub fn add_each<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        limits: Limits,
        mut result: impl FnMut(Result<bool, Error>) -> bool,
    ) {
        for item in items {
            if !result(self.add(item.as_ref(), limits)) {
                return;
            }
        }
    }

    /// valkey-bloom refuses a whole `BF.MADD`/`BF.INSERT` that would overfill
    /// a non-scaling object, adding nothing: `Err(NonScalingFull)` when
    /// adding `items` in order would. Exact (duplicates and false positives
    /// within the batch count as they will); only a batch larger than the
    /// room left costs a trial run on a copy of the newest sub-filter.
    pub fn check_room<I: AsRef<[u8]>>(&self, items: &[I]) -> Result<(), Error> {
        let (newest, older) = self.filters.split_last().expect("an object has at least one sub-filter");
        if self.expansion != 0 || newest.capacity.saturating_sub(newest.items) >= items.len() as u64 {
            return Ok(());
        }
        let mut trial = newest.try_clone()?;
        for item in items {
            let mut h = HashCache::new(item.as_ref());
            if older.iter().any(|f| f.check(h.of(f))) || trial.check(h.of(&trial)) {
                continue;
            }
            if trial.items >= trial.capacity {
                return Err(err(ValkeyError::NonScalingFull));
            }
            trial.set(h.of(&trial));
            trial.items += 1;
        }
        Ok(())
    }

    /// A deep copy that reports allocation failure (for `COPY`).
    pub fn try_clone(&self) -> Result<Object, Error> {
        let mut filters = Vec::new();
        filters.try_reserve_exact(self.filters.len()).map_err(|_| err(ValkeyError::OutOfMemory))?;
        for f in &self.filters {
            filters.push(f.try_clone()?);
        }
        Ok(Object { filters, ..*self })
    }

    /// `BF.CARD`, `Number of items inserted`: items in every sub-filter.
    pub fn items(&self) -> u64 {
        self.filters.iter().fold(0u64, |n, f| n.saturating_add(f.items)).min(i64::MAX as u64)
    }

    /// `BF.INFO Capacity`: the sub-filters' capacities summed.
    pub fn capacity(&self) -> u64 {
        self.filters.iter().fold(0u64, |n, f| n.saturating_add(f.capacity)).min(i64::MAX as u64)
    }

    /// `BF.INFO Size` and `MEMORY USAGE`: valkey-bloom's accounting.
    pub fn size(&self) -> u64 {
        let data = self.filters.iter().fold(0u64, |n, f| n.saturating_add(f.accounted()));
        accounted_size(self.slots, data).unwrap_or(u64::MAX)
    }

    /// `None` for a non-scaling object (`Expansion rate` is nil then).
    pub fn expansion(&self) -> Option<u32> {
        (self.expansion != 0).then_some(self.expansion)
    }

    pub fn fp_rate(&self) -> f64 {
        self.fp_rate
    }

    pub fn tightening(&self) -> f64 {
        self.tightening
    }

    pub fn seed_random(&self) -> bool {
        self.seed_random
    }

    pub fn filters(&self) -> &[Filter] {
        &self.filters
    }

    /// `BF.INFO … MAXSCALEDCAPACITY`: the capacity the object can reach
    /// before a scale-out would pass the limit or its rate degrade to 0.
    pub fn max_scaled_capacity(&self, limits: Limits) -> u64 {
        let start = self.filters[0].capacity;
        scaled_capacity(start, self.fp_rate, None, self.tightening, self.expansion, limits).unwrap_or(0)
    }
}

/// valkey-bloom's `calculate_max_scaled_capacity`: walks the sub-filters a
/// scaling object would get; with `target`, succeeds once the capacity
/// reaches it, else returns what the limit and the rate allow.
fn scaled_capacity(
    capacity: u64,
    fp_rate: f64,
    target: Option<u64>,
    tightening: f64,
    expansion: u32,
    limits: Limits,
) -> Result<u64, ValkeyError> {
    let limit = object_limit(limits).unwrap_or(MEMORY_LIMIT);
    let (mut filter_capacity, mut total, mut n, mut data) = (capacity, 0u64, 0u64, 0u64);
    while target.is_none_or(|t| total < t) {
        let Ok(fp) = rate_of(fp_rate, n, tightening) else {
            return target.map_or(Ok(total), |_| Err(ValkeyError::ValidateScaleToFpZero));
        };
        let slots = if n == 0 { 1 } else { (n + 1).max(4).next_power_of_two() };
        let filter = bitmap_bytes(filter_capacity, fp).and_then(|b| b.checked_add(FILTER_BYTES));
        let size = filter.and_then(|f| accounted_size(slots, data.checked_add(f)?));
        match (filter, size) {
            (Some(f), Some(s)) if s <= limit => data += f,
            _ => return target.map_or(Ok(total), |_| Err(ValkeyError::ValidateScaleToTooLarge)),
        }
        total = total.saturating_add(filter_capacity);
        filter_capacity = filter_capacity
            .checked_mul(u64::from(expansion))
            .filter(|c| *c <= i64::MAX as u64)
            .ok_or(ValkeyError::BadCapacity)?;
        n += 1;
    }
    Ok(total)
}

/// The `Size` of an object with `slots` vector slots and sub-filters
/// accounting `data` bytes.
fn accounted_size(slots: u64, data: u64) -> Option<u64> {
    SLOT_BYTES.checked_mul(slots)?.checked_add(OBJECT_BYTES)?.checked_add(data)
}

/// Reads of a `BF.LOAD` blob; running out is a decoding failure.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let (v, rest) = self.0.split_first_chunk::<N>().ok_or(bad("the blob is cut short"))?;
        self.0 = rest;
        Ok(*v)
    }

    fn bytes(&mut self, len: u64) -> Result<&'a [u8], Error> {
        let len =
            usize::try_from(len).ok().filter(|l| *l <= self.0.len()).ok_or(bad("the blob is cut short"))?;
        let (v, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(v)
    }

    /// One sub-filter: its serialized bytes, item count and capacity.
    fn filter(&mut self) -> Result<(&'a [u8], i64, i64), Error> {
        let len = u64::from_le_bytes(self.take()?);
        let data = self.bytes(len)?;
        let items = i64::from_le_bytes(self.take()?);
        let capacity = i64::from_le_bytes(self.take()?);
        Ok((data, items, capacity))
    }
}

// ---- arguments, parsed by valkey-bloom's rules ----

/// An argument as valkey-bloom reads it: lossy UTF-8, then Rust's `parse`.
fn text(arg: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(arg)
}

fn word(arg: &[u8]) -> String {
    text(arg).to_uppercase()
}

fn reply(e: ValkeyError) -> ArgError {
    ArgError::Reply(err(e))
}

/// An error rate: a float strictly between 0 and 1.
fn parse_rate(arg: &[u8]) -> Result<f64, ArgError> {
    match text(arg).parse::<f64>() {
        Ok(v) if v > 0.0 && v < 1.0 => Ok(v),
        Ok(_) => Err(reply(ValkeyError::ErrorRateRange)),
        Err(_) => Err(reply(ValkeyError::BadErrorRate)),
    }
}

/// A capacity: 1 to 2^63-1 (0 has its own message).
fn parse_capacity(arg: &[u8]) -> Result<i64, ArgError> {
    match text(arg).parse::<i64>() {
        Ok(v) if v >= 1 => Ok(v),
        Ok(0) => Err(reply(ValkeyError::CapacityRange)),
        _ => Err(reply(ValkeyError::BadCapacity)),
    }
}

fn parse_expansion(arg: &[u8]) -> Result<u32, ArgError> {
    text(arg).parse::<u32>().ok().filter(|e| *e >= 1).ok_or(reply(ValkeyError::BadExpansion))
}

/// Checks `BF.RESERVE key error_rate capacity [NONSCALING | EXPANSION n]`
/// as valkey-bloom does before it finds the key taken (`ERR item exists`).
pub fn check_reserve<A: AsRef<[u8]>>(argv: &[A]) -> Result<(), ArgError> {
    if !(4..=6).contains(&argv.len()) {
        return Err(ArgError::WrongArity);
    }
    parse_rate(argv[2].as_ref())?;
    parse_capacity(argv[3].as_ref())?;
    if argv.len() > 4 {
        match (word(argv[4].as_ref()).as_str(), argv.len()) {
            ("NONSCALING", 5) => {}
            ("EXPANSION", 6) => {
                parse_expansion(argv[5].as_ref())?;
            }
            _ => return Err(reply(ValkeyError::Syntax)),
        }
    }
    Ok(())
}

/// Parses `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NONSCALING]
/// [NOCREATE] [SEED s] [TIGHTENING t] [VALIDATESCALETO n] [ITEMS item...]`
/// as valkey-bloom does; on an existing object the options change nothing
/// but are still checked. Returns where the items start (`argv.len()`
/// when there are none).
pub fn parse_insert<A: AsRef<[u8]>>(argv: &[A], limits: Limits) -> Result<usize, ArgError> {
    if argv.len() < 2 {
        return Err(ArgError::WrongArity);
    }
    let (mut capacity, mut fp_rate, mut tightening, mut expansion) =
        (DEFAULT_CAPACITY, DEFAULT_FP_RATE, DEFAULT_TIGHTENING, DEFAULT_EXPANSION);
    let mut scale_to = None;
    let mut items = false;
    let mut i = 2;
    while i < argv.len() {
        let w = word(argv[i].as_ref());
        let value = |i: usize| argv.get(i + 1).map(AsRef::as_ref).ok_or(ArgError::WrongArity);
        match w.as_str() {
            "ERROR" => fp_rate = parse_rate(value(i)?)?,
            "TIGHTENING" => {
                tightening = match text(value(i)?).parse::<f64>() {
                    Ok(v) if v > 0.0 && v < 1.0 => v,
                    Ok(_) => return Err(reply(ValkeyError::TighteningRange)),
                    Err(_) => return Err(reply(ValkeyError::BadTightening)),
                }
            }
            "CAPACITY" => capacity = parse_capacity(value(i)?)?,
            "SEED" => {
                if value(i)?.len() != 32 {
                    return Err(reply(ValkeyError::InvalidSeed));
                }
            }
            "NOCREATE" => {}
            "NONSCALING" => expansion = 0,
            "EXPANSION" => expansion = parse_expansion(value(i)?)?,
            "VALIDATESCALETO" => scale_to = Some(parse_capacity(value(i)?)?),
            "ITEMS" => {
                items = true;
                i += 1;
                break;
            }
            _ => return Err(reply(ValkeyError::UnknownArgument)),
        }
        i += match w.as_str() {
            "NOCREATE" | "NONSCALING" => 1,
            _ => 2,
        };
    }
    if items && i == argv.len() {
        return Err(ArgError::WrongArity);
    }
    if let Some(target) = scale_to {
        if expansion == 0 {
            return Err(reply(ValkeyError::NonScalingAndValidateScaleTo));
        }
        scaled_capacity(capacity as u64, fp_rate, Some(target as u64), tightening, expansion, limits)
            .map_err(reply)?;
    }
    Ok(i.min(argv.len()))
}

/// A field of `BF.INFO key <field>` on a `bloomfltr` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InfoField {
    Capacity,
    Size,
    Filters,
    Items,
    Error,
    Expansion,
    Tightening,
    MaxScaledCapacity,
}

impl InfoField {
    pub fn parse(arg: &[u8]) -> Result<InfoField, Error> {
        Ok(match word(arg).as_str() {
            "CAPACITY" => InfoField::Capacity,
            "SIZE" => InfoField::Size,
            "FILTERS" => InfoField::Filters,
            "ITEMS" => InfoField::Items,
            "ERROR" => InfoField::Error,
            "EXPANSION" => InfoField::Expansion,
            "TIGHTENING" => InfoField::Tightening,
            "MAXSCALEDCAPACITY" => InfoField::MaxScaledCapacity,
            _ => return Err(err(ValkeyError::InvalidInfoField)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(capacity: u64, fp: f64, expansion: u32) -> Object {
        let f = Filter::new(capacity, fp, &FIXED_SEED).unwrap();
        Object { expansion, fp_rate: fp, tightening: 0.5, seed_random: false, filters: vec![f], slots: 1 }
    }

    #[test]
    fn sizes_like_the_bloomfilter_crate() {
        // BF.INFO of valkey-bloom: capacity 100 at 0.01 takes 120 bytes, capacity 2 takes 3.
        assert_eq!(bitmap_bytes(100, 0.01), Some(120));
        assert_eq!(bitmap_bytes(2, 0.01), Some(3));
        assert_eq!(hashes_for(960, 100), 7);
        assert_eq!(object(100, 0.01, 2).size(), 384);
        assert_eq!(object(2, 0.01, 0).size(), 267);
        assert_eq!(bitmap_bytes(u64::MAX, 1e-300), None);
    }

    #[test]
    fn scales_with_the_first_seed_and_counts_items() {
        let mut o = object(4, 0.01, 2);
        let limits = Limits::NONE;
        let added = (0..40u32).filter(|i| o.add(&i.to_le_bytes(), limits).unwrap()).count() as u64;
        assert_eq!(o.items(), added);
        let caps: Vec<u64> = o.filters().iter().map(Filter::capacity).collect();
        assert_eq!(&caps[..4], &[4, 8, 16, 32]);
        assert!(o.filters().iter().all(|f| f.seed() == FIXED_SEED));
        assert!(o.filters()[..o.filters().len() - 1].iter().all(|f| f.items() == f.capacity()));
        assert_eq!(o.slots, 4);
        for i in 0..40u32 {
            assert!(o.contains(&i.to_le_bytes()));
        }
    }

    #[test]
    fn non_scaling_batches_are_all_or_nothing() {
        let mut o = object(2, 0.01, 0);
        assert_eq!(o.check_room(&[b"a", b"b", b"c"]), Err(err(ValkeyError::NonScalingFull)));
        assert_eq!(o.check_room(&[b"a", b"a", b"b"]), Ok(()));
        assert_eq!(o.add(b"a", Limits::NONE), Ok(true));
        assert_eq!(o.add(b"b", Limits::NONE), Ok(true));
        assert_eq!(o.add(b"c", Limits::NONE), Err(err(ValkeyError::NonScalingFull)));
        assert_eq!(o.add(b"a", Limits::NONE), Ok(false));
    }

    #[test]
    fn the_limit_refuses_a_scale_out_and_changes_nothing() {
        let mut o = object(100, 0.01, 2);
        let limits = Limits { max_bytes: Some(700) };
        let mut refused = None;
        for i in 0..400u32 {
            if let Err(e) = o.add(&i.to_le_bytes(), limits) {
                refused = Some(e);
                break;
            }
        }
        assert_eq!(refused, Some(err(ValkeyError::MemoryLimit)));
        assert_eq!(o.filters().len(), 1);
    }

    #[test]
    fn blobs_round_trip_and_every_cut_is_refused() {
        let mut o = object(10, 0.01, 2);
        for i in 0..30u32 {
            o.add(&i.to_le_bytes(), Limits::NONE).unwrap();
        }
        let blob = o.encode_blob().unwrap();
        let back = Object::decode_blob(&blob, Limits::NONE).unwrap();
        assert_eq!(back.encode_blob().unwrap(), blob);
        for len in 0..blob.len() {
            assert!(Object::decode_blob(&blob[..len], Limits::NONE).is_err(), "cut to {len}");
        }
        assert_eq!(Object::decode_blob(&[], Limits::NONE).unwrap_err(), err(ValkeyError::DecodeFailed));
        assert_eq!(
            Object::decode_blob(&[2, 0], Limits::NONE).unwrap_err(),
            err(ValkeyError::UnsupportedVersion)
        );
    }

    #[test]
    fn max_scaled_capacity_matches_valkey_bloom() {
        // BF.INFO f1 / f2 MAXSCALEDCAPACITY on valkey-bloom 1.0 (128 MiB limit).
        let limits = Limits { max_bytes: Some(u64::MAX) };
        assert_eq!(scaled_capacity(100, 0.01, None, 0.5, 2, limits), Ok(26_214_300));
        assert_eq!(scaled_capacity(1000, 0.001, None, 0.5, 4, limits), Ok(21_845_000));
    }

    #[test]
    fn arguments_follow_valkey_bloom() {
        let argv = |s: &str| s.split(' ').map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
        let limits = Limits { max_bytes: Some(u64::MAX) };
        let e = |r: Result<(), ArgError>| r.unwrap_err();
        assert_eq!(e(check_reserve(&argv("BF.RESERVE k 0.01 100 FOO"))), reply(ValkeyError::Syntax));
        assert_eq!(
            e(check_reserve(&argv("BF.RESERVE k 0.01 100 NONSCALING EXPANSION 2"))),
            ArgError::WrongArity
        );
        assert_eq!(e(check_reserve(&argv("BF.RESERVE k 0.01 -5"))), reply(ValkeyError::BadCapacity));
        assert_eq!(e(check_reserve(&argv("BF.RESERVE k 1.5 5"))), reply(ValkeyError::ErrorRateRange));
        assert_eq!(check_reserve(&argv("BF.RESERVE k 0.01 5 expansion 3")), Ok(()));
        assert_eq!(
            parse_insert(&argv("BF.INSERT k SEED 0123456789abcdef0123456789abcdef ITEMS a b"), limits),
            Ok(5)
        );
        assert_eq!(parse_insert(&argv("BF.INSERT k NOCREATE"), limits), Ok(3));
        assert_eq!(parse_insert(&argv("BF.INSERT k ITEMS"), limits), Err(ArgError::WrongArity));
        assert_eq!(
            parse_insert(&argv("BF.INSERT k SEED x ITEMS a"), limits),
            Err(reply(ValkeyError::InvalidSeed))
        );
        assert_eq!(
            parse_insert(&argv("BF.INSERT k NONSCALING VALIDATESCALETO 1000 ITEMS a"), limits),
            Err(reply(ValkeyError::NonScalingAndValidateScaleTo))
        );
        assert_eq!(
            parse_insert(
                &argv("BF.INSERT k CAPACITY 100 ERROR 0.5 VALIDATESCALETO 100000000000 ITEMS a"),
                limits
            ),
            Err(reply(ValkeyError::ValidateScaleToTooLarge))
        );
        assert_eq!(
            parse_insert(
                &argv("BF.INSERT k CAPACITY 10 ERROR 0.5 TIGHTENING 0.0001 EXPANSION 1 VALIDATESCALETO 100000 ITEMS a"),
                limits
            ),
            Err(reply(ValkeyError::ValidateScaleToFpZero))
        );
    }
}
