//! The expandable filter: blocks found by a directory, split one at a time
//! as they fill, the fingerprint schedule that keeps the false-positive
//! rate bounded at every size, and the exact mass that reports it. See
//! `DESIGN.md` for why it works.

use std::hash::Hasher;

use siphasher::sip128::{Hasher128, SipHasher13};

use super::block::{
    max_entries, Block, Entry, Rebuild, SplitHalves, MAX_DEPTH, MAX_F, MAX_STORED_ENTRIES, MIN_QBITS,
};
use super::errors::XfError;
use super::kernel::Kernel;
use super::plans::{Lengths, Plan, Plans};
use super::slots::{top_bits, Slots, Taken};
use super::undo::{Forget, Journal, Undo};
use super::{MAX_CAPACITY_LIMIT, MAX_ERROR_RATE, MIN_ERROR_RATE};
use crate::common::hash::murmur3_128;
use crate::common::memory::{alloc_class, Limits, OutOfMemory, Relocate};
use crate::common::sip4::{sip13_128, sip13_128_each};

pub use super::block::GROW_QBITS;

/// The most cache lines a lookup or an insert asks for ahead
/// ([`XfFilter::prefetch_block`]): a block of [`GROW_QBITS`] quotients at
/// the longest fingerprints takes about this many.
const MAX_PREFETCH_LINES: u64 = 24;

/// The most lines a batch's lookup asks for ahead: the block's first
/// four, its header (the first two or three) and the first fields. A
/// lookup reads the header and its run's one or two lines; a batch asking
/// for whole blocks (12-15 lines at 4M items, 1%-0.1%) eight items ahead
/// filled the core's queue of misses with lines no lookup read: batches of
/// 100 lookups at 4M items took 8-10% longer (`bench/xf-inproc.sh`, three
/// alternations, medians). Eight lines, and then four once a batch's
/// lookups stopped asking for their runs' lines (`Block::contains_in`):
/// at 16M items, 1%, batches of 100 hits 48 -> 42 ns
/// an item and misses 43 -> 35 (in process, two alternations); at 98M in
/// the server 0.98x and 0.85x; cache-resident, hits as they were, misses
/// 0.95x. Two lines were slower for hits (with the run's hint too). A
/// single lookup, with no other lookup's lines in flight, keeps the whole
/// block (with eight, its hits took 17% and 34% longer at 0.1% and 1%,
/// medians of three alternations), and adds, which shift a block's tail,
/// ask for as much as a block holds ([`AVERAGE_BLOCK`]).
const LOOKUP_LINES: u32 = 4;

/// As many lines as [`XfFilter::prefetch_block`] asks for unbounded: the
/// filter's average block, at most [`MAX_PREFETCH_LINES`].
const AVERAGE_BLOCK: u32 = u32::MAX;

/// The deepest first level: 2^16 blocks of 2^9 quotients (about 33 million
/// items, a few MB laid out).
pub const MAX_FIRST_LEVEL: u32 = 25;
/// Mass is counted in units of `2^-MASS_BITS` (see [`units`]): fine
/// enough that entries of up to 63 bits count exactly, so that the ceiling
/// (`fbits_within`) never refuses an honest item because of rounding. At
/// 1e-9 (the lowest rate), entries pass 63 bits only past a billion items,
/// and then each counts 1 unit of 9.2e9 the rate allows. A u64 still holds
/// a mass of 2 (the checks refuse anything above 0.5 before it matters).
pub const MASS_BITS: u32 = 63;

/// How many items ahead a batch starts a block's loads ([`XfFilter::prefetch_for`]):
/// enough to cover a memory load's latency with the work of the items
/// before (about 100 ns each), few enough that the lines stay in L1.
pub const PREFETCH_AHEAD: usize = 8;

/// Items a batch hashes before it looks them up or adds them (on the
/// stack, by `XF.MADD`, `XF.MEXISTS` and the client's in-process filter):
/// enough for the hints of [`XfFilter::prefetch_for`] to run ahead.
pub const HASHED_AT_ONCE: usize = 64;

/// What `XF.RESERVE` (or a creating write) asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct XfParams {
    pub error_rate: f64,
    /// Items the filter is laid out for at the start (a hint: it grows past it).
    pub capacity: u64,
    /// The most items the filter will hold; the rate is guaranteed up to it.
    pub max_capacity: u64,
}

impl XfParams {
    pub fn check(&self) -> Result<(), XfError> {
        if !(MIN_ERROR_RATE..=MAX_ERROR_RATE).contains(&self.error_rate) {
            return Err(XfError::BadErrorRate);
        }
        if !(1..=MAX_CAPACITY_LIMIT).contains(&self.capacity) {
            return Err(XfError::BadCapacity);
        }
        if !(1..=MAX_CAPACITY_LIMIT).contains(&self.max_capacity) {
            return Err(XfError::BadMaxCapacity);
        }
        if self.capacity > self.max_capacity {
            return Err(XfError::CapacityAboveMax);
        }
        Ok(())
    }

    /// The first level: address bits for `capacity` items at one per
    /// quotient, at most [`MAX_FIRST_LEVEL`] (a larger capacity starts there
    /// and grows: it is a hint, and laying out billions of empty quotients
    /// in one command would stall the server).
    pub fn first_level(&self) -> u32 {
        ceil_log2_u64(self.capacity).clamp(MIN_QBITS, MAX_FIRST_LEVEL)
    }

    /// The last level the schedule plans for: where `max_capacity` items
    /// can be, blocks split between 0.72 and 1.44 entries per quotient and
    /// halves start at half that (two levels past one per quotient), and
    /// never below the first.
    pub fn last_level(&self) -> u32 {
        (ceil_log2_u64(self.max_capacity) + 2).max(self.first_level())
    }
}

/// `ceil(log2(n))` for `n >= 1`.
pub fn ceil_log2_u64(n: u64) -> u32 {
    if n <= 1 {
        0
    } else {
        64 - (n - 1).leading_zeros()
    }
}

/// `ceil(log2(x))` of a positive double, exactly (no libm: the same bits on
/// every machine); 0 for `x <= 1`.
pub fn ceil_log2(x: f64) -> u32 {
    if x.is_nan() || x <= 1.0 {
        return 0;
    }
    if x.is_infinite() {
        return u32::MAX;
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mantissa = bits & ((1u64 << 52) - 1);
    (if mantissa == 0 { exp } else { exp + 1 }) as u32
}

/// `H(n) = 1 + 1/2 + ... + 1/n`, summed in one order so that every machine
/// gets the same bits.
pub(super) fn harmonic(n: u32) -> f64 {
    // Computed by the compiler, whose floating point is IEEE's, step for
    // step as a loop at run time would: an add reads it with no lock.
    const TABLE: [f64; 130] = {
        let mut t = [0.0; 130];
        let mut j = 1;
        while j < 130 {
            t[j] = t[j - 1] + 1.0 / j as f64;
            j += 1;
        }
        t
    };
    TABLE[n.min(129) as usize]
}

/// The mass of an entry with `t` total bits (address and fingerprint), in
/// units of `2^-MASS_BITS`, rounded up so that the sum never under-reports.
#[inline]
pub fn units(t: u32) -> u64 {
    if t <= MASS_BITS {
        1u64 << (MASS_BITS - t)
    } else {
        1
    }
}

/// The fingerprint length of an entry added at rank `k` (levels past the
/// first) of `last` (the rank of the last planned level), with `mass` (a
/// probability) already in, for a block whose place hashes to `u` (in
/// `[0, 1)`). The rate is spread over the ranks with weights `1/(k + 1)`;
/// a rank's budget is the lesser of its share planned from the start and
/// its share of what is left (`error - mass` over the ranks still to come):
/// ranks fill at once (blocks of neighbouring levels take entries side by
/// side), so a share of what is left alone would count again what the
/// shallower ranks still filling will spend (DESIGN.md). A rank adds at
/// most one entry per quotient (the first, filling from empty) or about
/// half of one (later ones: a block splits at `t` entries into two of
/// `t/2` each, `t` spread as [`split_at`] says).
///
/// The exact length for that budget, `F* = log2(per_quotient / budget)`,
/// is rarely a whole number: blocks take `floor(F*)` or one bit more, the
/// shorter with probability `p = 2^(floor(F*) + 1 - F*) - 1` (by `u`), so
/// that the expected mass is the budget's: half a bit per entry less, on
/// average, than rounding every length up.
pub fn fingerprint_bits(error: f64, k: u32, last: u32, mass: f64, u: f64) -> u32 {
    let budget = planned_budget(error, k, last).min(budget_left(error, k, last, mass));
    lengths_for(budget, k).pick(u)
}

/// The budget of an entry of rank `k` as planned ([`fingerprint_bits`]).
#[inline]
fn planned_budget(error: f64, k: u32, last: u32) -> f64 {
    let last = last.max(k);
    error / harmonic(last + 1) / f64::from(k + 1)
}

/// `H(last + 1) - H(k)`: the ranks from `k` on, over which what is left of
/// the rate is shared.
#[inline]
fn ranks_left(k: u32, last: u32) -> f64 {
    let last = last.max(k);
    harmonic(last + 1) - harmonic(k)
}

/// The budget of an entry of rank `k` from what is left of the rate once
/// `mass` (a probability) is spent ([`fingerprint_bits`]).
#[inline]
fn budget_left(error: f64, k: u32, last: u32, mass: f64) -> f64 {
    (error - mass) / ranks_left(k, last) / f64::from(k + 1)
}

/// The entries per quotient a rank `k` adds at most ([`fingerprint_bits`]).
fn per_quotient(k: u32) -> f64 {
    if k == 0 {
        1.0
    } else {
        0.52
    }
}

/// What turns the rate left into a rank-`k` entry's budget over its
/// quotient's share (`budget_left / per_quotient`, with the divisions as
/// one factor): a plan's scale past its end (`plans.rs`).
fn left_scale(k: u32, last: u32) -> f64 {
    1.0 / (per_quotient(k) * ranks_left(k, last) * f64::from(k + 1))
}

/// The lengths for `budget` at rank `k` ([`fingerprint_bits`]).
fn lengths_for(budget: f64, k: u32) -> Lengths {
    let fixed = |f: u32| Lengths { p: 0.0, down: f as u8, up: f as u8 };
    if budget <= 0.0 {
        return fixed(MAX_F);
    }
    let x = per_quotient(k) / budget; // 2^F*
    let up = ceil_log2(x);
    if up == 0 || up == u32::MAX {
        return fixed(up.clamp(1, MAX_F));
    }
    let down = up - 1; // 2^down < x <= 2^up
    let p = (1u64 << up.min(63)) as f64 / x - 1.0;
    Lengths { p, down: down.clamp(1, MAX_F) as u8, up: up.clamp(1, MAX_F) as u8 }
}

/// The plan of rank `k` (`plans.rs`) in a filter of rate `error`, hashing
/// `hashing` and last rank `last`, for entries at `level`: the planned
/// budget's lengths, and a mass below which they are the schedule's, because the budget left there is
/// not below the plan. That budget falls as the mass grows (each float
/// operation is monotonic), so checking it at one mass vouches for every
/// mass below. The mass where it meets the plan is solved for, lowered by
/// a millionth to stay clear of rounding, then checked. The mass is also
/// kept below where the filter's ceiling takes either length as it is
/// ([`fbits_within`] of an entry at `level`), so that an add under the
/// plan checks neither (30 instructions an add); so a plan is one level's
/// (blocks laid out above the first level share rank 0).
fn plan_of(k: u32, error: f64, hashing: Hashing, last: u32, level: u32) -> Plan {
    let planned = planned_budget(error, k, last);
    let holds = |mass: u64| budget_left(error, k, last, mass_rate(mass, hashing)) >= planned;
    // budget_left = planned where the mass, as a rate, is this.
    let rate = error - planned * ranks_left(k, last) * f64::from(k + 1);
    let meets_units = rate.max(0.0) * (1u64 << MASS_BITS) as f64 / mass_rate(1u64 << MASS_BITS, hashing);
    let meets = meets_units as u64; // saturating
    let below = meets - meets / (1 << 20);
    // At mass 0 the budget left is the rate over fewer ranks than the
    // plan's: never below it.
    let holds_to = if holds(below) { below } else { 0 };
    debug_assert!(holds(holds_to));
    let lengths = lengths_for(planned, k);
    // The shorter length's entry adds the more mass: where it fits, both do.
    let shorter = u32::from(lengths.down.min(lengths.up));
    let fits_to = ceiling_of(error, hashing).checked_sub(units(level + shorter));
    let holds_below = fits_to.map_or(0, |fits_to| fits_to.min(holds_to).saturating_add(1));
    Plan::new(level, lengths, holds_below, left_scale(k, last))
}

/// The most mass a filter of rate `error` hashing by `hashing` may hold, in
/// units ([`XfFilter::ceiling`]).
fn ceiling_of(error: f64, hashing: Hashing) -> u64 {
    match hashing {
        // A murmur3 filter's mass counts for more than its units say.
        Hashing::Murmur { .. } => rate_units(error / mass_rate(1u64 << MASS_BITS, hashing)),
        // The same as the division by 1.0 (exact), without it: past its
        // rank's plan every add asks for the ceiling, and the division sat
        // on its chain of float work (two instructions fewer an add).
        _ => rate_units(error),
    }
}

/// The fingerprint length an entry of `f` bits at `level` takes so that
/// the filter's mass stays within `ceiling` (its error rate in units): `f`
/// itself when its mass fits, else the least longer length that fits;
/// `None` when none up to [`MAX_F`] does (the caller refuses the item).
/// The schedule keeps honest filters well below the ceiling (it never plans to spend more than the rate);
/// the ceiling makes the rate an invariant for any items, including items
/// crafted against a known seed and filters whose mass a merge raised.
pub fn fbits_within(f: u32, level: u32, mass: u128, ceiling: u128) -> Option<u32> {
    let Some(room) = ceiling.checked_sub(mass) else {
        // Over its rate already: data an earlier release wrote (its
        // schedule could overspend at a MAXCAPACITY). The least mass an
        // entry can add, rather than refusing what that release took.
        return Some(MAX_F);
    };
    if u128::from(units(level + f)) <= room {
        return Some(f);
    }
    if room == 0 {
        return None;
    }
    // units(t) = 2^(MASS_BITS - t) <= room  <=>  t >= MASS_BITS - floor(log2(room)).
    let floor_log2 = 127 - room.leading_zeros();
    let least = MASS_BITS.saturating_sub(floor_log2).saturating_sub(level);
    let longer = least.max(f + 1);
    (longer <= MAX_F).then_some(longer)
}

/// A rate as mass units (the ceiling of a keyed filter of that rate).
pub fn rate_units(rate: f64) -> u64 {
    (rate * (1u64 << MASS_BITS) as f64) as u64
}

/// A block's place hashed to `[0, 1)` (its fingerprint lengths' share, see
/// [`fingerprint_bits`]).
pub fn place_hash(depth: u32, prefix: u64) -> f64 {
    let mut x = prefix.wrapping_mul(0xd6e8_feb8_6659_fd93) ^ (u64::from(depth) << 48) ^ 0x5851_f42d_4c95_7f2d;
    x = (x ^ (x >> 32)).wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^= x >> 32;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The environment variable that fixes every seed a process draws
/// ([`Seed::from_environment`]).
pub const HASH_SEED_VAR: &str = "BLOOMKIT_HASH_SEED";

/// The 128-bit key an expandable filter hashes its items with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Seed(pub [u64; 2]);

impl Seed {
    /// A seed from the process's random keys (the standard library's
    /// `RandomState`, seeded by the operating system): for filters made
    /// in-process. The module passes its server's secret instead.
    ///
    /// With [`HASH_SEED_VAR`] set, the seed that variable names instead
    /// (see [`Seed::from_environment`]).
    pub fn random() -> Seed {
        Seed::from_environment().unwrap_or_else(Seed::drawn)
    }

    /// The seed `BLOOMKIT_HASH_SEED` names, if it is set and not empty: the
    /// same seed for every filter this process makes, as `PYTHONHASHSEED`
    /// fixes Python's string hashing. It exists so that a test run, a
    /// benchmark or a bug report can be replayed exactly (the test suites
    /// run under several values, so that a test which holds for some
    /// secrets only fails every time); items from people who may know the
    /// value can then be crafted to collide, so it is never for production.
    pub fn from_environment() -> Option<Seed> {
        let text = std::env::var_os(HASH_SEED_VAR)?;
        let text = text.as_encoded_bytes();
        (!text.is_empty()).then(|| Seed::from_text(text))
    }

    /// 32 hexadecimal digits as they are, any other text hashed to 128 bits
    /// (so that `1`, `2`, `ci-3` are seeds too).
    pub fn from_text(text: &[u8]) -> Seed {
        Seed::from_hex(text).unwrap_or_else(|| {
            let mut h = SipHasher13::new_with_keys(0x626c_6f6f_6d6b_6974, 0x6861_7368_7365_6564);
            h.write(text);
            let words = h.finish128();
            Seed([words.h1, words.h2])
        })
    }

    /// A seed drawn from the standard library's random keys.
    fn drawn() -> Seed {
        use std::hash::BuildHasher;
        let state = std::collections::hash_map::RandomState::new();
        let mut a = state.build_hasher();
        a.write_u64(0x7866_7365_6564_0001);
        let mut b = state.build_hasher();
        b.write_u64(0x7866_7365_6564_0002);
        Seed([a.finish(), b.finish()])
    }

    /// 32 hexadecimal digits (`XF.RESERVE ... SEED`).
    pub fn to_hex(&self) -> String {
        format!("{:016x}{:016x}", self.0[0], self.0[1])
    }

    pub fn from_hex(text: &[u8]) -> Option<Seed> {
        if text.len() != 32 || !text.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        let s = std::str::from_utf8(text).ok()?;
        Some(Seed([u64::from_str_radix(&s[..16], 16).ok()?, u64::from_str_radix(&s[16..], 16).ok()?]))
    }
}

/// How a filter hashes its items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hashing {
    /// SipHash-1-3 (128-bit) keyed by a seed its owner chose or knows
    /// (`XF.RESERVE ... SEED`, every in-process filter): every format
    /// carries the seed in clear, so that such a filter merges wherever it goes.
    Keyed(Seed),
    /// SipHash-1-3 keyed by a server's deployment key ([`deployment_key`]
    /// of a secret in its key ring). Formats carry only the key's id
    /// ([`key_id`]), so nobody who reads a filter learns how it hashes.
    Deployment(Seed),
    /// A deployment filter loaded where its key is not known (no entry of
    /// the ring has its id): it saves, copies and dumps as it came, and
    /// hashes nothing until [`XfFilter::unseal`] finds its key.
    Sealed { id: u64 },
    /// bloomkit 0.1's (encoding 0): murmur3_x64_128 with seed 0, scaled by
    /// the root `m0` (its first table's quotients) into `[0, m0 / 2^c)`,
    /// `2^c` the power of two at or above `m0`.
    Murmur { m0: u64 },
}

/// What kind of [`Hashing`] a filter has, kept apart from its two words so
/// that the filter's own allocation stays 80 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum HashKind {
    Keyed,
    Murmur,
    Deployment,
    Sealed,
}

/// The hashing key of a deployment secret: SipHash-1-3 (128-bit) of a fixed
/// text under the secret, so that the secret itself is used for nothing else.
pub fn deployment_key(secret: Seed) -> Seed {
    let mut h = SipHasher13::new_with_keys(secret.0[0], secret.0[1]);
    h.write(b"bloomkit xf hash v2");
    let w = h.finish128();
    Seed([w.h1, w.h2])
}

/// The id a deployment key is known by in formats and replication: 64 bits
/// of a PRF of the key, which say nothing about it.
pub fn key_id(key: Seed) -> u64 {
    let mut h = SipHasher13::new_with_keys(key.0[0], key.0[1]);
    h.write(b"bloomkit xf key id");
    h.finish()
}

impl Hashing {
    /// The two words a filter keeps of it (a key, the id, or the root and
    /// 0), and what they are.
    pub(super) fn split(&self) -> ([u64; 2], HashKind) {
        match *self {
            Hashing::Keyed(Seed(k)) => (k, HashKind::Keyed),
            Hashing::Deployment(Seed(k)) => (k, HashKind::Deployment),
            Hashing::Sealed { id } => ([id, 0], HashKind::Sealed),
            Hashing::Murmur { m0 } => ([m0, 0], HashKind::Murmur),
        }
    }

    pub(super) fn join(words: [u64; 2], kind: HashKind) -> Hashing {
        match kind {
            HashKind::Keyed => Hashing::Keyed(Seed(words)),
            HashKind::Deployment => Hashing::Deployment(Seed(words)),
            HashKind::Sealed => Hashing::Sealed { id: words[0] },
            HashKind::Murmur => Hashing::Murmur { m0: words[0] },
        }
    }

    pub fn is_murmur(&self) -> bool {
        matches!(self, Hashing::Murmur { .. })
    }

    /// The key SipHash runs with: the seed, or for murmur3 (whose items
    /// hash with murmur3, and `Hash` values with this) the root and a
    /// constant. A sealed filter's key is not known: its callers refuse to
    /// hash for it ([`XfFilter::is_sealed`]); the words are a stand-in.
    fn sip_key(&self) -> [u64; 2] {
        match *self {
            Hashing::Keyed(Seed(k)) | Hashing::Deployment(Seed(k)) => k,
            Hashing::Sealed { id } => [id, !id],
            Hashing::Murmur { m0 } => [m0, 0x6d75_726d_7572],
        }
    }

    /// The deployment key's id (of a deployment or sealed filter).
    pub fn key_id(&self) -> Option<u64> {
        match *self {
            Hashing::Deployment(k) => Some(key_id(k)),
            Hashing::Sealed { id } => Some(id),
            Hashing::Keyed(_) | Hashing::Murmur { .. } => None,
        }
    }

    /// An item's position in a filter that hashes this way
    /// ([`XfFilter::hash`]): a copy of the hashing can hash items on
    /// another thread while the filter takes the hashes of earlier ones
    /// (`bloomkit dedup`'s reader).
    pub fn hash(&self, item: &[u8]) -> XfHash {
        match *self {
            Hashing::Murmur { m0 } => {
                let (a, b) = murmur3_128(item);
                XfHash(scale((u128::from(a) << 64) | u128::from(b), m0))
            }
            keyed => {
                let [k0, k1] = keyed.sip_key();
                XfHash(sip13_128(k0, k1, item))
            }
        }
    }

    /// `items` hashed [`HASHED_AT_ONCE`] at a time into one array on the
    /// stack, `each` called on every chunk with the index of its first
    /// item, its items and their hashes (in order), until it fails: how
    /// batches hash ahead of the lookups and adds that prefetch from the
    /// hashes ([`XfFilter::prefetch_for`]), with no allocation.
    pub fn hash_chunks<'t, T, E>(
        &self,
        items: &'t [T],
        bytes: impl Fn(&T) -> &[u8],
        mut each: impl FnMut(usize, &'t [T], &[XfHash]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut hashes = [XfHash(0); HASHED_AT_ONCE];
        let mut strings: [&[u8]; HASHED_AT_ONCE] = [&[]; HASHED_AT_ONCE];
        for (c, chunk) in items.chunks(HASHED_AT_ONCE).enumerate() {
            let n = chunk.len();
            if let Hashing::Murmur { .. } = self {
                for (h, item) in hashes.iter_mut().zip(chunk) {
                    *h = self.hash(bytes(item));
                }
            } else {
                // Keyed: SipHash-1-3 of many items at once in vector lanes
                // (`common::sip4`: the same hashes as `hash`, checked there
                // bit for bit).
                let [k0, k1] = self.sip_key();
                for (s, item) in strings.iter_mut().zip(chunk) {
                    *s = bytes(item);
                }
                sip13_128_each(k0, k1, &strings[..n], &mut hashes[..n]);
            }
            each(c * HASHED_AT_ONCE, chunk, &hashes[..n])?;
        }
        Ok(())
    }

    /// `c` for the murmur root (0 for keyed hashing).
    pub fn root_bits(&self) -> u32 {
        match self {
            Hashing::Murmur { m0 } => ceil_log2_u64(*m0),
            _ => 0,
        }
    }
}

/// What an add did: whether the item was new, and whether an occurrence was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Added {
    pub new: bool,
    pub stored: bool,
}

/// An item's position: a 128-bit binary fraction whose top bits are its
/// address (`XfFilter::hash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct XfHash(pub u128);

impl From<u128> for XfHash {
    fn from(h: u128) -> XfHash {
        XfHash(h)
    }
}

/// What `XF.INFO` reports.
#[derive(Clone, Debug, PartialEq)]
pub struct XfInfo {
    pub error_rate: f64,
    pub capacity: u64,
    pub max_capacity: u64,
    /// Items added and not deleted (`XF.CARD`).
    pub items: u64,
    /// Entries stored in memory: an entry with copies (an item added again,
    /// or items whose fingerprints ran out) counts once from its
    /// `FOLD_AT`-th copy on, which its block counts instead ([`XfFilter::entries`]
    /// counts every occurrence, as the stored form writes them).
    pub entries: u64,
    pub size_bytes: u64,
    pub blocks: u64,
    /// Entries of the fullest block, as `entries` counts them (a block
    /// crowded past its quotients by items crafted against a known seed;
    /// one item's copies are one entry from the `FOLD_AT`-th on).
    pub largest_block: u64,
    /// Quotients over all blocks (the address space in use).
    pub quotients: u64,
    /// The deepest level (address bits) of any block, and the shallowest.
    pub deepest_level: u32,
    pub shallowest_level: u32,
    /// Fingerprint bits the next item added would get (at the shallowest level).
    pub next_fingerprint_bits: u32,
    /// The false-positive rate guaranteed now: the expected number of entries
    /// a never-added item matches, which bounds its chance of a false match.
    pub guaranteed_rate: f64,
    /// Murmur3 (bloomkit 0.1's, predictable) or keyed.
    pub keyed: bool,
    /// A chunked load under way: blocks received, of how many.
    pub loading: Option<(u64, u64)>,
}

/// Slots and cache lines one lookup reads (the test of constant time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LookupCost {
    pub cache_lines: u64,
}

/// The blocks of a filter of more than one block.
pub(super) struct Dir {
    /// The blocks' bytes, kept as they change: a write asks the filter's
    /// size (limits, counters) and must not walk every block for it.
    /// Written only through [`Dir::resized`], which keeps the hint's lines
    /// ([`Slots::hint_lines`]) with it.
    block_bytes: u64,
    /// The blocks, by the hash's top bits (`slots.rs`).
    pub slots: Slots,
    /// The fingerprint lengths of the ranks adds are filling (`plans.rs`).
    pub plans: Plans,
}

/// What a filter holds.
pub(super) enum Store {
    One(Block),
    Many(Box<Dir>),
    /// `XF.LOADCHUNK` under way (see `formats`).
    Loading(Box<super::loading::Loading>),
}

/// The expandable filter (`XF.*`, `bkit-xflt` keys).
pub struct XfFilter {
    pub(super) params: XfParams,
    /// The hashing's words ([`Hashing::words`]), kept apart from its kind
    /// so that the filter's own allocation is 80 bytes, not 96.
    pub(super) seed: [u64; 2],
    pub(super) items: u64,
    /// Sum over entries of `units(a + f)`.
    pub(super) mass: u64,
    /// What the two words of `seed` are.
    pub(super) kind: HashKind,
    /// Quotient bits of every block.
    pub(super) qbits: u8,
    /// The schedule's first and last levels.
    pub(super) first_level: u8,
    pub(super) last_level: u8,
    pub(super) store: Store,
}

/// Where a hash falls: its block, quotient, the 64 bits after the
/// quotient, and the block's level.
#[derive(Clone, Copy, Debug)]
struct Spot {
    /// The block's directory slot (0 for a lone block).
    slot: usize,
    quotient: u32,
    rest: u64,
    level: u32,
    /// The block's prefix: the hash's top `depth` bits.
    prefix: u64,
    /// The entries of `quotient` (indexes in the block), once a lookup
    /// found them: the insert that follows it reuses them.
    run: Option<(u32, u32)>,
}

/// `2^(k/64)` in units of `2^-16`, `k` in `0..64`: a block's split
/// threshold is spread over a factor of two by its prefix (below).
const SPREAD: [u32; 64] = [
    65536, 66250, 66971, 67700, 68438, 69183, 69936, 70698, 71468, 72246, 73032, 73828, 74632, 75444, 76266,
    77096, 77936, 78785, 79642, 80510, 81386, 82273, 83169, 84074, 84990, 85915, 86851, 87796, 88752, 89719,
    90696, 91684, 92682, 93691, 94711, 95743, 96785, 97839, 98905, 99982, 101070, 102171, 103283, 104408,
    105545, 106694, 107856, 109031, 110218, 111418, 112631, 113858, 115098, 116351, 117618, 118899, 120194,
    121502, 122825, 124163, 125515, 126882, 128263, 129660,
];

/// The entries at which a block of `depth` and `prefix` splits: between
/// `SPLIT_LOW` and twice that per quotient, log-uniformly by its place.
/// Blocks fill at the same pace (the items are hashed), so with one
/// threshold they would all split within a few percent of the items, and
/// the filter's bytes per item would still rise and fall with each round of
/// splits; spread over a factor of two, the blocks of a filter are at every
/// phase of their growth at once, and its bytes follow its items.
///
/// The place chooses its share of the factor by its prefix's bits read in
/// reverse (the van der Corput sequence), not by a hash: the `2^d` blocks
/// of depth `d` take evenly spaced shares, and a block's two halves take
/// shares half the factor apart, one of them the lower, so that a filter of
/// a few dozen blocks is spread as evenly as one of thousands. Each share is
/// the middle of its interval (to the table's 64 steps: from depth 6 on, the
/// interval's start), so the few blocks of a shallow filter
/// average the middle of the factor, as a hash's draws did (from the
/// interval's start, their thresholds averaged lower, so they split sooner:
/// 1-2% more bits per item from 1,000 to 10,000 items). With a hash, a few
/// dozen blocks drew their shares at random, and the filter's bits per item
/// where it is 20-40 blocks (11,000-15,000 items at 1%) depended on the
/// draw: over 24 secrets, 16 points per doubling from 10,000 to 4M items,
/// the most bits per item over the least (the filter's own bytes) was at
/// worst 1.152 / 1.150 at 1% / 0.1% with the hash, 1.136 / 1.134 by the
/// reversed prefix (mean bits unchanged, 17.12 / 20.74 -> 17.13 / 20.68;
/// by `bench/xf-inproc.sh --secrets 24`'s allocator, 1.137 / 1.144). Changing the rule changes
/// where blocks split, not what any stored form means: every filter loads
/// as before.
pub fn split_at(qbits: u32, depth: u32, prefix: u64) -> u32 {
    debug_assert!(depth < 64 && prefix >> depth == 0, "a prefix of {depth} bits: {prefix:#x}");
    // The prefix's last bit first, and the middle of the share's interval
    // (the bit below the prefix's): its first six bits index SPREAD.
    let share = (prefix.reverse_bits() | (1u64 << 63 >> depth)) >> 58;
    ((u64::from(least_split_at(qbits)) * u64::from(SPREAD[share as usize])) >> 16) as u32
}

/// The least [`split_at`] of a block of `2^qbits` quotients, whatever its
/// place (`SPREAD` starts at 1): below it, no block of them splits, so an
/// add need not work out its place's own threshold.
#[inline]
pub fn least_split_at(qbits: u32) -> u32 {
    ((u64::from(SPLIT_LOW_NUM) << qbits) / u64::from(SPLIT_LOW_DEN)) as u32
}

/// The lowest split threshold, in entries per quotient (`NUM / DEN`).
const SPLIT_LOW_NUM: u32 = 18;
const SPLIT_LOW_DEN: u32 = 25;

/// Bytes counted for the filter's own fields (the allocation the keyspace
/// points to).
pub fn own_bytes() -> u64 {
    alloc_class(std::mem::size_of::<XfFilter>() as u64)
}

/// Bytes counted for a filter of more than one block besides its blocks:
/// the directory of `dir_len` slots (each a block's handle, `slots.rs`)
/// and its holder.
pub fn directory_bytes(dir_len: u64) -> u64 {
    alloc_class(dir_len * std::mem::size_of::<Block>() as u64)
        + alloc_class(std::mem::size_of::<Dir>() as u64)
}

/// Where a hash `h` falls in a block of `level` (address bits, the last
/// `qbits` of them its quotient): the quotient and the 64 bits after the
/// address, from which an entry's fingerprint is taken.
#[inline(always)]
pub fn position(h: u128, level: u32, qbits: u32) -> (u32, u64) {
    // A level is 3 to 60 bits (a depth of 48 at most, 12 quotient bits at
    // most): the hash's upper half holds the quotient, and each half's
    // shift is below 64 (a `u128` shift by a variable is a dozen).
    debug_assert!((1..64).contains(&level) && qbits <= level);
    let (hi, lo) = ((h >> 64) as u64, h as u64);
    let quotient = ((hi >> (64 - level)) & ((1u64 << qbits) - 1)) as u32;
    let rest = (hi << level) | (lo >> (64 - level));
    (quotient, rest)
}

/// The entry of `f` fingerprint bits (at least 1) that hash `h` makes in a
/// block of `level`.
pub fn entry_at(h: u128, level: u32, qbits: u32, f: u32) -> Entry {
    let (quotient, rest) = position(h, level, qbits);
    Entry { quotient, f, fp: rest >> (64 - f) }
}

/// The fingerprint length of an entry added now to the block at `level`
/// whose prefix is `prefix`, in a filter of the schedule's `(first, last)`
/// levels whose mass is `mass` (a probability): [`fingerprint_bits`] at
/// that rank, for that block's place.
pub fn fbits_at_level(
    error: f64,
    (first, last): (u32, u32),
    mass: f64,
    level: u32,
    prefix: u64,
    qbits: u32,
) -> u32 {
    let k = level.saturating_sub(first);
    let depth = level.saturating_sub(qbits);
    fingerprint_bits(error, k, last.saturating_sub(first), mass, place_hash(depth, prefix))
}

/// Whether a full block grows by doubling its quotients in place (a
/// filter of one block, up to [`GROW_QBITS`]) rather than by splitting.
pub fn doubles(one_block: bool, qbits: u32) -> bool {
    one_block && qbits < GROW_QBITS
}

/// The entries at which a block grows (doubles or splits, see [`doubles`]
/// and [`split_at`]) when the next one comes.
pub fn grow_threshold(one_block: bool, qbits: u32, depth: u32, prefix: u64) -> u32 {
    if doubles(one_block, qbits) {
        1 << qbits
    } else {
        split_at(qbits, depth, prefix)
    }
}

/// Whether a block of `len` entries is at its [`grow_threshold`]. Most adds
/// find their block below the least threshold of its kind and stop there,
/// without their place's own threshold (when it was a hash of the place,
/// 20 instructions an add; a few now).
#[inline]
pub fn at_grow_threshold(len: u32, one_block: bool, qbits: u32, depth: u32, prefix: u64) -> bool {
    (doubles(one_block, qbits) || len >= least_split_at(qbits))
        && len >= grow_threshold(one_block, qbits, depth, prefix)
}

/// Whether a directory of `slots` fits a filter of `blocks` blocks: at most
/// 16 slots per block, and 1,024 in all below that. Honest items keep 1 to
/// 2 slots per block; items crafted to crowd one place would otherwise
/// double the directory at every split. Growth asks it of the blocks after
/// a split; loads and merges of the blocks they hold plus one, so that no
/// directory a filter grew is refused where it is read.
pub fn directory_fits(slots: u64, blocks: u64) -> bool {
    slots <= blocks.saturating_mul(16).saturating_add(1024)
}

/// The deepest level a block may grow to in a filter whose schedule ends
/// at `last_level`: three past it, within [`MAX_DEPTH`].
pub fn deepest_level(last_level: u32, qbits: u32) -> u32 {
    (last_level + 3).min(MAX_DEPTH + qbits)
}

/// Whether splitting (or doubling) a block of `n` entries, `lower` of them
/// in the lower half of its quotients and `voids` whose fingerprint ran
/// out, would relieve it: each half holds at least an eighth of the
/// entries, and voids are fewer than a quarter. A block crowded in one
/// half (items that share their first bits) is not spread by a split:
/// splitting it again and again would only deepen the directory ([`grows`]
/// splits it only when the new entry goes to the sparse half). Voids are
/// copied to both halves of their quotient at a split, so a block where
/// they are a quarter or more stays whole too.
pub fn relieves(n: u32, lower: u32, voids: u32) -> bool {
    let least = n / 8;
    lower >= least && n - lower >= least && voids * 4 < n
}

/// Whether a block of `n` entries, `lower` in its lower half, is held whole
/// by its `voids` alone: its halves would spread it, but voids are a quarter
/// of its entries or more. Honest blocks at high error rates (0.25-0.5:
/// short fingerprints run out as the filter grows) come here, and leave
/// only by taking precise entries until the voids fall under a quarter, so
/// such a block keeps the stored bound ([`MAX_STORED_ENTRIES`]) rather
/// than [`max_entries`]: at 4,096, a filter at 0.5 froze a block at about
/// 3M items and answered 0 for the new items that matched its voids,
/// storing nothing (found in review). Crafted crowds fail on the halves.
pub fn held_by_voids(n: u32, lower: u32, voids: u32) -> bool {
    relieves(n, lower, 0) && voids * 4 >= n
}

/// Whether block `b` is held whole by its voids alone ([`held_by_voids`]),
/// in adds and merges alike: its halves are looked at first, so a block
/// crowded in one half (crafted items at the bound) is never walked.
pub(super) fn block_held_by_voids(b: &Block) -> bool {
    let (n, lower) = (b.len(), b.lower_half());
    relieves(n, lower, 0) && held_by_voids(n, lower, b.voids())
}

/// The half of a block of `depth` that `h` falls in: the hash bit a split
/// of that block moves into the address (0 lower, 1 upper).
fn half_of(h: XfHash, depth: u32) -> u64 {
    (h.0 >> (127 - depth)) as u64 & 1
}

/// Whether a block at its threshold grows for a new entry: a full block of
/// `n` entries, `lower` of them in the lower half of its quotients, `side`
/// in the half the new entry falls in, `voids` (counted only if asked)
/// whose fingerprint ran out. Growth always follows one of three rules:
/// - a lone block doubles (`doubling`): doubling doubles its threshold, so
///   it needs no halves;
/// - a block splits when the split spreads it ([`relieves`]);
/// - or when the new entry goes to the half holding under an eighth of the
///   entries: a crowd (items crafted against a known seed to share their
///   bits, one item's copies that are not yet a count) keeps one child, and
///   the rest of the block's range has room again, where staying whole
///   would refuse every new item of the range once the block holds
///   [`max_entries`].
///
/// Voids are copied to both halves of their quotient, so under every rule
/// they must be under a quarter of the entries, and the sparse child must
/// get under an eighth with them.
pub fn grows(n: u32, lower: u32, side: u32, doubling: bool, voids: impl FnOnce() -> u32) -> bool {
    let (balanced, sparse) = (relieves(n, lower, 0), side < n / 8);
    if !(doubling || balanced || sparse) {
        return false;
    }
    let voids = voids();
    if doubling {
        voids * 4 < n
    } else if balanced {
        relieves(n, lower, voids)
    } else {
        side + voids < n / 8 && voids * 4 < n
    }
}

impl XfFilter {
    /// A new, empty filter with a random seed (in-process use).
    pub fn new(
        error_rate: f64,
        capacity: u64,
        max_capacity: u64,
        limits: Limits,
    ) -> Result<XfFilter, XfError> {
        XfFilter::with_params(XfParams { error_rate, capacity, max_capacity }, limits)
    }

    pub fn with_params(params: XfParams, limits: Limits) -> Result<XfFilter, XfError> {
        XfFilter::with_seed(params, Seed::random(), limits)
    }

    /// A new, empty filter hashing with `seed`, laid out for `capacity` items.
    pub fn with_seed(params: XfParams, seed: Seed, limits: Limits) -> Result<XfFilter, XfError> {
        XfFilter::with_hashing(params, Hashing::Keyed(seed), limits)
    }

    /// A new, empty filter hashing as `hashing` says: keyed, deployment, or
    /// sealed (a replica told to make a filter of a secret it lacks makes
    /// it all the same, so that the key exists as on its primary); murmur3
    /// filters are only ever loaded.
    pub fn with_hashing(params: XfParams, hashing: Hashing, limits: Limits) -> Result<XfFilter, XfError> {
        params.check()?;
        let (seed, kind) = hashing.split();
        if kind == HashKind::Murmur {
            return Err(XfError::BadSeed);
        }
        let (first, last) = (params.first_level(), params.last_level());
        let qbits = first.min(GROW_QBITS);
        let depth = first - qbits;
        let empty = Block::build_sorted(qbits, depth, &[], 0)?;
        let (count, empty_bytes) = (1u64 << depth, empty.bytes());
        let bytes = own_bytes() + count * empty_bytes + if depth > 0 { directory_bytes(count) } else { 0 };
        limits.check(bytes)?;
        let store = if depth == 0 {
            Store::One(empty)
        } else {
            let mut blocks = Vec::new();
            blocks.try_reserve_exact(count as usize).map_err(|_| OutOfMemory)?;
            blocks.push(empty);
            for _ in 1..count {
                blocks.push(Block::build_sorted(qbits, depth, &[], 0)?);
            }
            Store::Many(Dir::of(&mut blocks, depth, count * empty_bytes)?)
        };
        Ok(XfFilter {
            params,
            seed,
            kind,
            items: 0,
            mass: 0,
            qbits: qbits as u8,
            first_level: first as u8,
            last_level: last as u8,
            store,
        })
    }

    pub fn try_clone(&self) -> Result<XfFilter, XfError> {
        let store = match &self.store {
            Store::One(b) => Store::One(b.try_clone()?),
            Store::Many(d) => Store::Many(Box::new(d.try_clone()?)),
            Store::Loading(l) => Store::Loading(Box::new(l.try_clone()?)),
        };
        Ok(XfFilter { store, ..*self })
    }

    // ---- what it is ----

    pub fn params(&self) -> XfParams {
        self.params
    }
    pub fn error_rate(&self) -> f64 {
        self.params.error_rate
    }
    pub fn capacity(&self) -> u64 {
        self.params.capacity
    }
    pub fn max_capacity(&self) -> u64 {
        self.params.max_capacity
    }
    pub fn hashing(&self) -> Hashing {
        Hashing::join(self.seed, self.kind)
    }

    /// The seed of a keyed filter (not of a deployment one: its key is the
    /// server's to keep).
    pub fn seed(&self) -> Option<Seed> {
        match self.hashing() {
            Hashing::Keyed(s) => Some(s),
            _ => None,
        }
    }

    /// A deployment filter whose key this process does not know: it hashes
    /// nothing, so callers refuse item commands on it (reads would answer
    /// at random). Saves, copies and dumps keep it as it came.
    pub fn is_sealed(&self) -> bool {
        self.kind == HashKind::Sealed
    }

    /// Gives a sealed filter its key if `resolve` knows its id; true when
    /// the filter is not sealed (any more).
    pub fn unseal(&mut self, resolve: impl FnOnce(u64) -> Option<Seed>) -> bool {
        if let Hashing::Sealed { id } = self.hashing() {
            match resolve(id).filter(|&k| key_id(k) == id) {
                Some(k) => (self.seed, self.kind) = (k.0, HashKind::Deployment),
                None => return false,
            }
        }
        true
    }
    /// Items added and not deleted (`XF.CARD`).
    pub fn items(&self) -> u64 {
        self.items
    }
    /// True while `XF.LOADCHUNK` chunks are still expected.
    pub fn is_loading(&self) -> bool {
        matches!(self.store, Store::Loading(_))
    }

    /// The blocks in address order.
    pub(super) fn blocks(&self) -> Blocks<'_> {
        match &self.store {
            Store::One(b) => Blocks::One(Some(b)),
            Store::Many(d) => Blocks::Many(d.slots.iter()),
            Store::Loading(_) => Blocks::One(None),
        }
    }

    /// Blocks (and splits so far: blocks less the first layout's).
    pub fn block_count(&self) -> u64 {
        match &self.store {
            Store::One(_) => 1,
            Store::Many(d) => d.slots.count() as u64,
            Store::Loading(_) => 0,
        }
    }

    /// Entries stored (copies included).
    pub fn entries(&self) -> u64 {
        self.blocks().map(Block::occurrences).sum()
    }

    /// Bytes allocated, as the allocator rounds them (`XF.INFO`, `MEMORY USAGE`).
    pub fn size_bytes(&self) -> u64 {
        own_bytes()
            + match &self.store {
                Store::One(b) => b.bytes(),
                Store::Many(d) => d.bytes(),
                Store::Loading(l) => l.bytes(),
            }
    }

    /// The mass as a probability: over `[0, 1)` for keyed filters; over the
    /// murmur root's `[0, m0 / 2^c)` for bloomkit 0.1's, hence the scale.
    pub fn guaranteed_rate(&self) -> f64 {
        mass_rate(self.mass, self.hashing())
    }

    pub fn info(&self) -> XfInfo {
        let blocks = self.blocks();
        let q = 1u64 << self.qbits;
        // One walk of the blocks' metadata words, each a cache miss on a
        // large filter (four walks made XF.INFO of a 200 MB filter take
        // tens of milliseconds).
        let (mut entries, mut largest, mut deepest, mut shallowest) = (0u64, 0u64, 0u32, u32::MAX);
        for b in blocks {
            let meta = b.meta();
            entries += u64::from(meta.n);
            largest = largest.max(u64::from(meta.n));
            deepest = deepest.max(meta.depth);
            shallowest = shallowest.min(meta.depth);
        }
        let qbits = u32::from(self.qbits);
        let (deepest, shallowest) = (deepest + qbits, shallowest.min(deepest) + qbits);
        XfInfo {
            error_rate: self.params.error_rate,
            capacity: self.params.capacity,
            max_capacity: self.params.max_capacity,
            items: self.items,
            entries,
            size_bytes: self.size_bytes(),
            blocks: self.block_count(),
            largest_block: largest,
            quotients: self.block_count() * q,
            deepest_level: deepest,
            shallowest_level: shallowest,
            // 0: the rate is spent, the next new item is refused.
            next_fingerprint_bits: self.fbits_at(shallowest, 0).unwrap_or(0),
            guaranteed_rate: self.guaranteed_rate(),
            keyed: !self.hashing().is_murmur(),
            loading: match &self.store {
                Store::Loading(l) => Some(l.progress()),
                _ => None,
            },
        }
    }

    /// Fingerprint bits of an entry added now to the block at `level`
    /// whose prefix is `prefix`.
    /// [`XfError::RateSpent`]: no length keeps the mass within the rate.
    pub(super) fn fbits_at(&self, level: u32, prefix: u64) -> Result<u32, XfError> {
        self.fbits_at_q(level, prefix, u32::from(self.qbits))
    }

    /// [`XfFilter::fbits_at`] for an add to a filter of more than one
    /// block, from the lengths planned for its rank (`plans.rs`) while the
    /// plan holds, and past it from the rate left by the plan's scale where
    /// that is clear: the same answer, with no float division.
    fn fbits_for_add(&mut self, level: u32, prefix: u64) -> Result<u32, XfError> {
        let (first, last, qbits) =
            (u32::from(self.first_level), u32::from(self.last_level), u32::from(self.qbits));
        let (error, hashing, last) = (self.params.error_rate, self.hashing(), last.saturating_sub(first));
        let (k, mass) = (level.saturating_sub(first), self.mass);
        let Store::Many(d) = &mut self.store else { return self.fbits_at(level, prefix) };
        let u = place_hash(level.saturating_sub(qbits), prefix);
        let Some(lengths) = d.plans.lengths(level, mass, || plan_of(k, error, hashing, last, level)) else {
            // Past the plan, the budget left's lengths without a division
            // where they are clear (`plans.rs`), checked by the ceiling as
            // `fbits_at_q` checks them.
            let Some(f) = d.plans.past_plan(level, error - mass_rate(mass, hashing), u) else {
                return self.fbits_at(level, prefix);
            };
            let f = fbits_within(f, level, u128::from(mass), u128::from(self.ceiling()))
                .ok_or(XfError::RateSpent { rate: error });
            debug_assert_eq!(f, self.fbits_at(level, prefix));
            return f;
        };
        // Where the plan holds, the ceiling takes its lengths (`plan_of`).
        let f = lengths.pick(u);
        debug_assert_eq!(Ok(f), self.fbits_at(level, prefix));
        Ok(f)
    }

    fn fbits_at_q(&self, level: u32, prefix: u64, qbits: u32) -> Result<u32, XfError> {
        let (first, last) = (u32::from(self.first_level), u32::from(self.last_level));
        let f = fbits_at_level(
            self.params.error_rate,
            (first, last),
            self.guaranteed_rate(),
            level,
            prefix,
            qbits,
        );
        fbits_within(f, level, u128::from(self.mass), u128::from(self.ceiling()))
            .ok_or(XfError::RateSpent { rate: self.params.error_rate })
    }

    /// The most mass the filter may hold, in units: its error rate. No add
    /// takes the guaranteed rate ([`XfFilter::guaranteed_rate`]) past it;
    /// a value that arrives above it (written by 0.2, whose schedule could
    /// overspend) stays above it, its new entries at the longest length.
    pub(super) fn ceiling(&self) -> u64 {
        ceiling_of(self.params.error_rate, self.hashing())
    }

    // ---- hashing ----

    /// An item's position.
    pub fn hash(&self, item: &[u8]) -> XfHash {
        self.hashing().hash(item)
    }

    /// The position of any `Hash` value (in-process use), keyed like items.
    pub fn hash_of<T: std::hash::Hash + ?Sized>(&self, value: &T) -> XfHash {
        let hashing = self.hashing();
        let [k0, k1] = hashing.sip_key();
        let mut h = SipHasher13::new_with_keys(k0, k1);
        value.hash(&mut h);
        let raw = h.finish128().as_u128();
        match hashing {
            Hashing::Murmur { m0 } => XfHash(scale(raw, m0)),
            _ => XfHash(raw),
        }
    }

    #[inline(always)]
    fn spot(&self, h: XfHash) -> Option<Spot> {
        let q = u32::from(self.qbits);
        let (slot, depth) = match &self.store {
            Store::One(_) => (0, 0),
            Store::Many(d) => {
                let slot = d.slots.slot_of(h.0);
                (slot, d.slots.at(slot).depth())
            }
            Store::Loading(_) => return None,
        };
        let level = depth + q;
        let (quotient, rest) = position(h.0, level, q);
        let prefix = top_bits(h.0, depth);
        Some(Spot { slot, quotient, rest, level, prefix, run: None })
    }

    /// The block at `i` (a directory slot, 0 for a lone block) of a
    /// filter not being loaded: what [`XfFilter::spot`] found.
    pub(super) fn block(&self, i: usize) -> &Block {
        match &self.store {
            Store::One(b) => b,
            Store::Many(d) => d.slots.at(i),
            Store::Loading(_) => unreachable!("a filter being loaded has no spot"),
        }
    }

    // ---- reads ----

    /// Whether the item is probably in: never false for an item added and
    /// not deleted; true for others with at most the guaranteed rate.
    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hash(self.hash(item))
    }

    pub fn contains_hash(&self, h: XfHash) -> bool {
        self.prefetch_block(h, AVERAGE_BLOCK);
        self.contains_asked(h)
    }

    /// [`XfFilter::contains_hash`] once its block was asked for.
    #[inline]
    fn contains_asked(&self, h: XfHash) -> bool {
        self.spot(h).is_some_and(|s| self.block(s.slot).contains(s.quotient, s.rest))
    }

    /// [`XfFilter::contains_hash`] of each hash in turn, with the memory
    /// loads of later items started early (as [`XfFilter::prefetch_for`]
    /// does, a block's first [`LOOKUP_LINES`] lines). The answers are
    /// `contains_hash`'s (prefetches are hints).
    pub fn contains_each(&self, hashes: &[XfHash], mut answer: impl FnMut(bool)) {
        let Store::Many(d) = &self.store else {
            for (i, &h) in hashes.iter().enumerate() {
                self.ask_ahead(hashes, i, LOOKUP_LINES);
                answer(self.contains_asked(h));
            }
            return;
        };
        // SAFETY: `Kernel::get` is never more than the CPU has.
        unsafe { look_up_as(Kernel::get(), d, u32::from(self.qbits), hashes, &mut answer) }
    }

    /// Called before item `i` of a batch of adds of `hashes` (a batch of
    /// lookups is [`XfFilter::contains_each`]'s, which asks for fewer lines):
    /// asks for the block of the item `PREFETCH_AHEAD` places on
    /// ([`XfFilter::prefetch_block`]), so that its lines arrive while the
    /// items before it are looked up or shift their blocks, and for the
    /// directory slot of the item twice as far on, so that the block's
    /// hint finds its slot in cache (since the slot holds the block, D:
    /// batches of 100 lookups at 4M items 5-14% faster in alternation,
    /// adds unchanged). (A second hint
    /// half as far, for the lines of the item's run once the metadata was
    /// in, measured no gain once the whole block is asked for. Adds gained
    /// nothing from the earlier hints, which asked for a block's first line
    /// only; from this one, batches of 100 adds in xf-inproc 6-11%.) Hints
    /// only: they never change an answer, and a block that splits before
    /// its item comes makes one a wasted load.
    #[inline]
    pub fn prefetch_for(&self, hashes: &[XfHash], i: usize) {
        self.ask_ahead(hashes, i, AVERAGE_BLOCK);
    }

    /// [`XfFilter::prefetch_for`], asking for at most `most` lines of a
    /// block ([`LOOKUP_LINES`] or [`AVERAGE_BLOCK`]).
    #[inline]
    fn ask_ahead(&self, hashes: &[XfHash], i: usize, most: u32) {
        const AHEAD: usize = PREFETCH_AHEAD;
        if i == 0 {
            // The first items' slots are read by their blocks' hints at once.
            hashes.iter().skip(AHEAD).take(AHEAD).for_each(|&h| self.prefetch_slot(h));
            hashes.iter().take(AHEAD).for_each(|&h| self.prefetch_block(h, most));
        }
        if let Some(&h) = hashes.get(i + 2 * AHEAD) {
            self.prefetch_slot(h);
        }
        if let Some(&h) = hashes.get(i + AHEAD) {
            self.prefetch_block(h, most);
        }
    }

    /// Asks for the directory slot `h` falls in.
    #[inline]
    fn prefetch_slot(&self, h: XfHash) {
        if let Store::Many(d) = &self.store {
            d.slots.prefetch_slot(h.0);
        }
    }

    /// Asks for the lines of the block `h` falls in, as many as a block of
    /// the filter holds on average, at most `most` (rounded up to four: `Words::
    /// prefetch_lines`; a lone block's first two), from the directory alone: a lookup's
    /// loads (the metadata, then the header and the fields it locates)
    /// would otherwise follow one another, and an insert's shift reads
    /// half the block line after line. Blind (the block's own size is in
    /// the metadata, the very load to be hidden), so a large block's last
    /// lines may come later and a small one's neighbour may come too.
    #[inline]
    fn prefetch_block(&self, h: XfHash, most: u32) {
        match &self.store {
            Store::Many(d) => {
                d.slots.prefetch(h.0, d.slots.hint_lines().min(most) as usize);
            }
            Store::One(b) => b.prefetch_lines(2),
            Store::Loading(_) => {}
        }
    }

    /// How many times the item is in: never less than the times it was
    /// added minus the times it was deleted.
    pub fn count(&self, item: &[u8]) -> u64 {
        self.count_hash(self.hash(item))
    }

    pub fn count_hash(&self, h: XfHash) -> u64 {
        self.spot(h).map_or(0, |s| u64::from(self.block(s.slot).count(s.quotient, s.rest)))
    }

    /// Cache lines a lookup of the item reads: the directory word, then
    /// the block's ([`Block::lookup_lines`]; for the constant-time test and
    /// benchmarks).
    pub fn lookup_cost(&self, item: &[u8]) -> LookupCost {
        let Some(s) = self.spot(self.hash(item)) else { return LookupCost { cache_lines: 0 } };
        let dir = u64::from(matches!(self.store, Store::Many(_)));
        LookupCost { cache_lines: dir + self.block(s.slot).lookup_lines(s.quotient) }
    }

    // ---- writes ----

    fn ready(&self) -> Result<(), XfError> {
        match self.store {
            Store::Loading(_) => Err(XfError::Loading),
            _ => Ok(()),
        }
    }

    /// Adds one occurrence of the item (even when it is already in, so that
    /// `count` counts adds); true when it was not in before (`XF.ADD`'s 1).
    /// At `MAXCAPACITY` or a byte limit an item already in answers false
    /// and nothing is stored; only a new item is refused.
    pub fn insert(&mut self, item: &[u8], limits: Limits) -> Result<bool, XfError> {
        self.insert_hash(self.hash(item), limits)
    }

    pub fn insert_hash(&mut self, h: XfHash, limits: Limits) -> Result<bool, XfError> {
        self.add_occurrence(h, limits).map(|a| a.new)
    }

    /// As [`XfFilter::insert_hash`], saying also whether an occurrence was
    /// stored: at a limit an item already in answers false and is not
    /// stored, which a replica (that skips the limits) must be told.
    pub fn add_occurrence(&mut self, h: XfHash, limits: Limits) -> Result<Added, XfError> {
        self.prefetch_block(h, AVERAGE_BLOCK);
        self.add_occurrence_with(h, limits, &mut Forget)
    }

    pub(super) fn add_occurrence_with(
        &mut self,
        h: XfHash,
        limits: Limits,
        journal: &mut impl Journal,
    ) -> Result<Added, XfError> {
        self.ready()?;
        let (s, was_in) = self.spot_and_contains(h)?;
        match self.add(s, h, limits, journal) {
            Ok(()) => Ok(Added { new: !was_in, stored: true }),
            Err(e) if was_in && e.is_limit() => Ok(Added { new: false, stored: false }),
            Err(e) => Err(e),
        }
    }

    /// Adds the item only when it is not (probably) in: true when added.
    pub fn insert_if_absent(&mut self, item: &[u8], limits: Limits) -> Result<bool, XfError> {
        self.insert_if_absent_hash(self.hash(item), limits)
    }

    pub fn insert_if_absent_hash(&mut self, h: XfHash, limits: Limits) -> Result<bool, XfError> {
        self.prefetch_block(h, AVERAGE_BLOCK);
        self.insert_if_absent_with(h, limits, &mut Forget)
    }

    pub(super) fn insert_if_absent_with(
        &mut self,
        h: XfHash,
        limits: Limits,
        journal: &mut impl Journal,
    ) -> Result<bool, XfError> {
        self.ready()?;
        let (s, was_in) = self.spot_and_contains(h)?;
        if was_in {
            return Ok(false);
        }
        self.add(s, h, limits, journal).map(|()| true)
    }

    /// [`XfFilter::insert_if_absent_hash`] of each hash in turn, with the
    /// blocks of later items asked for early ([`XfFilter::prefetch_for`]),
    /// answering each. Not a batch: at an error (a limit) the items before
    /// stay added, and the error says how many were ([`Batch`](super::Batch)
    /// is all or nothing, for commands that must be).
    pub fn insert_if_absent_each(
        &mut self,
        hashes: &[XfHash],
        limits: Limits,
        mut answer: impl FnMut(bool),
    ) -> Result<(), (usize, XfError)> {
        for (i, &h) in hashes.iter().enumerate() {
            self.prefetch_for(hashes, i);
            answer(self.insert_if_absent_with(h, limits, &mut Forget).map_err(|e| (i, e))?);
        }
        Ok(())
    }

    /// Where `h` goes, and whether the filter (probably) holds it: one
    /// lookup for an add, which needs both. Its block's lines were asked
    /// for already: by a single add before it came here, by a batch
    /// ([`XfFilter::prefetch_for`]) a few items before (asked again, they
    /// were 20-40 instructions an add of a batch for lines in cache).
    #[inline]
    fn spot_and_contains(&self, h: XfHash) -> Result<(Spot, bool), XfError> {
        let Some(s) = self.spot(h) else { return Err(XfError::Loading) };
        let (found, run) = self.block(s.slot).probe(s.quotient, s.rest);
        Ok((Spot { run: Some((run.start, run.end)), ..s }, found))
    }

    /// Stores one entry for `h` at its spot `s`: in place when its block
    /// has room, else the block is rebuilt, its quotients doubled or it is
    /// split, every new allocation made (and checked against `limits`)
    /// before anything changes, so that an error leaves the filter as it
    /// was. What it changed goes to `journal` (a batch undoes it:
    /// `batch.rs`).
    fn add(&mut self, s: Spot, h: XfHash, limits: Limits, journal: &mut impl Journal) -> Result<(), XfError> {
        if self.items >= self.params.max_capacity {
            return Err(XfError::Full { max_capacity: self.params.max_capacity });
        }
        journal.make_room()?;
        let qbits = u32::from(self.qbits);
        // The block read once for what the checks below ask of it: a
        // growth that places the entry returns, and one that cannot leaves
        // the block as it was.
        let b = self.block(s.slot);
        // Only a count list takes occurrences past the entries.
        let (len, counts_full) =
            (b.len(), b.is_counted() && b.occurrences() >= u64::from(MAX_STORED_ENTRIES));
        let one = matches!(self.store, Store::One(_));
        let (mut bound, doubling) = (max_entries(qbits), doubles(one, qbits));
        if at_grow_threshold(len, one, qbits, s.level - qbits, s.prefix)
            && self.grows_for(s.slot, h, doubling)
        {
            if let Some((was, now)) = self.grow_with(s, h, limits, journal)? {
                self.mass = self.mass.saturating_sub(was).saturating_add(now);
                self.items += 1;
                return Ok(());
            }
            if self.held_by_copies(s.slot, h, doubling) {
                bound = MAX_STORED_ENTRIES;
            }
        }
        // The bound on entries keeps every write's work bounded; copies
        // count in a block's occurrences, which its stored form writes one
        // by one (16 bits of them).
        if len >= bound && block_held_by_voids(self.block(s.slot)) {
            bound = MAX_STORED_ENTRIES;
        }
        if len >= bound || counts_full {
            return Err(XfError::Crowded);
        }
        let f = self.fbits_for_add(s.level, s.prefix)?;
        let e = Entry { quotient: s.quotient, f, fp: s.rest >> (64 - f) };
        let inserted = self.update_block(s.slot, |b| b.insert_in(e, s.run.map(|(a, b)| a..b)));
        let Some(inserted) = inserted else { return Err(XfError::Loading) };
        let copy = match inserted {
            Ok(done) => {
                journal.record(Undo::Inserted { slot: s.slot, quotient: e.quotient, at: done.at });
                done.copy
            }
            Err(Rebuild) => self.rebuild_with(s.slot, e, limits, journal)?,
        };
        if !copy {
            self.mass = self.mass.saturating_add(units(s.level + f));
        }
        self.items += 1;
        Ok(())
    }

    /// The block at slot `i` rebuilt with `e` in it, in a larger allocation (room is
    /// short) or anew (a wider field, or the first copy of an entry):
    /// allocated and checked against `limits` before it replaces the old
    /// one. True when `e` was a copy.
    fn rebuild_with(
        &mut self,
        i: usize,
        e: Entry,
        limits: Limits,
        journal: &mut impl Journal,
    ) -> Result<bool, XfError> {
        let before = self.size_bytes();
        let old = self.block(i);
        let copy = old.holds(&e);
        let rebuilt = if old.fits_wider(&e) && !copy {
            // Only room is short: the same bits in a larger allocation.
            let mut grown = old.with_more_room()?;
            grown.insert(e).expect("room for one more");
            grown
        } else if let Some(wide) = if copy { None } else { old.widened_with(e)? } {
            // Only the width is short: the same entries' fields, wider.
            wide
        } else {
            let mut all = old.entries();
            place_sorted(&mut all, e);
            Block::build_sorted(old.qbits(), old.depth(), &all, 0)?
        };
        let after = before - old.bytes() + rebuilt.bytes();
        limits.check_growth(before, after)?;
        let old = self.replace_block(i, rebuilt);
        journal.record(Undo::Replaced { slot: i, old });
        Ok(copy)
    }

    /// The entry `h` makes in a block of `level` whose prefix is `prefix`.
    fn entry_for(&self, h: XfHash, level: u32, prefix: u64, qbits: u32) -> Result<Entry, XfError> {
        Ok(entry_at(h.0, level, qbits, self.fbits_at_q(level, prefix, qbits)?))
    }

    /// Whether the full block at slot `i` grows for `h` ([`grows`]): its halves, the
    /// side `h` falls on, and its voids, counted by a walk only when the
    /// halves alone would let it grow.
    fn grows_for(&self, i: usize, h: XfHash, doubling: bool) -> bool {
        let b = self.block(i);
        let (n, lower) = (b.len(), b.lower_half());
        let side = if half_of(h, b.depth()) == 1 { n - lower } else { lower };
        grows(n, lower, side, doubling, || b.voids())
    }

    /// Whether the block at slot `i`, which would grow for `h`, is held whole only by
    /// its copies: growth would double a void's copies past what its stored
    /// form counts ([`grown_storable`]). Such a block (an honest item added
    /// tens of thousands of times, whose entry ran out of bits as the filter
    /// grew) takes entries up to what its stored form holds rather than
    /// [`max_entries`], so that it keeps taking random items (at the bound,
    /// one such item added 40,000 times made a filter refuse 26,516 of 4M
    /// random items; with it, as many as the stored form allows: 12,992).
    /// Counts in the stored form would lift this (`DESIGN-NEXT.md` 2.2).
    fn held_by_copies(&self, i: usize, h: XfHash, doubling: bool) -> bool {
        let b = self.block(i);
        !grown_storable(b, doubling, half_of(h, b.depth()))
    }

    /// Puts `b` in place of the block at slot `i`, keeping the byte count; gives back
    /// the block it replaced.
    pub(super) fn replace_block(&mut self, i: usize, b: Block) -> Block {
        match &mut self.store {
            Store::One(one) => std::mem::replace(one, b),
            Store::Many(d) => {
                let was = d.slots.at(i).bytes();
                d.resized(was, b.bytes());
                d.slots.replace(i, b)
            }
            Store::Loading(_) => b,
        }
    }

    /// `write` on the block at `i` (a directory slot, 0 for a lone block);
    /// `None` for a filter being loaded. A write that changes the block's
    /// bytes counts them itself (in-place writes do not change them).
    pub(super) fn update_block<R>(&mut self, i: usize, write: impl FnOnce(&mut Block) -> R) -> Option<R> {
        match &mut self.store {
            Store::One(b) => Some(write(b)),
            Store::Many(d) => Some(d.slots.update(i, write)),
            Store::Loading(_) => None,
        }
    }

    /// Makes room in a full block and places `h` in it in one step: doubles
    /// a lone block's quotients, or splits the block, with `h`'s entry
    /// built into the new block(s) at their level. Every allocation (the
    /// blocks, a doubled directory) is made and
    /// checked against `limits` before anything changes, so a refusal leaves
    /// the filter as it was (a replica, which never sees the refused write,
    /// stays identical). `Some((was, now))`: placed, the block's mass before
    /// and its new blocks' after; `None`: it cannot grow here (the deepest
    /// level the filter allows, a directory out of proportion to its
    /// blocks, or a void's copies past what a stored block writes: only
    /// crafted or hot items come there), and the caller places it in the
    /// block.
    fn grow_with(
        &mut self,
        s: Spot,
        h: XfHash,
        limits: Limits,
        journal: &mut impl Journal,
    ) -> Result<Option<(u64, u64)>, XfError> {
        let qbits = u32::from(self.qbits);
        if s.level + 1 > deepest_level(u32::from(self.last_level), qbits) {
            return Ok(None);
        }
        let doubling = matches!(self.store, Store::One(_)) && doubles(true, qbits);
        let depth = self.block(s.slot).depth();
        let bit = half_of(h, depth);
        if !grown_storable(self.block(s.slot), doubling, bit) {
            return Ok(None);
        }
        if doubling {
            let was = mass_of(self.block(s.slot), s.level);
            return Ok(Some((was, self.double_lone(h, limits, journal)?)));
        }
        let child_level = s.level + 1;
        let child_prefix = (s.prefix << 1) | bit;
        let e = self.entry_for(h, child_level, child_prefix, qbits)?;
        let Halves { lo, hi, was, now } = split(self.block(s.slot), e, bit == 1, s.level)?;
        debug_assert!(storable(&lo) && storable(&hi));
        debug_assert_eq!(was, mass_of(self.block(s.slot), s.level));
        debug_assert_eq!(now, mass_of(&lo, child_level) + mass_of(&hi, child_level));
        let placed = match self.store {
            Store::One(_) => self.split_lone(lo, hi, limits, journal),
            Store::Many(_) => self.split_in_directory(s, depth, lo, hi, limits, journal),
            Store::Loading(_) => Err(XfError::Loading),
        }?;
        Ok(placed.then_some((was, now)))
    }

    /// Doubles the lone block's quotients with `h`'s entry in it: the mass
    /// of the doubled block (which [`grown_storable`] found storable).
    fn double_lone(&mut self, h: XfHash, limits: Limits, journal: &mut impl Journal) -> Result<u64, XfError> {
        let (qbits, before) = (u32::from(self.qbits), self.size_bytes());
        let b = self.block(0);
        let e = self.entry_for(h, qbits + 1, 0, qbits + 1)?;
        let mut all = Vec::with_capacity(b.len() as usize + 8);
        b.for_each_occurrence(|x| give_bit(x, &mut |c| all.push(c)));
        place_sorted(&mut all, e);
        let doubled = Block::build(qbits + 1, 0, &mut all, 0)?;
        debug_assert!(storable(&doubled));
        let now = mass_of(&doubled, qbits + 1);
        limits.check_growth(before, before - b.bytes() + doubled.bytes())?;
        let Store::One(old) = std::mem::replace(&mut self.store, Store::One(doubled)) else { unreachable!() };
        journal.record(Undo::Lone { old, qbits: self.qbits });
        self.qbits += 1;
        Ok(now)
    }

    /// The lone block split into `lo` and `hi`, under a directory of two.
    fn split_lone(
        &mut self,
        lo: Block,
        hi: Block,
        limits: Limits,
        journal: &mut impl Journal,
    ) -> Result<bool, XfError> {
        let before = self.size_bytes();
        let added = lo.bytes() + hi.bytes() + directory_bytes(2);
        limits.check_growth(before, before - self.block(0).bytes() + added)?;
        let block_bytes = lo.bytes() + hi.bytes();
        let mut two = Vec::new();
        two.try_reserve_exact(2).map_err(|_| OutOfMemory)?;
        two.extend([lo, hi]);
        let dir = Store::Many(Dir::of(&mut two, 1, block_bytes)?);
        let Store::One(old) = std::mem::replace(&mut self.store, dir) else { unreachable!() };
        journal.record(Undo::Lone { old, qbits: self.qbits });
        Ok(true)
    }

    /// The block at slot `s.slot` (of `depth`) split into `lo` and `hi`,
    /// the directory doubled if the block was at its depth. False: the
    /// directory may not double ([`directory_fits`]).
    fn split_in_directory(
        &mut self,
        s: Spot,
        depth: u32,
        lo: Block,
        hi: Block,
        limits: Limits,
        journal: &mut impl Journal,
    ) -> Result<bool, XfError> {
        let before = self.size_bytes();
        let Store::Many(d) = &mut self.store else { return Err(XfError::Loading) };
        let slots = d.slots.len();
        let deeper = depth + 1 > d.slots.depth();
        if deeper && !directory_fits(slots as u64 * 2, d.slots.count() as u64 + 1) {
            return Ok(false);
        }
        let new_len = if deeper { slots * 2 } else { slots };
        let added = lo.bytes() + hi.bytes() + directory_bytes(new_len as u64);
        let removed = d.slots.at(s.slot).bytes() + directory_bytes(slots as u64);
        limits.check_growth(before, before - removed + added)?;
        let room = if deeper { Some(d.slots.room_to_deepen()?) } else { None };
        journal.make_room_for_split()?;
        // Nothing fails past here.
        let (was, now) = (d.slots.at(s.slot).bytes(), lo.bytes() + hi.bytes());
        let taken: Taken = d.slots.split(s.slot, lo, hi, room);
        d.resized(was, now);
        journal.record_split(taken);
        Ok(true)
    }

    /// Removes one occurrence: the most specific entry the item matches.
    /// True when one was removed. For an item never added, an entry it
    /// matches by chance (another item's) is removed, as in every
    /// fingerprint filter: that item may then be missed.
    pub fn delete(&mut self, item: &[u8]) -> Result<bool, XfError> {
        self.delete_hash(self.hash(item))
    }

    pub fn delete_hash(&mut self, h: XfHash) -> Result<bool, XfError> {
        self.ready()?;
        let Some(s) = self.spot(h) else { return Ok(false) };
        let Some((e, i)) = self.block(s.slot).best(s.quotient, s.rest) else { return Ok(false) };
        let was = self.block(s.slot).bytes();
        let gone =
            self.update_block(s.slot, |b| b.remove_canonical(s.quotient, i)).ok_or(XfError::Loading)??;
        if let Store::Many(d) = &mut self.store {
            let now = d.slots.at(s.slot).bytes();
            d.resized(was, now);
        }
        if gone {
            self.mass = self.mass.saturating_sub(units(s.level + e.f));
        }
        self.items = self.items.saturating_sub(1);
        Ok(true)
    }

    /// Offers the buffers to a server's defragmentation from buffer `from`
    /// on (0: the directory, then `1 + s` the block whose first slot is
    /// `s`: [`Slots::relocate`]); `Some(next)` when cut short.
    pub fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize> {
        match &mut self.store {
            Store::One(b) => {
                if from == 0 {
                    b.relocate(to);
                }
                None
            }
            Store::Many(d) => d.slots.relocate(from, to),
            Store::Loading(_) => None,
        }
    }
}

impl XfError {
    /// A refusal by a limit (not a property of the item). An add of an
    /// item already in answers 0 at a limit rather than failing: one item
    /// added tens of thousands of times fills its place in a block
    /// (`Crowded`), and a batch that holds it once more must not be
    /// refused whole for that.
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            XfError::Full { .. }
                | XfError::Crowded
                | XfError::RateSpent { .. }
                | XfError::TooLarge { .. }
                | XfError::OverMaxmemory
                | XfError::OutOfMemory
        )
    }
}

/// Whether a block's stored form can hold it: its occurrences written one
/// by one. A void's copies go to both quotients it covers when its block
/// splits or doubles, so growth can double them: such a block stays whole
/// (its copies are counted, not stored, in memory).
fn storable(b: &Block) -> bool {
    b.occurrences() <= u64::from(MAX_STORED_ENTRIES)
}

/// Whether block `b` grown (doubled, or split with the new entry going to
/// half `bit`) with one more entry is [`storable`], decided before anything
/// is built: a block that cannot grow takes entries in place, and every add
/// to it would otherwise build the split again to find that out.
fn grown_storable(b: &Block, doubling: bool, bit: u64) -> bool {
    let max = u64::from(MAX_STORED_ENTRIES);
    // Growth at most doubles a block's occurrences (its voids').
    if b.occurrences() * 2 < max {
        return true;
    }
    let [lo, hi] = b.grown_occurrences();
    if doubling {
        lo + hi < max
    } else {
        lo + u64::from(bit == 0) <= max && hi + bit <= max
    }
}

/// The mass of block `b`'s entries at `level`, copies counted once.
pub(super) fn mass_of(b: &Block, level: u32) -> u64 {
    let mut mass = 0u64;
    b.for_each_distinct(|e| mass = mass.saturating_add(units(level + e.f)));
    mass
}

/// The mass in units as a probability (see [`XfFilter::guaranteed_rate`]).
pub(super) fn mass_rate(mass: u64, hashing: Hashing) -> f64 {
    let p = mass as f64 / (1u64 << MASS_BITS) as f64;
    match hashing {
        Hashing::Murmur { m0 } => p * (1u64 << ceil_log2_u64(m0)) as f64 / m0 as f64,
        _ => p,
    }
}

/// `h x m0 / 2^c` (`2^c >= m0`): a murmur hash scaled into bloomkit 0.1's
/// root, so that its top `c + L` bits are the quotient of a table of
/// `m0 x 2^L` quotients and the bits after its fingerprint.
pub fn scale(h: u128, m0: u64) -> u128 {
    let c = ceil_log2_u64(m0);
    let m = u128::from(m0);
    let hi = (h >> 64) * m; // < 2^128
    let lo = (h & u128::from(u64::MAX)) * m;
    // The 192-bit product is hi << 64 + lo; shift it right by c.
    let top = hi + (lo >> 64); // may not overflow: hi < 2^(64+c), plus < 2^64
    let low = lo as u64;
    if c == 0 {
        (top << 64) | u128::from(low)
    } else {
        (top << (64 - c)) | (u128::from(low) >> c)
    }
}

/// [`XfFilter::contains_each`] of a directory in `kernel`'s instructions.
///
/// # Safety
/// The CPU must have `kernel`'s instructions ([`Kernel::get`]'s are).
unsafe fn look_up_as(kernel: Kernel, d: &Dir, qbits: u32, hashes: &[XfHash], answer: &mut impl FnMut(bool)) {
    match kernel {
        // SAFETY: the caller's promise.
        #[cfg(target_arch = "x86_64")]
        Kernel::Pdep => unsafe { look_up_pdep(d, qbits, hashes, answer) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Kernel::Popcnt => unsafe { look_up_popcnt(d, qbits, hashes, answer) },
        // SAFETY: without `pdep`, any CPU.
        _ => unsafe { look_up::<false>(d, qbits, hashes, answer) },
    }
}

/// [`XfFilter::contains_each`] of a directory, compiled for `pdep`.
///
/// # Safety
/// The CPU must have `popcnt`, `lzcnt`, `bmi1` and `bmi2`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,lzcnt,bmi1,bmi2")]
unsafe fn look_up_pdep(d: &Dir, qbits: u32, hashes: &[XfHash], answer: &mut impl FnMut(bool)) {
    // SAFETY: the caller's promise, `bmi2` among it.
    unsafe { look_up::<true>(d, qbits, hashes, answer) };
}

/// [`XfFilter::contains_each`] of a directory, compiled for `popcnt`.
///
/// # Safety
/// The CPU must have `popcnt`, `lzcnt` and `bmi1`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,lzcnt,bmi1")]
unsafe fn look_up_popcnt(d: &Dir, qbits: u32, hashes: &[XfHash], answer: &mut impl FnMut(bool)) {
    // SAFETY: without `pdep`, any CPU.
    unsafe { look_up::<false>(d, qbits, hashes, answer) };
}

/// A directory's batch of lookups in a loop of its own, inlined into a
/// function compiled for the process's kernel (`kernel.rs`), so that an
/// item calls nothing: one kernel's function an item (`Block::contains`,
/// then its kernel's probe, each a frame and the kernel's dispatch) was
/// about 60 instructions of a batch hit's 452 at 200,000 items, 1%. The
/// store is matched once, not three times an item, and the hints' items
/// past the batch's end are tested only in its last `2 * PREFETCH_AHEAD`
/// (8 more).
///
/// # Safety
/// With `PDEP`, the CPU must have `bmi2`.
#[inline(always)]
unsafe fn look_up<const PDEP: bool>(d: &Dir, qbits: u32, hashes: &[XfHash], answer: &mut impl FnMut(bool)) {
    const AHEAD: usize = PREFETCH_AHEAD;
    let slots = &d.slots;
    let lines = slots.hint_lines().min(LOOKUP_LINES) as usize;
    hashes.iter().skip(AHEAD).take(AHEAD).for_each(|h| slots.prefetch_slot(h.0));
    hashes.iter().take(AHEAD).for_each(|h| slots.prefetch(h.0, lines));
    let inner = hashes.len().saturating_sub(2 * AHEAD);
    for (i, &h) in hashes[..inner].iter().enumerate() {
        slots.prefetch_slot(hashes[i + 2 * AHEAD].0);
        slots.prefetch(hashes[i + AHEAD].0, lines);
        // SAFETY: the caller's promise.
        answer(unsafe { look_up_one::<PDEP>(slots, qbits, h) });
    }
    for (i, &h) in hashes.iter().enumerate().skip(inner) {
        if let Some(&h) = hashes.get(i + AHEAD) {
            slots.prefetch(h.0, lines);
        }
        // SAFETY: as above.
        answer(unsafe { look_up_one::<PDEP>(slots, qbits, h) });
    }
}

/// One lookup of [`look_up`] (the same `# Safety`): a function, not a closure, so that it is
/// compiled with the kernel's instructions it is inlined into (a closure
/// is a function of its own, compiled for the baseline).
#[inline(always)]
unsafe fn look_up_one<const PDEP: bool>(slots: &Slots, qbits: u32, h: XfHash) -> bool {
    let b = slots.at(slots.slot_of(h.0));
    let (quotient, rest) = position(h.0, b.depth() + qbits, qbits);
    // SAFETY: the caller's promise.
    unsafe { b.contains_in::<PDEP>(quotient, rest) }
}

/// The lines of a block of the average size, `block_bytes` over `blocks`,
/// at most [`MAX_PREFETCH_LINES`].
fn hint_lines(block_bytes: u64, blocks: usize) -> u32 {
    (block_bytes / (blocks.max(1) as u64 * 64) + 1).min(MAX_PREFETCH_LINES) as u32
}

impl Dir {
    /// The directory of `blocks` (in address order, `block_bytes` in all)
    /// at `depth`, which it takes when they cover every slot ([`Slots::of`]).
    pub(super) fn of(blocks: &mut Vec<Block>, depth: u32, block_bytes: u64) -> Result<Box<Dir>, XfError> {
        debug_assert_eq!(block_bytes, blocks.iter().map(Block::bytes).sum::<u64>());
        let mut slots = Slots::of(blocks, depth)?;
        slots.set_hint_lines(hint_lines(block_bytes, slots.count()));
        Ok(Box::new(Dir { block_bytes, slots, plans: Plans::default() }))
    }

    /// A block of `was` bytes became `now` bytes (or two blocks, or one of
    /// two: the slots already say how many blocks there are).
    pub(super) fn resized(&mut self, was: u64, now: u64) {
        self.block_bytes = self.block_bytes - was + now;
        self.slots.set_hint_lines(hint_lines(self.block_bytes, self.slots.count()));
    }

    fn bytes(&self) -> u64 {
        debug_assert_eq!(self.block_bytes, self.slots.iter().map(Block::bytes).sum::<u64>());
        debug_assert_eq!(self.slots.hint_lines(), hint_lines(self.block_bytes, self.slots.count()));
        self.block_bytes + directory_bytes(self.slots.len() as u64)
    }

    fn try_clone(&self) -> Result<Dir, OutOfMemory> {
        let slots = self.slots.try_clone()?;
        Ok(Dir { block_bytes: self.block_bytes, slots, plans: self.plans })
    }
}

/// [`XfFilter::blocks`]: a lone block, or a directory's.
pub(super) enum Blocks<'a> {
    One(Option<&'a Block>),
    Many(super::slots::Iter<'a>),
}

impl<'a> Iterator for Blocks<'a> {
    type Item = &'a Block;

    fn next(&mut self) -> Option<&'a Block> {
        match self {
            Blocks::One(b) => b.take(),
            Blocks::Many(it) => it.next(),
        }
    }
}

/// A block split in two ([`split`]), with the masses before and after.
struct Halves {
    lo: Block,
    hi: Block,
    /// The split block's mass at its level, and its halves' at theirs.
    was: u64,
    now: u64,
}

/// Splits a block of `level` in two of one more depth: the lower half of
/// its quotients goes to the first, the upper to the second, each entry
/// giving its first fingerprint bit to its quotient; `extra` (already at
/// the new level) joins the second when `to_high`, else the first. The
/// masses ([`mass_of`]) are summed from the entries the split walks
/// anyway: a split used to decode the block and its halves once more for
/// them, a fifth of an insert's time amortized.
fn split(b: &Block, extra: Entry, to_high: bool, level: u32) -> Result<Halves, OutOfMemory> {
    let q = 1u32 << b.meta().qbits;
    let extra = Entry { quotient: extra.quotient + if to_high { q } else { 0 }, ..extra };
    // From the fields, where the halves' form allows (most splits); else
    // from the entries. The same bytes and masses either way.
    let Some(halves) = b.split_fields(extra) else { return split_entries(b, extra, level) };
    let SplitHalves { lo, hi, was, now } = halves?;
    let (was, now) = (mass_of_lengths(&was, level), mass_of_lengths(&now, level + 1));
    // (Out of memory for the check is no finding.)
    debug_assert!(split_entries(b, extra, level)
        .map_or(true, |h| { h.lo.same_words(&lo) && h.hi.same_words(&hi) && (h.was, h.now) == (was, now) }));
    Ok(Halves { lo, hi, was, now })
}

/// The mass of distinct entries counted by length (`counts[f]`) at `level`
/// (the same sum, saturated, as adding them one by one).
fn mass_of_lengths(counts: &[u32; 64], level: u32) -> u64 {
    let mut mass = 0u64;
    for (f, &n) in (0u32..).zip(counts) {
        mass = mass.saturating_add(u64::from(n).saturating_mul(units(level + f)));
    }
    mass
}

/// [`split`] through the block's entries: decoded, given their bit into
/// two lists, and built.
fn split_entries(b: &Block, extra: Entry, level: u32) -> Result<Halves, OutOfMemory> {
    let meta = b.meta();
    let q = 1u32 << meta.qbits;
    // Room for all that either half can get, taken and checked before the
    // walk, so that no list grows while it is filled: a void becomes two
    // entries, both in the same half, so a half gets at most twice the
    // occurrences, and the new entry.
    let most = b.occurrences().checked_mul(2).and_then(|n| usize::try_from(n + 1).ok()).ok_or(OutOfMemory)?;
    let (mut lo, mut hi) = (Vec::new(), Vec::new());
    lo.try_reserve_exact(most).map_err(|_| OutOfMemory)?;
    hi.try_reserve_exact(most).map_err(|_| OutOfMemory)?;
    let mut was = DistinctMass::at(level);
    let mut route = |c: Entry| match c.quotient.checked_sub(q) {
        None => lo.push(c),
        Some(quotient) => hi.push(Entry { quotient, ..c }),
    };
    b.for_each_occurrence(|e| {
        was.add(e);
        give_bit(e, &mut route);
    });
    route(extra);
    // A void's second child and the new entry land out of order: a build
    // sorts its list, and each half's mass is summed in that order. (Its
    // own walk kept them in order, and was twice the code: this road is
    // the rare one, and the check of the other.)
    let depth = meta.depth + 1;
    let (lo, hi) =
        (Block::build(meta.qbits, depth, &mut lo, 0)?, Block::build(meta.qbits, depth, &mut hi, 0)?);
    // Each half's mass on its own: an entry of one may equal one of the other.
    let now = mass_of(&lo, level + 1).saturating_add(mass_of(&hi, level + 1));
    Ok(Halves { lo, hi, was: was.mass, now })
}

/// [`mass_of`] of entries a walk meets in order (copies are neighbours,
/// counted once), summed as it goes rather than by decoding a block again.
struct DistinctMass {
    level: u32,
    mass: u64,
    last: Option<Entry>,
}

impl DistinctMass {
    fn at(level: u32) -> DistinctMass {
        DistinctMass { level, mass: 0, last: None }
    }

    fn add(&mut self, e: Entry) {
        if self.last != Some(e) {
            self.mass = self.mass.saturating_add(units(self.level + e.f));
        }
        self.last = Some(e);
    }
}

/// Inserts `e` where it belongs in `list`, which is in order (or nearly:
/// [`Block::build`] sorts what voids' copies may have left out of it).
fn place_sorted(list: &mut Vec<Entry>, e: Entry) {
    let at = list.partition_point(|x| x.key() <= e.key());
    list.insert(at, e);
}

/// `e` with its first fingerprint bit moved into its quotient (`2x + bit`);
/// a void (no bits left) becomes two, one per new quotient: what every
/// entry of a block goes through when the block splits or doubles.
#[inline]
pub fn give_bit(e: Entry, out: &mut impl FnMut(Entry)) {
    if e.f == 0 {
        out(Entry { quotient: 2 * e.quotient, f: 0, fp: 0 });
        out(Entry { quotient: 2 * e.quotient + 1, f: 0, fp: 0 });
    } else {
        let bit = (e.fp >> (e.f - 1)) as u32;
        out(Entry { quotient: 2 * e.quotient + bit, f: e.f - 1, fp: e.fp & ((1u64 << (e.f - 1)) - 1) });
    }
}

impl XfFilter {
    /// Where the bytes go (benchmarks): the blocks' bits in use (metadata,
    /// index, header and fields of their entries), their allocations, and
    /// the directory.
    pub fn breakdown(&self) -> (u64, u64, u64) {
        let mut used = 0u64;
        let mut alloc = 0u64;
        for b in self.blocks() {
            let m = b.meta();
            let q = 1u64 << m.qbits;
            let index = if q >= 256 { 16 * (q / 64 - 1) } else { 0 };
            used += 64 + index + q + u64::from(m.n) * (u64::from(m.w) + 1);
            alloc += b.bytes() * 8;
        }
        (used / 8, alloc / 8, self.size_bytes() - alloc / 8)
    }
}

/// XF counts its blocks itself, each at the allocator class it was sized to
/// ([`XfFilter::size_bytes`], kept current by every write), so it gives
/// them as one total without an address: what the counts of every other
/// family reach block by block.
impl crate::common::memory::HeapBlocks for XfFilter {
    fn heap_blocks(&self, each: &mut dyn FnMut(*const u8, usize)) {
        let own = std::mem::size_of::<XfFilter>() as u64;
        each(std::ptr::null(), self.size_bytes().saturating_sub(own) as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A split written from the fields ([`Block::split_fields`]) makes the
    /// bytes and the masses the split through entries makes: blocks with
    /// voids (and their copies), copies up to a fold, uniform blocks, blocks
    /// wider than their entries need, lengths up to the longest, and new
    /// entries equal to a child, a void, a random one, or of the longest
    /// lengths; and it is the road most splits take.
    #[test]
    fn split_fields_makes_what_split_entries_makes() {
        let mut r = crate::xf::block::tests::Rng(11);
        let mut next = move || r.next();
        let mut fast = 0;
        let by_words = crate::xf::block::BY_WORDS.with(|n| n.get());
        for round in 0..1500u32 {
            // Every kind of block at every size: the kind from the round's
            // tens, the size from its units.
            let (qbits, kind) = (3 + round % 10, (round / 10) % 5);
            let q = 1u32 << qbits;
            let uniform = kind == 0;
            let lengths = [0, 1, 2, 5, 9, 9, 10, 10, 13, 30, 51, 52];
            let one = [1, 7, 20, 52][(next() % 4) as usize];
            let mut entries = Vec::new();
            // Up to the most a block takes before it splits (1.44 a quotient).
            for _ in 0..(next() % u64::from(q + q / 2)) {
                // No voids in some rounds, a few in others: what honest
                // blocks hold, and what a split by words takes.
                let void_free = kind == 2 || (kind == 3 && next() % 128 != 0);
                let f = match (uniform, void_free) {
                    (true, _) => one,
                    (false, true) => lengths[1 + (next() % 11) as usize],
                    (false, false) => lengths[(next() % 12) as usize],
                };
                let e = Entry { quotient: (next() % u64::from(q)) as u32, f, fp: next() & ((1u64 << f) - 1) };
                // Copies now and then; in some rounds, past a fold.
                let most = if round % 7 == 0 { 6 } else { 4 };
                let copies = if next() % 6 == 0 { 1 + next() % most } else { 1 };
                entries.extend(std::iter::repeat_n(e, copies as usize));
            }
            let mut b = Block::build(qbits, 2, &mut entries, 0).expect("memory");
            // Some blocks wider than their entries need (a loaded one may
            // be): the longest entry taken out in place.
            if round % 3 == 1 && !b.meta().counted {
                if let Some(i) = (0..entries.len()).max_by_key(|&i| entries[i].f) {
                    b.remove(entries[i].quotient, i as u32);
                    entries.remove(i);
                }
            }
            let extra = match (round % 4, entries.is_empty()) {
                (0, false) => {
                    let mut c = None;
                    give_bit(entries[next() as usize % entries.len()], &mut |x| {
                        c.get_or_insert(x);
                    });
                    c.expect("a child")
                }
                (1, _) => Entry { quotient: (next() % u64::from(2 * q)) as u32, f: 0, fp: 0 },
                _ => {
                    let f = [1, 4, 12, 29, 50, 51, 52][(next() % 7) as usize];
                    Entry { quotient: (next() % u64::from(2 * q)) as u32, f, fp: next() & ((1u64 << f) - 1) }
                }
            };
            let level = qbits + 2;
            let want = split_entries(&b, extra, level).expect("memory");
            let Some(got) = b.split_fields(extra) else { continue };
            let got = got.expect("memory");
            fast += 1;
            let context = format!("round {round}: {:?} {extra:?}", b.meta());
            assert_eq!(got.lo.words(), want.lo.words(), "{context}");
            assert_eq!(got.hi.words(), want.hi.words(), "{context}");
            assert_eq!(mass_of_lengths(&got.was, level), want.was, "{context}");
            assert_eq!(mass_of_lengths(&got.now, level + 1), want.now, "{context}");
        }
        assert!(fast > 900, "{fast} of 1,500 splits from the fields");
        // Of those, the blocks with a few voids at most by words, and
        // some with voids.
        let (words, voids, shared) = crate::xf::block::BY_WORDS.with(|n| n.get());
        let (by_words, voids, shared) = (words - by_words.0, voids - by_words.1, shared - by_words.2);
        assert!(by_words > 600, "{by_words} of {fast} splits from the fields by words");
        assert!(voids > 100, "{voids} runs with voids split by words");
        assert!(shared > 20, "{shared} void children shared with a 1-bit entry's, split by words");
    }

    /// The harmonic numbers the compiler summed are the bits a loop at run
    /// time sums (fingerprint lengths, and so stored values, rest on them).
    #[test]
    fn harmonic_numbers_are_the_run_time_sums() {
        let mut sum = 0.0f64;
        assert_eq!(harmonic(0).to_bits(), 0f64.to_bits());
        for n in 1..200u32 {
            if n < 130 {
                sum += 1.0 / f64::from(n);
            }
            assert_eq!(harmonic(n).to_bits(), sum.to_bits(), "H({n})");
        }
    }

    /// DESIGN.md, invariant 4: a block grows at its threshold, between 0.72
    /// and 1.44 entries per quotient, spread over that whole range by its
    /// place, never at one value for all blocks.
    /// The directory's holder is counted at its allocation class
    /// (`directory_bytes`): a field more would move every multi-block
    /// filter's bytes up a class.
    #[test]
    fn the_directory_holder_stays_in_its_class() {
        assert_eq!(std::mem::size_of::<Dir>(), 96);
    }

    #[test]
    fn split_thresholds_spread_from_0_72_to_1_44_per_quotient() {
        for qbits in [GROW_QBITS, 10, 12] {
            let q = f64::from(1u32 << qbits);
            let (mut low, mut high) = (f64::MAX, 0f64);
            for depth in 1..30 {
                for prefix in 0..200u64.min(1 << depth) {
                    let t = f64::from(split_at(qbits, depth, prefix)) / q;
                    assert!((0.718..=1.44).contains(&t), "{qbits} {depth} {prefix}: {t}");
                    (low, high) = (low.min(t), high.max(t));
                }
            }
            assert!(low < 0.74 && high > 1.39, "{qbits}: {low}..{high}");
        }
        // The least threshold is the least of any place, and met there.
        for qbits in 1..=16 {
            let least = least_split_at(qbits);
            let all = (1..30).flat_map(|depth| {
                (0..500u64.min(1 << depth)).map(move |prefix| split_at(qbits, depth, prefix))
            });
            assert_eq!(all.min(), Some(least), "{qbits}");
            for (len, one) in
                [(least - 1, false), (least, false), ((1 << qbits) - 1, true), (1 << qbits, true)]
            {
                let at = (3..30).any(|depth| at_grow_threshold(len, one, qbits, depth, 7));
                let full = (3..30).any(|depth| len >= grow_threshold(one, qbits, depth, 7));
                assert_eq!(at, full, "{qbits} {len} {one}");
            }
        }
        // A lone block doubles at one entry per quotient.
        assert_eq!(grow_threshold(true, 5, 0, 0), 32);
    }

    /// The blocks of one depth take every share of the factor once, each the
    /// middle of its interval, and a block's halves take shares half the
    /// factor apart: a filter of a few dozen blocks is as evenly spread as a
    /// large one.
    #[test]
    fn split_thresholds_are_spread_evenly_over_the_blocks_of_a_depth() {
        let share = |depth: u32, prefix: u64| {
            SPREAD.iter().position(|&s| {
                (u64::from(s) * u64::from(least_split_at(GROW_QBITS))) >> 16
                    == u64::from(split_at(GROW_QBITS, depth, prefix))
            })
        };
        for depth in [6, 7, 12] {
            let mut seen = [0u32; 64];
            for prefix in 0..1u64 << depth {
                seen[share(depth, prefix).expect("a share of SPREAD")] += 1;
            }
            assert!(seen.iter().all(|&n| n == 1 << (depth - 6)), "{depth}: {seen:?}");
        }
        // Each share the middle of its interval: a lone block's is the
        // middle of the factor, two blocks' the quarters, and so on.
        assert_eq!((share(0, 0), share(1, 0), share(1, 1)), (Some(32), Some(16), Some(48)));
        assert_eq!((0..4).map(|p| share(2, p).unwrap()).collect::<Vec<_>>(), [8, 40, 24, 56]);
        for depth in 0..20 {
            for prefix in (0..1u64 << depth).step_by(1 + (1 << depth) / 64) {
                let (low, high) = (share(depth + 1, 2 * prefix), share(depth + 1, 2 * prefix + 1));
                let (low, high) = (low.unwrap(), high.unwrap());
                assert_eq!(high, low + 32, "{depth} {prefix}");
            }
        }
    }

    /// Invariant 5: a new entry's fingerprint length is the schedule's
    /// length rounded down or up (never further), in the proportion that
    /// makes its expected mass the schedule's budget exactly.
    #[test]
    fn fingerprint_lengths_round_either_way_to_the_budget() {
        for (error, k, last) in [(0.01, 0, 10), (0.01, 3, 10), (1e-4, 7, 20), (0.3, 2, 5)] {
            let per_quotient = if k == 0 { 1.0 } else { 0.52 };
            let budget = error / harmonic(last + 1) / f64::from(k + 1);
            let exact = (per_quotient / budget).log2();
            let steps = 100_000;
            let mut mass = 0.0;
            for i in 0..steps {
                let f = fingerprint_bits(error, k, last, 0.0, (f64::from(i) + 0.5) / f64::from(steps));
                assert!(
                    f == exact.floor() as u32 || f == exact.ceil() as u32,
                    "{error} {k}: {f} for {exact}"
                );
                mass += per_quotient * 2f64.powi(-(f as i32));
            }
            let mean = mass / f64::from(steps);
            assert!((mean / budget - 1.0).abs() < 0.001, "{error} {k}: {mean} against {budget}");
        }
    }

    /// A batch's hashes (`hash_chunks`: keyed ones in the vector lanes
    /// the CPU has, `common::sip4`) are `hash`'s, item by item, in order,
    /// for every hashing: chunks of 64 and a remainder, items of every
    /// length from 0 to 70 bytes mixed in each register's lanes.
    #[test]
    fn batches_hash_as_items_do() {
        let items: Vec<Vec<u8>> =
            (0..203u32).map(|i| (0..(i * 37 % 71)).map(|j| (i * 31 + j * 7) as u8).collect()).collect();
        let deployment = Hashing::Deployment(Seed([0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908]));
        for hashing in [Hashing::Keyed(Seed([1, 2])), deployment, Hashing::Murmur { m0: 1000 }] {
            let mut seen = Vec::new();
            let done: Result<(), ()> = hashing.hash_chunks(
                &items,
                |i| i.as_slice(),
                |first, chunk, hashes| {
                    assert_eq!((first, chunk.len()), (seen.len(), hashes.len()));
                    seen.extend_from_slice(hashes);
                    Ok(())
                },
            );
            assert_eq!(done, Ok(()));
            let one_by_one: Vec<XfHash> = items.iter().map(|i| hashing.hash(i)).collect();
            assert_eq!(seen, one_by_one, "{hashing:?}");
        }
    }

    /// A batch's lookups (`contains_each`, a loop of its own for a
    /// directory, compiled for each kernel) answer what lookups one by one
    /// answer, in order: for a lone block and a directory, batches of every
    /// length around the hints' reach (`PREFETCH_AHEAD` and twice it), hits
    /// and misses mixed, in every kernel the CPU has.
    #[test]
    fn batch_lookups_answer_as_single_ones() {
        let params = XfParams { error_rate: 0.01, capacity: 100, max_capacity: 1 << 30 };
        for added in [50u32, 20_000] {
            let mut f = XfFilter::with_seed(params, Seed([3, 4]), Limits::NONE).unwrap();
            for i in 0..added {
                f.insert(&i.to_le_bytes(), Limits::NONE).unwrap();
            }
            assert_eq!(matches!(f.store, Store::Many(_)), added > 50, "{added} items");
            let hashes: Vec<XfHash> =
                (0..200u32).map(|i| f.hash(&(i * 7919 % (2 * added)).to_le_bytes())).collect();
            let one_by_one: Vec<bool> = hashes.iter().map(|&h| f.contains_hash(h)).collect();
            assert!(one_by_one.iter().any(|&b| b) && one_by_one.iter().any(|&b| !b));
            let ahead = PREFETCH_AHEAD;
            for len in [0, 1, ahead - 1, ahead, ahead + 1, 2 * ahead - 1, 2 * ahead, 2 * ahead + 1, 100, 200]
            {
                let mut batch = Vec::new();
                f.contains_each(&hashes[..len], |b| batch.push(b));
                assert_eq!(batch, one_by_one[..len], "{added} items, a batch of {len}");
                // Every kernel this CPU has, not only the process's.
                let Store::Many(d) = &f.store else { continue };
                for kernel in [Kernel::Portable, Kernel::Popcnt, Kernel::Pdep] {
                    if kernel > Kernel::detected() {
                        continue;
                    }
                    let mut batch = Vec::new();
                    // SAFETY: no more than the CPU has.
                    unsafe {
                        look_up_as(kernel, d, u32::from(f.qbits), &hashes[..len], &mut |b| batch.push(b))
                    };
                    assert_eq!(batch, one_by_one[..len], "{added} items, a batch of {len}, {kernel:?}");
                }
            }
        }
    }

    /// A plan's lengths (`plans.rs`) are the schedule's own wherever the
    /// plan says it holds: at masses from 0 to the rate, and at the last
    /// mass where it holds (found by bisection), for keyed and murmur3
    /// hashing and every rank; and a plan holds somewhere past the first
    /// rank, or it would save nothing.
    #[test]
    fn plans_give_the_schedule_s_lengths_where_they_hold() {
        let us: Vec<f64> = (0..200).map(|i| (f64::from(i) + 0.5) / 200.0).collect();
        for hashing in [Hashing::Keyed(Seed([1, 2])), Hashing::Murmur { m0: 1000 }] {
            for (error, last) in [(0.01, 12u32), (1e-6, 30), (0.3, 5), (1e-9, 44)] {
                for k in 0..=last + 2 {
                    let mut plans = Plans::default();
                    let level = 9 + k;
                    let mut lengths =
                        |mass: u64| plans.lengths(level, mass, || plan_of(k, error, hashing, last, level));
                    let ceiling = u128::from(ceiling_of(error, hashing));
                    let agree = |l: Lengths, mass: u64| {
                        for &u in &us {
                            let slow = fingerprint_bits(error, k, last, mass_rate(mass, hashing), u);
                            assert_eq!(l.pick(u), slow, "{error} rank {k} of {last} at mass {mass}, u {u}");
                            // And the ceiling takes it as it is, unchecked by the add.
                            let within = fbits_within(slow, level, u128::from(mass), ceiling);
                            assert_eq!(
                                within,
                                Some(slow),
                                "{error} rank {k} at mass {mass}: over the ceiling"
                            );
                        }
                    };
                    let top = rate_units(error);
                    for step in 0..=64u64 {
                        let mass = (top as u128 * u128::from(step) / 64) as u64;
                        if let Some(l) = lengths(mass) {
                            agree(l, mass);
                        }
                    }
                    let (mut lo, mut hi) = (0u64, top);
                    assert!(lengths(lo).is_some(), "a plan holds at mass 0");
                    while hi - lo > 1 {
                        let mid = lo + (hi - lo) / 2;
                        if lengths(mid).is_some() {
                            lo = mid;
                        } else {
                            hi = mid;
                        }
                    }
                    agree(lengths(lo).expect("held"), lo);
                    if k > 0 {
                        assert!(lo > top / 100, "{error} rank {k}: the plan holds only to {lo} of {top}");
                    }
                }
            }
        }
    }

    /// Masses to compare the lengths past a plan at: 513 evenly spaced
    /// from 0 to past the filter's ceiling (its rate as a mass); 320 around
    /// where the budget left meets the plan (found by bisection: the two
    /// roads must agree on which is the lesser), at relative distances of
    /// 1e-8 to 4e-3; the last units below the ceiling (tiny budgets, where
    /// lengths reach their longest); and, for each length, masses where the
    /// budget left over the quotient's share is within 1e-8 to 2e-6 of that
    /// power of two (where the longer length changes).
    fn masses_past_a_plan(error: f64, k: u32, last: u32, hashing: Hashing) -> Vec<u64> {
        let top = ceiling_of(error, hashing);
        let mut masses: Vec<u64> =
            (0..=512u64).map(|s| (u128::from(top + top / 8) * u128::from(s) / 512) as u64).collect();
        let planned = planned_budget(error, k, last);
        let (mut lo, mut hi) = (0u64, top);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if budget_left(error, k, last, mass_rate(mid, hashing)) >= planned {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        for j in 1..=40 {
            for step in [1e-8, 1e-7, 1e-6, 1e-4] {
                let d = f64::from(j) * step;
                masses.extend([(lo as f64 * (1.0 - d)) as u64, (lo as f64 * (1.0 + d)) as u64]);
            }
        }
        masses.extend((0..60).map(|j| top.saturating_sub(1 << j)));
        // `y = left x scale = 2^-up (1 + d)` at `left = 2^-up (1 + d) /
        // scale`, the mass being the rate less that, in units.
        let scale = f64::from(left_scale(k, last) as f32);
        let whole = mass_rate(1 << MASS_BITS, hashing);
        for up in 2..=MAX_F as i32 {
            for d in [-2e-6, -1e-7, -1e-8, 0.0, 1e-8, 1e-7, 2e-6] {
                let left = 2f64.powi(-up) * (1.0 + d) / scale;
                let rate = error - left;
                if rate > 0.0 {
                    masses.push((rate / whole * (1u64 << MASS_BITS) as f64) as u64);
                }
            }
        }
        masses
    }

    /// Past a plan, its lengths worked out without a division
    /// (`Plans::past_plan`) are the schedule's own wherever it gives them,
    /// at masses from the plan's end to past the rate, for keyed and
    /// murmur3 hashing and every rank, with places spread over `[0, 1)`
    /// and places within a few ulps, a ten-millionth and a few millionths
    /// of the chance of the shorter length, and at its ends (where an
    /// `f32` scale misleads and the margin must refuse), at masses near
    /// each length's power of two and near the plan; and it gives them for nearly every
    /// place where the budget left is the lesser and its lengths
    /// unclamped, or it would save nothing.
    #[test]
    fn past_the_plan_the_lengths_are_the_schedule_s_without_a_division() {
        let grid: Vec<f64> = (0..400).map(|i| (f64::from(i) + 0.5) / 400.0).collect();
        let (mut given, mut asked) = (0u64, 0u64);
        for hashing in [Hashing::Keyed(Seed([1, 2])), Hashing::Murmur { m0: 1000 }] {
            for (error, last) in [(0.01, 12u32), (1e-3, 31), (1e-6, 30), (0.3, 5), (1e-9, 44)] {
                for k in 0..=last + 2 {
                    let level = 9 + k;
                    let mut plans = Plans::default();
                    for (i, mass) in masses_past_a_plan(error, k, last, hashing).into_iter().enumerate() {
                        if plans.lengths(level, mass, || plan_of(k, error, hashing, last, level)).is_some() {
                            continue;
                        }
                        let rate = mass_rate(mass, hashing);
                        let left = budget_left(error, k, last, rate);
                        let exact = lengths_for(planned_budget(error, k, last).min(left), k);
                        let mut near = vec![exact.p, f64::from_bits(exact.p.to_bits() + 2)];
                        for d in [1e-7, 2e-6, 5e-6, 1e-4] {
                            near.extend([exact.p - d, exact.p + d]);
                        }
                        // The places' ends, where a chance near 0 or 1 decides.
                        near.extend([0.0, 2f64.powi(-53), 1.0 - 2f64.powi(-53)]);
                        for &u in grid.iter().chain(&near) {
                            let Some(f) = plans.past_plan(level, error - rate, u) else { continue };
                            let slow = fingerprint_bits(error, k, last, rate, u);
                            assert_eq!(f, slow, "{error} rank {k} of {last} at mass {mass}, u {u}");
                        }
                        // Counted on the evenly spaced masses only (the
                        // first 513): the others sit at chosen points, some
                        // at powers of two, where it must refuse.
                        let counted = i <= 512
                            && left < planned_budget(error, k, last) * 0.99
                            && u32::from(exact.down) + 1 == u32::from(exact.up);
                        if counted {
                            asked += grid.len() as u64;
                            given += grid
                                .iter()
                                .filter(|&&u| plans.past_plan(level, error - rate, u).is_some())
                                .count() as u64;
                        }
                    }
                }
            }
        }
        assert!(asked > 100_000, "{asked} places past a plan");
        assert!(given * 1000 >= asked * 999, "given {given} of {asked}");
    }

    /// Invariant 6: the directory is at most 16 slots per block (1,024
    /// below that), and blocks grow at most three levels past the schedule's
    /// last, within MAX_DEPTH.
    #[test]
    fn the_directory_cap_and_the_deepest_level() {
        for blocks in [1u64, 2, 100, 1 << 20] {
            assert!(directory_fits(blocks * 16 + 1024, blocks));
            assert!(!directory_fits(blocks * 16 + 1025, blocks));
        }
        assert_eq!(deepest_level(20, GROW_QBITS), 23);
        assert_eq!(deepest_level(MAX_DEPTH + GROW_QBITS, GROW_QBITS), MAX_DEPTH + GROW_QBITS);
    }
}
