//! What every Bloom target does with a filter a decoder accepted. First the
//! round-trip property (issue 31): saved again in each format (RDB fields,
//! SCANDUMP header and chunks, the filter file) it decodes to the same
//! filter, which saves to the same bytes, answers the same queries and
//! changes alike. Then it is used every way the module would, within a size
//! limit, so that an inconsistent filter shows up as a panic or an
//! out-of-bounds access.
#![allow(dead_code)]

use bloomkit_core::bf::{file, rdb, scandump as dump, Chain, Counts};
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::Limits;

pub const LIMITS: Limits = Limits::at_most(1 << 22);

/// The chain's RDB fields: everything it is (counts, options, growth, each
/// sub-filter's shape, count and bits).
pub fn fields(chain: &Chain) -> Vec<u8> {
    let mut w = FieldStream::default();
    rdb::save(chain, &mut w);
    w.bytes
}

/// The round-trip property in every format; returns the RDB copy.
pub fn round_trip(chain: &Chain) -> Chain {
    let saved = fields(chain);
    let again = rdb::load(
        &mut FieldStream { bytes: saved.clone(), pos: 0 },
        rdb::ENCODING_VERSION,
        Limits::NONE,
        Counts::Checked,
    )
    .expect("a decoded filter's RDB fields load");
    assert!(fields(&again) == saved, "load(save(x)) saves as x");
    let header = dump::encode_header(chain);
    let mut copy = dump::decode_header(&header, Limits::NONE).expect("a decoded filter's header decodes");
    assert_eq!(dump::encode_header(&copy), header, "the header round-trips");
    for (iter, data) in dump::chunks(chain) {
        dump::load_chunk(&mut copy, iter, data).expect("a decoded filter's chunks load");
    }
    assert!(fields(&copy) == saved, "SCANDUMP then LOADCHUNK gives the same filter");
    let mut bytes = Vec::new();
    file::write(chain, &mut bytes).expect("a decoded filter writes to a file");
    let from_file = file::read(bytes.as_slice(), Limits::NONE).expect("its file reads");
    assert!(fields(&from_file) == saved, "the filter file gives the same filter");
    again
}

/// Two filters that must be the same answer every command the same way,
/// before and after the same writes, and end the same.
pub fn same_answers(mut a: Chain, mut b: Chain) {
    let items: Vec<[u8; 4]> = (0..40u32).map(u32::to_be_bytes).collect();
    for item in &items {
        assert_eq!(a.contains(item), b.contains(item), "BF.EXISTS");
    }
    for i in 0..32u32 {
        let item = i.to_le_bytes();
        assert_eq!(a.add(&item, LIMITS), b.add(&item, LIMITS), "BF.ADD");
    }
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    a.add_each(&items, LIMITS, |r| {
        let go_on = r.is_ok();
        ra.push(r);
        go_on
    });
    b.add_each(&items, LIMITS, |r| {
        let go_on = r.is_ok();
        rb.push(r);
        go_on
    });
    assert_eq!(ra, rb, "BF.MADD");
    let (mut fa, mut fb) = (Vec::new(), Vec::new());
    a.contains_each(&items, |x| fa.push(x));
    b.contains_each(&items, |x| fb.push(x));
    assert_eq!(fa, fb, "BF.MEXISTS");
    assert!(fields(&a) == fields(&b), "the same writes leave the same filter");
    assert_eq!(
        (a.items(), a.capacity(), a.size_bytes()),
        (b.items(), b.capacity(), b.size_bytes()),
        "BF.INFO"
    );
    let (ea, eb) = (a.estimated_false_positive_rate(), b.estimated_false_positive_rate());
    assert!(ea.to_bits() == eb.to_bits(), "the estimated rate");
    // What the writes made round-trips too.
    round_trip(&a);
    let _ = dump::chunks(&a).count();
}

pub fn exercise(chain: Chain) {
    let copy = round_trip(&chain);
    same_answers(chain, copy);
}
