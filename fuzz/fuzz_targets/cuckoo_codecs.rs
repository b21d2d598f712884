//! MBbloomCF input: a CF.LOADCHUNK header followed by chunks, or the RDB
//! field sequence at any encoding version. Whatever decodes must round-trip
//! (issue 31): saved again (RDB fields, and SCANDUMP header and chunks) it
//! decodes to the same filter, which saves to the same bytes, answers the
//! same queries and changes alike; and it must work every way the module
//! uses a cuckoo filter, within the size limit.
#![no_main]
use bloomkit_core::cf::{CuckooFilter, Insert, Lookup, HEADER_LEN};
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits::at_most(1 << 22);
/// Filters of more sub-filters than this skip the SCANDUMP round trip.
const SCANDUMP_FILTERS: usize = 256;

fn fields(f: &CuckooFilter) -> Vec<u8> {
    let mut w = FieldStream::default();
    f.save(&mut w);
    w.bytes
}

/// Everything a filter is: its counts and shape (the header), each
/// sub-filter's bucket count and slots.
fn assert_same(a: &CuckooFilter, b: &CuckooFilter, what: &str) {
    assert_eq!(a.encode_header(), b.encode_header(), "{what}: header");
    assert_eq!(a.shape(), b.shape(), "{what}: shape");
    assert_eq!(a.filters().len(), b.filters().len(), "{what}: sub-filters");
    for (x, y) in a.filters().iter().zip(b.filters()) {
        assert_eq!(x.buckets(), y.buckets(), "{what}: buckets");
        assert!(x.bytes() == y.bytes(), "{what}: slots");
    }
}

/// The round-trip property: the filter's RDB fields, and its SCANDUMP
/// header and chunks, load to the same filter, whose own save is the same
/// bytes. Returns the RDB copy.
fn round_trip(f: &CuckooFilter) -> CuckooFilter {
    let saved = fields(f);
    let again = CuckooFilter::load(&mut FieldStream { bytes: saved.clone(), pos: 0 }, 4, Limits::NONE)
        .expect("a decoded filter's RDB fields load");
    assert_same(f, &again, "load(save(x))");
    assert!(fields(&again) == saved, "save, load and save again give the same fields");
    let header = f.encode_header();
    let mut copy = CuckooFilter::from_header(&header, Limits::NONE).expect("a decoded filter's header loads");
    // Each chunk walks the sub-filters from the first (as RedisBloom's
    // SCANDUMP does): with thousands of them the whole dump takes seconds.
    if f.filters().len() <= SCANDUMP_FILTERS {
        for (pos, data) in f.chunks() {
            copy.load_chunk(pos, data).expect("a decoded filter's chunks load");
        }
        assert_same(f, &copy, "SCANDUMP then LOADCHUNK");
        assert!(fields(&copy) == saved, "the SCANDUMP copy saves the same fields");
    }
    again
}

/// Two filters that must be the same answer every command the same way,
/// before and after the same writes, and end the same.
fn same_answers(mut a: CuckooFilter, mut b: CuckooFilter, seed: &[u8]) {
    let items: Vec<Lookup> = (0..48u32)
        .map(|i| Lookup::new(&i.to_le_bytes()))
        .chain(seed.chunks(4).take(16).map(Lookup::new))
        .collect();
    for l in &items {
        assert_eq!(a.contains(l), b.contains(l), "CF.EXISTS");
        assert_eq!(a.count(l), b.count(l), "CF.COUNT");
    }
    for (i, l) in items.iter().enumerate() {
        let ra = a.insert(l, LIMITS);
        assert_eq!(ra, b.insert(l, LIMITS), "CF.ADD");
        assert_eq!(a.insert_unique(l, LIMITS), b.insert_unique(l, LIMITS), "CF.ADDNX");
        if ra == Ok(Insert::Inserted) {
            assert!(a.contains(l), "an added item is present");
        }
        assert_eq!(a.count(l), b.count(l), "CF.COUNT after a write");
        if i % 3 == 0 {
            assert_eq!(a.delete(l), b.delete(l), "CF.DEL");
        }
    }
    assert_same(&a, &b, "the same writes");
    a.compact(true);
    b.compact(true);
    assert_same(&a, &b, "CF.COMPACT");
    assert_eq!(a.debug_line(), b.debug_line(), "CF.DEBUG");
    assert_eq!(a.size_bytes(), b.size_bytes(), "CF.INFO Size");
    // What the writes made round-trips too.
    round_trip(&a);
    let copy = a.try_clone().expect("a small copy");
    assert_same(&a, &copy, "COPY");
}

fn check(f: CuckooFilter, seed: &[u8]) {
    let copy = round_trip(&f);
    same_answers(f, copy, seed);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 1 == 0 {
        // Header, then (pos i64, len u8, bytes) chunks.
        if rest.len() < HEADER_LEN {
            return;
        }
        let (header, mut chunks) = rest.split_at(HEADER_LEN);
        let Ok(mut f) = CuckooFilter::from_header(header, LIMITS) else { return };
        while let Some((pos, tail)) = chunks.split_first_chunk::<8>() {
            let Some((&len, tail)) = tail.split_first() else { break };
            let len = usize::from(len).min(tail.len());
            let _ = f.load_chunk(i64::from_le_bytes(*pos), &tail[..len]);
            let _ = f.chunk_at(i64::from_le_bytes(*pos));
            chunks = &tail[len..];
        }
        check(f, rest);
    } else {
        let mut stream = FieldStream { bytes: rest.to_vec(), pos: 0 };
        if let Ok(f) = CuckooFilter::load(&mut stream, i32::from(mode >> 1) % 6, LIMITS) {
            check(f, rest);
        }
    }
});
