//! CMSk-TYPE input: the RDB field sequence, a DUMP payload (opcodes, LZF
//! strings), or a CMS.* command's arguments. Whatever decodes must
//! round-trip (issue 31): saved again (RDB fields and DUMP) it decodes to
//! the same sketch, which saves to the same bytes, answers the same queries
//! and changes alike; and it must work every way the module uses a sketch,
//! within the size limit. Every parser answers without panicking.
#![no_main]
use bloomkit_core::cms::args::{parse_incrby, parse_initbydim, parse_initbyprob, parse_merge};
use bloomkit_core::cms::{CountMinSketch, Source};
use bloomkit_core::common::dump::PayloadReader;
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits::at_most(1 << 22);

fn fields(s: &CountMinSketch) -> Vec<u8> {
    let mut w = FieldStream::default();
    s.save(&mut w);
    w.bytes
}

/// The round-trip property: the sketch's RDB fields and DUMP payload load
/// to the same sketch, whose own save is the same bytes. Returns the copy.
fn round_trip(s: &CountMinSketch) -> CountMinSketch {
    let saved = fields(s);
    let again = CountMinSketch::load(&mut FieldStream { bytes: saved.clone(), pos: 0 }, 0, Limits::NONE)
        .expect("a decoded sketch's RDB fields load");
    assert!(again == *s, "load(save(x)) is x");
    assert!(fields(&again) == saved, "save, load and save again give the same fields");
    let payload = s.dump_payload();
    let mut r = PayloadReader::new(&payload).expect("its own payload frames");
    let restored = CountMinSketch::load(&mut r, 0, Limits::NONE).expect("a decoded sketch's DUMP loads");
    assert!(r.at_end(), "nothing after the value");
    assert!(restored == *s, "RESTORE(DUMP(x)) is x");
    assert!(restored.dump_payload() == payload, "DUMP, RESTORE and DUMP again give the same payload");
    again
}

/// Two sketches that must be the same answer every command the same way,
/// before and after the same writes (increments, merges with themselves
/// among the sources), and end the same.
fn same_answers(mut a: CountMinSketch, mut b: CountMinSketch, seed: &[u8]) {
    let items: Vec<Vec<u8>> = (0..32u32)
        .map(|i| i.to_le_bytes().to_vec())
        .chain(seed.chunks(4).take(16).map(<[u8]>::to_vec))
        .collect();
    for item in &items {
        assert!(a.query(item) == b.query(item), "CMS.QUERY");
    }
    for (i, item) in items.iter().enumerate() {
        let by = (i as u64).wrapping_mul(0x1000_0001);
        let estimate = a.increment(item, by);
        assert!(estimate == b.increment(item, by), "CMS.INCRBY");
        assert!(a.query(item) == estimate, "an increment's estimate is the query's");
    }
    let (ca, cb) = (a.try_clone().expect("a small copy"), b.try_clone().expect("a small copy"));
    for weights in [[2i64, -1], [1, 1], [0, 1]] {
        let ra = a.merge(&[(Source::Destination, weights[0]), (Source::Other(&ca), weights[1])]);
        let rb = b.merge(&[(Source::Destination, weights[0]), (Source::Other(&cb), weights[1])]);
        assert!(ra == rb, "CMS.MERGE");
        assert!(a == b, "the same merges leave the same sketch");
    }
    // CMS.MERGE d 2 d d: exact or refused, never rounded.
    let before = a.try_clone().expect("a small copy");
    match a.merge(&[(Source::Destination, 1), (Source::Destination, 1)]) {
        Ok(()) => {
            assert!(a.count() == before.count() * 2, "a self-merge doubles the total exactly");
            for (x, y) in a.counters().iter().zip(before.counters()) {
                assert!(u64::from(*x) == 2 * u64::from(*y), "a self-merge doubles every counter exactly");
            }
        }
        Err(_) => assert!(a == before, "a refused merge changes nothing"),
    }
    round_trip(&a);
    let _ = a.size_bytes();
}

fn check(s: CountMinSketch, seed: &[u8]) {
    let copy = round_trip(&s);
    same_answers(s, copy, seed);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 3 {
        0 => {
            let mut stream = FieldStream { bytes: rest.to_vec(), pos: 0 };
            if let Ok(s) = CountMinSketch::load(&mut stream, i32::from(mode >> 2) % 2, LIMITS) {
                check(s, rest);
            }
        }
        1 => {
            // A payload whose checksum is made right, so that the opcodes are reached.
            let mut body = rest.to_vec();
            body.extend_from_slice(&9u16.to_le_bytes());
            let payload = bloomkit_core::common::payload::seal(&body);
            if let Ok(mut r) = PayloadReader::new(&payload) {
                if let Ok(s) = CountMinSketch::load(&mut r, 0, LIMITS) {
                    check(s, rest);
                }
            }
        }
        _ => {
            let argv: Vec<&[u8]> = rest.split(|&b| b == b' ').collect();
            for dims in [parse_initbydim(&argv), parse_initbyprob(&argv)].into_iter().flatten() {
                if let Ok(s) = CountMinSketch::new(dims, LIMITS) {
                    check(s, rest);
                }
            }
            let _ = parse_incrby(&argv);
            if let Ok(m) = parse_merge(&argv) {
                for i in 0..m.sources.min(64) {
                    let _ = m.weight(&argv, i);
                }
            }
        }
    }
});
