//! XF filters lose nothing across save and restart, DEBUG RELOAD, AOF
//! replay and rewrite (with and without the preamble), DUMP/RESTORE, COPY,
//! and replicas stay byte-identical through doublings: the shared suite
//! (`bloomkit_testkit::persistence`) with XF's fixture (`xf_support`).

use crate::xf_support;

use bloomkit_testkit::persistence::{Family, Written};
use bloomkit_testkit::{Conn, Module, Reply, Server};
use xf_support::{info, scandump};

/// XF's fixture with its own hooks.
struct XfPersistence;

impl Family for XfPersistence {
    const REWRITE_COMMAND: &'static str = xf_support::Xf::REWRITE_COMMAND;

    fn write(c: &mut Conn, tag: &str) -> Written {
        xf_support::Xf::write(c, tag)
    }

    fn answers(c: &mut Conn, key: &str) -> Vec<Reply> {
        xf_support::Xf::answers(c, key)
    }

    fn replica_module() -> Module {
        Module::bloomkit()
    }

    /// MEMORY USAGE and INFO agree with the filters' sizes.
    fn after_reload(_server: Server, c: &mut Conn, written: &Written, context: &str) {
        let keys = &written.keys;
        let bytes: i64 = keys.iter().map(|k| info(c, k, "Size").as_int()).sum();
        assert!(
            c.call(&["MEMORY", "USAGE", &keys[0]]).as_int() >= info(c, &keys[0], "Size").as_int(),
            "{context}"
        );
        let counted: i64 = c.info_field("bf", "bf_xf_bytes").parse().unwrap();
        assert!(counted >= bytes, "{context}: INFO counts every filter: {counted} < {bytes}");
    }

    /// The stream: batches cut short by MAXCAPACITY, and loads (the
    /// growth through doublings, deletes and merges are the `late` writes).
    fn stream(p: &mut Conn, _r: &mut Conn, _context: &str) -> Written {
        p.ok("XF.RESERVE cut 0.01 CAPACITY 10 MAXCAPACITY 20");
        p.cmd("XF.MADD cut a b c d e f g h i j k l m n o p q r s t u v w x y z");
        for (iter, data) in scandump(p, "early:midway") {
            p.call(&[b"XF.LOADCHUNK".to_vec(), b"loaded".to_vec(), iter.to_string().into_bytes(), data]);
        }
        Written::keys(&["cut", "loaded"])
    }

    fn after_stream(_p: &mut Conn, r: &mut Conn, context: &str) {
        assert_eq!(r.cmd("XF.CARD cut"), Reply::Int(20), "{context}");
    }
}

bloomkit_testkit::persistence_suite!(XfPersistence);
