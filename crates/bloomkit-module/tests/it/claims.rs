//! Claims the README makes about behaviour that no other suite checked:
//! keyspace events of every write, adds that change nothing not propagated,
//! unknown load arguments refused, the 16 MiB SCANDUMP chunk cap, and the
//! size limit on BF.INSERT and RESTORE with its exemption when the server
//! loads what it had already accepted (AOF replay, RDB at startup), and large
//! filters created without committing their memory.

use std::time::Duration;

use bloomkit_testkit::{output_within, per_server, wait_until, Conn, Module, Reply, Server, TestServer};

fn next_event(sub: &mut Conn) -> String {
    let (_, msg) = sub.read_raw().unwrap();
    String::from_utf8(msg.as_array()[2].as_bytes().to_vec()).unwrap()
}

per_server!(keyspace_events_of_every_write);
/// Every write raises its event when the key changed, and only then.
fn keyspace_events_of_every_write(server: Server) {
    let s = TestServer::with_bloomkit(server);
    let mut c = s.conn();
    c.ok("CONFIG SET notify-keyspace-events KEA");
    let mut sub = s.conn();
    sub.ok("PSUBSCRIBE __keyevent@0__:*bf.*");
    c.ok("BF.INSERT k ITEMS a b");
    c.ok("BF.INSERT k ITEMS a"); // no change, no event
    c.ok("BF.RESERVE src 0.01 100");
    let chunks = c.scandump("src").unwrap();
    c.loadchunks("dst", &chunks);
    c.ok("APBF.RESERVE w 0.01 100 COUNT");
    c.ok("APBF.ADD w a");
    let header = c.cmd("APBF.SCANDUMP w 0").as_array()[1].as_bytes().to_vec();
    c.call(&[b"APBF.LOADCHUNK".as_slice(), b"w2", b"0", &header]);
    let mut events = Vec::new();
    while events.len() < 20 && events.last().is_none_or(|e: &String| !e.ends_with("apbf.loadchunk")) {
        events.push(next_event(&mut sub));
    }
    events.dedup(); // one LOADCHUNK per chunk of dst
    let expected = ["bf.insert", "bf.reserve", "bf.loadchunk", "apbf.reserve", "apbf.add", "apbf.loadchunk"];
    let expected: Vec<String> = expected.iter().map(|e| format!("__keyevent@0__:{e}")).collect();
    assert_eq!(events, expected, "{server:?}");
}

per_server!(unchanged_adds_are_not_propagated);
/// An add that changes nothing is not propagated: the AOF does not grow.
fn unchanged_adds_are_not_propagated(server: Server) {
    let aof = ["--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "no"];
    let s = TestServer::start(server, &[Module::bloomkit()], &aof);
    let mut c = s.conn();
    let size = |c: &mut Conn| c.info_field("persistence", "aof_current_size").parse::<u64>().unwrap();
    c.ok("BF.MADD k a b c");
    c.ok("BF.INSERT k ITEMS d");
    let before = size(&mut c);
    assert_eq!(c.cmd("BF.ADD k a"), Reply::Int(0));
    c.ok("BF.MADD k b c");
    c.ok("BF.INSERT k ITEMS d a");
    assert_eq!(size(&mut c), before, "{server:?}: adds of known items were written to the AOF");
    assert_eq!(c.cmd("BF.ADD k new"), Reply::Int(1));
    assert!(size(&mut c) > before, "{server:?}: a new item reaches the AOF");
}

/// A load argument bloomkit does not know stops the load, and says which.
#[test]
fn unknown_load_arguments_are_refused() {
    let log = refused_load(&["CAPACITY", "100"]);
    assert!(log.contains("unknown module argument 'CAPACITY'"), "{log}");
}

/// Starts Redis with bloomkit and these load arguments, expects the start to
/// fail, and gives the server's output.
fn refused_load(args: &[&str]) -> String {
    let mut cmd = std::process::Command::new(bloomkit_testkit::server_binary(Server::Redis));
    cmd.args(["--port", &bloomkit_testkit::free_port().to_string(), "--save", ""])
        .arg("--loadmodule")
        .arg(bloomkit_testkit::bloomkit_module())
        .args(args);
    let out = output_within(&mut cmd, b"", Duration::from_secs(30));
    assert!(!out.status.success(), "the server started with {args:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// SCANDUMP sends a sub-filter larger than 16 MiB in chunks of exactly 16 MiB.
#[test]
fn scandump_chunks_are_at_most_16_mib() {
    let s = TestServer::with_bloomkit(Server::Redis);
    let mut c = s.conn();
    c.ok("BF.RESERVE big 0.0001 9000000 NONSCALING"); // about 21.6 MB
    c.ok("BF.ADD big x");
    let chunks = c.scandump("big").unwrap();
    let sizes: Vec<usize> = chunks[1..].iter().map(|(_, d)| d.len()).collect();
    assert_eq!(sizes[0], 16 << 20, "{sizes:?}");
    assert!(sizes.len() == 2 && sizes[1] < 16 << 20, "{sizes:?}");
    c.loadchunks("copy", &chunks);
    assert_eq!(c.cmd("DEBUG DIGEST-VALUE big"), c.cmd("DEBUG DIGEST-VALUE copy"));
}

per_server!(the_size_limit_on_insert_and_restore_and_its_exemptions);
/// The limit refuses BF.INSERT's creation and RESTORE of a larger filter;
/// the AOF and the RDB file load what was accepted before the limit was
/// lowered (refusing would lose data), and the log says so for the RDB.
fn the_size_limit_on_insert_and_restore_and_its_exemptions(server: Server) {
    let aof = ["--appendonly", "yes", "--aof-use-rdb-preamble", "no"];
    let mut s = TestServer::start(server, &[Module::bloomkit()], &aof);
    let mut c = s.conn();
    c.ok("BF.RESERVE big 0.001 1000000"); // about 2.2 MB
    c.ok("BF.MADD big a b c");
    c.ok("APBF.RESERVE window 0.001 300000 COUNT"); // about 1 MB
    c.ok("APBF.ADD window a");
    let dump = c.cmd("DUMP big").as_bytes().to_vec();
    let digest = c.cmd("DEBUG DIGEST");
    c.ok("CONFIG SET bf.max-filter-bytes 500000");
    let refused = c.cmd("BF.INSERT new CAPACITY 1000000 ERROR 0.001 ITEMS a");
    assert!(refused.error_text().contains("more than bf.max-filter-bytes (500000)"), "{refused:?}");
    assert_eq!(c.cmd("EXISTS new"), Reply::Int(0));
    let refused = c.call(&[b"RESTORE".as_slice(), b"restored", b"0", &dump]);
    assert!(refused.error_text().contains("Bad data format"), "{server:?}: {refused:?}");
    assert_eq!(c.cmd("EXISTS restored"), Reply::Int(0));
    // Restart with the lower limit: the AOF replays both filters whole.
    s.restart(&["--bf.max-filter-bytes", "500000"]);
    let mut c = s.conn();
    assert_eq!(c.cmd("CONFIG GET bf.max-filter-bytes").as_array()[1].as_bytes(), b"500000");
    assert_eq!(c.cmd("DEBUG DIGEST"), digest, "{server:?}: AOF replay kept the oversize filters");
    // And the RDB file at startup: kept, with a warning in the log.
    c.ok("CONFIG SET appendonly no");
    c.ok("SAVE");
    s.restart(&["--appendonly", "no"]);
    let mut c = s.conn();
    assert_eq!(c.cmd("DEBUG DIGEST"), digest, "{server:?}: RDB load kept the oversize filters");
    wait_until("the warning in the log", Duration::from_secs(10), || {
        s.log().contains("loaded filter 'big'") && s.log().contains("above bf.max-filter-bytes (500000)")
    });
    assert_eq!(c.cmd("BF.EXISTS big a"), Reply::Int(1));
}

/// The server's resident memory, from /proc (not INFO, which a cron refreshes).
fn rss_bytes(c: &mut Conn) -> u64 {
    server_kb(c, "status", "VmRSS:") * 1024
}

/// A `<field> <n> kB` line of the server process's `/proc/<pid>/<file>`.
fn server_kb(c: &mut Conn, file: &str, field: &str) -> u64 {
    let pid = c.info_field("server", "process_id");
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/{file}"))
}

per_server!(large_filters_are_created_without_committing_their_memory);
/// Creating a large filter takes no resident memory until it is written,
/// as RedisBloom's calloc does, on servers without `TryCalloc` (Redis 7.0:
/// the array is zeroed lazily) as on those with it; it still counts in
/// `used_memory` (the server's allocator holds it) and works at once.
fn large_filters_are_created_without_committing_their_memory(server: Server) {
    let s = TestServer::start(server, &[Module::bloomkit()], &[]);
    let mut c = s.conn();
    let used_before: u64 = c.info_field("memory", "used_memory").parse().unwrap();
    let rss_before = rss_bytes(&mut c);
    // 100M items at 1%: two sub-filter halves' worth, 120 MB of bits.
    c.ok("BF.RESERVE big 0.01 100000000");
    let size = c.call(&["BF.INFO", "big", "SIZE"]).as_array()[0].as_int() as u64;
    assert!(size > 100 << 20, "{size}");
    let used_after: u64 = c.info_field("memory", "used_memory").parse().unwrap();
    let rss_after = rss_bytes(&mut c);
    assert!(used_after - used_before >= size - (1 << 20), "{server:?}: counted in used_memory");
    assert!(
        rss_after.saturating_sub(rss_before) < size / 8,
        "{server:?}: {} MB resident after creating a {} MB filter",
        rss_after.saturating_sub(rss_before) >> 20,
        size >> 20
    );
    for i in 0..1000 {
        assert_eq!(c.call(&["BF.ADD", "big", &format!("i{i}")]).as_int(), 1);
    }
    for i in 0..1000 {
        assert_eq!(c.call(&["BF.EXISTS", "big", &format!("i{i}")]).as_int(), 1);
        assert_eq!(c.call(&["BF.EXISTS", "big", &format!("absent{i}")]).as_int(), 0);
    }
}

/// Address ranges of the server process whose VmFlags include `flag`
/// (`hg`: asked for huge pages; `nh`: asked not to have them), and the
/// process's AnonHugePages in kB.
fn huge_page_state(c: &mut Conn, flag: &str) -> (Vec<String>, u64) {
    let pid = c.info_field("server", "process_id");
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let mut ranges = Vec::new();
    let mut current = String::new();
    for line in smaps.lines() {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            if flags.split_whitespace().any(|f| f == flag) {
                ranges.push(current.clone());
            }
        } else if line.split_whitespace().next().is_some_and(|w| w.contains('-') && !w.ends_with(':')) {
            current = line.split_whitespace().next().unwrap().to_string();
        }
    }
    (ranges, server_kb(c, "smaps_rollup", "AnonHugePages:"))
}

/// How often the kernel wanted a huge page for a fault and had none.
fn thp_fault_fallbacks() -> u64 {
    let vmstat = std::fs::read_to_string("/proc/vmstat").unwrap_or_default();
    vmstat
        .lines()
        .find_map(|l| l.strip_prefix("thp_fault_fallback "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The kernel's THP mode, the bracketed word of `enabled` (None without THP).
fn thp_mode() -> Option<String> {
    let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    Some(text.split('[').nth(1)?.split(']').next()?.to_string())
}

per_server!(large_filters_ask_for_huge_pages_and_give_them_back);
/// `bf.huge-pages` (default no): with yes, a large filter's array is
/// advised for transparent huge pages, which back it once written where the
/// kernel's mode is `madvise`; the advice is taken back when the filter is
/// deleted, so that later faults in those addresses (which the allocator
/// may give to small objects) get 4 KiB pages; with no, nothing is advised.
fn large_filters_ask_for_huge_pages_and_give_them_back(server: Server) {
    let Some(mode) = thp_mode() else {
        eprintln!("no transparent huge pages in this kernel: nothing to check");
        return;
    };
    {
        let s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        assert_eq!(c.cmd("CONFIG GET bf.huge-pages").as_array()[1].as_bytes(), b"no");
        c.ok("BF.RESERVE plain 0.01 50000000 NONSCALING");
        let (advised, _) = huge_page_state(&mut c, "hg");
        assert!(advised.is_empty(), "{server:?}: advised with bf.huge-pages no: {advised:?}");
        c.ok("CONFIG SET bf.huge-pages yes");
        let fallbacks_before = thp_fault_fallbacks();
        // 64 MB of bits, every 4 KiB page of it written.
        c.ok("BF.RESERVE big 0.01 50000000 NONSCALING");
        let (advised, _) = huge_page_state(&mut c, "hg");
        assert!(!advised.is_empty(), "{server:?}: the filter's array was not advised");
        for start in (0..200_000).step_by(1000) {
            let items: Vec<String> = (start..start + 1000).map(|i| format!("i{i}")).collect();
            let mut args = vec!["BF.MADD", "big"];
            args.extend(items.iter().map(String::as_str));
            c.call(&args);
        }
        let (_, huge) = huge_page_state(&mut c, "hg");
        if mode == "madvise" && thp_fault_fallbacks() == fallbacks_before {
            assert!(
                huge >= 32 << 10,
                "{server:?}: only {huge} kB in huge pages for a 64 MB filter written all over"
            );
        } else if mode == "madvise" {
            eprintln!("{server:?}: the kernel had no huge pages to give ({huge} kB): not counted");
        }
        c.ok("DEL big");
        // Valkey may free a large value on a background thread (lazyfree).
        wait_until("the advice to be taken back", Duration::from_secs(10), || {
            huge_page_state(&mut c, "hg").0.is_empty()
        });

        assert!(c.call(&["CONFIG", "SET", "bf.huge-pages", "maybe"]).is_error());
    }
}

/// The `HUGE_PAGES` load argument is checked like the others.
#[test]
fn the_huge_pages_load_argument_is_checked() {
    let log = refused_load(&["HUGE_PAGES", "sometimes"]);
    assert!(log.contains("HUGE_PAGES must be yes or no, got 'sometimes'"), "{log}");
    let s =
        TestServer::start(Server::Redis, &[Module::Bloomkit(vec!["HUGE_PAGES".into(), "yes".into()])], &[]);
    assert_eq!(s.conn().cmd("CONFIG GET bf.huge-pages").as_array()[1].as_bytes(), b"yes");
}
