//! bkit-xflt input: the RDB field sequence, a DUMP payload, a SCANDUMP
//! header followed by chunks, or `XF.*` argument words. Whatever decodes
//! must work every way the module uses a filter, and round-trip: saving
//! what loaded gives the same bytes, and every format of it loads again.
#![no_main]
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::xf::{args, XfDefaults, XfFilter, HEADER_LEN};
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
    let again = XfFilter::load(&mut FieldStream { bytes: bytes.clone(), pos: 0 }, 0, Limits::NONE)
        .expect("a filter's own RDB fields load");
    assert_eq!(saved(&again), bytes);
    let copy = XfFilter::from_payload(&f.dump_payload(), Limits::NONE).expect("a filter's own DUMP loads");
    assert_eq!(saved(&copy), bytes);
    if !f.is_loading() {
        let mut chunks = f.chunks();
        let (_, header) = chunks.next().expect("a header");
        let mut rebuilt = XfFilter::from_header(&header, Limits::NONE).expect("a filter's own header loads");
        for (iter, data) in chunks {
            rebuilt.load_chunk(iter, &data).expect("a filter's own chunks load");
        }
        assert_eq!(saved(&rebuilt), bytes);
    }
    for i in 0..48u32 {
        let item = (i % 17).to_le_bytes();
        let _ = f.insert(&item, LIMITS);
        let _ = f.contains(&item);
        let _ = f.count(&item);
        if i % 3 == 0 {
            let _ = f.delete(&item);
        }
        let _ = f.migrate_step(u64::from(i));
    }
    let _ = f.info();
    let _ = f.size_bytes();
    let _ = f.lookup_cost(b"x");
    if let Ok(other) = f.try_clone() {
        let _ = f.merge_from(&other, LIMITS);
    }
    let bytes = saved(&f);
    let again = XfFilter::load(&mut FieldStream { bytes: bytes.clone(), pos: 0 }, 0, Limits::NONE)
        .expect("a used filter's RDB fields load");
    assert_eq!(saved(&again), bytes);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 4 {
        0 => {
            let mut stream = FieldStream { bytes: rest.to_vec(), pos: 0 };
            if let Ok(f) = XfFilter::load(&mut stream, 0, LIMITS) {
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
                let _ = f.load_chunk(u64::from_le_bytes(*iter), &tail[..len]);
                let _ = f.chunk_at(u64::from_le_bytes(*iter));
                chunks = &tail[len..];
            }
            exercise(f);
        }
        _ => {
            // Words separated by 0xff, as a command's argv.
            let argv: Vec<&[u8]> = rest.split(|&b| b == 0xff).collect();
            let defaults = XfDefaults::BLOOMKIT;
            if let Ok(params) = args::parse_reserve(&argv, &defaults) {
                if let Ok(f) = XfFilter::with_params(params, LIMITS) {
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
