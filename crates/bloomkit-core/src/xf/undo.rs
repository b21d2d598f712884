//! What an add changed, kept so that a batch can undo it (`batch.rs`):
//! the records and where an add leaves them. Apart from the filter so that
//! the filter's writes and the batches over them do not import each other.

use super::block::Block;
use crate::common::memory::OutOfMemory;

/// How to undo one change an add made.
pub(super) enum Undo {
    /// Entry `at` of quotient `ql` was inserted in place into block `block`.
    Inserted { block: usize, ql: u32, at: u32 },
    /// Block `block` was replaced by a rebuilt one.
    Replaced { block: usize, old: Block },
    /// The lone block `old` (of `qbits` quotient bits) was doubled, or
    /// split into a directory of two.
    Lone { old: Block, qbits: u8 },
    /// Block `block` of a directory was split: the upper half was pushed
    /// last; the directory was doubled (`old_dir`) or the slots
    /// `slots` pointed at the upper half.
    Split { block: usize, old: Block, old_dir: Option<Vec<u32>>, slots: std::ops::Range<usize> },
}

/// Where an add leaves the record of what it changed.
pub(super) trait Journal {
    /// Room for one more record, asked before the add changes anything, so
    /// that keeping the record cannot fail afterwards.
    fn make_room(&mut self) -> Result<(), OutOfMemory>;
    fn record(&mut self, undo: Undo);
}

/// A single add: nothing to undo (it changes nothing unless it succeeds);
/// what it replaced is freed at once.
pub(super) struct Forget;

impl Journal for Forget {
    fn make_room(&mut self) -> Result<(), OutOfMemory> {
        Ok(())
    }
    fn record(&mut self, _: Undo) {}
}

impl Journal for Vec<Undo> {
    fn make_room(&mut self) -> Result<(), OutOfMemory> {
        self.try_reserve(1).map_err(|_| OutOfMemory)
    }
    fn record(&mut self, undo: Undo) {
        debug_assert!(self.len() < self.capacity());
        self.push(undo);
    }
}
