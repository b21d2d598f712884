//! `xf-craft`: items crafted against a known XF seed, for the crafted-items
//! trial (`bench/xf-crafted.py`, issue 47). An attacker who knows a key's
//! seed (a key of her own made with `XF.RESERVE ... SEED`) can pick items
//! whose hashes share their first bits, so that they all fall on one place
//! of the filter; this finds such items by trying counters, as she would.
//!
//! ```text
//! xf-craft --seed HEX32 --bits B --count N [--tag T] [--threads 2]
//! ```
//! Prints N items, one per line in hex: 8 bytes of a counter (little
//! endian) then the tag byte, each hashing (SipHash-1-3 under the seed, as
//! `XF.RESERVE ... SEED` keys hash) to a value whose first B bits are 0.
//! Different tags give disjoint items (members and never-added probes).

use std::io::Write;

use bloomkit_core::xf::{Seed, XfFilter, XfParams};
use bloomkit_core::Limits;

fn usage() -> ! {
    eprintln!("usage: xf-craft --seed HEX32 --bits B --count N [--tag T] [--threads 2]");
    std::process::exit(2)
}

fn main() {
    let (mut seed, mut bits, mut count, mut tag, mut threads) = (None, 0u32, 0usize, 0u8, 2u64);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--seed" => seed = Seed::from_hex(value.as_bytes()),
            "--bits" => bits = value.parse().unwrap_or_else(|_| usage()),
            "--count" => count = value.parse().unwrap_or_else(|_| usage()),
            "--tag" => tag = value.parse().unwrap_or_else(|_| usage()),
            "--threads" => threads = value.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let seed = seed.unwrap_or_else(|| usage());
    if !(1..=40).contains(&bits) || threads == 0 {
        usage();
    }
    let params = XfParams { error_rate: 0.01, capacity: 100, max_capacity: 1 << 36 };
    let probe = XfFilter::with_seed(params, seed, Limits::NONE).expect("a valid filter");
    // Each thread tries every `threads`-th counter and keeps its share.
    let share = count.div_ceil(threads as usize);
    let found: Vec<Vec<[u8; 9]>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let probe = &probe;
                s.spawn(move || {
                    let mut out = Vec::with_capacity(share);
                    let mut i = t;
                    while out.len() < share {
                        let mut item = [0u8; 9];
                        item[..8].copy_from_slice(&i.to_le_bytes());
                        item[8] = tag;
                        if probe.hash(&item).0 >> (128 - bits) == 0 {
                            out.push(item);
                        }
                        i += threads;
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a crafting thread")).collect()
    });
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for item in found.iter().flatten().take(count) {
        let hex: String = item.iter().map(|b| format!("{b:02x}")).collect();
        writeln!(out, "{hex}").expect("stdout");
    }
}
