//! TopK-TYPE input: the RDB field sequence (at encoding 0 or 1), a DUMP
//! payload, or `TOPK.*` argument words. Whatever decodes must round-trip
//! (issue 31): saved again (RDB fields and DUMP) it decodes to the same
//! sketch, which saves to the same bytes, answers the same queries and
//! changes alike; and it must work every way the module uses a sketch.
#![no_main]
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::topk::{args, TopK};
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits::at_most(1 << 22);

fn fields(t: &TopK) -> Vec<u8> {
    let mut w = FieldStream::default();
    t.save(&mut w);
    w.bytes
}

/// Everything a sketch is: parameters, buckets, heap and draw counter.
fn assert_same(a: &TopK, b: &TopK, what: &str) {
    assert_eq!(a.params(), b.params(), "{what}: parameters");
    assert_eq!((a.buckets(), a.heap(), a.draws()), (b.buckets(), b.heap(), b.draws()), "{what}");
}

/// The round-trip property: the sketch's RDB fields and DUMP payload load
/// to the same sketch, whose own save is the same bytes. Returns the copy.
fn round_trip(t: &TopK) -> TopK {
    let saved = fields(t);
    let again = TopK::load(&mut FieldStream { bytes: saved.clone(), pos: 0 }, 0, Limits::NONE)
        .expect("a decoded sketch's RDB fields load");
    assert_same(t, &again, "load(save(x))");
    assert_eq!(fields(&again), saved, "save, load and save again give the same fields");
    let payload = t.dump_payload();
    let restored = TopK::from_payload(&payload, Limits::NONE).expect("a decoded sketch's DUMP loads");
    assert_same(t, &restored, "RESTORE(DUMP(x))");
    assert_eq!(restored.dump_payload(), payload, "DUMP, RESTORE and DUMP again give the same payload");
    again
}

/// The items a check asks about: items of the heap (the empty string
/// included; its first and last slots, so that a large heap stays quick),
/// absent ones, and some from the input.
fn probes(t: &TopK, seed: &[u8]) -> Vec<Vec<u8>> {
    let heap = t.heap();
    let ends = heap.iter().take(16).chain(heap.iter().skip(16).rev().take(16));
    let mut items: Vec<Vec<u8>> = ends.map(|s| s.bytes().to_vec()).collect();
    items.extend((0..13u32).map(|i| i.to_le_bytes()[..(i % 5) as usize].to_vec()));
    items.extend(seed.chunks(3).take(16).map(<[u8]>::to_vec));
    items
}

fn listed(t: &TopK) -> Vec<(Vec<u8>, u32)> {
    t.list().iter().map(|s| (s.bytes().to_vec(), s.count)).collect()
}

/// Two sketches that must be the same answer every command the same way,
/// before and after the same writes, and end with the same bytes.
fn same_answers(mut a: TopK, mut b: TopK, seed: &[u8]) {
    let items = probes(&a, seed);
    for item in &items {
        assert_eq!(a.query(item), b.query(item), "TOPK.QUERY");
        assert_eq!(a.count(item), b.count(item), "TOPK.COUNT");
    }
    assert_eq!(listed(&a), listed(&b), "TOPK.LIST");
    for (i, item) in items.iter().enumerate() {
        let incr = (i as u32 * 7) % 5;
        assert_eq!(a.add(item, incr), b.add(item, incr), "TOPK.INCRBY: the expelled item");
        assert_eq!(a.count(item), b.count(item), "TOPK.COUNT after a write");
    }
    assert_eq!(listed(&a), listed(&b), "TOPK.LIST after writes");
    assert_eq!(fields(&a), fields(&b), "the same writes leave the same sketch");
    // What the writes made round-trips too.
    round_trip(&a);
    let copy = a.try_clone().expect("small sketches clone");
    assert_same(&a, &copy, "COPY");
    let _ = a.size_bytes();
}

fn check(t: TopK, seed: &[u8]) {
    let copy = round_trip(&t);
    same_answers(t, copy, seed);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 3 {
        0 => {
            let mut stream = FieldStream { bytes: rest.to_vec(), pos: 0 };
            if let Ok(t) = TopK::load(&mut stream, i32::from(mode >> 2) % 2, LIMITS) {
                check(t, rest);
            }
        }
        1 => {
            if let Ok(t) = TopK::from_payload(rest, LIMITS) {
                check(t, rest);
            }
        }
        _ => {
            // Words separated by 0xff, as a command's argv.
            let argv: Vec<&[u8]> = rest.split(|&b| b == 0xff).collect();
            if let Ok(params) = args::parse_reserve(&argv) {
                if let Ok(t) = TopK::new(params, LIMITS) {
                    check(t, rest);
                }
            }
            let _ = args::check_incrby_arity(&argv);
            let _ = args::parse_list(&argv);
            for word in &argv {
                let _ = args::parse_increment(word);
            }
        }
    }
});
