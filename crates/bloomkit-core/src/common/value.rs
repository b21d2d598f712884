//! What a family's type is to a server that stores it: the one contract
//! every family meets the same way, so that the module's data type (RDB
//! load and save, `COPY`, `MEMORY USAGE`, active defrag) is written once
//! over it. Each family implements [`FamilyValue`] beside its formats; the
//! family list ([`crate::family::KINDS`]) names each type by its
//! [`FamilyValue::TYPE_NAME`].

use std::fmt::Display;

use crate::common::fields::{FieldReader, FieldWriter};
use crate::common::memory::{HeapBlocks, Limits, Relocate};

/// How a value is read: what it was saved at, what it may take, and whose
/// data it is.
#[derive(Clone, Copy, Debug)]
pub struct Loading {
    /// The encoding version it was saved at (older ones load too).
    pub encver: i32,
    /// What the loaded value may take (`bf.max-filter-bytes` for a
    /// client's `RESTORE`).
    pub limits: Limits,
    /// The server's own data (its RDB at startup, a replica's full sync),
    /// not a client's `RESTORE`: what it held is kept even where a client's
    /// value would be refused (a count check), so that no file stops a
    /// server from starting.
    pub own_data: bool,
}

/// A family's stored value. Loads trust nothing (a value that does not
/// describe one is an error, never a panic or an unbounded allocation);
/// whatever `save` writes, `load` reads back to an equal value.
pub trait FamilyValue: Sized + HeapBlocks {
    /// The data type's name as `TYPE` answers it: nine characters, never
    /// changed once released (RDB files name it).
    const TYPE_NAME: &'static str;
    /// The encoding version new values are saved at.
    const ENCODING_VERSION: i32;
    /// Why a load or a copy failed, for people.
    type Error: Display;

    /// Reads a value, within `how.limits`.
    fn load(r: &mut dyn FieldReader, how: Loading) -> Result<Self, Self::Error>;
    /// Writes the value at [`FamilyValue::ENCODING_VERSION`]. `&mut`: a
    /// value may settle what it buffers first (a t-digest compresses).
    fn save(&mut self, w: &mut dyn FieldWriter);
    /// The value's size as its family reckons it (RedisBloom's figure for
    /// its types): what the size limit and the lazy-free effort use.
    fn size_bytes(&self) -> u64;
    /// A copy, failing softly when memory is short.
    fn try_clone(&self) -> Result<Self, Self::Error>;
    /// Offers the value's buffers, from buffer `from` on, to a server's
    /// active defragmentation; `Some(next)` when `to` ran out of time first.
    fn relocate(&mut self, from: usize, to: &mut impl Relocate) -> Option<usize>;
}
