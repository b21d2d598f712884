//! The persistence suite every family opts into: nothing is lost across
//! SAVE and restart, DEBUG RELOAD, AOF replay, AOF rewrite (with and without
//! the RDB preamble) and replication (full sync, the stream, partial sync,
//! promotion), and every value's DUMP restores and its COPY is the same value.
//!
//! A family gives a [`Family`] fixture: how to write values of every kind,
//! which reads must answer the same before and after, and hooks for what only
//! it has. [`persistence_suite!`](crate::persistence_suite) then makes each
//! case a test per server:
//!
//! ```ignore
//! struct Cms;
//! impl Family for Cms { ... }
//! bloomkit_testkit::persistence_suite!(Cms);
//! ```
//!
//! What is compared everywhere: the server's `DEBUG DIGEST`, and for each key
//! written its [`Family::answers`], `DUMP` and `DEBUG DIGEST-VALUE`; the
//! replies a write recorded as known ([`Written::expect`]) are checked too.

use std::time::Duration;

use crate::{aof_args, drop_link_and_resync, Conn, Module, Reply, Server, TestServer};

const DEADLINE: Duration = Duration::from_secs(30);

/// What a family's writes left behind: the keys written, and reads whose
/// replies are known (`BF.EXISTS key item` must answer 1 for an item added).
#[derive(Default)]
pub struct Written {
    pub keys: Vec<String>,
    pub expect: Vec<(Vec<Vec<u8>>, Reply)>,
}

impl Written {
    /// These keys, with no known replies.
    pub fn keys<S: ToString>(keys: &[S]) -> Written {
        Written { keys: keys.iter().map(ToString::to_string).collect(), expect: Vec::new() }
    }

    /// `cmd` must answer `reply` whenever the data is read back.
    pub fn expect<A: AsRef<[u8]>>(&mut self, cmd: &[A], reply: Reply) {
        self.expect.push((cmd.iter().map(|a| a.as_ref().to_vec()).collect(), reply));
    }

    /// These keys, where `exists key item` answers 1 for each item present.
    pub fn present(keys: Vec<String>, exists: &str, present: &[(String, String)]) -> Written {
        let mut written = Written { keys, expect: Vec::new() };
        for (key, item) in present {
            written.expect(&[exists, key, item], Reply::Int(1));
        }
        written
    }

    pub fn extend(&mut self, other: Written) {
        self.keys.extend(other.keys);
        self.expect.extend(other.expect);
    }
}

/// `command key {tag}-0 ... {tag}-{n - 1}`, where `tag` is what `key` has
/// before its first `:`: a lookup of the items a write added under its tag
/// (and of absent ones, for another tag's key).
pub fn probe(command: &str, key: &str, n: usize) -> Vec<String> {
    let tag = key.split(':').next().unwrap_or(key);
    [command.to_string(), key.to_string()].into_iter().chain((0..n).map(|i| format!("{tag}-{i}"))).collect()
}

/// A family's part of the suite. Only the first three items are required;
/// the hooks add what only this family has, at the moment the suite names.
pub trait Family {
    /// The command an AOF rewrite without the RDB preamble writes for this
    /// family's values (`BF.LOADCHUNK`, `RESTORE`, ...).
    const REWRITE_COMMAND: &'static str;

    /// Writes values of every kind (created each way, grown, merged,
    /// copied, loaded) under keys `{tag}:...`.
    fn write(c: &mut Conn, tag: &str) -> Written;

    /// Every read a client has of `key`, whose replies must be the same
    /// before and after (`DUMP` and `DEBUG DIGEST-VALUE` are added by the suite).
    fn answers(c: &mut Conn, key: &str) -> Vec<Reply>;

    /// The module every server but the replica loads.
    fn module() -> Module {
        Module::bloomkit()
    }

    /// The replica's module: by default a far smaller size limit, since what
    /// the primary accepted must still arrive identically.
    fn replica_module() -> Module {
        Module::Bloomkit(vec!["MAX_FILTER_BYTES".into(), "1024".into()])
    }

    /// Before the `SAVE` of the RDB case.
    fn before_save(_c: &mut Conn, _written: &Written, _context: &str) {}

    /// At the end of the RDB case, after the restart and `DEBUG RELOAD`.
    fn after_reload(_server: Server, _c: &mut Conn, _written: &Written, _context: &str) {}

    /// After each round of writes of the AOF and replica cases, before the
    /// state to compare is taken: reads and writes on the keys written.
    fn settle(_c: &mut Conn, _written: &Written) {}

    /// In the replica case, on the primary before the replica attaches.
    fn before_replica(_p: &mut Conn, _written: &Written) {}

    /// In the replica case, after the `late` writes: more of the stream
    /// (writes the primary cuts short or refuses, reads on the replica);
    /// returns what it wrote, compared like the rest.
    fn stream(_p: &mut Conn, _r: &mut Conn, _context: &str) -> Written {
        Written::default()
    }

    /// In the replica case, once the stream has arrived and compared equal.
    fn after_stream(_p: &mut Conn, _r: &mut Conn, _context: &str) {}

    /// In the replica case, on the replica after `REPLICAOF NO ONE`.
    fn promoted(_r: &mut Conn, _context: &str) {}
}

/// Makes the suite's cases tests of the module it is written in, one per
/// server ([`per_server!`](crate::per_server)): `rdb_save_restart_and_reload`,
/// `aof_replay_rewrite_and_restart` and `replicas_stay_identical`, each with
/// `::redis7` and `::valkey9`.
#[macro_export]
macro_rules! persistence_suite {
    ($family:ty) => {
        fn rdb_save_restart_and_reload(server: $crate::Server) {
            $crate::persistence::rdb_save_restart_and_reload::<$family>(server)
        }
        $crate::per_server!(rdb_save_restart_and_reload);

        fn aof_replay_rewrite_and_restart(server: $crate::Server) {
            $crate::persistence::aof_replay_rewrite_and_restart::<$family>(server)
        }
        $crate::per_server!(aof_replay_rewrite_and_restart);

        fn replicas_stay_identical(server: $crate::Server) {
            $crate::persistence::replicas_stay_identical::<$family>(server)
        }
        $crate::per_server!(replicas_stay_identical);
    };
}

/// Labelled replies: the family's answers, `DUMP` and `DEBUG DIGEST-VALUE`
/// of every key written.
pub fn snapshot<F: Family>(c: &mut Conn, written: &Written) -> Vec<(String, Reply)> {
    let mut out = Vec::new();
    for key in &written.keys {
        for (i, reply) in F::answers(c, key).into_iter().enumerate() {
            out.push((format!("{key}: answer {i}"), reply));
        }
        out.push((format!("DUMP {key}"), c.call(&["DUMP", key])));
        out.push((format!("DEBUG DIGEST-VALUE {key}"), c.call(&["DEBUG", "DIGEST-VALUE", key])));
    }
    out
}

/// A reply for a message: long ones (DUMP payloads) cut short.
fn shown(reply: &Reply) -> String {
    let text = format!("{reply:?}");
    match text.char_indices().nth(400) {
        Some((cut, _)) => format!("{}... ({} chars)", &text[..cut], text.len()),
        None => text,
    }
}

/// Two snapshots are equal, answer by answer (the first difference named).
pub fn assert_same(got: &[(String, Reply)], want: &[(String, Reply)], context: &str) {
    assert_eq!(got.len(), want.len(), "{context}: as many answers");
    for ((label, a), (_, b)) in got.iter().zip(want) {
        assert!(a == b, "{context}: {label} differs\n  got:      {}\n  expected: {}", shown(a), shown(b));
    }
}

/// The known replies of `written` are what they were recorded as.
pub fn check(c: &mut Conn, written: &Written, context: &str) {
    for (cmd, reply) in &written.expect {
        let got = c.call(cmd);
        assert!(got == *reply, "{context}: {} answered {}, not {}", show(cmd), shown(&got), shown(reply));
    }
}

fn show(cmd: &[Vec<u8>]) -> String {
    cmd.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ")
}

/// Every key's DUMP restores to the same value (digest and DUMP), and its
/// COPY is the same value; both are deleted again.
pub fn assert_copies_and_restores(c: &mut Conn, written: &Written, context: &str) {
    for key in &written.keys {
        let (dump, digest) = (c.call(&["DUMP", key]), c.call(&["DEBUG", "DIGEST-VALUE", key]));
        let restored = format!("{key}-restored");
        let reply = c.call(&[
            b"RESTORE".to_vec(),
            restored.clone().into_bytes(),
            b"0".to_vec(),
            dump.as_bytes().to_vec(),
        ]);
        assert_eq!(reply, Reply::Simple("OK".into()), "{context}: {key}'s own DUMP restores");
        assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", &restored]), digest, "{context}: RESTORE of {key}");
        assert!(c.call(&["DUMP", &restored]) == dump, "{context}: DUMP of the RESTORE of {key}");
        let copied = format!("{key}-copied");
        assert_eq!(c.call(&["COPY", key, &copied]), Reply::Int(1), "{context}: COPY {key}");
        assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", &copied]), digest, "{context}: COPY of {key}");
        assert!(c.call(&["DUMP", &copied]) == dump, "{context}: DUMP of the COPY of {key}");
        assert_eq!(c.call(&["DEL", &restored, &copied]), Reply::Int(2));
    }
}

/// SAVE and restart, then DEBUG RELOAD: the same digest and answers each
/// time; then every value's DUMP/RESTORE and COPY.
pub fn rdb_save_restart_and_reload<F: Family>(server: Server) {
    let context = format!("{server:?}");
    let mut s = TestServer::start(server, &[F::module()], &[]);
    let mut c = s.conn();
    let written = F::write(&mut c, "r");
    F::before_save(&mut c, &written, &context);
    // The state to compare is taken after SAVE: a family may compress its
    // values when it saves them (t-digest does, as RedisBloom's does).
    c.ok("SAVE");
    let (digest, answers) = (c.digest(), snapshot::<F>(&mut c, &written));
    s.restart(&[]);
    let mut c = s.conn();
    assert_eq!(c.digest(), digest, "{context}: RDB restart");
    assert_same(&snapshot::<F>(&mut c, &written), &answers, &format!("{context}: RDB restart"));
    check(&mut c, &written, &format!("{context}: after RDB restart"));
    c.ok("DEBUG RELOAD");
    assert_eq!(c.digest(), digest, "{context}: DEBUG RELOAD");
    assert_same(&snapshot::<F>(&mut c, &written), &answers, &format!("{context}: DEBUG RELOAD"));
    check(&mut c, &written, &format!("{context}: after DEBUG RELOAD"));
    assert_copies_and_restores(&mut c, &written, &format!("{context}: after DEBUG RELOAD"));
    F::after_reload(server, &mut c, &written, &context);
}

/// An AOF replayed, then rewritten with more writes on top, then replayed:
/// the same digest and answers each time, with and without the RDB
/// preamble; a rewrite without it writes the family's own command.
pub fn aof_replay_rewrite_and_restart<F: Family>(server: Server) {
    for preamble in [false, true] {
        let context = format!("{server:?}, preamble {preamble}");
        let mut s = TestServer::start(server, &[F::module()], &aof_args(preamble));
        let mut c = s.conn();
        c.wait_for_aof_rewrite(DEADLINE);
        let mut written = F::write(&mut c, "a");
        F::settle(&mut c, &written);
        let (digest, answers) = (c.digest(), snapshot::<F>(&mut c, &written));
        // Replay of the plain command log.
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!(c.digest(), digest, "{context}: replayed AOF");
        assert_same(&snapshot::<F>(&mut c, &written), &answers, &format!("{context}: replayed AOF"));
        // A rewrite, then more writes on top of it.
        c.ok("BGREWRITEAOF");
        c.wait_for_aof_rewrite(DEADLINE);
        written.extend(F::write(&mut c, "b"));
        F::settle(&mut c, &written);
        let (digest, answers) = (c.digest(), snapshot::<F>(&mut c, &written));
        s.restart(&[]);
        let mut c = s.conn();
        assert_eq!(c.digest(), digest, "{context}: rewritten AOF");
        assert_same(&snapshot::<F>(&mut c, &written), &answers, &format!("{context}: rewritten AOF"));
        check(&mut c, &written, &context);
        if !preamble {
            let text = s.base_aof();
            let command = F::REWRITE_COMMAND.as_bytes();
            assert!(
                text.windows(command.len()).any(|w| w == command),
                "{context}: the rewrite emits {}",
                F::REWRITE_COMMAND
            );
        }
    }
}

/// A replica (with [`Family::replica_module`]) after a full sync, the
/// stream, and a partial sync after a dropped link holds what its primary
/// holds and answers the same; promoted, it takes writes.
pub fn replicas_stay_identical<F: Family>(server: Server) {
    let context = format!("{server:?}");
    let primary = TestServer::start(server, &[F::module()], &[]);
    let mut p = primary.conn();
    let mut written = F::write(&mut p, "early");
    F::before_replica(&mut p, &written);
    let port = primary.port.to_string();
    let replica = TestServer::start(server, &[F::replica_module()], &["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    r.wait_for_sync(DEADLINE);
    assert_eq!(r.digest(), p.digest(), "{context}: full sync");
    check(&mut r, &written, &format!("{context}: full sync"));
    let late = F::write(&mut p, "late");
    F::settle(&mut p, &late);
    let more = F::stream(&mut p, &mut r, &context);
    assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1), "{context}");
    assert_eq!(r.digest(), p.digest(), "{context}: full sync then stream");
    check(&mut r, &written, &format!("{context}: full sync, after the stream"));
    check(&mut r, &late, &format!("{context}: replication stream"));
    written.extend(late);
    written.extend(more);
    // The replica is read first: a read on the primary may owe a write
    // that the replica gets only with the next one (t-digest's compression).
    let replica_answers = snapshot::<F>(&mut r, &written);
    assert_same(&replica_answers, &snapshot::<F>(&mut p, &written), &format!("{context}: the replica"));
    F::after_stream(&mut p, &mut r, &context);

    // Partial resync after a dropped link.
    let write = |p: &mut Conn| {
        let written = F::write(p, "after-drop");
        F::settle(p, &written);
        written
    };
    let after_drop = drop_link_and_resync(&mut p, &mut r, write, &context);
    check(&mut r, &after_drop, &format!("{context}: partial sync"));
    let replica_answers = snapshot::<F>(&mut r, &after_drop);
    assert_same(&replica_answers, &snapshot::<F>(&mut p, &after_drop), &format!("{context}: partial sync"));

    r.ok("REPLICAOF NO ONE");
    F::promoted(&mut r, &context);
}
