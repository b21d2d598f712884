//! The expandable filter: one quotient-filter table that doubles, the
//! fingerprint schedule that keeps the false-positive rate bounded at every
//! size, and the incremental migration into the doubled table. See
//! `DESIGN.md` for why it works.

use super::errors::XfError;
use super::table::{decode, encode, locate, Scan, Table, TableFull, MAX_FINGERPRINT_BITS};
use super::{MAX_CAPACITY_LIMIT, MAX_ERROR_RATE, MIN_ERROR_RATE};
use crate::common::hash::murmur3_128;
use crate::common::memory::{Limits, Relocate};

/// A table grows once its entries pass this share of its quotients
/// (`LOAD_NUM / LOAD_DEN` = 0.95).
pub const LOAD_NUM: u64 = 19;
pub const LOAD_DEN: u64 = 20;
/// Slots of the old table each write migrates while a doubling is under
/// way (empty slots count; a cluster is moved whole).
pub const PACE_SLOTS: u64 = 8;
/// The fewest quotients a table has.
pub const MIN_QUOTIENTS: u64 = 64;
/// The most slots one entry of a merged source may be copied to.
pub const MAX_MERGE_COPIES: u64 = 4096;

/// What `XF.RESERVE` (or a creating write) asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct XfParams {
    pub error_rate: f64,
    /// The first table's size, in items (a hint: the filter grows past it).
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

    /// Quotients of the first table: the capacity fits at the growth load,
    /// with 1/64 to spare for the copies of entries whose fingerprints ran
    /// out, so that `capacity x 2^k` items fit before the `k`-th doubling.
    pub fn first_quotients(&self) -> u64 {
        let m = (self.capacity * LOAD_DEN).div_ceil(LOAD_NUM);
        (m + m.div_ceil(64)).max(MIN_QUOTIENTS)
    }

    /// Doublings until the filter holds `max_capacity` (the schedule's horizon).
    pub fn horizon(&self) -> u32 {
        let mut m = self.first_quotients();
        let mut k = 0;
        while load_limit(m) < self.max_capacity {
            m *= 2;
            k += 1;
        }
        k
    }
}

/// Entries a table of `m` quotients takes before it doubles.
pub fn load_limit(m: u64) -> u64 {
    (u128::from(m) * u128::from(LOAD_NUM) / u128::from(LOAD_DEN)) as u64
}

/// The fingerprint length of entries added to the table of level `level`
/// (`level` doublings past the first), given the expected false matches
/// `mass` of the entries already in. The rate left (`error - mass`, but never
/// less than the share planned from the start) is spread over the levels
/// still to come with weights `1/(level + 1)`. Each entry of this level
/// matches with probability `2^-F / m`, and there are at most
/// [`entries_per_quotient`]`(level)` of them per quotient.
pub fn fingerprint_bits(error: f64, level: u32, horizon: u32, mass: f64) -> u32 {
    let last = horizon.max(level);
    let weight = |j: u32| 1.0 / f64::from(j + 1);
    let all: f64 = (0..=last).map(weight).sum();
    let rest: f64 = (level..=last).map(weight).sum();
    let left = (error - mass).max(error * rest / all);
    let budget = left * weight(level) / rest;
    let bits = (entries_per_quotient(level) / budget).log2().ceil();
    (bits.max(1.0) as u32).min(MAX_FINGERPRINT_BITS)
}

/// The most entries per quotient a level adds: the first table fills to the
/// growth load; a later one starts half full of older entries, whose
/// matches are likelier than its own (so deleting them for new ones never
/// raises the sum). New entries go to the doubled table as soon as it
/// exists, so a level's entries are those added while it is the newest.
pub fn entries_per_quotient(level: u32) -> f64 {
    let load = LOAD_NUM as f64 / LOAD_DEN as f64;
    if level == 0 {
        load
    } else {
        load / 2.0
    }
}

/// An item's 128-bit hash: everything after hashing uses only this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct XfHash(pub u128);

impl XfHash {
    /// murmur3_x64_128 (seed 0) of the item's bytes.
    pub fn of(item: &[u8]) -> XfHash {
        let (a, b) = murmur3_128(item);
        XfHash((u128::from(a) << 64) | u128::from(b))
    }

    /// The hash of any `Hash` value, through SipHash-1-3 (128-bit) with fixed
    /// keys, for in-process use (the module hashes bytes with [`XfHash::of`]).
    pub fn of_hashable<T: std::hash::Hash + ?Sized>(value: &T) -> XfHash {
        let mut h = siphasher::sip128::SipHasher13::new_with_keys(0x786678_66696c74, 0x626c6f6f_6d6b6974);
        value.hash(&mut h);
        XfHash(siphasher::sip128::Hasher128::finish128(&h).as_u128())
    }
}

/// A doubling under way: the doubled table and how far the old one is moved.
pub(super) struct Migration {
    pub table: Table,
    /// Old quotients below it live in `table`; old slots below it are empty.
    pub cursor: u64,
}

/// A load by `XF.LOADCHUNK` under way: the slots arrive in order and are
/// checked as they come; until the last one the filter answers as empty.
pub(super) struct Loading {
    /// Bytes of slot data received.
    pub loaded: u64,
    /// One walk per table, the old one first.
    pub scans: Vec<Scan>,
}

/// A table, a quotient in it and the fraction that follows.
type Place<'a> = (&'a Table, u64, u64);

/// Slots and cache lines one lookup reads (the test of constant time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LookupCost {
    pub slots: u64,
    pub cache_lines: u64,
}

/// What `XF.INFO` reports.
#[derive(Clone, Debug, PartialEq)]
pub struct XfInfo {
    pub error_rate: f64,
    pub capacity: u64,
    pub max_capacity: u64,
    /// Items added and not deleted (`XF.CARD`).
    pub items: u64,
    /// Entries stored: items plus copies of entries whose fingerprints ran out.
    pub entries: u64,
    pub size_bytes: u64,
    /// Doublings so far (one more once a doubling under way finishes).
    pub expansions: u32,
    /// Quotients of the table new items go to.
    pub quotients: u64,
    /// Items the filter takes before its next doubling starts.
    pub grows_at: u64,
    /// Fingerprint bits of the newest entries.
    pub newest_fingerprint_bits: u32,
    /// Fingerprint bits of the oldest entries (their shortest, 0 for copies).
    pub oldest_fingerprint_bits: u32,
    /// The false-positive rate guaranteed now: the expected number of entries
    /// a never-added item matches, which bounds its chance of a false match.
    pub guaranteed_rate: f64,
    /// The doubling under way: old slots moved, of how many.
    pub migration: Option<(u64, u64)>,
}

/// The expandable filter (`XF.*`, `bkit-xflt` keys).
pub struct XfFilter {
    pub(super) params: XfParams,
    pub(super) horizon: u32,
    pub(super) items: u64,
    /// Level of `table` (doublings past the first table).
    pub(super) level: u32,
    pub(super) table: Table,
    pub(super) next: Option<Box<Migration>>,
    pub(super) loading: Option<Box<Loading>>,
    /// The old table of the last finished doubling, not yet freed: freeing
    /// hundreds of MB takes milliseconds, which the module spends on a
    /// background thread ([`XfFilter::take_retired`]). Not part of the value.
    pub(super) retired: Option<Table>,
}

/// A table a doubling left behind, to be dropped wherever the caller likes.
pub struct Retired(#[allow(dead_code)] Table);

/// Bytes counted for the filter's own fields.
pub const OVERHEAD: u64 = 160;

impl XfFilter {
    /// A new, empty filter: `error_rate` at every size up to `max_capacity`
    /// items, the first table sized for `capacity`.
    pub fn new(
        error_rate: f64,
        capacity: u64,
        max_capacity: u64,
        limits: Limits,
    ) -> Result<XfFilter, XfError> {
        XfFilter::with_params(XfParams { error_rate, capacity, max_capacity }, limits)
    }

    pub fn with_params(params: XfParams, limits: Limits) -> Result<XfFilter, XfError> {
        params.check()?;
        let horizon = params.horizon();
        let fbits = fingerprint_bits(params.error_rate, 0, horizon, 0.0);
        let m = params.first_quotients();
        let bytes = Table::bytes_for(m, fbits).ok_or(XfError::BadCapacity)?;
        limits.check(OVERHEAD + bytes)?;
        Ok(XfFilter {
            params,
            horizon,
            items: 0,
            level: 0,
            table: Table::new(m, fbits)?,
            next: None,
            loading: None,
            retired: None,
        })
    }

    pub fn try_clone(&self) -> Result<XfFilter, XfError> {
        let next = match &self.next {
            Some(mig) => Some(Box::new(Migration { table: mig.table.try_clone()?, cursor: mig.cursor })),
            None => None,
        };
        let loading =
            self.loading.as_ref().map(|l| Box::new(Loading { loaded: l.loaded, scans: l.scans.clone() }));
        Ok(XfFilter {
            params: self.params,
            horizon: self.horizon,
            items: self.items,
            level: self.level,
            table: self.table.try_clone()?,
            next,
            loading,
            retired: None,
        })
    }

    /// The hash every item-taking method starts from.
    pub fn hash(item: &[u8]) -> XfHash {
        XfHash::of(item)
    }

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
    /// Items added and not deleted (`XF.CARD`).
    pub fn items(&self) -> u64 {
        self.items
    }
    /// Doublings completed.
    pub fn expansions(&self) -> u32 {
        self.level
    }
    pub fn is_migrating(&self) -> bool {
        self.next.is_some()
    }
    /// True while `XF.LOADCHUNK` chunks are still expected.
    pub fn is_loading(&self) -> bool {
        self.loading.is_some()
    }

    /// Entries stored in both tables (copies included).
    pub fn entries(&self) -> u64 {
        self.table.entries() + self.next.as_ref().map_or(0, |mig| mig.table.entries())
    }

    /// Bytes allocated (`XF.INFO` and `MEMORY USAGE`): both tables while a
    /// doubling is under way.
    pub fn size_bytes(&self) -> u64 {
        OVERHEAD + self.table.size_bytes() + self.next.as_ref().map_or(0, |mig| mig.table.size_bytes())
    }

    /// The false-positive rate guaranteed now (see [`XfInfo::guaranteed_rate`]).
    pub fn guaranteed_rate(&self) -> f64 {
        self.table.mass() + self.next.as_ref().map_or(0.0, |mig| mig.table.mass())
    }

    pub fn info(&self) -> XfInfo {
        let newest = self.next.as_ref().map_or(&self.table, |mig| &mig.table);
        let oldest = [Some(&self.table), self.next.as_ref().map(|mig| &mig.table)]
            .into_iter()
            .flatten()
            .filter_map(Table::shortest)
            .min();
        XfInfo {
            error_rate: self.params.error_rate,
            capacity: self.params.capacity,
            max_capacity: self.params.max_capacity,
            items: self.items,
            entries: self.entries(),
            size_bytes: self.size_bytes(),
            expansions: self.level,
            quotients: newest.m(),
            grows_at: load_limit(newest.m()).min(self.params.max_capacity),
            newest_fingerprint_bits: newest.fbits(),
            oldest_fingerprint_bits: oldest.unwrap_or(newest.fbits()),
            guaranteed_rate: self.guaranteed_rate(),
            migration: self.next.as_ref().map(|mig| (mig.cursor, self.table.slots())),
        }
    }

    /// Where a hash's entries are: the newest table (quotient, fraction),
    /// and during a doubling the old table too while its quotient is not
    /// moved yet. New entries always go to the first.
    fn route(&self, h: XfHash) -> (Place<'_>, Option<Place<'_>>) {
        let (q, frac) = locate(h.0, self.table.m());
        match &self.next {
            Some(mig) => {
                let (q2, frac2) = locate(h.0, mig.table.m());
                let old = (q >= mig.cursor).then_some((&self.table, q, frac));
                ((&mig.table, q2, frac2), old)
            }
            None => ((&self.table, q, frac), None),
        }
    }

    // ---- reads ----

    /// Whether the item is probably in: never false for an item added and
    /// not deleted; true for others with at most the guaranteed rate.
    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hash(XfFilter::hash(item))
    }

    pub fn contains_hash(&self, h: XfHash) -> bool {
        if self.loading.is_some() {
            return false;
        }
        let ((t, q, frac), old) = self.route(h);
        t.contains(q, frac) || old.is_some_and(|(t, q, frac)| t.contains(q, frac))
    }

    /// How many times the item is in: never less than the times it was
    /// added minus the times it was deleted.
    pub fn count(&self, item: &[u8]) -> u64 {
        self.count_hash(XfFilter::hash(item))
    }

    pub fn count_hash(&self, h: XfHash) -> u64 {
        if self.loading.is_some() {
            return 0;
        }
        let ((t, q, frac), old) = self.route(h);
        t.count(q, frac) + old.map_or(0, |(t, q, frac)| t.count(q, frac))
    }

    /// What a lookup of the item reads (for the constant-time test and
    /// benchmarks).
    pub fn lookup_cost(&self, item: &[u8]) -> LookupCost {
        let ((t, q, _), old) = self.route(XfFilter::hash(item));
        let mut cost = LookupCost { slots: 0, cache_lines: 0 };
        for (t, q) in [Some((t, q)), old.map(|(t, q, _)| (t, q))].into_iter().flatten() {
            let (slots, lines) = t.probe_cost(q);
            cost.slots += slots;
            cost.cache_lines += lines;
        }
        cost
    }

    // ---- writes ----

    fn ready(&self) -> Result<(), XfError> {
        match self.loading {
            Some(_) => Err(XfError::Loading),
            None => Ok(()),
        }
    }

    /// Adds one occurrence of the item (even when it is already in, so that
    /// `count` counts adds); true when it was not in before (`XF.ADD`'s 1).
    pub fn insert(&mut self, item: &[u8], limits: Limits) -> Result<bool, XfError> {
        self.insert_hash(XfFilter::hash(item), limits)
    }

    pub fn insert_hash(&mut self, h: XfHash, limits: Limits) -> Result<bool, XfError> {
        self.ready()?;
        if self.items >= self.params.max_capacity {
            return Err(XfError::Full { max_capacity: self.params.max_capacity });
        }
        self.before_write(limits)?;
        let was_in = self.contains_hash(h);
        self.place(h, limits)?;
        self.items += 1;
        Ok(!was_in)
    }

    /// Adds the item only when it is not (probably) in: true when added.
    pub fn insert_if_absent(&mut self, item: &[u8], limits: Limits) -> Result<bool, XfError> {
        self.insert_if_absent_hash(XfFilter::hash(item), limits)
    }

    pub fn insert_if_absent_hash(&mut self, h: XfHash, limits: Limits) -> Result<bool, XfError> {
        self.ready()?;
        if self.contains_hash(h) {
            return Ok(false);
        }
        self.insert_hash(h, limits)
    }

    /// Removes one occurrence: the most specific entry the item matches.
    /// True when one was removed. For an item never added, an entry it
    /// matches by chance (another item's) is removed, as in every
    /// fingerprint filter: that item may then be missed.
    pub fn delete(&mut self, item: &[u8]) -> Result<bool, XfError> {
        self.delete_hash(XfFilter::hash(item))
    }

    pub fn delete_hash(&mut self, h: XfHash) -> Result<bool, XfError> {
        self.ready()?;
        if self.next.is_some() {
            self.migrate_step(PACE_SLOTS)?;
        }
        let ((t, q, frac), old) = self.route(h);
        let new_best = t.best_match(q, frac).map(|(f, at)| (f + u32::from(self.next.is_some()), at));
        let old_best = old.and_then(|(t, q, frac)| t.best_match(q, frac));
        // Lengths compared in the old table's terms: the doubled table's
        // quotient holds one more bit. The longest match is the most specific.
        let removed = match (new_best, old_best) {
            (None, None) => false,
            (Some((nf, at)), ob) if ob.is_none_or(|(of, _)| nf >= of) => {
                match self.next.as_mut() {
                    Some(mig) => mig.table.remove_at(at),
                    None => self.table.remove_at(at),
                }
                true
            }
            (_, Some((_, at))) => {
                self.table.remove_at(at);
                true
            }
            (Some(_), None) => unreachable!("the first arm takes it"),
        };
        if removed {
            self.items = self.items.saturating_sub(1);
        }
        Ok(removed)
    }

    /// Starts a doubling when the table is due, and moves a step of one under way.
    fn before_write(&mut self, limits: Limits) -> Result<(), XfError> {
        if let Some(mig) = &self.next {
            if mig.table.entries() >= load_limit(mig.table.m()) {
                self.finish_migration()?;
            } else {
                self.migrate_step(PACE_SLOTS)?;
            }
        }
        if self.next.is_none()
            && self.table.entries() >= load_limit(self.table.m())
            && self.level < self.horizon
        {
            self.start_growth(limits)?;
            self.migrate_step(PACE_SLOTS)?;
        }
        Ok(())
    }

    /// Stores a new entry for `h` with the full fingerprint of its table.
    fn place(&mut self, h: XfHash, limits: Limits) -> Result<(), XfError> {
        for _ in 0..2 {
            let t = match self.next.as_mut() {
                Some(mig) => &mut mig.table,
                None => &mut self.table,
            };
            let (q, frac) = locate(h.0, t.m());
            let fbits = t.fbits();
            if t.insert(q, encode(frac, fbits, fbits)).is_ok() {
                return Ok(());
            }
            // No room before the table's end: grow, or finish the doubling.
            if self.next.is_none() {
                if self.level >= self.horizon {
                    return Err(XfError::Crowded);
                }
                self.start_growth(limits)?;
            }
            self.finish_migration()?;
        }
        Err(XfError::Crowded)
    }

    /// Allocates the doubled table; the move happens step by step.
    fn start_growth(&mut self, limits: Limits) -> Result<(), XfError> {
        debug_assert!(self.next.is_none());
        let m = self.table.m().checked_mul(2).ok_or(XfError::BadCapacity)?;
        let fbits =
            fingerprint_bits(self.params.error_rate, self.level + 1, self.horizon, self.guaranteed_rate());
        let bytes = Table::bytes_for(m, fbits).ok_or(XfError::BadCapacity)?;
        let now = self.size_bytes();
        limits.check_growth(now, now.saturating_add(bytes))?;
        self.next = Some(Box::new(Migration { table: Table::new(m, fbits)?, cursor: 0 }));
        Ok(())
    }

    /// Moves clusters of the old table into the doubled one until about
    /// `budget_slots` old slots were walked (a cluster is moved whole).
    /// True while the doubling is still under way: the module calls it from
    /// a timer with a budget that keeps each call short, and every write
    /// also moves [`PACE_SLOTS`]. An error leaves everything as it was.
    pub fn migrate_step(&mut self, budget_slots: u64) -> Result<bool, XfError> {
        if self.loading.is_some() {
            return Ok(false);
        }
        let mut spent = 0u64;
        while let Some(mig) = self.next.as_mut() {
            if spent >= budget_slots.max(1) {
                return Ok(true);
            }
            let Some((cs, entries, end)) = self.table.take_cluster(mig.cursor, budget_slots.max(1) - spent)
            else {
                let mig = self.next.take().expect("a migration under way");
                let old = std::mem::replace(&mut self.table, mig.table);
                // Kept for the caller to free (a previous one, if still here, goes now).
                self.retired = Some(old);
                self.level += 1;
                return Ok(false);
            };
            if let Err(TableFull) = move_cluster(&self.table, &mut mig.table, &entries) {
                self.table.restore_cluster(cs, &entries);
                return Err(XfError::Crowded);
            }
            spent += end - mig.cursor;
            mig.cursor = end;
        }
        Ok(false)
    }

    /// Finishes a doubling under way at once (merges, and the rare insert
    /// that finds no room at the table's end).
    pub fn finish_migration(&mut self) -> Result<(), XfError> {
        while self.migrate_step(u64::MAX)? {}
        Ok(())
    }

    /// The old table of the last finished doubling, for the caller to drop
    /// (the module drops it on a background thread, as the server's lazy
    /// free does); if nobody takes it, it goes with the next doubling or
    /// the filter.
    pub fn take_retired(&mut self) -> Option<Retired> {
        self.retired.take().map(Retired)
    }

    // ---- merge ----

    /// Adds every entry of `other` (its items, with the precision its
    /// entries have): afterwards every item of either answers true, and
    /// the guaranteed rate is at most the sum of both. All or nothing.
    pub fn merge_from(&mut self, other: &XfFilter, limits: Limits) -> Result<(), XfError> {
        self.ready()?;
        other.ready()?;
        let items = u128::from(self.items) + u128::from(other.items);
        if items > u128::from(self.params.max_capacity) {
            return Err(XfError::MergeTooLarge { items, max_capacity: self.params.max_capacity });
        }
        let now = self.size_bytes();
        limits.check_growth(now, now.saturating_mul(2))?;
        let mut out = self.try_clone()?;
        out.finish_migration()?;
        let sources = [Some(&other.table), other.next.as_ref().map(|mig| &mig.table)];
        // Grow until what comes in (copies included) fits at the growth load.
        loop {
            let (m, fbits) = (out.table.m(), out.table.fbits());
            let mut incoming = 0u64;
            for src in sources.into_iter().flatten() {
                let mut result = Ok(());
                src.for_each(|q, r| {
                    if result.is_ok() {
                        result = convert(src, q, r, m, fbits, |_, _| {
                            incoming += 1;
                            Ok(())
                        });
                    }
                });
                result?;
            }
            if out.table.entries().saturating_add(incoming) <= load_limit(m) || out.level >= out.horizon {
                break;
            }
            out.start_growth(limits)?;
            out.finish_migration()?;
        }
        // Should the table's end overflow (entries of a source of another
        // size come in pairs), try again one size larger.
        let mut attempts = 0;
        let mut out = loop {
            let mut attempt = out.try_clone()?;
            match attempt.add_entries_of(&sources) {
                Ok(()) => break attempt,
                Err(XfError::Crowded) if attempts < 2 && out.level < out.horizon => {
                    attempts += 1;
                    out.start_growth(limits)?;
                    out.finish_migration()?;
                }
                Err(e) => return Err(e),
            }
        };
        out.items = items as u64;
        *self = out;
        Ok(())
    }

    /// Inserts the entries of `sources` into the table (no doubling under way).
    fn add_entries_of(&mut self, sources: &[Option<&Table>; 2]) -> Result<(), XfError> {
        for src in sources.iter().flatten() {
            let mut failed = None;
            src.for_each(|q, r| {
                if failed.is_some() {
                    return;
                }
                let dst = &mut self.table;
                let result = convert(src, q, r, dst.m(), dst.fbits(), |dq, dr| {
                    dst.insert(dq, dr).map_err(|TableFull| XfError::Crowded)
                });
                if let Err(e) = result {
                    failed = Some(e);
                }
            });
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Offers the tables' buffers to a server's defragmentation, from
    /// buffer `from` on (0: the table, 1: the doubled one); `Some(next)`
    /// when cut short.
    pub fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize> {
        for i in from..2 {
            if i > from && to.should_stop() {
                return Some(i);
            }
            match i {
                0 => self.table.relocate(to),
                _ => {
                    if let Some(mig) = self.next.as_mut() {
                        mig.table.relocate(to);
                    }
                }
            }
        }
        None
    }
}

/// Moves a cluster's entries into the doubled table, each to quotient
/// `2q + bit` with its fingerprint one bit shorter (an entry with none left
/// goes to both); all or nothing.
fn move_cluster(old: &Table, new: &mut Table, entries: &[(u64, u64)]) -> Result<(), TableFull> {
    let mut placed: Vec<(u64, u64)> = Vec::with_capacity(entries.len() + 1);
    let (fo, fnew) = (old.fbits(), new.fbits());
    for &(q, r) in entries {
        let (f, fp) = decode(r, fo);
        let mut put = |q2: u64, r2: u64| -> Result<(), TableFull> {
            new.insert(q2, r2)?;
            placed.push((q2, r2));
            Ok(())
        };
        let result = if f == 0 {
            put(2 * q, 1 << fnew).and_then(|()| put(2 * q + 1, 1 << fnew))
        } else {
            let bit = fp >> (f - 1);
            let rest_bits = f - 1;
            let rest = fp & ((1u64 << rest_bits) - 1);
            let keep = rest_bits.min(fnew);
            put(2 * q + bit, ((rest >> (rest_bits - keep)) << 1 | 1) << (fnew - keep))
        };
        if let Err(full) = result {
            for &(q2, r2) in placed.iter().rev() {
                new.remove_exact(q2, r2);
            }
            return Err(full);
        }
    }
    Ok(())
}

/// The remainder field of an `f`-bit fingerprint `fp` in a table of `F` bits,
/// the fingerprint cut to `F` bits when longer.
fn field(fp: u64, f: u32, fbits: u32) -> u64 {
    let keep = f.min(fbits);
    ((fp >> (f - keep)) << 1 | 1) << (fbits - keep)
}

/// Re-expresses a source entry (quotient `q`, remainder `r` of table `src`)
/// in a table of `m` quotients and `F`-bit fingerprints, calling `put` for
/// each entry it becomes: one, or copies when the entry is less precise than
/// a quotient of the destination. Every hash the source entry matches is
/// matched by one of them.
fn convert(
    src: &Table,
    q: u64,
    r: u64,
    m: u64,
    fbits: u32,
    mut put: impl FnMut(u64, u64) -> Result<(), XfError>,
) -> Result<(), XfError> {
    let (f, fp) = decode(r, src.fbits());
    let ms = src.m();
    let (big, small) = (m.max(ms), m.min(ms));
    if big % small == 0 && (big / small).is_power_of_two() {
        let j = (big / small).trailing_zeros();
        if m >= ms {
            // The destination is 2^j times larger: j fingerprint bits move to the quotient.
            if f >= j {
                let top = if j == 0 { 0 } else { fp >> (f - j) };
                let rest = fp & ((1u64 << (f - j)) - 1);
                return put((q << j) | top, field(rest, f - j, fbits));
            }
            let copies = 1u64 << (j - f);
            if copies > MAX_MERGE_COPIES {
                return Err(XfError::MergeImprecise);
            }
            let base = ((q << f) | fp) << (j - f);
            for c in 0..copies {
                put(base + c, 1 << fbits)?;
            }
            return Ok(());
        }
        // The destination is 2^j times smaller: the quotient's low bits join the fingerprint.
        let low = q & ((1u64 << j) - 1);
        let total = j + f;
        let keep = total.min(fbits);
        // The top `keep` bits of `low ++ fp`, built without overflowing.
        let combined =
            if keep <= j { low >> (j - keep) } else { (low << (keep - j)) | (fp >> (f - (keep - j))) };
        return put(q >> j, ((combined << 1) | 1) << (fbits - keep));
    }
    // Sizes of different families: cover the entry's interval of hashes
    // with at most two cells of the destination (fingerprints cut to 20 bits).
    let f2 = f.min(20);
    let n = u128::from((q << f2) | (fp >> (f - f2)));
    let d = u128::from(ms) << f2;
    let width = 128 - u128::from(m).leading_zeros();
    let mut g = fbits.min(63u32.saturating_sub(width));
    // Cells of 2^-g of a destination quotient no smaller than the interval.
    while g > 0 && (u128::from(m) << g) > d {
        g -= 1;
    }
    let scale = u128::from(m) << g;
    let lo = n * scale / d;
    let hi = ((n + 1) * scale).div_ceil(d) - 1;
    if hi - lo + 1 > u128::from(MAX_MERGE_COPIES) {
        return Err(XfError::MergeImprecise);
    }
    for cell in lo..=hi {
        let (dq, dfp) = ((cell >> g) as u64, (cell & ((1u128 << g) - 1)) as u64);
        put(dq, field(dfp, g, fbits))?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn filter(error: f64, capacity: u64) -> XfFilter {
        XfFilter::new(error, capacity, 1 << 30, Limits::NONE).unwrap()
    }

    fn key(i: u64) -> [u8; 8] {
        i.to_le_bytes()
    }

    #[test]
    fn the_schedule_lengthens_fingerprints_and_stays_in_budget() {
        let p = XfParams { error_rate: 0.01, capacity: 1000, max_capacity: 1 << 30 };
        let h = p.horizon();
        assert_eq!(h, 21);
        // Each level's entries at their most, the mass they add, in turn.
        let mut mass = 0.0;
        let mut bits = vec![];
        for k in 0..=h {
            let f = fingerprint_bits(0.01, k, h, mass);
            bits.push(f);
            mass += entries_per_quotient(k) * (-(f64::from(f))).exp2();
        }
        assert!(mass <= 0.01, "{mass}");
        assert!(bits.windows(2).all(|w| w[0] <= w[1] + 1), "{bits:?}");
        assert!(bits[0] >= 8 && bits[h as usize] <= 15, "{bits:?}");
        // More mass already in means longer fingerprints, never past the plan's.
        assert!(fingerprint_bits(0.01, 3, h, 0.009) >= fingerprint_bits(0.01, 3, h, 0.0));
        assert!(fingerprint_bits(0.01, 3, h, 1.0) <= fingerprint_bits(0.01, 3, h, 0.0) + 4);
    }

    #[test]
    fn members_stay_members_through_growth_and_deletes() {
        let mut f = filter(0.01, 100);
        for i in 0..20_000u64 {
            f.insert(&key(i), Limits::NONE).unwrap();
            if i % 97 == 0 {
                for j in 0..=i {
                    if j % 13 == 0 {
                        assert!(f.contains(&key(j)), "lost {j} after {i}");
                    }
                }
            }
        }
        assert!(f.expansions() >= 7);
        for i in (0..20_000u64).step_by(2) {
            assert_eq!(f.delete(&key(i)), Ok(true));
        }
        for i in (1..20_000u64).step_by(2) {
            assert!(f.contains(&key(i)));
        }
        assert_eq!(f.items(), 10_000);
    }

    #[test]
    fn counts_count_adds() {
        let mut f = filter(0.01, 100);
        for n in 1..=50u64 {
            f.insert(b"x", Limits::NONE).unwrap();
            assert!(f.count(b"x") >= n);
        }
        assert_eq!(f.insert(b"x", Limits::NONE), Ok(false));
        assert_eq!(f.insert_if_absent(b"x", Limits::NONE), Ok(false));
        for _ in 0..51 {
            assert_eq!(f.delete(b"x"), Ok(true));
        }
        assert_eq!(f.count(b"x"), 0);
        assert_eq!(f.delete(b"x"), Ok(false));
    }

    #[test]
    fn merges_of_other_sizes_keep_members() {
        for (a, b) in [(1000u64, 1000u64), (1000, 64), (64, 5000), (1000, 777), (777, 100_000)] {
            let mut x = filter(0.01, a);
            let mut y = filter(0.01, b);
            for i in 0..3000u64 {
                x.insert(&key(i), Limits::NONE).unwrap();
                y.insert(&key(i + 1_000_000), Limits::NONE).unwrap();
            }
            x.merge_from(&y, Limits::NONE).unwrap_or_else(|e| panic!("{a} {b}: {e:?}"));
            for i in 0..3000u64 {
                assert!(x.contains(&key(i)) && x.contains(&key(i + 1_000_000)), "{a} {b} {i}");
            }
            assert_eq!(x.items(), 6000);
        }
    }

    #[test]
    fn the_maximum_capacity_is_enforced() {
        let mut f = XfFilter::new(0.01, 10, 100, Limits::NONE).unwrap();
        for i in 0..100u64 {
            f.insert(&key(i), Limits::NONE).unwrap();
        }
        assert_eq!(f.insert(b"more", Limits::NONE), Err(XfError::Full { max_capacity: 100 }));
        assert!(matches!(
            XfFilter::new(0.01, 1000, 1 << 30, Limits::at_most(100)),
            Err(XfError::TooLarge { .. })
        ));
    }

    #[test]
    fn growth_under_a_limit_is_refused_and_changes_nothing() {
        let mut f = XfFilter::new(0.01, 1000, 1 << 30, Limits::NONE).unwrap();
        let limit = Limits::at_most(f.size_bytes() + 10);
        let mut added = 0u64;
        let err = loop {
            match f.insert(&key(added), limit) {
                Ok(_) => added += 1,
                Err(e) => break e,
            }
        };
        assert!(matches!(err, XfError::TooLarge { .. }));
        assert_eq!(f.items(), added);
        for i in 0..added {
            assert!(f.contains(&key(i)));
        }
    }

    #[test]
    fn hashable_values_hash_the_same_each_time() {
        assert_eq!(XfHash::of_hashable(&("a", 1u32)), XfHash::of_hashable(&("a", 1u32)));
        assert_ne!(XfHash::of_hashable(&1u64), XfHash::of_hashable(&2u64));
        let mut f = filter(0.01, 100);
        f.insert_hash(XfHash::of_hashable("k"), Limits::NONE).unwrap();
        assert!(f.contains_hash(XfHash::of_hashable("k")));
    }
}
