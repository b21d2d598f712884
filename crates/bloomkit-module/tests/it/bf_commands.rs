//! BF.* behaviour on real servers: Debian's redis-server 7.0 and valkey-server 9.

use std::time::Duration;

use bloomkit_testkit::{per_server, wait_until, Module, Reply, Server, TestServer};

fn int(v: i64) -> Reply {
    Reply::Int(v)
}

fn err(text: &str) -> Reply {
    Reply::Error(text.to_string())
}

per_server!(add_exists_and_counts);
fn add_exists_and_counts(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    assert_eq!(c.cmd("BF.ADD k a"), int(1), "{server:?}");
    assert_eq!(c.cmd("BF.ADD k a"), int(0));
    assert_eq!(c.cmd("BF.MADD k a b c"), Reply::Array(vec![int(0), int(1), int(1)]));
    assert_eq!(c.cmd("BF.EXISTS k b"), int(1));
    assert_eq!(c.cmd("BF.EXISTS k zz"), int(0));
    assert_eq!(c.cmd("BF.MEXISTS k a zz c"), Reply::Array(vec![int(1), int(0), int(1)]));
    assert_eq!(c.cmd("BF.CARD k"), int(3));
    assert_eq!(c.cmd("BF.CARD missing"), int(0));
    assert_eq!(c.cmd("BF.EXISTS missing a"), int(0));
    // Binary and empty items are items like any other.
    let binary: Vec<u8> = (0..=255).collect();
    assert_eq!(c.call(&[b"BF.ADD".to_vec(), b"k".to_vec(), binary.clone()]), int(1));
    assert_eq!(c.call(&[b"BF.EXISTS".to_vec(), b"k".to_vec(), binary]), int(1));
    assert_eq!(c.call(&["BF.ADD", "k", ""]), int(1));
    assert_eq!(c.call(&["BF.EXISTS", "k", ""]), int(1));
}

per_server!(info_and_debug_shapes_in_resp2_and_resp3);
fn info_and_debug_shapes_in_resp2_and_resp3(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("BF.RESERVE k 0.01 100 NONSCALING");
    c.ok("BF.MADD k a b");
    let (raw, _) = c.call_raw(&["BF.INFO", "k"]).unwrap();
    assert_eq!(
        raw,
        b"*10\r\n+Capacity\r\n:100\r\n+Size\r\n:216\r\n+Number of filters\r\n:1\r\n\
          +Number of items inserted\r\n:2\r\n+Expansion rate\r\n$-1\r\n"
    );
    let (raw, _) = c.call_raw(&["BF.INFO", "k", "items"]).unwrap();
    assert_eq!(raw, b"*1\r\n:2\r\n");
    let (raw, _) = c.call_raw(&["BF.DEBUG", "k"]).unwrap();
    assert_eq!(
        raw,
        &b"*2\r\n$6\r\nsize:2\r\n$71\r\nbytes:120 bits:960 hashes:7 hashwidth:64 capacity:100 size:2 ratio:0.01\r\n"[..]
    );
    c.ok("HELLO 3");
    let (raw, _) = c.call_raw(&["BF.INFO", "k", "expansion"]).unwrap();
    assert_eq!(raw, b"%1\r\n+Expansion rate\r\n_\r\n");
    let (raw, _) = c.call_raw(&["BF.EXISTS", "k", "a"]).unwrap();
    assert_eq!(raw, b"#t\r\n");
    let (raw, _) = c.call_raw(&["BF.MADD", "k", "a"]).unwrap();
    assert_eq!(raw, b"*1\r\n#f\r\n");
}

per_server!(errors_say_what_was_wrong);
fn errors_say_what_was_wrong(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("SET str x");
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(c.cmd("BF.ADD str a"), err(wrongtype));
    assert_eq!(c.cmd("BF.INFO str"), err(wrongtype));
    assert_eq!(c.cmd("BF.EXISTS str a"), int(0), "RedisBloom answers 0 here");
    assert_eq!(c.cmd("BF.INFO missing"), err("ERR not found"));
    assert_eq!(c.cmd("BF.ADD k"), err("ERR wrong number of arguments for 'bf.add' command"));
    assert_eq!(c.cmd("BF.RESERVE k 2 100"), err("ERR (0 < error rate range < 1) "));
    assert_eq!(
        c.cmd("BF.RESERVE k 0.01 100 EXPANSION 40000"),
        err("ERR expansion must be in the range [1, 32768]")
    );
    assert_eq!(c.cmd("BF.INSERT k NOCREATE ITEMS a"), err("ERR not found"));
    c.ok("BF.RESERVE full 0.1 2 NONSCALING");
    assert_eq!(
        c.cmd("BF.MADD full a b c d"),
        Reply::Array(vec![int(1), int(1), err("ERR non scaling filter is full")])
    );
    assert_eq!(c.cmd("BF.RESERVE full 0.1 2"), err("ERR item exists"));
    // Nothing above changed the string.
    assert_eq!(c.cmd("GET str"), Reply::Bulk(b"x".to_vec()));
}

per_server!(command_metadata_routes_keys);
fn command_metadata_routes_keys(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    for line in [
        "BF.ADD k a",
        "BF.MADD k a b",
        "BF.EXISTS k a",
        "BF.INSERT k ITEMS a",
        "BF.SCANDUMP k 0",
        "BF.RESERVE k 0.1 10",
        "BF.LOADCHUNK k 1 x",
        "BF.INFO k",
        "BF.CARD k",
        "BF.DEBUG k",
    ] {
        assert_eq!(
            c.cmd(&format!("COMMAND GETKEYS {line}")),
            Reply::Array(vec![Reply::Bulk(b"k".to_vec())]),
            "{line}"
        );
    }
    let info = format!("{:?}", c.cmd("COMMAND INFO bf.exists bf.add"));
    assert!(info.contains("readonly") && info.contains("fast") && info.contains("denyoom"), "{info}");
    let docs = format!("{:?}", c.cmd("COMMAND DOCS bf.add"));
    assert!(docs.contains("Adds an item"), "{docs}");
    // The ACL category exists where the server lets modules add one
    // (Valkey 8+, Redis 7.4+; not Redis 7.0).
    let categories = format!("{:?}", c.cmd("ACL CAT"));
    assert_eq!(categories.contains("bloom"), server == Server::Valkey, "{categories}");
    assert_eq!(categories.contains("cuckoo"), server == Server::Valkey, "{categories}");
    if categories.contains("bloom") {
        let members = format!("{:?}", c.cmd("ACL CAT bloom"));
        assert!(members.contains("bf.add") && members.contains("bf.loadchunk"), "{members}");
        let members = format!("{:?}", c.cmd("ACL CAT cuckoo"));
        assert!(members.contains("cf.add") && members.contains("cf.loadchunk"), "{members}");
        assert!(!members.contains("bf.add"), "{members}");
    }
}

per_server!(info_section_counts);
fn info_section_counts(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("BF.RESERVE a 0.01 10");
    c.ok("BF.MADD a 1 2 3 4 5 6 7 8 9 10 11 12");
    c.ok("BF.MEXISTS a 1 2 3");
    c.ok("CONFIG SET bf.max-filter-bytes 1000");
    assert!(c.cmd("BF.RESERVE b 0.0001 100000").is_error());
    let info = String::from_utf8(c.cmd("INFO bf").as_bytes().to_vec()).unwrap();
    for field in [
        "bf_filters:1",
        "bf_items_added:12",
        "bf_lookups:3",
        "bf_scale_outs:1",
        "bf_refused_creations:1",
        "bf_bytes:",
    ] {
        assert!(info.contains(field), "{field} in {info}");
    }
    c.ok("DEL a");
    // Valkey frees deleted values on a background thread by default.
    wait_until("the filter's memory is released", Duration::from_secs(5), || {
        let info = String::from_utf8(c.cmd("INFO bf").as_bytes().to_vec()).unwrap();
        info.contains("bf_filters:0") && info.contains("bf_bytes:0\r\n")
    });
}

per_server!(runtime_configs_and_limits);
fn runtime_configs_and_limits(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("CONFIG SET bf.error-rate 0.001");
    c.ok("CONFIG SET bf.initial-size 1000");
    c.ok("CONFIG SET bf.expansion-factor 4");
    c.ok("BF.ADD k a");
    assert_eq!(c.cmd("BF.INFO k capacity"), Reply::Array(vec![int(1000)]));
    assert_eq!(c.cmd("BF.INFO k expansion"), Reply::Array(vec![int(4)]));
    let debug = format!("{:?}", c.cmd("BF.DEBUG k"));
    assert!(debug.contains("ratio:0.0005"), "{debug}");
    let refused = c.cmd("CONFIG SET bf.error-rate 1.5");
    assert!(refused.error_text().contains("must be in the range (0, 1)"), "{refused:?}");
    assert!(c.cmd("CONFIG SET bf.expansion-factor -1").is_error());
    // 0 is RedisBloom 8's non-scaling default.
    c.ok("CONFIG SET bf.expansion-factor 0");
    c.ok("BF.ADD nonscaling a");
    assert_eq!(c.cmd("BF.INFO nonscaling expansion"), Reply::Array(vec![Reply::Nil]));
    c.ok("CONFIG SET bf.expansion-factor 4");
    assert_eq!(
        c.cmd("CONFIG GET bf.error-rate"),
        Reply::Array(vec![Reply::Bulk(b"bf.error-rate".to_vec()), Reply::Bulk(b"0.001".to_vec())])
    );

    c.ok("CONFIG SET bf.max-filter-bytes 10000");
    let refused = c.cmd("BF.RESERVE big 0.01 100000");
    assert!(refused.error_text().contains("bf.max-filter-bytes"), "{refused:?}");
    assert_eq!(c.cmd("EXISTS big"), int(0), "a refused creation leaves no key");
    // Growth past the limit is refused; what was added stays.
    c.ok("BF.RESERVE g 0.01 100 EXPANSION 8");
    let mut refused_at = None;
    for i in 0..2000 {
        let r = c.call(&["BF.ADD", "g", &i.to_string()]);
        if r.is_error() {
            assert!(r.error_text().contains("bf.max-filter-bytes"), "{r:?}");
            refused_at = Some(i);
            break;
        }
    }
    assert!(refused_at.is_some(), "growth was refused");
    assert_eq!(c.cmd("BF.EXISTS g 0"), int(1));
}

per_server!(load_time_arguments);
fn load_time_arguments(server: Server) {
    let module =
        Module::Bloomkit(vec!["ERROR_RATE".into(), "0.001".into(), "INITIAL_SIZE".into(), "500".into()]);
    let s = TestServer::start(server, &[module], &[]);
    let mut c = s.conn();
    c.ok("BF.ADD k a");
    assert_eq!(c.cmd("BF.INFO k capacity"), Reply::Array(vec![int(500)]));
    assert!(format!("{:?}", c.cmd("BF.DEBUG k")).contains("ratio:0.0005"));
}

#[test]
fn bad_load_arguments_refuse_to_load_with_a_message() {
    let bin = bloomkit_testkit::server_binary(Server::Redis);
    let dir = tempfile_dir();
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["--port", &bloomkit_testkit::free_port().to_string(), "--save", "", "--dir"])
        .arg(&dir)
        .arg("--loadmodule")
        .arg(bloomkit_testkit::bloomkit_module())
        .args(["ERROR_RATE", "2"]);
    // A server that wrongly accepted the argument would run forever: the deadline fails it.
    let out = bloomkit_testkit::output_within(&mut cmd, b"", std::time::Duration::from_secs(30));
    assert!(!out.status.success());
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains("bf.error-rate must be a number strictly between 0 and 1")
            || log.contains("strictly between"),
        "{log}"
    );
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("bloomkit-args-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

per_server!(keyspace_events_for_writes);
fn keyspace_events_for_writes(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("CONFIG SET notify-keyspace-events KEA");
    let mut sub = s.conn();
    sub.ok("PSUBSCRIBE __keyevent@0__:bf.*");
    c.ok("BF.RESERVE k 0.01 100");
    c.ok("BF.ADD k a");
    c.ok("BF.ADD k a"); // no change, no event
    c.ok("BF.MADD k b");
    let mut events = Vec::new();
    for _ in 0..3 {
        let (_, msg) = sub.read_raw().unwrap();
        let parts = msg.as_array().to_vec();
        events.push(String::from_utf8(parts[2].as_bytes().to_vec()).unwrap());
    }
    assert_eq!(events, ["__keyevent@0__:bf.reserve", "__keyevent@0__:bf.add", "__keyevent@0__:bf.madd"]);
}

per_server!(copy_rename_move_digest_and_memory);
fn copy_rename_move_digest_and_memory(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("BF.RESERVE k 0.01 10");
    for i in 0..50 {
        c.call(&["BF.ADD", "k", &format!("item{i}")]);
    }
    let digest = c.cmd("DEBUG DIGEST-VALUE k");
    assert_ne!(format!("{digest:?}"), format!("{:?}", Reply::Array(vec![Reply::Bulk(vec![b'0'; 40])])));
    assert_eq!(c.cmd("COPY k k2"), int(1));
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE k2"), digest);
    c.ok("BF.ADD k2 only-in-copy");
    assert_eq!(c.cmd("BF.EXISTS k only-in-copy"), int(0), "a copy is independent");
    c.ok("RENAME k k3");
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE k3"), digest);
    assert_eq!(c.cmd("MOVE k3 1"), int(1));
    c.ok("SELECT 1");
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE k3"), digest);
    let size = c.cmd("BF.INFO k3 size").as_array()[0].as_int();
    assert!(c.cmd("MEMORY USAGE k3 SAMPLES 0").as_int() >= size);
    c.ok("DEBUG RELOAD");
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE k3"), digest);
    assert_eq!(c.cmd("BF.EXISTS k3 item7"), int(1));
    assert_eq!(c.cmd("UNLINK k3"), int(1));
    wait_until("the filter is freed", Duration::from_secs(5), || {
        String::from_utf8(c.cmd("INFO bf").as_bytes().to_vec()).unwrap().contains("bf_filters:1")
    });
}

per_server!(scandump_loadchunk_round_trip_of_a_scaled_filter);
fn scandump_loadchunk_round_trip_of_a_scaled_filter(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("BF.RESERVE src 0.01 100 EXPANSION 3");
    let items: Vec<String> = (0..2000).map(|i| format!("x{i}")).collect();
    let mut madd = vec!["BF.MADD".to_string(), "src".into()];
    madd.extend(items.iter().cloned());
    c.call(&madd);
    let chunks = c.scandump("src").unwrap();
    c.loadchunks("dst", &chunks);
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE dst"), c.cmd("DEBUG DIGEST-VALUE src"));
    let mut mexists = vec!["BF.MEXISTS".to_string(), "dst".into()];
    mexists.extend(items.iter().cloned());
    assert!(c.call(&mexists).as_array().iter().all(|r| r.as_int() == 1));
}
