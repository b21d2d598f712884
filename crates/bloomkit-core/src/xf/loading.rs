//! A chunked load under way (`XF.LOADCHUNK`): what the filter holds until
//! its last chunk is in. It answers as empty and refuses writes, and is a
//! value like any other meanwhile (saved, copied, rewritten, replicated:
//! see `formats`). Here only the state; `formats` fills it and finishes it.

use std::any::Any;

use super::block::{list_room, reserve_list, Block};
use super::errors::XfError;
use crate::common::memory::alloc_class;
use crate::common::memory::OutOfMemory;

/// Blocks received by a chunked load of encoding 1.
pub struct Blocks {
    /// The directory's depth and the blocks the header says.
    pub depth: u32,
    pub total: u64,
    /// Bytes of blocks the header says the chunks carry.
    pub data_bytes: u64,
    pub blocks: Vec<Block>,
    /// Directory slots the received blocks cover.
    pub slots: u64,
    /// Bytes of blocks received.
    pub received: u64,
    /// What the received blocks take (`Block::bytes` summed as they come:
    /// summing them again for every block placed made loads quadratic).
    pub block_bytes: u64,
}

impl Blocks {
    pub fn complete(&self) -> bool {
        self.slots == 1u64 << self.depth
    }

    pub fn received_bytes(&self) -> u64 {
        debug_assert_eq!(self.block_bytes, self.blocks.iter().map(Block::bytes).sum::<u64>());
        self.block_bytes
    }
}

/// An encoding-0 value (bloomkit 0.1's) being filled by chunks: what the
/// load needs of it (`legacy` implements it; held behind a box so that
/// the filter's state does not depend on the old format's code).
pub trait LegacyLoad: Send + Sync {
    /// Slot bytes it carries in all.
    fn data_len(&self) -> u64;
    /// Takes `data` at `offset`, checking the slots now whole.
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), XfError>;
    /// `len` slot bytes from `offset` (what it has received, for saves).
    fn bytes(&self, offset: u64, len: u64) -> Vec<u8>;
    /// A copy with the same slots received.
    fn copy(&self, loaded: u64) -> Result<Box<dyn LegacyLoad>, XfError>;
    /// The value itself, to convert once every slot is in (`legacy`).
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// A chunked load under way (the filter answers as empty and refuses writes).
pub enum Loading {
    V1(Blocks),
    /// An encoding-0 dump: its header and the slot bytes so far.
    V0 {
        header: Box<[u8; 80]>,
        v0: Box<dyn LegacyLoad>,
        loaded: u64,
    },
}

impl Loading {
    pub fn bytes(&self) -> u64 {
        match self {
            Loading::V1(b) => {
                b.received_bytes()
                    + alloc_class(list_room(b.blocks.len()) as u64 * std::mem::size_of::<Block>() as u64)
            }
            Loading::V0 { v0, .. } => v0.data_len(),
        }
    }

    /// Blocks (bytes for encoding 0) received, of how many.
    pub fn progress(&self) -> (u64, u64) {
        match self {
            Loading::V1(b) => (b.blocks.len() as u64, b.total),
            Loading::V0 { v0, loaded, .. } => (*loaded, v0.data_len()),
        }
    }

    pub fn try_clone(&self) -> Result<Loading, OutOfMemory> {
        match self {
            Loading::V1(b) => {
                let mut blocks = Vec::new();
                reserve_list(&mut blocks, b.blocks.len())?;
                for x in &b.blocks {
                    blocks.push(x.try_clone()?);
                }
                Ok(Loading::V1(Blocks { blocks, ..*b }))
            }
            Loading::V0 { header, v0, loaded } => Ok(Loading::V0 {
                header: header.clone(),
                v0: v0.copy(*loaded).map_err(|_| OutOfMemory)?,
                loaded: *loaded,
            }),
        }
    }
}
