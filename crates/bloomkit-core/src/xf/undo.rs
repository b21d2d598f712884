//! What an add changed, kept so that a batch can undo it (`batch.rs`):
//! the records and where an add leaves them. Apart from the filter so that
//! the filter's writes and the batches over them do not import each other.

use super::block::Block;
use crate::common::memory::OutOfMemory;

/// How to undo one change an add made.
pub(super) enum Undo {
    /// Entry `at` of `quotient` was inserted in place into the block at
    /// directory slot `slot` (0 for a lone block), or one more copy of it
    /// counted in place (its record's count). Records are undone last
    /// first, so a slot names the block it named when recorded.
    Inserted { slot: usize, quotient: u32, at: u32 },
    /// The block at slot `slot` was replaced by a rebuilt one.
    Replaced { slot: usize, old: Block },
    /// The lone block `old` (of `qbits` quotient bits) was doubled, or
    /// split into a directory of two.
    Lone { old: Block, qbits: u8 },
    /// A block of a directory was split: the [`Split`] the journal kept
    /// last (apart, so that the common records stay 32 bytes).
    Split,
}

/// How to undo a split in a directory: what [`Slots::split`] took (the
/// block split, its slots, the slots before they doubled), which
/// [`Slots::unsplit`] puts back.
///
/// [`Slots::split`]: super::slots::Slots::split
/// [`Slots::unsplit`]: super::slots::Slots::unsplit
pub(super) type Split = super::slots::Taken;

/// Where an add leaves the record of what it changed.
pub(super) trait Journal {
    /// Room for one more record, asked before the add changes anything, so
    /// that keeping the record cannot fail afterwards.
    fn make_room(&mut self) -> Result<(), OutOfMemory>;
    /// Room for one more [`Split`] besides, asked only by a split in a
    /// directory before it changes anything (most adds split nothing: they
    /// pay for no room of it).
    fn make_room_for_split(&mut self) -> Result<(), OutOfMemory>;
    fn record(&mut self, undo: Undo);
    fn record_split(&mut self, split: Split);
}

/// A single add: nothing to undo (it changes nothing unless it succeeds);
/// what it replaced is freed at once.
pub(super) struct Forget;

impl Journal for Forget {
    fn make_room(&mut self) -> Result<(), OutOfMemory> {
        Ok(())
    }
    fn make_room_for_split(&mut self) -> Result<(), OutOfMemory> {
        Ok(())
    }
    fn record(&mut self, _: Undo) {}
    fn record_split(&mut self, _: Split) {}
}

/// A batch's records, last first when undone.
#[derive(Default)]
pub(super) struct Log {
    pub undo: Vec<Undo>,
    pub splits: Vec<Split>,
}

impl Journal for Log {
    fn make_room(&mut self) -> Result<(), OutOfMemory> {
        self.undo.try_reserve(1).map_err(|_| OutOfMemory)
    }
    fn make_room_for_split(&mut self) -> Result<(), OutOfMemory> {
        self.splits.try_reserve(1).map_err(|_| OutOfMemory)
    }
    fn record(&mut self, undo: Undo) {
        debug_assert!(self.undo.len() < self.undo.capacity());
        self.undo.push(undo);
    }
    fn record_split(&mut self, split: Split) {
        debug_assert!(self.splits.len() < self.splits.capacity());
        self.splits.push(split);
        self.record(Undo::Split);
    }
}
