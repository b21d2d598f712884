//! CMSk-TYPE input, at encoding version 0 or 1 (Redis 8.12's cell sizes)
//! under either level's rules: the RDB field sequence, a DUMP payload
//! (opcodes, LZF strings), or a CMS.* command's arguments. Whatever decodes must
//! round-trip (issue 31): saved again (RDB fields and DUMP) it decodes to
//! the same sketch, which saves to the same bytes, answers the same queries
//! and changes alike; and it must work every way the module uses a sketch,
//! within the size limit. Every parser answers without panicking.
#![no_main]
use bloomkit_core::cms::args::{
    parse_incrby, parse_incrby_signed, parse_initbydim_with, parse_initbyprob_with, parse_merge,
};
use bloomkit_core::cms::{CountMinSketch, Rules, Source};
use bloomkit_core::common::dump::PayloadReader;
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits::at_most(1 << 22);

fn fields(s: &CountMinSketch, rules: Rules) -> Vec<u8> {
    let mut w = FieldStream::default();
    s.save_with(&mut w, rules);
    w.bytes
}

/// The round-trip property under `rules`: the sketch's RDB fields and DUMP
/// payload (at the rules' encoding version) load to the same sketch, whose
/// own save is the same bytes. Returns the copy.
fn round_trip(s: &CountMinSketch, rules: Rules) -> CountMinSketch {
    let encver = rules.encoding_version();
    let saved = fields(s, rules);
    let again = CountMinSketch::load_with(
        &mut FieldStream { bytes: saved.clone(), pos: 0 },
        encver,
        Limits::NONE,
        rules,
    )
    .expect("a decoded sketch's RDB fields load");
    assert!(again == *s, "load(save(x)) is x");
    assert!(fields(&again, rules) == saved, "save, load and save again give the same fields");
    let payload = s.dump_payload_with(rules);
    let mut r = PayloadReader::new(&payload).expect("its own payload frames");
    let restored = CountMinSketch::load_with(&mut r, encver, Limits::NONE, rules)
        .expect("a decoded sketch's DUMP loads");
    assert!(r.at_end(), "nothing after the value");
    assert!(restored == *s, "RESTORE(DUMP(x)) is x");
    assert!(
        restored.dump_payload_with(rules) == payload,
        "DUMP, RESTORE and DUMP again give the same payload"
    );
    // Whatever 8.12 holds loads at the older levels, in 4-byte cells that
    // answer every query the same up to 4294967295.
    if rules == Rules::CellSized {
        let old = CountMinSketch::load_with(
            &mut FieldStream { bytes: saved, pos: 0 },
            encver,
            Limits::NONE,
            Rules::Classic,
        )
        .expect("version 1 loads at the older levels");
        assert!(old.cells() == s.cells() && old.count() == s.count(), "same shape and total");
        for i in 0..s.cells() {
            let want = s.cell(i).map(|c| c.min(u64::from(u32::MAX)));
            assert!(old.cell(i) == want, "cells widened or saturated");
        }
        round_trip(&old, Rules::Classic);
    }
    again
}

/// Two sketches that must be the same answer every command the same way,
/// before and after the same writes (increments, merges with themselves
/// among the sources), and end the same.
fn same_answers(mut a: CountMinSketch, mut b: CountMinSketch, seed: &[u8], rules: Rules) {
    let items: Vec<Vec<u8>> = (0..32u32)
        .map(|i| i.to_le_bytes().to_vec())
        .chain(seed.chunks(4).take(16).map(<[u8]>::to_vec))
        .collect();
    for item in &items {
        assert!(a.query(item) == b.query(item), "CMS.QUERY");
    }
    for (i, item) in items.iter().enumerate() {
        let by = (i as u64).wrapping_mul(0x1000_0001);
        match rules {
            Rules::Classic => {
                let estimate = a.increment(item, by);
                assert!(estimate == b.increment(item, by), "CMS.INCRBY");
                assert!(a.query(item) == estimate, "an increment's estimate is the query's");
            }
            Rules::CellSized => {
                let signed = if i % 3 == 2 { -(by as i64 % 1000) } else { by as i64 };
                let before = a.try_clone().expect("a small copy");
                let ra = a.add(item, signed);
                assert!(ra == b.add(item, signed), "CMS.INCRBY");
                match ra {
                    Ok(estimate) => {
                        assert!(a.query(item) == estimate, "an increment's estimate is the query's")
                    }
                    Err(_) => assert!(a == before, "a refused increment changes nothing"),
                }
                assert!(a.count() <= i64::MAX as u64, "the total stays a RESP integer");
            }
        }
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
            for i in 0..a.cells() {
                assert!(
                    a.cell(i) == before.cell(i).map(|c| 2 * c),
                    "a self-merge doubles every counter exactly"
                );
            }
        }
        Err(_) => assert!(a == before, "a refused merge changes nothing"),
    }
    round_trip(&a, rules);
    let _ = a.size_bytes();
}

fn check(s: CountMinSketch, seed: &[u8], rules: Rules) {
    let copy = round_trip(&s, rules);
    same_answers(s, copy, seed, rules);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let rules = if mode & 0x80 == 0 { Rules::Classic } else { Rules::CellSized };
    match mode % 3 {
        0 => {
            let mut stream = FieldStream { bytes: rest.to_vec(), pos: 0 };
            if let Ok(s) = CountMinSketch::load_with(&mut stream, i32::from(mode >> 2) % 3, LIMITS, rules) {
                check(s, rest, rules);
            }
        }
        1 => {
            // A payload whose checksum is made right, so that the opcodes are reached.
            let mut body = rest.to_vec();
            body.extend_from_slice(&9u16.to_le_bytes());
            let payload = bloomkit_core::common::payload::seal(&body);
            if let Ok(mut r) = PayloadReader::new(&payload) {
                let encver = (r.type_id & 0x3ff) as i32;
                if let Ok(s) = CountMinSketch::load_with(&mut r, encver, LIMITS, rules) {
                    check(s, rest, rules);
                }
            }
        }
        _ => {
            let argv: Vec<&[u8]> = rest.split(|&b| b == b' ').collect();
            for init in [parse_initbydim_with(&argv, rules), parse_initbyprob_with(&argv, rules)]
                .into_iter()
                .flatten()
            {
                if let Ok(s) = CountMinSketch::with_cell_size(init.dims, init.cell, LIMITS) {
                    check(s, rest, rules);
                }
            }
            let _ = parse_incrby(&argv);
            let _ = parse_incrby_signed(&argv);
            if let Ok(m) = parse_merge(&argv) {
                for i in 0..m.sources.min(64) {
                    let _ = m.weight(&argv, i);
                }
            }
        }
    }
});
