//! Cuckoo filters lose nothing across save and restart, DEBUG RELOAD, AOF
//! replay, AOF rewrite and replication (full and partial sync), on Redis 7.0
//! and Valkey 9: the shared suite (`bloomkit_testkit::persistence`) with
//! CF's fixture.

use crate::cf_support;

use bloomkit_testkit::persistence::{probe, Family, Written};
use bloomkit_testkit::{Conn, Reply};
use cf_support::{cf_loadchunks, cf_scandump};

struct Cf;

impl Family for Cf {
    const REWRITE_COMMAND: &'static str = "CF.LOADCHUNK";

    /// Writes of every kind; the items added (and not deleted) must stay present.
    fn write(c: &mut Conn, tag: &str) -> Written {
        let key = |name: &str| format!("{tag}:{name}");
        let mut present = Vec::new();
        let grown = key("grown");
        c.ok(&format!("CF.RESERVE {grown} 64 BUCKETSIZE 2 MAXITERATIONS 10 EXPANSION 2"));
        for i in 0..400 {
            let item = format!("{tag}-{i}");
            c.call(&["CF.ADD", &grown, &item]);
            present.push((grown.clone(), item));
        }
        // Deletes (with the compaction they trigger) and explicit compaction.
        for i in 0..60 {
            c.call(&["CF.DEL", &grown, &format!("{tag}-{i}")]);
        }
        present.drain(..60);
        c.ok(&format!("CF.COMPACT {grown}"));
        // Deletes after the compaction, which the filter counts from then on.
        for i in 60..65 {
            c.call(&["CF.DEL", &grown, &format!("{tag}-{i}")]);
        }
        present.drain(..5);
        let fixed = key("fixed");
        c.ok(&format!("CF.RESERVE {fixed} 100 BUCKETSIZE 4 EXPANSION 0"));
        let items: Vec<String> = (0..80).map(|i| format!("f{i}")).collect();
        let mut insert = vec!["CF.INSERTNX".to_string(), fixed.clone(), "ITEMS".to_string()];
        insert.extend(items.iter().cloned());
        c.call(&insert);
        present.extend(items.iter().map(|i| (fixed.clone(), i.clone())));
        // Created by each write command, from defaults.
        c.ok(&format!("CF.ADD {} x", key("implicit-add")));
        c.ok(&format!("CF.ADDNX {} x", key("implicit-addnx")));
        c.ok(&format!("CF.INSERT {} CAPACITY 20 ITEMS a b c a", key("implicit-insert")));
        for name in ["implicit-add", "implicit-addnx"] {
            present.push((key(name), "x".into()));
        }
        present.push((key("implicit-insert"), "c".into()));
        let binary = vec![0u8, 1, 2, 255, 13, 10];
        c.call(&[b"CF.ADD".to_vec(), grown.clone().into_bytes(), binary]);
        // A copy made with LOADCHUNK, and one with COPY.
        let chunks = cf_scandump(c, &grown).unwrap();
        cf_loadchunks(c, &key("chunked"), &chunks);
        present.push((key("chunked"), format!("{tag}-77")));
        c.ok(&format!("COPY {grown} {}", key("copied")));
        present.push((key("copied"), format!("{tag}-78")));
        let names =
            ["grown", "fixed", "implicit-add", "implicit-addnx", "implicit-insert", "chunked", "copied"];
        Written::present(names.map(key).to_vec(), "CF.EXISTS", &present)
    }

    fn answers(c: &mut Conn, key: &str) -> Vec<Reply> {
        let found = c.call(&probe("CF.MEXISTS", key, 500));
        let counted: Vec<Reply> =
            probe("CF.COUNT", key, 3)[2..].iter().map(|i| c.call(&["CF.COUNT", key, i])).collect();
        vec![found, Reply::Array(counted), c.call(&["CF.INFO", key]), c.call(&["CF.DEBUG", key])]
    }

    fn stream(p: &mut Conn, _r: &mut Conn, context: &str) -> Written {
        p.ok("CF.RESERVE big 100000");
        p.ok("CF.ADD big a");
        // A batch cut short by the primary's limit reaches the replica as
        // the part that ran, not as the whole command.
        p.ok("CONFIG SET bf.max-filter-bytes 2000");
        p.ok("CF.RESERVE capped 64 BUCKETSIZE 1 MAXITERATIONS 1 EXPANSION 4");
        let mut cmd = vec!["CF.INSERT".to_string(), "capped".into(), "ITEMS".into()];
        cmd.extend((0..3000).map(|i| format!("c{i}")));
        let answers = p.call(&cmd);
        assert!(answers.as_array().last().unwrap().is_error(), "{context}: the batch hit the limit");
        p.ok("CONFIG SET bf.max-filter-bytes 4294967296");
        Written::keys(&["big", "capped"])
    }

    fn promoted(r: &mut Conn, context: &str) {
        assert_eq!(r.cmd("CF.ADDNX late:grown late-300").as_int(), 0, "{context}");
        assert_eq!(r.cmd("CF.ADD late:grown brand-new").as_int(), 1, "{context}");
    }
}

bloomkit_testkit::persistence_suite!(Cf);
