//! Active defrag (`activedefrag yes`) of every data type, on each server
//! that can run it: fragmentation made on purpose (filters of every type
//! interleaved with string keys, most of the strings then deleted) is
//! defragmented until bloomkit's `INFO bf` counters show blocks of every
//! type moved by the server; every filter then answers as before, `DEBUG
//! DIGEST-VALUE` of each and `DEBUG DIGEST` are unchanged, and the moved
//! blocks grow (a scale-out reallocates a moved list) and free cleanly.
//!
//! Only servers built with Redis's own jemalloc defragment: the valkey
//! wheels use libc malloc, and Debian's redis-server 7.0 links the system's
//! jemalloc, which lacks the defrag hint, so it refuses `activedefrag yes`.
//! Both are skipped with the reason printed; redis-server 8.2 must run.
//!
//! The large filters (a chain of three sub-filters, 5.6 MB; an APBF of
//! several MB; 1.2 MB chain and valkey-bloom object) take both of the
//! server's paths: with `active-defrag-max-scan-fields 1` a value whose
//! `free_effort` (MiB) is above 1 is defragmented late, with a cursor and
//! an end time, and one of 1 MiB at once; small filters (effort 0, which the
//! server reads as unbounded) are always late. Their arrays of 1 MiB and
//! more are never offered to the server (`bf_defrag_large_kept`). Whether a
//! late value is cut short and resumed depends on where the server's 500 µs
//! slice ends, which a test cannot arrange: `bf_defrag_keys_resumed` is
//! printed, not asserted; core's unit tests resume every walk at every
//! buffer.

use bloomkit_core::family::{same_name, KINDS, VBLOOM};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bloomkit_core::vbloom::{Object, FIXED_SEED};
use bloomkit_core::Limits;
use bloomkit_testkit::{per_server, Conn, Reply, Rng, Server, TestServer};

const ROUNDS: usize = 2500;
const STRINGS_PER_ROUND: usize = 8;
const DEADLINE: Duration = Duration::from_secs(120);

/// Every type's objects and bytes fields in `INFO bf`.
fn counted(c: &mut Conn) -> Vec<u64> {
    let fields = [
        "bf_filters",
        "bf_bytes",
        "bf_cf_filters",
        "bf_cf_bytes",
        "bf_apbf_filters",
        "bf_apbf_bytes",
        "bf_cms_sketches",
        "bf_cms_bytes",
        "bf_topk_sketches",
        "bf_topk_bytes",
        "bf_tdigest_digests",
        "bf_tdigest_bytes",
        "bf_xf_filters",
        "bf_xf_bytes",
    ];
    fields.iter().map(|f| c.info_field("bf", f).parse().unwrap()).collect()
}

fn command(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn line(text: &str) -> Vec<Vec<u8>> {
    text.split(' ').map(|p| p.as_bytes().to_vec()).collect()
}

/// A filter key, how to ask it about items, and the items added to it.
struct Filter {
    key: String,
    exists: &'static str,
    items: Vec<String>,
}

impl Filter {
    /// The items added and as many never added; for a t-digest, its
    /// quantiles (it answers numbers, not membership).
    fn probe(&self) -> Vec<Vec<u8>> {
        if self.exists == "TDIGEST.QUANTILE" {
            return line(&format!("TDIGEST.QUANTILE {} 0 0.25 0.5 0.75 1", self.key));
        }
        let mut cmd = vec![self.exists.as_bytes().to_vec(), self.key.as_bytes().to_vec()];
        cmd.extend(self.items.iter().map(|i| i.as_bytes().to_vec()));
        cmd.extend((0..self.items.len().max(4)).map(|i| format!("absent-{}-{i}", self.key).into_bytes()));
        cmd
    }

    /// Whether its answers say that it holds its items (a count of at
    /// least one for a sketch; a t-digest's quantiles answer as numbers).
    fn holds(&self, answer: &Reply) -> bool {
        if self.exists == "TDIGEST.QUANTILE" {
            return !answer.is_error();
        }
        answer.as_array()[..self.items.len()].iter().all(|r| r.as_int() >= 1)
    }
}

/// A valkey-bloom object (`bloomfltr`) with `items`, as a `BF.LOAD` blob.
fn valkey_blob(capacity: u64, items: &[String]) -> Vec<u8> {
    let mut o = Object::new(capacity, 0.01, 0.5, 2, &FIXED_SEED, Limits::NONE).unwrap();
    for i in items {
        o.add(i.as_bytes(), Limits::NONE).unwrap();
    }
    o.encode_blob().unwrap()
}

/// Creates the filters, interleaved with strings, and the large ones;
/// deletes most strings. Returns the filters.
fn fragment(c: &mut Conn, rng: &mut Rng) -> Vec<Filter> {
    // APBFs are made from the headers of a few, as APBF.RESERVE's sizing
    // search is slow in debug builds.
    let apbf_headers: Vec<Vec<u8>> = [20, 60, 120, 250]
        .iter()
        .map(|capacity| {
            c.ok(&format!("APBF.RESERVE template 0.01 {capacity} COUNT"));
            let header = c.cmd("APBF.SCANDUMP template 0").as_array()[1].as_bytes().to_vec();
            c.ok("DEL template");
            header
        })
        .collect();
    let mut commands = Vec::new();
    let mut filters = Vec::new();
    let mut strings = Vec::new();
    for round in 0..ROUNDS {
        for s in 0..STRINGS_PER_ROUND {
            let key = format!("s:{round}:{s}");
            let value = "x".repeat(1 + rng.below(600));
            commands.push(command(&[b"SET", key.as_bytes(), value.as_bytes()]));
            strings.push(key);
        }
        let items: Vec<String> = (0..1 + rng.below(6)).map(|i| format!("item-{round}-{i}")).collect();
        let list = items.join(" ");
        let bf = format!("bf:{round}");
        commands.push(line(&format!("BF.RESERVE {bf} 0.01 {} EXPANSION 2", 4 + rng.below(200))));
        commands.push(line(&format!("BF.MADD {bf} {list}")));
        let cf = format!("cf:{round}");
        commands.push(line(&format!("CF.RESERVE {cf} {} BUCKETSIZE 2", 16 + rng.below(300))));
        commands.push(line(&format!("CF.INSERT {cf} ITEMS {list}")));
        let apbf = format!("apbf:{round}");
        let header = &apbf_headers[rng.below(apbf_headers.len())];
        commands.push(command(&[b"APBF.LOADCHUNK", apbf.as_bytes(), b"0", header]));
        commands.push(line(&format!("APBF.MADD {apbf} {list}")));
        let vb = format!("vb:{round}");
        let blob = valkey_blob(2 + rng.below64(100), &items);
        commands.push(command(&[b"BF.LOAD", vb.as_bytes(), &blob]));
        let cms = format!("cms:{round}");
        commands.push(line(&format!("CMS.INITBYDIM {cms} {} 4", 50 + rng.below(400))));
        let increments: Vec<String> = items.iter().map(|i| format!("{i} 1")).collect();
        commands.push(line(&format!("CMS.INCRBY {cms} {}", increments.join(" "))));
        let topk = format!("topk:{round}");
        commands.push(line(&format!("TOPK.RESERVE {topk} {} 50 4 0.9", 6 + rng.below(20))));
        commands.push(line(&format!("TOPK.ADD {topk} {list}")));
        let td = format!("td:{round}");
        // A small compression keeps the node arrays in the small size
        // classes the strings fragment.
        commands.push(line(&format!("TDIGEST.CREATE {td} COMPRESSION {}", 2 + rng.below(10))));
        let values: Vec<String> = (0..1 + rng.below(40)).map(|v| (v * 7 % 101).to_string()).collect();
        commands.push(line(&format!("TDIGEST.ADD {td} {}", values.join(" "))));
        let xf = format!("xf:{round}");
        commands.push(line(&format!("XF.RESERVE {xf} 0.01 CAPACITY {}", 1 + rng.below(300))));
        commands.push(line(&format!("XF.MADD {xf} {list}")));
        filters.push(Filter { key: bf, exists: "BF.MEXISTS", items: items.clone() });
        filters.push(Filter { key: cf, exists: "CF.MEXISTS", items: items.clone() });
        filters.push(Filter { key: apbf, exists: "APBF.MEXISTS", items: items.clone() });
        filters.push(Filter { key: vb, exists: "BF.MEXISTS", items: items.clone() });
        filters.push(Filter { key: cms, exists: "CMS.QUERY", items: items.clone() });
        filters.push(Filter { key: topk, exists: "TOPK.QUERY", items: items.clone() });
        filters.push(Filter { key: td, exists: "TDIGEST.QUANTILE", items: Vec::new() });
        filters.push(Filter { key: xf, exists: "XF.MEXISTS", items });
    }
    for (i, reply) in c.pipeline(&commands).iter().enumerate() {
        assert!(!reply.is_error(), "{:?}: {reply:?}", String::from_utf8_lossy(&commands[i].concat()));
    }

    add_large_ones(c, &mut filters);

    // Most strings go, leaving the filters' slabs sparsely and unevenly used.
    let dels: Vec<Vec<Vec<u8>>> =
        strings.iter().filter(|_| rng.chance(90)).map(|k| command(&[b"DEL", k.as_bytes()])).collect();
    assert!(c.pipeline(&dels).iter().all(|r| *r == Reply::Int(1)));
    filters
}

/// [`fragment`]'s large filters, each its own allocation: a chain of
/// three sub-filters of several MB (defragmented late, with a cursor), a
/// 1.2 MB one (at once), a large APBF and valkey-bloom object.
fn add_large_ones(c: &mut Conn, filters: &mut Vec<Filter>) {
    // The large ones: a 5.6 MB chain of three sub-filters (late, with a
    // cursor), a 1.2 MB chain (at once), a large APBF and valkey-bloom object.
    c.ok("BF.RESERVE big 0.000001 200000 EXPANSION 2");
    let big_items: Vec<String> = (0..620_000).map(|i| format!("big-{i}")).collect();
    let adds: Vec<Vec<Vec<u8>>> = big_items
        .chunks(5000)
        .map(|chunk| {
            let mut cmd = vec![b"BF.MADD".to_vec(), b"big".to_vec()];
            cmd.extend(chunk.iter().map(|i| i.as_bytes().to_vec()));
            cmd
        })
        .collect();
    assert!(c.pipeline(&adds).iter().all(|r| !r.is_error()));
    let info = c.cmd("BF.INFO big");
    let info = info.as_array();
    assert_eq!(info[4], Reply::Simple("Number of filters".into()));
    assert_eq!(info[5], Reply::Int(3), "the large chain has three sub-filters");
    assert!(info[3].as_int() > 5 << 20, "the large chain takes several MB: {:?}", info[3]);
    c.ok("BF.RESERVE mid 0.01 1000000");
    c.ok("BF.MADD mid a b c");
    c.ok("APBF.RESERVE abig 0.001 1000000 COUNT");
    c.ok("APBF.MADD abig a b c");
    let blob = valkey_blob(1_000_000, &["a".into(), "b".into()]);
    assert_eq!(c.call(&[b"BF.LOAD".as_slice(), b"vbig", &blob]), Reply::Simple("OK".into()));
    let sample: Vec<String> = big_items.iter().step_by(997).cloned().collect();
    filters.push(Filter { key: "big".into(), exists: "BF.MEXISTS", items: sample });
    for (key, exists) in [("mid", "BF.MEXISTS"), ("abig", "APBF.MEXISTS"), ("vbig", "BF.MEXISTS")] {
        let items = if key == "vbig" {
            vec!["a".into(), "b".into()]
        } else {
            vec!["a".into(), "b".into(), "c".into()]
        };
        filters.push(Filter { key: key.into(), exists, items });
    }
}

/// What the filters look like from outside: every answer and every digest.
fn observe(c: &mut Conn, filters: &[Filter]) -> (Vec<Reply>, BTreeMap<String, Reply>, Reply) {
    let answers = c.pipeline(&filters.iter().map(Filter::probe).collect::<Vec<_>>());
    for (f, a) in filters.iter().zip(&answers) {
        assert!(f.holds(a), "{}: an added item is missing: {a:?}", f.key);
    }
    let digest_commands: Vec<_> =
        filters.iter().map(|f| line(&format!("DEBUG DIGEST-VALUE {}", f.key))).collect();
    let digests = c.pipeline(&digest_commands);
    let digests = filters.iter().map(|f| f.key.clone()).zip(digests).collect();
    (answers, digests, c.digest())
}

/// A field of `INFO bf`'s defrag section (`bf_defrag_<name>`).
fn defrag_field(c: &mut Conn, name: &str) -> u64 {
    c.info_field("bf", &format!("bf_defrag_{name}")).parse().unwrap()
}

/// The server's own defrag figures, for messages.
fn server_defrag_stats(c: &mut Conn) -> String {
    let mut out = Vec::new();
    for section in ["stats", "memory"] {
        let info = String::from_utf8(c.cmd(&format!("INFO {section}")).as_bytes().to_vec()).unwrap();
        out.extend(info.lines().filter(|l| l.contains("defrag") || l.contains("frag")).map(str::to_string));
    }
    out.join(", ")
}

/// Every family's name in `INFO bf`'s defrag section (core's list),
/// valkey-bloom's last (its own switch is tried apart).
const TYPES: [&str; KINDS.len()] = {
    let mut names = [""; KINDS.len()];
    let (mut i, mut at) = (0, 0);
    while i < KINDS.len() {
        if !same_name(KINDS[i].folder, VBLOOM.folder) {
            names[at] = KINDS[i].folder;
            at += 1;
        }
        i += 1;
    }
    names[at] = VBLOOM.folder;
    names
};

/// Turns active defrag on and waits until it moved every type: first
/// with valkey-bloom's own switch off (its objects must not move), then on;
/// prints the figures. Apart from [`active_defrag_moves_every_type_and_changes_nothing`]
/// so that it reads on one screen.
fn defrag_every_type(c: &mut Conn, server: Server) {
    // valkey-bloom's switch first: with it off, the other types move
    // and its objects do not.
    c.ok("CONFIG SET bf.bloom-defrag-enabled no");
    c.start_active_defrag();
    let others = &TYPES[..TYPES.len() - 1];
    let end = Instant::now() + DEADLINE;
    while !others.iter().all(|t| defrag_field(c, &format!("{t}_hits")) > 0) {
        assert!(
            Instant::now() < end,
            "{server:?}: no defrag of {:?} within {DEADLINE:?}; {}",
            others.iter().filter(|t| defrag_field(c, &format!("{t}_hits")) == 0).collect::<Vec<_>>(),
            server_defrag_stats(c)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(defrag_field(c, "vbloom_hits"), 0, "{server:?}: bf.bloom-defrag-enabled no");
    assert_eq!(c.info_field("bf", "bf_bloom_defrag_hits"), "0", "{server:?}: valkey-bloom's own field");
    c.ok("CONFIG SET bf.bloom-defrag-enabled yes");
    let end = Instant::now() + DEADLINE;
    loop {
        let hits: Vec<u64> = TYPES.iter().map(|t| defrag_field(c, &format!("{t}_hits"))).collect();
        let kept = defrag_field(c, "large_kept");
        if hits.iter().all(|&h| h > 0) && kept > 0 {
            break;
        }
        assert!(
            Instant::now() < end,
            "{server:?}: no defrag of every type and of the large ones within {DEADLINE:?}: hits {hits:?}, large kept {kept}; {}",
            server_defrag_stats(c)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let misses: Vec<u64> = TYPES.iter().map(|t| defrag_field(c, &format!("{t}_misses"))).collect();
    let kept = defrag_field(c, "large_kept");
    let hits: Vec<u64> = TYPES.iter().map(|t| defrag_field(c, &format!("{t}_hits"))).collect();
    let resumed = defrag_field(c, "keys_resumed");
    println!(
        "{server:?}: bloomkit's hits {hits:?}, misses {misses:?}, values resumed {resumed}, large kept {kept}; {}",
        server_defrag_stats(c)
    );
}

per_server!(active_defrag_moves_every_type_and_changes_nothing: all);
fn active_defrag_moves_every_type_and_changes_nothing(server: Server) {
    // A server that cannot defragment is skipped, saying why; redis-server
    // 8.2 is built with Redis's jemalloc: it must run.
    let skip = |why: String| {
        assert_ne!(
            server,
            Server::Redis8,
            "redis-server 8.2 is built with Redis's jemalloc: it must run ({why})"
        );
        println!("SKIPPED on {why}");
    };
    {
        let s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        let allocator = c.info_field("memory", "mem_allocator");
        if !allocator.starts_with("jemalloc") {
            skip(format!(
                "{server:?}: its allocator is {allocator}, and servers defragment only with jemalloc"
            ));
            return;
        }
        // Debian's redis-server 7.0 links the system's jemalloc, which lacks
        // the defrag hint the server needs: it refuses `activedefrag yes`.
        let refused = c.cmd("CONFIG SET activedefrag yes");
        if refused.is_error() {
            assert!(refused.error_text().contains("Active defragmentation cannot be enabled"), "{refused:?}");
            skip(format!("{server:?} ({allocator}): {}", refused.error_text()));
            return;
        }
        c.ok("CONFIG SET activedefrag no");
        let mut rng = Rng(0x5eed_defa);
        let filters = fragment(&mut c, &mut rng);
        // Observed first: a t-digest's first read after adds compresses it
        // (its bytes change then, not under defrag).
        let before = observe(&mut c, &filters);
        let counted_before = counted(&mut c);
        for t in TYPES {
            assert_eq!(defrag_field(&mut c, &format!("{t}_hits")), 0, "{server:?}: defrag is off");
        }

        defrag_every_type(&mut c, server);

        assert_eq!(
            c.info_field("bf", "bf_bloom_defrag_hits").parse::<u64>().unwrap(),
            defrag_field(&mut c, "vbloom_hits"),
            "{server:?}: valkey-bloom's field counts its objects' moves"
        );
        let after = observe(&mut c, &filters);
        assert!(before.0 == after.0, "{server:?}: a filter answers differently after defrag");
        for (key, digest) in &before.1 {
            assert_eq!(Some(digest), after.1.get(key), "{server:?}: DEBUG DIGEST-VALUE {key}");
        }
        assert_eq!(before.2, after.2, "{server:?}: DEBUG DIGEST");
        // Moved blocks are the same sizes: INFO's objects and bytes stand.
        assert_eq!(counted(&mut c), counted_before, "{server:?}: INFO bf's objects and bytes after defrag");

        // Moved blocks grow (a new sub-filter reallocates the moved list)
        // and are freed by the allocator like any other.
        let grows: Vec<_> = (0..ROUNDS)
            .step_by(7)
            .map(|r| {
                let mut cmd = line(&format!("BF.MADD bf:{r}"));
                cmd.extend((0..300).map(|i| format!("more-{i}").into_bytes()));
                cmd
            })
            .collect();
        assert!(c.pipeline(&grows).iter().all(|r| !r.is_error()));
        let info = c.cmd("BF.INFO bf:0");
        assert!(info.as_array()[5].as_int() > 1, "bf:0 scaled out");
        c.ok("FLUSHALL");
        assert_eq!(
            c.cmd("PING"),
            Reply::Simple("PONG".into()),
            "{server:?}: alive after freeing moved blocks"
        );
        assert!(counted(&mut c).iter().all(|&n| n == 0), "{server:?}: nothing counted after FLUSHALL");
    }
}
