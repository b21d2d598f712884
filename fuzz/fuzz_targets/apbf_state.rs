//! A sliding-window filter's state (RDB, DUMP payloads, APBF.LOADCHUNK, state files).
#![no_main]
use bloomkit_core::apbf::{Apbf, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(mut f) = Apbf::decode(data, Some(1 << 26)) {
        // Whatever decodes in the current format encodes back to the same bytes.
        if data.starts_with(bloomkit_core::apbf::MAGIC) {
            assert_eq!(f.encode(), data);
        }
        assert_eq!(Apbf::decode_owned(data.to_vec(), Some(1 << 26)).as_ref(), Ok(&f));
        for i in 0..64u32 {
            f.add(&i.to_le_bytes(), u64::from(i) * 1000);
            let _ = f.contains(&i.to_le_bytes(), u64::from(i) * 1000 + 500);
        }
        f.advance(3, 1 << 40, 1 << 41);
        let _ = f.contains(b"x", u64::MAX);
        let _ = f.items_in_generation(u64::MAX);
        let _ = f.items_in_window(u64::MAX / 2);
        f.add(b"late", u64::MAX);
    }
    // The chunked path: a header (with a size limit), then bytes at an offset.
    if data.len() >= HEADER_LEN + 8 {
        if let Ok(mut f) = Apbf::from_header(&data[..HEADER_LEN], Some(1 << 24)) {
            let offset = u64::from_le_bytes(data[HEADER_LEN..HEADER_LEN + 8].try_into().unwrap());
            let _ = f.load_bits(offset, &data[HEADER_LEN + 8..]);
            let _ = f.contains(b"y", 0);
            f.add(b"z", 1);
        }
    }
});
