//! TDIS-TYPE input: the RDB field sequence of a t-digest, or TDIGEST.*
//! arguments. Whatever decodes must work every way the module uses a
//! digest (adds, merges, every estimate, save and load again), within the
//! size limit, without a panic.
#![no_main]
use bloomkit_core::common::fields::FieldStream;
use bloomkit_core::tdigest::{args, TDigest};
use bloomkit_core::Limits;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits::at_most(1 << 22);

fn answers(t: &mut TDigest) -> Vec<u64> {
    let before = t.try_clone().expect("small digests clone");
    let Ok(e) = t.estimates() else { return Vec::new() };
    let mut out: Vec<f64> = e.quantiles(&[0.0, 0.2, 0.2, 0.1, 0.5, 1.0]);
    out.push(e.cdf(1.0));
    out.push(e.trimmed_mean(0.1, 0.9));
    out.extend([e.rank(0.5, false), e.rank(0.5, true)].map(|r| r as f64));
    out.push(e.by_rank(1, false));
    out.push(e.by_rank(2, true));
    out.extend([e.min_reply(), e.max_reply(), e.size() as f64]);
    assert_eq!(*t, before, "estimates change no value");
    out.iter().map(|v| v.to_bits()).collect()
}

/// Saved, loaded and saved again: the same bytes, the same digest, the
/// same answers (issue 31: a payload is accepted only if it round-trips).
fn round_trip(t: &mut TDigest) {
    let mut fields = FieldStream::default();
    t.save(&mut fields);
    let mut again = TDigest::load(&mut FieldStream { bytes: fields.bytes.clone(), pos: 0 }, Limits::NONE)
        .expect("a digest's own RDB fields load");
    let mut twice = FieldStream::default();
    again.save(&mut twice);
    assert_eq!(twice.bytes, fields.bytes, "save, load and save again give the same fields");
    assert_eq!(answers(&mut again), answers(t), "a loaded copy answers the same");
    let payload = t.estimated().dump_payload(10);
    assert_eq!(again.dump_payload(10), payload, "the copy's DUMP is the same");
}

fn exercise(mut t: TDigest, seed: &[u8]) {
    round_trip(&mut t);
    for &b in seed.iter().take(64) {
        let _ = t.add(f64::from(b) - 100.0, 1);
    }
    round_trip(&mut t);
    if let Ok(mut copy) = t.try_clone() {
        let _ = copy.merge_from(&mut t);
        round_trip(&mut copy);
    }
    let _ = t.settle(1);
    round_trip(&mut t);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 3 {
        0 => {
            if let Ok(t) = TDigest::load(&mut FieldStream { bytes: rest.to_vec(), pos: 0 }, LIMITS) {
                exercise(t, rest);
            }
        }
        1 => {
            // A compression, then values.
            let (c, values) = rest.split_at(rest.len().min(2));
            let c = c.iter().fold(0u32, |a, &b| a * 256 + u32::from(b)) % 5000 + 1;
            if let Ok(mut t) = TDigest::new(f64::from(c), LIMITS) {
                for chunk in values.chunks(8) {
                    let mut b = [0u8; 8];
                    b[..chunk.len()].copy_from_slice(chunk);
                    let v = f64::from_le_bytes(b);
                    if v.is_finite() {
                        let _ = t.add(v, 1);
                    }
                }
                exercise(t, &[]);
            }
        }
        _ => {
            let argv: Vec<&[u8]> = rest.split(|&b| b == b' ').collect();
            if argv.len() >= 4 {
                let _ = args::parse_merge(&argv);
                let _ = args::parse_trimmed_mean(&argv);
            }
            if argv.len() == 2 || argv.len() == 4 {
                let _ = args::parse_create(&argv);
            }
            let values = argv.get(2..).unwrap_or(&[]);
            let _ = args::parse_add_values(values);
            let _ = args::parse_quantiles(values);
            let _ = args::parse_cdf_values(values);
            let _ = args::parse_rank_values(values);
            let _ = args::parse_ranks(values);
        }
    }
});
