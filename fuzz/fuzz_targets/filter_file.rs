//! A bloomkit filter file (dump, restore, dedup --state).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    if let Ok(chain) = bloomkit_core::bf::file::read(data, common::LIMITS) {
        common::exercise(chain);
    }
});
