//! Hostile input to `APBF.*`, with the scrutiny `BF.*` gets (hostile.rs):
//! extreme and malformed parameters for every command, damaged LOADCHUNK
//! headers and chunks, ADVANCE arguments and DUMP payloads. Each ends in an
//! error with its named reason, or in a filter that works and round-trips;
//! the server keeps answering and untouched keys keep their digests. The
//! servers run under an address-space limit, so an allocation made before
//! the size check would fail these tests instead of eating the machine.

use bloomkit_core::apbf::{Apbf, ApbfParams, Window, HEADER_LEN};
use bloomkit_testkit::hostile::{self, assert_dump_round_trips, damaged_headers, load_headers, Watch};
use bloomkit_testkit::{per_server, Conn, Reply, Server};

/// The commands a new user ran that killed the server: far beyond the
/// size limit, refused before anything is allocated.
const HUGE_RESERVES: [&str; 4] = [
    "APBF.RESERVE x 0.01 1000000000000 COUNT",
    "APBF.RESERVE a4 0.01 4000000000 TIME 60",
    "APBF.RESERVE a10 0.01 99999999999999 TIME 1",
    "APBF.RESERVE big 0.01 2000000000 COUNT",
];

per_server!(huge_reserves_are_refused_by_the_limit_and_by_failed_allocations);
fn huge_reserves_are_refused_by_the_limit_and_by_failed_allocations(server: Server) {
    let (_s, mut c, watch) = hostile::start(server);
    for line in HUGE_RESERVES {
        let e = c.cmd(line).error_text().to_string();
        assert!(e.contains("more than bf.max-filter-bytes"), "{server:?}: {line}: {e}");
        watch.check(&mut c, line);
    }
    // With the limit lifted, the allocation itself fails under the
    // address-space limit: an error reply, never an abort.
    let mut failed_allocations = 0;
    for e in hostile::refused_past_the_address_space(&mut c, &watch, &HUGE_RESERVES) {
        failed_allocations += usize::from(e.contains("out of memory"));
        assert!(
            e.contains("out of memory") || e.contains("more than bf.max-filter-bytes"),
            "{server:?}: {e}"
        );
    }
    assert!(
        failed_allocations >= 3,
        "{server:?}: the allocation path was reached {failed_allocations} times"
    );
    assert_eq!(c.cmd("DBSIZE"), Reply::Int(Watch::KEYS.len() as i64), "nothing was created");
    bloomkit_testkit::figure(&format!(
        "hostile APBF, {server:?}: the {} RESERVEs that killed the server refused by the limit, and with the limit lifted by a failed allocation under a 2 GiB address space",
        HUGE_RESERVES.len()
    ));
}

per_server!(invalid_commands_are_errors_with_their_reason_and_change_nothing);
fn invalid_commands_are_errors_with_their_reason_and_change_nothing(server: Server) {
    let rate = "error rate must be a number strictly between 0 and 1";
    let capacity = "capacity must be a positive integer";
    let time = "TIME takes a window in seconds";
    let window = "the window must be COUNT (the last capacity items) or TIME seconds";
    let cases: &[(&str, &str)] = &[
        ("APBF.RESERVE k nan 100 COUNT", rate),
        ("APBF.RESERVE k inf 100 COUNT", rate),
        ("APBF.RESERVE k 0 100 COUNT", rate),
        ("APBF.RESERVE k 1 100 COUNT", rate),
        ("APBF.RESERVE k -0.5 100 COUNT", rate),
        ("APBF.RESERVE k 1e-400 100 COUNT", rate),
        ("APBF.RESERVE k x 100 COUNT", rate),
        ("APBF.RESERVE k 0.01 0 COUNT", capacity),
        ("APBF.RESERVE k 0.01 -5 COUNT", capacity),
        ("APBF.RESERVE k 0.01 9223372036854775808 COUNT", capacity),
        ("APBF.RESERVE k 0.01 1e6 COUNT", capacity),
        ("APBF.RESERVE k 0.01 100 TIME 0", time),
        ("APBF.RESERVE k 0.01 100 TIME -1", time),
        ("APBF.RESERVE k 0.01 100 TIME 315360001", time),
        ("APBF.RESERVE k 0.01 100 TIME 9223372036854775807", time),
        ("APBF.RESERVE k 0.01 100 TIME 1.5", time),
        ("APBF.RESERVE k 0.01 100", window),
        ("APBF.RESERVE k 0.01 100 WEEKS 2", window),
        ("APBF.RESERVE k 0.01 100 COUNT 5", window),
        ("APBF.RESERVE k 0.01 100 TIME", window),
        ("APBF.RESERVE k 1e-300 1000 COUNT", "cannot size a window filter"),
        ("APBF.RESERVE k 0.01 100 COUNT x y", "wrong number of arguments"),
        ("APBF.RESERVE k", "wrong number of arguments"),
        ("APBF.RESERVE bystander-window 0.01 100 COUNT", "ERR item exists"),
        ("APBF.RESERVE str 0.01 100 COUNT", "WRONGTYPE"),
        ("APBF.RESERVE bystander 0.01 100 COUNT", "WRONGTYPE"),
        ("APBF.ADD k", "wrong number of arguments"),
        ("APBF.ADD k a", "ERR not found"),
        ("APBF.MADD k", "wrong number of arguments"),
        ("APBF.MADD k a b", "ERR not found"),
        ("APBF.ADD str a", "WRONGTYPE"),
        ("APBF.ADD bystander a", "WRONGTYPE"),
        ("APBF.EXISTS k", "wrong number of arguments"),
        ("APBF.EXISTS str a", "WRONGTYPE"),
        ("APBF.MEXISTS str a", "WRONGTYPE"),
        ("APBF.INFO k", "ERR not found"),
        ("APBF.INFO k x", "wrong number of arguments"),
        ("APBF.INFO str", "WRONGTYPE"),
        ("APBF.ADVANCE k 1 2", "ERR not found"),
        ("APBF.ADVANCE bystander-time -1 0", "APBF.ADVANCE takes"),
        ("APBF.ADVANCE bystander-time x 0", "APBF.ADVANCE takes"),
        ("APBF.ADVANCE bystander-time 1 -5", "APBF.ADVANCE takes"),
        ("APBF.ADVANCE bystander-time 1 5 -1", "APBF.ADVANCE takes"),
        ("APBF.ADVANCE bystander-time 1 5 9223372036854775808", "APBF.ADVANCE takes"),
        ("APBF.ADVANCE bystander-time 1 2 3 4", "wrong number of arguments"),
        ("APBF.ADVANCE bystander 1 2", "WRONGTYPE"),
        ("APBF.LOADCHUNK k -1 x", "Second argument must be numeric"),
        ("APBF.LOADCHUNK k x x", "Second argument must be numeric"),
        ("APBF.LOADCHUNK k 5 x", "ERR not found"),
        ("APBF.LOADCHUNK k 0 garbage", "invalid sliding-window filter state"),
        ("APBF.LOADCHUNK k 0 BKAPBF02", "invalid sliding-window filter state"),
        ("APBF.LOADCHUNK bystander-window 0 x", "ERR item exists"),
        ("APBF.LOADCHUNK bystander-window 999999999999 x", "does not fit"),
        ("APBF.LOADCHUNK bystander-window 9223372036854775807 x", "does not fit"),
        ("APBF.LOADCHUNK bystander 1 x", "WRONGTYPE"),
        ("APBF.LOADCHUNK k 0", "wrong number of arguments"),
    ];
    hostile::refuses_every_invalid_command(server, "APBF", cases);
}

/// A filter that was accepted from damaged input must work: every command
/// answers with its documented shape, and its DUMP restores identically.
fn exercise(c: &mut Conn, key: &str, what: &str) {
    assert!(matches!(c.call(&["APBF.ADD", key, "probe"]), Reply::Int(_)), "{what}: APBF.ADD");
    let madd = c.call(&["APBF.MADD", key, "p1", "p2"]);
    assert!(madd.as_array().iter().all(|r| matches!(r, Reply::Int(_))), "{what}: {madd:?}");
    assert_eq!(c.call(&["APBF.EXISTS", key, "probe"]), Reply::Int(1), "{what}: an item just added");
    assert_eq!(c.call(&["APBF.MEXISTS", key, "p1", "p2"]).as_array().len(), 2, "{what}");
    assert_eq!(c.call(&["APBF.INFO", key]).as_array().len(), 26, "{what}: APBF.INFO");
    assert!(c.call(&["MEMORY", "USAGE", key]).as_int() > 0, "{what}: MEMORY USAGE");
    assert_dump_round_trips(c, key, what);
}

fn header(window: Window) -> Vec<u8> {
    Apbf::new(ApbfParams { error: 0.01, capacity: 50, window }, 1_000, bloomkit_core::Limits::NONE)
        .unwrap()
        .encode_header()
}

/// Sets field `i` (after the magic) of a header.
fn with_field(mut h: Vec<u8>, i: usize, v: u64) -> Vec<u8> {
    h[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
    h
}

per_server!(hostile_loadchunk_headers);
fn hostile_loadchunk_headers(server: Server) {
    let (_s, mut c, watch) = hostile::start(server);
    c.ok("CONFIG SET bf.max-filter-bytes 67108864");
    let mut variants: Vec<(String, Vec<u8>)> = Vec::new();
    for window in [Window::Count, Window::Time { millis: 60_000 }] {
        let h = header(window);
        variants.extend(damaged_headers(&h).into_iter().map(|(w, m)| (format!("{window:?} {w}"), m)));
        let crafted = [
            ("2^60 bits per slice", with_field(h.clone(), 2, 1 << 60)),
            ("2^63 bits per slice", with_field(h.clone(), 2, u64::MAX / 2)),
            ("k = 0", with_field(h.clone(), 0, 0)),
            ("k = 2^32", with_field(h.clone(), 0, 1 << 32)),
            ("l = 2^40", with_field(h.clone(), 1, 1 << 40)),
            ("generation 0", with_field(h.clone(), 3, 0)),
            ("NaN error", with_field(h.clone(), 4, f64::NAN.to_bits())),
            ("front beyond the ring", with_field(h.clone(), 6, 1 << 20)),
            ("a full generation", with_field(h.clone(), 7, u64::MAX)),
            ("no window generations", with_field(h.clone(), 10, 0)),
            ("more window generations than l", with_field(h.clone(), 10, 1 << 20)),
            ("tick 0", with_field(h.clone(), 11, 0)),
            ("clock at the end of time", with_field(h.clone(), 12, u64::MAX)),
            ("started at the end of time", with_field(h.clone(), 8, u64::MAX)),
            ("first format", [&b"BKAPBF01"[..], &h[8..8 + 10 * 8]].concat()),
            (
                "first format, damaged",
                [&b"BKAPBF01"[..], &with_field(h.clone(), 6, 1 << 20)[8..8 + 10 * 8]].concat(),
            ),
            ("first format, cut", [&b"BKAPBF01"[..], &h[8..8 + 9 * 8]].concat()),
        ];
        variants.extend(crafted.into_iter().map(|(w, h)| (format!("{window:?} {w}"), h)));
    }
    let refused = |e: &str| {
        e.starts_with("ERR invalid sliding-window filter state: ")
            || e.contains("more than bf.max-filter-bytes")
    };
    let (tried, accepted) = load_headers(&mut c, &watch, "APBF.LOADCHUNK", "0", variants, refused, exercise);
    bloomkit_testkit::figure(&format!(
        "hostile APBF, {server:?}: {tried} LOADCHUNK headers (truncations, flips, crafted), {} refused, {accepted} accepted and exercised",
        tried - accepted
    ));
}

per_server!(hostile_loadchunk_chunks);
/// Chunks after a valid header: only within the body, anything else refused.
fn hostile_loadchunk_chunks(server: Server) {
    let (_s, mut c, watch) = hostile::start(server);
    let h = header(Window::Count);
    let body = Apbf::from_header(&h, None).unwrap().bytes() as u64;
    let load = |c: &mut Conn, iter: u64, data: &[u8]| {
        c.call(&[b"APBF.LOADCHUNK".to_vec(), b"w".to_vec(), iter.to_string().into_bytes(), data.to_vec()])
    };
    assert_eq!(load(&mut c, 0, &h), Reply::Simple("OK".into()));
    let ok = Reply::Simple("OK".into());
    assert_eq!(load(&mut c, 1, &vec![0xff; body as usize]), ok, "the whole body");
    assert_eq!(load(&mut c, body, b"x"), ok, "the last byte");
    for (iter, len) in [(body + 1, 1), (body, 2), (1, body as usize + 1), (u64::MAX / 2, 1)] {
        let e = load(&mut c, iter, &vec![1; len]);
        assert!(e.error_text().contains("does not fit"), "{server:?} iter {iter} len {len}: {e:?}");
    }
    exercise(&mut c, "w", "chunks");
    watch.check(&mut c, "chunks");
}

per_server!(hostile_restore_payloads);
/// Damaged DUMP payloads of count and time windows: refused with the
/// server's "Bad data format" and no key, or loaded and consistent.
fn hostile_restore_payloads(server: Server) {
    let (_s, mut c, watch) = hostile::start(server);
    c.ok("CONFIG SET bf.max-filter-bytes 67108864");
    c.ok("APBF.RESERVE count 0.1 20 COUNT");
    c.ok("APBF.RESERVE time 0.1 20 TIME 60");
    for model in ["count", "time"] {
        c.call(&["APBF.MADD", model, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]);
        let prefix = format!("{server:?} {model}");
        let (refused, loaded) = hostile::restore_damaged_dumps_of(&mut c, &watch, model, &prefix, exercise);
        bloomkit_testkit::figure(&format!(
            "hostile APBF, {server:?}: {} damaged RESTORE payloads of a {model} window, {refused} refused, {loaded} loaded and round-tripped",
            refused + loaded
        ));
    }
}

/// RESTORE obeys the size limit as RESERVE does (the state decoded with no
/// limit before), and a huge ADVANCE is bounded work.
#[test]
fn restore_obeys_the_limit_and_advance_is_bounded() {
    let (s, mut c, watch) = hostile::start(Server::Redis);
    c.ok("APBF.RESERVE w 0.001 100000 COUNT");
    let payload = c.cmd("DUMP w").as_bytes().to_vec();
    let size = c.cmd("MEMORY USAGE w").as_int();
    c.ok(&format!("CONFIG SET bf.max-filter-bytes {}", size / 2));
    let refused = c.call(&[b"RESTORE".as_slice(), b"w2", b"0", &payload]);
    assert!(refused.error_text().contains("Bad data format"), "{refused:?}");
    assert!(s.log().contains("more than bf.max-filter-bytes"), "the log names the reason");
    c.ok("CONFIG SET bf.max-filter-bytes 4294967296");
    c.ok("APBF.ADVANCE w 9223372036854775807 5 6");
    assert_eq!(c.cmd("APBF.EXISTS w a"), Reply::Int(0));
    assert_eq!(c.cmd("APBF.ADD w a"), Reply::Int(1));
    watch.check(&mut c, "a huge ADVANCE");
    assert_eq!(HEADER_LEN, 120, "the header length is part of the format");
}
