//! Every server state, every family (issue 31, item 2): each family's reads
//! and writes, DUMP, SAVE, BGSAVE, DEBUG RELOAD, COPY, scripts (EVAL_RO,
//! FCALL_RO, EVAL and FCALL that write) and MULTI, under each state a client
//! or an operator can put a server in: writes paused (`CLIENT PAUSE n
//! WRITE`, with the AOF on or a replica attached), everything paused
//! (`CLIENT PAUSE n ALL`), a read-only replica, `min-replicas-to-write`
//! unmet, OOM under `noeviction`, loading (`key-load-delay`), a `FAILOVER`
//! to a lagging replica, and a `SHUTDOWN` (or SIGTERM) of a primary whose
//! replica lags. On Redis 7.0 and 8.2, Valkey 8.1 and 9.1.
//!
//! What is checked: the server stays up; a read answers what it answered
//! before the state (on a `COPY` of the key taken before, so that nothing
//! the read does to its own key can hide a fault), through every path (plain,
//! EVAL_RO, FCALL_RO, MULTI); a read changes nothing stored (DUMP and DEBUG
//! DIGEST-VALUE of the key equal those of its copy); a refused write says
//! why with the server's own error (READONLY, NOREPLICAS, OOM, LOADING) and
//! changes nothing; a paused write waits and then runs; and where a replica
//! is attached, primary and replica hold the same values once it caught up.
//!
//! The families run in three groups, each its own test, so that a fault in
//! one cannot hide the others: `others` (BF on `MBbloom--` and on a
//! valkey-bloom `bloomfltr` key, CF, CMS, Top-K, XF, APBF count and time
//! windows), `tdigest`, whose digests hold unmerged values when the state
//! begins (the case of issue 31: a read that compresses in place
//! propagates, and a server with paused writes aborts on it), and `cells`,
//! Redis 8.12's Count-Min Sketch at the level that has it.
//!
//! One test per (scenario, server, group): `server_states <scenario>::<server>::<group>`.

use std::time::{Duration, Instant};

use bloomkit_testkit::{wait_until, Conn, Module, Reply, Server, TestServer};

const DEADLINE: Duration = Duration::from_secs(30);

/// The Lua body every script here runs: the command in ARGV.
const SCRIPT: &str = "return redis.call(unpack(ARGV))";

/// A function library with a read-only and a writing function, each
/// running the command in its arguments.
const LIBRARY: &str = "#!lua name=statematrix\n\
    redis.register_function{function_name='sm_read', callback=function(keys, args) return redis.call(unpack(args)) end, flags={'no-writes'}}\n\
    redis.register_function{function_name='sm_write', callback=function(keys, args) return redis.call(unpack(args)) end}";

// ---------------------------------------------------------------------------
// The families

#[derive(Clone, Copy, Debug, PartialEq)]
enum Group {
    /// BF (both key types), CF, CMS, Top-K, APBF, XF.
    Others,
    /// t-digest, holding unmerged values.
    Tdigest,
    /// Redis 8.12's Count-Min Sketch (`CELL_SIZE`, negative increments),
    /// at the level that has it, chosen at load.
    Cells,
}

impl Group {
    /// The keys whose values are compared (each has a `<key>-ref` copy).
    fn keys(self) -> &'static [&'static str] {
        match self {
            Group::Others => &["bf", "vb", "cf", "cms", "topk", "apc", "apt", "xf"],
            Group::Tdigest => &["td", "td2"],
            Group::Cells => &["c1", "c8", "c2"],
        }
    }

    /// The module's load arguments.
    fn module_args(self) -> Vec<String> {
        match self {
            Group::Cells => vec!["COMPAT".into(), "redisbloom-8.12".into()],
            _ => Vec::new(),
        }
    }

    /// Creates the keys (the valkey-bloom key by RESTORE of valkey-bloom's
    /// own DUMP payload: clients cannot create one under the default
    /// `bf.compat`).
    fn fill(self, n: &Node, c: &mut Conn) {
        match self {
            Group::Others => {
                n.ok(c, "BF.RESERVE bf 0.01 50");
                let mut madd = words("BF.MADD bf");
                madd.extend((0..80).map(|i| format!("item-{i}")));
                n.ok_args(c, &madd);
                let payload = vbloom_payload(n, c);
                let restored = n.call(c, &[b"RESTORE".to_vec(), b"vb".to_vec(), b"0".to_vec(), payload]);
                assert_eq!(restored, Reply::Simple("OK".into()), "{}: RESTORE vb", n.what);
                assert_eq!(
                    n.call(c, &words("TYPE vb")),
                    Reply::Simple(bloomkit_core::vbloom::TYPE_NAME.into()),
                    "{}",
                    n.what
                );
                for line in [
                    "CF.RESERVE cf 100",
                    "CF.INSERT cf ITEMS a b c",
                    "CMS.INITBYDIM cms 100 5",
                    "CMS.INCRBY cms a 1 b 2 c 3",
                    "CMS.INITBYDIM cms2 100 5",
                    "TOPK.RESERVE topk 3",
                    "TOPK.ADD topk a b c a d a",
                    "APBF.RESERVE apc 0.01 100 COUNT",
                    "APBF.MADD apc a b c",
                    // A day's window: no generation ends on the clock during a test.
                    "APBF.RESERVE apt 0.01 100 TIME 86400",
                    "APBF.MADD apt a b c",
                    "XF.RESERVE xf 0.01 CAPACITY 20",
                ] {
                    n.ok(c, line);
                }
                // Grown through doublings, possibly with one under way.
                let mut madd = words("XF.MADD xf");
                madd.extend((0..150).map(|i| format!("x-{i}")));
                n.ok_args(c, &madd);
            }
            Group::Tdigest => {
                n.ok(c, "TDIGEST.CREATE td");
                n.ok(c, "TDIGEST.ADD td 1 2 3");
                n.ok(c, "TDIGEST.CREATE td2 COMPRESSION 20");
                let mut add = words("TDIGEST.ADD td2");
                add.extend((0..100).map(|i| ((i * i) % 97).to_string()));
                n.ok_args(c, &add);
                let mut add = words("TDIGEST.ADD td2");
                add.extend((0..60).map(|i| ((i * 7) % 13).to_string()));
                n.ok_args(c, &add);
            }
            Group::Cells => {
                for line in [
                    "CMS.INITBYDIM c1 50 4 CELL_SIZE 1",
                    "CMS.INCRBY c1 a 5 b -3 c 100",
                    "CMS.INITBYDIM c8 50 4 CELL_SIZE 8",
                    "CMS.INCRBY c8 a 9000000000 b -7",
                    "CMS.INITBYDIM c2 50 4 CELL_SIZE 2",
                    "CMS.INCRBY c2 a 300",
                ] {
                    n.ok(c, line);
                }
            }
        }
    }

    /// Every read command, its key second.
    fn reads(self) -> &'static [&'static str] {
        match self {
            Group::Others => &[
                "BF.EXISTS bf item-7",
                "BF.MEXISTS bf item-1 nope",
                "BF.CARD bf",
                "BF.INFO bf",
                "BF.DEBUG bf",
                "BF.SCANDUMP bf 0",
                "BF.EXISTS vb a",
                "BF.MEXISTS vb a nope",
                "BF.CARD vb",
                "BF.INFO vb",
                "CF.EXISTS cf a",
                "CF.MEXISTS cf a nope",
                "CF.COUNT cf b",
                "CF.INFO cf",
                "CF.DEBUG cf",
                "CF.SCANDUMP cf 0",
                "CMS.QUERY cms a b nope",
                "CMS.INFO cms",
                "TOPK.QUERY topk a nope",
                "TOPK.COUNT topk a nope",
                "TOPK.LIST topk WITHCOUNT",
                "TOPK.INFO topk",
                "APBF.EXISTS apc a",
                "APBF.MEXISTS apc a nope",
                "APBF.INFO apc",
                "APBF.SCANDUMP apc 0",
                "APBF.EXISTS apt b",
                "APBF.MEXISTS apt b nope",
                "APBF.INFO apt",
                "APBF.SCANDUMP apt 0",
                "XF.EXISTS xf x-7",
                "XF.MEXISTS xf x-1 nope",
                "XF.COUNT xf x-3",
                "XF.CARD xf",
                "XF.INFO xf",
                "XF.SCANDUMP xf 0",
                "XF.SCANDUMP xf 1",
            ],
            Group::Tdigest => &[
                "TDIGEST.QUANTILE td 0.5",
                "TDIGEST.CDF td 2",
                "TDIGEST.TRIMMED_MEAN td 0.1 0.9",
                "TDIGEST.RANK td 2",
                "TDIGEST.REVRANK td 2",
                "TDIGEST.BYRANK td 1",
                "TDIGEST.BYREVRANK td 1",
                "TDIGEST.MIN td",
                "TDIGEST.MAX td",
                "TDIGEST.INFO td",
                "TDIGEST.QUANTILE td2 0.1 0.5 0.9",
                "TDIGEST.CDF td2 3 25 49",
                "TDIGEST.TRIMMED_MEAN td2 0.1 0.9",
                "TDIGEST.RANK td2 20",
                "TDIGEST.REVRANK td2 20",
                "TDIGEST.BYRANK td2 3",
                "TDIGEST.BYREVRANK td2 3",
                "TDIGEST.INFO td2",
            ],
            Group::Cells => &[
                "CMS.QUERY c1 a b c nope",
                "CMS.INFO c1",
                "CMS.QUERY c8 a b",
                "CMS.INFO c8",
                "CMS.QUERY c2 a",
            ],
        }
    }

    /// Every write command; `false` for those the server does not flag
    /// `denyoom` (they run under OOM).
    fn writes(self) -> &'static [(&'static str, bool)] {
        match self {
            Group::Others => &[
                ("BF.ADD bf w1", true),
                ("BF.MADD bf w2 w3", true),
                ("BF.INSERT bf ITEMS w4", true),
                ("BF.ADD vb w1", true),
                ("BF.INSERT vb ITEMS w2", true),
                ("BF.RESERVE bfnew 0.01 10", true),
                ("CF.ADD cf w1", true),
                ("CF.ADDNX cf w2", true),
                ("CF.INSERT cf ITEMS w3", true),
                ("CMS.INCRBY cms w 1", true),
                ("CMS.MERGE cms2 1 cms", true),
                ("TOPK.ADD topk w", true),
                ("TOPK.INCRBY topk w 2", true),
                ("APBF.ADD apc w", true),
                ("APBF.MADD apt w x", true),
                ("XF.ADD xf w1", true),
                ("XF.MADD xf w2 w3", true),
                ("XF.INSERT xf ITEMS w4", true),
                ("XF.RESERVE xfnew 0.01", true),
                ("XF.MERGE xfm 1 xf", true),
                ("CF.DEL cf a", false),
                ("XF.DEL xf x-1", false),
            ],
            Group::Tdigest => &[
                ("TDIGEST.ADD td 4 5 6", true),
                ("TDIGEST.CREATE tdnew", true),
                ("TDIGEST.MERGE tdm 2 td td2", true),
                ("TDIGEST.ADD td2 7", true),
                ("TDIGEST.RESET tdnew", true),
            ],
            Group::Cells => &[
                ("CMS.INCRBY c1 w 1 a -1", true),
                ("CMS.INCRBY c8 w -5", true),
                ("CMS.INITBYDIM cnew 10 2 CELL_SIZE 4", true),
                ("CMS.MERGE c2 1 c2", true),
            ],
        }
    }
}

/// valkey-bloom's DUMP of its filter f1 (a fixture), sealed with the RDB
/// version of `c`'s server.
fn vbloom_payload(n: &Node, c: &mut Conn) -> Vec<u8> {
    let path =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../bloomkit-core/tests/fixtures/valkey-bloom/f1.dump.hex");
    let text = std::fs::read_to_string(path).expect("the valkey-bloom fixture");
    let payload = hex::decode(text.trim()).expect("hex");
    n.ok(c, "SET rdb-version-probe x");
    let probe = n.call(c, &words("DUMP rdb-version-probe")).as_bytes().to_vec();
    n.ok(c, "DEL rdb-version-probe");
    let version = u16::from_le_bytes([probe[probe.len() - 10], probe[probe.len() - 9]]);
    bloomkit_core::common::payload::retarget(&payload, version).expect("retarget")
}

fn words(line: &str) -> Vec<String> {
    line.split(' ').map(String::from).collect()
}

/// A command with its key renamed to `<key>-ref`.
fn on_ref(line: &str) -> Vec<String> {
    let mut w = words(line);
    w[1] = format!("{}-ref", w[1]);
    w
}

fn eval_ro(line: &str) -> Vec<String> {
    let w = words(line);
    let mut cmd = vec!["EVAL_RO".into(), SCRIPT.into(), "1".into(), w[1].clone()];
    cmd.extend(w);
    cmd
}

fn eval(line: &str) -> Vec<String> {
    let w = words(line);
    let mut cmd = vec!["EVAL".into(), SCRIPT.into(), "1".into(), w[1].clone()];
    cmd.extend(w);
    cmd
}

fn fcall(function: &str, line: &str) -> Vec<String> {
    let w = words(line);
    let name = if function == "sm_read" { "FCALL_RO" } else { "FCALL" };
    let mut cmd = vec![name.into(), function.into(), "1".into(), w[1].clone()];
    cmd.extend(w);
    cmd
}

// ---------------------------------------------------------------------------
// Batches of commands, sent pipelined, replies checked as a whole

/// One command, or a MULTI ... EXEC around several.
#[derive(Clone, Debug)]
enum Step {
    One(Vec<String>),
    Multi(Vec<Vec<String>>),
}

impl Step {
    fn send(&self, c: &mut Conn) -> std::io::Result<()> {
        match self {
            Step::One(cmd) => c.send(cmd),
            Step::Multi(cmds) => {
                c.send(&["MULTI"])?;
                for cmd in cmds {
                    c.send(cmd)?;
                }
                c.send(&["EXEC"])
            }
        }
    }

    /// The step's reply; for a MULTI, `[MULTI's, each queued one's..., EXEC's]`.
    fn read(&self, c: &mut Conn) -> std::io::Result<Reply> {
        match self {
            Step::One(_) => Ok(c.read_raw()?.1),
            Step::Multi(cmds) => {
                let mut all = Vec::new();
                for _ in 0..cmds.len() + 2 {
                    all.push(c.read_raw()?.1);
                }
                Ok(Reply::Array(all))
            }
        }
    }
}

/// Every way to read: plain, EVAL_RO, FCALL_RO, and all of them in one MULTI.
fn read_steps(group: Group) -> Vec<Step> {
    let reads = group.reads();
    let mut steps: Vec<Step> = reads.iter().map(|l| Step::One(words(l))).collect();
    steps.extend(reads.iter().map(|l| Step::One(eval_ro(l))));
    steps.extend(reads.iter().map(|l| Step::One(fcall("sm_read", l))));
    steps.push(Step::Multi(reads.iter().map(|l| words(l)).collect()));
    steps
}

/// What each of `read_steps` must answer, given the plain answers.
fn expected_reads(baseline: &[Reply]) -> Vec<Reply> {
    let mut out: Vec<Reply> = Vec::new();
    for _ in 0..3 {
        out.extend(baseline.iter().cloned());
    }
    let mut multi = vec![Reply::Simple("OK".into())];
    multi.extend(baseline.iter().map(|_| Reply::Simple("QUEUED".into())));
    multi.push(Reply::Array(baseline.to_vec()));
    out.push(Reply::Array(multi));
    out
}

/// Every way to write: each write, COPY of each key, an EVAL and an FCALL
/// that write, and a MULTI of writes. The bool: refused under OOM.
fn write_steps(group: Group) -> Vec<(Step, bool)> {
    let writes = group.writes();
    let mut steps: Vec<(Step, bool)> = writes.iter().map(|(l, oom)| (Step::One(words(l)), *oom)).collect();
    for key in group.keys() {
        steps.push((Step::One(words(&format!("COPY {key} {key}-copy"))), true));
    }
    // The first write of each group can be repeated.
    steps.push((Step::One(eval(writes[0].0)), true));
    steps.push((Step::One(fcall("sm_write", writes[0].0)), true));
    steps.push((Step::Multi(vec![words(writes[0].0), words(writes[0].0)]), true));
    steps
}

/// How a batch of writes must be answered.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// Every command ran.
    Ran,
    /// Refused with this error code (and under OOM, only `denyoom` ones).
    Refused(&'static str),
}

fn check_writes(n: &Node, steps: &[(Step, bool)], replies: &[Reply], outcome: Outcome, context: &str) {
    assert_eq!(steps.len(), replies.len());
    for ((step, denyoom), reply) in steps.iter().zip(replies) {
        let refused = match outcome {
            Outcome::Ran => None,
            Outcome::Refused("OOM") if !denyoom => None,
            Outcome::Refused(code) => Some(code),
        };
        let why = format!("{}: {context}: {step:?} answered {reply:?}", n.what);
        match (step, refused) {
            (Step::One(_), None) => assert!(!reply.is_error(), "{why}: expected it to run"),
            (Step::One(_), Some(code)) => assert!(
                matches!(reply, Reply::Error(e) if e.starts_with(&format!("{code} "))),
                "{why}: expected {code}"
            ),
            (Step::Multi(cmds), None) => {
                let all = reply.as_array();
                assert_eq!(all[0], Reply::Simple("OK".into()), "{why}");
                assert!(all[1..=cmds.len()].iter().all(|r| *r == Reply::Simple("QUEUED".into())), "{why}");
                let exec = all[cmds.len() + 1].as_array();
                assert_eq!(exec.len(), cmds.len(), "{why}");
                assert!(exec.iter().all(|r| !r.is_error()), "{why}: expected EXEC to run all");
            }
            (Step::Multi(cmds), Some(code)) => {
                let all = reply.as_array();
                assert_eq!(all[0], Reply::Simple("OK".into()), "{why}");
                for queued in &all[1..=cmds.len()] {
                    assert!(
                        matches!(queued, Reply::Error(e) if e.starts_with(&format!("{code} "))),
                        "{why}: expected each queued write refused with {code}"
                    );
                }
                assert!(
                    matches!(&all[cmds.len() + 1], Reply::Error(e) if e.starts_with("EXECABORT ")),
                    "{why}: expected EXECABORT"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Servers

/// A server, and what to call it in messages.
struct Node {
    s: TestServer,
    what: String,
    group: Group,
}

/// The lines of a server log that tell why it died, or its tail.
fn why_dead(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    // Each mark and the line after it (the assertion's text, the signal's cause).
    let marked: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains("ASSERTION") || l.contains("crashed by signal") || l.contains("panicked"))
        .flat_map(|(i, _)| lines[i..(i + 2).min(lines.len())].iter().copied())
        .collect();
    if marked.is_empty() {
        lines[lines.len().saturating_sub(15)..].join("\n")
    } else {
        marked.join("\n")
    }
}

impl Node {
    fn start(server: Server, group: Group, extra: &[&str], role: &str) -> Node {
        // A replica's full sync starts at once (the default waits 5 s for others).
        let extra = [&["--repl-diskless-sync-delay", "0"], extra].concat();
        let s = TestServer::start(server, &[Module::Bloomkit(group.module_args())], &extra);
        let what = format!("{server:?} {role}");
        Node { s, what, group }
    }

    fn conn(&self) -> Conn {
        self.s.conn()
    }

    /// A command's reply; a server that stops answering fails the test
    /// saying on which command and why it died.
    fn call<A: AsRef<[u8]>>(&self, c: &mut Conn, args: &[A]) -> Reply {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_ref().to_vec()).collect();
        c.try_call(&args).unwrap_or_else(|e| self.died(&format!("{:?}", printable(&args)), &e))
    }

    fn died(&self, on: &str, e: &std::io::Error) -> ! {
        panic!("{}: the server stopped answering on {on} ({e}):\n{}", self.what, why_dead(&self.s.log()))
    }

    fn cmd(&self, c: &mut Conn, line: &str) -> Reply {
        self.call(c, &words(line))
    }

    fn ok(&self, c: &mut Conn, line: &str) -> Reply {
        self.ok_args(c, &words(line))
    }

    fn ok_args(&self, c: &mut Conn, args: &[String]) -> Reply {
        let reply = self.call(c, args);
        assert!(!reply.is_error(), "{}: {:?}: {reply:?}", self.what, printable_s(args));
        reply
    }

    /// Sends every step, then reads every reply.
    fn pipeline(&self, c: &mut Conn, steps: &[Step]) -> Vec<Reply> {
        for step in steps {
            step.send(c).unwrap_or_else(|e| self.died(&format!("sending {step:?}"), &e));
        }
        self.read_replies(c, steps)
    }

    fn read_replies(&self, c: &mut Conn, steps: &[Step]) -> Vec<Reply> {
        steps
            .iter()
            .map(|step| step.read(c).unwrap_or_else(|e| self.died(&format!("{step:?}"), &e)))
            .collect()
    }

    fn info(&self, c: &mut Conn, section: &str, field: &str) -> String {
        self.info_opt(c, section, field).unwrap_or_else(|| panic!("{}: {field} in INFO {section}", self.what))
    }

    /// A field of INFO that only some moments show.
    fn info_opt(&self, c: &mut Conn, section: &str, field: &str) -> Option<String> {
        let info = self.cmd(c, &format!("INFO {section}"));
        let text = String::from_utf8_lossy(info.as_bytes()).into_owned();
        text.lines().find_map(|l| l.strip_prefix(&format!("{field}:"))).map(|v| v.trim().to_string())
    }

    /// Waits until no child saves (a replica's full sync forks one).
    fn wait_no_fork(&self, c: &mut Conn) {
        wait_until("the forked child to end", DEADLINE, || {
            self.info(c, "persistence", "rdb_bgsave_in_progress") == "0"
                && self.info(c, "persistence", "aof_rewrite_in_progress") == "0"
        });
    }

    fn assert_alive(&self, c: &mut Conn, context: &str) {
        assert_eq!(self.cmd(c, "PING"), Reply::Simple("PONG".into()), "{}: {context}", self.what);
    }

    /// The key's DUMP and DEBUG DIGEST-VALUE.
    fn value(&self, c: &mut Conn, key: &str) -> (Reply, Reply) {
        (self.cmd(c, &format!("DUMP {key}")), self.cmd(c, &format!("DEBUG DIGEST-VALUE {key}")))
    }

    /// A new server replicating this one, synced.
    fn replica(&self) -> Node {
        let port = self.s.port.to_string();
        let r = Node::start(self.s.server, self.group, &["--replicaof", "127.0.0.1", &port], "replica");
        r.conn().wait_for_sync(DEADLINE);
        r
    }
}

fn printable(args: &[Vec<u8>]) -> Vec<String> {
    args.iter().map(|a| String::from_utf8_lossy(&a[..a.len().min(60)]).into_owned()).collect()
}

fn printable_s(args: &[String]) -> Vec<String> {
    args.iter().map(|a| a.chars().take(60).collect()).collect()
}

/// A server filled with a group's keys, each with a `<key>-ref` copy, the
/// function library loaded, and what the reads answer on the copies.
struct Fixture {
    group: Group,
    /// The plain reads' answers, on the `-ref` copies, before any state.
    baseline: Vec<Reply>,
}

impl Fixture {
    fn new(n: &Node, c: &mut Conn, group: Group) -> Fixture {
        group.fill(n, c);
        for key in group.keys() {
            assert_eq!(n.cmd(c, &format!("COPY {key} {key}-ref")), Reply::Int(1), "{}: COPY {key}", n.what);
        }
        let baseline: Vec<Reply> = group.reads().iter().map(|l| n.call(c, &on_ref(l))).collect();
        for (line, reply) in group.reads().iter().zip(&baseline) {
            assert!(!reply.is_error(), "{}: {line}: {reply:?}", n.what);
        }
        Fixture { group, baseline }
    }

    /// Every read path answers as the copies did, and no read changed a
    /// key: its DUMP and DEBUG DIGEST-VALUE equal its copy's.
    fn check_reads(&self, n: &Node, c: &mut Conn, context: &str) {
        let steps = read_steps(self.group);
        let replies = n.pipeline(c, &steps);
        for ((step, got), want) in steps.iter().zip(&replies).zip(expected_reads(&self.baseline)) {
            assert_eq!(got, &want, "{}: {context}: {step:?}", n.what);
        }
        self.check_unchanged(n, c, context);
    }

    fn check_unchanged(&self, n: &Node, c: &mut Conn, context: &str) {
        for key in self.group.keys() {
            let (dump, digest) = n.value(c, key);
            assert!(!dump.is_error() && dump != Reply::Nil, "{}: {context}: DUMP {key}: {dump:?}", n.what);
            let (ref_dump, ref_digest) = n.value(c, &format!("{key}-ref"));
            assert_eq!(digest, ref_digest, "{}: {context}: DEBUG DIGEST-VALUE {key} and its copy", n.what);
            assert!(dump == ref_dump, "{}: {context}: DUMP {key} and DUMP of its copy differ", n.what);
        }
    }
}

impl Node {
    fn load_library(&self, c: &mut Conn) {
        let reply = self.call(c, &["FUNCTION", "LOAD", "REPLACE", LIBRARY]);
        assert_eq!(reply, Reply::Bulk(b"statematrix".to_vec()), "{}: FUNCTION LOAD", self.what);
    }
}

/// SAVE, BGSAVE (to its end) and DEBUG RELOAD, each succeeding and leaving
/// the dataset as it was.
fn check_persistence(n: &Node, c: &mut Conn, context: &str) {
    let before = n.cmd(c, "DEBUG DIGEST");
    n.wait_no_fork(c);
    assert_eq!(n.cmd(c, "SAVE"), Reply::Simple("OK".into()), "{}: {context}: SAVE", n.what);
    let bgsave = n.cmd(c, "BGSAVE");
    assert!(!bgsave.is_error(), "{}: {context}: BGSAVE: {bgsave:?}", n.what);
    wait_until("BGSAVE to finish", DEADLINE, || n.info(c, "persistence", "rdb_bgsave_in_progress") == "0");
    assert_eq!(n.info(c, "persistence", "rdb_last_bgsave_status"), "ok", "{}: {context}", n.what);
    assert_eq!(n.cmd(c, "DEBUG RELOAD"), Reply::Simple("OK".into()), "{}: {context}: DEBUG RELOAD", n.what);
    assert_eq!(
        n.cmd(c, "DEBUG DIGEST"),
        before,
        "{}: {context}: the dataset after SAVE, BGSAVE, RELOAD",
        n.what
    );
}

/// Waits until the replica applied all the primary sent. (Not WAIT: on
/// Valkey 8.1, WAIT from a connection that wrote nothing itself returns at
/// once.)
fn caught_up(p: &Node, pc: &mut Conn, r: &Node, rc: &mut Conn, context: &str) {
    wait_until(&format!("{}: {context}: the replica to catch up", p.what), DEADLINE, || {
        p.info(pc, "replication", "master_repl_offset") == r.info(rc, "replication", "master_repl_offset")
    });
}

/// Once the replica caught up, it holds the primary's values, key by key
/// and as a whole.
fn assert_identical(p: &Node, pc: &mut Conn, r: &Node, rc: &mut Conn, group: Group, context: &str) {
    caught_up(p, pc, r, rc, context);
    for key in group.keys() {
        for key in [key.to_string(), format!("{key}-ref")] {
            let digest = format!("DEBUG DIGEST-VALUE {key}");
            assert_eq!(p.cmd(pc, &digest), r.cmd(rc, &digest), "{}: {context}: {key} on the replica", p.what);
        }
    }
    assert_eq!(
        p.cmd(pc, "DEBUG DIGEST"),
        r.cmd(rc, "DEBUG DIGEST"),
        "{}: {context}: the replica's dataset",
        p.what
    );
}

/// Runs every write and expects each to run (the state lifted).
fn check_writes_run(n: &Node, c: &mut Conn, group: Group, context: &str) {
    let steps = write_steps(group);
    let just: Vec<Step> = steps.iter().map(|(s, _)| s.clone()).collect();
    let replies = n.pipeline(c, &just);
    check_writes(n, &steps, &replies, Outcome::Ran, context);
}

/// Runs every write in a state that refuses them: each answers `code`,
/// and nothing changed but what non-`denyoom` commands did under OOM.
fn check_writes_refused(n: &Node, c: &mut Conn, group: Group, code: &'static str, context: &str) {
    let steps = write_steps(group);
    let (refused, allowed): (Vec<_>, Vec<_>) =
        steps.into_iter().partition(|(_, denyoom)| code != "OOM" || *denyoom);
    let before = n.cmd(c, "DEBUG DIGEST");
    let just: Vec<Step> = refused.iter().map(|(s, _)| s.clone()).collect();
    let replies = n.pipeline(c, &just);
    check_writes(n, &refused, &replies, Outcome::Refused(code), context);
    assert_eq!(n.cmd(c, "DEBUG DIGEST"), before, "{}: {context}: refused writes changed the data", n.what);
    let just: Vec<Step> = allowed.iter().map(|(s, _)| s.clone()).collect();
    let replies = n.pipeline(c, &just);
    check_writes(n, &allowed, &replies, Outcome::Refused(code), context);
}

/// Sends every write on a new connection while writes are paused, checks
/// that they wait (the server counts the client blocked and nothing
/// changed), and returns the connection to read their replies from.
fn send_paused_writes(n: &Node, c: &mut Conn, group: Group, context: &str) -> (Conn, Vec<(Step, bool)>) {
    let before = n.cmd(c, "DEBUG DIGEST");
    let steps = write_steps(group);
    let mut w = n.conn();
    for (step, _) in &steps {
        step.send(&mut w).unwrap_or_else(|e| n.died(&format!("sending {step:?}"), &e));
    }
    wait_until("the writer to be paused", DEADLINE, || n.info(c, "clients", "blocked_clients") == "1");
    assert_eq!(n.cmd(c, "DEBUG DIGEST"), before, "{}: {context}: a paused write ran", n.what);
    (w, steps)
}

fn read_step_replies(n: &Node, w: &mut Conn, steps: &[(Step, bool)]) -> Vec<Reply> {
    let just: Vec<Step> = steps.iter().map(|(s, _)| s.clone()).collect();
    n.read_replies(w, &just)
}

// ---------------------------------------------------------------------------
// The scenarios

/// Issue 31's reproduction, as it stands: with the AOF on, a read of a
/// digest holding unmerged values while writes are paused.
fn issue_reproduction(server: Server, group: Group) {
    let n = Node::start(server, group, &[], "primary");
    let mut c = n.conn();
    n.ok(&mut c, "CONFIG SET appendonly yes");
    n.ok(&mut c, "TDIGEST.CREATE td");
    n.ok(&mut c, "TDIGEST.ADD td 1 2 3");
    n.ok(&mut c, "CLIENT PAUSE 2000 WRITE");
    let q = n.cmd(&mut c, "TDIGEST.QUANTILE td 0.5");
    assert_eq!(q, Reply::Array(vec![Reply::Bulk(b"2".to_vec())]), "{}: the median of 1 2 3", n.what);
    n.assert_alive(&mut c, "after the read");
    n.ok(&mut c, "CLIENT UNPAUSE");
    n.ok(&mut c, "TDIGEST.ADD td 4");
    n.assert_alive(&mut c, "after a write");
}

/// Where writes propagate to while they are paused.
#[derive(Clone, Copy)]
enum Propagation {
    Aof,
    Replica,
}

/// `CLIENT PAUSE n WRITE`: reads, DUMP, DEBUG DIGEST-VALUE, SAVE, BGSAVE
/// and DEBUG RELOAD run and answer as before; writes (COPY, EVAL, FCALL,
/// MULTI included) wait and then run.
fn paused_writes(server: Server, group: Group, propagation: Propagation) {
    let extra: &[&str] = match propagation {
        Propagation::Aof => &["--appendonly", "yes", "--appendfsync", "always"],
        Propagation::Replica => &[],
    };
    let p = Node::start(server, group, extra, "primary");
    let mut c = p.conn();
    c.wait_for_aof_rewrite(DEADLINE);
    p.load_library(&mut c);
    let fx = Fixture::new(&p, &mut c, group);
    let replica = matches!(propagation, Propagation::Replica).then(|| p.replica());

    p.ok(&mut c, "CLIENT PAUSE 60000 WRITE");
    fx.check_reads(&p, &mut c, "writes paused");
    check_persistence(&p, &mut c, "writes paused");
    fx.check_unchanged(&p, &mut c, "writes paused, after DEBUG RELOAD");
    let (mut w, steps) = send_paused_writes(&p, &mut c, group, "writes paused");
    p.ok(&mut c, "CLIENT UNPAUSE");
    let replies = read_step_replies(&p, &mut w, &steps);
    check_writes(&p, &steps, &replies, Outcome::Ran, "paused writes, once unpaused");
    p.assert_alive(&mut c, "after the pause");

    match replica {
        Some(r) => {
            let mut rc = r.conn();
            assert_identical(&p, &mut c, &r, &mut rc, group, "after the pause");
        }
        None => {
            // The AOF holds what memory holds.
            let before = p.cmd(&mut c, "DEBUG DIGEST");
            assert_eq!(p.cmd(&mut c, "DEBUG LOADAOF"), Reply::Simple("OK".into()), "{}", p.what);
            assert_eq!(p.cmd(&mut c, "DEBUG DIGEST"), before, "{}: the AOF replayed", p.what);
        }
    }
}

fn paused_writes_aof(server: Server, group: Group) {
    paused_writes(server, group, Propagation::Aof)
}

fn paused_writes_replica(server: Server, group: Group) {
    paused_writes(server, group, Propagation::Replica)
}

/// `CLIENT PAUSE n ALL` pauses this test's connections too: every command
/// sent during the pause waits, and once it lifts, each answers as it would
/// have (reads as before, then writes run, SAVE and DEBUG RELOAD succeed).
fn paused_all(server: Server, group: Group) {
    const PAUSE_MS: u64 = 500;
    let p = Node::start(server, group, &[], "primary");
    let mut c = p.conn();
    p.load_library(&mut c);
    let fx = Fixture::new(&p, &mut c, group);
    let r = p.replica();
    let mut b = p.conn();
    p.wait_no_fork(&mut c);

    let reads = read_steps(group);
    let writes = write_steps(group);
    let mut steps = reads.clone();
    steps.extend(fx.group.keys().iter().map(|k| Step::One(words(&format!("DUMP {k}")))));
    steps.push(Step::One(words("SAVE")));
    steps.push(Step::One(words("DEBUG RELOAD")));
    steps.extend(writes.iter().map(|(s, _)| s.clone()));

    p.ok(&mut c, &format!("CLIENT PAUSE {PAUSE_MS} ALL"));
    let paused_at = Instant::now();
    for step in &steps {
        step.send(&mut b).unwrap_or_else(|e| p.died(&format!("sending {step:?}"), &e));
    }
    let replies = p.read_replies(&mut b, &steps);
    let waited = paused_at.elapsed();
    // The pause began before `paused_at`; a margin for this machine's scheduling.
    assert!(
        waited >= Duration::from_millis(PAUSE_MS / 2),
        "{}: answered after {waited:?}, within the pause",
        p.what
    );

    let (read_replies, rest) = replies.split_at(reads.len());
    for ((step, got), want) in reads.iter().zip(read_replies).zip(expected_reads(&fx.baseline)) {
        assert_eq!(got, &want, "{}: all paused: {step:?}", p.what);
    }
    let (dumps, rest) = rest.split_at(group.keys().len());
    for (key, dump) in group.keys().iter().zip(dumps) {
        let ref_dump = p.cmd(&mut c, &format!("DUMP {key}-ref"));
        assert!(
            *dump == ref_dump && *dump != Reply::Nil,
            "{}: all paused: DUMP {key} and its copy's",
            p.what
        );
    }
    assert_eq!(rest[0], Reply::Simple("OK".into()), "{}: all paused: SAVE", p.what);
    assert_eq!(rest[1], Reply::Simple("OK".into()), "{}: all paused: DEBUG RELOAD", p.what);
    check_writes(&p, &writes, &rest[2..], Outcome::Ran, "all paused, once unpaused");
    p.assert_alive(&mut c, "after the pause");
    let mut rc = r.conn();
    assert_identical(&p, &mut c, &r, &mut rc, group, "after the pause");
}

/// A read-only replica: reads answer as on the primary and change nothing
/// (the replica stays identical to its primary); writes answer READONLY.
fn readonly_replica(server: Server, group: Group) {
    let p = Node::start(server, group, &[], "primary");
    let mut pc = p.conn();
    p.load_library(&mut pc);
    let fx = Fixture::new(&p, &mut pc, group);
    let r = p.replica();
    let mut rc = r.conn();
    caught_up(&p, &mut pc, &r, &mut rc, "before");

    fx.check_reads(&r, &mut rc, "read-only replica");
    check_writes_refused(&r, &mut rc, group, "READONLY", "read-only replica");
    check_persistence(&r, &mut rc, "read-only replica");
    fx.check_unchanged(&r, &mut rc, "read-only replica, after DEBUG RELOAD");
    r.assert_alive(&mut rc, "after the reads and writes");
    assert_identical(&p, &mut pc, &r, &mut rc, group, "after reads on the replica");
    check_writes_run(&p, &mut pc, group, "the primary, after");
    assert_identical(&p, &mut pc, &r, &mut rc, group, "after writes on the primary");
}

/// `min-replicas-to-write 2` with one replica: writes answer NOREPLICAS,
/// reads run; then the setting lifted, writes run and reach the replica.
fn min_replicas_unmet(server: Server, group: Group) {
    let p = Node::start(server, group, &[], "primary");
    let mut c = p.conn();
    p.load_library(&mut c);
    let fx = Fixture::new(&p, &mut c, group);
    let r = p.replica();
    p.ok(&mut c, "CONFIG SET min-replicas-to-write 2");

    fx.check_reads(&p, &mut c, "min-replicas-to-write unmet");
    check_writes_refused(&p, &mut c, group, "NOREPLICAS", "min-replicas-to-write unmet");
    check_persistence(&p, &mut c, "min-replicas-to-write unmet");
    fx.check_unchanged(&p, &mut c, "min-replicas-to-write unmet, after DEBUG RELOAD");
    p.ok(&mut c, "CONFIG SET min-replicas-to-write 0");
    check_writes_run(&p, &mut c, group, "min-replicas-to-write lifted");
    p.assert_alive(&mut c, "after");
    let mut rc = r.conn();
    assert_identical(&p, &mut c, &r, &mut rc, group, "after");
}

/// `maxmemory 1` under `noeviction`: `denyoom` writes answer OOM, others
/// (CF.DEL) and reads run; Redis 7.0 refuses any command queued in a MULTI
/// (8.2 and Valkey queue reads).
fn oom_noeviction(server: Server, group: Group) {
    let p = Node::start(server, group, &[], "primary");
    let mut c = p.conn();
    p.load_library(&mut c);
    let fx = Fixture::new(&p, &mut c, group);
    let r = p.replica();
    p.ok(&mut c, "CONFIG SET maxmemory-policy noeviction");
    p.ok(&mut c, "CONFIG SET maxmemory 1");

    if server == Server::Redis {
        // Everything but the MULTI, then a MULTI whose reads are refused.
        let steps = read_steps(group);
        let (multi, plain) = steps.split_last().unwrap();
        let replies = p.pipeline(&mut c, plain);
        for ((step, got), want) in plain.iter().zip(&replies).zip(expected_reads(&fx.baseline)) {
            assert_eq!(got, &want, "{}: OOM: {step:?}", p.what);
        }
        let multi = p.pipeline(&mut c, std::slice::from_ref(multi)).remove(0);
        let all = multi.as_array();
        assert_eq!(all[0], Reply::Simple("OK".into()), "{}", p.what);
        assert!(
            all[1..all.len() - 1].iter().all(|r| r.is_error() && r.error_text().starts_with("OOM ")),
            "{}: {multi:?}",
            p.what
        );
        assert!(all[all.len() - 1].error_text().starts_with("EXECABORT "), "{}: {multi:?}", p.what);
        fx.check_unchanged(&p, &mut c, "OOM");
    } else {
        fx.check_reads(&p, &mut c, "OOM");
    }
    check_writes_refused(&p, &mut c, group, "OOM", "OOM");
    check_persistence(&p, &mut c, "OOM");
    p.ok(&mut c, "CONFIG SET maxmemory 0");
    check_writes_run(&p, &mut c, group, "OOM lifted");
    p.assert_alive(&mut c, "after");
    let mut rc = r.conn();
    assert_identical(&p, &mut c, &r, &mut rc, group, "after");
}

/// Loading (DEBUG RELOAD slowed by `key-load-delay`): every command but
/// the few the server allows while loading answers LOADING; the load ends
/// with the data as it was.
fn loading(server: Server, group: Group) {
    let p = Node::start(server, group, &[], "primary");
    let mut c = p.conn();
    p.load_library(&mut c);
    let fx = Fixture::new(&p, &mut c, group);
    // Values of 2 kB, so that the server answers clients after each key.
    p.ok(&mut c, "DEBUG POPULATE 3000 pad 2000");
    let before = p.cmd(&mut c, "DEBUG DIGEST");
    p.ok(&mut c, "CONFIG SET loading-process-events-interval-bytes 1024");
    p.ok(&mut c, "CONFIG SET key-load-delay 1000");
    let mut loader = p.conn();
    loader.send(&["DEBUG", "RELOAD"]).unwrap();
    wait_until("loading to begin", DEADLINE, || p.info(&mut c, "persistence", "loading") == "1");

    let reads = read_steps(group);
    let writes = write_steps(group);
    let mut steps = reads.clone();
    steps.extend(writes.iter().map(|(s, _)| s.clone()));
    for key in group.keys() {
        steps.push(Step::One(words(&format!("DUMP {key}"))));
        steps.push(Step::One(words(&format!("COPY {key} {key}-x"))));
    }
    steps.push(Step::One(words("SAVE")));
    steps.push(Step::One(words("BGSAVE")));
    let replies = p.pipeline(&mut c, &steps);
    assert_eq!(
        p.info(&mut c, "persistence", "loading"),
        "1",
        "{}: the load ended before the checks did",
        p.what
    );
    for (step, reply) in steps.iter().zip(&replies) {
        let why = format!("{}: loading: {step:?} answered {reply:?}", p.what);
        match step {
            Step::One(_) => assert!(reply.is_error() && reply.error_text().starts_with("LOADING "), "{why}"),
            Step::Multi(_) => {
                // MULTI and EXEC run while loading; the commands queued do not.
                let all = reply.as_array();
                assert_eq!(all[0], Reply::Simple("OK".into()), "{why}");
                assert!(
                    all[1..all.len() - 1]
                        .iter()
                        .all(|r| r.is_error() && r.error_text().starts_with("LOADING ")),
                    "{why}"
                );
                assert!(
                    all[all.len() - 1].is_error()
                        && all[all.len() - 1].error_text().starts_with("EXECABORT "),
                    "{why}"
                );
            }
        }
    }
    // DEBUG runs while loading: digests of what is loaded so far.
    for key in group.keys() {
        let d = p.cmd(&mut c, &format!("DEBUG DIGEST-VALUE {key}"));
        assert!(matches!(d, Reply::Array(_)), "{}: loading: DEBUG DIGEST-VALUE {key}: {d:?}", p.what);
    }
    p.ok(&mut c, "CONFIG SET key-load-delay 0");
    let reloaded = p.read_replies(&mut loader, &[Step::One(words("DEBUG RELOAD"))]);
    assert_eq!(reloaded[0], Reply::Simple("OK".into()), "{}: DEBUG RELOAD", p.what);
    assert_eq!(p.cmd(&mut c, "DEBUG DIGEST"), before, "{}: the data after loading", p.what);
    fx.check_reads(&p, &mut c, "after loading");
    check_writes_run(&p, &mut c, group, "after loading");
    p.assert_alive(&mut c, "after");
}

/// Makes the replica lag: `CLIENT PAUSE WRITE` on a replica holds its
/// primary's stream too, until `CLIENT UNPAUSE`.
fn hold_replica(r: &Node, rc: &mut Conn) {
    r.ok(rc, "CLIENT PAUSE 60000 WRITE");
}

/// `FAILOVER` to a replica that lags: while the primary waits for it, with
/// writes paused, reads, DUMP and SAVE run and writes wait; once the roles
/// swap, the waiting writes answer READONLY, the new primary takes writes,
/// and both hold the same values.
fn failover(server: Server, group: Group) {
    let p = Node::start(server, group, &[], "primary");
    let mut pc = p.conn();
    p.load_library(&mut pc);
    let fx = Fixture::new(&p, &mut pc, group);
    let r = p.replica();
    let mut rc = r.conn();
    caught_up(&p, &mut pc, &r, &mut rc, "before");
    p.wait_no_fork(&mut pc);

    hold_replica(&r, &mut rc);
    p.ok(&mut pc, "SET lag 1");
    p.ok(&mut pc, "FAILOVER TIMEOUT 60000");
    assert_eq!(p.info(&mut pc, "replication", "master_failover_state"), "waiting-for-sync", "{}", p.what);
    fx.check_reads(&p, &mut pc, "failover waiting for the replica");
    assert_eq!(p.cmd(&mut pc, "SAVE"), Reply::Simple("OK".into()), "{}: SAVE during the failover", p.what);
    fx.check_unchanged(&p, &mut pc, "failover waiting for the replica, after SAVE");
    let (mut w, steps) = send_paused_writes(&p, &mut pc, group, "failover waiting for the replica");
    assert_eq!(p.info(&mut pc, "replication", "master_failover_state"), "waiting-for-sync", "{}", p.what);
    r.ok(&mut rc, "CLIENT UNPAUSE");
    wait_until("the failover", DEADLINE, || {
        p.info(&mut pc, "replication", "role") == "slave"
            && r.info(&mut rc, "replication", "role") == "master"
    });
    let replies = read_step_replies(&p, &mut w, &steps);
    check_writes(&p, &steps, &replies, Outcome::Refused("READONLY"), "writes paused by the failover");
    p.assert_alive(&mut pc, "after the failover");
    r.assert_alive(&mut rc, "after the failover");
    pc.wait_for_sync(DEADLINE);
    check_writes_run(&r, &mut rc, group, "the new primary");
    assert_identical(&r, &mut rc, &p, &mut pc, group, "after the failover");
}

#[derive(Clone, Copy, Debug)]
enum Stop {
    /// SHUTDOWN, with reads while it waits for the replica.
    Shutdown,
    /// SIGTERM, nothing read: the final save meets the digests unmerged.
    Sigterm,
}

/// A primary with a lagging replica stopped by SHUTDOWN or SIGTERM: it
/// waits for the replica (writes paused, reads answered), saves, exits
/// cleanly and leaves a dump.rdb that restarts to the replica's data.
fn stop_with_replica(server: Server, group: Group, how: Stop) {
    let mut p = Node::start(server, group, &[], "primary");
    let mut pc = p.conn();
    p.load_library(&mut pc);
    let fx = Fixture::new(&p, &mut pc, group);
    p.ok_args(&mut pc, &["CONFIG".into(), "SET".into(), "save".into(), "3600 1".into()]);
    let r = p.replica();
    let mut rc = r.conn();
    caught_up(&p, &mut pc, &r, &mut rc, "before");

    hold_replica(&r, &mut rc);
    p.ok(&mut pc, "SET lag 1");
    let pid = p.info(&mut pc, "server", "process_id");
    let mut stopper = p.conn();
    match how {
        Stop::Shutdown => stopper.send(&["SHUTDOWN"]).unwrap(),
        Stop::Sigterm => {
            let status = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
            assert!(status.success());
        }
    }
    wait_until("the shutdown to wait for the replica", DEADLINE, || {
        // The field shows only while a shutdown waits.
        p.info_opt(&mut pc, "server", "shutdown_in_milliseconds").is_some_and(|ms| ms != "0")
    });
    if let Stop::Shutdown = how {
        // While it waits for the replica, reads are answered.
        let steps = read_steps(group);
        let replies = p.pipeline(&mut pc, &steps);
        for ((step, got), want) in steps.iter().zip(&replies).zip(expected_reads(&fx.baseline)) {
            assert_eq!(got, &want, "{}: stopping ({how:?}): {step:?}", p.what);
        }
    }
    r.ok(&mut rc, "CLIENT UNPAUSE");
    wait_until("the primary to exit", DEADLINE, || !p.s.is_alive());
    let log = p.s.log();
    assert!(
        log.contains("ready to exit, bye bye"),
        "{}: {how:?}: no clean exit:\n{}",
        p.what,
        why_dead(&log)
    );
    assert!(p.s.dir().join("dump.rdb").exists(), "{}: {how:?}: no dump.rdb:\n{}", p.what, why_dead(&log));

    // Restarted from its dump.rdb, it holds what the replica holds.
    p.s.kill();
    p.s.restart(&[]);
    let mut pc = p.conn();
    r.assert_alive(&mut rc, "after its primary stopped");
    for key in group.keys() {
        let digest = format!("DEBUG DIGEST-VALUE {key}");
        assert_eq!(p.cmd(&mut pc, &digest), r.cmd(&mut rc, &digest), "{}: {how:?}: {key} restarted", p.what);
    }
    assert_eq!(
        p.cmd(&mut pc, "DEBUG DIGEST"),
        r.cmd(&mut rc, "DEBUG DIGEST"),
        "{}: {how:?}: restarted",
        p.what
    );
}

fn shutdown_with_replica(server: Server, group: Group) {
    stop_with_replica(server, group, Stop::Shutdown)
}

fn sigterm_with_replica(server: Server, group: Group) {
    stop_with_replica(server, group, Stop::Sigterm)
}

/// Every family in core's list has a key in one of the groups, so that a
/// family added to the list and not to the matrix fails here, named.
#[test]
fn every_family_has_a_key_in_a_group() {
    let mut types = Vec::new();
    for group in [Group::Others, Group::Tdigest, Group::Cells] {
        let n = Node::start(Server::Redis, group, &[], "primary");
        let mut c = n.conn();
        group.fill(&n, &mut c);
        for key in group.keys() {
            types.push(n.call(&mut c, &words(&format!("TYPE {key}"))));
        }
    }
    let missing: Vec<&str> = bloomkit_core::family::KINDS
        .iter()
        .filter(|k| !types.contains(&Reply::Simple(k.type_name.into())))
        .map(|k| k.name)
        .collect();
    assert!(missing.is_empty(), "families with no key in the server-state matrix: {missing:?}");
}

// ---------------------------------------------------------------------------
// The matrix: one test per (scenario, server, group)

macro_rules! matrix {
    ($($scenario:ident: [$($test:ident = $group:ident),*]),* $(,)?) => {$(
        mod $scenario {
            use super::*;
            matrix!(@server $scenario redis7 Redis [$($test = $group),*]);
            matrix!(@server $scenario redis8 Redis8 [$($test = $group),*]);
            matrix!(@server $scenario valkey8 Valkey8 [$($test = $group),*]);
            matrix!(@server $scenario valkey9 Valkey [$($test = $group),*]);
        }
    )*};
    (@server $scenario:ident $name:ident $server:ident [$($test:ident = $group:ident),*]) => {
        mod $name {
            use super::*;
            $(
                #[test]
                fn $test() {
                    super::super::$scenario(Server::$server, Group::$group)
                }
            )*
        }
    };
}

matrix! {
    issue_reproduction: [tdigest = Tdigest],
    paused_writes_aof: [others = Others, tdigest = Tdigest, cells = Cells],
    paused_writes_replica: [others = Others, tdigest = Tdigest, cells = Cells],
    paused_all: [others = Others, tdigest = Tdigest, cells = Cells],
    readonly_replica: [others = Others, tdigest = Tdigest, cells = Cells],
    min_replicas_unmet: [others = Others, tdigest = Tdigest, cells = Cells],
    oom_noeviction: [others = Others, tdigest = Tdigest, cells = Cells],
    loading: [others = Others, tdigest = Tdigest, cells = Cells],
    failover: [others = Others, tdigest = Tdigest, cells = Cells],
    shutdown_with_replica: [others = Others, tdigest = Tdigest, cells = Cells],
    sigterm_with_replica: [others = Others, tdigest = Tdigest, cells = Cells],
}
