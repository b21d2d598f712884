//! What every hostile suite shares: a server under an address-space limit
//! with bystander keys of every family whose digests must not change,
//! refusals checked by their reasons, working values exercised, and DUMP
//! payloads and LOADCHUNK headers damaged every way and re-sealed.

use crate::{Conn, Reply, Server, TestServer};

/// Keys created before the hostile commands and checked after each one:
/// the server answers, and none of them changed (`DEBUG DIGEST-VALUE`).
pub struct Watch {
    digests: Vec<(String, Reply)>,
}

impl Watch {
    /// The bystanders every suite watches: a Bloom filter, a count window
    /// and a time window.
    pub const KEYS: [&'static str; 3] = ["bystander", "bystander-window", "bystander-time"];

    pub fn new(c: &mut Conn) -> Watch {
        c.ok("BF.RESERVE bystander 0.01 100");
        c.ok("BF.MADD bystander a b c");
        c.ok("APBF.RESERVE bystander-window 0.01 100 COUNT");
        c.ok("APBF.MADD bystander-window a b c");
        c.ok("APBF.RESERVE bystander-time 0.01 100 TIME 3600");
        c.ok("APBF.MADD bystander-time a b c");
        let mut watch = Watch { digests: Vec::new() };
        for key in Watch::KEYS {
            watch.add(c, key);
        }
        watch
    }

    /// Watches one more bystander, of the family under test: `setup` makes it.
    pub fn with(mut self, c: &mut Conn, key: &str, setup: &[&str]) -> Watch {
        for line in setup {
            c.ok(line);
        }
        self.add(c, key);
        self
    }

    fn add(&mut self, c: &mut Conn, key: &str) {
        let digest = c.call(&["DEBUG", "DIGEST-VALUE", key]);
        self.digests.push((key.to_string(), digest));
    }

    pub fn check(&self, c: &mut Conn, what: &str) {
        assert_eq!(c.cmd("PING"), Reply::Simple("PONG".into()), "server alive after {what}");
        for (key, digest) in &self.digests {
            assert_eq!(&c.call(&["DEBUG", "DIGEST-VALUE", key]), digest, "{key} unchanged after {what}");
        }
    }
}

/// A server under [`HOSTILE_ADDRESS_SPACE`](crate::HOSTILE_ADDRESS_SPACE)
/// with the [`Watch`]ed bystanders.
pub fn start(server: Server) -> (TestServer, Conn, Watch) {
    let s = TestServer::hostile(server);
    let mut c = s.conn();
    let watch = Watch::new(&mut c);
    (s, c, watch)
}

/// [`start`], watching one more bystander, of the family under test:
/// `setup` makes `key`.
pub fn start_watching(server: Server, key: &str, setup: &[&str]) -> (TestServer, Conn, Watch) {
    let (s, mut c, watch) = start(server);
    let watch = watch.with(&mut c, key, setup);
    (s, c, watch)
}

/// The invalid-commands case of a family's hostile suite: on a hostile
/// server with a string key `str`, each of `cases` is refused with its
/// reason and changes nothing ([`assert_refused`]); prints the figure.
pub fn refuses_every_invalid_command(server: Server, family: &str, cases: &[(&str, &str)]) {
    let s = TestServer::hostile(server);
    let mut c = s.conn();
    c.ok("SET str value");
    let watch = Watch::new(&mut c);
    assert_refused(&mut c, &watch, cases, &format!("{server:?}"));
    assert_eq!(c.cmd("GET str"), Reply::Bulk(b"value".to_vec()));
    crate::figure(&format!(
        "hostile {family}, {server:?}: {} invalid commands, each refused with its reason",
        cases.len()
    ));
}

/// Runs each command on a value that came from damaged input: an error is
/// allowed only where `allowed` accepts its text; then the value's own DUMP
/// must restore to the same digest.
pub fn exercise_commands(
    c: &mut Conn,
    key: &str,
    what: &str,
    commands: &[Vec<&str>],
    allowed: impl Fn(&str) -> bool,
) {
    for cmd in commands {
        let reply = c.call(cmd);
        if let Reply::Error(e) = &reply {
            assert!(allowed(e), "{what}: {cmd:?}: {e}");
        }
    }
    assert_dump_round_trips(c, key, what);
}

/// With the size limit lifted (to 2^50 bytes), each command must still be
/// refused, now by the allocation failing under the address-space limit:
/// an error reply, never an abort; its key (the second word) is not
/// created, and the watched keys are as they were. The limit is put back
/// to 4 GiB. Returns the errors, for the caller to check their texts.
pub fn refused_past_the_address_space(c: &mut Conn, watch: &Watch, lines: &[&str]) -> Vec<String> {
    c.ok("CONFIG SET bf.max-filter-bytes 1125899906842624");
    let mut errors = Vec::new();
    for line in lines {
        let reply = c.cmd(line);
        assert!(reply.is_error(), "{line}: {reply:?}");
        let key = line.split(' ').nth(1).expect("a key");
        assert_eq!(c.call(&["EXISTS", key]), Reply::Int(0), "{line} created nothing");
        watch.check(c, line);
        errors.push(reply.error_text().to_string());
    }
    c.ok("CONFIG SET bf.max-filter-bytes 4294967296");
    errors
}

/// RESTORE obeys the size limit: under `bf.max-filter-bytes` of `limit`,
/// `payload` is refused with the server's "Bad data format" and no key;
/// the limit is put back to 4 GiB.
pub fn restore_refused_by_the_limit(c: &mut Conn, payload: &[u8], limit: u64, what: &str) {
    c.ok(&format!("CONFIG SET bf.max-filter-bytes {limit}"));
    let reply = c.call(&[b"RESTORE".as_slice(), b"k", b"0", payload]);
    let refused = matches!(&reply, Reply::Error(e) if e.contains("Bad data format"));
    assert!(refused, "{what}: RESTORE past bf.max-filter-bytes {limit}: {reply:?}");
    assert_eq!(c.cmd("EXISTS k"), Reply::Int(0), "{what}");
    c.ok("CONFIG SET bf.max-filter-bytes 4294967296");
}

/// Sends each command, which must fail with an error containing its
/// reason, create no key `k`, and leave the watched keys as they were.
pub fn assert_refused(c: &mut Conn, watch: &Watch, cases: &[(&str, &str)], what: &str) {
    for (line, reason) in cases {
        let reply = c.cmd(line);
        assert!(
            reply.is_error() && reply.error_text().contains(reason),
            "{what}: {line} should fail with '{reason}', got {reply:?}"
        );
        assert_eq!(c.cmd("EXISTS k"), Reply::Int(0), "{what}: {line} created nothing");
        watch.check(c, line);
    }
}

/// A filter accepted from damaged input must be consistent: its own DUMP
/// restores to a value with the same digest.
pub fn assert_dump_round_trips(c: &mut Conn, key: &str, what: &str) {
    let dump = c.call(&["DUMP", key]).as_bytes().to_vec();
    let copy = format!("{key}-copy");
    assert_eq!(
        c.call(&[b"RESTORE".to_vec(), copy.clone().into_bytes(), b"0".to_vec(), dump]),
        Reply::Simple("OK".into()),
        "{what}: its own DUMP restores"
    );
    assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", key]), c.call(&["DEBUG", "DIGEST-VALUE", &copy]), "{what}");
    c.call(&["DEL", &copy]);
}

/// Damaged versions of a LOADCHUNK header: cut to every length, and every
/// byte flipped three ways.
pub fn damaged_headers(header: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut variants: Vec<(String, Vec<u8>)> =
        (0..header.len()).map(|len| (format!("truncated to {len}"), header[..len].to_vec())).collect();
    for i in 0..header.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut h = header.to_vec();
            h[i] ^= flip;
            variants.push((format!("byte {i} ^ {flip:#x}"), h));
        }
    }
    variants
}

/// Sends each header as `command key iter header` to a fresh key: each
/// must be refused with an error `refused` accepts, leaving no key, or be
/// accepted and pass `exercise`; the watched keys must stay as they were.
/// Both outcomes must occur. Returns (tried, accepted).
pub fn load_headers(
    c: &mut Conn,
    watch: &Watch,
    command: &str,
    iter: &str,
    variants: Vec<(String, Vec<u8>)>,
    refused: impl Fn(&str) -> bool,
    mut exercise: impl FnMut(&mut Conn, &str, &str),
) -> (usize, usize) {
    let (mut tried, mut accepted) = (0, 0);
    for (what, h) in variants {
        tried += 1;
        let key = format!("h{tried}");
        match c.call(&[command.as_bytes().to_vec(), key.clone().into_bytes(), iter.as_bytes().to_vec(), h]) {
            Reply::Simple(ok) if ok == "OK" => {
                accepted += 1;
                exercise(c, &key, &what);
            }
            Reply::Error(e) => {
                assert!(refused(&e), "{command} {what}: {e}");
                assert_eq!(c.call(&["EXISTS", &key]), Reply::Int(0), "{what}: a refused header left a key");
            }
            other => panic!("{command} {what}: unexpected {other:?}"),
        }
        watch.check(c, &what);
    }
    assert!(accepted > 0 && accepted < tried, "{command}: {accepted} of {tried} headers accepted");
    (tried, accepted)
}

/// RESTOREs every [`damaged_payloads`] variant of `payload` under keys
/// `{prefix}-{n}`: each must be refused with the server's "Bad data
/// format" and leave no key, or load and pass `exercise`; the watched keys
/// must stay as they were. Both outcomes must occur. Returns (refused, loaded).
pub fn restore_damaged(
    c: &mut Conn,
    watch: &Watch,
    payload: &[u8],
    prefix: &str,
    mut exercise: impl FnMut(&mut Conn, &str, &str),
) -> (usize, usize) {
    let (mut refused, mut loaded) = (0, 0);
    for (n, (what, p)) in damaged_payloads(payload).into_iter().enumerate() {
        let key = format!("{prefix}-{n}");
        match c.call(&[b"RESTORE".to_vec(), key.as_bytes().to_vec(), b"0".to_vec(), p]) {
            Reply::Simple(ok) if ok == "OK" => {
                loaded += 1;
                exercise(c, &key, &what);
            }
            Reply::Error(e) => {
                refused += 1;
                assert!(e.contains("Bad data format"), "{prefix} {what}: {e}");
                assert_eq!(c.call(&["EXISTS", &key]), Reply::Int(0), "{prefix} {what}");
            }
            other => panic!("{prefix} {what}: {other:?}"),
        }
        watch.check(c, &what);
    }
    assert!(refused > 0 && loaded > 0, "{prefix}: {refused} refused, {loaded} loaded");
    (refused, loaded)
}

/// [`restore_damaged`] for the DUMP of `model`, a value of the family
/// under test. Returns (refused, loaded).
pub fn restore_damaged_dumps_of(
    c: &mut Conn,
    watch: &Watch,
    model: &str,
    prefix: &str,
    exercise: impl FnMut(&mut Conn, &str, &str),
) -> (usize, usize) {
    let payload = c.call(&["DUMP", model]).as_bytes().to_vec();
    restore_damaged(c, watch, &payload, prefix, exercise)
}

/// Writes module-value fields in the RDB format (opcodes of `RedisModule_Save*`),
/// for payloads built by hand.
pub struct RdbValue(pub Vec<u8>);

impl RdbValue {
    pub fn len(&mut self, v: u64) {
        if v < 1 << 6 {
            self.0.push(v as u8);
        } else if v < 1 << 14 {
            self.0.push(0x40 | (v >> 8) as u8);
            self.0.push(v as u8);
        } else if v <= u64::from(u32::MAX) {
            self.0.push(0x80);
            self.0.extend_from_slice(&(v as u32).to_be_bytes());
        } else {
            self.0.push(0x81);
            self.0.extend_from_slice(&v.to_be_bytes());
        }
    }
    pub fn unsigned(&mut self, v: u64) {
        self.0.push(2);
        self.len(v);
    }
    pub fn double(&mut self, v: f64) {
        self.0.push(4);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn buffer(&mut self, b: &[u8]) {
        self.0.push(5);
        self.len(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

pub use bloomkit_core::common::payload::{crc64, seal};

/// Damaged versions of a DUMP payload that still pass the server's own
/// checks (RDB version, CRC), so that they reach the module's loader: the
/// value cut short by every length, and every byte flipped three ways.
/// (A cut value can still load: the server reads on into the version
/// bytes, which may happen to complete it.)
pub fn damaged_payloads(payload: &[u8]) -> Vec<(String, Vec<u8>)> {
    let body = &payload[..payload.len() - 8];
    let (value, version) = body.split_at(body.len() - 2);
    let mut variants = Vec::new();
    for cut in 1..value.len() {
        let mut b = value[..value.len() - cut].to_vec();
        b.extend_from_slice(version);
        variants.push((format!("value cut by {cut}"), seal(&b)));
    }
    for i in 1..value.len() {
        for flip in [0x01u8, 0x40, 0xff] {
            let mut b = body.to_vec();
            b[i] ^= flip;
            variants.push((format!("byte {i} ^ {flip:#x}"), seal(&b)));
        }
    }
    variants
}
