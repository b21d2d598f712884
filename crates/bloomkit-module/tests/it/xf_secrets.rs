//! Issue 47: the secret XF filters hash with is the server's. No client
//! reads it (DUMP and XF.SCANDUMP carry only its id) or sets it (nothing
//! loaded, restored or reserved with SEED becomes it), and it survives
//! what the server's data survives: RDB restarts, AOF replays with and
//! without the RDB preamble, a replica's sync and its promotion. Servers
//! here run without `BLOOMKIT_HASH_SEED`, each drawing its own secret, as
//! in production (under it every server would share the suite's secret
//! whether the ring persisted or not).

use std::time::Duration;

use crate::xf_support::{found, items, load, scandump};
use bloomkit_testkit::{aof_args, per_server, Conn, Module, Reply, Server, TestServer};

const DEADLINE: Duration = Duration::from_secs(30);

fn start(server: Server, extra: &[&str]) -> (TestServer, Conn) {
    let s = TestServer::start_unseeded(server, &[Module::bloomkit()], extra);
    let c = s.conn();
    (s, c)
}

/// The header's hashing words: kind, then two words (a seed, or an id and 0).
fn hashing_words(header: &[u8]) -> [u64; 3] {
    let word = |i: usize| u64::from_le_bytes(header[8 + 8 * i..16 + 8 * i].try_into().unwrap());
    [word(4), word(5), word(6)]
}

fn secret_id(c: &mut Conn) -> String {
    c.info_field("bf", "bf_xf_secret_id")
}

/// The id a filter's header carries (kind 2: a deployment key).
fn key_id(c: &mut Conn, key: &str) -> String {
    let [kind, id, zero] = hashing_words(&scandump(c, key)[0].1);
    assert_eq!((kind, zero), (2, 0), "{key} hashes with the server's secret, and says only its id");
    format!("{id:016x}")
}

fn restore(c: &mut Conn, key: &str, payload: &[u8]) -> Reply {
    c.call(&[b"RESTORE".to_vec(), key.as_bytes().to_vec(), b"0".to_vec(), payload.to_vec()])
}

per_server!(no_client_reads_or_sets_the_secret: all);
fn no_client_reads_or_sets_the_secret(server: Server) {
    let (_a, mut a) = start(server, &[]);
    let (_b, mut b) = start(server, &[]);
    assert_eq!(secret_id(&mut a), "none", "nothing drawn before the first filter");
    // A payload made with a seed of the writer's choosing, loaded first:
    // it stays that key's own seed and sets nothing.
    let chosen = "0123456789abcdef0123456789abcdef";
    b.ok(&format!("XF.RESERVE chosen 0.01 SEED {chosen}"));
    items(&mut b, "chosen", "c", 0..100);
    let chosen_dump = b.call(&["DUMP", "chosen"]).as_bytes().to_vec();
    a.ok("XF.RESERVE own 0.01 SEED 00000000000000000000000000000001");
    assert_eq!(restore(&mut a, "chosen", &chosen_dump), Reply::Simple("OK".into()));
    load(&mut a, "loaded", &scandump(&mut b, "chosen"));
    assert_eq!(secret_id(&mut a), "none", "a SEED, a RESTORE or a LOADCHUNK set the secret");
    // Filters made without SEED hash with the server's own secret: their
    // headers and DUMPs carry its id, never a key.
    a.ok("XF.RESERVE k 0.01");
    items(&mut a, "k", "i", 0..300);
    let id = secret_id(&mut a);
    assert_ne!(id, "none");
    assert_eq!(key_id(&mut a, "k"), id);
    let merged = a.call(&["XF.MERGE", "k", "1", "loaded"]);
    assert!(merged.error_text().contains("hash"), "a key of a chosen seed merged into k: {merged:?}");
    // Another server draws another secret; its filters do not load here.
    b.ok("XF.RESERVE theirs 0.01");
    items(&mut b, "theirs", "t", 0..50);
    assert_ne!(secret_id(&mut b), id);
    let theirs = b.call(&["DUMP", "theirs"]).as_bytes().to_vec();
    assert!(restore(&mut a, "theirs", &theirs).is_error());
    let header = scandump(&mut b, "theirs")[0].1.clone();
    let refused = a.call(&[b"XF.LOADCHUNK".to_vec(), b"theirs".to_vec(), b"1".to_vec(), header]);
    assert!(refused.error_text().contains("deployment secret this server does not have"), "{refused:?}");
    assert_eq!(a.call(&["EXISTS", "theirs"]), Reply::Int(0));
    // Neither the ring nor a key id can be sent by a client.
    let keyid = a.call(&["XF.RESERVE", "n", "0.01", "KEYID", &id]);
    assert!(keyid.error_text().contains("KEYID is sent only by the server"), "{keyid:?}");
    assert!(a.call(&["XF.KEYRING", "n", "BKRING01\x00\x00"]).error_text().contains("only by the server"));
    // Nor from a script or a transaction (neither is the server's own stream).
    let script =
        a.call(&["EVAL", "return redis.call('XF.RESERVE', 'n', '0.01', 'KEYID', ARGV[1])", "0", &id]);
    assert!(script.error_text().contains("KEYID is sent only by the server"), "{script:?}");
    let script = a.call(&["EVAL", "return redis.call('XF.KEYRING', 'n', ARGV[1])", "0", "BKRING01\x00\x00"]);
    assert!(script.error_text().contains("only by the server"), "{script:?}");
    a.ok("MULTI");
    a.call(&["XF.KEYRING", "n", "BKRING01\x00\x00"]);
    a.call(&["XF.RESERVE", "n", "0.01", "KEYID", &id]);
    let exec = a.cmd("EXEC");
    assert!(exec.as_array().iter().all(Reply::is_error), "{exec:?}");
    assert_eq!(a.call(&["EXISTS", "n"]), Reply::Int(0));
    assert_eq!(secret_id(&mut a), id);
    assert_eq!(found(&mut a, "k", "i", 0..300), 300);
}

per_server!(the_secret_outlives_restarts_replays_and_failovers: all);
fn the_secret_outlives_restarts_replays_and_failovers(server: Server) {
    for (how, extra) in
        [("RDB", vec!["--save", "3600 1"]), ("AOF", aof_args(false)), ("AOF+RDB", aof_args(true))]
    {
        let (mut s, mut c) = start(server, &extra);
        c.wait_for_aof_rewrite(DEADLINE);
        // A user's SEED filter first, so that a ring taken from the first
        // filter loaded would be hers.
        c.ok("XF.RESERVE mine 0.01 SEED 0123456789abcdef0123456789abcdef");
        // ... and filters of a chosen seed restored and loaded in chunks.
        c.ok("XF.RESERVE src 0.01 SEED 00000000000000000000000000000abc");
        items(&mut c, "src", "s", 0..100);
        let payload = c.call(&["DUMP", "src"]).as_bytes().to_vec();
        let chunks = scandump(&mut c, "src");
        assert_eq!(restore(&mut c, "restored", &payload), Reply::Simple("OK".into()));
        load(&mut c, "chunked", &chunks);
        c.ok("DEL src");
        c.ok("XF.RESERVE old 0.01");
        items(&mut c, "old", "o", 0..500);
        let id = secret_id(&mut c);
        if how == "RDB" {
            c.ok("SAVE");
        } else {
            // The rewrite writes the ring ahead of the first filter.
            c.ok("BGREWRITEAOF");
            c.wait_for_aof_rewrite(DEADLINE);
        }
        s.restart(&extra);
        let mut c = s.conn();
        assert_eq!(secret_id(&mut c), id, "{how}: the secret changed over a restart");
        assert_eq!(found(&mut c, "old", "o", 0..500), 500, "{how}");
        c.ok("XF.RESERVE new 0.01");
        items(&mut c, "new", "n", 0..100);
        assert_eq!(key_id(&mut c, "new"), id, "{how}");
        c.ok("XF.MERGE new 1 old");
        assert_eq!(found(&mut c, "new", "o", 0..500), 500, "{how}: old and new filters merge");
        if how == "AOF" {
            // A rewrite with no filter to write the ring before: the next
            // filter made sends it (every new filter does).
            c.ok("FLUSHALL");
            c.ok("BGREWRITEAOF");
            c.wait_for_aof_rewrite(DEADLINE);
            c.ok("XF.RESERVE later 0.01");
            items(&mut c, "later", "l", 0..50);
            s.restart(&extra);
            let mut c = s.conn();
            assert_eq!(secret_id(&mut c), id, "{how}: the secret changed over a rewrite without filters");
            assert_eq!(found(&mut c, "later", "l", 0..50), 50, "{how}");
        }
    }
    // A replica learns the ring by its sync and the stream; promoted, it
    // makes filters that merge with the old primary's.
    let (p_server, mut p) = start(server, &[]);
    let port = p_server.port.to_string();
    let (_r_server, mut r) = start(server, &["--replicaof", "127.0.0.1", &port]);
    r.wait_for_sync(DEADLINE);
    p.ok("XF.RESERVE first 0.01");
    items(&mut p, "first", "f", 0..200);
    bloomkit_testkit::wait_until("the replica to have the filter", DEADLINE, || {
        r.call(&["XF.CARD", "first"]) == Reply::Int(200)
    });
    assert_eq!(secret_id(&mut r), secret_id(&mut p), "the ring by the stream");
    assert_eq!(found(&mut r, "first", "f", 0..200), 200);
    let (_r2_server, mut r2) = start(server, &["--replicaof", "127.0.0.1", &port]);
    r2.wait_for_sync(DEADLINE);
    assert_eq!(secret_id(&mut r2), secret_id(&mut p), "the ring by a full sync");
    assert_eq!(found(&mut r2, "first", "f", 0..200), 200);
    r.ok("REPLICAOF NO ONE");
    r.ok("XF.RESERVE after 0.01");
    r.ok("XF.MERGE after 1 first");
    assert_eq!(found(&mut r, "after", "f", 0..200), 200);
    assert_eq!(key_id(&mut r, "after"), secret_id(&mut p));
}

/// RESP for one command.
fn resp(cmd: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", cmd.len()).into_bytes();
    for arg in cmd {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

per_server!(a_filter_whose_secret_is_lost_stays_whole_and_sealed);
/// An AOF whose ring was lost (here: cut out of its files) still loads: its
/// filters come back sealed, whether rewritten (`XF.LOADCHUNK`s) or made
/// since (`XF.RESERVE ... KEYID`, then the writes the replay must drop and
/// logs); they answer item commands with an error that says why, and save,
/// dump and reload unchanged; the server starts and draws nothing.
fn a_filter_whose_secret_is_lost_stays_whole_and_sealed(server: Server) {
    let extra = aof_args(false);
    let (mut s, mut c) = start(server, &extra);
    c.wait_for_aof_rewrite(DEADLINE);
    c.ok("XF.RESERVE k 0.01");
    items(&mut c, "k", "i", 0..300);
    c.ok("BGREWRITEAOF");
    c.wait_for_aof_rewrite(DEADLINE);
    c.ok("XF.ADD j x");
    let (id, dump) = (secret_id(&mut c), c.call(&["DUMP", "k"]).as_bytes().to_vec());
    s.kill();
    let mut cut = 0;
    for file in std::fs::read_dir(s.dir().join("appendonlydir")).unwrap().filter_map(|e| e.ok()) {
        if !file.file_name().to_string_lossy().ends_with(".aof") {
            continue;
        }
        let commands = bloomkit_testkit::aof_commands(&std::fs::read(file.path()).unwrap());
        let kept: Vec<&Vec<Vec<u8>>> =
            commands.iter().filter(|cmd| !cmd[0].eq_ignore_ascii_case(b"XF.KEYRING")).collect();
        cut += commands.len() - kept.len();
        std::fs::write(file.path(), kept.into_iter().flat_map(|c| resp(c)).collect::<Vec<u8>>()).unwrap();
    }
    assert!(cut >= 2, "the rewrite and the new filter each sent the ring: {cut}");
    s.restart(&extra);
    let mut c = s.conn();
    assert_eq!(secret_id(&mut c), "none", "nothing drawn by the replay");
    for key in ["k", "j"] {
        let sealed = c.call(&["XF.EXISTS", key, "i1"]);
        assert!(sealed.error_text().contains(&format!("(id {id})")), "{key}: {sealed:?}");
        assert!(c.call(&["XF.ADD", key, "x"]).is_error());
    }
    assert_eq!(c.call(&["XF.CARD", "k"]), Reply::Int(300));
    assert_eq!(c.call(&["XF.CARD", "j"]), Reply::Int(0), "the replayed add could not hash");
    assert!(s.log().contains("write to a sealed XF filter"), "the dropped write is logged");
    assert_eq!(c.call(&["DUMP", "k"]).as_bytes(), dump.as_slice(), "a sealed filter dumps as it was");
    // New filters get a new secret; the sealed one neither merges nor changes.
    c.ok("XF.RESERVE new 0.01");
    assert_ne!(secret_id(&mut c), id);
    assert!(c.call(&["XF.MERGE", "new", "1", "k"]).is_error());
    c.ok("DEBUG RELOAD");
    assert_eq!(c.call(&["DUMP", "k"]).as_bytes(), dump.as_slice(), "a sealed filter saves as it was");
    assert!(c.call(&["XF.EXISTS", "k", "i1"]).is_error());
}

per_server!(servers_given_one_secret_file_share_their_filters);
/// `XF_SECRET_FILE`: servers loaded with one file hash alike, so that a
/// filter copies (DUMP and RESTORE) and merges between them, and a server
/// of another secret still refuses them.
fn servers_given_one_secret_file_share_their_filters(server: Server) {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::temp_dir().join(format!("bloomkit-xf-secret-{}-{server:?}", std::process::id()));
    let secret = "00112233445566778899aabbccddeeff";
    std::fs::write(&path, format!("# the deployment's secret\ncurrent {secret}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let module = Module::Bloomkit(vec!["XF_SECRET_FILE".into(), path.to_str().unwrap().into()]);
    let with_file = || TestServer::start_unseeded(server, std::slice::from_ref(&module), &[]);
    let (a_server, b_server) = (with_file(), with_file());
    let (mut a, mut b) = (a_server.conn(), b_server.conn());
    let id = secret_id(&mut a);
    assert_ne!(id, "none", "the file's secret is current from the start");
    assert_eq!(secret_id(&mut b), id);
    a.ok("XF.RESERVE k 0.01");
    items(&mut a, "k", "i", 0..300);
    assert_eq!(key_id(&mut a, "k"), id);
    let dump = a.call(&["DUMP", "k"]).as_bytes().to_vec();
    // Neither the secret nor the key it gives is in any form a client reads.
    let secret = bloomkit_core::xf::Seed::from_hex(secret.as_bytes()).unwrap();
    let key = bloomkit_core::xf::deployment_key(secret);
    let header = scandump(&mut a, "k")[0].1.clone();
    for (what, words) in [("secret", secret.0), ("key", key.0)] {
        for word in words {
            let bytes = word.to_le_bytes();
            assert!(!dump.windows(8).chain(header.windows(8)).any(|w| w == bytes), "the {what} in a DUMP");
        }
    }
    assert_eq!(restore(&mut b, "k", &dump), Reply::Simple("OK".into()));
    assert_eq!(found(&mut b, "k", "i", 0..300), 300);
    b.ok("XF.RESERVE mine 0.01");
    b.ok("XF.MERGE mine 1 k");
    // A server of its own secret neither loads them nor changes the file's.
    let (_c_server, mut c) = start(server, &[]);
    c.ok("XF.RESERVE other 0.01");
    assert!(restore(&mut c, "k", &dump).is_error());
    assert_eq!(secret_id(&mut a), id);
    let _ = std::fs::remove_file(&path);
}
