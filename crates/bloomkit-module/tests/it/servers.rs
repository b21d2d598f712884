//! The version matrix behind "Redis 7.x and 8, Valkey 8 and 9": the same
//! checks on every server binary the test kit can run (Debian's
//! redis-server 7.0, redis-server 8.2, valkey-server 8.1 and 9.1): every
//! family's commands (BF, CF, APBF) and replies (RESP2 and RESP3), RDB reload, DUMP and
//! RESTORE, AOF rewrite and replay, a replica's full sync, the version
//! MODULE LIST reports, and ACL categories where the server has them.
//! (Redis 7.2 and 7.4 binaries from the registries need libssl1.1, which
//! this Debian lacks, so 7.x is tested on 7.0.)

use std::time::Duration;

use bloomkit_testkit::{per_server, wait_until, Conn, Module, Reply, Server, TestServer};

fn fill(c: &mut Conn) {
    c.ok("BF.RESERVE bf 0.01 1000 EXPANSION 2");
    c.ok("BF.INSERT ins CAPACITY 50 ERROR 0.001 ITEMS a b c");
    c.ok("APBF.RESERVE count 0.01 1000 COUNT");
    c.ok("APBF.RESERVE time 0.01 1000 TIME 600");
    c.ok("CF.RESERVE cf 1000 BUCKETSIZE 4 EXPANSION 2");
    for key in ["bf", "count", "time", "cf"] {
        let add = match key {
            "bf" => "BF.MADD",
            "cf" => "CF.INSERT",
            _ => "APBF.MADD",
        };
        let mut cmd = vec![add.to_string(), key.to_string()];
        if key == "cf" {
            cmd.push("ITEMS".into());
        }
        cmd.extend((0..3000).map(|i| format!("{key}-{i}")));
        c.call(&cmd);
    }
}

/// The ACL categories (`@bloom`, `@cuckoo`, `@read`, `@write`, `@fast`)
/// the commands are in, checked by what users with only `@read` or only
/// `@write` may run. Apart from [`every_server_binary_serves_both_families`]
/// so that it reads on one screen.
fn acl_categories(c: &mut Conn, primary: &TestServer, server: Server, what: &str) {
    let cat = c.cmd("ACL CAT bloom");
    let names: Vec<&[u8]> = cat.as_array().iter().map(Reply::as_bytes).collect();
    for command in [&b"bf.add"[..], b"bf.exists", b"apbf.add", b"apbf.scandump"] {
        assert!(names.contains(&command), "{what}: {} not in @bloom", String::from_utf8_lossy(command));
    }
    let cat = c.cmd("ACL CAT cuckoo");
    let names: Vec<&[u8]> = cat.as_array().iter().map(Reply::as_bytes).collect();
    for command in [&b"cf.add"[..], b"cf.exists", b"cf.del", b"cf.loadchunk"] {
        assert!(names.contains(&command), "{what}: {} not in @cuckoo", String::from_utf8_lossy(command));
    }
    // Least privilege: readers are in @read, writers in @write.
    c.ok("ACL SETUSER reader on nopass ~* +@read");
    c.ok("ACL SETUSER writer on nopass ~* +@write");
    let mut reader = primary.conn();
    reader.ok("AUTH reader x");
    for line in [
        "BF.EXISTS bf x",
        "BF.MEXISTS bf x",
        "BF.INFO bf",
        "BF.CARD bf",
        "APBF.EXISTS time x",
        "APBF.INFO time",
        "APBF.SCANDUMP time 0",
        "CF.EXISTS cf x",
        "CF.MEXISTS cf x",
        "CF.COUNT cf x",
        "CF.INFO cf",
    ] {
        assert!(!reader.cmd(line).is_error(), "{what}: +@read may run {line}");
    }
    for line in ["BF.ADD bf y", "APBF.ADD time y", "BF.RESERVE new 0.1 10", "CF.ADD cf y", "CF.DEL cf cf-5"] {
        assert!(reader.cmd(line).error_text().starts_with("NOPERM"), "{what}: +@read may not run {line}");
    }
    let mut writer = primary.conn();
    writer.ok("AUTH writer x");
    assert_eq!(writer.cmd("BF.ADD acl-key y"), Reply::Int(1), "{what}: +@write may run BF.ADD");
    assert!(writer.cmd("BF.EXISTS acl-key y").error_text().starts_with("NOPERM"), "{what}");
    // BF.EXISTS is in @fast at redisbloom-2.8; Redis 8's default
    // level declares it as RedisBloom 8 does, in @read only.
    assert_eq!(
        c.cmd("ACL CAT fast").as_array().iter().filter(|r| r.as_bytes() == b"bf.exists").count(),
        usize::from(server != Server::Redis8),
        "{what}"
    );
    c.cmd("DEL acl-key");
}

per_server!(every_server_binary_serves_both_families: all);
fn every_server_binary_serves_both_families(server: Server) {
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut primary = TestServer::start(server, &[Module::bloomkit()], &aof);
    let mut c = primary.conn();
    let what = format!("{server:?} ({})", c.info_field("server", "redis_version"));

    // MODULE LIST reports RedisBloom's interface version, which clients gate on.
    let modules = c.cmd("MODULE LIST");
    let bf = modules.as_array().iter().find(|m| m.as_array().get(1).is_some_and(|n| n.as_bytes() == b"bf"));
    let bf = bf.unwrap_or_else(|| panic!("{what}: bf not in {modules:?}"));
    assert_eq!(bf.as_array()[3].as_int(), 20802, "{what}: module version");

    // Replies, RESP2 then RESP3.
    fill(&mut c);
    assert_eq!(c.cmd("BF.ADD bf x"), Reply::Int(1), "{what}");
    assert_eq!(c.cmd("BF.EXISTS bf x"), Reply::Int(1), "{what}");
    assert_eq!(c.cmd("BF.CARD ins"), Reply::Int(3), "{what}");
    assert_eq!(c.cmd("BF.EXISTS bf bf-7"), Reply::Int(1), "{what}");
    assert_eq!(c.cmd("APBF.EXISTS time time-2999"), Reply::Int(1), "{what}");
    assert_eq!(c.cmd("APBF.EXISTS count count-2999"), Reply::Int(1), "{what}");
    assert_eq!(c.cmd("CF.EXISTS cf cf-2999"), Reply::Int(1), "{what}");
    assert_eq!(c.cmd("CF.DEL cf cf-0"), Reply::Int(1), "{what}");
    assert_eq!(c.cmd("CF.COUNT cf cf-1"), Reply::Int(1), "{what}");
    // Adds answered "seen" (false positives) are not counted: RedisBloom's rule.
    let items = c.cmd("BF.INFO bf ITEMS").as_array()[0].as_int();
    assert!((2950..=3001).contains(&items), "{what}: {items} items");
    c.cmd("HELLO 3");
    assert_eq!(c.cmd("BF.EXISTS bf x"), Reply::Bool(true), "{what}: RESP3");
    assert!(matches!(c.cmd("BF.INFO bf"), Reply::Map(_)), "{what}: RESP3 map");
    assert!(matches!(c.cmd("APBF.INFO time"), Reply::Map(_)), "{what}: RESP3 map");
    assert_eq!(c.cmd("CF.EXISTS cf cf-7"), Reply::Bool(true), "{what}: RESP3");
    assert!(matches!(c.cmd("CF.INFO cf"), Reply::Map(_)), "{what}: RESP3 map");
    c.cmd("HELLO 2");

    // ACL categories: every command in `bloom` where modules may add one.
    if !c.cmd("ACL CAT bloom").is_error() {
        acl_categories(&mut c, &primary, server, &what);
    }

    // DUMP/RESTORE, RDB reload, and a replica's full sync.
    for key in ["bf", "count", "time", "cf"] {
        let dump = c.call(&["DUMP", key]).as_bytes().to_vec();
        let copy = format!("{key}-restored");
        c.call(&[b"RESTORE".to_vec(), copy.clone().into_bytes(), b"0".to_vec(), dump]);
        assert_eq!(
            c.call(&["DEBUG", "DIGEST-VALUE", key]),
            c.call(&["DEBUG", "DIGEST-VALUE", &copy]),
            "{what}"
        );
    }
    let before = c.digest();
    c.ok("DEBUG RELOAD");
    assert_eq!(c.digest(), before, "{what}: RDB reload");
    let port = primary.port.to_string();
    let replica = TestServer::start(server, &[Module::bloomkit()], &["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    r.wait_for_sync(Duration::from_secs(30));
    wait_until("the replica to catch up", Duration::from_secs(30), || r.digest() == before);

    // AOF rewrite, then a restart that replays it.
    c.ok("BGREWRITEAOF");
    c.wait_for_aof_rewrite(Duration::from_secs(30));
    drop(replica);
    primary.restart(&[]);
    let mut c = primary.conn();
    assert_eq!(c.digest(), before, "{what}: AOF replay after a rewrite");
}
