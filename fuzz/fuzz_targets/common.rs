//! What every target does with a filter a decoder accepted: use it every way
//! the module would, within a size limit, so that an inconsistent filter
//! shows up as a panic or an out-of-bounds access.

use bloomkit_core::bf::{scandump as dump, Chain};
use bloomkit_core::Limits;

pub const LIMITS: Limits = Limits::at_most(1 << 22);

pub fn exercise(mut chain: Chain) {
    for i in 0..32u32 {
        let item = i.to_le_bytes();
        let _ = chain.add(&item, LIMITS);
        let _ = chain.contains(&item);
    }
    let items: Vec<[u8; 4]> = (0..40u32).map(u32::to_be_bytes).collect();
    chain.add_each(&items, LIMITS, |r| r.is_ok());
    chain.contains_each(&items, |_| {});
    let header = dump::encode_header(&chain);
    let copy = dump::decode_header(&header, Limits::NONE).expect("a filter's own header decodes");
    assert_eq!(dump::encode_header(&copy), header);
    let _ = dump::chunks(&chain).count();
    let _ = chain.capacity();
    let _ = chain.size_bytes();
    let _ = chain.estimated_false_positive_rate();
}
