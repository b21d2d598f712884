//! BF.RESERVE / BF.INSERT / BF.INFO arguments: NUL-separated words. A
//! filter the arguments create round-trips through every format and works
//! (see common.rs).
#![no_main]
use bloomkit_core::bf::args::{parse_insert, parse_reserve, Defaults, InfoField};
use bloomkit_core::bf::Chain;
use bloomkit_core::common::compat::Compat;
use bloomkit_core::common::parse::{parse_double, parse_long_long};
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let words: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    for w in &words {
        let _ = parse_long_long(w);
        let _ = parse_double(w);
        let _ = InfoField::parse(w);
    }
    let defaults = Defaults::REDISBLOOM;
    let small = Limits::at_most(1 << 20);
    for (command, compat) in
        Compat::ALL.iter().flat_map(|c| [(&b"BF.RESERVE"[..], *c), (&b"BF.INSERT"[..], *c)])
    {
        let mut argv: Vec<&[u8]> = vec![command];
        argv.extend(&words);
        let parsed = if command == b"BF.RESERVE" {
            parse_reserve(&argv, &defaults, compat)
        } else {
            parse_insert(&argv, &defaults, compat)
                .inspect(|insert| assert!(insert.items_from < argv.len()))
                .map(|i| i.params)
        };
        if let Ok(params) = parsed {
            // Only a non-scaling filter may have an expansion of 0 (RedisBloom 8).
            assert!(params.error > 0.0 && params.error < 1.0 && params.capacity >= 1);
            assert!(params.expansion >= 1 || !params.scaling);
            if let Ok(chain) = Chain::new(params, small) {
                common::exercise(chain);
            }
        }
    }
});
