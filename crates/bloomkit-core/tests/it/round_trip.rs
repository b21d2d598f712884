//! Issue 31: a payload is accepted only if it round-trips. For every
//! family's stored formats, any one-to-three-byte change of a real value is
//! refused, or loads to a value that saves to bytes which load to the same
//! value and save to the same bytes again, answering the same meanwhile.
//! (The fuzz targets check the same property on arbitrary input.)

use bloomkit_core::apbf::{Apbf, ApbfParams, Window, HEADER_LEN, MAGIC_V1};
use bloomkit_core::bf::{rdb, scandump, Chain, ChainParams, Counts};
use bloomkit_core::cf::{CuckooFilter, CuckooParams, Lookup};
use bloomkit_core::cms::{CountMinSketch, Dimensions};
use bloomkit_core::common::fields::{FieldStream, FieldWriter};
use bloomkit_core::topk::{TopK, TopkParams};
use bloomkit_core::vbloom::{Object, FIXED_SEED};
use bloomkit_core::Limits;
use proptest::prelude::*;

type Flips = Vec<(usize, u8)>;

/// What a changed value may ask for: a changed size must not make a case
/// allocate gigabytes.
const LIMITS: Limits = Limits::at_most(1 << 22);

fn flipped(good: &[u8], flips: &Flips) -> Vec<u8> {
    let mut bytes = good.to_vec();
    for &(at, mask) in flips {
        let i = at % bytes.len();
        bytes[i] ^= mask;
    }
    bytes
}

fn stream(bytes: Vec<u8>) -> FieldStream {
    FieldStream { bytes, pos: 0 }
}

fn saved(save: impl FnOnce(&mut dyn FieldWriter)) -> Vec<u8> {
    let mut w = FieldStream::default();
    save(&mut w);
    w.bytes
}

fn probes() -> Vec<Vec<u8>> {
    let mut items: Vec<Vec<u8>> = (0..40u32).map(|i| i.to_le_bytes().to_vec()).collect();
    items.extend([b"".to_vec(), b"a".to_vec(), b"a\0b".to_vec()]);
    items
}

fn topk_sample() -> Vec<u8> {
    let params = TopkParams { k: 6, width: 8, depth: 3, decay: 0.9 };
    let mut t = TopK::new(params, Limits::NONE).unwrap();
    for (i, item) in probes().iter().take(9).enumerate() {
        t.add(item, i as u32 % 3);
    }
    saved(|w| t.save(w))
}

fn cms_sample() -> Vec<u8> {
    let mut s = CountMinSketch::new(Dimensions { width: 7, depth: 3 }, Limits::NONE).unwrap();
    for (i, item) in probes().iter().enumerate() {
        s.increment(item, i as u64 * 1000);
    }
    saved(|w| s.save(w))
}

fn cf_sample() -> Vec<u8> {
    let params = CuckooParams { capacity: 16, bucket_size: 2, max_iterations: 20, expansion: 2 };
    let mut f = CuckooFilter::new(params, Limits::NONE).unwrap();
    for item in probes() {
        f.insert(&Lookup::new(&item), Limits::NONE).unwrap();
    }
    f.delete(&Lookup::new(b"a"));
    saved(|w| f.save(w))
}

fn bf_chain() -> Chain {
    let params = ChainParams { capacity: 8, error: 0.05, expansion: 2, scaling: true };
    let mut c = Chain::new(params, Limits::NONE).unwrap();
    for item in probes() {
        c.add(&item, Limits::NONE).unwrap();
    }
    c
}

fn apbf_sample(window: Window) -> Vec<u8> {
    let params = ApbfParams { error: 0.05, capacity: 20, window };
    let mut f = Apbf::new(params, 1_000, Limits::NONE).unwrap();
    for (i, item) in probes().iter().enumerate() {
        f.add(item, 1_000 + 50 * i as u64);
    }
    f.encode()
}

/// The same filter in the first format (read, never written): the old
/// magic, ten fields, a body without the add times.
fn apbf_first_format(window: Window) -> Vec<u8> {
    let v2 = apbf_sample(window);
    let f = Apbf::decode(&v2, None).unwrap();
    let mut v1 = MAGIC_V1.to_vec();
    v1.extend_from_slice(&v2[8..8 + 10 * 8]);
    let body = &v2[HEADER_LEN..];
    v1.extend_from_slice(&body[..body.len() - 8 * f.shape().slices() as usize]);
    v1
}

fn vbloom_sample() -> Object {
    let mut o = Object::new(8, 0.05, 0.5, 2, &FIXED_SEED, Limits::NONE).unwrap();
    for item in probes() {
        o.add(&item, Limits::NONE).unwrap();
    }
    o
}

fn check_topk(bytes: Vec<u8>) {
    let Ok(mut t) = TopK::load(&mut stream(bytes), 0, LIMITS) else { return };
    let once = saved(|w| t.save(w));
    let mut back = TopK::load(&mut stream(once.clone()), 0, Limits::NONE).expect("its save loads");
    assert_eq!((back.buckets(), back.heap(), back.draws()), (t.buckets(), t.heap(), t.draws()));
    assert_eq!(saved(|w| back.save(w)), once);
    for item in probes() {
        assert_eq!(t.add(&item, 1), back.add(&item, 1), "the expelled item");
        assert_eq!((t.query(&item), t.count(&item)), (back.query(&item), back.count(&item)));
    }
}

fn check_cms(bytes: Vec<u8>) {
    let Ok(s) = CountMinSketch::load(&mut stream(bytes), 0, LIMITS) else { return };
    let once = saved(|w| s.save(w));
    let back = CountMinSketch::load(&mut stream(once.clone()), 0, Limits::NONE).expect("its save loads");
    assert_eq!(back, s);
    assert_eq!(saved(|w| back.save(w)), once);
}

fn check_cf(bytes: Vec<u8>, encver: i32) {
    let Ok(mut f) = CuckooFilter::load(&mut stream(bytes), encver, LIMITS) else { return };
    let once = saved(|w| f.save(w));
    let mut back = CuckooFilter::load(&mut stream(once.clone()), 4, Limits::NONE).expect("its save loads");
    assert_eq!(saved(|w| back.save(w)), once);
    assert_eq!(back.encode_header(), f.encode_header());
    for item in probes() {
        let l = Lookup::new(&item);
        assert_eq!((f.contains(&l), f.count(&l)), (back.contains(&l), back.count(&l)));
        assert_eq!(f.insert(&l, LIMITS), back.insert(&l, LIMITS));
    }
    assert_eq!(saved(|w| back.save(w)), saved(|w| f.save(w)));
}

fn check_bf(chain: Result<Chain, bloomkit_core::bf::BfError>) {
    let Ok(mut c) = chain else { return };
    let once = saved(|w| rdb::save(&c, w));
    let mut back = rdb::load(&mut stream(once.clone()), rdb::ENCODING_VERSION, Limits::NONE, Counts::Checked)
        .expect("its save loads");
    assert_eq!(saved(|w| rdb::save(&back, w)), once);
    assert_eq!(scandump::encode_header(&back), scandump::encode_header(&c));
    for item in probes() {
        assert_eq!(c.contains(&item), back.contains(&item));
        assert_eq!(c.add(&item, LIMITS), back.add(&item, LIMITS));
    }
}

fn check_apbf(bytes: &[u8]) {
    let Ok(mut f) = Apbf::decode(bytes, LIMITS.max_bytes) else { return };
    let once = f.encode();
    let mut back = Apbf::decode(&once, None).expect("its encoding decodes");
    assert_eq!(back, f);
    assert_eq!(back.encode(), once);
    for (i, item) in probes().iter().enumerate() {
        let t = 3_000 + 100 * i as u64;
        assert_eq!(f.contains(item, t), back.contains(item, t));
        assert_eq!(f.add(item, t), back.add(item, t));
    }
    assert_eq!(f, back);
}

fn check_vbloom(object: Result<Object, bloomkit_core::vbloom::ValkeyError>) {
    let Ok(mut o) = object else { return };
    let once = saved(|w| o.save(w));
    let mut back = Object::load(&mut stream(once.clone()), 1, Limits::NONE).expect("its save loads");
    assert_eq!(saved(|w| back.save(w)), once);
    let blob = o.encode_blob().unwrap();
    let from_blob = Object::decode_blob(&blob, Limits::NONE).expect("its blob decodes");
    assert_eq!(from_blob.encode_blob().unwrap(), blob);
    assert_eq!(saved(|w| from_blob.save(w)), once);
    for item in probes() {
        assert_eq!(o.contains(&item), back.contains(&item));
        assert_eq!(o.add(&item, LIMITS), back.add(&item, LIMITS));
    }
    assert_eq!(saved(|w| back.save(w)), saved(|w| o.save(w)));
}

fn flips() -> impl Strategy<Value = Flips> {
    proptest::collection::vec((any::<usize>(), 1u8..), 1..4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 800, ..ProptestConfig::default() })]

    #[test]
    fn topk_values(f in flips()) {
        check_topk(flipped(&topk_sample(), &f));
    }

    #[test]
    fn cms_values(f in flips()) {
        check_cms(flipped(&cms_sample(), &f));
    }

    #[test]
    fn cuckoo_values(f in flips(), encver in 0i32..5) {
        check_cf(flipped(&cf_sample(), &f), encver);
    }

    #[test]
    fn bloom_values_and_headers(f in flips()) {
        let c = bf_chain();
        let bytes = flipped(&saved(|w| rdb::save(&c, w)), &f);
        check_bf(rdb::load(&mut stream(bytes), rdb::ENCODING_VERSION, LIMITS, Counts::Checked));
        let header = flipped(&scandump::encode_header(&c), &f);
        check_bf(scandump::decode_header(&header, LIMITS));
    }

    #[test]
    fn apbf_states(f in flips(), timed in any::<bool>()) {
        let window = if timed { Window::Time { millis: 10_000 } } else { Window::Count };
        check_apbf(&flipped(&apbf_sample(window), &f));
        check_apbf(&flipped(&apbf_first_format(window), &f));
    }

    #[test]
    fn vbloom_values_and_blobs(f in flips()) {
        let o = vbloom_sample();
        let bytes = flipped(&saved(|w| o.save(w)), &f);
        check_vbloom(Object::load(&mut stream(bytes), 1, LIMITS));
        check_vbloom(Object::decode_blob(&flipped(&o.encode_blob().unwrap(), &f), LIMITS));
    }
}
