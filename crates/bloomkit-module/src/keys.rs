//! Key lookup and storing, shared by every data type: the checks (empty,
//! ours, another type) and the hand-over live here once; what a value is
//! and how it enters and leaves the keyspace is [`crate::value`].
//!
//! Handlers get references bound to the key they opened, never pointers: a
//! read borrows the key (`&Key`), a write borrows it exclusively
//! (`&mut Key`), so a value cannot outlive its key's handle nor be written
//! while read through the same handle. One rule is left to the handlers,
//! which the compiler cannot see: a command that opens one key twice (a
//! merge whose destination is among its sources) writes through one
//! handle only once it holds no reference from the other.

use std::ptr::NonNull;

use bloomkit_core::common::memory::OutOfMemory;
use bloomkit_core::common::reply::WrongType;
use bloomkit_core::Reply;

use crate::ffi::{Key, Slot};
use crate::value::Value;

/// What `key` holds under `T`'s type, as a pointer.
fn slot<T: Value>(key: &Key) -> Slot<T> {
    key.slot::<T>(T::data_type())
}

// SAFETY (for the dereferences below): a value the keyspace holds under
// `T`'s registered type was made by `T::into_value`, so it is a `T`; it
// stays while the key is open, which it is while its handle is borrowed
// (each reference borrows the handle); commands run one at a time on the main thread, and a shared
// borrow of the handle gives shared references, an exclusive one the one
// mutable reference.

/// The value in a key: `Ok(None)` when the key is empty, `WRONGTYPE` when
/// it holds anything else.
pub fn lookup<T: Value>(key: &Key) -> Result<Option<&T>, Reply> {
    match slot::<T>(key) {
        // SAFETY: see above.
        Slot::Ours(v) => Ok(Some(unsafe { v.as_ref() })),
        Slot::Empty => Ok(None),
        Slot::OtherType => Err(WrongType.into()),
    }
}

/// [`lookup`] for a write.
pub fn lookup_mut<T: Value>(key: &mut Key) -> Result<Option<&mut T>, Reply> {
    match slot::<T>(key) {
        // SAFETY: see above; the handle is borrowed exclusively.
        Slot::Ours(mut v) => Ok(Some(unsafe { v.as_mut() })),
        Slot::Empty => Ok(None),
        Slot::OtherType => Err(WrongType.into()),
    }
}

/// The value in a key if it holds one of `T` (`None` when it is empty or
/// holds another type: readers that answer a wrong type as missing).
pub fn ours<T: Value>(key: &Key) -> Option<&T> {
    lookup(key).ok().flatten()
}

/// [`ours`] for a write.
pub fn ours_mut<T: Value>(key: &mut Key) -> Option<&mut T> {
    lookup_mut(key).ok().flatten()
}

/// The value in a key that may hold either of two types (a `BF.*` key:
/// RedisBloom's or valkey-bloom's): `Ok` the first, `Err` the second;
/// `Ok(None)` when the key is empty, `WRONGTYPE` when it holds anything else.
pub fn lookup_either<A: Value, B: Value>(key: &Key) -> Result<Option<Result<&A, &B>>, Reply> {
    Ok(match either::<A, B>(key)? {
        // SAFETY: see above.
        Some(Ok(a)) => Some(Ok(unsafe { a.as_ref() })),
        // SAFETY: see above.
        Some(Err(b)) => Some(Err(unsafe { b.as_ref() })),
        None => None,
    })
}

/// [`lookup_either`] for a write.
pub fn lookup_either_mut<A: Value, B: Value>(key: &mut Key) -> Result<Option<Result<&mut A, &mut B>>, Reply> {
    Ok(match either::<A, B>(key)? {
        // SAFETY: see above; the handle is borrowed exclusively.
        Some(Ok(mut a)) => Some(Ok(unsafe { a.as_mut() })),
        // SAFETY: see above; the handle is borrowed exclusively.
        Some(Err(mut b)) => Some(Err(unsafe { b.as_mut() })),
        None => None,
    })
}

/// A value of one of two types, as pointers: `Ok` the first, `Err` the second.
type Either<A, B> = Result<NonNull<A>, NonNull<B>>;

fn either<A: Value, B: Value>(key: &Key) -> Result<Option<Either<A, B>>, Reply> {
    match slot::<A>(key) {
        Slot::Ours(a) => Ok(Some(Ok(a))),
        Slot::Empty => Ok(None),
        Slot::OtherType => match slot::<B>(key) {
            Slot::Ours(b) => Ok(Some(Err(b))),
            _ => Err(WrongType.into()),
        },
    }
}

/// Stores a new value in an empty key opened for writing; the value as
/// the key now holds it.
pub fn store<T: Value>(key: &mut Key, value: T) -> Result<&mut T, Reply> {
    let value = value.into_value();
    // A value of T's type: on success the keyspace owns it and frees it
    // through the type's free callback.
    if !key.set_module_value(T::data_type(), value) {
        // SAFETY: refused, so still ours.
        unsafe { T::free_value(value) };
        return Err(OutOfMemory.into());
    }
    // SAFETY: see above: stored under T's type just now.
    Ok(unsafe { &mut *value.cast::<T>() })
}
