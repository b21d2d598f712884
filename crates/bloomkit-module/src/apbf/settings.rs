//! APBF's setting: `bf.apbf-clock-offset-ms` (default 0, at most 100
//! years), added to the clock of time windows: a hook that moves time
//! without sleeping, for tests and for rehearsing what a window does.
//! A test hook: only a module loaded with `TEST_HOOKS yes` lets it be set
//! (issue 43: any `CONFIG SET` could move a production server's windows).

use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

use crate::config::{int, Naming, Setting};

const MAX_CLOCK_OFFSET: i64 = 100 * 365 * 86_400_000;
static CLOCK_OFFSET: AtomicI64 = AtomicI64::new(0);
static APBF_CLOCK_OFFSET: Setting =
    Setting::new("apbf-clock-offset-ms", Naming::Prefixed, int(&CLOCK_OFFSET, 0, MAX_CLOCK_OFFSET))
        .test_hook();

pub static SETTINGS: [&Setting; 1] = [&APBF_CLOCK_OFFSET];

pub fn clock_offset_ms() -> u64 {
    CLOCK_OFFSET.load(Relaxed).max(0) as u64
}
