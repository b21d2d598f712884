//! Hostile input to `XF.*`, under an address-space limit: damaged DUMP
//! payloads and LOADCHUNK headers are refused or load a filter that works
//! and round-trips; extreme parameters are refused before anything is
//! allocated; the server keeps answering and bystander keys keep their digests.

use crate::xf_support;

use bloomkit_testkit::hostile::{
    self, assert_dump_round_trips, damaged_headers, load_headers, restore_damaged,
};
use bloomkit_testkit::{per_server, Reply, Server};
use xf_support::{items, scandump};

per_server!(hostile_payloads_and_headers);
fn hostile_payloads_and_headers(server: Server) {
    let (_s, mut c, watch) = hostile::start(server);
    c.ok("XF.RESERVE src 0.01 CAPACITY 64");
    items(&mut c, "src", "h", 0..400);
    // Damaged DUMP payloads: refused, or loaded and round-tripping.
    let payload = c.call(&["DUMP", "src"]).as_bytes().to_vec();
    let (refused, loaded) = restore_damaged(&mut c, &watch, &payload, "p", |c, key, what| {
        assert_dump_round_trips(c, key, what);
        c.call(&["XF.ADD", key, "more"]);
        c.call(&["XF.DEL", key, "h1"]);
        c.call(&["XF.MEXISTS", key, "h1", "h2"]);
        c.call(&["DEL", key]);
    });
    assert!(refused > 0, "{server:?}: {refused} refused, {loaded} loaded");
    // Damaged LOADCHUNK headers: refused, or accepted as a filter to load.
    let header = scandump(&mut c, "src")[0].1.clone();
    load_headers(
        &mut c,
        &watch,
        "XF.LOADCHUNK",
        "1",
        damaged_headers(&header),
        |e| {
            e.contains("invalid")
                || e.contains("bf.max-filter-bytes")
                || e.contains("error rate")
                || e.contains("CAPACITY")
                // A changed secret id: a secret this server does not have.
                || e.contains("deployment secret this server does not have")
        },
        |c, key, _| {
            assert!(c.call(&["XF.ADD", key, "x"]).is_error(), "an unfinished load refuses writes");
            assert_eq!(c.call(&["XF.EXISTS", key, "x"]), Reply::Int(0));
            c.call(&["DEL", key]);
        },
    );
    // The largest capacity is a hint: the filter starts laid out for 2^25
    // items (a few MB) and grows from there.
    for line in [
        "XF.RESERVE k 0.000000001 CAPACITY 1099511627776",
        "XF.RESERVE k 0.5 CAPACITY 1099511627776 MAXCAPACITY 1099511627776",
    ] {
        c.ok(line);
        assert!(xf_support::info(&mut c, "k", "Size").as_int() < 16 << 20, "{line}");
        c.ok("DEL k");
        watch.check(&mut c, line);
    }
    // Extreme parameters, refused before anything is allocated.
    for line in [
        "XF.RESERVE k 0.000000001 CAPACITY 1099511627777",
        "XF.RESERVE k 0.5 CAPACITY 1099511627777 MAXCAPACITY 1099511627776",
        "XF.RESERVE k 1e-300",
        "XF.RESERVE k nan",
        "XF.INSERT k CAPACITY 99999999999999999999 ITEMS a",
        "XF.SCANDUMP src -1",
        "XF.LOADCHUNK k 0 x",
    ] {
        assert!(c.cmd(line).is_error(), "{line}");
        assert_eq!(c.cmd("EXISTS k"), Reply::Int(0), "{line}");
        watch.check(&mut c, line);
    }
}
