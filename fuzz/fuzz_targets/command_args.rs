//! BF.RESERVE / BF.INSERT / BF.INFO arguments: NUL-separated words.
#![no_main]
use bloomkit_core::bf::args::{parse_insert, parse_reserve, Defaults, InfoField};
use bloomkit_core::bf::Chain;
use bloomkit_core::common::parse::{parse_double, parse_long_long};
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let words: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    for w in &words {
        let _ = parse_long_long(w);
        let _ = parse_double(w);
        let _ = InfoField::parse(w);
    }
    let defaults = Defaults::REDISBLOOM;
    let small = Limits { max_bytes: Some(1 << 20) };
    for command in [&b"BF.RESERVE"[..], b"BF.INSERT"] {
        let mut argv: Vec<&[u8]> = vec![command];
        argv.extend(&words);
        if command == b"BF.RESERVE" {
            if let Ok(params) = parse_reserve(&argv, &defaults) {
                assert!(
                    params.error > 0.0 && params.error < 1.0 && params.capacity >= 1 && params.expansion >= 1
                );
                let _ = Chain::new(params, small);
            }
        } else if let Ok(insert) = parse_insert(&argv, &defaults) {
            assert!(insert.items_from < argv.len());
            let _ = Chain::new(insert.params, small);
        }
    }
});
