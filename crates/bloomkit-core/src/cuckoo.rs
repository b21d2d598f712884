//! Cuckoo filters as RedisBloom 2.8 lays them out: the single source of
//! truth for what `CF.*` does to a filter, with no Redis in sight.
//!
//! A filter is a list of sub-filters; each is `buckets x bucket_size` slots
//! of one byte, a slot holding an 8-bit fingerprint (0 = empty). An item
//! hashes to `h = MurmurHash64A(item, 0)`, its fingerprint is
//! `h % 255 + 1`, its two buckets are `h1 = h` and
//! `h2 = h1 ^ (fp * 0x5bd1e995)`, each taken modulo a sub-filter's bucket
//! count. Sub-filter `i` has `buckets x expansion^i` buckets; bucket counts
//! and expansions are powers of two, so that `alt(fp, alt(fp, i)) = i` under
//! every modulus (the kick-out undo and compaction rely on it).
//!
//! What bloomkit does differently from 2.8.2, on purpose (README says so too):
//! - slot offsets `(h % buckets) * bucket_size` and the kick-out loop's bucket
//!   index are 64-bit; 2.8.2 keeps them in 32 bits, which breaks (or divides
//!   by zero) once a sub-filter has 2^32 buckets or slots;
//! - every size is computed with checked arithmetic and compared with the
//!   size limit before anything is allocated, and allocation is fallible;
//! - a filter never grows past [`MAX_GROWN_FILTERS`] sub-filters: 2.8.2 checks
//!   its limit of 32 once per command, so one `CF.INSERT` of very many copies
//!   of one item (each sub-filter holds at most `2 x bucket_size` of them)
//!   grows it without bound until its 16-bit sub-filter count wraps; here the
//!   item that would grow it further is refused and the command stops there;
//! - a header or RDB value that does not describe a filter RESERVE could
//!   have made (zero sub-filters, zero or non-power-of-two buckets, expansion 0
//!   with several sub-filters, a non-power-of-two expansion, sub-filter sizes
//!   off the geometric series, a data length that does not match) is refused.

use std::borrow::Cow;

use crate::chain::Limits;
use crate::error::Error;
use crate::hash::murmur64a;
use crate::rdb::{FieldReader, FieldWriter};

/// The data type's name and encoding version, RedisBloom's.
pub const TYPE_NAME: &str = "MBbloomCF";
pub const ENCODING_VERSION: i32 = 4;

/// What `CF.ADD`/`CF.INSERT` create a missing key with (RedisBloom 2.8.2).
pub const DEFAULT_CAPACITY: u64 = 1024;
pub const DEFAULT_BUCKET_SIZE: u16 = 2;
pub const DEFAULT_MAX_ITERATIONS: u16 = 20;
pub const DEFAULT_EXPANSION: u16 = 1;
pub const MAX_BUCKET_SIZE: u16 = 255;
pub const MAX_EXPANSION: u16 = 32768;
/// A write is refused up front once a filter has this many sub-filters
/// (RedisBloom's `CF_MAX_EXPANSIONS` default): "Maximum expansions reached".
pub const MAX_EXPANSIONS: usize = 32;
/// The most sub-filters a loaded filter may have: RedisBloom counts them in
/// 16 bits, so a filter with more could not come from it or go back to it.
pub const MAX_FILTERS: usize = u16::MAX as usize;
/// The most sub-filters a filter grows to. Writes stop at [`MAX_EXPANSIONS`]
/// already, so only one command adding very many items at once gets here;
/// the bound keeps each insert's scan of the sub-filters short.
pub const MAX_GROWN_FILTERS: usize = 1024;

/// Bytes RedisBloom counts for the filter and for each sub-filter's
/// bookkeeping in `CF.INFO Size` and `MEMORY USAGE` (its struct sizes).
const FILTER_OVERHEAD: u64 = 40;
const SUB_FILTER_OVERHEAD: u64 = 16;
/// The multiplier of the alternate bucket (MurmurHash2's constant).
const ALT_MULTIPLIER: u64 = 0x5bd1e995;
/// Length of the `CF.SCANDUMP` header: four u64 then three u16, packed.
pub const HEADER_LEN: usize = 38;
/// The largest chunk `CF.SCANDUMP` returns (RedisBloom's figure, as for BF).
pub const MAX_CHUNK: u64 = 16 * 1024 * 1024;

/// The `CF.*` errors with RedisBloom 2.8.2's texts, and bloomkit's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CuckooError {
    BadCapacity,
    CapacityTooSmall,
    MaxIterationsNotNumber,
    MaxIterationsRange,
    BucketSizeNotNumber,
    BucketSizeRange,
    ExpansionNotNumber,
    ExpansionRange,
    /// `CF.DEL` on a missing key or one of another type.
    DelNotFound,
    /// `CF.COMPACT` on a missing key or one of another type.
    CompactNotFound,
    Full,
    MaxExpansions,
    InvalidPosition,
    InvalidHeader,
    CannotCreate,
    BadChunk,
    /// bloomkit's: growth past [`MAX_GROWN_FILTERS`] sub-filters.
    TooManyFilters,
    /// bloomkit's: a size that cannot be represented (capacity or growth overflow).
    CannotSize,
    /// The filter would pass `bf.max-filter-bytes`.
    TooLarge {
        bytes: u64,
        limit: u64,
    },
}

impl CuckooError {
    pub fn message(self) -> Cow<'static, str> {
        use CuckooError::*;
        Cow::Borrowed(match self {
            BadCapacity => "Bad capacity",
            CapacityTooSmall => "Capacity must be at least (BucketSize * 2)",
            MaxIterationsNotNumber => "Couldn't parse MAXITERATIONS",
            MaxIterationsRange => "MAXITERATIONS: value must be an integer between 1 and 65535, inclusive.",
            BucketSizeNotNumber => "Couldn't parse BUCKETSIZE",
            BucketSizeRange => "BUCKETSIZE: value must be an integer between 1 and 255, inclusive.",
            ExpansionNotNumber => "Couldn't parse EXPANSION",
            ExpansionRange => "EXPANSION: value must be an integer between 0 and 32768, inclusive.",
            DelNotFound => "Not found",
            CompactNotFound => "Cuckoo filter was not found",
            Full => "Filter is full",
            MaxExpansions => "Maximum expansions reached",
            InvalidPosition => "Invalid position",
            InvalidHeader => "Invalid header",
            CannotCreate => "Couldn't create filter!",
            BadChunk => "Couldn't load chunk!",
            TooManyFilters => {
                "ERR the cuckoo filter cannot grow past 1024 sub-filters in one command (too many \
                 copies of one item?); delete copies, or create it with a larger capacity or \
                 expansion"
            }
            CannotSize => {
                "ERR the cuckoo filter's size is not representable; use a smaller capacity, \
                 bucket size or expansion"
            }
            TooLarge { bytes, limit } => {
                return Cow::Owned(format!(
                    "ERR the cuckoo filter would take {bytes} bytes, more than bf.max-filter-bytes \
                     ({limit}); use a smaller capacity or expansion, or raise the limit with \
                     CONFIG SET bf.max-filter-bytes"
                ))
            }
        })
    }
}

/// The size limit, refused in the cuckoo filter's own words.
fn check_limit(limits: Limits, bytes: u64) -> Result<(), Error> {
    limits.check(bytes).map_err(|e| match e {
        Error::TooLarge { bytes, limit } => CuckooError::TooLarge { bytes, limit }.into(),
        other => other,
    })
}

impl From<CuckooError> for Error {
    fn from(e: CuckooError) -> Error {
        Error::Cuckoo(e)
    }
}

/// Parameters of a new filter, as given to `CF.RESERVE` (already range-checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CuckooParams {
    pub capacity: u64,
    pub bucket_size: u16,
    pub max_iterations: u16,
    /// As given; RedisBloom rounds it up to a power of two (0 stays 0: no growth).
    pub expansion: u16,
}

impl CuckooParams {
    /// What a write that creates a missing key uses.
    pub fn with_capacity(capacity: u64) -> CuckooParams {
        CuckooParams {
            capacity,
            bucket_size: DEFAULT_BUCKET_SIZE,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            expansion: DEFAULT_EXPANSION,
        }
    }
}

/// What an item reduces to: its fingerprint and its two bucket hashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lookup {
    pub fp: u8,
    pub h1: u64,
    pub h2: u64,
}

impl Lookup {
    #[inline]
    pub fn new(item: &[u8]) -> Lookup {
        Lookup::from_hash(murmur64a(item, 0))
    }

    #[inline]
    pub fn from_hash(hash: u64) -> Lookup {
        let fp = (hash % 255 + 1) as u8;
        Lookup { fp, h1: hash, h2: alt_index(fp, hash) }
    }
}

/// The other bucket of fingerprint `fp` in bucket `index` (before the modulus).
#[inline]
fn alt_index(fp: u8, index: u64) -> u64 {
    index ^ u64::from(fp).wrapping_mul(ALT_MULTIPLIER)
}

/// Outcome of one insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    Inserted,
    /// `CF.ADDNX`/`CF.INSERTNX` only: the item may already be present.
    Exists,
    /// No room, even after kicking out, and the filter may not grow (EXPANSION 0).
    Full,
}

/// One sub-filter: `buckets x bucket_size` one-byte slots.
#[derive(Debug)]
pub struct SubFilter {
    buckets: u64,
    data: Box<[u8]>,
}

impl SubFilter {
    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// Slot offset of the bucket of hash `h`: 64-bit (2.8.2 truncates it to
    /// 32). Bucket counts are powers of two (every constructor and decoder
    /// checks), so `h % buckets` is a mask, not a division.
    #[inline]
    fn bucket_start(&self, h: u64, bucket_size: usize) -> usize {
        debug_assert!(self.buckets.is_power_of_two());
        (h & (self.buckets - 1)) as usize * bucket_size
    }

    #[inline]
    fn bucket(&self, h: u64, bucket_size: usize) -> &[u8] {
        let start = self.bucket_start(h, bucket_size);
        &self.data[start..start + bucket_size]
    }

    /// The first empty slot of bucket h1, else of bucket h2.
    #[inline]
    fn find_empty(&self, h1: u64, h2: u64, bucket_size: usize) -> Option<usize> {
        [h1, h2].into_iter().find_map(|h| {
            let start = self.bucket_start(h, bucket_size);
            self.data[start..start + bucket_size].iter().position(|&s| s == 0).map(|i| start + i)
        })
    }

    #[inline]
    fn contains(&self, l: &Lookup, bucket_size: usize) -> bool {
        self.bucket(l.h1, bucket_size).contains(&l.fp) || self.bucket(l.h2, bucket_size).contains(&l.fp)
    }

    /// Copies in bucket h1 plus copies in bucket h2: a bucket that is both
    /// is counted twice, as RedisBloom does.
    #[inline]
    fn count(&self, l: &Lookup, bucket_size: usize) -> u64 {
        [l.h1, l.h2]
            .iter()
            .map(|&h| self.bucket(h, bucket_size).iter().filter(|&&s| s == l.fp).count() as u64)
            .sum()
    }

    fn delete(&mut self, l: &Lookup, bucket_size: usize) -> bool {
        for h in [l.h1, l.h2] {
            let start = self.bucket_start(h, bucket_size);
            if let Some(slot) = self.data[start..start + bucket_size].iter().position(|&s| s == l.fp) {
                self.data[start + slot] = 0;
                return true;
            }
        }
        false
    }
}

/// The checked shape of a filter: everything that sizes it, before any allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Buckets of the first sub-filter.
    pub buckets: u64,
    pub filters: usize,
    pub bucket_size: u16,
    pub max_iterations: u16,
    pub expansion: u16,
}

impl Shape {
    /// Checks what RESERVE could have made; `Err(CannotCreate)` otherwise.
    pub fn validate(&self) -> Result<(), Error> {
        let valid = (1..=MAX_BUCKET_SIZE).contains(&self.bucket_size)
            && self.max_iterations >= 1
            && self.expansion <= MAX_EXPANSION
            && (self.expansion == 0 || self.expansion.is_power_of_two())
            && (1..=MAX_FILTERS).contains(&self.filters)
            && !(self.expansion == 0 && self.filters > 1)
            && self.buckets.is_power_of_two();
        if !valid {
            return Err(CuckooError::CannotCreate.into());
        }
        self.size_bytes().map(|_| ())
    }

    /// Buckets of sub-filter `i`: `buckets x expansion^i`, checked.
    pub fn sub_buckets(&self, i: usize) -> Result<u64, Error> {
        let exp = u64::from(self.expansion);
        let growth = match i {
            0 => 1,
            _ => u32::try_from(i).ok().and_then(|i| exp.checked_pow(i)).ok_or(CuckooError::CannotSize)?,
        };
        let buckets = self.buckets.checked_mul(growth).ok_or(CuckooError::CannotSize)?;
        // Every slot offset must fit in memory's address space.
        buckets
            .checked_mul(u64::from(self.bucket_size))
            .filter(|b| usize::try_from(*b).is_ok())
            .ok_or(CuckooError::CannotSize)?;
        Ok(buckets)
    }

    /// `CF.INFO Size` of a filter of this shape, checked.
    pub fn size_bytes(&self) -> Result<u64, Error> {
        let mut total = SUB_FILTER_OVERHEAD
            .checked_mul(self.filters as u64)
            .and_then(|s| s.checked_add(FILTER_OVERHEAD))
            .ok_or(CuckooError::CannotSize)?;
        for i in 0..self.filters {
            let bytes = self.sub_buckets(i)? * u64::from(self.bucket_size);
            total = total.checked_add(bytes).ok_or(CuckooError::CannotSize)?;
        }
        Ok(total)
    }
}

/// A cuckoo filter: sub-filters, counters and parameters.
#[derive(Debug)]
pub struct CuckooFilter {
    items: u64,
    deletes: u64,
    shape: Shape,
    filters: Vec<SubFilter>,
}

/// Next power of two as RedisBloom's `getNextN2` (0 stays 0), `None` past 2^63.
fn next_power_of_two(n: u64) -> Option<u64> {
    if n == 0 {
        Some(0)
    } else {
        n.checked_next_power_of_two()
    }
}

impl CuckooFilter {
    /// A new filter as `CF.RESERVE` creates it: `next_pow2(capacity / bucket_size)`
    /// buckets (at least 1), the expansion rounded up to a power of two.
    pub fn new(params: CuckooParams, limits: Limits) -> Result<CuckooFilter, Error> {
        if params.bucket_size == 0 {
            return Err(CuckooError::BucketSizeRange.into());
        }
        let buckets = next_power_of_two(params.capacity / u64::from(params.bucket_size))
            .ok_or(CuckooError::CannotSize)?
            .max(1);
        let expansion = next_power_of_two(u64::from(params.expansion)).ok_or(CuckooError::CannotSize)?;
        let shape = Shape {
            buckets,
            filters: 1,
            bucket_size: params.bucket_size,
            max_iterations: params.max_iterations,
            expansion: u16::try_from(expansion).map_err(|_| CuckooError::ExpansionRange)?,
        };
        CuckooFilter::allocate(0, 0, shape, limits)
    }

    /// An empty filter of a checked shape: the limit is compared before any allocation.
    fn allocate(items: u64, deletes: u64, shape: Shape, limits: Limits) -> Result<CuckooFilter, Error> {
        shape.validate()?;
        check_limit(limits, shape.size_bytes()?)?;
        let mut filters = Vec::new();
        filters.try_reserve_exact(shape.filters).map_err(|_| Error::OutOfMemory)?;
        for i in 0..shape.filters {
            let buckets = shape.sub_buckets(i)?;
            let data = crate::bloom::zeroed_bytes(buckets * u64::from(shape.bucket_size))?;
            filters.push(SubFilter { buckets, data });
        }
        Ok(CuckooFilter { items, deletes, shape, filters })
    }

    #[inline]
    fn bucket_size(&self) -> usize {
        usize::from(self.shape.bucket_size)
    }

    /// `CF.EXISTS`: in any sub-filter.
    #[inline]
    pub fn contains(&self, l: &Lookup) -> bool {
        let bs = self.bucket_size();
        self.filters.iter().any(|f| f.contains(l, bs))
    }

    /// `CF.COUNT`: copies of the fingerprint in the item's buckets of every sub-filter.
    pub fn count(&self, l: &Lookup) -> u64 {
        let bs = self.bucket_size();
        self.filters.iter().map(|f| f.count(l, bs)).sum()
    }

    /// Refuses a write up front on a filter with [`MAX_EXPANSIONS`] sub-filters
    /// or more, as RedisBloom does once per command.
    pub fn check_writable(&self) -> Result<(), Error> {
        if self.filters.len() >= MAX_EXPANSIONS {
            return Err(CuckooError::MaxExpansions.into());
        }
        Ok(())
    }

    /// `CF.ADDNX`: inserts unless the item may be present.
    pub fn insert_unique(&mut self, l: &Lookup, limits: Limits) -> Result<Insert, Error> {
        if self.contains(l) {
            return Ok(Insert::Exists);
        }
        self.insert(l, limits)
    }

    /// `CF.ADD`: into the first empty slot of the item's buckets, trying the
    /// newest sub-filter first; else kicking out in the newest; else growing.
    pub fn insert(&mut self, l: &Lookup, limits: Limits) -> Result<Insert, Error> {
        loop {
            let bs = self.bucket_size();
            for f in self.filters.iter_mut().rev() {
                if let Some(slot) = f.find_empty(l.h1, l.h2, bs) {
                    f.data[slot] = l.fp;
                    self.items = self.items.wrapping_add(1);
                    return Ok(Insert::Inserted);
                }
            }
            if self.kick_out(l) {
                self.items = self.items.wrapping_add(1);
                return Ok(Insert::Inserted);
            }
            if self.shape.expansion == 0 {
                return Ok(Insert::Full);
            }
            self.grow(limits)?;
        }
    }

    /// RedisBloom's kick-out in the newest sub-filter: from bucket `h1`,
    /// victim slot 0, swap the fingerprint in; move the victim to its other
    /// bucket and stop if that has room, else advance the victim slot; at
    /// most `max_iterations` rounds. On failure the swaps are undone in
    /// reverse order, leaving the sub-filter exactly as it was.
    fn kick_out(&mut self, l: &Lookup) -> bool {
        let bs = self.bucket_size();
        let rounds = self.shape.max_iterations;
        let f = self.filters.last_mut().expect("a filter has at least one sub-filter");
        let n = f.buckets;
        let mut fp = l.fp;
        let mut victim = 0usize;
        let mut bucket = l.h1 % n;
        for _ in 0..rounds {
            std::mem::swap(&mut f.data[bucket as usize * bs + victim], &mut fp);
            bucket = alt_index(fp, bucket) % n;
            let start = bucket as usize * bs;
            if let Some(i) = f.data[start..start + bs].iter().position(|&s| s == 0) {
                f.data[start + i] = fp;
                return true;
            }
            victim = (victim + 1) % bs;
        }
        for _ in 0..rounds {
            victim = (victim + bs - 1) % bs;
            bucket = alt_index(fp, bucket) % n;
            std::mem::swap(&mut f.data[bucket as usize * bs + victim], &mut fp);
        }
        false
    }

    /// Appends sub-filter `i` of `buckets x expansion^i` buckets, after
    /// checking its size and the limit.
    fn grow(&mut self, limits: Limits) -> Result<(), Error> {
        if self.filters.len() >= MAX_GROWN_FILTERS {
            return Err(CuckooError::TooManyFilters.into());
        }
        let grown = Shape { filters: self.filters.len() + 1, ..self.shape };
        let buckets = grown.sub_buckets(self.filters.len())?;
        let bytes = buckets * u64::from(self.shape.bucket_size);
        let total = self
            .size_bytes()
            .checked_add(SUB_FILTER_OVERHEAD)
            .and_then(|s| s.checked_add(bytes))
            .ok_or(CuckooError::CannotSize)?;
        check_limit(limits, total)?;
        self.filters.try_reserve(1).map_err(|_| Error::OutOfMemory)?;
        let data = crate::bloom::zeroed_bytes(bytes)?;
        self.filters.push(SubFilter { buckets, data });
        self.shape.filters = self.filters.len();
        Ok(())
    }

    /// `CF.DEL`: removes one copy, from the newest sub-filter holding one.
    /// Deletes count up; past a tenth of the items, a filter of several
    /// sub-filters compacts (stopping at the first that cannot be emptied).
    pub fn delete(&mut self, l: &Lookup) -> bool {
        let bs = self.bucket_size();
        let Some(f) = self.filters.iter_mut().rev().find(|f| f.contains(l, bs)) else {
            return false;
        };
        f.delete(l, bs);
        // Counts can come from a dump: they wrap as RedisBloom's unsigned ones do.
        self.items = self.items.wrapping_sub(1);
        self.deletes = self.deletes.wrapping_add(1);
        if self.filters.len() > 1 && self.deletes as f64 > self.items as f64 * 0.10 {
            self.compact(false);
        }
        true
    }

    /// `CF.COMPACT` (`keep_going`) and the compaction after deletes: moves
    /// each fingerprint of a sub-filter, newest first, into an older one with
    /// room in its buckets; a newest sub-filter left empty is freed. Without
    /// `keep_going`, stops at the first sub-filter that cannot be emptied.
    pub fn compact(&mut self, keep_going: bool) {
        let bs = self.bucket_size();
        for ix in (1..self.filters.len()).rev() {
            let (older, rest) = self.filters.split_at_mut(ix);
            let current = &mut rest[0];
            let mut all_moved = true;
            for bucket in 0..current.buckets {
                for slot in 0..bs {
                    let at = bucket as usize * bs + slot;
                    let fp = current.data[at];
                    if fp == 0 {
                        continue;
                    }
                    // The fingerprint's buckets in a smaller sub-filter follow
                    // from this bucket's index (all counts are powers of two).
                    let (h1, h2) = (bucket, alt_index(fp, bucket));
                    let home = older.iter_mut().find_map(|f| f.find_empty(h1, h2, bs).map(|s| (f, s)));
                    match home {
                        Some((f, s)) => {
                            f.data[s] = fp;
                            current.data[at] = 0;
                        }
                        None => all_moved = false,
                    }
                }
            }
            if all_moved && ix == self.filters.len() - 1 {
                self.filters.pop();
                self.shape.filters = self.filters.len();
            } else if !all_moved && !keep_going {
                break;
            }
        }
        self.deletes = 0;
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    pub fn deletes(&self) -> u64 {
        self.deletes
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    pub fn filters(&self) -> &[SubFilter] {
        &self.filters
    }

    /// `CF.INFO Size`, also the `MEMORY USAGE` figure: RedisBloom's accounting.
    pub fn size_bytes(&self) -> u64 {
        let data = self.filters.iter().map(|f| f.data.len() as u64).sum::<u64>();
        FILTER_OVERHEAD + SUB_FILTER_OVERHEAD * self.filters.len() as u64 + data
    }

    /// `CF.DEBUG`'s line.
    pub fn debug_line(&self) -> String {
        let s = &self.shape;
        format!(
            "bktsize:{} buckets:{} items:{} deletes:{} filters:{} max_iterations:{} expansion:{}",
            s.bucket_size,
            s.buckets,
            self.items,
            self.deletes,
            self.filters.len(),
            s.max_iterations,
            s.expansion
        )
    }

    /// A deep copy that reports allocation failure (for `COPY`).
    pub fn try_clone(&self) -> Result<CuckooFilter, Error> {
        let mut filters = Vec::new();
        filters.try_reserve_exact(self.filters.len()).map_err(|_| Error::OutOfMemory)?;
        for f in &self.filters {
            let mut data = crate::bloom::zeroed_bytes(f.data.len() as u64)?;
            data.copy_from_slice(&f.data);
            filters.push(SubFilter { buckets: f.buckets, data });
        }
        Ok(CuckooFilter { filters, ..*self })
    }

    // ---- CF.SCANDUMP / CF.LOADCHUNK ----

    /// The header that `CF.SCANDUMP key 0` returns and `CF.LOADCHUNK key 1` accepts:
    /// items, buckets, deletes, filters (u64), bucket size, max iterations, expansion (u16).
    pub fn encode_header(&self) -> [u8; HEADER_LEN] {
        let s = &self.shape;
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(&self.items.to_le_bytes());
        out[8..16].copy_from_slice(&s.buckets.to_le_bytes());
        out[16..24].copy_from_slice(&self.deletes.to_le_bytes());
        out[24..32].copy_from_slice(&(self.filters.len() as u64).to_le_bytes());
        out[32..34].copy_from_slice(&s.bucket_size.to_le_bytes());
        out[34..36].copy_from_slice(&s.max_iterations.to_le_bytes());
        out[36..38].copy_from_slice(&s.expansion.to_le_bytes());
        out
    }

    /// An empty filter of the shape a header describes (the data arrives in
    /// chunks); checked, and compared with the limit before allocating.
    pub fn from_header(buf: &[u8], limits: Limits) -> Result<CuckooFilter, Error> {
        let buf: &[u8; HEADER_LEN] = buf.try_into().map_err(|_| CuckooError::InvalidHeader)?;
        let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
        let u16_at = |i: usize| u16::from_le_bytes(buf[i..i + 2].try_into().expect("2 bytes"));
        let filters = usize::try_from(u64_at(24)).unwrap_or(usize::MAX);
        let shape = Shape {
            buckets: u64_at(8),
            filters,
            bucket_size: u16_at(32),
            max_iterations: u16_at(34),
            expansion: u16_at(36),
        };
        // A shape 2.8.2 could not have written answers as it would refuse it.
        CuckooFilter::allocate(u64_at(0), u64_at(16), shape, limits).map_err(|e| match e {
            Error::Cuckoo(CuckooError::CannotSize) => CuckooError::CannotCreate.into(),
            e => e,
        })
    }

    /// The reply to `CF.SCANDUMP key pos` for `pos >= 1`: the next position
    /// and a chunk, or `None` past the end. As in RedisBloom, a sub-filter no
    /// larger than [`MAX_CHUNK`] comes whole from its start, whatever `pos`
    /// falls inside it; a larger one in chunks from `pos`.
    pub fn chunk_at(&self, pos: i64) -> Option<(i64, &[u8])> {
        let mut offset = u64::try_from(pos.checked_sub(1)?).ok()?;
        for f in &self.filters {
            let size = f.data.len() as u64;
            if offset >= size {
                offset -= size;
                continue;
            }
            let (start, len) =
                if size <= MAX_CHUNK { (0, size) } else { (offset, (size - offset).min(MAX_CHUNK)) };
            let chunk = &f.data[start as usize..(start + len) as usize];
            return Some((pos.saturating_add(len as i64), chunk));
        }
        None
    }

    /// `CF.LOADCHUNK key pos data` on an existing filter: copies `data` so that
    /// it ends just before `pos - 1` in the concatenated sub-filters. As in
    /// RedisBloom, an offset past the end lands in the last sub-filter at
    /// what is left of it; anything not fitting whole is refused.
    pub fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), Error> {
        if data.is_empty() {
            return Err(CuckooError::BadChunk.into());
        }
        let mut offset = i128::from(pos) - data.len() as i128 - 1;
        let last = self.filters.len() - 1;
        let mut target = last;
        for (i, f) in self.filters.iter().enumerate() {
            let size = f.data.len() as i128;
            if offset < size {
                target = i;
                break;
            }
            offset -= size;
        }
        let f = &mut self.filters[target];
        let end = offset.checked_add(data.len() as i128).filter(|_| offset >= 0);
        match end {
            Some(end) if end <= f.data.len() as i128 => {
                f.data[offset as usize..end as usize].copy_from_slice(data);
                Ok(())
            }
            _ => Err(CuckooError::BadChunk.into()),
        }
    }

    /// Every `(pos, chunk)` pair a full SCANDUMP returns after the header.
    pub fn chunks(&self) -> impl Iterator<Item = (i64, &[u8])> {
        let mut pos = 1i64;
        std::iter::from_fn(move || {
            let (next, data) = self.chunk_at(pos)?;
            pos = next;
            Some((next, data))
        })
    }

    // ---- RDB ----

    /// Writes the value at [`ENCODING_VERSION`]: filters, buckets, items,
    /// deletes, bucket size, max iterations, expansion, then per sub-filter
    /// its bucket count and its slots as one string.
    pub fn save(&self, w: &mut dyn FieldWriter) {
        let s = &self.shape;
        w.unsigned(self.filters.len() as u64);
        w.unsigned(s.buckets);
        w.unsigned(self.items);
        w.unsigned(self.deletes);
        w.unsigned(u64::from(s.bucket_size));
        w.unsigned(u64::from(s.max_iterations));
        w.unsigned(u64::from(s.expansion));
        for f in &self.filters {
            w.unsigned(f.buckets);
            w.buffer(&f.data);
        }
    }

    /// Reads a value of encoding version 0 to 4 (before 4: no deletes and
    /// default bucket size, iterations and expansion; every sub-filter the
    /// size of the first). The shape is checked, and its size compared with
    /// the limit, before any sub-filter is read.
    pub fn load(r: &mut dyn FieldReader, encver: i32, limits: Limits) -> Result<CuckooFilter, Error> {
        if !(0..=ENCODING_VERSION).contains(&encver) {
            return Err(Error::BadData);
        }
        let narrow = |v: u64| u16::try_from(v).map_err(|_| Error::BadData);
        let filters = usize::try_from(r.unsigned()?).map_err(|_| Error::BadData)?;
        let buckets = r.unsigned()?;
        let items = r.unsigned()?;
        let (deletes, bucket_size, max_iterations, expansion) = if encver >= 4 {
            (r.unsigned()?, narrow(r.unsigned()?)?, narrow(r.unsigned()?)?, narrow(r.unsigned()?)?)
        } else {
            (0, DEFAULT_BUCKET_SIZE, DEFAULT_MAX_ITERATIONS, DEFAULT_EXPANSION)
        };
        let shape = Shape { buckets, filters, bucket_size, max_iterations, expansion };
        shape.validate().map_err(|_| Error::BadData)?;
        check_limit(limits, shape.size_bytes()?)?;
        let mut subs = Vec::new();
        subs.try_reserve_exact(filters).map_err(|_| Error::OutOfMemory)?;
        for i in 0..filters {
            let expected = if encver >= 4 { shape.sub_buckets(i)? } else { buckets };
            let sub_buckets = if encver >= 4 { r.unsigned()? } else { buckets };
            if sub_buckets != expected {
                return Err(Error::BadData);
            }
            let data = r.buffer()?;
            if data.len() as u64 != sub_buckets * u64::from(bucket_size) {
                return Err(Error::BadData);
            }
            subs.push(SubFilter { buckets: sub_buckets, data });
        }
        Ok(CuckooFilter { items, deletes, shape, filters: subs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb::FieldStream;

    fn params(capacity: u64, bucket_size: u16, max_iterations: u16, expansion: u16) -> CuckooParams {
        CuckooParams { capacity, bucket_size, max_iterations, expansion }
    }

    fn add(f: &mut CuckooFilter, item: &[u8]) -> Insert {
        f.insert(&Lookup::new(item), Limits::NONE).unwrap()
    }

    fn slots(f: &CuckooFilter) -> Vec<u8> {
        f.filters().iter().flat_map(|s| s.bytes().iter().copied()).collect()
    }

    #[test]
    fn sizes_like_redisbloom() {
        // CF.RESERVE k 10 -> 8 buckets, Size 72; CF.RESERVE k 100 EXPANSION 3 -> expansion 4.
        let f = CuckooFilter::new(params(10, 2, 20, 1), Limits::NONE).unwrap();
        assert_eq!((f.shape().buckets, f.size_bytes()), (8, 72));
        let f = CuckooFilter::new(params(100, 2, 20, 3), Limits::NONE).unwrap();
        assert_eq!((f.shape().buckets, f.shape().expansion, f.size_bytes()), (64, 4, 184));
        let f = CuckooFilter::new(params(1024, 2, 20, 0), Limits::NONE).unwrap();
        assert_eq!((f.shape().buckets, f.shape().expansion, f.size_bytes()), (512, 0, 1080));
    }

    #[test]
    fn matches_captured_redisbloom_state() {
        // CF.RESERVE src 10; CF.ADD src a on RedisBloom 2.8.2: fingerprint 0xc4 at slot 2,
        // and this SCANDUMP header.
        let mut f = CuckooFilter::new(params(10, 2, 20, 1), Limits::NONE).unwrap();
        assert_eq!(add(&mut f, b"a"), Insert::Inserted);
        let mut expected = vec![0u8; 16];
        expected[2] = 0xc4;
        assert_eq!(slots(&f), expected);
        let header: [u8; 38] = [
            1, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
            2, 0, 20, 0, 1, 0,
        ];
        assert_eq!(f.encode_header(), header);
    }

    #[test]
    fn full_filter_without_expansion_is_unchanged_by_a_failed_insert() {
        let mut f = CuckooFilter::new(params(4, 2, 20, 0), Limits::NONE).unwrap();
        let mut full = 0;
        for i in 0..50u32 {
            let before = slots(&f);
            match add(&mut f, &i.to_le_bytes()) {
                Insert::Full => {
                    full += 1;
                    assert_eq!(slots(&f), before, "a refused insert changes nothing");
                }
                Insert::Inserted => {}
                Insert::Exists => unreachable!(),
            }
        }
        assert!(full > 0);
        assert_eq!(f.filters().len(), 1);
        assert!(slots(&f).iter().all(|&s| s != 0));
    }

    #[test]
    fn grows_and_finds_everything() {
        let mut f = CuckooFilter::new(params(64, 2, 20, 2), Limits::NONE).unwrap();
        let items: Vec<Vec<u8>> = (0..2000u32).map(|i| format!("item{i}").into_bytes()).collect();
        for item in &items {
            assert_eq!(add(&mut f, item), Insert::Inserted);
        }
        assert!(f.filters().len() > 1);
        for (i, s) in f.filters().iter().enumerate() {
            assert_eq!(s.buckets(), 32 << i);
        }
        assert!(items.iter().all(|i| f.contains(&Lookup::new(i))));
        assert_eq!(f.items(), 2000);
    }

    #[test]
    fn delete_and_count() {
        let mut f = CuckooFilter::new(params(1000, 4, 20, 1), Limits::NONE).unwrap();
        for _ in 0..3 {
            add(&mut f, b"x");
        }
        let l = Lookup::new(b"x");
        assert_eq!(f.count(&l), 3);
        assert!(f.delete(&l));
        assert_eq!(f.count(&l), 2);
        assert_eq!((f.items(), f.deletes()), (2, 1));
        assert!(!f.delete(&Lookup::new(b"never added")));
        assert_eq!(f.insert_unique(&l, Limits::NONE), Ok(Insert::Exists));
    }

    #[test]
    fn compaction_frees_emptied_sub_filters() {
        let mut f = CuckooFilter::new(params(8, 2, 20, 1), Limits::NONE).unwrap();
        let items: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_le_bytes().to_vec()).collect();
        for item in &items {
            add(&mut f, item);
        }
        let grown = f.filters().len();
        assert!(grown > 3);
        for item in &items[..90] {
            assert!(f.delete(&Lookup::new(item)));
        }
        f.compact(true);
        assert!(f.filters().len() < grown);
        assert_eq!(f.deletes(), 0);
        assert!(items[90..].iter().all(|i| f.contains(&Lookup::new(i))), "no false negatives");
    }

    #[test]
    fn many_copies_of_one_item_stop_at_the_sub_filter_cap() {
        let mut f = CuckooFilter::new(params(4, 1, 1, 1), Limits::NONE).unwrap();
        let l = Lookup::new(b"same");
        let mut refused = None;
        for _ in 0..(MAX_GROWN_FILTERS * 4 + 10) {
            if let Err(e) = f.insert(&l, Limits::NONE) {
                refused = Some(e);
                break;
            }
        }
        assert_eq!(refused, Some(CuckooError::TooManyFilters.into()));
        assert_eq!(f.filters().len(), MAX_GROWN_FILTERS);
        assert_eq!(f.check_writable(), Err(CuckooError::MaxExpansions.into()));
    }

    #[test]
    fn limits_are_checked_before_allocation() {
        let limits = Limits { max_bytes: Some(1 << 20) };
        assert!(matches!(
            CuckooFilter::new(params(1 << 40, 2, 20, 1), limits),
            Err(Error::Cuckoo(CuckooError::TooLarge { .. }))
        ));
        assert_eq!(
            CuckooFilter::new(params(u64::MAX, 1, 20, 1), Limits::NONE).err(),
            Some(CuckooError::CannotSize.into())
        );
        let mut f = CuckooFilter::new(params(1024, 2, 20, 32768), limits).unwrap();
        let mut err = None;
        for i in 0..5000u32 {
            if let Err(e) = f.insert(&Lookup::new(&i.to_le_bytes()), limits) {
                err = Some(e);
                break;
            }
        }
        assert!(matches!(err, Some(Error::Cuckoo(CuckooError::TooLarge { .. }))));
        assert_eq!(f.filters().len(), 1);
    }

    #[test]
    fn scandump_round_trip_and_quirks() {
        let mut f = CuckooFilter::new(params(100, 2, 20, 2), Limits::NONE).unwrap();
        for i in 0..400u32 {
            add(&mut f, &i.to_le_bytes());
        }
        let mut copy = CuckooFilter::from_header(&f.encode_header(), Limits::NONE).unwrap();
        for (pos, data) in f.chunks() {
            copy.load_chunk(pos, data).unwrap();
        }
        assert_eq!(slots(&copy), slots(&f));
        // Inside a small sub-filter, SCANDUMP returns it whole from its start.
        let (next, data) = f.chunk_at(10).unwrap();
        assert_eq!((next, data.len()), (10 + 128, 128));
        assert_eq!(f.chunk_at(-1), None);
        // LOADCHUNK past the end lands in the last sub-filter.
        let total: usize = f.filters().iter().map(|s| s.bytes().len()).sum();
        assert!(copy.load_chunk(total as i64 + 3, b"zz").is_ok());
        assert_eq!(copy.load_chunk(2, b"zz").err(), Some(CuckooError::BadChunk.into()));
        assert_eq!(copy.load_chunk(5, b"").err(), Some(CuckooError::BadChunk.into()));
        assert_eq!(copy.load_chunk(i64::MIN, b"zz").err(), Some(CuckooError::BadChunk.into()));
        assert_eq!(copy.load_chunk(i64::MAX, b"zz").err(), Some(CuckooError::BadChunk.into()));
    }

    #[test]
    fn damaged_headers_are_refused() {
        let f = CuckooFilter::new(params(100, 2, 20, 1), Limits::NONE).unwrap();
        let header = f.encode_header();
        let with = |at: usize, bytes: &[u8]| {
            let mut h = header;
            h[at..at + bytes.len()].copy_from_slice(bytes);
            CuckooFilter::from_header(&h, Limits::NONE).err()
        };
        let cannot = Some(Error::from(CuckooError::CannotCreate));
        assert_eq!(with(8, &7u64.to_le_bytes()), cannot, "buckets not a power of two");
        assert_eq!(with(8, &0u64.to_le_bytes()), cannot, "zero buckets");
        assert_eq!(with(24, &0u64.to_le_bytes()), cannot, "zero sub-filters");
        assert_eq!(with(32, &0u16.to_le_bytes()), cannot, "bucket size 0");
        assert_eq!(with(32, &256u16.to_le_bytes()), cannot, "bucket size 256");
        assert_eq!(with(34, &0u16.to_le_bytes()), cannot, "no iterations");
        assert_eq!(with(36, &3u16.to_le_bytes()), cannot, "expansion not a power of two");
        let mut h = header;
        h[24..32].copy_from_slice(&2u64.to_le_bytes());
        h[36..38].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(CuckooFilter::from_header(&h, Limits::NONE).err(), cannot, "expansion 0, two sub-filters");
        h[36..38].copy_from_slice(&32768u16.to_le_bytes());
        h[24..32].copy_from_slice(&60u64.to_le_bytes());
        assert_eq!(CuckooFilter::from_header(&h, Limits::NONE).err(), cannot, "size past 2^64");
        assert_eq!(
            CuckooFilter::from_header(&header[..37], Limits::NONE).err(),
            Some(CuckooError::InvalidHeader.into())
        );
        let limited = Limits { max_bytes: Some(1 << 20) };
        let mut h = header;
        h[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(matches!(
            CuckooFilter::from_header(&h, limited),
            Err(Error::Cuckoo(CuckooError::TooLarge { .. }))
        ));
    }

    fn saved(f: &CuckooFilter) -> Vec<u8> {
        let mut w = FieldStream::default();
        f.save(&mut w);
        w.bytes
    }

    #[test]
    fn rdb_round_trip_and_truncations() {
        let mut f = CuckooFilter::new(params(20, 2, 20, 2), Limits::NONE).unwrap();
        for i in 0..200u32 {
            add(&mut f, &i.to_le_bytes());
        }
        f.delete(&Lookup::new(&3u32.to_le_bytes()));
        let bytes = saved(&f);
        let loaded =
            CuckooFilter::load(&mut FieldStream { bytes: bytes.clone(), pos: 0 }, 4, Limits::NONE).unwrap();
        assert_eq!(saved(&loaded), bytes);
        for len in 0..bytes.len() {
            let mut r = FieldStream { bytes: bytes[..len].to_vec(), pos: 0 };
            assert!(CuckooFilter::load(&mut r, 4, Limits::NONE).is_err(), "length {len}");
        }
        assert!(CuckooFilter::load(&mut FieldStream { bytes, pos: 0 }, 5, Limits::NONE).is_err());
    }

    #[test]
    fn rdb_version_3_has_no_parameters() {
        let mut stream = FieldStream::default();
        let w: &mut dyn FieldWriter = &mut stream;
        for v in [2u64, 4, 7] {
            w.unsigned(v); // filters, buckets, items
        }
        w.buffer(&[0, 9, 0, 0, 0, 0, 0, 0]);
        w.buffer(&[0; 8]);
        let f =
            CuckooFilter::load(&mut FieldStream { bytes: stream.bytes, pos: 0 }, 3, Limits::NONE).unwrap();
        assert_eq!(
            f.debug_line(),
            "bktsize:2 buckets:4 items:7 deletes:0 filters:2 max_iterations:20 expansion:1"
        );
    }
}
