//! A header then any sequence of BF.LOADCHUNK (iterator, data) pairs.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    // [header length u8][header][ (iter i64, len u8, bytes)... ]
    let Some((&header_len, rest)) = data.split_first() else { return };
    let header_len = (header_len as usize).min(rest.len());
    let (header, mut chunks) = rest.split_at(header_len);
    let Ok(mut chain) = bloomkit_core::bf::scandump::decode_header(header, common::LIMITS) else { return };
    while chunks.len() >= 9 {
        let iter = i64::from_le_bytes(chunks[..8].try_into().unwrap());
        let len = (chunks[8] as usize).min(chunks.len() - 9);
        let _ = bloomkit_core::bf::scandump::load_chunk(&mut chain, iter, &chunks[9..9 + len]);
        chunks = &chunks[9 + len..];
    }
    common::exercise(chain);
});
