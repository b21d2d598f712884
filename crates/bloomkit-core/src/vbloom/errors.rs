//! The errors of valkey-bloom's filters (`BF.*` on `bloomfltr` keys), in
//! valkey-bloom's texts to the letter, plus bloomkit's own where valkey-bloom
//! has no such command.

use std::borrow::Cow;

use crate::common::fields::FieldError;
use crate::common::memory::OutOfMemory;
use crate::common::reply::{display_as_reply, Reply, ReplyError};

/// Every error a `bloomfltr` key answers with, valkey-bloom's texts to the
/// letter, plus bloomkit's own where valkey-bloom has no such command.
#[derive(Clone, Debug, PartialEq)]
pub enum ValkeyError {
    /// The server's own wrong-arity error.
    WrongArity,
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
    /// `BF.INFO` of a missing key, `BF.INSERT … NOCREATE` on one.
    NotFound,
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
    /// A creation or scale-out would pass what the server has left under `maxmemory`.
    OverMaxmemory,
}

impl ReplyError for ValkeyError {
    fn reply(&self) -> Reply {
        use ValkeyError::*;
        Reply::Error(Cow::Borrowed(match self {
            WrongArity => return Reply::WrongArity,
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
            NotFound => "ERR not found",
            InvalidInfoField => "ERR invalid information value",
            NonScalingFull => "ERR non scaling filter is full",
            MemoryLimit => "ERR operation exceeds bloom object memory limit",
            MaxFilters => "ERR bloom object reached max number of filters",
            FpReachesZero => "ERR false positive degrades to 0 on scale out",
            DecodeFailed => "ERR bloom object decoding failed",
            UnsupportedVersion => "ERR bloom object decoding failed. Unsupported version",
            KeyExists => "BUSYKEY Target key name already exists.",
            BadData(why) => {
                return Reply::Error(Cow::Owned(format!("ERR bloom object decoding failed: {why}")))
            }
            NoChunks => {
                "ERR this key holds a valkey-bloom filter (type bloomfltr), which has no \
                 BF.SCANDUMP/BF.LOADCHUNK; copy it with DUMP and RESTORE"
            }
            OutOfMemory => "ERR out of memory while allocating the filter; nothing was changed",
            OverMaxmemory => "OOM command not allowed when used memory > 'maxmemory'.",
        }))
    }
}

display_as_reply!(ValkeyError);

impl From<OutOfMemory> for ValkeyError {
    fn from(_: OutOfMemory) -> ValkeyError {
        ValkeyError::OutOfMemory
    }
}

/// An RDB value that ends early or holds a field of the wrong type.
impl From<FieldError> for ValkeyError {
    fn from(_: FieldError) -> ValkeyError {
        ValkeyError::BadData("a field is missing or of the wrong type")
    }
}
