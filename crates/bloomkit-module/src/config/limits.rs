//! What a command may allocate: `bf.max-filter-bytes`, the `maxmemory`
//! guard (the server's `maxmemory` kept current as CONFIG SET changes it),
//! the limit for loads, and whether large arrays ask for huge pages.

use super::*;

/// 8 GiB: a filter whose array is 2^32 bytes or buckets (4 GiB, the
/// largest RedisBloom 8's own tests load: a cuckoo filter of 2^32 buckets
/// from a `CF.LOADCHUNK` header) fits with its bookkeeping and room to
/// grow once; 4 GiB refused it by the 56 bytes of its header.
pub(super) static MAX_FILTER_BYTES: AtomicI64 = AtomicI64::new(8 << 30);

/// Whether large arrays ask for transparent huge pages (see `alloc.rs`).
/// Off by default: the first writes to a new filter then commit it 2 MiB at
/// a time, and one batch touching every 2 MiB of a new sub-filter commits
/// all of it in one command (0.7 s without answering a PING for a 290 MB
/// sub-filter here, against 23 ms on 4 KiB pages).
pub(super) static HUGE_PAGES: AtomicBool = AtomicBool::new(false);

/// Whether creations and scale-outs that would pass `maxmemory` are refused.
pub(super) static MAXMEMORY_GUARD: AtomicBool = AtomicBool::new(true);

/// The server's `maxmemory` where its policy is `noeviction` (else 0), read
/// at load and again whenever a CONFIG SET changes either, so that a write
/// reads one ratio instead of the INFO section. Under an eviction policy the
/// server makes room itself, by evicting keys before each command, as it
/// does for RedisBloom's filters; refusing there would refuse for good.
pub(super) static MAXMEMORY: AtomicU64 = AtomicU64::new(0);

#[cfg_attr(test, allow(dead_code))] // read by the allocator, which tests do not install
pub fn huge_pages() -> bool {
    HUGE_PAGES.load(Relaxed)
}

/// What this command may allocate: a filter up to `bf.max-filter-bytes`,
/// and (with `bf.maxmemory-guard yes` under a `maxmemory`) no more than the
/// server has left. Nothing is refused when replaying what a primary or the
/// AOF already accepted, so that a replica never diverges.
pub fn limits(ctx: Ctx) -> Limits {
    if ctx.is_replaying() {
        return Limits::NONE;
    }
    let guarded = MAXMEMORY.load(Relaxed) > 0
        && MAXMEMORY_GUARD.load(Relaxed)
        && crate::ffi::used_memory_ratio().is_some();
    let headroom = guarded.then_some(memory_headroom as fn() -> u64);
    Limits { headroom, ..Limits::at_most(MAX_FILTER_BYTES.load(Relaxed) as u64) }
}

/// `maxmemory - used_memory`, asked by core only when a creation or
/// scale-out is about to allocate (see [`limits`] for when it is asked at all).
pub(super) fn memory_headroom() -> u64 {
    let maxmemory = MAXMEMORY.load(Relaxed);
    let ratio = crate::ffi::used_memory_ratio().unwrap_or(0.0);
    let used = (ratio * maxmemory as f64) as u64;
    maxmemory.saturating_sub(used)
}

/// Reads the server's `maxmemory` into [`MAXMEMORY`] (0 unless its policy is
/// `noeviction`).
pub(super) fn refresh_maxmemory(ctx: *mut raw::RedisModuleCtx) {
    if let Some((maxmemory, noeviction)) = crate::ffi::maxmemory(ctx) {
        MAXMEMORY.store(if noeviction { maxmemory } else { 0 }, Relaxed);
    }
}

/// A CONFIG SET that changed `maxmemory` or its policy: read them again.
pub(super) extern "C" fn on_config_change(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    data: *mut c_void,
) {
    crate::ffi::guard((), || {
        // SAFETY: for the config event the server passes a
        // RedisModuleConfigChange whose names live during the call.
        let changed = unsafe {
            let change = &*(data as *const raw::RedisModuleConfigChangeV1);
            (0..change.num_changes as usize).any(|i| {
                let name = *change.config_names.add(i);
                !name.is_null() && {
                    let name = CStr::from_ptr(name).to_bytes();
                    name.eq_ignore_ascii_case(b"maxmemory") || name.eq_ignore_ascii_case(b"maxmemory-policy")
                }
            })
        };
        if changed {
            refresh_maxmemory(ctx);
        }
    })
}

/// The limit for RDB loads: RESTORE obeys it; loading at startup does not,
/// since refusing a value there would stop the server from starting.
pub fn limits_for_load(loading: bool) -> Limits {
    if loading {
        Limits::NONE
    } else {
        Limits::at_most(MAX_FILTER_BYTES.load(Relaxed) as u64)
    }
}
