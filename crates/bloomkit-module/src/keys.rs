//! Key lookup and storing, shared by every data type: the checks (empty,
//! ours, another type) and the hand-over live here once; what a value is
//! and how it enters and leaves the keyspace is [`crate::value`].

use std::ptr::NonNull;

use bloomkit_core::common::memory::OutOfMemory;
use bloomkit_core::common::reply::WrongType;
use bloomkit_core::Reply;

use crate::ffi::{Key, Slot};
use crate::value::Value;

/// The value in a key: `Ok(None)` when the key is empty, `WRONGTYPE` when
/// it holds anything else.
pub fn lookup<T: Value>(key: &Key) -> Result<Option<NonNull<T>>, Reply> {
    match key.slot::<T>(T::data_type()) {
        Slot::Ours(v) => Ok(Some(v)),
        Slot::Empty => Ok(None),
        Slot::OtherType => Err(WrongType.into()),
    }
}

/// A value of one of two types: `Ok` the first, `Err` the second.
pub type Either<A, B> = Result<NonNull<A>, NonNull<B>>;

/// The value in a key that may hold either of two types (a `BF.*` key:
/// RedisBloom's or valkey-bloom's): `Ok(None)` when the key is empty,
/// `WRONGTYPE` when it holds anything else.
pub fn lookup_either<A: Value, B: Value>(key: &Key) -> Result<Option<Either<A, B>>, Reply> {
    match key.slot::<A>(A::data_type()) {
        Slot::Ours(a) => Ok(Some(Ok(a))),
        Slot::Empty => Ok(None),
        Slot::OtherType => match key.slot::<B>(B::data_type()) {
            Slot::Ours(b) => Ok(Some(Err(b))),
            _ => Err(WrongType.into()),
        },
    }
}

/// Stores a new value in an empty key opened for writing.
pub fn store<T: Value>(key: &Key, value: T) -> Result<NonNull<T>, Reply> {
    let value = value.into_value();
    // A value of T's type: on success the keyspace owns it and frees it
    // through the type's free callback.
    if !key.set_module_value(T::data_type(), value) {
        // SAFETY: refused, so still ours.
        unsafe { T::free_value(value) };
        return Err(OutOfMemory.into());
    }
    Ok(NonNull::new(value.cast()).expect("into_value never returns null"))
}
