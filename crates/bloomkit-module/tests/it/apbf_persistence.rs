//! Sliding-window filters lose nothing across save and restart, DEBUG
//! RELOAD, AOF replay, AOF rewrite (with and without the RDB preamble) and
//! replication (full and partial sync), on Redis 7.0 and Valkey 9: the
//! shared suite (`bloomkit_testkit::persistence`) with APBF's fixture. The
//! time windows are ten years long, so that no generation ends while a case
//! runs; windows that move with the clock are `apbf_commands.rs`'s.

use bloomkit_testkit::persistence::{probe, Family, Written};
use bloomkit_testkit::{Conn, Reply};

struct Apbf;

impl Family for Apbf {
    const REWRITE_COMMAND: &'static str = "APBF.LOADCHUNK";

    /// Count windows that have turned over several times, a time window, a
    /// COPY and one made with LOADCHUNK.
    fn write(c: &mut Conn, tag: &str) -> Written {
        let key = |name: &str| format!("{tag}:{name}");
        c.ok(&format!("APBF.RESERVE {} 0.01 200 COUNT", key("count")));
        c.ok(&format!("APBF.RESERVE {} 0.001 50 COUNT", key("small")));
        c.ok(&format!("APBF.RESERVE {} 0.01 500 TIME 315360000", key("time")));
        for name in ["count", "small", "time"] {
            for batch in 0..7 {
                let mut madd = vec!["APBF.MADD".to_string(), key(name)];
                madd.extend((batch * 100..batch * 100 + 100).map(|i| format!("{tag}-{i}")));
                c.call(&madd);
            }
        }
        c.call(&[b"APBF.ADD".to_vec(), key("time").into_bytes(), vec![0u8, 255, 13, 10]]);
        c.ok(&format!("COPY {} {}", key("count"), key("copied")));
        let mut iter = 0i64;
        loop {
            let reply = c.call(&["APBF.SCANDUMP", &key("time"), &iter.to_string()]);
            let (next, data) = (reply.as_array()[0].as_int(), reply.as_array()[1].as_bytes().to_vec());
            if next == 0 {
                break;
            }
            let load =
                [b"APBF.LOADCHUNK".to_vec(), key("loaded").into_bytes(), iter.to_string().into_bytes(), data];
            assert_eq!(c.call(&load), Reply::Simple("OK".into()), "APBF.LOADCHUNK {iter}");
            iter = next;
        }
        let mut written = Written::keys(&["count", "small", "time", "copied", "loaded"].map(key));
        for name in ["count", "time", "copied", "loaded"] {
            written.expect(&["APBF.EXISTS", &key(name), &format!("{tag}-699")], Reply::Int(1));
        }
        written.expect(&["APBF.EXISTS", &key("time"), &format!("{tag}-0")], Reply::Int(1));
        written
    }

    fn answers(c: &mut Conn, key: &str) -> Vec<Reply> {
        vec![c.call(&probe("APBF.MEXISTS", key, 700)), c.call(&["APBF.INFO", key])]
    }
}

bloomkit_testkit::persistence_suite!(Apbf);
