//! SIGINT and SIGTERM for the commands that leave something behind when
//! killed midway: `restore` and `copy` (a staging key on the destination),
//! `dump -o FILE` (a temporary file) and `dedup` (lines written but not yet
//! in the saved state). Killed by the default action, they would leave it;
//! instead the first signal only raises a flag, which the transfer checks
//! before each command and `dedup` after each block, so each stops at a
//! point where it can clean up (or save) and then exits with 128 + the
//! signal's number (130 for Ctrl-C, 143 for SIGTERM), as a shell reports a
//! process killed by it.
//!
//! Two escape hatches keep the process from outliving a user's patience: a
//! second signal exits at once, and so does a first one the main thread has
//! not acted on within [`GRACE`] (blocked reading a terminal, say); both
//! say on standard error what was left undone (set with [`set_unfinished`]).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use signal_hook::consts::{SIGINT, SIGTERM};

/// How long after a first signal the process waits for the command to stop
/// on its own before exiting anyway.
pub const GRACE: Duration = Duration::from_secs(10);

struct State {
    flag: Arc<AtomicBool>,
    signal: AtomicI32,
    /// Called on the first signal, to wake a main thread that waits for
    /// something else (dedup's reader thread).
    waker: Mutex<Option<Box<dyn Fn() + Send>>>,
    /// What an immediate exit leaves undone, said when it happens.
    unfinished: Mutex<String>,
}

static STATE: OnceLock<State> = OnceLock::new();

/// Starts handling SIGINT and SIGTERM (once per process) and returns the
/// flag the first one raises.
pub fn install() -> Arc<AtomicBool> {
    let state = STATE.get_or_init(|| {
        let state = State {
            flag: Arc::new(AtomicBool::new(false)),
            signal: AtomicI32::new(0),
            waker: Mutex::new(None),
            unfinished: Mutex::new(String::new()),
        };
        match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
            Ok(mut signals) => {
                std::thread::spawn(move || {
                    for signal in signals.forever() {
                        on_signal(signal);
                    }
                });
            }
            // Without handlers the signals keep their default action.
            Err(e) => say!("bloomkit: warning: cannot handle SIGINT/SIGTERM ({e})"),
        }
        state
    });
    state.flag.clone()
}

fn on_signal(signal: i32) {
    let state = STATE.get().expect("installed");
    if state.flag.swap(true, Ordering::SeqCst) {
        exit_now(signal, "a second signal");
    }
    state.signal.store(signal, Ordering::SeqCst);
    if let Some(wake) = state.waker.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        wake();
    }
    std::thread::spawn(move || {
        std::thread::sleep(GRACE);
        exit_now(signal, &format!("still running {}s after the signal", GRACE.as_secs()));
    });
}

fn exit_now(signal: i32, why: &str) -> ! {
    let state = STATE.get().expect("installed");
    let unfinished = state.unfinished.lock().map(|u| u.clone()).unwrap_or_default();
    if unfinished.is_empty() {
        say!("bloomkit: {why}: stopping now");
    } else {
        say!("bloomkit: {why}: stopping now; {unfinished}");
    }
    std::process::exit(128 + signal)
}

/// Whether a signal came.
pub fn interrupted() -> bool {
    STATE.get().is_some_and(|s| s.flag.load(Ordering::SeqCst))
}

/// The exit status for the signal that came: 128 + its number.
pub fn exit_status() -> u8 {
    let signal = STATE.get().map_or(SIGINT, |s| s.signal.load(Ordering::SeqCst));
    u8::try_from(128 + if signal == 0 { SIGINT } else { signal }).unwrap_or(130)
}

/// Sets what is called on the first signal (after the flag is raised).
pub fn set_waker(wake: impl Fn() + Send + 'static) {
    if let Some(state) = STATE.get() {
        *state.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(wake));
    }
}

/// Says what an immediate exit (second signal, or [`GRACE`] over) would
/// leave undone, for its message.
pub fn set_unfinished(what: impl Into<String>) {
    if let Some(state) = STATE.get() {
        *state.unfinished.lock().unwrap_or_else(|e| e.into_inner()) = what.into();
    }
}

/// The marker error for a command that stopped on a signal after cleaning
/// up: `main` exits with [`exit_status`] and prints the message as is.
#[derive(Debug)]
pub struct Stopped(pub String);

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Stopped {}
