//! CMSk-TYPE input: the RDB field sequence, a DUMP payload (opcodes, LZF
//! strings), or a CMS.* command's arguments. Whatever decodes must work
//! every way the module uses a sketch, within the size limit; every parser
//! answers without panicking.
#![no_main]
use bloomkit_core::cms::args::{parse_incrby, parse_initbydim, parse_initbyprob, parse_merge};
use bloomkit_core::cms::{CountMinSketch, Source};
use bloomkit_core::common::dump::PayloadReader;
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits::at_most(1 << 22);

fn exercise(mut s: CountMinSketch) {
    for i in 0..32u32 {
        let item = i.to_le_bytes();
        let estimate = s.increment(&item, u64::from(i) * 0x1000_0001);
        assert!(s.query(&item) == estimate, "an increment's estimate is the query's");
    }
    let copy = s.try_clone().expect("a small copy");
    let _ = s.merge(&[(Source::Destination, 2), (Source::Other(&copy), -1)]);
    let mut fields = FieldStream::default();
    s.save(&mut fields);
    let again = CountMinSketch::load(&mut FieldStream { bytes: fields.bytes, pos: 0 }, 0, Limits::NONE)
        .expect("a sketch's own RDB fields load");
    assert!(again == s);
    let payload = s.dump_payload();
    let mut r = PayloadReader::new(&payload).expect("its own payload frames");
    assert!(CountMinSketch::load(&mut r, 0, Limits::NONE).expect("its own payload loads") == s);
    let _ = s.size_bytes();
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 3 {
        0 => {
            let mut stream = FieldStream { bytes: rest.to_vec(), pos: 0 };
            if let Ok(s) = CountMinSketch::load(&mut stream, i32::from(mode >> 2) % 2, LIMITS) {
                exercise(s);
            }
        }
        1 => {
            // A payload whose checksum is made right, so that the opcodes are reached.
            let mut body = rest.to_vec();
            body.extend_from_slice(&9u16.to_le_bytes());
            let payload = bloomkit_core::common::payload::seal(&body);
            if let Ok(mut r) = PayloadReader::new(&payload) {
                if let Ok(s) = CountMinSketch::load(&mut r, 0, LIMITS) {
                    exercise(s);
                }
            }
        }
        _ => {
            let argv: Vec<&[u8]> = rest.split(|&b| b == b' ').collect();
            let _ = parse_initbydim(&argv);
            let _ = parse_initbyprob(&argv);
            let _ = parse_incrby(&argv);
            if let Ok(m) = parse_merge(&argv) {
                for i in 0..m.sources.min(64) {
                    let _ = m.weight(&argv, i);
                }
            }
        }
    }
});
