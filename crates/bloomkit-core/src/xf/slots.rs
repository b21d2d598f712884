//! The directory of a filter of more than one block: `2^depth` slots, by
//! the hash's top `depth` bits, each holding its block itself (a handle on
//! the block's words), not the block's number in a list.
//!
//! Why: with numbers, every operation followed three dependent loads: the
//! slot, the list's pointer, then the block. At 4M items the slots and the
//! list (200 KB together) fall out of L2 as the blocks pass through it, and
//! perf put 12% and 15% of a miss's time on the first two loads. With the
//! handle in the slot, the block's lines are asked for after one load. A
//! slot grows from 4 bytes to 8 and the list's 8 bytes per block (and its
//! room) go: less memory for any filter of under about 2.2 slots per block
//! (honest items keep 1 to 2), more for a directory deepened by a crafted
//! crowd (up to 16 per block, `directory_fits` in `filter.rs`).
//!
//! A block of depth `k` fills the `2^(depth - k)` slots of its prefix, from
//! a multiple of that span on, so the blocks are found from the slots in
//! address order, and the directory owns them: each is freed once, from
//! its first slot; its other slots hold aliases that free nothing. A write
//! that moves a block's words (a rebuild, a delete that shrinks it,
//! defragmentation) goes through [`Slots::update`] or [`Slots::replace`],
//! which point every slot of the block at the new words: no alias is ever
//! read after its words are freed. The layout (each block one level within
//! the directory, its range aligned) is what makes the owner findable, so
//! the functions that change it check it with `assert!`, not in debug
//! builds only: a block of the wrong depth would be freed twice.

use std::mem::ManuallyDrop;
use std::ops::Range;

use super::block::{Block, MAX_DEPTH};
use super::errors::XfError;
use crate::common::memory::{OutOfMemory, Relocate};

/// The slots (see the module docs).
pub(super) struct Slots {
    slots: Vec<ManuallyDrop<Block>>,
    depth: u32,
    /// The lines a batch's hint asks for per block, which the directory
    /// keeps with its blocks' bytes (`Dir::resized` in `filter.rs`): here
    /// beside `depth`, in what would be padding, so that the directory's
    /// holder stays in its allocation class.
    hint_lines: u32,
    /// Blocks (distinct handles).
    count: usize,
}

/// Room for the slots doubled, asked before a split changes anything; after
/// it, the slots as they were (their allocation kept, so that a batch puts
/// them back without allocating: `undo.rs`).
pub(super) struct SlotRoom(Vec<ManuallyDrop<Block>>);

/// What [`Slots::split`] took: the block split, the slots of its range
/// (in the directory as it is after the split), and the slots before they
/// doubled, if they did.
pub(super) struct Taken {
    pub old: Block,
    pub range: Range<usize>,
    pub old_slots: Option<SlotRoom>,
}

/// The first `depth` bits of `h` (0 for none): a block's place, and its
/// slot in a directory of that depth. By a 64-bit shift of the hash's
/// upper half: directories and blocks are at most `MAX_DEPTH` (48) deep,
/// and a `u128`'s shift by a variable is a dozen instructions, which every
/// lookup and add paid.
#[inline(always)]
pub fn top_bits(h: u128, depth: u32) -> u64 {
    if depth == 0 {
        return 0;
    }
    ((h >> 64) as u64) >> ((64 - depth) & 63)
}

impl Slots {
    /// The directory of `blocks` (in address order, none deeper than
    /// `depth`), which it takes when they cover every slot, each where its
    /// depth places it; else an error, and `blocks` are left as they were.
    pub fn of(blocks: &mut Vec<Block>, depth: u32) -> Result<Slots, XfError> {
        if depth == 0 || depth > MAX_DEPTH {
            return Err(XfError::BadData("a directory is 1 to 48 levels deep"));
        }
        let all = 1usize << depth;
        let mut slots = Vec::new();
        slots.try_reserve_exact(all).map_err(|_| OutOfMemory)?;
        for b in blocks.iter() {
            if b.depth() > depth {
                return Err(XfError::BadData("a block is deeper than the directory"));
            }
            let span = 1usize << (depth - b.depth());
            if slots.len() % span != 0 || slots.len() + span > all {
                return Err(XfError::BadData("a block is not where its depth places it"));
            }
            // SAFETY: `blocks` is handed to the directory below once every
            // check passed (until then the aliases are only dropped, which
            // frees nothing), and the directory frees each block once.
            slots.extend((0..span).map(|_| unsafe { b.alias() }));
        }
        if slots.len() != all {
            return Err(XfError::BadData("the blocks do not cover every hash"));
        }
        let count = blocks.len();
        // The slots own the blocks now: the list forgets them.
        blocks.drain(..).for_each(std::mem::forget);
        Ok(Slots { slots, depth, hint_lines: 1, count })
    }

    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// See the field.
    #[inline]
    pub fn hint_lines(&self) -> u32 {
        self.hint_lines
    }

    pub fn set_hint_lines(&mut self, lines: u32) {
        self.hint_lines = lines;
    }

    /// Slots (`2^depth`).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// The slots' allocation, in slots (a rollback must give back the one
    /// it took, for the bytes counted: tests).
    #[cfg(test)]
    pub fn room(&self) -> usize {
        self.slots.capacity()
    }

    /// Blocks.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The slot of hash `h` (its top `depth` bits; `depth >= 1`).
    #[inline]
    pub fn slot_of(&self, h: u128) -> usize {
        // `top_bits` for a depth of at least 1 (a directory's): one shift,
        // with no test for 0 (lookups pay this twice a batch's item).
        debug_assert!((1..=64).contains(&self.depth));
        ((h >> 64) as u64 >> ((64 - self.depth) & 63)) as usize
    }

    /// The slot of `s`, a slot of a directory `slot_depth >= depth` deep.
    #[inline]
    pub fn slot_at(&self, slot_depth: u32, s: u64) -> usize {
        (s >> (slot_depth - self.depth)) as usize
    }

    #[inline]
    pub fn at(&self, slot: usize) -> &Block {
        &self.slots[slot]
    }

    /// The slots the block at `slot` fills.
    #[inline]
    fn range_of(&self, slot: usize) -> Range<usize> {
        self.range_at(slot, self.slots[slot].depth())
    }

    /// The slots of a block of `depth` that `slot` is one of.
    fn range_at(&self, slot: usize, depth: u32) -> Range<usize> {
        let span = 1usize << (self.depth - depth);
        let first = slot & !(span - 1);
        first..first + span
    }

    /// Points the slots of `range` after its first at the first's block.
    fn point(&mut self, range: Range<usize>) {
        let first = range.start;
        self.point_from(range, first);
    }

    /// Points the slots of `range` other than `from` at `from`'s block.
    fn point_from(&mut self, range: Range<usize>, from: usize) {
        for s in range.filter(|&s| s != from) {
            // SAFETY: an alias of the block `from` holds, which the
            // directory frees once (from the range's first slot).
            self.slots[s] = unsafe { self.slots[from].alias() };
        }
    }

    /// `write` on the block at `slot` (through that slot's handle: every
    /// slot of a block holds the same words); if it moved the block's
    /// words, every other slot of the block is pointed at the new ones.
    /// `write` keeps the block's depth (checked), and must not panic once
    /// it has moved the words (none of the block's writes can: they
    /// allocate before they move anything): written through a slot other
    /// than the block's first, a panic there would leave the first, which
    /// frees the words, pointing at the freed ones.
    #[inline]
    pub fn update<R>(&mut self, slot: usize, write: impl FnOnce(&mut Block) -> R) -> R {
        // The block's slots are found only when its words moved: an add in
        // place (most writes) reads no depth for them and touches no other
        // slot (the range first cost an add about 20 instructions).
        let block = &mut self.slots[slot];
        let (depth, was) = (block.depth(), block.alias_id());
        let r = write(block);
        let (moved, depth_now) = (self.slots[slot].alias_id() != was, self.slots[slot].depth());
        if moved {
            // Every slot points at the words before the check below may panic.
            self.point_from(self.range_at(slot, depth), slot);
        }
        assert_eq!(depth_now, depth, "a write keeps its block's depth");
        r
    }

    /// Puts `b` (of the same depth) in place of the block at `slot`; gives
    /// back the block it replaced.
    pub fn replace(&mut self, slot: usize, b: Block) -> Block {
        let range = self.range_of(slot);
        assert_eq!(b.depth(), self.slots[slot].depth(), "a block replaced by one of its depth");
        let old = std::mem::replace(&mut self.slots[range.start], ManuallyDrop::new(b));
        self.point(range);
        ManuallyDrop::into_inner(old)
    }

    /// Room for the slots doubled (a split of a block at the directory's depth).
    pub fn room_to_deepen(&self) -> Result<SlotRoom, OutOfMemory> {
        let mut room = Vec::new();
        room.try_reserve_exact(self.slots.len() * 2).map_err(|_| OutOfMemory)?;
        Ok(SlotRoom(room))
    }

    /// The block at `slot` split into `lo` and `hi`, one level deeper, the
    /// slots doubled first into `room` when it is given (the block was at
    /// the directory's depth). Allocates nothing.
    pub fn split(&mut self, mut slot: usize, lo: Block, hi: Block, room: Option<SlotRoom>) -> Taken {
        let old_slots = room.map(|SlotRoom(mut doubled)| {
            for s in &self.slots {
                // SAFETY: aliases of the blocks the slots hold; the
                // owning slot of each is the first of its (doubled) range.
                doubled.extend([unsafe { s.alias() }, unsafe { s.alias() }]);
            }
            self.depth += 1;
            slot *= 2;
            SlotRoom(std::mem::replace(&mut self.slots, doubled))
        });
        let range = self.range_of(slot);
        let depth = self.slots[range.start].depth();
        assert!(range.len() >= 2, "a block splits within the directory (room given at its depth)");
        assert!(
            lo.depth() == depth + 1 && hi.depth() == depth + 1,
            "a block splits into halves one level deeper"
        );
        let mid = range.start + range.len() / 2;
        let old = std::mem::replace(&mut self.slots[range.start], ManuallyDrop::new(lo));
        self.point(range.start..mid);
        self.slots[mid] = ManuallyDrop::new(hi);
        self.point(mid..range.end);
        self.count += 1;
        Taken { old: ManuallyDrop::into_inner(old), range, old_slots }
    }

    /// Undoes [`Slots::split`] (the directory as the split left it): frees
    /// the halves and puts the block back, in the slots as they were.
    /// Allocates nothing.
    pub fn unsplit(&mut self, taken: Taken) {
        let Taken { old, range, old_slots } = taken;
        let mid = range.start + range.len() / 2;
        let lo = std::mem::replace(&mut self.slots[range.start], ManuallyDrop::new(old));
        // SAFETY: an alias of the block just put back, which its first slot owns.
        let back = unsafe { self.slots[range.start].alias() };
        let hi = std::mem::replace(&mut self.slots[mid], back);
        self.point(range);
        drop(ManuallyDrop::into_inner(lo));
        drop(ManuallyDrop::into_inner(hi));
        self.count -= 1;
        if let Some(SlotRoom(mut halved)) = old_slots {
            // A doubled directory's slots come in equal pairs.
            halved.clear();
            // SAFETY: the first slot of each pair's alias: the owning slot
            // of a block stays the first of its range.
            halved.extend(self.slots.iter().step_by(2).map(|s| unsafe { s.alias() }));
            self.slots = halved;
            self.depth -= 1;
        }
    }

    /// The blocks in address order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { slots: &self.slots, at: 0, depth: self.depth }
    }

    /// A copy (fails softly: what was copied is freed).
    pub fn try_clone(&self) -> Result<Slots, OutOfMemory> {
        let mut slots = Vec::new();
        slots.try_reserve_exact(self.slots.len()).map_err(|_| OutOfMemory)?;
        let mut out = Slots { slots, depth: self.depth, hint_lines: self.hint_lines, count: 0 };
        for b in self.iter() {
            let copy = b.try_clone()?;
            let span = 1usize << (self.depth - b.depth());
            let first = out.slots.len();
            out.slots.push(ManuallyDrop::new(copy));
            for _ in 1..span {
                // SAFETY: an alias of the copy just pushed, which `out` owns.
                let alias = unsafe { out.slots[first].alias() };
                out.slots.push(alias);
            }
            out.count += 1;
        }
        Ok(out)
    }

    /// Offers the buffers to a server's defragmentation from buffer `from`
    /// on: 0 the slots, `1 + s` the block whose first slot is `s`;
    /// `Some(next)` when cut short (a directory that deepened since
    /// resumes from a slot of the old numbering: it offers some blocks
    /// twice or not at all, which only moves them less; a call that starts
    /// inside a block's range may offer nothing, and still moves on).
    pub fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize> {
        let mut i = from;
        while i <= self.slots.len() {
            if i > from && to.should_stop() {
                return Some(i);
            }
            if i == 0 {
                to.vec(&mut self.slots);
                i = 1;
                continue;
            }
            let range = self.range_of(i - 1);
            if range.start == i - 1 {
                self.update(i - 1, |b| b.relocate(to));
            }
            i = range.end + 1;
        }
        None
    }

    /// Asks for the slot of `h`.
    #[inline]
    pub fn prefetch_slot(&self, h: u128) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let at = self.slots.as_ptr().wrapping_add(self.slot_of(h)).cast::<i8>();
            // SAFETY: a prefetch of any address reads nothing and cannot fault.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(at) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = h;
    }

    /// Asks for `lines` lines of the block `h` falls in.
    #[inline]
    pub fn prefetch(&self, h: u128, lines: usize) {
        self.slots[self.slot_of(h)].prefetch_lines(lines);
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        let mut s = 0;
        while s < self.slots.len() {
            let span = 1usize << (self.depth - self.slots[s].depth());
            // SAFETY: the first slot of its block: the one handle that frees it.
            unsafe { ManuallyDrop::drop(&mut self.slots[s]) };
            s += span;
        }
    }
}

/// The blocks of a directory in address order ([`Slots::iter`]).
pub(super) struct Iter<'a> {
    slots: &'a [ManuallyDrop<Block>],
    at: usize,
    depth: u32,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Block;

    fn next(&mut self) -> Option<&'a Block> {
        let b = self.slots.get(self.at)?;
        self.at += 1usize << (self.depth - b.depth());
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xf::block::Entry;

    const Q: u32 = 6;

    /// A block of `depth` named by `name` (its one entry's fingerprint).
    fn named(depth: u32, name: u64) -> Block {
        Block::build_sorted(Q, depth, &[Entry { quotient: 1, f: 20, fp: name }], 0).unwrap()
    }

    fn name(b: &Block) -> u64 {
        let mut out = Vec::new();
        b.decode_into(&mut out);
        out[0].fp
    }

    /// Each slot's block by name, and the blocks in address order.
    fn layout(s: &Slots) -> (Vec<u64>, Vec<u64>) {
        ((0..s.len()).map(|i| name(s.at(i))).collect(), s.iter().map(name).collect())
    }

    /// Depth 3: blocks of depth 1, 3, 3, 2 in address order.
    fn four() -> Slots {
        let mut list = vec![named(1, 10), named(3, 11), named(3, 12), named(2, 13)];
        Slots::of(&mut list, 3).unwrap()
    }

    /// Moves every word array it is offered, as a server's defragmentation may.
    struct Mover {
        budget: usize,
        offered: usize,
    }

    impl Relocate for Mover {
        fn bytes(&mut self, _: &mut Box<[u8]>) {}
        fn vec<T>(&mut self, buffer: &mut Vec<T>) {
            self.offered += 1;
            let mut moved = Vec::with_capacity(buffer.capacity());
            moved.append(buffer);
            *buffer = moved;
        }
        fn words(&mut self, buffer: &mut Box<[u64]>) {
            self.offered += 1;
            *buffer = buffer.to_vec().into_boxed_slice();
        }
        fn should_stop(&mut self) -> bool {
            self.offered >= self.budget
        }
    }

    /// Every slot of a block holds the block its first slot owns.
    fn aliases_agree(s: &Slots) {
        for i in 0..s.len() {
            let r = s.range_of(i);
            assert!(s.at(i).is(s.at(r.start)), "slot {i} and its block's first slot {}", r.start);
        }
    }

    /// A place's bits by the 64-bit shift are the hash's first bits, at
    /// every depth a directory can have and past it.
    #[test]
    fn top_bits_are_the_hash_s_first_bits() {
        for h in [0u128, u128::MAX, 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210, 1 << 127, (1 << 64) - 1] {
            assert_eq!(top_bits(h, 0), 0);
            for depth in 1..=64u32 {
                assert_eq!(top_bits(h, depth), (h >> (128 - depth)) as u64, "{h:x} at {depth}");
            }
        }
    }

    #[test]
    fn slots_hold_their_blocks_where_their_depths_place_them() {
        let s = four();
        assert_eq!(layout(&s), (vec![10, 10, 10, 10, 11, 12, 13, 13], vec![10, 11, 12, 13]));
        assert_eq!((s.count(), s.len(), s.depth()), (4, 8, 3));
        aliases_agree(&s);
        // Misplaced, short or deeper than the directory: refused, the list kept.
        for (mut list, depth) in [
            (vec![named(3, 1), named(1, 2), named(3, 3), named(2, 4)], 3),
            (vec![named(1, 1)], 1),
            (vec![named(1, 1), named(2, 2), named(2, 3)], 1),
        ] {
            let before = list.len();
            assert!(Slots::of(&mut list, depth).is_err());
            assert_eq!(list.len(), before);
        }
    }

    #[test]
    fn splits_undo_to_the_same_slots_with_and_without_doubling() {
        let mut s = four();
        let start = layout(&s);
        // Block 13 (depth 2, slots 6-7): within the directory.
        let taken = s.split(7, named(3, 20), named(3, 21), None);
        assert_eq!(layout(&s).0, vec![10, 10, 10, 10, 11, 12, 20, 21]);
        assert_eq!(s.count(), 5);
        aliases_agree(&s);
        // Block 11 (depth 3, slot 4): the directory doubles.
        let room = s.room_to_deepen().unwrap();
        let deeper = s.split(4, named(4, 30), named(4, 31), Some(room));
        assert_eq!(layout(&s).0, [[10; 8].as_slice(), &[30, 31, 12, 12, 20, 20, 21, 21]].concat());
        assert_eq!((s.count(), s.depth()), (6, 4));
        aliases_agree(&s);
        assert_eq!(name(&deeper.old), 11);
        s.unsplit(deeper);
        s.unsplit(taken);
        assert_eq!(layout(&s), start);
        assert_eq!((s.count(), s.depth()), (4, 3));
        aliases_agree(&s);
    }

    #[test]
    fn writes_that_move_a_block_move_all_its_slots() {
        let mut s = four();
        // Through a slot that is not the block's first.
        s.update(2, |b| b.relocate(&mut Mover { budget: usize::MAX, offered: 0 }));
        aliases_agree(&s);
        let old = s.replace(5, named(3, 40));
        assert_eq!(name(&old), 12);
        let old = s.replace(3, named(1, 41));
        assert_eq!(name(&old), 10);
        assert_eq!(layout(&s).1, vec![41, 11, 40, 13]);
        aliases_agree(&s);
        let copy = s.try_clone().unwrap();
        assert_eq!(layout(&copy), layout(&s));
        assert!(!copy.at(0).is(s.at(0)));
        aliases_agree(&copy);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Split(usize),
        Unsplit,
        Replace(usize),
        Move(usize),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            3 => (0usize..1 << 12).prop_map(Op::Split),
            2 => Just(Op::Unsplit),
            1 => (0usize..1 << 12).prop_map(Op::Replace),
            1 => (0usize..1 << 12).prop_map(Op::Move),
        ]
    }

    /// A block's slots in the model: the run of its name around `slot`,
    /// which must be aligned and a power of two long.
    fn model_range(model: &[u64], slot: usize) -> Range<usize> {
        let name = model[slot];
        let start = (0..=slot).rev().take_while(|&i| model[i] == name).last().unwrap_or(slot);
        let end = (slot..model.len()).take_while(|&i| model[i] == name).last().unwrap_or(slot) + 1;
        let len = end - start;
        assert!(len.is_power_of_two() && start % len == 0, "slots {start}..{end} of {name}");
        start..end
    }

    /// The directory against a list of names per slot, through random
    /// splits (doubling the directory or not), their undoing last first,
    /// replacements and writes that move a block's words or not between
    /// them; every range and depth worked out from the model alone; then a
    /// copy, and every block freed (a double free aborts the test; a leak
    /// shows only under a sanitizer, such as nightly's
    /// `-Zsanitizer=address`).
    fn follows_its_model(ops: &[Op]) {
        let mut list = vec![named(1, 0), named(1, 1)];
        let mut s = Slots::of(&mut list, 1).unwrap();
        let (mut model, mut next, mut undo): (Vec<u64>, u64, Vec<(Taken, u64)>) = (vec![0, 1], 2, Vec::new());
        for op in ops {
            match *op {
                Op::Split(x) => {
                    let slot = x % s.len();
                    let depth = s.at(slot).depth();
                    if depth >= 6 {
                        continue;
                    }
                    let range = model_range(&model, slot);
                    let deepens = range.len() == 1;
                    assert_eq!(deepens, depth == s.depth());
                    let room = deepens.then(|| s.room_to_deepen().unwrap());
                    let old = model[slot];
                    let taken = s.split(slot, named(depth + 1, next), named(depth + 1, next + 1), room);
                    assert_eq!(name(&taken.old), old);
                    assert_eq!(taken.old_slots.is_some(), deepens);
                    if deepens {
                        model = model.iter().flat_map(|&m| [m, m]).collect();
                        assert_eq!(taken.range, range.start * 2..range.end * 2);
                    } else {
                        assert_eq!(taken.range, range);
                    }
                    let mid = taken.range.start + taken.range.len() / 2;
                    model[taken.range.start..mid].fill(next);
                    model[mid..taken.range.end].fill(next + 1);
                    undo.push((taken, old));
                    next += 2;
                }
                Op::Unsplit => {
                    let Some((taken, old)) = undo.pop() else { continue };
                    model[taken.range.clone()].fill(old);
                    if taken.old_slots.is_some() {
                        model = model.iter().step_by(2).copied().collect();
                    }
                    s.unsplit(taken);
                }
                Op::Replace(x) => {
                    let slot = x % s.len();
                    let r = model_range(&model, slot);
                    let old = s.replace(slot, named(s.at(slot).depth(), next));
                    assert_eq!(name(&old), model[slot]);
                    model[r].fill(next);
                    next += 1;
                }
                Op::Move(x) => {
                    let slot = x % s.len();
                    if x % 2 == 0 {
                        s.update(slot, |b| b.relocate(&mut Mover { budget: usize::MAX, offered: 0 }));
                    } else {
                        s.update(slot, |b| b.depth());
                    }
                }
            }
            assert_eq!(layout(&s).0, model);
            let depth = model.len().trailing_zeros();
            assert_eq!((s.depth(), s.len()), (depth, model.len()));
            for i in 0..model.len() {
                let span = model_range(&model, i).len().trailing_zeros();
                assert_eq!(s.at(i).depth(), depth - span, "slot {i}");
            }
            aliases_agree(&s);
            let mut distinct = model.clone();
            distinct.dedup();
            assert_eq!(layout(&s).1, distinct);
            assert_eq!(s.count(), distinct.len());
        }
        let copy = s.try_clone().unwrap();
        assert_eq!(layout(&copy), layout(&s));
        // Splits left undone keep their old blocks, freed with the record.
        drop(undo);
    }

    proptest::proptest! {
        #[test]
        fn slots_follow_their_model(ops in proptest::collection::vec(op(), 1..80)) {
            follows_its_model(&ops);
        }
    }

    #[test]
    fn defragmentation_offers_every_block_once_in_short_calls() {
        for budget in [1, 2, 3, 100] {
            let mut s = four();
            let before: Vec<u64> = s.iter().map(|b| b.words().as_ptr() as u64).collect();
            let mut mover = Mover { budget, offered: 0 };
            let (mut from, mut calls) = (0, 0);
            loop {
                calls += 1;
                mover.offered = 0;
                match s.relocate(from, &mut mover) {
                    Some(next) => from = next,
                    None => break,
                }
                assert!(calls < 20, "it ends");
            }
            // The slots' buffer and four blocks.
            assert_eq!(calls, 5usize.div_ceil(budget), "budget {budget}");
            let after: Vec<u64> = s.iter().map(|b| b.words().as_ptr() as u64).collect();
            assert!(before.iter().zip(&after).all(|(a, b)| a != b), "every block moved");
            assert_eq!(layout(&s).1, vec![10, 11, 12, 13]);
            aliases_agree(&s);
        }
    }
}
