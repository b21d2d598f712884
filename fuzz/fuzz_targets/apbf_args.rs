//! APBF.RESERVE / APBF.ADVANCE / APBF.LOADCHUNK arguments: NUL-separated
//! words. Whatever parses must size (or be refused) within the limit,
//! without allocating more than it; a filter it creates round-trips.
#![no_main]
use bloomkit_core::apbf::args::{parse_advance, parse_chunk_iter, parse_reserve};
use bloomkit_core::apbf::Apbf;
use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 1 << 24;

fuzz_target!(|data: &[u8]| {
    let words: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    for w in &words {
        let _ = parse_chunk_iter(w);
    }
    let mut argv: Vec<&[u8]> = vec![b"APBF.RESERVE", b"key"];
    argv.extend(&words);
    if let Ok(params) = parse_reserve(&argv) {
        assert!(params.error > 0.0 && params.error < 1.0 && params.capacity >= 1);
        if let Ok(mut f) = Apbf::new(params, 0, bloomkit_core::Limits::at_most(LIMIT)) {
            assert!(f.bytes() as u64 <= LIMIT);
            f.add(b"a", 1);
            assert!(f.contains(b"a", 1));
            // What the arguments create round-trips (issue 31).
            let bytes = f.encode();
            let mut again = Apbf::decode(&bytes, None).expect("a new filter's encoding decodes");
            assert!(again.encode() == bytes, "decode(encode(x)) encodes as x");
            assert_eq!(again.add(b"b", 2), f.add(b"b", 2));
            assert_eq!(again.contains(b"a", 3), f.contains(b"a", 3));
            assert!(again.encode() == f.encode(), "the same add leaves the same filter");
        }
    }
    argv[0] = b"APBF.ADVANCE";
    if let Ok(a) = parse_advance(&argv) {
        assert!(a.started_ms <= i64::MAX as u64 && a.now_ms <= i64::MAX as u64);
    }
});
