//! bloomfltr input (valkey-bloom's objects): the RDB field sequence, a DUMP
//! payload (opcodes, LZF strings), a `BF.LOAD` blob, or a `BF.*` command's
//! arguments as valkey-bloom's dialect parses them. Whatever decodes must
//! round-trip (issue 31): saved again (RDB fields, DUMP, blob) it decodes
//! to the same object, which saves to the same bytes, answers the same
//! queries and changes alike; and it must work every way the module uses
//! an object, within the size limit. Every parser answers without panicking.
#![no_main]
use bloomkit_core::common::dump::{PayloadReader, PayloadWriter};
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::vbloom::{parse_insert, parse_reserve, InfoField, Object, VbDefaults, FIXED_SEED};
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits::at_most(1 << 22);

fn fields(o: &Object) -> Vec<u8> {
    let mut w = FieldStream::default();
    o.save(&mut w);
    w.bytes
}

/// The round-trip property: the object's RDB fields, DUMP payload and
/// `BF.LOAD` blob load to the same object, whose own save is the same
/// bytes (the RDB fields and the blob together are everything it is). The
/// `Size` figure is compared only between copies made through the same
/// format: valkey-bloom counts its vector's slots, which an RDB load and a
/// `BF.LOAD` leave different, and bloomkit reports what it would.
fn round_trip(o: &Object) -> Object {
    let saved = fields(o);
    let blob = o.encode_blob().expect("a small blob");
    let again = Object::load(&mut FieldStream { bytes: saved.clone(), pos: 0 }, 1, Limits::NONE)
        .expect("a decoded object's RDB fields load");
    assert!(fields(&again) == saved, "load(save(x)) saves as x");
    assert!(again.encode_blob().unwrap() == blob, "load(save(x)) has x's blob");
    let mut w = PayloadWriter::new(0);
    o.save(&mut w);
    let payload = w.finish();
    let mut r = PayloadReader::new(&payload).expect("its own payload frames");
    let restored = Object::load(&mut r, 1, Limits::NONE).expect("a decoded object's DUMP loads");
    assert!(r.at_end(), "nothing after the value");
    assert!(fields(&restored) == saved, "RESTORE(DUMP(x)) saves as x");
    assert!(restored.size() == again.size(), "RDB copies count the same size");
    let from_blob = Object::decode_blob(&blob, Limits::NONE).expect("a decoded object's blob decodes");
    assert!(from_blob.encode_blob().unwrap() == blob, "a blob round-trips");
    assert!(fields(&from_blob) == saved, "BF.LOAD(blob(x)) saves as x");
    let blob_again = Object::decode_blob(&from_blob.encode_blob().unwrap(), Limits::NONE).unwrap();
    assert!(blob_again.size() == from_blob.size(), "blob copies count the same size");
    again
}

/// Two objects that must be the same answer every command the same way,
/// before and after the same writes, and end the same.
fn same_answers(mut a: Object, mut b: Object, seed: &[u8]) {
    let items: Vec<Vec<u8>> = (0..64u32)
        .map(|i| i.to_le_bytes().to_vec())
        .chain(seed.chunks(4).take(16).map(<[u8]>::to_vec))
        .collect();
    for item in &items {
        assert!(a.contains(item) == b.contains(item), "BF.EXISTS");
    }
    for item in &items {
        let r = a.add(item, LIMITS);
        assert!(r == b.add(item, LIMITS), "BF.ADD");
        if r == Ok(true) {
            assert!(a.contains(item), "an added item is present");
        }
    }
    let batch = [b"a".as_slice(), b"b", b"c"];
    assert!(a.check_room(&batch) == b.check_room(&batch), "room for a batch");
    assert!(a.max_scaled_capacity(LIMITS) == b.max_scaled_capacity(LIMITS), "MAXSCALEDCAPACITY");
    assert!((a.items(), a.capacity()) == (b.items(), b.capacity()), "BF.CARD, BF.INFO Capacity");
    assert!(a.creation() == b.creation(), "the creation replicated");
    assert!(fields(&a) == fields(&b), "the same adds leave the same object");
    // What the writes made round-trips too.
    round_trip(&a);
    let copy = a.try_clone().expect("a small copy");
    assert!(fields(&copy) == fields(&a) && copy.size() == a.size(), "COPY");
}

fn check(o: Object, seed: &[u8]) {
    let copy = round_trip(&o);
    same_answers(o, copy, seed);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 4 {
        0 => {
            let mut stream = FieldStream { bytes: rest.to_vec(), pos: 0 };
            if let Ok(o) = Object::load(&mut stream, i32::from(mode >> 2) % 3, LIMITS) {
                check(o, rest);
            }
        }
        1 => {
            // A payload whose checksum is made right, so that the opcodes are reached.
            let mut body = rest.to_vec();
            body.extend_from_slice(&9u16.to_le_bytes());
            let payload = bloomkit_core::common::payload::seal(&body);
            if let Ok(mut r) = PayloadReader::new(&payload) {
                if let Ok(o) = Object::load(&mut r, 1, LIMITS) {
                    check(o, rest);
                }
            }
        }
        2 => {
            if let Ok(o) = Object::decode_blob(rest, LIMITS) {
                check(o, rest);
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
                    check(o, rest);
                }
            }
            if let Some(field) = argv.last() {
                let _ = InfoField::parse(field);
            }
        }
    }
});
