//! Top-K sketches lose nothing across save and restart, DEBUG RELOAD, AOF
//! replay, AOF rewrite (with and without the RDB preamble) and replication
//! (full sync, the stream, partial sync), on Redis 7.0 and Valkey 9: with
//! decay 0.9 and many colliding buckets, where RedisBloom's replicas drift,
//! the servers' DEBUG DIGEST stays equal and so do the DUMP bytes (the
//! shared suite, `bloomkit_testkit::persistence`, with Top-K's fixture).

use crate::topk_support;

use bloomkit_testkit::persistence::{Family, Written};
use bloomkit_testkit::{Conn, Reply, Rng, Server, TestServer};
use topk_support::{add_cmd, answers, incrby_cmd, pool};

/// The items the writes draw from, the empty one and one with a NUL byte included.
fn items() -> Vec<Vec<u8>> {
    let mut items = pool(80);
    items.push(Vec::new());
    items.push(vec![0, 1, 0, 255]);
    items
}

struct Topk;

impl Family for Topk {
    const REWRITE_COMMAND: &'static str = "RESTORE";

    /// Writes of every kind, decay 0.9 on narrow rows (many collisions).
    fn write(c: &mut Conn, tag: &str) -> Written {
        let key = |name: &str| format!("{tag}:{name}");
        let hot = key("hot");
        c.ok(&format!("TOPK.RESERVE {hot} 8 10 4 0.9"));
        let items = items();
        let mut rng = Rng(tag.len() as u64 * 31 + 7);
        for _ in 0..60 {
            let batch: Vec<Vec<u8>> =
                (0..20).map(|_| items[rng.below(items.len()).min(rng.below(items.len()))].clone()).collect();
            assert!(!c.call(&add_cmd(&hot, &batch)).is_error());
        }
        let pairs: Vec<(Vec<u8>, u32)> =
            (0..12).map(|i| (items[rng.below(items.len())].clone(), 1 + i * 9)).collect();
        assert!(!c.call(&incrby_cmd(&hot, &pairs)).is_error());
        // A bad increment mid-way: the pairs before it stay applied.
        let partial = c.call(&["TOPK.INCRBY", &hot, "item3", "40", "item4", "x", "item5", "40"]);
        assert_eq!(partial.as_array().len(), 2);
        c.ok(&format!("TOPK.RESERVE {} 3", key("default")));
        c.ok(&format!("TOPK.ADD {} a b c d a", key("default")));
        c.ok(&format!("TOPK.RESERVE {} 5 20 3 1", key("exact")));
        c.ok(&format!("TOPK.INCRBY {} a 5 b 7 c 100000", key("exact")));
        c.ok(&format!("COPY {hot} {}", key("copied")));
        let dump = c.call(&["DUMP", &hot]).as_bytes().to_vec();
        let restore = [b"RESTORE".to_vec(), key("restored").into_bytes(), b"0".to_vec(), dump];
        assert_eq!(c.call(&restore), Reply::Simple("OK".into()));
        Written::keys(&["hot", "default", "exact", "copied", "restored"].map(key))
    }

    fn answers(c: &mut Conn, key: &str) -> Vec<Reply> {
        answers(c, key, &items())
    }

    fn before_save(c: &mut Conn, _written: &Written, context: &str) {
        assert_eq!(c.call(&["DUMP", "r:hot"]), c.call(&["DUMP", "r:copied"]), "{context}: COPY is exact");
    }

    /// A reloaded sketch keeps working the same as a twin that never reloaded.
    fn after_reload(server: Server, c: &mut Conn, _written: &Written, context: &str) {
        let mut twin = TestServer::with_bloomkit(server);
        let mut t = twin.conn();
        Topk::write(&mut t, "r");
        for conn in [&mut *c, &mut t] {
            Topk::write(conn, "more");
            conn.ok("TOPK.ADD r:hot item1 item2 item77 item50");
        }
        assert_eq!(c.digest(), t.digest(), "{context}: reloaded and never reloaded agree");
        twin.kill();
    }

    fn after_stream(p: &mut Conn, r: &mut Conn, context: &str) {
        // TOPK.COUNT is a read: replicas answer it (2.8.2 refuses it there).
        assert_eq!(r.cmd("TOPK.COUNT late:exact a b c"), p.cmd("TOPK.COUNT late:exact a b c"), "{context}");
        assert!(r.cmd("TOPK.ADD late:exact a").error_text().starts_with("READONLY"), "{context}");
    }
}

bloomkit_testkit::persistence_suite!(Topk);
