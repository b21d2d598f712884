//! valkey-bloom's objects (`bf.compat valkey-bloom`) lose nothing across
//! save and restart, DEBUG RELOAD, AOF replay and rewrite (with and without
//! the RDB preamble) and replication (full and partial sync), on Redis 7.0
//! and Valkey 9: creations with random seeds, scale-outs, non-scaling and
//! memory-limit refusals (`vbloom_compat::workload`), in the shared suite
//! (`bloomkit_testkit::persistence`).

use crate::vbloom_compat::{vb, workload};

use bloomkit_testkit::persistence::{Family, Written};
use bloomkit_testkit::{Conn, Module, Reply};

const KEYS: [&str; 7] = ["add", "madd", "ins", "empty", "res", "ns", "small"];

struct Vbloom;

impl Family for Vbloom {
    const REWRITE_COMMAND: &'static str = "BF.LOAD";

    fn module() -> Module {
        vb()
    }

    fn replica_module() -> Module {
        vb()
    }

    fn write(c: &mut Conn, tag: &str) -> Written {
        workload(c, tag);
        let mut written = Written::keys(&KEYS.map(|k| format!("{tag}:{k}")));
        for key in written.keys.clone() {
            written.expect(&["EXISTS", &key], Reply::Int(1));
        }
        written
    }

    /// `BF.INFO`'s fields but `SIZE`: valkey-bloom's object counts the
    /// capacity of its vectors, which a load makes exact (DUMP and the
    /// digest are the same).
    fn answers(c: &mut Conn, key: &str) -> Vec<Reply> {
        let items = ["x", "a", "b", "c", "p", "n0", "n4", "n9", "zz"];
        let mut out = vec![c.call(&[&["BF.MEXISTS", key][..], &items].concat())];
        for field in ["CAPACITY", "FILTERS", "ITEMS", "ERROR", "EXPANSION", "TIGHTENING", "MAXSCALEDCAPACITY"]
        {
            out.push(c.call(&["BF.INFO", key, field]));
        }
        out
    }
}

bloomkit_testkit::persistence_suite!(Vbloom);
