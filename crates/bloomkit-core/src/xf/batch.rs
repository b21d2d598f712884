//! All-or-nothing batches of adds: what `XF.MADD`, `XF.MADDNX` and
//! `XF.INSERT` run, so that a batch refused part way (`MAXCAPACITY`, a byte
//! limit, a failed allocation) leaves the filter exactly as it was.
//!
//! Why an undo log and not a copy: a copy costs the whole filter per
//! batch, the log one small record per item. Every add changes the filter
//! in exactly one of four ways, each with an exact inverse that needs no
//! allocation:
//! - an entry inserted in place: `Block::remove` of the same entry puts
//!   back the same bits (the vacated tail is cleared); a copy counted in
//!   place (an entry folded with its copies): `Block::remove` counts one
//!   less;
//! - a block rebuilt (more room, a wider field): the old block is kept;
//! - a lone block doubled, or split into the first two: the old block is kept;
//! - a block split in a directory: the old block is kept, and a doubled
//!   directory's old allocation, to put the slots back into (`slots.rs`).
//!
//! Records are undone last first, so each finds the filter as it left it.
//! What the batch replaced is freed at commit (a single add frees it at
//! once): until then a batch holds the blocks it rebuilt or split besides
//! the filter's, outside `bf.max-filter-bytes` (bounded by the batch: one
//! block per add at most).
//! The counters (items, mass) are put back from the batch's start. The
//! records themselves are in `undo.rs`.

use super::errors::XfError;
use super::filter::{Added, Store, XfFilter, XfHash};
use super::undo::{Log, Split, Undo};
use crate::common::memory::Limits;

/// Adds that take effect together or not at all: [`Batch::commit`] keeps
/// them; a batch dropped without it (an error, a panic unwinding) puts the
/// filter back as it was, bytes and all.
pub struct Batch<'a> {
    filter: &'a mut XfFilter,
    log: Log,
    items: u64,
    mass: u64,
    committed: bool,
}

impl XfFilter {
    /// A batch of adds on this filter ([`Batch`]).
    pub fn batch(&mut self) -> Batch<'_> {
        let (items, mass) = (self.items, self.mass);
        Batch { filter: self, log: Log::default(), items, mass, committed: false }
    }

    /// Undoes one change (records are undone last first); `split` is the
    /// last split recorded, for [`Undo::Split`].
    fn undo(&mut self, undo: Undo, split: Option<Split>) {
        match (undo, split, &mut self.store) {
            (Undo::Inserted { slot, quotient, at }, ..) => {
                self.update_block(slot, |b| b.remove(quotient, at));
            }
            (Undo::Replaced { slot, old }, ..) => drop(self.replace_block(slot, old)),
            (Undo::Lone { old, qbits }, ..) => {
                self.store = Store::One(old);
                self.qbits = qbits;
            }
            (Undo::Split, Some(split), Store::Many(d)) => {
                let (lo, hi) = (d.slots.at(split.range.start), d.slots.at(split.range.end - 1));
                let (was, now) = (lo.bytes() + hi.bytes(), split.old.bytes());
                d.slots.unsplit(split);
                d.resized(was, now);
            }
            (Undo::Split, ..) => debug_assert!(false, "a split is undone in a directory, from its record"),
        }
    }
}

impl Batch<'_> {
    /// The filter as the batch has left it so far (to hash items with).
    pub fn filter(&self) -> &XfFilter {
        self.filter
    }

    /// [`XfFilter::add_occurrence`], undone if the batch is not committed.
    /// The item's block is not asked for here: a batch asks for each a few
    /// items ahead ([`XfFilter::prefetch_for`]).
    pub fn add_occurrence(&mut self, h: XfHash, limits: Limits) -> Result<Added, XfError> {
        self.filter.add_occurrence_with(h, limits, &mut self.log)
    }

    /// [`XfFilter::insert_if_absent_hash`], undone if the batch is not committed.
    pub fn insert_if_absent(&mut self, h: XfHash, limits: Limits) -> Result<bool, XfError> {
        self.filter.insert_if_absent_with(h, limits, &mut self.log)
    }

    /// Keeps every add of the batch (and frees what they replaced).
    pub fn commit(mut self) {
        self.committed = true;
        self.log = Log::default();
    }

    fn rollback(&mut self) {
        while let Some(undo) = self.log.undo.pop() {
            let split = if matches!(undo, Undo::Split) { self.log.splits.pop() } else { None };
            self.filter.undo(undo, split);
        }
        self.filter.items = self.items;
        self.filter.mass = self.mass;
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if !self.committed {
            self.rollback();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::filter::{Seed, XfParams};
    use super::*;

    /// Everything a filter holds in memory, bit for bit: each block's
    /// words (room and width included), the directory (each slot's block
    /// by its place in address order, its depth and allocation), the
    /// counters. Equal states answer,
    /// save and count bytes alike.
    fn state(f: &XfFilter) -> (Vec<u64>, Vec<u32>, [usize; 2], [u64; 4]) {
        let words = f.blocks().flat_map(|b| b.words().iter().copied()).collect();
        let (dir, depth) = match &f.store {
            Store::Many(d) => {
                let mut n = 0u32;
                let dir = (0..d.slots.len())
                    .map(|i| {
                        n += u32::from(i > 0 && !d.slots.at(i).is(d.slots.at(i - 1)));
                        n
                    })
                    .collect();
                (dir, [d.slots.depth() as usize, d.slots.room()])
            }
            _ => (Vec::new(), [0, 0]),
        };
        (words, dir, depth, [f.items, f.mass, u64::from(f.qbits), f.size_bytes()])
    }

    fn filter(capacity: u64, max_capacity: u64) -> XfFilter {
        let params = XfParams { error_rate: 0.01, capacity, max_capacity };
        XfFilter::with_seed(params, Seed([7, 11]), Limits::NONE).unwrap()
    }

    fn item(i: u64, salt: u64) -> [u8; 8] {
        (i ^ (salt << 40)).to_le_bytes()
    }

    /// Item `i` of a stream where every fifth add is one of seven hot items
    /// (copies: entries, then folded into a count, then counted in place).
    fn streamed(i: u64, salt: u64) -> [u8; 8] {
        item(if i.is_multiple_of(5) { (1 << 30) | (i % 7) } else { i }, salt)
    }

    /// Batches of every size over filters of every shape (a lone block
    /// doubling, the first split, splits that double the directory or
    /// not, rebuilt blocks, in-place inserts, copies folded and counted in
    /// place), each run twice: dropped, it
    /// leaves the filter bit for bit as it was; committed, the filter is
    /// bit for bit what the same adds one at a time make.
    #[test]
    fn a_dropped_batch_undoes_everything_and_a_committed_one_is_the_adds() {
        let mut kinds = [0usize; 4];
        let (mut deepened, mut in_place, mut counted_copies) = (0, 0, 0);
        for (capacity, held, batch) in
            [(1, 0, 1), (1, 3, 40), (8, 0, 700), (100, 50, 2_000), (100, 3_000, 5_000)]
        {
            for salt in 0..4u64 {
                let mut f = filter(capacity, 1 << 36);
                for i in 0..held {
                    f.insert(&streamed(i, salt), Limits::NONE).unwrap();
                }
                let before = state(&f);
                let mut one_by_one = f.try_clone().unwrap();
                let mut b = f.batch();
                for i in held..held + batch {
                    let h = b.filter().hash(&streamed(i, salt));
                    if i % 3 == 0 {
                        b.insert_if_absent(h, Limits::NONE).unwrap();
                        one_by_one.insert_if_absent_hash(h, Limits::NONE).unwrap();
                    } else {
                        b.add_occurrence(h, Limits::NONE).unwrap();
                        one_by_one.add_occurrence(h, Limits::NONE).unwrap();
                    }
                }
                for u in &b.log.undo {
                    kinds[match u {
                        Undo::Inserted { .. } => 0,
                        Undo::Replaced { .. } => 1,
                        Undo::Lone { .. } => 2,
                        Undo::Split => 3,
                    }] += 1;
                }
                let doubled = b.log.splits.iter().filter(|s| s.old_slots.is_some()).count();
                deepened += doubled;
                in_place += b.log.splits.len() - doubled;
                counted_copies += b.filter().blocks().filter(|b| b.meta().counted).count();
                let after = state(b.filter());
                drop(b);
                assert_eq!(state(&f), before, "capacity {capacity}, {held} held, a batch of {batch} dropped");
                let mut b = f.batch();
                for i in held..held + batch {
                    let h = b.filter().hash(&streamed(i, salt));
                    if i % 3 == 0 {
                        b.insert_if_absent(h, Limits::NONE).unwrap();
                    } else {
                        b.add_occurrence(h, Limits::NONE).unwrap();
                    }
                }
                b.commit();
                assert_eq!(state(&f), after, "capacity {capacity}: the same batch, committed");
                assert_eq!(state(&f), state(&one_by_one), "capacity {capacity}: committed = one by one");
            }
        }
        assert!(kinds.iter().all(|&k| k > 0), "every kind of change was undone: {kinds:?}");
        assert!(counted_copies > 0, "copies counted in place were undone");
        assert!(
            deepened > 0 && in_place > 0,
            "splits that doubled the directory and that did not were undone"
        );
        assert!(std::mem::size_of::<Undo>() <= 32, "a record per item stays small");
    }

    /// A batch refused part way by MAXCAPACITY or by the byte limit leaves
    /// nothing of its first items.
    #[test]
    fn a_batch_refused_part_way_leaves_nothing() {
        let mut f = filter(100, 1_000);
        for i in 0..900 {
            f.insert(&item(i, 1), Limits::NONE).unwrap();
        }
        let before = state(&f);
        let mut b = f.batch();
        let refused = (900..1_100).find_map(|i| {
            let h = b.filter().hash(&item(i, 1));
            b.add_occurrence(h, Limits::NONE).err().map(|e| (i, e))
        });
        assert_eq!(refused, Some((1_000, XfError::Full { max_capacity: 1_000 })));
        drop(b);
        assert_eq!(state(&f), before, "MAXCAPACITY");

        let mut f = filter(100, 1 << 36);
        for i in 0..2_000 {
            f.insert(&item(i, 2), Limits::NONE).unwrap();
        }
        let limit = Limits::at_most(f.size_bytes() + 3_000);
        let before = state(&f);
        let mut b = f.batch();
        let refused = (2_000..20_000).find_map(|i| {
            let h = b.filter().hash(&item(i, 2));
            b.insert_if_absent(h, limit).err().map(|e| (i, e))
        });
        let (at, e) = refused.expect("the byte limit refuses an add");
        assert!(matches!(e, XfError::TooLarge { .. }), "{e:?}");
        assert!(at > 2_001, "some adds of the batch ran first ({at})");
        drop(b);
        assert_eq!(state(&f), before, "bf.max-filter-bytes");
    }
}
