//! MBbloomCF input: a CF.LOADCHUNK header followed by chunks, or the RDB
//! field sequence at any encoding version. Whatever decodes must work every
//! way the module uses a cuckoo filter, within the size limit.
#![no_main]
use bloomkit_core::cf::{CuckooFilter, Lookup, HEADER_LEN};
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits::at_most(1 << 22);

fn exercise(mut f: CuckooFilter) {
    for i in 0..48u32 {
        let l = Lookup::new(&i.to_le_bytes());
        let _ = f.insert(&l, LIMITS);
        let _ = f.insert_unique(&l, LIMITS);
        let _ = f.contains(&l);
        let _ = f.count(&l);
        if i % 3 == 0 {
            f.delete(&l);
        }
    }
    f.compact(true);
    let header = f.encode_header();
    let mut copy = CuckooFilter::from_header(&header, Limits::NONE).expect("a filter's own header decodes");
    for (pos, data) in f.chunks() {
        copy.load_chunk(pos, data).expect("a filter's own chunks load");
    }
    assert_eq!(copy.encode_header(), header);
    let mut fields = FieldStream::default();
    f.save(&mut fields);
    let again = CuckooFilter::load(&mut FieldStream { bytes: fields.bytes, pos: 0 }, 4, Limits::NONE)
        .expect("a filter's own RDB fields load");
    assert_eq!(again.encode_header(), header);
    let _ = f.size_bytes();
    let _ = f.debug_line();
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
        exercise(f);
    } else {
        let mut stream = FieldStream { bytes: rest.to_vec(), pos: 0 };
        if let Ok(f) = CuckooFilter::load(&mut stream, i32::from(mode >> 1) % 6, LIMITS) {
            exercise(f);
        }
    }
});
