//! Hostile input to `CMS.*`: extreme dimensions and increments, merges that
//! overflow, and damaged DUMP payloads (RedisBloom 2.8.2 loads a zero
//! dimension or a short counter array unchecked and reads past it later).
//! Each ends in an error with its reason, or in a sketch that works and
//! round-trips; the server keeps answering and untouched keys keep their
//! digests. The servers run under an address-space limit, so an allocation
//! made before the size check would fail these tests instead of eating the
//! machine.

use bloomkit_testkit::hostile::{self, assert_refused, restore_damaged, seal, RdbValue, Watch};
use bloomkit_testkit::{per_server, Conn, Reply, Server, TestServer};

/// The module's bystanders plus a sketch, none of which may change.
const BYSTANDER: [&str; 2] = ["CMS.INITBYDIM bystander-cms 50 3", "CMS.INCRBY bystander-cms a 1 b 2"];

fn start(server: Server) -> (TestServer, Conn, Watch) {
    hostile::start_watching(server, "bystander-cms", &BYSTANDER)
}

/// A sketch that works: writes, reads, a merge into itself and its own dump.
fn exercise(c: &mut Conn, key: &str, what: &str) {
    let commands = [
        vec!["CMS.INCRBY", key, "x", "1", "y", "4294967295"],
        vec!["CMS.QUERY", key, "x", "y", "zz"],
        vec!["CMS.MERGE", key, "1", key],
        vec!["CMS.INFO", key],
    ];
    hostile::exercise_commands(c, key, what, &commands, |e| e.starts_with("CMS: MERGE overflow"));
}

per_server!(extreme_dimensions_are_refused_before_allocating);
fn extreme_dimensions_are_refused_before_allocating(server: Server) {
    let (_s, mut c, w) = start(server);
    assert_refused(
        &mut c,
        &w,
        &[
            ("CMS.INITBYDIM k 9223372036854775807 1", "CMS: Insufficient memory to create the key"),
            ("CMS.INITBYDIM k 1 4611686018427387904", "CMS: Insufficient memory to create the key"),
            ("CMS.INITBYDIM k 3074457345618258603 3", "CMS: invalid init arguments"),
            ("CMS.INITBYDIM k 1000000000 2", "bf.max-filter-bytes"),
            ("CMS.INITBYDIM k 100000000 20", "bf.max-filter-bytes"),
            // Under the limit (4 GB) but past the address space: the
            // allocation fails softly.
            ("CMS.INITBYDIM k 100000000 10", "CMS: Insufficient memory to create the key"),
            ("CMS.INITBYPROB k 1e-10 0.5", "bf.max-filter-bytes"),
            ("CMS.INITBYPROB k 4.9e-324 0.5", "CMS: invalid init arguments"),
            ("CMS.INITBYPROB k 0.5 4.9e-324", "CMS: invalid init arguments"),
            ("CMS.INITBYPROB k 1e-19 1e-300", "CMS: invalid init arguments"),
        ],
        "extreme dimensions",
    );
    // Under the limit, it works; a lower limit refuses it.
    c.ok("CMS.INITBYDIM k 1000000 4");
    exercise(&mut c, "k", "a 16 MB sketch");
    c.ok("CONFIG SET bf.max-filter-bytes 1000000");
    c.ok("DEL k");
    assert!(c.cmd("CMS.INITBYDIM k 1000000 4").error_text().contains("bf.max-filter-bytes"));
    assert_eq!(c.cmd("EXISTS k"), Reply::Int(0));
    w.check(&mut c, "limits");
}

#[test]
fn saturation_and_merge_overflow_change_nothing_they_should_not() {
    let (_s, mut c, w) = start(Server::Redis);
    c.ok("CMS.INITBYDIM k 4 2");
    let reply = c.cmd("CMS.INCRBY k a 9223372036854775807 a 9223372036854775807 b 1");
    assert_eq!(reply.as_array().len(), 3);
    assert!(reply.as_array()[0].error_text() == "CMS: INCRBY overflow");
    // The total wraps at 2^64 and prints signed.
    assert_eq!(c.cmd("CMS.INFO k").as_array()[5], Reply::Int(-1));
    let before = c.cmd("DEBUG DIGEST-VALUE k");
    for line in [
        "CMS.MERGE k 1 k WEIGHTS 2",
        "CMS.MERGE k 1 k WEIGHTS -1",
        "CMS.MERGE k 2 k k WEIGHTS 9223372036854775807 9223372036854775807",
        "CMS.MERGE k 1 bystander-cms",
        "CMS.MERGE k 1 k WEIGHTS x",
        "CMS.MERGE k 1 nokey",
        "CMS.MERGE k 1 bystander",
        "CMS.MERGE k -9223372036854775808 k",
        "CMS.MERGE k 9223372036854775807 k WEIGHTS 1",
        "CMS.INCRBY k a 1 b -1",
        "CMS.INCRBY k a 1 b 18446744073709551616",
    ] {
        assert!(c.cmd(line).is_error(), "{line}");
        assert_eq!(c.cmd("DEBUG DIGEST-VALUE k"), before, "{line} changed nothing");
        w.check(&mut c, line);
    }
    c.ok("CMS.MERGE k 1 k WEIGHTS 0");
    assert_eq!(c.cmd("CMS.QUERY k a").as_array()[0], Reply::Int(0));
    // A merge of 5000 sources (the destination each time) is just slow.
    let mut cmd = vec!["CMS.MERGE".to_string(), "k".into(), "5000".into()];
    cmd.extend((0..5000).map(|_| "k".to_string()));
    assert_eq!(c.call(&cmd), Reply::Simple("OK".into()));
}

/// A hand-made value: width, depth, total, then the counters.
fn payload(width: u64, depth: u64, counter: u64, data: &[u8]) -> Vec<u8> {
    let mut v = RdbValue(vec![0x07, 0x81]);
    v.0.extend_from_slice(&0x08c4a4f9360f1000u64.to_be_bytes());
    v.unsigned(width);
    v.unsigned(depth);
    v.unsigned(counter);
    v.buffer(data);
    v.0.push(0);
    v.0.extend_from_slice(&10u16.to_le_bytes());
    seal(&v.0)
}

fn restore(c: &mut Conn, key: &str, p: Vec<u8>) -> Reply {
    c.call(&[b"RESTORE".to_vec(), key.as_bytes().to_vec(), b"0".to_vec(), p])
}

per_server!(damaged_dump_payloads_are_refused_or_load_a_working_sketch);
fn damaged_dump_payloads_are_refused_or_load_a_working_sketch(server: Server) {
    let (_s, mut c, w) = start(server);
    // What 2.8.2 loads and later reads past: each refused here.
    for (what, p) in [
        ("zero width", payload(0, 2, 0, &[])),
        ("zero depth", payload(2, 0, 0, &[])),
        ("short array", payload(4, 2, 0, &[0; 31])),
        ("long array", payload(4, 2, 0, &[0; 33])),
        ("huge dimensions", payload(1 << 40, 1 << 20, 0, &[0; 8])),
        ("width * depth * 4 past 2^64", payload(u64::MAX, 3, 0, &[0; 8])),
    ] {
        let reply = restore(&mut c, "k", p);
        assert!(reply.error_text().contains("Bad data format"), "{server:?} {what}: {reply:?}");
        assert_eq!(c.cmd("EXISTS k"), Reply::Int(0));
        w.check(&mut c, what);
    }
    let good = payload(4, 2, 7, &[1; 32]);
    assert_eq!(restore(&mut c, "k", good), Reply::Simple("OK".into()));
    exercise(&mut c, "k", "hand-made");
    c.ok("DEL k");

    // Every cut and flipped byte of a real payload.
    c.ok("CMS.INITBYDIM src 8 2");
    c.cmd("CMS.INCRBY src foo 3 bar 1");
    let p = c.cmd("DUMP src").as_bytes().to_vec();
    let (refused, loaded) = restore_damaged(&mut c, &w, &p, "dmg", |c, key, what| {
        exercise(c, key, what);
        c.call(&["DEL", key]);
    });
    assert!(refused > 0 && loaded > 0, "{server:?}: {refused} refused, {loaded} loaded");
    w.check(&mut c, "damaged payloads");
}
