//! A RedisBloom configuration starts unchanged with bloomkit and answers as
//! that version does: RedisBloom 2.8's load arguments, RedisBloom 8's
//! configs (unprefixed on Redis 8, `bf.`-prefixed elsewhere) at load, in the
//! config file and with CONFIG SET/GET/REWRITE, the defaults they give
//! `BF.ADD`/`CF.ADD`, and `bf.compat`'s two sets of replies.

use bloomkit_testkit::{bloomkit_module, per_server, Conn, Module, Reply, Server, TestServer};

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

/// `CONFIG GET name`'s value.
fn config(c: &mut Conn, name: &str) -> Reply {
    let reply = c.call(&["CONFIG", "GET", name]);
    match reply.as_array() {
        [_, value] => value.clone(),
        other => panic!("CONFIG GET {name}: {other:?}"),
    }
}

fn info_field(c: &mut Conn, key: &str, field: &str) -> Reply {
    c.call(&["BF.INFO", key, field]).as_array()[0].clone()
}

fn debug_line(c: &mut Conn, command: &str, key: &str) -> String {
    match c.call(&[command, key]) {
        Reply::Array(lines) => lines
            .iter()
            .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned())
            .collect::<Vec<_>>()
            .join(" | "),
        other => String::from_utf8_lossy(other.as_bytes()).into_owned(),
    }
}

/// Adds distinct items to a cuckoo filter until a write is refused; gives
/// the refusal and the sub-filter count then.
fn fill_cuckoo(c: &mut Conn, key: &str) -> (String, i64) {
    for i in 0..10_000 {
        let reply = c.call(&["CF.ADD", key, &format!("item-{i}")]);
        if reply.is_error() {
            let info = c.call(&["CF.INFO", key]);
            let filters = info.as_array()[5].as_int();
            return (reply.error_text().to_owned(), filters);
        }
    }
    panic!("{key} never refused a write");
}

per_server!(redisbloom_2_8_load_arguments);
/// RedisBloom 2.8.2's three load arguments, exactly as a working
/// `loadmodule redisbloom.so` line has them, start the server and set the
/// defaults: filters BF.ADD creates take the capacity and error rate (the
/// first sub-filter gets half of it), and cuckoo filters stop at the given
/// number of sub-filters.
fn redisbloom_2_8_load_arguments(server: Server) {
    let args: Vec<String> =
        ["ERROR_RATE", "0.02", "INITIAL_SIZE", "200", "CF_MAX_EXPANSIONS", "3"].map(String::from).to_vec();
    let s = TestServer::start(server, &[Module::Bloomkit(args.clone())], &[]);
    let mut c = s.conn();
    assert_eq!(config(&mut c, "bf.compat"), bulk("redisbloom-2.8"), "{server:?}");
    c.ok("BF.ADD b x");
    assert_eq!(info_field(&mut c, "b", "CAPACITY"), Reply::Int(200), "{server:?}");
    let debug = debug_line(&mut c, "BF.DEBUG", "b");
    assert!(debug.contains("capacity:200") && debug.contains("ratio:0.01"), "{server:?}: {debug}");
    c.ok("CF.RESERVE c 4");
    let (refusal, filters) = fill_cuckoo(&mut c, "c");
    assert_eq!((refusal.as_str(), filters), ("Maximum expansions reached", 3), "{server:?}");
    // The names of RedisBloom 8's configs show the same values, `bf.`-prefixed here.
    assert_eq!(config(&mut c, "bf.bf-error-rate"), bulk("0.02"), "{server:?}");
    assert_eq!(config(&mut c, "bf.cf-max-expansions"), bulk("3"), "{server:?}");
}

/// RedisBloom 8's eight configs in a Redis 8 configuration file (and one as
/// a load argument, as RedisBloom 8 takes them) start the server and set
/// every default; CONFIG SET changes them, CONFIG REWRITE writes them and a
/// restart from the rewritten file keeps them.
#[test]
fn redisbloom_8_configs_on_redis_8() {
    let module = bloomkit_module();
    let conf = format!(
        "loadmodule {} bf-error-rate 0.02\n\
         bf-initial-size 300\n\
         bf-expansion-factor 0\n\
         cf-bucket-size 4\n\
         cf-initial-size 2048\n\
         cf-max-iterations 30\n\
         cf-expansion-factor 2\n\
         cf-max-expansions 5\n",
        module.display()
    );
    let mut s = TestServer::start_with_config(Server::Redis8, &conf);
    let mut c = s.conn();
    assert_eq!(config(&mut c, "bf.compat"), bulk("redisbloom-8"), "Redis 8 answers as RedisBloom 8");
    assert_eq!(config(&mut c, "bf-error-rate"), bulk("0.02"));
    c.ok("BF.ADD b x");
    assert_eq!(info_field(&mut c, "b", "CAPACITY"), Reply::Int(300));
    // bf-expansion-factor 0: non-scaling, so the whole rate goes to the one sub-filter.
    assert_eq!(info_field(&mut c, "b", "EXPANSION"), Reply::Nil);
    assert!(debug_line(&mut c, "BF.DEBUG", "b").contains("ratio:0.02"));
    c.ok("CF.ADD cf x");
    assert_eq!(
        debug_line(&mut c, "CF.DEBUG", "cf"),
        "bktsize:4 buckets:512 items:1 deletes:0 filters:1 max_iterations:30 expansion:2"
    );
    c.ok("CF.RESERVE small 8 EXPANSION 1");
    assert_eq!(fill_cuckoo(&mut c, "small"), ("Maximum expansions reached".to_owned(), 5));

    // Out of range: refused with the range named, nothing changed.
    for (name, value) in
        [("bf-initial-size", "1073741825"), ("cf-bucket-size", "0"), ("cf-max-expansions", "65537")]
    {
        let refused = c.call(&["CONFIG", "SET", name, value]);
        assert!(refused.error_text().contains("must be in the range"), "{name} {value}: {refused:?}");
    }
    assert_eq!(config(&mut c, "cf-bucket-size"), bulk("4"));

    c.ok("CONFIG SET cf-max-expansions 7");
    c.ok("CONFIG SET bf-error-rate 0.03");
    c.ok("CONFIG SET bf.compat redisbloom-2.8");
    c.ok("CONFIG REWRITE");
    let rewritten = s.config_file().unwrap();
    // Registered as strings on Redis 8 (so that refusals are RedisBloom 8's
    // texts), the integers are written quoted.
    assert!(rewritten.contains("cf-max-expansions \"7\""), "{rewritten}");
    s.restart(&[]);
    let mut c = s.conn();
    assert_eq!(config(&mut c, "cf-max-expansions"), bulk("7"));
    assert_eq!(config(&mut c, "bf-error-rate"), bulk("0.03"));
    // bloomkit's own name for the same value.
    assert_eq!(config(&mut c, "bf.error-rate"), bulk("0.03"));
    assert_eq!(config(&mut c, "bf.compat"), bulk("redisbloom-2.8"));
    assert_eq!(config(&mut c, "cf-initial-size"), bulk("2048"));
}

per_server!(redisbloom_8_configs_elsewhere_carry_the_prefix);
/// Where modules cannot register unprefixed names (Redis 7, Valkey), the
/// same configs carry `bf.`, in the config file as with CONFIG SET.
fn redisbloom_8_configs_elsewhere_carry_the_prefix(server: Server) {
    let conf = format!(
        "loadmodule {}\nbf.bf-initial-size 400\nbf.cf-initial-size 4096\nbf.compat redisbloom-8\n",
        bloomkit_module().display()
    );
    let s = TestServer::start_with_config(server, &conf);
    let mut c = s.conn();
    c.ok("BF.ADD b x");
    assert_eq!(info_field(&mut c, "b", "CAPACITY"), Reply::Int(400), "{server:?}");
    c.ok("CF.ADD cf x");
    assert!(debug_line(&mut c, "CF.DEBUG", "cf").contains("buckets:2048"), "{server:?}");
    assert_eq!(config(&mut c, "bf.compat"), bulk("redisbloom-8"), "{server:?}");
    assert!(c.call(&["CONFIG", "GET", "bf-initial-size"]).as_array().is_empty(), "{server:?}: unprefixed");
}

/// Invalid commands and their errors at each level, for
/// [`each_compat_level_answers_as_its_version`]: (command, RedisBloom
/// 2.8.2's error, RedisBloom 8's); an empty error: accepted at that level.
/// A table of its own, so that the test reads on one screen.
const COMPAT_CASES: &[(&str, &str, &str)] = &[
    (
        "BF.RESERVE k 1 100",
        "ERR (0 < error rate range < 1) ",
        "ERR error rate must be in the range (0.000000, 1.000000)",
    ),
    (
        "BF.RESERVE k 0.01 0",
        "ERR (capacity should be larger than 0)",
        "ERR capacity must be in the range [1, 1073741824]",
    ),
    (
        "BF.RESERVE k 0.01 -3",
        "ERR (capacity should be larger than 0)",
        "ERR capacity must be in the range [1, 1073741824]",
    ),
    (
        "BF.RESERVE k 0.01 100 EXPANSION 40000",
        "ERR expansion must be in the range [1, 32768]",
        "ERR expansion must be in the range [0, 32768]",
    ),
    ("BF.RESERVE k 0.01 100 EXPANSION x", "ERR bad expansion", "ERR bad expansion"),
    ("BF.RESERVE k 0.01 100 NONSCALING EXPANSION x", "Nonscaling filters cannot expand", "ERR bad expansion"),
    ("BF.INSERT k CAPACITY 0 ITEMS a", "Bad argument received", "Bad capacity"),
    ("BF.INSERT k ERROR 2 ITEMS a", "Bad argument received", "Bad error rate"),
    ("BF.INSERT k EXPANSION -1 ITEMS a", "Bad argument received", "Bad expansion"),
    ("BF.INSERT k CAPACITY 1073741825 ITEMS a", "", "Bad capacity"),
    ("BF.RESERVE k 0.01 100 EXPANSION 0", "ERR expansion should be greater or equal to 1", ""),
    (
        "CF.RESERVE k 100 MAXITERATIONS 0",
        "MAXITERATIONS: value must be an integer between 1 and 65535, inclusive.",
        "MAXITERATIONS: value must be in the range [1, 65535]",
    ),
    (
        "CF.RESERVE k 100 BUCKETSIZE 256",
        "BUCKETSIZE: value must be an integer between 1 and 255, inclusive.",
        "BUCKETSIZE: value must be in the range [1, 255]",
    ),
    (
        "CF.RESERVE k 100 EXPANSION 32769",
        "EXPANSION: value must be an integer between 0 and 32768, inclusive.",
        "EXPANSION: value must be in the range [0, 32768]",
    ),
    (
        "CF.RESERVE k 0",
        "Capacity must be at least (BucketSize * 2)",
        "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]",
    ),
    (
        "CF.INSERT k CAPACITY 1073741825 NOCREATE ITEMS a",
        "ERR not found",
        "Capacity must be in the range [cf-bucket-size * 2, 1073741824]",
    ),
    (
        "CF.RESERVE k 3",
        "Capacity must be at least (BucketSize * 2)",
        "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]",
    ),
];

/// The same invalid commands answer with each version's text, chosen by
/// `bf.compat` at run time; Redis 8 starts as RedisBloom 8, the others as 2.8.
#[test]
fn each_compat_level_answers_as_its_version() {
    let cases = COMPAT_CASES;
    for (server, default) in [
        (Server::Redis, "redisbloom-2.8"),
        (Server::Valkey, "redisbloom-2.8"),
        (Server::Redis8, "redisbloom-8"),
    ] {
        let s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        assert_eq!(config(&mut c, "bf.compat"), bulk(default), "{server:?}");
        for level in ["redisbloom-2.8", "redisbloom-8"] {
            c.ok(&format!("CONFIG SET bf.compat {level}"));
            for (line, old, new) in cases {
                let want = if level == "redisbloom-8" { new } else { old };
                let reply = c.cmd(line);
                if want.is_empty() {
                    // Accepted at this level: a filter was made; take it away.
                    assert!(!reply.is_error(), "{server:?} {level}: {line}: {reply:?}");
                } else {
                    assert_eq!(reply, Reply::Error((*want).into()), "{server:?} {level}: {line}");
                    assert_eq!(c.cmd("EXISTS k"), Reply::Int(0), "{server:?} {level}: {line} created a key");
                }
                c.cmd("DEL k");
            }
        }
        // RedisBloom 8 makes EXPANSION 0 non-scaling, and uses an error rate above 0.25 as 0.25.
        c.ok("CONFIG SET bf.compat redisbloom-8");
        c.ok("BF.RESERVE n 0.01 100 EXPANSION 0");
        assert_eq!(info_field(&mut c, "n", "EXPANSION"), Reply::Nil, "{server:?}");
        c.ok("BF.RESERVE capped 0.5 100 NONSCALING");
        assert!(debug_line(&mut c, "BF.DEBUG", "capped").contains("ratio:0.25"), "{server:?}");
        let refused = c.cmd("CONFIG SET bf.compat redisbloom-9");
        assert!(refused.is_error(), "{server:?}: {refused:?}");
    }
}

/// RedisBloom 8 words a filter that cannot be allocated its own way: under
/// an address-space limit, a filter larger than the server may map.
#[test]
fn allocation_failure_in_redisbloom_8_words() {
    let s = TestServer::hostile(Server::Redis);
    let mut c = s.conn();
    c.ok("CONFIG SET bf.compat redisbloom-8");
    // 2.6 GB: under bf.max-filter-bytes (4 GiB), over the 2 GiB address space.
    let refused = c.cmd("BF.RESERVE huge 0.00001 1073741824 NONSCALING");
    assert_eq!(refused, Reply::Error("ERR Insufficient memory to create filter".into()));
    assert_eq!(c.cmd("EXISTS huge"), Reply::Int(0));
    assert_eq!(c.cmd("PING"), Reply::Simple("PONG".into()));
    c.ok("CONFIG SET bf.compat redisbloom-2.8");
    let refused = c.cmd("BF.RESERVE huge 0.00001 1073741824 NONSCALING");
    assert!(refused.error_text().starts_with("ERR out of memory"), "{refused:?}");
}

per_server!(bloomkit_names_in_a_config_file_keep_their_values: redis7, redis8, valkey9);
/// bloomkit's own names in a config file keep their values: their RedisBloom
/// 8 twins (same value) are registered after them, and loading the file must
/// not put the twins' defaults back over what the file said.
fn bloomkit_names_in_a_config_file_keep_their_values(server: Server) {
    let conf = format!(
        "loadmodule {}\nbf.initial-size 500\nbf.error-rate 0.05\nbf.expansion-factor 3\n",
        bloomkit_module().display()
    );
    let s = TestServer::start_with_config(server, &conf);
    let mut c = s.conn();
    assert_eq!(config(&mut c, "bf.initial-size"), bulk("500"), "{server:?}");
    assert_eq!(config(&mut c, "bf.error-rate"), bulk("0.05"), "{server:?}");
    c.ok("BF.ADD b x");
    assert_eq!(info_field(&mut c, "b", "CAPACITY"), Reply::Int(500), "{server:?}");
    assert_eq!(info_field(&mut c, "b", "EXPANSION"), Reply::Int(3), "{server:?}");
}
