//! The server's key ring: the secrets that filters made without `SEED`
//! hash their items with, so that nobody who reads the code, or any key,
//! can choose items that collide (a crawler deduplicating URLs strangers
//! write is such an input).
//!
//! A filter made without `SEED` hashes with the deployment key of the
//! ring's current secret (core's [`deployment_key`]); every format carries
//! only that key's id ([`key_id`], a PRF output that says nothing about
//! it), so a reader of `DUMP` or `XF.SCANDUMP` learns nothing, and no
//! payload, `XF.LOADCHUNK` or `XF.RESERVE ... SEED` can set what the server
//! hashes with: nothing is ever taken from a key's data. A `SEED` filter
//! carries its seed in clear and is its owner's.
//!
//! The ring travels only where the server's own data does: an RDB aux
//! field written before the keyspace (restarts, a replica's full sync, the
//! AOF's RDB preamble), and `XF.KEYRING key ring`, a command only the
//! replication stream and the AOF may send. The primary sends it ahead of
//! every deployment filter it makes (`XF.RESERVE key ... KEYID id`), so
//! that no stream or AOF, however it was cut, rewritten or proxied, holds a
//! filter before the secret it needs (a few dozen bytes per new filter); an
//! AOF rewrite writes it before the first deployment filter it rewrites.
//! Filters whose id the ring
//! does not hold when the server loads its own data load *sealed*: they
//! save, copy and replicate as they came and hash nothing until the ring
//! learns their secret ([`unseal`]); a client's `RESTORE` or `XF.LOADCHUNK`
//! of one is refused.
//!
//! The ring holds at most [`MAX_ENTRIES`] secrets; the current one is drawn
//! from the operating system when the first filter is made, unless the
//! server's data brought one. `BLOOMKIT_HASH_SEED` in the server's
//! environment pins the current secret instead (core's
//! [`Seed::from_environment`]), so that a test run replays exactly; never
//! for production.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

use bloomkit_core::xf::{deployment_key, key_id, Hashing, Seed, XfFilter};

use crate::ffi::{Arg, Ctx};

/// Secrets a ring keeps: the current one and those older keys still use.
pub const MAX_ENTRIES: usize = 16;

/// The ring's encoding, in the aux field and `XF.KEYRING`: this magic, the
/// number of secrets, the current one's index (255: none), then each secret
/// as 16 bytes.
const MAGIC: &[u8; 8] = b"BKRING01";

#[derive(Clone, Copy)]
struct Entry {
    secret: Seed,
    key: Seed,
    id: u64,
}

impl Entry {
    fn of(secret: Seed) -> Entry {
        let key = deployment_key(secret);
        Entry { secret, key, id: key_id(key) }
    }
}

struct Ring {
    entries: Vec<Entry>,
    current: Option<usize>,
    /// The current secret comes from `XF_SECRET_FILE` or
    /// `BLOOMKIT_HASH_SEED`: nothing loaded replaces it.
    pinned: bool,
}

static RING: Mutex<Ring> = Mutex::new(Ring { entries: Vec::new(), current: None, pinned: false });

/// Set in an AOF rewrite's child once it has written the ring.
static REWRITTEN: AtomicBool = AtomicBool::new(false);

fn ring() -> MutexGuard<'static, Ring> {
    RING.lock().unwrap_or_else(|e| e.into_inner())
}

impl Ring {
    /// Adds `secret` (if new) and returns its index; a full ring forgets
    /// its oldest secret that is not current, and logs it (filters of that
    /// secret load sealed after the next restart).
    fn add(&mut self, secret: Seed) -> usize {
        let e = Entry::of(secret);
        if let Some(i) = self.entries.iter().position(|x| x.id == e.id) {
            return i;
        }
        if self.entries.len() == MAX_ENTRIES {
            let oldest = (0..self.entries.len()).find(|&i| Some(i) != self.current).unwrap_or(0);
            let gone = self.entries.remove(oldest).id;
            self.current = self.current.map(|c| if c > oldest { c - 1 } else { c });
            let warning = format!(
                "bloomkit: the XF key ring holds {MAX_ENTRIES} secrets and forgot the oldest (id {gone:016x}): \
                 filters made under it will load sealed; list it in XF_SECRET_FILE if any remain"
            );
            warn(&warning);
        }
        self.entries.push(e);
        self.entries.len() - 1
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(10 + 16 * self.entries.len());
        out.extend_from_slice(MAGIC);
        out.push(self.entries.len() as u8);
        out.push(self.current.map_or(255, |c| c as u8));
        for e in &self.entries {
            out.extend_from_slice(&e.secret.0[0].to_le_bytes());
            out.extend_from_slice(&e.secret.0[1].to_le_bytes());
        }
        out
    }

    /// Takes in a ring the server's own data carried: its secrets join,
    /// and its current one becomes current unless the environment pins one.
    fn merge(&mut self, blob: &[u8]) -> Result<(), &'static str> {
        let (mut secrets, current) = decode(blob)?;
        // The loaded current secret joins last, so that a full ring never
        // forgets it to make room for the others.
        let current = current.map(|c| secrets.remove(c));
        for s in secrets {
            self.add(s);
        }
        if let Some(s) = current {
            let at = self.add(s);
            if !self.pinned {
                self.current = Some(at);
            }
        }
        Ok(())
    }

    /// Makes `secret` the current one, which nothing loaded replaces.
    fn pin(&mut self, secret: Seed) {
        let i = self.add(secret);
        self.current = Some(i);
        self.pinned = true;
    }

    /// The ring as the aux field and `XF.KEYRING` carry it; none while empty.
    fn encoded(&self) -> Option<Vec<u8>> {
        (!self.entries.is_empty()).then(|| self.encode())
    }

    /// The current entry, drawn (or pinned) if there is none.
    fn current(&mut self) -> Entry {
        if let Some(c) = self.current {
            return self.entries[c];
        }
        let i = self.add(random());
        self.current = Some(i);
        self.entries[i]
    }
}

fn decode(blob: &[u8]) -> Result<(Vec<Seed>, Option<usize>), &'static str> {
    let bad = "not a key ring this module writes";
    let rest = blob.strip_prefix(MAGIC.as_slice()).ok_or(bad)?;
    let (&[n, current], secrets) = rest.split_first_chunk::<2>().ok_or(bad)?;
    let n = usize::from(n);
    if n > MAX_ENTRIES || secrets.len() != 16 * n || (current != 255 && usize::from(current) >= n) {
        return Err(bad);
    }
    let secrets = secrets
        .chunks_exact(16)
        .map(|c| {
            let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
            Seed([word(&c[..8]), word(&c[8..])])
        })
        .collect();
    Ok((secrets, (current != 255).then_some(usize::from(current))))
}

/// Pins the current secret to `BLOOMKIT_HASH_SEED` if it is set and no
/// secret file was given (at load).
pub fn init() {
    let mut r = ring();
    if r.pinned {
        return;
    }
    if let Some(secret) = Seed::from_environment() {
        r.pin(secret);
    }
}

/// The load argument naming the secret file, normalised as the settings'
/// names are (`XF_SECRET_FILE`, `xf-secret-file`, `bf.xf-secret-file`).
pub const LOAD_ARG: &str = "xf-secret-file";

/// Reads `XF_SECRET_FILE path` among the module's load arguments, if given.
pub fn apply_load_args(args: &[Arg]) -> Result<(), String> {
    for pair in args.chunks(2) {
        if crate::config::normalised(pair[0].bytes()) == LOAD_ARG {
            let path = pair.get(1).ok_or("module argument XF_SECRET_FILE needs a value")?;
            use_file(&String::from_utf8_lossy(path.bytes()))?;
        }
    }
    Ok(())
}

/// The load argument `XF_SECRET_FILE path`: the deployment's secrets, kept
/// by the operator (servers that share the file hash alike, so their
/// filters copy and merge between them, a cluster's shards among them).
/// Lines `current <32 hex digits>` (one) and `previous <32 hex digits>`
/// (secrets older filters still use, at most 15); `#` starts a comment. The
/// current secret is pinned: nothing loaded replaces it. A file others can
/// read is logged.
pub fn use_file(path: &str) -> Result<(), String> {
    let fail = |why: String| format!("XF_SECRET_FILE {path}: {why}");
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let (current, previous) = parse_file(&text).map_err(|why| fail(why.into()))?;
    use std::os::unix::fs::PermissionsExt;
    if std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
        let warning =
            format!("bloomkit: XF_SECRET_FILE {path} can be read by others than its owner: chmod 600 it");
        warn(&warning);
    }
    let mut r = ring();
    for s in previous {
        r.add(s);
    }
    r.pin(current);
    Ok(())
}

fn parse_file(text: &str) -> Result<(Seed, Vec<Seed>), &'static str> {
    let (mut current, mut previous) = (None, Vec::new());
    for line in text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
        let mut words = line.split_whitespace();
        let (kind, hex) = (words.next(), words.next());
        let secret = hex
            .and_then(|h| Seed::from_hex(h.as_bytes()))
            .filter(|_| words.next().is_none())
            .ok_or("each line is `current` or `previous` and a secret of 32 hexadecimal digits")?;
        match kind {
            Some("current") if current.is_none() => current = Some(secret),
            Some("current") => return Err("more than one `current` line"),
            Some("previous") => previous.push(secret),
            _ => return Err("each line is `current` or `previous` and a secret of 32 hexadecimal digits"),
        }
    }
    if previous.len() >= MAX_ENTRIES {
        return Err("at most 15 `previous` lines");
    }
    Ok((current.ok_or("no `current` line")?, previous))
}

/// How a filter made now without `SEED` hashes: the current deployment
/// key (drawn if the ring has none).
pub fn new_hashing() -> Hashing {
    Hashing::Deployment(ring().current().key)
}

/// Sends the ring to replicas and the AOF (`XF.KEYRING key ring`), ahead
/// of the command that makes the deployment filter `key`.
pub fn send_ahead_of(ctx: Ctx, key: &Arg) {
    let blob = ring().encode();
    ctx.replicate_words(c"XF.KEYRING", key, &[&blob], &[]);
}

/// The deployment key of `id`, if the ring holds it.
pub fn key_for(id: u64) -> Option<Seed> {
    ring().entries.iter().find(|e| e.id == id).map(|e| e.key)
}

/// Gives a sealed filter its key if the ring has learnt it since; false
/// when it stays sealed.
pub fn unseal(f: &mut XfFilter) -> bool {
    !f.is_sealed() || f.unseal(key_for)
}

/// Whether a filter that came in a payload (`RESTORE`, `XF.LOADCHUNK`'s
/// header) may be stored: one the ring cannot hash for is refused from a
/// client, and kept sealed from the server's own data (`own_data`: its
/// RDB, the primary, the AOF), so that the server always starts and
/// follows its primary.
pub fn admit(f: &mut XfFilter, own_data: bool) -> Result<(), bloomkit_core::xf::XfError> {
    if unseal(f) || own_data {
        return Ok(());
    }
    Err(bloomkit_core::xf::XfError::ForeignSecret { id: f.hashing().key_id().unwrap_or(0) })
}

/// The current secret's id (`INFO bf`), and how many secrets the ring holds.
pub fn summary() -> (Option<u64>, usize) {
    let r = ring();
    (r.current.map(|c| r.entries[c].id), r.entries.len())
}

/// `XF.KEYRING`'s ring, from the replication stream or the AOF.
pub fn replay(blob: &[u8]) -> Result<(), &'static str> {
    ring().merge(blob)
}

/// The ring to write before the first deployment filter an AOF rewrite
/// writes (once per rewrite: a rewrite runs in a child of its own).
pub fn for_rewrite() -> Option<Vec<u8>> {
    if REWRITTEN.swap(true, Relaxed) {
        return None;
    }
    ring().encoded()
}

/// The server forked (in the parent): the child (an AOF rewrite) starts
/// with the ring not yet written.
pub fn forked() {
    REWRITTEN.store(false, Relaxed);
}

/// The aux field's content: the ring, or nothing when it is empty (the
/// server then writes no field, so an RDB of a server that never made a
/// filter loads without this module).
pub fn for_rdb() -> Option<Vec<u8>> {
    ring().encoded()
}

/// The aux field, read before the keyspace.
pub fn from_rdb(blob: &[u8]) -> Result<(), &'static str> {
    if blob.is_empty() {
        return Ok(());
    }
    ring().merge(blob)
}

/// A line in the server's log (none in unit tests, which run without a server).
fn warn(line: &str) {
    if cfg!(not(test)) {
        crate::ffi::log(std::ptr::null_mut(), c"warning", line);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> Ring {
        Ring { entries: Vec::new(), current: None, pinned: false }
    }

    #[test]
    fn a_ring_round_trips_and_keeps_its_current_secret() {
        let mut r = empty();
        r.add(Seed([1, 2]));
        r.current = Some(r.add(Seed([3, 4])));
        let mut other = empty();
        other.merge(&r.encode()).unwrap();
        assert_eq!(other.current().id, Entry::of(Seed([3, 4])).id);
        assert_eq!(other.entries.len(), 2);
        assert!(other.merge(b"BKRING01\x01\x00short").is_err());
        assert!(other.merge(b"BKRING01\x00\x01").is_err());
    }

    /// A ring that fills up keeps the current secret it loaded, whatever
    /// it must forget (the oldest of the others).
    #[test]
    fn a_full_ring_keeps_the_current_secret_it_loads() {
        let mut r = empty();
        for i in 0..MAX_ENTRIES as u64 {
            r.current = Some(r.add(Seed([i, 1])));
        }
        let mut loaded = empty();
        for i in 0..MAX_ENTRIES as u64 {
            loaded.add(Seed([i, 2]));
        }
        loaded.current = Some(0);
        r.merge(&loaded.encode()).unwrap();
        assert_eq!(r.entries.len(), MAX_ENTRIES);
        assert_eq!(r.current().id, Entry::of(Seed([0, 2])).id);
    }

    #[test]
    fn secret_files_say_exactly_what_they_hold() {
        let a = "00112233445566778899aabbccddeeff";
        let b = "ffeeddccbbaa99887766554433221100";
        let (current, previous) =
            parse_file(&format!("# rotated\ncurrent {a}\n\nprevious {b}  # old\n")).unwrap();
        assert_eq!(current, Seed::from_hex(a.as_bytes()).unwrap());
        assert_eq!(previous, vec![Seed::from_hex(b.as_bytes()).unwrap()]);
        for bad in [
            "",
            &format!("previous {a}"),
            &format!("current {a}\ncurrent {b}"),
            "current 12",
            &format!("next {a}"),
        ] {
            assert!(parse_file(bad).is_err(), "{bad:?}");
        }
        assert!(parse_file(&format!("current {a} extra")).is_err());
    }

    #[test]
    fn a_pinned_secret_stays_current_and_a_full_ring_keeps_it() {
        let mut r = empty();
        r.current = Some(r.add(Seed([9, 9])));
        r.pinned = true;
        let mut loaded = empty();
        loaded.current = Some(loaded.add(Seed([5, 5])));
        r.merge(&loaded.encode()).unwrap();
        assert_eq!(r.current().id, Entry::of(Seed([9, 9])).id);
        for i in 0..40 {
            r.add(Seed([i, 0]));
        }
        assert_eq!(r.entries.len(), MAX_ENTRIES);
        assert_eq!(r.current().id, Entry::of(Seed([9, 9])).id);
    }
}
