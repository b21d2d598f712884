//! `XF.*`, bloomkit's expandable filter, against real servers: replies and
//! errors, growth with no false negatives and the rate held, deletes and
//! counts, merges, SCANDUMP/LOADCHUNK. Persistence is `xf_persistence.rs`,
//! hostile input `xf_hostile.rs`.

use crate::xf_support;

use bloomkit_testkit::persistence::Family;
use bloomkit_testkit::{per_server, Reply, Server, TestServer};
use xf_support::{found, guaranteed, info, items, ok, scandump, Xf};

per_server!(commands_answer_and_refuse);
fn commands_answer_and_refuse(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    assert_eq!(c.cmd("XF.RESERVE f 0.01 CAPACITY 100 MAXCAPACITY 100000"), ok());
    assert_eq!(c.cmd("XF.RESERVE f 0.01"), Reply::Error("ERR item exists".into()));
    assert_eq!(c.cmd("XF.ADD f a"), Reply::Int(1));
    assert_eq!(c.cmd("XF.ADD f a"), Reply::Int(0), "probably present: a second occurrence");
    assert_eq!(c.cmd("XF.COUNT f a"), Reply::Int(2));
    assert_eq!(c.cmd("XF.CARD f"), Reply::Int(2));
    assert_eq!(format!("{:?}", c.cmd("XF.MADD f b c a")), "[1, 1, 0]");
    assert_eq!(c.cmd("XF.EXISTS f b"), Reply::Int(1));
    assert_eq!(c.cmd("XF.EXISTS f zzz"), Reply::Int(0));
    assert_eq!(c.cmd("XF.EXISTS missing a"), Reply::Int(0), "a missing key holds nothing");
    assert_eq!(format!("{:?}", c.cmd("XF.MEXISTS f a zzz c")), "[1, 0, 1]");
    assert_eq!(c.cmd("XF.DEL f a"), Reply::Int(1));
    assert_eq!(c.cmd("XF.COUNT f a"), Reply::Int(2), "the MADD added a third");
    assert_eq!(c.cmd("XF.DEL missing a"), Reply::Int(0));
    assert_eq!(c.cmd("XF.COUNT missing a"), Reply::Int(0));
    assert_eq!(c.cmd("XF.CARD missing"), Reply::Int(0));
    // ADD creates with the defaults; INSERT with its options, or not at all.
    assert_eq!(c.cmd("XF.ADD d x"), Reply::Int(1));
    assert_eq!(info(&mut c, "d", "Capacity"), Reply::Int(1000));
    assert_eq!(format!("{:?}", c.cmd("XF.INSERT i ERROR 0.001 CAPACITY 50 ITEMS p q")), "[1, 1]");
    assert_eq!(info(&mut c, "i", "Capacity"), Reply::Int(50));
    let text = |r: Reply| r.error_text().to_string();
    assert!(text(c.cmd("XF.INSERT n NOCREATE ITEMS p")).contains("not found"));
    assert_eq!(c.cmd("EXISTS n"), Reply::Int(0));
    // Errors say what was wrong and what is allowed, and change nothing.
    assert!(text(c.cmd("XF.RESERVE g 2")).contains("error rate must be a number from 1e-9 to 0.5"));
    assert!(text(c.cmd("XF.RESERVE g 0.01 CAPACITY 0")).contains("CAPACITY must be a whole number"));
    assert!(
        text(c.cmd("XF.RESERVE g 0.01 CAPACITY 10 MAXCAPACITY 5")).contains("not be larger than MAXCAPACITY")
    );
    assert!(text(c.cmd("XF.RESERVE g 0.01 SIZE 10")).contains("unknown argument 'SIZE'"));
    assert!(text(c.cmd("XF.ADD f")).contains("wrong number of arguments"));
    assert!(text(c.cmd("XF.MERGE f 2 d")).contains("numkeys"));
    assert!(text(c.cmd("XF.MERGE f 1 nope")).contains("not found"));
    assert_eq!(c.cmd("EXISTS g"), Reply::Int(0));
    c.ok("SET s x");
    assert!(text(c.cmd("XF.ADD s a")).starts_with("WRONGTYPE"));
    assert!(text(c.cmd("XF.EXISTS s a")).starts_with("WRONGTYPE"));
    // MAXCAPACITY stops adds, with the part that ran answered.
    c.ok("XF.RESERVE small 0.01 CAPACITY 2 MAXCAPACITY 3");
    let reply = c.cmd("XF.MADD small a b c d e");
    let answers = reply.as_array();
    assert_eq!(answers.len(), 4, "{reply:?}");
    assert!(answers[3].error_text().contains("MAXCAPACITY of 3"), "{reply:?}");
    assert_eq!(c.cmd("XF.CARD small"), Reply::Int(3));
    // The size limit refuses, before allocating, what it cannot hold.
    let huge = c.cmd("XF.RESERVE huge 0.000000001 CAPACITY 1099511627776");
    assert!(text(huge).contains("bf.max-filter-bytes"));
    assert_eq!(c.cmd("EXISTS huge"), Reply::Int(0));
    // RESP3: booleans, and INFO a map.
    c.ok("HELLO 3");
    assert_eq!(c.cmd("XF.EXISTS f b"), Reply::Bool(true));
    assert!(matches!(c.cmd("XF.INFO f"), Reply::Map(_)));
}

per_server!(growth_keeps_every_member_at_the_rate);
fn growth_keeps_every_member_at_the_rate(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("XF.RESERVE g 0.01 CAPACITY 100");
    let mut sizes = Vec::new();
    let mut added = 0;
    for target in [1_000, 4_000, 16_000, 40_000] {
        items(&mut c, "g", "m", added..target);
        added = target;
        assert_eq!(found(&mut c, "g", "m", 0..added), added, "no false negative at {added} items");
        let false_hits = found(&mut c, "g", "absent", 0..20_000);
        let rate = false_hits as f64 / 20_000.0;
        assert!(rate <= 0.01, "{added} items: measured false-positive rate {rate}");
        let size = info(&mut c, "g", "Size").as_int();
        sizes.push(size as f64 * 8.0 / added as f64);
    }
    assert!(info(&mut c, "g", "Expansions").as_int() >= 8, "grew from 100 to 40,000 by doubling");
    // A sanity bound only: the comparison with RedisBloom's scalable
    // filter, doubling by doubling, is bench/xf.sh's.
    assert!(sizes.iter().all(|&bits| bits < 30.0), "bits per item: {sizes:?}");
    let bound = guaranteed(&mut c, "g");
    assert!(bound <= 0.01, "guaranteed {bound}");
}

per_server!(deletes_counts_and_merges);
fn deletes_counts_and_merges(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("XF.RESERVE a 0.01 CAPACITY 200");
    items(&mut c, "a", "x", 0..6_000);
    for i in (0..6_000).step_by(2) {
        assert_eq!(c.call(&["XF.DEL", "a", &format!("x{i}")]), Reply::Int(1), "x{i}");
    }
    let kept =
        (1..6_000).step_by(2).filter(|i| c.call(&["XF.EXISTS", "a", &format!("x{i}")]) == Reply::Int(1));
    assert_eq!(kept.count(), 3_000, "no false negative among the items kept");
    assert_eq!(c.cmd("XF.CARD a"), Reply::Int(3_000));
    assert!(found(&mut c, "a", "absent", 0..10_000) <= 100, "the rate holds after deletes");
    // Counts: never below the true count.
    for n in 1..=5 {
        for _ in 0..n {
            c.call(&["XF.ADD", "a", &format!("counted{n}")]);
        }
        assert!(c.call(&["XF.COUNT", "a", &format!("counted{n}")]).as_int() >= n as i64);
    }
    // A merge answers 1 for every member of every source.
    c.ok("XF.RESERVE b 0.01 CAPACITY 50");
    items(&mut c, "b", "y", 0..3_000);
    c.ok("XF.MERGE m 2 a b");
    assert_eq!(found(&mut c, "m", "y", 0..3_000), 3_000);
    let kept_in_m =
        (1..6_000).step_by(2).filter(|i| c.call(&["XF.EXISTS", "m", &format!("x{i}")]) == Reply::Int(1));
    assert_eq!(kept_in_m.count(), 3_000, "every member of a");
    // The merge's guarantee is the sum of its sources' (README, "XF"): the
    // rate measured stays within what INFO guarantees.
    let merged_hits = found(&mut c, "m", "absent", 0..20_000);
    let (ga, gb, gm) = (guaranteed(&mut c, "a"), guaranteed(&mut c, "b"), guaranteed(&mut c, "m"));
    assert!(gm <= 2.5 * (ga + gb), "merged bound {gm}, sources {ga} + {gb}");
    assert!((merged_hits as f64) / 20_000.0 <= gm * 1.3 + 0.001, "{merged_hits} of 20000 against {gm}");
    assert_eq!(c.cmd("XF.CARD m").as_int(), c.cmd("XF.CARD a").as_int() + 3_000);
    // Into an existing destination, itself among the sources.
    c.ok("XF.MERGE b 2 b a");
    assert_eq!(found(&mut c, "b", "y", 0..3_000), 3_000);
    assert_eq!(c.cmd("XF.COUNT b y7"), Reply::Int(2), "b counted twice");
}

per_server!(scandump_and_loadchunk_copy_a_filter);
fn scandump_and_loadchunk_copy_a_filter(server: Server) {
    let from = TestServer::with_bloomkit(server);
    let to = TestServer::with_bloomkit(server);
    let (mut a, mut b) = (from.conn(), to.conn());
    let keys = Xf::write(&mut a, "s").keys;
    for k in &keys {
        let chunks = scandump(&mut a, k);
        assert!(chunks.len() >= 2, "a header and slots");
        // Until the last chunk is in, the filter answers as empty and refuses writes.
        for (n, (iter, data)) in chunks.iter().enumerate() {
            let reply = b.call(&[
                b"XF.LOADCHUNK".to_vec(),
                k.clone().into_bytes(),
                iter.to_string().into_bytes(),
                data.clone(),
            ]);
            assert_eq!(reply, ok(), "{k} chunk {n}");
            if n + 1 < chunks.len() {
                assert!(
                    b.call(&["XF.ADD", k, "x"]).error_text().contains("XF.LOADCHUNK"),
                    "{k}: half loaded"
                );
            }
        }
        assert_eq!(b.call(&["DEBUG", "DIGEST-VALUE", k]), a.call(&["DEBUG", "DIGEST-VALUE", k]), "{k}");
        assert_eq!(Xf::answers(&mut b, k), Xf::answers(&mut a, k), "{k}");
        assert_eq!(b.call(&["DUMP", k]), a.call(&["DUMP", k]), "{k}");
    }
    // Chunks out of order or from another filter are refused.
    let chunks = scandump(&mut a, &keys[0]);
    b.call(&[b"XF.LOADCHUNK".to_vec(), b"o".to_vec(), b"1".to_vec(), chunks[0].1.clone()]);
    let (iter, data) = &chunks[1];
    let shifted = (iter + 8).to_string().into_bytes();
    let reply = b.call(&[b"XF.LOADCHUNK".to_vec(), b"o".to_vec(), shifted, data.clone()]);
    assert!(reply.is_error(), "a chunk at the wrong place: {reply:?}");
    let reply =
        b.call(&[b"XF.LOADCHUNK".to_vec(), b"o".to_vec(), iter.to_string().into_bytes(), data[1..].to_vec()]);
    assert!(reply.is_error(), "a chunk cut short: {reply:?}");
}
