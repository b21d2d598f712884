//! bkit-xflt input: the RDB field sequence (encoding 1, or bloomkit 0.1's
//! encoding 0), a DUMP payload, a SCANDUMP header followed by chunks, or
//! `XF.*` argument words. Whatever decodes must work every way the module
//! uses a filter (adds, add-if-absent, deletes, merges, a load under way
//! saved and continued), and round-trip: saving what loaded gives the same
//! bytes, and every format of it loads again.
#![no_main]
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::xf::{args, XfDefaults, XfFilter, ENCODING_VERSION, HEADER_LEN};
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits::at_most(1 << 22);

fn saved(f: &XfFilter) -> Vec<u8> {
    let mut w = FieldStream::default();
    f.save(&mut w);
    w.bytes
}

fn exercise(mut f: XfFilter) {
    let bytes = saved(&f);
    let again =
        XfFilter::load(&mut FieldStream { bytes: bytes.clone(), pos: 0 }, ENCODING_VERSION, Limits::NONE)
            .expect("a filter's own RDB fields load");
    assert_eq!(saved(&again), bytes);
    let copy = XfFilter::from_payload(&f.dump_payload(), Limits::NONE).expect("a filter's own DUMP loads");
    assert_eq!(saved(&copy), bytes);
    // Its chunks (a load under way gives what it received) load again.
    let mut chunks = f.chunks();
    let (_, header) = chunks.next().expect("a header");
    let mut rebuilt = XfFilter::from_header(&header, Limits::NONE).expect("a filter's own header loads");
    for (iter, data) in chunks {
        rebuilt.load_chunk(iter, &data, Limits::NONE).expect("a filter's own chunks load");
    }
    assert_eq!(saved(&rebuilt), bytes);
    for i in 0..48u32 {
        let item = (i % 17).to_le_bytes();
        let _ = f.insert(&item, LIMITS);
        let _ = f.insert_if_absent(&(i + 100).to_le_bytes(), LIMITS);
        let _ = f.contains(&item);
        let _ = f.count(&item);
        if i % 3 == 0 {
            let _ = f.delete(&item);
        }
    }
    let _ = f.info();
    let _ = f.size_bytes();
    let _ = f.lookup_cost(b"x");
    if let Ok(merged) = XfFilter::merged(Some(&f), &[&f], true, LIMITS) {
        let bytes = saved(&merged);
        let again =
            XfFilter::load(&mut FieldStream { bytes: bytes.clone(), pos: 0 }, ENCODING_VERSION, Limits::NONE)
                .expect("a merge's RDB fields load");
        assert_eq!(saved(&again), bytes);
    }
    let bytes = saved(&f);
    let again =
        XfFilter::load(&mut FieldStream { bytes: bytes.clone(), pos: 0 }, ENCODING_VERSION, Limits::NONE)
            .expect("a used filter's RDB fields load");
    assert_eq!(saved(&again), bytes);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 5 {
        0 | 4 => {
            // Encoding 1, or bloomkit 0.1's encoding 0.
            let mut stream = FieldStream { bytes: rest.to_vec(), pos: 0 };
            let encver = if mode % 5 == 0 { ENCODING_VERSION } else { 0 };
            if let Ok(f) = XfFilter::load(&mut stream, encver, LIMITS) {
                exercise(f);
            }
        }
        1 => {
            if let Ok(f) = XfFilter::from_payload(rest, LIMITS) {
                exercise(f);
            }
        }
        2 => {
            // A header, then (iter u64, len u8, bytes) chunks.
            if rest.len() < HEADER_LEN {
                return;
            }
            let (header, mut chunks) = rest.split_at(HEADER_LEN);
            let Ok(mut f) = XfFilter::from_header(header, LIMITS) else { return };
            while let Some((iter, tail)) = chunks.split_first_chunk::<8>() {
                let Some((&len, tail)) = tail.split_first() else { break };
                let len = usize::from(len).min(tail.len());
                let _ = f.load_chunk(u64::from_le_bytes(*iter), &tail[..len], LIMITS);
                let _ = f.chunk_at(u64::from_le_bytes(*iter));
                chunks = &tail[len..];
            }
            exercise(f);
        }
        _ => {
            // Words separated by 0xff, as a command's argv.
            let argv: Vec<&[u8]> = rest.split(|&b| b == 0xff).collect();
            let defaults = XfDefaults::BLOOMKIT;
            if let Ok(r) = args::parse_reserve(&argv, &defaults) {
                if let Ok(f) = XfFilter::with_params(r.params, LIMITS) {
                    exercise(f);
                }
            }
            let _ = args::parse_insert(&argv, &defaults);
            let _ = args::parse_merge(&argv);
            let _ = args::parse_scandump(&argv);
            let _ = args::parse_loadchunk(&argv);
        }
    }
});
