//! The server's secret: the seed new filters hash their items with, so
//! that nobody who reads the code can choose items that collide (a crawler
//! deduplicating URLs strangers write is such an input).
//!
//! Filters made on one server share it, so that they merge: it is drawn
//! from the operating system at the first filter made, unless a filter was
//! loaded (RDB, RESTORE, a chunked load, an `XF.RESERVE ... SEED` from the
//! primary or the AOF) before: then the first such filter's seed is the
//! secret, so filters made after a restart keep merging with those made
//! before, and a promoted replica makes filters its old primary's merge
//! with. A seed a user gives `XF.RESERVE` is that filter's alone (it may be
//! known to others). A filter keeps its own seed wherever it goes (every
//! format carries it).
//!
//! `BLOOMKIT_HASH_SEED` in the server's environment fixes the secret
//! instead (core's [`Seed::from_environment`]): then nothing is drawn and
//! nothing adopted, so a test run replays exactly; never for production.

use std::sync::Mutex;

use bloomkit_core::xf::Seed;

static SECRET: Mutex<Option<Seed>> = Mutex::new(None);

fn secret() -> std::sync::MutexGuard<'static, Option<Seed>> {
    SECRET.lock().unwrap_or_else(|e| e.into_inner())
}

/// The seed a new filter takes.
pub fn seed() -> Seed {
    *secret().get_or_insert_with(|| Seed::from_environment().unwrap_or_else(random))
}

/// A filter came in with `seed`: it becomes the secret if there is none yet.
pub fn adopt(seed: Option<Seed>) {
    if let Some(seed) = seed {
        secret().get_or_insert_with(|| Seed::from_environment().unwrap_or(seed));
    }
}

/// 128 bits from the operating system (`getrandom`), or, should it fail,
/// from the standard library's randomly keyed hasher.
fn random() -> Seed {
    let mut bytes = [0u8; 16];
    // SAFETY: `bytes` is a valid buffer of its length.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got == bytes.len() as isize {
        let a = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
        let b = u64::from_le_bytes(bytes[8..].try_into().expect("8 bytes"));
        return Seed([a, b]);
    }
    Seed::random()
}
