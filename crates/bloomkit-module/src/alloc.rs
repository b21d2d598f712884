//! The global allocator: the server's, so that filters count in `used_memory`,
//! `maxmemory` and `MEMORY USAGE`, and the fallible variants where the server
//! has them, so that a huge filter that cannot be allocated is an error reply
//! rather than an aborted server. It also measures what a write changes in
//! a value's memory ([`track`]), at the allocator's real sizes.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

use redis_module::raw;

pub struct ServerAllocator;

/// The allocation must never be attempted before RedisModule_Init filled the
/// API table; printing and aborting beats corrupting the heap.
fn missing_api() -> ! {
    const MESSAGE: &[u8] = b"bloomkit: allocation before the module API was initialised\n";
    // SAFETY: writing a static buffer to stderr.
    unsafe { libc_write(2, MESSAGE.as_ptr(), MESSAGE.len()) };
    std::process::abort()
}

extern "C" {
    #[link_name = "write"]
    fn libc_write(fd: i32, buf: *const u8, count: usize) -> isize;
}

/// Blocks from this size on are zeroed lazily (see [`zero`]).
const LAZY_ZERO_FROM: usize = 1 << 20;

/// Zeroes a block just allocated. A large one's whole pages are handed back
/// to the kernel (`MADV_DONTNEED`): the servers' allocators (jemalloc, and
/// glibc's brk heap and mmap chunks) take their memory as private anonymous
/// mappings, whose pages then read as zero and take no RSS until written,
/// as with calloc's fresh pages. (On a shared or file-backed mapping
/// `MADV_DONTNEED` would not zero; no server allocator uses one.) As with
/// calloc, memory the kernel cannot supply later shows at first write, not
/// here: the error reply covers what the allocator itself refuses. Writing zeros by hand instead
/// made `BF.RESERVE` of a 1.2 GB filter stall the server for 0.65 s and
/// commit all of it at once on servers without `TryCalloc` (Redis 7.0).
/// Only the partial pages at the edges are written.
///
/// # Safety
/// `ptr..ptr + len` must be one block owned by the caller.
unsafe fn zero(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    if len >= LAZY_ZERO_FROM {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1);
        let (start, end) = whole_pages(ptr, len, page);
        // SAFETY: the pages lie inside the block the caller owns; on
        // private anonymous memory MADV_DONTNEED only replaces their
        // contents with zeros. The edges are inside the block too.
        unsafe {
            if end > start && libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) == 0
            {
                std::ptr::write_bytes(ptr, 0, start - ptr as usize);
                std::ptr::write_bytes(end as *mut u8, 0, ptr as usize + len - end);
                return;
            }
        }
    }
    // SAFETY: the caller owns the block.
    unsafe { std::ptr::write_bytes(ptr, 0, len) };
}

/// The addresses `start..end` of the whole `page`-sized pages inside the
/// block `ptr..ptr + len` (empty, `end <= start`, when there is none).
#[cfg(target_os = "linux")]
fn whole_pages(ptr: *mut u8, len: usize, page: usize) -> (usize, usize) {
    ((ptr as usize).next_multiple_of(page), (ptr as usize + len) / page * page)
}

/// Blocks from this size on are offered transparent huge pages (see [`advise_huge_pages`]).
const HUGE_PAGES_FROM: usize = 4 << 20;

/// Asks the kernel to back the 2 MiB-aligned inside of a large block with
/// transparent huge pages (`MADV_HUGEPAGE`). A filter larger than the cache
/// is probed at random places: with 4 KiB pages nearly every probe also
/// misses the TLB and walks the page tables (twice over in a virtual
/// machine), which costs as much as the cache miss itself. Advice only: the
/// kernel may refuse (THP `never`, or a server that disabled THP for its
/// process, as Redis does when THP is `always`), and then nothing changes.
/// RSS still grows only as the filter is written, but 2 MiB at a time
/// instead of 4 KiB, and every first write to a 2 MiB range zeroes all of
/// it: a batch that lands all over a new sub-filter commits the whole of it
/// in one command, which stalls the server (hence `bf.huge-pages` defaults
/// to no). After a fork (BGSAVE), kernels since 5.8 copy a written huge
/// page 4 KiB at a time.
///
/// # Safety
/// `ptr..ptr + len` must be one block owned by the caller.
unsafe fn advise_huge_pages(ptr: *mut u8, len: usize) {
    if crate::config::huge_pages() {
        EVER_ADVISED.store(true, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller owns the block.
        unsafe { advise_huge(ptr, len, true) };
    }
}

/// Set once any block was advised: until then frees leave the kernel's
/// defaults alone (with `bf.huge-pages no` the module never touches them).
static EVER_ADVISED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Takes the advice back (`MADV_NOHUGEPAGE`) before a large block returns
/// to the server's allocator, which may carve small objects out of the same
/// addresses later: faults there then get 4 KiB pages, so one touched byte
/// does not commit 2 MiB. (Huge pages already mapped stay until the
/// allocator purges the range.) Linux has no advice that restores "no
/// preference"; under THP `madvise` this is the same thing.
///
/// # Safety
/// `ptr..ptr + len` must be one block owned by the caller.
unsafe fn unadvise_huge_pages(ptr: *mut u8, len: usize) {
    if EVER_ADVISED.load(std::sync::atomic::Ordering::Relaxed) {
        // SAFETY: the caller owns the block.
        unsafe { advise_huge(ptr, len, false) };
    }
}

/// # Safety
/// `ptr..ptr + len` must be one block owned by the caller.
#[allow(unused_variables)]
unsafe fn advise_huge(ptr: *mut u8, len: usize, huge: bool) {
    #[cfg(target_os = "linux")]
    if len >= HUGE_PAGES_FROM {
        let (start, end) = whole_pages(ptr, len, 2 << 20);
        if end > start {
            let advice = if huge { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE };
            // SAFETY: advice on whole pages inside the caller's block; it
            // never changes their contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, advice) };
        }
    }
}

/// Whether active defrag may move a block of `len` bytes
/// (`RedisModule_DefragAlloc`: the server copies it to a new block and frees
/// the old one without calling back here). Only blocks below
/// [`LAZY_ZERO_FROM`] may: a larger one may carry huge-page advice, which
/// belongs to its addresses (the old block would keep it when the server
/// frees it, the copy would lack it), and copying it would commit every
/// page that lazy zeroing left untouched. Nothing is lost by keeping them:
/// jemalloc only ever moves blocks of its small size classes (up to 14 KiB).
pub fn defrag_may_move(len: usize) -> bool {
    len < LAZY_ZERO_FROM
}

/// What a block really takes: its usable size, as the server's allocator
/// reports it (a size class rounds every request up; `used_memory` grows
/// by this). `requested` where the server cannot say, or for a null block
/// (a size given without one).
pub fn usable_size(ptr: *const u8, requested: usize) -> usize {
    // SAFETY: the API table is filled once by RedisModule_Init, on the main
    // thread, before any allocation (see `missing_api`), and never changed.
    match unsafe { raw::RedisModule_MallocUsableSize } {
        // SAFETY: a live block from the server's allocator (every block
        // bloomkit allocates is one).
        Some(usable) if !ptr.is_null() => unsafe { usable(ptr.cast_mut().cast()) },
        _ => requested,
    }
}

/// Set while a count is open ([`track`]).
static TRACKING: AtomicBool = AtomicBool::new(false);
/// While a count is open: the real bytes the main thread allocated minus
/// those it freed. Only the main thread writes it.
static NET: AtomicI64 = AtomicI64::new(0);

/// A block allocated (`sign` 1) or about to be freed (-1), while a count is
/// open: the main thread's only (a background free is none of a write's).
#[inline]
fn note(ptr: *const u8, len: usize, sign: i64) {
    if TRACKING.load(Relaxed) && crate::stats::flush::on_main_thread() {
        let n = usable_size(ptr, len) as i64;
        NET.store(NET.load(Relaxed) + sign * n, Relaxed);
    }
}

/// Runs `f` (a write to one value) and returns what it did to the memory
/// the main thread holds, in real bytes: what the value gained or lost
/// (temporaries cancel out). How `INFO bf` keeps its bytes exact as values
/// grow, shrink or drop a cached copy, without walking a value before and
/// after every write: the count costs a write nothing unless it allocates.
/// `f` must touch no other value's blocks. On the main thread only.
pub fn track<R>(f: impl FnOnce() -> R) -> (R, i64) {
    /// Closes the count even if `f` panics.
    struct Open(bool);
    impl Drop for Open {
        fn drop(&mut self) {
            TRACKING.store(self.0, Relaxed);
        }
    }
    // A load and a store, not a swap: only the main thread opens counts,
    // and a locked instruction per write would be the count's whole cost.
    let open = Open(TRACKING.load(Relaxed));
    TRACKING.store(true, Relaxed);
    let start = NET.load(Relaxed);
    let result = f();
    let delta = NET.load(Relaxed) - start;
    drop(open);
    (result, delta)
}

/// Sizes padded to the alignment, as the redis-module crate does. The
/// server's allocators return 16-byte aligned blocks, which covers every type
/// bloomkit allocates.
fn padded(layout: Layout) -> usize {
    (layout.size() + layout.align() - 1) & !(layout.align() - 1)
}

// SAFETY: every block comes from the server's allocator (`RedisModule_*Alloc`),
// sized to the padded layout and aligned to 16 bytes, which covers every
// layout bloomkit asks for (see `padded`); each is freed or resized only
// through the same allocator, as `GlobalAlloc` requires.
unsafe impl GlobalAlloc for ServerAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let size = padded(layout);
        let ptr: *mut u8 = match (raw::RedisModule_TryAlloc, raw::RedisModule_Alloc) {
            (Some(try_alloc), _) => try_alloc(size).cast(),
            (None, Some(alloc)) => alloc(size).cast(),
            _ => missing_api(),
        };
        if !ptr.is_null() {
            note(ptr, size, 1);
            // SAFETY: the block just allocated, of `size` bytes.
            advise_huge_pages(ptr, size);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let size = padded(layout);
        // Redis 7.0 has TryAlloc but not TryCalloc: zero it ourselves rather
        // than fall back to an allocator that aborts the server when it fails.
        let ptr: *mut u8 =
            match (raw::RedisModule_TryCalloc, raw::RedisModule_TryAlloc, raw::RedisModule_Calloc) {
                (Some(try_calloc), _, _) => try_calloc(1, size).cast(),
                (None, Some(try_alloc), _) => {
                    let ptr = try_alloc(size).cast::<u8>();
                    if !ptr.is_null() {
                        zero(ptr, size);
                    }
                    ptr
                }
                (None, None, Some(calloc)) => calloc(1, size).cast(),
                _ => missing_api(),
            };
        if !ptr.is_null() {
            note(ptr, size, 1);
            // SAFETY: the block just allocated, of `size` bytes.
            advise_huge_pages(ptr, size);
        }
        ptr
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let size = padded(Layout::from_size_align_unchecked(new_size, layout.align()));
        note(ptr, padded(layout), -1);
        // SAFETY: the caller's block, of the padded size it was allocated with.
        unadvise_huge_pages(ptr, padded(layout));
        let new: *mut u8 =
            match (raw::RedisModule_TryRealloc, raw::RedisModule_TryAlloc, raw::RedisModule_Realloc) {
                (Some(try_realloc), _, _) => try_realloc(ptr.cast(), size).cast(),
                (None, Some(try_alloc), _) => {
                    let new = try_alloc(size).cast::<u8>();
                    if !new.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        match raw::RedisModule_Free {
                            Some(free) => free(ptr.cast()), // its advice was taken back above
                            None => missing_api(),
                        }
                    }
                    new
                }
                (None, None, Some(realloc)) => realloc(ptr.cast(), size).cast(),
                _ => missing_api(),
            };
        // SAFETY: whichever block the caller owns now, with its size.
        if new.is_null() {
            note(ptr, padded(layout), 1); // the old block stays
            advise_huge_pages(ptr, padded(layout));
        } else {
            note(new, size, 1);
            advise_huge_pages(new, size);
        }
        new
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(ptr, padded(layout), -1);
        // SAFETY: the caller's block, of the padded size it was allocated with.
        unadvise_huge_pages(ptr, padded(layout));
        match raw::RedisModule_Free {
            Some(free) => free(ptr.cast()),
            None => missing_api(),
        }
    }
}
