//! Hostile input to `CF.*`, with the scrutiny `BF.*` gets (hostile.rs), for
//! the three ways RedisBloom 2.8.2's cuckoo filter fails: huge capacities,
//! bucket sizes and expansions; very many copies of one item; damaged RDB,
//! DUMP and LOADCHUNK input (zero sub-filters among them). Each ends in an
//! error with its named reason, or in a filter that works and round-trips;
//! the server keeps answering and untouched keys keep their digests. The
//! servers run under an address-space limit, so an allocation made before
//! the size check would fail these tests instead of eating the machine.

use crate::cf_support;

use bloomkit_testkit::hostile::{
    self, assert_dump_round_trips, assert_refused, damaged_headers, load_headers, restore_damaged, seal,
    Watch,
};
use bloomkit_testkit::{per_server, Conn, Reply, Server, TestServer};
use cf_support::{cf_loadchunks, cf_scandump};

/// The module's bystanders plus a cuckoo filter, none of which may change.
const BYSTANDER: [&str; 2] =
    ["CF.RESERVE bystander-cf 100 EXPANSION 2", "CF.INSERT bystander-cf ITEMS a b c a"];

fn start(server: Server) -> (TestServer, Conn, Watch) {
    hostile::start_watching(server, "bystander-cf", &BYSTANDER)
}

/// A filter that works: writes, reads, deletes, compaction and its own
/// dump. A loaded filter may be full or at its sub-filter limit: those are
/// answers; anything else must work.
fn exercise(c: &mut Conn, key: &str, what: &str) {
    let commands = [
        vec!["CF.ADD", key, "x"],
        vec!["CF.ADDNX", key, "y"],
        vec!["CF.INSERT", key, "ITEMS", "p", "q", "p"],
        vec!["CF.EXISTS", key, "x"],
        vec!["CF.MEXISTS", key, "x", "zz"],
        vec!["CF.COUNT", key, "p"],
        vec!["CF.DEL", key, "p"],
        vec!["CF.COMPACT", key],
        vec!["CF.INFO", key],
        vec!["CF.DEBUG", key],
        vec!["CF.SCANDUMP", key, "0"],
        vec!["CF.SCANDUMP", key, "1"],
    ];
    let answers = |e: &str| {
        ["Filter is full", "Maximum expansions", "bf.max-filter-bytes"].iter().any(|a| e.contains(a))
    };
    hostile::exercise_commands(c, key, what, &commands, answers);
}

per_server!(huge_capacities_bucket_sizes_and_expansions_are_refused_before_allocating);
fn huge_capacities_bucket_sizes_and_expansions_are_refused_before_allocating(server: Server) {
    let (_s, mut c, watch) = start(server);
    let limit = "the cuckoo filter would take"; // ..., more than bf.max-filter-bytes (...); use a smaller capacity
    let cases: &[(&str, &str)] = &[
        ("CF.RESERVE k 1000000000000", limit),
        ("CF.RESERVE k 1000000000000 BUCKETSIZE 255", limit),
        ("CF.RESERVE k 9223372036854775807", limit),
        ("CF.RESERVE k 9223372036854775807 BUCKETSIZE 1", limit),
        ("CF.INSERT k CAPACITY 100000000000 ITEMS a", limit),
        ("CF.INSERTNX k CAPACITY 9223372036854775807 ITEMS a", limit),
        ("CF.RESERVE k 10 foo MAXITERATIONS", "Couldn't parse MAXITERATIONS"),
        ("CF.RESERVE k -3 BUCKETSIZE EXP x maxiterations", "Couldn't parse MAXITERATIONS"),
        ("CF.RESERVE k 10 foo EXPANSION", "Couldn't parse EXPANSION"),
    ];
    assert_refused(&mut c, &watch, cases, &format!("{server:?}"));
    // With the limit lifted, the allocation itself fails under the
    // address-space limit: an error reply, never an abort.
    let lifted = ["CF.RESERVE k 1000000000000", "CF.INSERT k CAPACITY 100000000000 ITEMS a"];
    for e in hostile::refused_past_the_address_space(&mut c, &watch, &lifted) {
        assert!(e.contains("out of memory"), "{server:?}: {e}");
    }
    // The largest expansion: the third sub-filter would be 64 GiB. The
    // insert that would need it is refused, the filter stays as it was.
    c.ok("CF.RESERVE e 64 BUCKETSIZE 1 MAXITERATIONS 1 EXPANSION 32768");
    let mut refused = None;
    for i in 0..200_000 {
        let reply = c.call(&["CF.ADD", "e", &format!("i{i}")]);
        if reply.is_error() {
            refused = Some((i, reply.error_text().to_string()));
            break;
        }
    }
    let (at, e) = refused.expect("growth refused");
    assert!(e.contains(limit), "{server:?}: {e}");
    let before = c.cmd("DEBUG DIGEST-VALUE e");
    assert!(c.cmd(&format!("CF.ADD e i{at}")).is_error());
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE e"), before, "a refused growth changes nothing");
    let debug = String::from_utf8(c.cmd("CF.DEBUG e").as_bytes().to_vec()).unwrap();
    assert!(debug.contains("filters:2 ") && debug.contains("expansion:32768"), "{debug}");
    assert_eq!(c.cmd("CF.INFO e").as_array()[1], Reply::Int(40 + 2 * 16 + 64 + 64 * 32768), "Size");
    watch.check(&mut c, "expansion 32768");
    bloomkit_testkit::figure(&format!(
        "hostile CF, {server:?}: huge capacities refused by the limit and, lifted, by a failed allocation; EXPANSION 32768 stopped at {at} items, 2 sub-filters"
    ));
}

per_server!(many_copies_of_one_item_are_bounded);
/// RedisBloom 2.8.2 checks its 32-sub-filter limit once per command, so one
/// command of very many copies of one item grows the filter until its 16-bit
/// count wraps. bloomkit grows to at most 1024 sub-filters and refuses the
/// item that would need more, ending the command there.
fn many_copies_of_one_item_are_bounded(server: Server) {
    let (_s, mut c, watch) = start(server);
    c.ok("CF.RESERVE m 4 BUCKETSIZE 1 MAXITERATIONS 1 EXPANSION 1");
    let mut cmd = vec!["CF.INSERT".to_string(), "m".into(), "ITEMS".into()];
    cmd.extend(std::iter::repeat_n("same".to_string(), 5000));
    let reply = c.call(&cmd);
    let answers = reply.as_array();
    let last = answers.last().unwrap();
    assert!(last.is_error() && last.error_text().contains("cannot grow past 1024"), "{server:?}: {last:?}");
    let added = answers.len() as i64 - 1;
    assert!(answers[..answers.len() - 1].iter().all(|r| r.as_int() == 1));
    assert_eq!(c.cmd("CF.COUNT m same"), Reply::Int(added), "{server:?}: every copy counted");
    let debug = String::from_utf8(c.cmd("CF.DEBUG m").as_bytes().to_vec()).unwrap();
    assert!(debug.contains(" filters:1024 "), "{debug}");
    assert!(c.cmd("CF.ADD m other").error_text().contains("Maximum expansions reached"));
    // Deleting copies works and compacts.
    for _ in 0..added {
        assert_eq!(c.cmd("CF.DEL m same").as_int(), 1);
    }
    assert_eq!(c.cmd("CF.COUNT m same"), Reply::Int(0));
    c.ok("CF.COMPACT m");
    assert!(String::from_utf8(c.cmd("CF.DEBUG m").as_bytes().to_vec()).unwrap().contains(" filters:1 "));
    // A big bucket holds many copies; counts add up across sub-filters.
    c.ok("CF.RESERVE wide 510 BUCKETSIZE 255 EXPANSION 1");
    let mut cmd = vec!["CF.INSERT".to_string(), "wide".into(), "ITEMS".into()];
    cmd.extend(std::iter::repeat_n("w".to_string(), 2000));
    assert!(c.call(&cmd).as_array().iter().all(|r| r.as_int() == 1));
    assert_eq!(c.cmd("CF.COUNT wide w"), Reply::Int(2000));
    assert_dump_round_trips(&mut c, "m", "many copies");
    assert_dump_round_trips(&mut c, "wide", "wide buckets");
    watch.check(&mut c, "many copies");
    bloomkit_testkit::figure(&format!(
        "hostile CF, {server:?}: 5000 copies of one item in one CF.INSERT stopped at {added} copies in 1024 sub-filters"
    ));
}

fn refused_header(e: &str) -> bool {
    ["Invalid header", "Couldn't create filter!", "more than bf.max-filter-bytes", "out of memory"]
        .iter()
        .any(|r| e.contains(r))
}

per_server!(damaged_loadchunk_input_is_refused_or_loads_a_working_filter);
fn damaged_loadchunk_input_is_refused_or_loads_a_working_filter(server: Server) {
    let (_s, mut c, watch) = start(server);
    c.ok("CF.RESERVE src 64 BUCKETSIZE 2 EXPANSION 2");
    let items: Vec<String> = (0..300).map(|i| format!("i{i}")).collect();
    let mut cmd = vec!["CF.INSERT".to_string(), "src".into(), "ITEMS".into()];
    cmd.extend(items.iter().cloned());
    c.call(&cmd);
    let chunks = cf_scandump(&mut c, "src").unwrap();
    let header = chunks[0].1.clone();
    let (tried, accepted) =
        load_headers(&mut c, &watch, "CF.LOADCHUNK", "1", damaged_headers(&header), refused_header, exercise);
    watch.check(&mut c, "damaged headers");
    // Zero sub-filters, zero buckets, expansion 0 with two sub-filters,
    // and 2^40 buckets (which 2.8.2 accepts and allocates 2 TB for).
    let with = |at: usize, bytes: &[u8]| {
        let mut h = header.clone();
        h[at..at + bytes.len()].copy_from_slice(bytes);
        h
    };
    let mut zero_expansion = with(24, &2u64.to_le_bytes());
    zero_expansion[36..38].copy_from_slice(&0u16.to_le_bytes());
    for (what, h, reason) in [
        ("zero sub-filters", with(24, &0u64.to_le_bytes()), "Couldn't create filter!"),
        ("zero buckets", with(8, &0u64.to_le_bytes()), "Couldn't create filter!"),
        ("expansion 0, two sub-filters", zero_expansion, "Couldn't create filter!"),
        ("2^40 buckets", with(8, &(1u64 << 40).to_le_bytes()), "more than bf.max-filter-bytes"),
        ("65536 sub-filters", with(24, &65536u64.to_le_bytes()), "Couldn't create filter!"),
    ] {
        let e = c.call(&[b"CF.LOADCHUNK".to_vec(), b"k".to_vec(), b"1".to_vec(), h]);
        assert!(e.is_error() && e.error_text().contains(reason), "{server:?}: {what}: {e:?}");
        assert_eq!(c.cmd("EXISTS k"), Reply::Int(0), "{what}");
        watch.check(&mut c, what);
    }
    // Chunks at every position near the edges of each sub-filter: each
    // is refused or lands inside the filter, which keeps working.
    cf_loadchunks(&mut c, "dst", &chunks);
    let total: i64 = chunks[1..].iter().map(|(_, d)| d.len() as i64).sum();
    for pos in [-1i64, 2, 3, 17, 64, 129, 130, 384, total, total + 1, total + 2, total + 1000, i64::MAX] {
        for len in [1usize, 2, 200, 1000] {
            let data = vec![0xabu8; len];
            let reply =
                c.call(&[b"CF.LOADCHUNK".to_vec(), b"dst".to_vec(), pos.to_string().into_bytes(), data]);
            assert!(
                reply == Reply::Simple("OK".into()) || reply.error_text() == "Couldn't load chunk!",
                "{server:?}: pos {pos} len {len}: {reply:?}"
            );
        }
    }
    exercise(&mut c, "dst", "overwritten chunks");
    watch.check(&mut c, "chunks");
    bloomkit_testkit::figure(&format!(
        "hostile CF, {server:?}: {tried} damaged LOADCHUNK headers, {accepted} loaded a working filter, the rest refused"
    ));
}

per_server!(damaged_dump_payloads_are_refused_or_load_a_working_filter);
fn damaged_dump_payloads_are_refused_or_load_a_working_filter(server: Server) {
    let (_s, mut c, watch) = start(server);
    c.ok("CF.RESERVE src 8 BUCKETSIZE 2 EXPANSION 2");
    c.call(&["CF.INSERT", "src", "ITEMS", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"]);
    let payload = c.call(&["DUMP", "src"]).as_bytes().to_vec();
    let (refused, loaded) = restore_damaged(&mut c, &watch, &payload, "dmg", exercise);
    watch.check(&mut c, "damaged payloads");
    // Zero sub-filters: the module value starts with the sub-filter count
    // (type 7, module id as a 64-bit length, then opcode 2 = unsigned).
    let body = &payload[..payload.len() - 8];
    assert_eq!((body[0], body[1], body[10]), (7, 0x81, 2), "payload layout");
    assert!((2..64).contains(&body[11]), "a one-byte sub-filter count: {}", body[11]);
    let mut zero = body.to_vec();
    zero[11] = 0;
    let reply = c.call(&[b"RESTORE".to_vec(), b"k".to_vec(), b"0".to_vec(), seal(&zero)]);
    assert!(reply.error_text().contains("Bad data format"), "{server:?}: zero sub-filters: {reply:?}");
    assert_eq!(c.cmd("EXISTS k"), Reply::Int(0));
    watch.check(&mut c, "zero sub-filters");
    // RESTORE obeys the size limit; a restored filter is its own copy.
    hostile::restore_refused_by_the_limit(&mut c, &payload, 64, &format!("{server:?}"));
    assert_refused(&mut c, &watch, &[("CF.LOADCHUNK k 1 short", "Invalid header")], "header length");
    bloomkit_testkit::figure(&format!(
        "hostile CF, {server:?}: damaged DUMP payloads: {refused} refused, {loaded} loaded a working filter"
    ));
}
