//! Nothing is lost across save, reload, AOF (with and without RDB preamble),
//! AOF rewrite, restart and replication (full and partial sync), on both servers.

use std::time::Duration;

use bloomkit_testkit::{aof_args, drop_link_and_resync, Conn, Module, Reply, Server, TestServer};

const SERVERS: [Server; 2] = [Server::Redis, Server::Valkey];

/// Writes of every kind; returns the items that must stay present.
fn write_everything(c: &mut Conn, tag: &str) -> Vec<(String, String)> {
    let mut present = Vec::new();
    c.ok(&format!("BF.RESERVE {tag}:scaled 0.01 50 EXPANSION 3"));
    c.ok(&format!("BF.RESERVE {tag}:fixed 0.001 500 NONSCALING"));
    for i in 0..400 {
        let item = format!("{tag}-{i}");
        c.call(&["BF.ADD", &format!("{tag}:scaled"), &item]);
        present.push((format!("{tag}:scaled"), item));
    }
    let items: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let mut madd = vec!["BF.MADD".to_string(), format!("{tag}:fixed")];
    madd.extend(items.iter().cloned());
    c.call(&madd);
    present.extend(items.iter().map(|i| (format!("{tag}:fixed"), i.clone())));
    // Created from defaults, by each write command.
    c.ok(&format!("BF.ADD {tag}:implicit-add x"));
    c.ok(&format!("BF.MADD {tag}:implicit-madd x y"));
    c.ok(&format!("BF.INSERT {tag}:implicit-insert CAPACITY 20 ITEMS a b c"));
    c.ok(&format!("BF.INSERT {tag}:implicit-nonscaling NONSCALING EXPANSION 5 ITEMS a"));
    present.push((format!("{tag}:implicit-add"), "x".into()));
    present.push((format!("{tag}:implicit-insert"), "c".into()));
    let binary = vec![0u8, 1, 2, 255, 13, 10];
    c.call(&[b"BF.ADD".to_vec(), format!("{tag}:scaled").into_bytes(), binary]);
    // A copy made with LOADCHUNK.
    let chunks = c.scandump(&format!("{tag}:scaled")).unwrap();
    c.loadchunks(&format!("{tag}:chunked"), &chunks);
    present.push((format!("{tag}:chunked"), format!("{tag}-7")));
    present
}

fn assert_present(c: &mut Conn, present: &[(String, String)], context: &str) {
    for (key, item) in present {
        assert_eq!(c.call(&["BF.EXISTS", key, item]), Reply::Int(1), "{context}: {key} {item}");
    }
}

/// A filter above the size limit in the RDB file is kept at startup, with a
/// warning in the log naming it.
#[test]
fn oversize_filters_in_an_rdb_file_load_with_a_warning() {
    for server in SERVERS {
        let mut s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        c.ok("BF.RESERVE big 0.0001 100000");
        c.ok("BF.ADD big kept");
        c.ok("SAVE");
        s.restart(&["--bf.max-filter-bytes", "10000"]);
        let mut c = s.conn();
        assert_eq!(c.cmd("BF.EXISTS big kept"), Reply::Int(1), "{server:?}");
        assert_eq!(c.cmd("CONFIG GET bf.max-filter-bytes").as_array()[1], Reply::Bulk(b"10000".to_vec()));
        let log = s.log();
        assert!(
            log.contains("loaded filter 'big'") && log.contains("above bf.max-filter-bytes (10000)"),
            "{log}"
        );
    }
}

#[test]
fn rdb_save_and_restart() {
    for server in SERVERS {
        let mut s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        let present = write_everything(&mut c, "r");
        let before = c.digest();
        c.ok("SAVE");
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!(c.digest(), before, "{server:?}");
        assert_present(&mut c, &present, "after RDB restart");
    }
}

#[test]
fn aof_replay_rewrite_and_restart() {
    for server in SERVERS {
        for preamble in [false, true] {
            let context = format!("{server:?}, preamble {preamble}");
            let mut s = TestServer::start(server, &[Module::bloomkit()], &aof_args(preamble));
            let mut c = s.conn();
            c.wait_for_aof_rewrite(Duration::from_secs(30));
            let mut present = write_everything(&mut c, "a");
            let before = c.digest();
            // Replay of the plain command log.
            s.restart(&[]);
            let mut c = s.conn();
            assert_eq!(c.digest(), before, "{context}: replayed AOF");
            // A rewrite, then more writes on top of it.
            c.ok("BGREWRITEAOF");
            c.wait_for_aof_rewrite(Duration::from_secs(30));
            present.extend(write_everything(&mut c, "b"));
            let before = c.digest();
            s.restart(&[]);
            let mut c = s.conn();
            assert_eq!(c.digest(), before, "{context}: rewritten AOF");
            assert_present(&mut c, &present, &context);
            if !preamble {
                let text = s.base_aof();
                assert!(text.windows(12).any(|w| w == b"BF.LOADCHUNK"), "{context}: rewrite emits LOADCHUNK");
            }
        }
    }
}

#[test]
fn replicas_answer_exactly_like_their_primary() {
    for server in SERVERS {
        let primary = TestServer::with_bloomkit(server);
        let mut p = primary.conn();
        let early = write_everything(&mut p, "early");
        // The replica has other defaults and a far smaller size limit: what the
        // primary accepted must still arrive identically.
        let replica_module = Module::Bloomkit(
            ["ERROR_RATE", "0.2", "INITIAL_SIZE", "7", "EXPANSION", "9", "MAX_FILTER_BYTES", "1024"]
                .map(String::from)
                .to_vec(),
        );
        let port = primary.port.to_string();
        let mut replica = TestServer::start(server, &[replica_module], &["--replicaof", "127.0.0.1", &port]);
        let mut r = replica.conn();
        r.wait_for_sync(Duration::from_secs(30));
        let late = write_everything(&mut p, "late");
        p.ok("BF.RESERVE big 0.0001 100000");
        p.ok("BF.ADD big a");
        assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1));
        assert_eq!(r.digest(), p.digest(), "{server:?}: full sync then stream");
        assert_present(&mut r, &early, "full sync");
        assert_present(&mut r, &late, "replication stream");

        // Partial resync after a dropped link.
        let more = drop_link_and_resync(
            &mut p,
            &mut r,
            |p| write_everything(p, "after-drop"),
            &format!("{server:?}"),
        );
        assert_present(&mut r, &more, "partial sync");

        // Same answers, then promotion.
        let probe: Vec<String> = ["BF.MEXISTS", "late:scaled"]
            .iter()
            .map(|s| s.to_string())
            .chain((0..500).map(|i| format!("late-{i}")))
            .collect();
        assert_eq!(r.call(&probe), p.call(&probe));
        assert_eq!(r.cmd("BF.INFO late:implicit-add"), p.cmd("BF.INFO late:implicit-add"));
        r.ok("REPLICAOF NO ONE");
        assert_eq!(r.cmd("BF.ADD late:scaled late-3"), Reply::Int(0));
        assert_eq!(r.cmd("BF.ADD late:scaled brand-new"), Reply::Int(1));
        drop(p);
        replica.kill();
    }
}
