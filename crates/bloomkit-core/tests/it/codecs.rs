//! The decoders trust nothing: arbitrary or mutated input is refused or
//! yields a filter that works, never a panic or an out-of-bounds probe.

use bloomkit_core::bf::{scandump as dump, BfError, Chain, ChainParams, Counts};
use bloomkit_core::Limits;
use bloomkit_core::{bf::rdb, common::fields::FieldStream};
use proptest::prelude::*;

const LIMITS: Limits = Limits::at_most(1 << 20);

fn sample() -> Chain {
    let p = ChainParams { capacity: 8, error: 0.05, expansion: 2, scaling: true };
    let mut c = Chain::new(p, Limits::NONE).unwrap();
    for i in 0..60u32 {
        c.add(&i.to_le_bytes(), Limits::NONE).unwrap();
    }
    c
}

/// A decoded chain must answer, grow and dump without panicking.
fn exercise(mut chain: Chain) {
    for i in 0..50u32 {
        let item = i.to_be_bytes();
        let _ = chain.add(&item, LIMITS);
        let _ = chain.contains(&item);
    }
    let _ = dump::encode_header(&chain);
    let _ = dump::chunks(&chain).count();
    let _ = chain.estimated_false_positive_rate();
}

fn rdb_bytes(chain: &Chain) -> Vec<u8> {
    let mut w = FieldStream::default();
    rdb::save(chain, &mut w);
    w.bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_headers(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(chain) = dump::decode_header(&bytes, LIMITS) {
            exercise(chain);
        }
    }

    #[test]
    fn mutated_headers(flips in proptest::collection::vec((any::<usize>(), 1u8..), 1..6)) {
        let mut header = dump::encode_header(&sample());
        for (at, mask) in flips {
            let i = at % header.len();
            header[i] ^= mask;
        }
        if let Ok(chain) = dump::decode_header(&header, LIMITS) {
            exercise(chain);
        }
    }

    #[test]
    fn arbitrary_chunks(iter in any::<i64>(), data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut chain = sample();
        let _ = dump::load_chunk(&mut chain, iter, &data);
        exercise(chain);
    }

    #[test]
    fn mutated_rdb_fields(flips in proptest::collection::vec((any::<usize>(), 1u8..), 1..6), encver in 0i32..6) {
        let mut bytes = rdb_bytes(&sample());
        for (at, mask) in flips {
            let i = at % bytes.len();
            bytes[i] ^= mask;
        }
        if let Ok(chain) = rdb::load(&mut FieldStream { bytes, pos: 0 }, encver, LIMITS, Counts::Checked) {
            exercise(chain);
        }
    }

    #[test]
    fn arbitrary_rdb_fields(bytes in proptest::collection::vec(any::<u8>(), 0..400), encver in 0i32..5) {
        if let Ok(chain) = rdb::load(&mut FieldStream { bytes, pos: 0 }, encver, LIMITS, Counts::Checked) {
            exercise(chain);
        }
    }
}

/// Found by fuzzing: item counts near 2^64 in a header once wrapped into a
/// panic, then into a wrapped total. A sub-filter holding more items than its
/// capacity (or a total other than the sum) is now refused as bad data, as
/// RedisBloom 8 refuses it, so no count can wrap.
#[test]
fn item_counts_near_2_64_in_a_header_are_refused() {
    let mut header = dump::encode_header(&sample());
    header[..8].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
    header[20 + 16..20 + 24].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
    assert_eq!(dump::decode_header(&header, LIMITS).err(), Some(BfError::BadData));
}

#[test]
fn every_truncated_rdb_value_is_refused() {
    let bytes = rdb_bytes(&sample());
    for len in 0..bytes.len() {
        let r =
            rdb::load(&mut FieldStream { bytes: bytes[..len].to_vec(), pos: 0 }, 4, LIMITS, Counts::Checked);
        assert!(r.is_err(), "truncated to {len}");
    }
}

#[test]
fn every_truncated_header_is_refused() {
    let header = dump::encode_header(&sample());
    for len in 0..header.len() {
        assert!(dump::decode_header(&header[..len], LIMITS).is_err(), "truncated to {len}");
    }
}
