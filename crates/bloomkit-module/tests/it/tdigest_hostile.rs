//! Hostile input to TDIGEST.*: extreme parameters and damaged DUMP
//! payloads, on a server under an address-space limit. Every case is
//! refused with a clear error or loads as a consistent digest; nothing is
//! created by a refusal, the server stays up, and untouched keys keep
//! their digests.

use bloomkit_testkit::hostile::{self, assert_refused, restore_damaged, RdbValue};
use bloomkit_testkit::{Conn, Reply, Server};

#[test]
fn extreme_parameters_are_refused() {
    let (_s, mut c, watch) = hostile::start(Server::Redis);
    assert_refused(
        &mut c,
        &watch,
        &[
            ("TDIGEST.CREATE k COMPRESSION 9223372036854775807", "allocation failed"),
            ("TDIGEST.CREATE k COMPRESSION 357913940", "allocation failed"),
            ("TDIGEST.CREATE k COMPRESSION 357913939", "more than bf.max-filter-bytes"),
            ("TDIGEST.CREATE k COMPRESSION 100000000", "more than bf.max-filter-bytes"),
            ("TDIGEST.CREATE k COMPRESSION 0", "positive integer"),
            ("TDIGEST.CREATE k COMPRESSION 1e3", "error parsing compression"),
            ("TDIGEST.MERGE k 1 k", "key does not exist"),
            ("TDIGEST.MERGE k 9223372036854775807 a", "wrong number of arguments"),
        ],
        "extreme parameters",
    );
    // Within the limit but beyond what the process may map: refused, not a crash.
    hostile::refused_past_the_address_space(&mut c, &watch, &["TDIGEST.CREATE k COMPRESSION 300000000"]);
    // A MERGE into a digest too large for the limit.
    c.ok("TDIGEST.CREATE a COMPRESSION 10");
    c.ok("TDIGEST.ADD a 1 2 3");
    c.ok("CONFIG SET bf.max-filter-bytes 1000");
    let reply = c.cmd("TDIGEST.MERGE k 1 a COMPRESSION 100");
    assert!(reply.error_text().contains("more than bf.max-filter-bytes"), "{reply:?}");
    c.ok("CONFIG SET bf.max-filter-bytes 4294967296");
    // Weights that overflow: refused, the digest keeps working.
    c.ok("TDIGEST.ADD a 4");
    let overflows = (0..70)
        .filter(|_| c.cmd("TDIGEST.MERGE a 2 a a") == Reply::Error("ERR T-Digest: overflow detected".into()))
        .count();
    assert!(overflows > 0, "the weights overflowed");
    assert!(!c.cmd("TDIGEST.QUANTILE a 0.5").is_error());
    watch.check(&mut c, "overflows");
}

/// A digest that works: no command answers an internal error, and its own
/// DUMP restores.
fn exercise(c: &mut Conn, key: &str, what: &str) {
    let commands = [
        vec!["TDIGEST.INFO", key],
        vec!["TDIGEST.QUANTILE", key, "0", "0.3", "0.5", "1"],
        vec!["TDIGEST.CDF", key, "-1e308", "0", "3", "1e308"],
        vec!["TDIGEST.RANK", key, "2", "1e300"],
        vec!["TDIGEST.BYREVRANK", key, "0", "1", "2", "100"],
        vec!["TDIGEST.TRIMMED_MEAN", key, "0.1", "0.9"],
        vec!["TDIGEST.ADD", key, "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"],
        vec!["TDIGEST.MERGE", "merged", "2", key, key],
    ];
    hostile::exercise_commands(c, key, what, &commands, |e| !e.contains("internal error"));
    c.call(&["DEL", key, "merged"]);
}

#[test]
fn damaged_payloads_are_refused_or_consistent() {
    let (_s, mut c, watch) = hostile::start(Server::Redis);
    c.ok("TDIGEST.CREATE src COMPRESSION 1");
    c.ok("TDIGEST.ADD src 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20");
    let payload = c.call(&["DUMP", "src"]).as_bytes().to_vec();
    let (refused, loaded) = restore_damaged(&mut c, &watch, &payload, "d", exercise);
    eprintln!("damaged payloads: {refused} refused, {loaded} loaded");

    // Hand-made values: a capacity that is not the compression's, node
    // counts past it, NaN, a huge compression (refused before allocating).
    let bad = |compression: f64, cap: u64, merged: u64, unmerged: u64, mean: f64| {
        let mut v = RdbValue(vec![7, 0x81]);
        v.0.extend_from_slice(&0x4c3212f9360f1000u64.to_be_bytes());
        for d in [compression, 1.0, 2.0] {
            v.double(d);
        }
        for u in [cap, merged, unmerged, 1] {
            v.unsigned(u);
        }
        v.double(merged as f64);
        v.double(unmerged as f64);
        for _ in 0..merged.min(4) {
            v.double(mean);
        }
        for _ in 0..merged.min(4) {
            v.double(1.0);
        }
        v.0.push(0);
        v.0.extend_from_slice(&10u16.to_le_bytes());
        bloomkit_testkit::hostile::seal(&v.0)
    };
    for (what, p) in [
        ("cap overwritten", bad(10.0, 1_000_000_000, 2, 0, 1.0)),
        ("merged past cap", bad(1.0, 16, 17, 0, 1.0)),
        ("unmerged past cap", bad(1.0, 16, 2, 15, 1.0)),
        ("NaN compression", bad(f64::NAN, 16, 2, 0, 1.0)),
        ("huge compression", bad(3e8, 1_800_000_010, 0, 0, 1.0)),
        ("negative compression", bad(-5.0, 16, 0, 0, 1.0)),
    ] {
        let reply = c.call(&[b"RESTORE".to_vec(), b"k".to_vec(), b"0".to_vec(), p]);
        assert!(reply.error_text().contains("Bad data format"), "{what}: {reply:?}");
        assert_eq!(c.cmd("EXISTS k"), Reply::Int(0), "{what}");
        watch.check(&mut c, what);
    }
    let good = bad(1.0, 16, 2, 0, 1.0);
    assert_eq!(
        c.call(&[b"RESTORE".to_vec(), b"k".to_vec(), b"0".to_vec(), good]),
        Reply::Simple("OK".into())
    );
}
