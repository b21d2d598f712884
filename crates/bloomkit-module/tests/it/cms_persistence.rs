//! Count-Min Sketches lose nothing across save and restart, DEBUG RELOAD,
//! AOF replay, AOF rewrite (with and without the RDB preamble) and
//! replication (full and partial sync), on Redis 7.0 and Valkey 9: the
//! shared suite (`bloomkit_testkit::persistence`) with CMS's fixture.

use bloomkit_testkit::persistence::{Family, Written};
use bloomkit_testkit::{Conn, Reply};

struct Cms;

impl Family for Cms {
    const REWRITE_COMMAND: &'static str = "RESTORE";

    /// Writes of every kind; the estimates of a few items must stay as they were.
    fn write(c: &mut Conn, tag: &str) -> Written {
        let key = |name: &str| format!("{tag}:{name}");
        let (dim, prob) = (key("dim"), key("prob"));
        c.ok(&format!("CMS.INITBYDIM {dim} 500 4"));
        c.ok(&format!("CMS.INITBYPROB {prob} 0.002 0.01"));
        for round in 0..20 {
            let mut cmd = vec!["CMS.INCRBY".to_string(), dim.clone()];
            for i in 0..50 {
                cmd.push(format!("{tag}-{i}"));
                cmd.push((round + 1).to_string());
            }
            c.call(&cmd);
        }
        c.call(&["CMS.INCRBY", &dim, "sat", "4294967296"]);
        // A total past 2^63 (INFO shows it negative).
        c.ok(&format!("CMS.INITBYDIM {} 100 2", key("huge")));
        c.call(&["CMS.INCRBY", &key("huge"), "huge", "9223372036854775807", "huge", "9"]);
        let binary = vec![0u8, 1, 2, 255, 13, 10];
        c.call(&[b"CMS.INCRBY".to_vec(), prob.clone().into_bytes(), binary, b"7".to_vec()]);
        c.call(&["CMS.INCRBY", &prob, "p", "11"]);
        let merged = key("merged");
        c.ok(&format!("CMS.INITBYDIM {merged} 500 4"));
        c.ok(&format!("CMS.MERGE {merged} 2 {dim} {dim} WEIGHTS 1 0"));
        c.ok(&format!("COPY {prob} {}", key("copied")));
        let mut written = Written::keys(&["dim", "prob", "huge", "merged", "copied"].map(key));
        for (key, item) in [
            (&dim, format!("{tag}-3")),
            (&dim, "sat".into()),
            (&prob, "p".into()),
            (&merged, format!("{tag}-9")),
        ] {
            let query = ["CMS.QUERY", key, &item];
            let estimate = c.call(&query);
            written.expect(&query, estimate);
        }
        written.expect(&["CMS.QUERY", &key("copied"), "p"], Reply::Array(vec![Reply::Int(11)]));
        written
    }

    fn answers(c: &mut Conn, key: &str) -> Vec<Reply> {
        let tag = key.split(':').next().unwrap_or(key);
        let mut query =
            vec!["CMS.QUERY".to_string(), key.to_string(), "sat".into(), "huge".into(), "p".into()];
        query.extend((0..60).map(|i| format!("{tag}-{i}")));
        vec![c.call(&query), c.call(&["CMS.INFO", key])]
    }

    fn before_save(c: &mut Conn, _written: &Written, context: &str) {
        let info = c.cmd("CMS.INFO r:huge");
        assert!(info.as_array()[5].as_int() < 0, "{context}: a count past 2^63 prints signed: {info:?}");
    }

    fn stream(p: &mut Conn, _r: &mut Conn, _context: &str) -> Written {
        // Refused and partly failing writes replicate nothing harmful.
        assert!(p.cmd("CMS.INCRBY late:dim a 1 b -1").is_error());
        assert!(p.cmd("CMS.MERGE late:merged 1 late:prob").is_error());
        Written::default()
    }
}

bloomkit_testkit::persistence_suite!(Cms);
