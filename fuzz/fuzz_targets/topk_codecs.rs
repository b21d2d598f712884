//! TopK-TYPE input: the RDB field sequence (at encoding 0 or 1), a DUMP
//! payload, or `TOPK.*` argument words. Whatever decodes must work every
//! way the module uses a sketch, and round-trip through both encodings.
#![no_main]
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::topk::{args, TopK};
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits::at_most(1 << 22);

fn exercise(mut t: TopK) {
    for i in 0..40u32 {
        let item = (i % 13).to_le_bytes();
        let _ = t.add(&item[..(i % 5) as usize], i % 7);
        let _ = t.query(&item);
        let _ = t.count(&item);
    }
    let _ = t.list();
    let mut fields = FieldStream::default();
    t.save(&mut fields);
    let again = TopK::load(&mut FieldStream { bytes: fields.bytes, pos: 0 }, 0, Limits::NONE)
        .expect("a sketch's own RDB fields load");
    assert_eq!((again.buckets(), again.heap(), again.draws()), (t.buckets(), t.heap(), t.draws()));
    let payload = t.dump_payload();
    let again = TopK::from_payload(&payload, Limits::NONE).expect("a sketch's own DUMP loads");
    assert_eq!((again.buckets(), again.heap()), (t.buckets(), t.heap()));
    let copy = t.try_clone().expect("small sketches clone");
    assert_eq!(copy.dump_payload(), payload);
    let _ = t.size_bytes();
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 3 {
        0 => {
            let mut stream = FieldStream { bytes: rest.to_vec(), pos: 0 };
            if let Ok(t) = TopK::load(&mut stream, i32::from(mode >> 2) % 2, LIMITS) {
                exercise(t);
            }
        }
        1 => {
            if let Ok(t) = TopK::from_payload(rest, LIMITS) {
                exercise(t);
            }
        }
        _ => {
            // Words separated by 0xff, as a command's argv.
            let argv: Vec<&[u8]> = rest.split(|&b| b == 0xff).collect();
            if let Ok(params) = args::parse_reserve(&argv) {
                if let Ok(t) = TopK::new(params, LIMITS) {
                    exercise(t);
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
