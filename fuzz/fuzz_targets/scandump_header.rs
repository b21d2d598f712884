//! BF.LOADCHUNK key 1 <header>: any bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    if let Ok(chain) = bloomkit_core::bf::scandump::decode_header(data, common::LIMITS) {
        common::exercise(chain);
    }
});
