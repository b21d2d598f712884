//! bloomfltr input (valkey-bloom's objects): the RDB field sequence, a DUMP
//! payload (opcodes, LZF strings), a `BF.LOAD` blob, or a `BF.*` command's
//! arguments as valkey-bloom's dialect parses them. Whatever decodes must
//! work every way the module uses an object, within the size limit; every
//! parser answers without panicking.
#![no_main]
use bloomkit_core::common::dump::PayloadReader;
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::vbloom::{parse_insert, parse_reserve, InfoField, Object, VbDefaults, FIXED_SEED};
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits::at_most(1 << 22);

fn exercise(mut o: Object) {
    for i in 0..64u32 {
        let item = i.to_le_bytes();
        if o.add(&item, LIMITS) == Ok(true) {
            assert!(o.contains(&item), "an added item is present");
        }
    }
    let _ = o.check_room(&[b"a".as_slice(), b"b", b"c"]);
    let _ = o.max_scaled_capacity(LIMITS);
    let blob = o.encode_blob().expect("a small blob");
    let again = Object::decode_blob(&blob, Limits::NONE).expect("its own blob decodes");
    assert!(again.encode_blob().unwrap() == blob, "a blob round-trips");
    let mut fields = FieldStream::default();
    o.save(&mut fields);
    let loaded = Object::load(&mut FieldStream { bytes: fields.bytes, pos: 0 }, 1, Limits::NONE)
        .expect("an object's own RDB fields load");
    assert!(loaded.items() == o.items() && loaded.capacity() == o.capacity());
    let copy = o.try_clone().expect("a small copy");
    assert!(copy.encode_blob().unwrap() == blob);
    let _ = (o.size(), o.creation());
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 4 {
        0 => {
            let mut stream = FieldStream { bytes: rest.to_vec(), pos: 0 };
            if let Ok(o) = Object::load(&mut stream, i32::from(mode >> 2) % 3, LIMITS) {
                exercise(o);
            }
        }
        1 => {
            // A payload whose checksum is made right, so that the opcodes are reached.
            let mut body = rest.to_vec();
            body.extend_from_slice(&9u16.to_le_bytes());
            let payload = bloomkit_core::common::payload::seal(&body);
            if let Ok(mut r) = PayloadReader::new(&payload) {
                if let Ok(o) = Object::load(&mut r, 1, LIMITS) {
                    exercise(o);
                }
            }
        }
        2 => {
            if let Ok(o) = Object::decode_blob(rest, LIMITS) {
                exercise(o);
            }
        }
        _ => {
            let argv: Vec<&[u8]> = rest.split(|&b| b == b' ').collect();
            let defaults = VbDefaults { random_seed: mode & 4 == 0, ..VbDefaults::VALKEY_BLOOM };
            for parsed in [
                parse_reserve(&argv, &defaults).ok(),
                parse_insert(&argv, &defaults, LIMITS).ok().map(|i| i.creation),
            ]
            .into_iter()
            .flatten()
            {
                if let Ok(o) = Object::create(&parsed, &FIXED_SEED, LIMITS) {
                    exercise(o);
                }
            }
            if let Some(field) = argv.last() {
                let _ = InfoField::parse(field);
            }
        }
    }
});
