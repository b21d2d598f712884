//! The `redisbloom-8` level (the default on Redis 8) answers as the measured
//! RedisBloom 8 does (../shared/COMPAT.md, "RedisBloom 8, measured"): one
//! table per row group, each row run from a clean keyspace and RedisBloom
//! 8's default configs, in RESP2 and in RESP3, on Redis 8.

use bloomkit_testkit::{Conn, Reply, Server, TestServer};

/// One row: commands that must succeed first, then the command and what
/// it answers: `-text` an error (`-text...` one that starts so), `+OK`,
/// `:n`, `$text` a bulk string, `_` nil, anything else the reply's Debug form.
type Row<'a> = (&'a [&'a [&'a str]], &'a [&'a str], &'a str);

/// RedisBloom 8's configs at their defaults, the order keeping the linked
/// cuckoo ranges satisfied from any state the rows leave.
const DEFAULTS: [(&str, &str); 8] = [
    ("bf-error-rate", "0.01"),
    ("bf-initial-size", "100"),
    ("bf-expansion-factor", "2"),
    ("cf-initial-size", "1024"),
    ("cf-bucket-size", "2"),
    ("cf-max-iterations", "20"),
    ("cf-expansion-factor", "1"),
    ("cf-max-expansions", "32"),
];

fn shown(reply: &Reply) -> String {
    match reply {
        Reply::Error(e) => format!("-{e}"),
        Reply::Simple(s) => format!("+{s}"),
        Reply::Int(v) => format!(":{v}"),
        Reply::Bulk(b) => format!("${}", String::from_utf8_lossy(b)),
        Reply::Nil => "_".into(),
        // RESP3's booleans as RESP2's integers, so that one table serves both.
        Reply::Bool(b) => format!(":{}", i64::from(*b)),
        Reply::Array(a) => format!("[{}]", a.iter().map(shown).collect::<Vec<_>>().join(", ")),
        // RESP3's one-field maps (`BF.INFO key SIZE`) as RESP2's one-element arrays.
        Reply::Map(m) if m.len() == 1 => format!("[{}]", shown(&m[0].1)),
        other => format!("{other:?}"),
    }
}

fn reset(c: &mut Conn) {
    assert_eq!(c.cmd("FLUSHALL"), Reply::Simple("OK".into()));
    for (name, value) in DEFAULTS {
        let r = c.call(&["CONFIG", "SET", name, value]);
        assert!(!r.is_error(), "CONFIG SET {name} {value}: {r:?}");
    }
}

/// Runs every row in RESP2 and RESP3 on a Redis 8 server at its default level.
fn check(rows: &[Row]) {
    let s = TestServer::with_bloomkit(Server::Redis8);
    for protocol in ["2", "3"] {
        let mut c = s.conn();
        assert!(!c.call(&["HELLO", protocol]).is_error());
        assert_eq!(c.cmd("CONFIG GET bf.compat").as_array_or_map_value(), "redisbloom-8");
        for (setup, line, want) in rows {
            reset(&mut c);
            for step in *setup {
                let r = c.call(step);
                assert!(!r.is_error(), "RESP{protocol} {line:?}: setup {step:?} failed: {r:?}");
            }
            let got = shown(&c.call(line));
            let matches = match want.strip_suffix("...") {
                Some(prefix) if want.starts_with('-') => got.starts_with(prefix),
                _ => got == *want,
            };
            assert!(matches, "RESP{protocol} {line:?}:\n  want {want}\n  got  {got}");
        }
    }
}

trait ConfigValue {
    fn as_array_or_map_value(&self) -> String;
}

/// `CONFIG GET name`'s one value, from RESP2's array or RESP3's map.
impl ConfigValue for Reply {
    fn as_array_or_map_value(&self) -> String {
        match self {
            Reply::Array(a) if a.len() == 2 => String::from_utf8_lossy(a[1].as_bytes()).into_owned(),
            Reply::Map(m) if m.len() == 1 => String::from_utf8_lossy(m[0].1.as_bytes()).into_owned(),
            other => panic!("CONFIG GET: {other:?}"),
        }
    }
}

const CF_RESERVE_RANGE: &str = "-Capacity must be in the range [2 * BUCKETSIZE, 1073741824]";

#[test]
fn cf_reserve_range_texts_and_order() {
    let rows: &[Row] = &[
        (&[], &["CF.RESERVE", "c", "0"], CF_RESERVE_RANGE),
        (&[], &["CF.RESERVE", "c", "-1"], CF_RESERVE_RANGE),
        (&[], &["CF.RESERVE", "c", "1"], CF_RESERVE_RANGE),
        (&[], &["CF.RESERVE", "c", "3"], CF_RESERVE_RANGE),
        (&[], &["CF.RESERVE", "c", "1073741825"], CF_RESERVE_RANGE),
        (&[], &["CF.RESERVE", "c", "9", "BUCKETSIZE", "5"], CF_RESERVE_RANGE),
        (&[], &["CF.RESERVE", "c", "x"], "-Bad capacity"),
        (&[], &["CF.RESERVE", "c", "x", "BUCKETSIZE", "0"], "-Bad capacity"),
        (
            &[],
            &["CF.RESERVE", "c", "100", "BUCKETSIZE", "0"],
            "-BUCKETSIZE: value must be in the range [1, 255]",
        ),
        (
            &[],
            &["CF.RESERVE", "c", "600", "BUCKETSIZE", "256"],
            "-BUCKETSIZE: value must be in the range [1, 255]",
        ),
        (
            &[],
            &["CF.RESERVE", "c", "100", "MAXITERATIONS", "0"],
            "-MAXITERATIONS: value must be in the range [1, 65535]",
        ),
        (
            &[],
            &["CF.RESERVE", "c", "100", "MAXITERATIONS", "65536"],
            "-MAXITERATIONS: value must be in the range [1, 65535]",
        ),
        (
            &[],
            &["CF.RESERVE", "c", "100", "EXPANSION", "32769"],
            "-EXPANSION: value must be in the range [0, 32768]",
        ),
        (
            &[],
            &["CF.RESERVE", "c", "100", "EXPANSION", "-1"],
            "-EXPANSION: value must be in the range [0, 32768]",
        ),
        (&[], &["CF.RESERVE", "c", "100", "BUCKETSIZE", "x"], "-Couldn't parse BUCKETSIZE"),
        (&[], &["CF.RESERVE", "c", "100", "MAXITERATIONS", "x"], "-Couldn't parse MAXITERATIONS"),
        (&[], &["CF.RESERVE", "c", "100", "EXPANSION", "x"], "-Couldn't parse EXPANSION"),
        // The capacity's range is checked last; MAXITERATIONS before BUCKETSIZE.
        (
            &[],
            &["CF.RESERVE", "c", "0", "BUCKETSIZE", "0"],
            "-BUCKETSIZE: value must be in the range [1, 255]",
        ),
        (
            &[],
            &["CF.RESERVE", "c", "0", "BUCKETSIZE", "0", "MAXITERATIONS", "0"],
            "-MAXITERATIONS: value must be in the range [1, 65535]",
        ),
        // The bucket size's maximum follows cf-initial-size.
        (
            &[&["CONFIG", "SET", "cf-initial-size", "4"]],
            &["CF.RESERVE", "c2", "511", "BUCKETSIZE", "255"],
            "-BUCKETSIZE: value must be in the range [1, 2]",
        ),
        (
            &[&["CONFIG", "SET", "cf-initial-size", "4"]],
            &["CF.RESERVE", "c2", "511", "BUCKETSIZE", "2"],
            "+OK",
        ),
        (&[], &["CF.RESERVE", "c", "1073741824", "BUCKETSIZE", "1"], "+OK"),
    ];
    check(rows);
}

const CF_INSERT_RANGE: &str = "-Capacity must be in the range [cf-bucket-size * 2, 1073741824]";

#[test]
fn cf_insert_capacity_range() {
    let rows: &[Row] = &[
        (&[], &["CF.INSERT", "c", "CAPACITY", "3", "ITEMS", "a"], CF_INSERT_RANGE),
        (&[], &["CF.INSERT", "c", "CAPACITY", "0", "ITEMS", "a"], CF_INSERT_RANGE),
        (&[], &["CF.INSERT", "c", "CAPACITY", "-1", "ITEMS", "a"], CF_INSERT_RANGE),
        (&[], &["CF.INSERTNX", "c", "CAPACITY", "1073741825", "ITEMS", "a"], CF_INSERT_RANGE),
        (
            &[&["CONFIG", "SET", "cf-bucket-size", "4"]],
            &["CF.INSERT", "c", "CAPACITY", "7", "ITEMS", "a"],
            CF_INSERT_RANGE,
        ),
        (&[], &["CF.INSERT", "c", "CAPACITY", "x", "ITEMS", "a"], "-Bad capacity"),
        (&[], &["CF.INSERT", "c", "CAPACITY", "4", "ITEMS", "a"], "[:1]"),
    ];
    check(rows);
}

#[test]
fn bf_insert_reports_the_first_bad_option() {
    let rows: &[Row] = &[
        (&[], &["BF.INSERT", "k", "CAPACITY", "-1"], "-Bad capacity"),
        (
            &[],
            &["BF.INSERT", "k", "CAPACITY", "100", "EXPANSION", "32769", "ERROR", "-0.1", "ITEMS", "a"],
            "-Bad expansion",
        ),
        (&[], &["BF.INSERT", "k", "ERROR", "2", "CAPACITY", "0", "ITEMS", "a"], "-Bad error rate"),
        (&[], &["BF.INSERT", "k", "CAPACITY", "1073741825", "ITEMS", "a"], "-Bad capacity"),
        (&[], &["BF.INSERT", "k", "EXPANSION", "0", "ITEMS", "a"], "[:1]"),
    ];
    check(rows);
}

#[test]
fn bf_expansion_factor_0() {
    const ZERO: &[&str] = &["CONFIG", "SET", "bf-expansion-factor", "0"];
    const NONSCALING: &str = "-Nonscaling filters cannot expand";
    let rows: &[Row] = &[
        (&[ZERO], &["BF.RESERVE", "b", "0.01", "100", "EXPANSION", "3"], NONSCALING),
        (&[ZERO], &["BF.RESERVE", "b", "0.01", "100", "EXPANSION", "32769"], NONSCALING),
        (&[ZERO], &["BF.RESERVE", "b", "0.01", "100", "EXPANSION", "-1"], NONSCALING),
        (
            &[ZERO, &["BF.RESERVE", "b", "0.01", "100"]],
            &["BF.RESERVE", "b", "0.01", "100", "EXPANSION", "2"],
            NONSCALING,
        ),
        (&[ZERO], &["BF.RESERVE", "b", "0.01", "100", "EXPANSION", "0"], "+OK"),
        (&[ZERO], &["BF.RESERVE", "b", "0.01", "100", "EXPANSION", "x"], "-ERR bad expansion"),
        (&[ZERO], &["BF.INSERT", "b", "EXPANSION", "4", "ITEMS", "a"], "[:1]"),
        (&[ZERO, &["BF.INSERT", "b", "EXPANSION", "4", "ITEMS", "a"]], &["BF.INFO", "b", "SIZE"], "[:216]"),
        (&[ZERO, &["BF.INSERT", "b", "EXPANSION", "4", "ITEMS", "a"]], &["BF.INFO", "b", "EXPANSION"], "[_]"),
    ];
    check(rows);
    // Refused before the key is looked up, and nothing is made.
    let s = TestServer::with_bloomkit(Server::Redis8);
    let mut c = s.conn();
    c.call(ZERO);
    assert_eq!(shown(&c.cmd("BF.RESERVE b 0.01 100 EXPANSION 3")), NONSCALING);
    assert_eq!(c.cmd("EXISTS b"), Reply::Int(0));
    c.ok("SET s x");
    assert_eq!(shown(&c.cmd("BF.RESERVE s 0.01 100 EXPANSION 3")), NONSCALING);
}

/// A [`Row`] whose expected text is built.
type OwnedRow<'a> = (Vec<&'a [&'a str]>, Vec<&'a str>, String);

fn config_error(name: &str, text: &str) -> String {
    format!("-ERR CONFIG SET failed (possibly related to argument '{name}') - {text}")
}

#[test]
fn config_set_texts_and_linked_ranges() {
    let range =
        |name: &str, r: &str| config_error(name, &format!("Value for `{name}` must be in the range {r}"));
    let invalid = |name: &str| config_error(name, &format!("Invalid value for `{name}`"));
    let mut owned: Vec<OwnedRow> = vec![
        (vec![], vec!["CONFIG", "SET", "bf-initial-size", "0"], range("bf-initial-size", "[1, 1073741824]")),
        (
            vec![],
            vec!["CONFIG", "SET", "bf-expansion-factor", "32769"],
            range("bf-expansion-factor", "[0, 32768]"),
        ),
        (
            vec![],
            vec!["CONFIG", "SET", "cf-max-iterations", "65536"],
            range("cf-max-iterations", "[1, 65535]"),
        ),
        (vec![], vec!["CONFIG", "SET", "cf-max-expansions", "0"], range("cf-max-expansions", "[1, 65536]")),
        (vec![], vec!["CONFIG", "SET", "cf-bucket-size", "256"], range("cf-bucket-size", "[1, 255]")),
        (vec![], vec!["CONFIG", "SET", "cf-initial-size", "3"], range("cf-initial-size", "[4, 1073741824]")),
        (vec![], vec!["CONFIG", "SET", "bf-error-rate", "1"], range("bf-error-rate", "(0.000000, 1.000000)")),
        (vec![], vec!["CONFIG", "SET", "bf-error-rate", "0"], range("bf-error-rate", "(0.000000, 1.000000)")),
        (
            vec![],
            vec!["CONFIG", "SET", "bf-error-rate", "inf"],
            range("bf-error-rate", "(0.000000, 1.000000)"),
        ),
        (vec![], vec!["CONFIG", "SET", "bf-error-rate", "x"], invalid("bf-error-rate")),
        (vec![], vec!["CONFIG", "SET", "bf-error-rate", "nan"], invalid("bf-error-rate")),
        // The linked cuckoo ranges keep the last value set.
        (
            vec![&["CONFIG", "SET", "cf-bucket-size", "8"]],
            vec!["CONFIG", "SET", "cf-initial-size", "15"],
            range("cf-initial-size", "[16, 1073741824]"),
        ),
        (
            vec![&["CONFIG", "SET", "cf-initial-size", "4"]],
            vec!["CONFIG", "SET", "cf-bucket-size", "3"],
            range("cf-bucket-size", "[1, 2]"),
        ),
        (
            vec![&["CONFIG", "SET", "cf-bucket-size", "8"]],
            vec!["CONFIG", "SET", "cf-initial-size", "16"],
            "+OK".into(),
        ),
        // bf-error-rate above 0.25 is kept as 0.25.
        (
            vec![&["CONFIG", "SET", "bf-error-rate", "0.3"]],
            vec!["CONFIG", "GET", "bf-error-rate"],
            String::new(),
        ),
    ];
    // CONFIG GET's shape differs by protocol: checked on its own below.
    let get = owned.pop().unwrap();
    for bad in ["x", "nan", "", "+5", " 5", "1e3", "0x10", "007", "1.5"] {
        owned.push((vec![], vec!["CONFIG", "SET", "cf-bucket-size", bad], invalid("cf-bucket-size")));
    }
    let rows: Vec<Row> = owned.iter().map(|(s, l, w)| (s.as_slice(), l.as_slice(), w.as_str())).collect();
    check(&rows);

    let s = TestServer::with_bloomkit(Server::Redis8);
    for protocol in ["2", "3"] {
        let mut c = s.conn();
        assert!(!c.call(&["HELLO", protocol]).is_error());
        reset(&mut c);
        assert!(!c.call(get.0[0]).is_error());
        assert_eq!(c.call(&get.1).as_array_or_map_value(), "0.25", "RESP{protocol}");
    }
}

/// `TDIGEST.INFO`'s "Memory usage" field.
fn tdigest_memory(c: &mut Conn, key: &str) -> i64 {
    let info = c.call(&["TDIGEST.INFO", key]);
    let pairs: Vec<(Reply, Reply)> = match info {
        Reply::Array(a) => a.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect(),
        Reply::Map(m) => m,
        other => panic!("TDIGEST.INFO: {other:?}"),
    };
    let (_, v) = pairs.iter().find(|(k, _)| k.as_bytes() == b"Memory usage").expect("Memory usage");
    v.as_int()
}

#[test]
fn tdigest_memory_figures() {
    let s = TestServer::with_bloomkit(Server::Redis8);
    for protocol in ["2", "3"] {
        let mut c = s.conn();
        assert!(!c.call(&["HELLO", protocol]).is_error());
        reset(&mut c);
        for (compression, bytes) in [("100", 9840), ("10", 1200), ("1000", 96240)] {
            let key = format!("t{compression}");
            assert_eq!(shown(&c.call(&["TDIGEST.CREATE", &key, "COMPRESSION", compression])), "+OK");
            assert_eq!(tdigest_memory(&mut c, &key), bytes, "RESP{protocol} compression {compression}");
        }
        // 72 bytes more than at the 2.8 level; MEMORY USAGE is what the
        // digest really takes, at every level.
        let v8 = c.cmd("MEMORY USAGE t100").as_int();
        assert_eq!(shown(&c.cmd("CONFIG SET bf.compat redisbloom-2.8")), "+OK");
        assert_eq!(tdigest_memory(&mut c, "t100"), 9840 - 72);
        assert_eq!(c.cmd("MEMORY USAGE t100").as_int(), v8);
        assert_eq!(shown(&c.cmd("CONFIG SET bf.compat redisbloom-8")), "+OK");
    }
}

#[test]
fn sketches_beyond_the_memory_lead_with_redisbloom_phrases() {
    let rows: &[Row] = &[
        (&[], &["CMS.INITBYDIM", "x", "1000000000", "100"], "-CMS: Insufficient memory to create the key..."),
        (
            &[],
            &["TOPK.RESERVE", "t", "4294967295"],
            "-ERR Insufficient memory to create topk data structure...",
        ),
        (&[], &["TOPK.RESERVE", "t", "4294967296"], "-TopK: invalid k"),
    ];
    check(rows);
    // The same phrases at the 2.8 level.
    let s = TestServer::with_bloomkit(Server::Redis8);
    let mut c = s.conn();
    c.ok("CONFIG SET bf.compat redisbloom-2.8");
    assert!(c
        .cmd("CMS.INITBYDIM x 1000000000 100")
        .error_text()
        .starts_with("CMS: Insufficient memory to create the key"));
    assert!(c
        .cmd("TOPK.RESERVE t 4294967295")
        .error_text()
        .starts_with("ERR Insufficient memory to create topk data structure"));
}
