//! The RDB field sequence of an MBbloom-- value, at any encoding version.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&encver, fields)) = data.split_first() else { return };
    let mut stream = bloomkit_core::common::fields::FieldStream { bytes: fields.to_vec(), pos: 0 };
    if let Ok(chain) = bloomkit_core::bf::rdb::load(
        &mut stream,
        i32::from(encver % 8),
        common::LIMITS,
        bloomkit_core::bf::Counts::Checked,
    ) {
        common::exercise(chain);
    }
});
