//! A sliding-window filter's state (RDB, DUMP payloads, APBF.LOADCHUNK,
//! state files), in either format. Whatever decodes must round-trip (issue
//! 31): encoded again (whole, and as SCANDUMP chunks) it decodes to the same
//! filter, which encodes to the same bytes, answers the same queries at the
//! same times and changes alike; and it must work every way the module
//! uses a filter.
#![no_main]
use bloomkit_core::apbf::{Apbf, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

const MAX: Option<u64> = Some(1 << 26);

/// The round-trip property, whole and by chunks; returns the decoded copy.
fn round_trip(f: &Apbf) -> Apbf {
    let bytes = f.encode();
    let again = Apbf::decode(&bytes, None).expect("a decoded filter's encoding decodes");
    assert!(again.encode() == bytes, "decode(encode(x)) encodes as x");
    assert_eq!(Apbf::decode_owned(bytes.clone(), None).as_ref(), Ok(&again), "the owned decoder agrees");
    let (mut iter, header) = f.scan_chunk(0);
    let mut copy = Apbf::from_header(&header, None).expect("a decoded filter's header decodes");
    loop {
        let (next, data) = f.scan_chunk(iter);
        if next == 0 {
            break;
        }
        copy.load_bits(iter - 1, &data).expect("a decoded filter's chunks load");
        iter = next;
    }
    assert!(copy.encode() == bytes, "SCANDUMP then LOADCHUNK gives the same filter");
    again
}

/// Two filters that must be the same answer every command the same way at
/// the same times, before and after the same writes, and end the same.
fn same_answers(mut a: Apbf, mut b: Apbf, seed: &[u8]) {
    let base = a.clock_ms();
    let times = [0, base, base.saturating_add(1), base.saturating_add(1 << 20), u64::MAX / 2, u64::MAX];
    let items: Vec<Vec<u8>> = (0..16u32)
        .map(|i| i.to_le_bytes().to_vec())
        .chain(seed.chunks(5).take(8).map(<[u8]>::to_vec))
        .collect();
    for &t in &times {
        for item in &items {
            assert_eq!(a.contains(item, t), b.contains(item, t), "APBF.EXISTS");
        }
        assert_eq!(a.items_in_window(t), b.items_in_window(t), "APBF.INFO: items in the window");
        assert_eq!(a.items_in_generation(t), b.items_in_generation(t), "APBF.INFO: items in the generation");
        assert_eq!(a.due_generations(t), b.due_generations(t), "generations due");
    }
    for (i, item) in items.iter().enumerate() {
        let t = base.saturating_add(i as u64 * 997).min(i64::MAX as u64);
        assert_eq!(a.add(item, t), b.add(item, t), "APBF.ADD");
    }
    assert!(a.encode() == b.encode(), "the same adds leave the same filter");
    let t = base.saturating_add(1 << 30).min(i64::MAX as u64);
    assert_eq!(a.advance_to(t), b.advance_to(t), "APBF.ADVANCE");
    a.advance(3, 1 << 40, 1 << 41);
    b.advance(3, 1 << 40, 1 << 41);
    // The latest time a write can be made at: times travel in replication
    // as signed 64-bit integers, and a state holding a later one is refused.
    let latest = i64::MAX as u64;
    assert_eq!(a.add(b"late", latest), b.add(b"late", latest), "APBF.ADD at the latest time");
    assert!(a.encode() == b.encode(), "the same writes leave the same filter");
    // What the writes made round-trips too.
    round_trip(&a);
    assert!(a.try_clone().expect("a small copy").encode() == a.encode(), "COPY");
}

fn check(f: Apbf, seed: &[u8]) {
    let copy = round_trip(&f);
    same_answers(f, copy, seed);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = Apbf::decode(data, MAX) {
        // Whatever decodes in the current format encodes back to the same bytes.
        if data.starts_with(bloomkit_core::apbf::MAGIC) {
            assert!(f.encode() == data, "the current format decodes and encodes to the same bytes");
        }
        assert_eq!(Apbf::decode_owned(data.to_vec(), MAX).as_ref(), Ok(&f));
        check(f, data);
    }
    // The chunked path: a header (with a size limit), then bytes at an offset.
    if data.len() >= HEADER_LEN + 8 {
        if let Ok(mut f) = Apbf::from_header(&data[..HEADER_LEN], Some(1 << 24)) {
            let offset = u64::from_le_bytes(data[HEADER_LEN..HEADER_LEN + 8].try_into().unwrap());
            let _ = f.load_bits(offset, &data[HEADER_LEN + 8..]);
            check(f, data);
        }
    }
});
