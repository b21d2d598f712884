//! Bloom filters lose nothing across save, reload, AOF (with and without RDB
//! preamble), AOF rewrite, restart and replication (full and partial sync),
//! on Redis 7.0 and Valkey 9: the shared suite
//! (`bloomkit_testkit::persistence`) with BF's fixture, and the size limit
//! at startup.

use bloomkit_testkit::persistence::{probe, Family, Written};
use bloomkit_testkit::{per_server, Conn, Module, Reply, Server, TestServer};

struct Bf;

impl Family for Bf {
    const REWRITE_COMMAND: &'static str = "BF.LOADCHUNK";

    /// Writes of every kind; the items added must stay present.
    fn write(c: &mut Conn, tag: &str) -> Written {
        let key = |name: &str| format!("{tag}:{name}");
        for (name, shape) in [("scaled", "0.01 50 EXPANSION 3"), ("fixed", "0.001 500 NONSCALING")] {
            c.ok(&format!("BF.RESERVE {} {shape}", key(name)));
        }
        let mut present = Vec::new();
        for i in 0..400 {
            let item = format!("{tag}-{i}");
            c.call(&["BF.ADD", &key("scaled"), &item]);
            present.push((key("scaled"), item));
        }
        let items: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
        let mut madd = vec!["BF.MADD".to_string(), key("fixed")];
        madd.extend(items.iter().cloned());
        c.call(&madd);
        present.extend(items.iter().map(|i| (key("fixed"), i.clone())));
        // Created from defaults, by each write command.
        c.ok(&format!("BF.ADD {} x", key("implicit-add")));
        c.ok(&format!("BF.MADD {} x y", key("implicit-madd")));
        c.ok(&format!("BF.INSERT {} CAPACITY 20 ITEMS a b c", key("implicit-insert")));
        c.ok(&format!("BF.INSERT {} NONSCALING EXPANSION 5 ITEMS a", key("implicit-nonscaling")));
        present.push((key("implicit-add"), "x".into()));
        present.push((key("implicit-insert"), "c".into()));
        let binary = vec![0u8, 1, 2, 255, 13, 10];
        c.call(&[b"BF.ADD".to_vec(), key("scaled").into_bytes(), binary]);
        // A copy made with LOADCHUNK.
        let chunks = c.scandump(&key("scaled")).unwrap();
        c.loadchunks(&key("chunked"), &chunks);
        present.push((key("chunked"), format!("{tag}-7")));
        let kinds = ["scaled", "fixed", "implicit-add", "implicit-madd", "implicit-insert"];
        let keys = kinds.iter().chain(&["implicit-nonscaling", "chunked"]).map(|k| key(k)).collect();
        Written::present(keys, "BF.EXISTS", &present)
    }

    fn answers(c: &mut Conn, key: &str) -> Vec<Reply> {
        let found = c.call(&probe("BF.MEXISTS", key, 500));
        vec![found, c.call(&["BF.INFO", key]), c.call(&["BF.DEBUG", key])]
    }

    /// The replica has other defaults and a far smaller size limit: what the
    /// primary accepted must still arrive identically.
    fn replica_module() -> Module {
        let args = ["ERROR_RATE", "0.2", "INITIAL_SIZE", "7", "EXPANSION", "9", "MAX_FILTER_BYTES", "1024"];
        Module::Bloomkit(args.map(String::from).to_vec())
    }

    fn stream(p: &mut Conn, _r: &mut Conn, _context: &str) -> Written {
        p.ok("BF.RESERVE big 0.0001 100000");
        p.ok("BF.ADD big a");
        Written::keys(&["big"])
    }

    fn promoted(r: &mut Conn, context: &str) {
        assert_eq!(r.cmd("BF.ADD late:scaled late-3"), Reply::Int(0), "{context}");
        assert_eq!(r.cmd("BF.ADD late:scaled brand-new"), Reply::Int(1), "{context}");
    }
}

bloomkit_testkit::persistence_suite!(Bf);

per_server!(oversize_filters_in_an_rdb_file_load_with_a_warning);
/// A filter above the size limit in the RDB file is kept at startup, with a
/// warning in the log naming it.
fn oversize_filters_in_an_rdb_file_load_with_a_warning(server: Server) {
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
