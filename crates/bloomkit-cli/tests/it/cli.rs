//! End-to-end: the built `bloomkit` binary, real files, real servers.

use std::path::Path;
use std::process::{Command, Output};

use bloomkit_testkit::{Module, Reply, Server, TestServer};

/// Runs the built binary; one that hangs fails the test after two minutes.
fn bloomkit(args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomkit"));
    // The server comes from options here, never from the caller's
    // environment; the servers' secret is the test kit's (so that a dumped
    // server filter can be read in process, as `dedup --state` does).
    cmd.args(args).env_remove("BLOOMKIT_URL").env_remove("REDIS_URL");
    cmd.env("BLOOMKIT_HASH_SEED", bloomkit_testkit::hash_seed());
    bloomkit_testkit::output_within(&mut cmd, stdin, std::time::Duration::from_secs(120))
}

fn ok(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let out = bloomkit(args, stdin);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn fails(args: &[&str], stdin: &[u8], message: &str) {
    let out = bloomkit(args, stdin);
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(message), "{args:?}: expected '{message}' in: {stderr}");
    assert!(out.stdout.is_empty() || message.is_empty(), "errors go to stderr");
}

/// A usage error: exit 2, the message on stderr, nothing on stdout.
fn usage_error(args: &[&str], stdin: &[u8], message: &str) {
    let out = bloomkit(args, stdin);
    assert_eq!(out.status.code(), Some(2), "{args:?} is a usage error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(message), "{args:?}: expected '{message}' in: {stderr}");
    assert!(out.stdout.is_empty());
}

/// Lines where unique line i appears 1 + i % 3 times, interleaved deterministically.
fn stream(unique: usize, prefix: &str) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut order = Vec::new();
    for i in 0..unique {
        for _ in 0..=(i % 3) {
            order.push(i);
        }
    }
    // A fixed shuffle (multiplicative walk) so repeats are far apart.
    let n = order.len();
    let step = 7919 % n.max(1);
    let shuffled: Vec<usize> = (0..n).map(|j| order[(j * step.max(1)) % n]).collect();
    let mut input = Vec::new();
    let mut first_seen = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for i in shuffled {
        let line = format!("{prefix}{i:08}\u{e9}").into_bytes();
        input.extend_from_slice(&line);
        input.push(b'\n');
        if seen.insert(i) {
            first_seen.push(line);
        }
    }
    (input, first_seen)
}

fn lines(out: &[u8]) -> Vec<Vec<u8>> {
    out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect()
}

/// Output is the first sightings in order, none twice; at most `allowed_missing` lost to false positives.
fn assert_dedup(out: &[u8], expected: &[Vec<u8>], allowed_missing: usize) {
    let got = lines(out);
    let mut unique = std::collections::HashSet::new();
    assert!(got.iter().all(|l| unique.insert(l.clone())), "no line written twice");
    let mut expected_iter = expected.iter();
    for line in &got {
        assert!(expected_iter.any(|e| e == line), "lines keep their first-seen order");
    }
    assert!(
        expected.len() - got.len() <= allowed_missing,
        "{} unique lines dropped",
        expected.len() - got.len()
    );
}

/// The most unique lines the in-process filter may drop: the expected count
/// (each first sighting is taken for a repeat at the filter's rate at that
/// moment, summed as the filter fills) plus a Poisson tail of four standard
/// deviations. A filter whose rate were off by a bit per item, or which
/// lost its first part's halved rate, would exceed it.
fn allowed_drops(unique: u64, capacity: u64, error: f64) -> usize {
    let mut f = bloomkit_core::local::BlockedFilter::new(capacity, error).unwrap();
    let mut expected = 0.0;
    for i in 0..unique {
        expected += f.estimated_false_positive_rate();
        f.add_each(&[i.to_le_bytes()], |_| {}).unwrap();
    }
    assert!(expected < unique as f64 * error / 4.0, "the expectation is far below the configured rate");
    (expected + 4.0 * expected.sqrt() + 2.0).ceil() as usize
}

#[test]
fn calc_agrees_with_the_formulas() {
    let out = ok(&["calc", "--capacity", "1e6", "--error-rate", "0.01", "--json"], b"");
    let v: serde_json_lite::Value = serde_json_lite::parse(&out);
    // Counts are JSON integers ("hashes":7, not 7.0), sizes exact bytes
    // beside a human figure.
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    for field in ["capacity", "bits", "bytes", "hashes", "bf_reserve_bytes", "bf_reserve_hashes"] {
        assert!(json[field].is_u64(), "{field} is an integer: {json}");
    }
    assert_eq!(json["memory"], "1.1 MiB", "{json}");
    let (n, p) = (1e6f64, 0.01f64);
    let m = (-n * p.ln() / std::f64::consts::LN_2.powi(2)).ceil();
    assert_eq!(v.get("bits"), m);
    assert_eq!(v.get("hashes"), (m / n * std::f64::consts::LN_2).round());
    let k = v.get("hashes");
    let expected_p = (1.0 - (-k * n / m).exp()).powf(k);
    assert!((v.get("error_rate") - expected_p).abs() < 1e-12);
    // RedisBloom's sizing at p/2: floor(n x bpe) bits, rounded up to 64-bit words.
    let bpe = -(p / 2.0).ln() / 0.480453013918201;
    let reserve_bits = ((n * bpe).floor() / 64.0).ceil() * 64.0;
    assert_eq!(v.get("bf_reserve_bytes"), reserve_bits / 8.0);
    let table = String::from_utf8(ok(
        &["calc", "-n", "1e9", "--table", "--bits-per-item", "30,50", "--table-hashes", "8,16"],
        b"",
    ))
    .unwrap();
    assert_eq!(table.lines().count(), 2 + 4, "{table}");
    assert!(table.contains("5.8 GiB"), "{table}");
    // (Usage errors exit 2: cli_conventions checks these and more.)
    let usage = bloomkit(&["calc", "--capacity", "lots"], b"");
    assert_eq!(usage.status.code(), Some(2), "usage errors exit 2");
}

#[test]
fn dedup_in_process() {
    let (input, first) = stream(30_000, "line-");
    // The default error rate is 1e-6: over 30 000 lines, more than 2 lost is a failure.
    assert_dedup(&ok(&["dedup"], &input), &first, 2);
    let dups = lines(&ok(&["dedup", "--duplicates"], &input));
    assert_eq!(dups.len() + first.len(), lines(&input).len(), "repeats are the rest");
    let count = String::from_utf8(ok(&["dedup", "--count"], &input)).unwrap();
    assert_eq!(
        count.trim(),
        format!("{} lines, {} unique, {} duplicates", lines(&input).len(), first.len(), dups.len())
    );
    // Non-UTF-8 bytes are just bytes; a loose error rate shows the bound is honoured.
    let binary = b"\xff\xfe\n\x00\x01\n\xff\xfe\n".to_vec();
    assert_eq!(ok(&["dedup"], &binary), b"\xff\xfe\n\x00\x01\n".to_vec());
    assert_dedup(
        &ok(&["dedup", "--error-rate", "0.01", "--capacity", "30000"], &input),
        &first,
        allowed_drops(first.len() as u64, 30_000, 0.01),
    );
    // Several files are one stream; a missing one is an error that names it.
    let dir = tempfile::tempdir().unwrap();
    let (f1, f2) = (dir.path().join("1.txt"), dir.path().join("2.txt"));
    std::fs::write(&f1, b"a\nb\n").unwrap();
    std::fs::write(&f2, b"b\nc").unwrap();
    assert_eq!(ok(&["dedup", f1.to_str().unwrap(), f2.to_str().unwrap()], b""), b"a\nb\nc\n".to_vec());
    fails(&["dedup", dir.path().join("missing.txt").to_str().unwrap()], b"", "cannot open");
    // A last line without '\n' gets one; empty lines are lines.
    assert_eq!(ok(&["dedup"], b"a\nb\na"), b"a\nb\n".to_vec());
    assert_eq!(ok(&["dedup"], b"x\n\ny\n\nz"), b"x\n\ny\nz\n".to_vec());
    assert_eq!(ok(&["dedup", "--duplicates"], b"x\n\ny\n\nx"), b"\nx\n".to_vec());
    // Fields.
    let csv = b"a,1,x\nb,2,x\nc,1,y\nd\n".to_vec();
    assert_eq!(ok(&["dedup", "--field", "2"], &csv), b"a,1,x\nb,2,x\nd\n".to_vec());
    assert_eq!(ok(&["dedup", "--field", "3", "--delimiter", ","], &csv), b"a,1,x\nc,1,y\nd\n".to_vec());
}

#[test]
fn dedup_state_survives_between_runs() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("seen.bkf");
    let state_arg = state.to_str().unwrap();
    ok(&["dedup", "--state", state_arg], b"monday\ntuesday\n");
    assert!(state.exists());
    assert_eq!(ok(&["dedup", "--state", state_arg], b"tuesday\nwednesday\nmonday\n"), b"wednesday\n");
    assert_eq!(ok(&["dedup", "--state", state_arg], b"wednesday\nthursday\n"), b"thursday\n");
    std::fs::write(&state, b"BLOOMKIT garbage").unwrap();
    fails(&["dedup", "--state", state_arg], b"x\n", "cannot load the state file");
    std::fs::write(&state, b"not a filter at all").unwrap();
    fails(&["dedup", "--state", state_arg], b"x\n", "not a bloomkit filter file");
}

fn redis_arg(s: &TestServer) -> String {
    format!("redis://127.0.0.1:{}", s.port)
}

#[test]
fn dedup_against_servers() {
    let with_module = TestServer::with_bloomkit(Server::Redis);
    let url = redis_arg(&with_module);
    let (input, first) = stream(20_000, "srv-");
    let bloom = ["dedup", "--redis", &url, "--key", "seen", "--capacity", "10M"];
    let connections = |c: &mut bloomkit_testkit::Conn| {
        let info = String::from_utf8_lossy(c.cmd("INFO stats").as_bytes()).into_owned();
        let line = info.lines().find_map(|l| l.strip_prefix("total_connections_received:")).unwrap();
        line.trim().parse::<u64>().unwrap()
    };
    let mut watcher = with_module.conn();
    let before = connections(&mut watcher);
    assert_dedup(&ok(&bloom, &input), &first, 2);
    // One connection finds the server's mode and the key's type, runs the
    // filter and reads its rate at the end.
    assert_eq!(connections(&mut watcher) - before, 1, "dedup sets up and runs over one connection");
    let before = connections(&mut watcher);
    ok(&["dedup", "--redis", &url, "--key", "grows"], b"a\nb\na\n");
    assert_eq!(connections(&mut watcher) - before, 1, "and so does an expandable filter");
    // A second run remembers.
    assert!(ok(&bloom, &input).is_empty());
    // Without a capacity, a Bloom filter already there is used as it is.
    assert_eq!(ok(&["dedup", "--redis", &url, "--key", "seen"], b"srv-00000001\xc3\xa9\nnew\n"), b"new\n");
    let mut c = with_module.conn();
    assert_eq!(c.cmd("TYPE seen").as_bytes(), bloomkit_core::bf::rdb::TYPE_NAME.as_bytes());
    let card = c.cmd("BF.CARD seen").as_int() as usize - 1;
    assert!(card <= first.len() && card + 2 >= first.len(), "the server filter holds the unique lines");
    c.ok("SET text x");
    fails(&["dedup", "--redis", &url, "--key", "text"], b"a\n", "holds a string");
    let plain = TestServer::start(Server::Redis, &[], &[]);
    fails(&["dedup", "--redis", &redis_arg(&plain)], b"a\n", "has no Bloom filter module");
    fails(&["dedup", "--redis", "redis://127.0.0.1:1"], b"a\n", "cannot talk to the server");
    // What the options alone rule out is said before any server is asked
    // (this one does not answer).
    let down = "redis://127.0.0.1:1";
    usage_error(&["dedup", "--redis", down, "--shards", "4", "--capacity", "10"], b"a\n", "with --shards");
    usage_error(&["dedup", "--redis", down, "--shards", "4", "--key", "a{b"], b"a\n", "braces");
    usage_error(&["dedup", "--redis", down, "--layout", "php-bkdr"], b"a\n", "give its bits and hashes");
    usage_error(&["dedup", "--redis", &url, "--state", "x"], b"a\n", "--state keeps an in-process filter");
    // Empty input creates no key, and that is an empty filter, not an error.
    assert!(ok(&["dedup", "--redis", &url, "--key", "never-written"], b"").is_empty());
    fails(&["dedup", "--redis", &redis_arg(&plain)], b"a\n", "add --bitmap");
}

/// `--bitmap` on a server with no module: the same answers, remembered
/// between runs, in a plain string the size Guava would give.
#[test]
fn dedup_with_bitmaps_on_a_plain_server() {
    let plain = TestServer::start(Server::Valkey, &[], &[]);
    let url = redis_arg(&plain);
    let (input, first) = stream(20_000, "bm");
    let args = ["dedup", "--redis", &url, "--bitmap", "--key", "seen", "--capacity", "100k"];
    assert_dedup(&ok(&args, &input), &first, 2);
    assert!(ok(&args, &input).is_empty(), "a second run remembers the first");
    let mut conn = plain.conn();
    assert_eq!(conn.call(&["TYPE", "seen"]).as_bytes(), b"string");
    // Guava: 100k items at 1e-6 are 2 875 517 bits, 359 440 bytes in whole longs.
    assert_eq!(conn.call(&["STRLEN", "seen"]).as_int(), 359_440);
    conn.call(&["HSET", "hash", "f", "v"]);
    fails(&["dedup", "--redis", &url, "--bitmap", "--key", "hash"], b"a\n", "not a bitmap");
    usage_error(&["dedup", "--bitmap"], b"a\n", "no server given: pass --redis URL");
}

/// Bitmaps in other systems' layouts from the command line: dedup into a
/// PHP-scheme bitmap and a Redisson one (its config written as Redisson
/// writes it), `info --layout` reporting fill and rate, a Redisson config
/// that disagrees refused, and Guava files out and back in.
#[test]
fn bitmap_layouts_from_the_command_line() {
    let plain = TestServer::start(Server::Redis, &[], &[]);
    let url = redis_arg(&plain);
    let mut conn = plain.conn();
    let (input, first) = stream(5_000, "lay");
    php_bkdr_layout(&url, &mut conn, &input, &first);
    redisson_layout(&url, &mut conn, &input, &first);
    guava_files(&url, &mut conn, &input);
}

/// [`bitmap_layouts_from_the_command_line`]: dedup into a PHP-scheme bitmap,
/// sized ahead; `info --layout` reports its fill and rate; the options it
/// needs are asked for.
fn php_bkdr_layout(url: &str, conn: &mut bloomkit_testkit::Conn, input: &[u8], first: &[Vec<u8>]) {
    let php =
        ["dedup", "--redis", url, "--layout", "php-bkdr", "--bits", "200k", "--hashes", "7", "--key", "php"];
    assert_dedup(&ok(&php, input), first, 5);
    assert!(ok(&php, input).is_empty(), "a second run remembers the first");
    assert_eq!(conn.call(&["STRLEN", "php"]).as_int(), 25_000, "200 000 bits, sized ahead");
    let info: serde_json::Value = serde_json::from_slice(&ok(
        &["info", "--redis", url, "php", "--json", "--layout", "php-bkdr", "--bits", "200k", "--hashes", "7"],
        b"",
    ))
    .unwrap();
    assert_eq!(info["layout"], "php-bkdr");
    assert_eq!(info["bits"], 200_000);
    let fill = info["fill"].as_f64().unwrap();
    let rate = info["estimated_false_positive_rate"].as_f64().unwrap();
    // 5000 items x 7 hashes over 200 000 bits: 1 - e^(-0.175) = 16% set.
    assert!((0.15..0.17).contains(&fill), "{info}");
    assert!((rate - fill.powi(7)).abs() < 1e-12, "{info}");
    usage_error(&["dedup", "--redis", url, "--layout", "php-bkdr", "--key", "x"], b"a\n", "--bits");
    usage_error(&["info", "--redis", url, "x", "--layout", "nosuch"], b"", "the layouts are guava,");
}

/// [`bitmap_layouts_from_the_command_line`]: dedup into a Redisson bitmap,
/// its config written as Redisson writes it; a config that disagrees is refused.
fn redisson_layout(url: &str, conn: &mut bloomkit_testkit::Conn, input: &[u8], first: &[Vec<u8>]) {
    let redisson = [
        "dedup",
        "--redis",
        url,
        "--layout",
        "redisson",
        "--capacity",
        "10000",
        "--error-rate",
        "0.01",
        "--key",
        "rbf",
    ];
    assert_dedup(&ok(&redisson, input), first, 60);
    assert_eq!(conn.call(&["HGET", "{rbf}:config", "size"]).as_bytes(), b"95850");
    assert_eq!(conn.call(&["HGET", "{rbf}:config", "falseProbability"]).as_bytes(), b"0.01");
    let text = String::from_utf8(ok(
        &[
            "info",
            "--redis",
            url,
            "rbf",
            "--layout",
            "redisson",
            "--capacity",
            "10000",
            "--error-rate",
            "0.01",
        ],
        b"",
    ))
    .unwrap();
    assert!(text.contains("{rbf}:config") && text.contains("fill"), "{text}");
    fails(
        &[
            "info",
            "--redis",
            url,
            "rbf",
            "--layout",
            "redisson",
            "--capacity",
            "20000",
            "--error-rate",
            "0.01",
        ],
        b"",
        "config has been changed",
    );
}

/// [`bitmap_layouts_from_the_command_line`]: a guava bitmap to a Guava file
/// and back into another key, bit for bit; a file of another strategy refused.
fn guava_files(url: &str, conn: &mut bloomkit_testkit::Conn, input: &[u8]) {
    // A guava bitmap to a Guava file and back into another key, bit for bit.
    let guava =
        ["dedup", "--redis", url, "--bitmap", "--capacity", "10000", "--error-rate", "0.01", "--key", "gv"];
    ok(&guava, input);
    let dir = std::env::temp_dir().join(format!("bloomkit-cli-guava-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gv.guava");
    let f = file.to_str().unwrap();
    ok(
        &[
            "dump",
            "--redis",
            url,
            "gv",
            "--format",
            "guava",
            "-o",
            f,
            "--bitmap",
            "--capacity",
            "10000",
            "--error-rate",
            "0.01",
        ],
        b"",
    );
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(&bytes[..6], &[1, 7, 0, 0, 0x05, 0xda], "strategy 1, k 7, 1498 longs (95 872 bits)");
    usage_error(&["dump", "--redis", url, "gv", "--format", "guava", "-o", f], b"", "add --bitmap");
    let out = bloomkit(&["restore", "--redis", url, "gv2", "--format", "guava", "-i", f], b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bits 95872 --hashes 7"), "tells how to open it");
    assert_eq!(conn.call(&["GET", "gv2"]).as_bytes(), conn.call(&["GET", "gv"]).as_bytes());
    std::fs::write(&file, [0u8, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    fails(&["restore", "--redis", url, "gv3", "--format", "guava", "-i", f], b"", "MURMUR128_MITZ_32");
    assert_eq!(conn.call(&["EXISTS", "gv3"]).as_int(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dump_restore_copy_between_redisbloom_and_bloomkit() {
    let redisbloom = TestServer::start(Server::Redis, &[Module::RedisBloom], &[]);
    let bloomkit = TestServer::with_bloomkit(Server::Redis);
    let (rb_url, bk_url) = (redis_arg(&redisbloom), redis_arg(&bloomkit));
    let mut rb = redisbloom.conn();
    rb.ok("BF.RESERVE clicks 0.001 1000 EXPANSION 2");
    let items: Vec<String> = (0..5000).map(|i| format!("click-{i}")).collect();
    let mut madd = vec!["BF.MADD".to_string(), "clicks".into()];
    madd.extend(items.iter().cloned());
    rb.call(&madd);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("clicks.bkf");
    let file_arg = file.to_str().unwrap();
    ok(&["dump", "--redis", &rb_url, "clicks", "-o", file_arg], b"");
    ok(&["restore", "--redis", &bk_url, "clicks", "-i", file_arg], b"");
    let mut bk = bloomkit.conn();
    assert_eq!(bk.scandump("clicks"), rb.scandump("clicks"), "restored byte for byte");
    fails(&["restore", "--redis", &bk_url, "clicks", "-i", file_arg], b"", "already exists");
    ok(&["restore", "--redis", &bk_url, "clicks", "-i", file_arg, "--replace"], b"");
    // Standard input and output work too.
    let dumped = ok(&["dump", "--redis", &bk_url, "clicks"], b"");
    assert_eq!(dumped, std::fs::read(&file).unwrap(), "the same file from either server");
    ok(&["restore", "--redis", &bk_url, "clicks2"], &dumped);

    // Copy back to RedisBloom.
    ok(&["copy", "--from", &bk_url, "--to", &rb_url, "clicks2"], b"");
    assert_eq!(rb.scandump("clicks2"), bk.scandump("clicks2"));
    fails(&["copy", "--from", &bk_url, "--to", &rb_url, "clicks"], b"", "already exists");
    ok(&["copy", "--from", &bk_url, "--to", &rb_url, "clicks", "--replace"], b"");

    // A dump is a dedup state, and the other way round.
    let known: Vec<u8> = items[..10].iter().flat_map(|i| format!("{i}\nnew-{i}\n").into_bytes()).collect();
    let out = ok(&["dedup", "--state", file_arg], &known);
    assert_eq!(lines(&out).len(), 10, "only the new lines: {}", String::from_utf8_lossy(&out));
    ok(&["restore", "--redis", &bk_url, "from-state", "-i", file_arg], b"");
    assert_eq!(bk.cmd("BF.EXISTS from-state new-click-3"), Reply::Int(1));

    // Corrupt files are refused and leave nothing behind.
    let mut corrupt = std::fs::read(&file).unwrap();
    let last = corrupt.len() - 100;
    corrupt[last] ^= 0xff;
    let corrupt_path = dir.path().join("corrupt.bkf");
    std::fs::write(&corrupt_path, &corrupt).unwrap();
    fails(
        &["restore", "--redis", &bk_url, "victim", "-i", corrupt_path.to_str().unwrap()],
        b"",
        "checksum does not match: the file is damaged",
    );
    assert_eq!(bk.cmd("EXISTS victim"), Reply::Int(0));
    // Cut short, anywhere: said once, in words, with what to do; nothing written.
    let whole = std::fs::read(&file).unwrap();
    for cut in [10, 20, whole.len() / 2, whole.len() - 1] {
        let cut_path = dir.path().join("cut.bkf");
        std::fs::write(&cut_path, &whole[..cut]).unwrap();
        let out =
            self::bloomkit(&["restore", "--redis", &bk_url, "victim", "-i", cut_path.to_str().unwrap()], b"");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("is cut short") && stderr.contains("dump the filter again"),
            "{cut}: {stderr}"
        );
        assert_eq!(stderr.matches("filter file").count(), 1, "{cut}: said once: {stderr}");
        assert!(!stderr.contains("fill whole buffer"), "{stderr}");
        assert_eq!(bk.cmd("EXISTS victim"), Reply::Int(0));
    }
    assert_eq!(bk.cmd("DBSIZE").as_int(), 3, "no staging key left behind");
    fails(&["dump", "--redis", &bk_url, "missing", "-o", file_arg], b"", "does not exist");
    assert!(Path::new(&file).exists(), "a failed dump leaves the old file");

    let info: serde_json::Value =
        serde_json::from_slice(&ok(&["info", "--redis", &rb_url, "clicks", "--json"], b"")).unwrap();
    assert_eq!(info["items"], rb.cmd("BF.CARD clicks").as_int(), "{info}");
    assert_eq!(info["filters"], 3, "{info}");
    let text = String::from_utf8(ok(&["info", "--redis", &rb_url, "clicks"], b"")).unwrap();
    assert!(text.lines().any(|l| l.starts_with("filters") && l.ends_with(" 3")), "{text}");
}

/// A tiny JSON reader for flat objects of numbers, enough for `calc --json`.
mod serde_json_lite {
    pub struct Value(Vec<(String, f64)>);
    impl Value {
        pub fn get(&self, key: &str) -> f64 {
            self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v).unwrap_or_else(|| panic!("no {key}"))
        }
    }
    pub fn parse(bytes: &[u8]) -> Value {
        let text = std::str::from_utf8(bytes).unwrap().trim().trim_start_matches('{').trim_end_matches('}');
        Value(
            text.split(',')
                .map(|pair| {
                    let (k, v) = pair.split_once(':').unwrap();
                    (k.trim_matches('"').to_string(), v.parse().unwrap_or(f64::NAN))
                })
                .collect(),
        )
    }
}

/// `--window-count N`: a line is written again once N lines have passed
/// since it was last seen; in process (with --state) and on the module.
#[test]
fn dedup_over_a_sliding_window() {
    // Each line repeats right away, then again 5000 lines later.
    let mut input = Vec::new();
    for i in 0..10_000u32 {
        input.extend_from_slice(format!("l{i}\nl{i}\n").as_bytes());
        if i >= 5000 {
            input.extend_from_slice(format!("l{}\n", i - 5000).as_bytes());
        }
    }
    let count = |out: &[u8]| lines(out).len();
    // A window of 1000 lines: the late repeats (15 000 lines later) are new again.
    let windowed = ok(&["dedup", "--window-count", "1000", "--error-rate", "0.0001"], &input);
    assert!((14_990..=15_000).contains(&count(&windowed)), "{} lines", count(&windowed));
    // A window of 50 000: nothing repeats.
    let wide = ok(&["dedup", "--window-count", "50k", "--error-rate", "0.0001"], &input);
    assert!((9_990..=10_000).contains(&count(&wide)), "{} lines", count(&wide));

    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("w.bkf");
    let state = state.to_str().unwrap();
    ok(&["dedup", "--window-count", "1000", "--state", state], b"a\nb\n");
    assert_eq!(ok(&["dedup", "--window-count", "1000", "--state", state], b"a\nc\n"), b"c\n");
    fails(&["dedup", "--state", state], b"a\n", "holds a sliding-window filter");

    let server = TestServer::with_bloomkit(Server::Redis);
    let url = redis_arg(&server);
    let on_server = ok(
        &["dedup", "--redis", &url, "--key", "w", "--window-count", "1000", "--error-rate", "0.0001"],
        &input,
    );
    assert_eq!(on_server, windowed, "the module answers as the in-process filter");
    assert_eq!(server.conn().cmd("TYPE w").as_bytes(), bloomkit_core::apbf::TYPE_NAME.as_bytes());
    usage_error(&["dedup", "--redis", &url, "--bitmap", "--window", "10m"], b"a\n", "not --bitmap");
}

/// The burst from the issue: a file read within seconds, far more lines
/// than one generation of a ten-minute window. With generations ending by
/// volume, the false-positive rate stays at the configured 1e-6: expected
/// drops are 1e-6 x 1.4M = 1.4, and the bound allows a Poisson tail
/// (P(X > 10) < 1e-6). Before, 552 445 unique lines were dropped.
#[test]
fn dedup_window_keeps_its_rate_through_a_burst() {
    let unique = 1_400_000usize;
    let total = 2_000_000usize;
    let mut input = Vec::with_capacity(total * 16);
    for j in 0..total {
        // The first `unique` lines are distinct; the rest repeat earlier ones.
        let i = if j < unique { j } else { (j * 7919) % unique };
        input.extend_from_slice(format!("line-{i:09}\n").as_bytes());
    }
    let out = bloomkit(&["dedup", "--window", "10m", "--capacity", "3000000"], &input);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written = lines(&out.stdout).len();
    assert!(written <= unique, "{written} lines written of {unique} unique");
    let dropped = unique - written;
    assert!(dropped <= 10, "{dropped} unique lines dropped where 1.4 are expected");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("window holds 2000000 lines"), "{stderr}");
    assert!(stderr.contains("0 generations lost early") && !stderr.contains("warning"), "{stderr}");
    // The same input through a window too small for it: the summary says so.
    let out = bloomkit(&["dedup", "--window", "10m", "--capacity", "100000", "--count"], &input);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning: more lines than the window's capacity"), "{stderr}");
    assert!(!stderr.contains(" 0 generations lost early"), "{stderr}");
}

fn mexists(c: &mut bloomkit_testkit::Conn, command: &str, key: &str, items: &[String]) -> Reply {
    let mut cmd = vec![command.to_string(), key.to_string()];
    cmd.extend(items.iter().cloned());
    c.call(&cmd)
}

/// Sliding-window and bitmap filters go through dump, restore and copy
/// like Bloom filters, and answer identically after; a key of another
/// type is named in the error.
#[test]
fn dump_restore_copy_every_kind_of_key() {
    let a = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let b = TestServer::start(Server::Valkey, &[Module::bloomkit()], &[]);
    let (url_a, url_b) = (redis_arg(&a), redis_arg(&b));
    let mut c = a.conn();
    c.ok("APBF.RESERVE w 0.01 5000 TIME 600");
    c.ok("APBF.RESERVE n 0.01 5000 COUNT");
    let items: Vec<String> = (0..3000).map(|i| format!("item-{i}")).collect();
    let probes: Vec<String> = (0..3000).map(|i| format!("probe-{i}")).chain(items.iter().cloned()).collect();
    for key in ["w", "n"] {
        mexists(&mut c, "APBF.MADD", key, &items);
    }
    let dir = tempfile::tempdir().unwrap();
    for key in ["w", "n"] {
        window_file(&mut c, &url_a, dir.path(), key, &probes);
    }
    ok(&["copy", "--from", &url_a, "--to", &url_b, "w", "n"], b"");
    let mut d = b.conn();
    for key in ["w", "n"] {
        assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", key]), d.call(&["DEBUG", "DIGEST-VALUE", key]), "{key}");
        assert_eq!(
            mexists(&mut c, "APBF.MEXISTS", key, &probes),
            mexists(&mut d, "APBF.MEXISTS", key, &probes)
        );
    }
    let info = String::from_utf8(ok(&["info", "--redis", &url_a, "w"], b"")).unwrap();
    assert!(
        info.contains("sliding-window") && info.contains("items in window") && info.contains("3000"),
        "{info}"
    );

    // A bitmap filter made by dedup --bitmap.
    let input: Vec<u8> = items.iter().flat_map(|i| format!("{i}\n").into_bytes()).collect();
    let bitmap = ["--bitmap", "--capacity", "10000", "--error-rate", "0.001"];
    ok(&[&["dedup", "--redis", &url_a, "--key", "bm", "--count"][..], &bitmap].concat(), &input);
    let file = dir.path().join("bm.bitmap");
    let file = file.to_str().unwrap();
    ok(&[&["dump", "--redis", &url_a, "bm", "-o", file][..], &bitmap].concat(), b"");
    ok(&["restore", "--redis", &url_b, "bm2", "-i", file], b"");
    assert_eq!(c.cmd("GET bm"), d.cmd("GET bm2"), "the bitmap restored bit for bit");
    ok(&[&["copy", "--from", &url_a, "--to", &url_b, "bm"][..], &bitmap].concat(), b"");
    assert_eq!(c.cmd("GET bm"), d.cmd("GET bm"));
    let info =
        String::from_utf8(ok(&[&["info", "--redis", &url_b, "bm"][..], &bitmap].concat(), b"")).unwrap();
    assert!(info.contains("bitmap filter") && info.contains("estimated items"), "{info}");
    let mut damaged = std::fs::read(file).unwrap();
    let n = damaged.len();
    damaged[n / 2] ^= 1;
    std::fs::write(file, &damaged).unwrap();
    fails(&["restore", "--redis", &url_b, "bm3", "-i", file], b"", "checksum");
    assert_eq!(d.cmd("EXISTS bm3"), Reply::Int(0), "a damaged file writes nothing");

    // Keys that are not filters are named for what they are.
    c.ok("HSET h f v");
    fails(&["info", "--redis", &url_a, "h"], b"", "holds a hash");
    fails(&["dump", "--redis", &url_a, "h", "-o", file], b"", "holds a hash");
    fails(&["info", "--redis", &url_a, "bm"], b"", "pass --bitmap");
    // copy goes on past a failure and says how many were copied.
    let out = bloomkit(&["copy", "--from", &url_a, "--to", &url_b, "--replace", "h", "w", "missing"], b"");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 of 3 copied") && stderr.contains("h, missing"), "{stderr}");
}

/// [`dump_restore_copy_every_kind_of_key`] for one window key: dumped to a
/// file, restored byte for byte (and over itself only with --replace), and
/// the file a `dedup --window --state` starts from.
fn window_file(c: &mut bloomkit_testkit::Conn, url_a: &str, dir: &Path, key: &str, probes: &[String]) {
    let file = dir.join(format!("{key}.apbf"));
    let file = file.to_str().unwrap();
    let out = bloomkit(&["dump", "--redis", url_a, key, "-o", file], b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sliding-window filter"));
    let restored = format!("{key}-restored");
    ok(&["restore", "--redis", url_a, &restored, "-i", file], b"");
    assert_eq!(
        c.call(&["DEBUG", "DIGEST-VALUE", key]),
        c.call(&["DEBUG", "DIGEST-VALUE", &restored]),
        "{key}: restored byte for byte"
    );
    assert_eq!(mexists(c, "APBF.MEXISTS", key, probes), mexists(c, "APBF.MEXISTS", &restored, probes));
    fails(&["restore", "--redis", url_a, &restored, "-i", file], b"", "already exists");
    ok(&["restore", "--redis", url_a, &restored, "-i", file, "--replace"], b"");
    // The state file of `dedup --window --state` is the same format:
    // dedup starts from the dumped window.
    let window = if key == "w" { ["--window", "10m"] } else { ["--window-count", "5000"] };
    let args = [&["dedup", "--state", file][..], &window].concat();
    assert_eq!(ok(&args, b"item-1\nitem-2999\nnew\n"), b"new\n".to_vec(), "{key}");
}

/// The behaviour people expect from a command-line tool: usage errors exit
/// 2 and run-time failures 1, list options in both forms, rates that never
/// print as 0, warnings for shapes no implementation uses, paths checked
/// before any input is read, errors that name the file, JSON, completions
/// and a man page.
#[test]
fn cli_conventions() {
    let usage = |args: &[&str], message: &str| usage_error(args, b"", message);
    usage(&["calc", "-n", "1e6", "-p", "2"], "strictly between 0 and 1");
    usage(&["calc", "-n", "0"], "");
    usage(&["calc", "-n", "1e6"], "give exactly two");
    usage(&["calc", "--table"], "--table needs --capacity");
    usage(&["dedup", "--delimiter", "ab"], "one byte");
    usage(&["dedup", "--error-rate", "1.5"], "strictly between 0 and 1");
    usage(&["dedup", "--capacity", "0.5"], "at least 1");
    usage(
        &["dedup", "--state", "x.bkf", "--redis", "redis://127.0.0.1:1"],
        "--state keeps an in-process filter",
    );
    usage(&["dedup", "--bitmap"], "no server given: pass --redis URL");
    usage(
        &["info", "--redis", "not a url", "k"],
        "'not a url' is not a server address; write it as redis://host:port",
    );
    usage(
        &["info", "--redis", "redis://127.0.0.1:1", "k", "--bitmap", "--error-rate", "2"],
        "strictly between 0 and 1",
    );
    usage(&["calc", "-n", "1e6", "--table", "--table-hashes", "0"], "whole numbers of at least 1");
    usage(&["calc", "-n", "1e6", "--table", "--bits-per-item=-5"], "positive numbers");
    fails(&["info", "--redis", "redis://127.0.0.1:1", "k"], b"", "cannot talk to the server");

    // --bits-per-item takes 30,50 and 30 50, as its help shows.
    let comma = ok(&["calc", "-n", "1e9", "--table", "--bits-per-item", "30,50"], b"");
    let space = ok(&["calc", "-n", "1e9", "--table", "--bits-per-item", "30", "50"], b"");
    assert_eq!(comma, space);

    // A rate far below an f64's range prints with its exponent, and the shape gets a warning.
    let out = bloomkit(&["calc", "-n", "10M", "-m", "512MiB"], b"");
    assert!(out.status.success());
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stderr.contains("warning") && stderr.contains("would pick k = 64"), "{stderr}");
    let line = stdout.lines().find(|l| l.starts_with("false-positive rate")).unwrap();
    assert!(line.contains("e-") && !line.contains(" 0") && !line.ends_with("e0"), "{line}");
    let out = String::from_utf8(ok(&["calc", "-n", "1", "-m", "1e7"], b"")).unwrap();
    let line = out.lines().find(|l| l.starts_with("false-positive rate")).unwrap();
    assert!(line.contains("e-"), "a rate below 1e-308 still prints: {line}");

    // A near-empty filter's rate is tiny, not 0.
    let out = bloomkit(&["dedup", "--count"], b"a\nb\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rate = stderr.split("rate now ").nth(1).and_then(|r| r.split(',').next()).unwrap_or("");
    assert!(rate.contains("e-") && !rate.starts_with('0'), "{stderr}");

    // Paths are checked before any input is read: nothing is written.
    let out = bloomkit(&["dedup", "--state", "/nonexistent/dir/s.bkf"], b"a\nb\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "output written before the state path was checked");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/dir"), "the path is named");
    assert!(stderr.contains("choose a folder that exists and is writable"), "{stderr}");
    assert!(!stderr.contains(".tmp"), "no temporary file name: {stderr}");
    fails(&["dedup", "/tmp"], b"", "cannot read /tmp: it is a directory");

    completions_man_pages_and_help();
}

/// [`cli_conventions`]: completions and man pages, from the clap
/// definitions (one page per subcommand, each with every option the
/// parser takes), and help text for every argument.
fn completions_man_pages_and_help() {
    // Completions and a man page, from the clap definitions.
    for shell in ["bash", "zsh", "fish"] {
        let script = String::from_utf8(ok(&["completions", shell], b"")).unwrap();
        assert!(script.contains("bloomkit") && script.contains("dedup"), "{shell}");
    }
    let man = String::from_utf8(ok(&["man"], b"")).unwrap();
    assert!(man.contains(".TH") && man.contains("bloomkit"), "{man}");
    // One page per subcommand, each with every option the parser takes.
    let pages = tempfile::tempdir().unwrap();
    ok(&["man", "--out-dir", pages.path().to_str().unwrap()], b"");
    for command in ["calc", "dedup", "dump", "restore", "copy", "info", "completions", "man"] {
        let page = String::from_utf8(ok(&["man", command], b"")).unwrap();
        assert!(page.contains(&format!(".TH bloomkit-{command} 1")), "{command}: {page}");
        let written = std::fs::read_to_string(pages.path().join(format!("bloomkit-{command}.1"))).unwrap();
        assert_eq!(written, page, "{command}: the installed page is the printed one");
        assert!(man.contains(&format!("bloomkit\\-{command}(1)")), "the top page lists {command}");
        let help = String::from_utf8(ok(&[command, "--help"], b"")).unwrap();
        for word in help.split_whitespace().filter(|w| w.starts_with("--")) {
            let option = word.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
            let roff = option.replace('-', "\\-");
            assert!(page.contains(&roff), "{command}: the page documents {option}");
        }
    }
    usage_error(&["man", "nope"], b"", "pages exist for: calc");

    // Every argument has help text: on its line, or on the next (long help).
    for command in ["calc", "dedup", "dump", "restore", "copy", "info", "completions"] {
        let help = String::from_utf8(ok(&[command, "--help"], b"")).unwrap();
        let lines: Vec<&str> = help.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            // (clap's "[default: x]" under a list of possible values is not an argument.)
            let is_argument = line.starts_with("  ")
                && !trimmed.starts_with("[default:")
                && !trimmed.starts_with("[possible values:")
                && (trimmed.starts_with('-') || trimmed.starts_with('<') || trimmed.starts_with('['));
            if !is_argument {
                continue;
            }
            let same_line = trimmed.contains("  ");
            let next_line =
                lines.get(i + 1).is_some_and(|n| n.starts_with("          ") && !n.trim().is_empty());
            assert!(same_line || next_line, "{command}: no help for '{trimmed}'\n{help}");
        }
    }
}

/// `info --json` for each kind of key, and a near-empty filter's rate
/// printed without rounding to 0.
#[test]
fn info_as_json_and_tiny_rates() {
    let s = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let url = redis_arg(&s);
    let mut c = s.conn();
    c.ok("BF.RESERVE bf 0.000001 1000000");
    c.ok("BF.ADD bf one");
    c.ok("APBF.RESERVE w 0.01 1000 TIME 60");
    c.ok("APBF.ADD w a");
    let bf: serde_json::Value =
        serde_json::from_slice(&ok(&["info", "--redis", &url, "bf", "--json"], b"")).unwrap();
    assert_eq!(bf["items"], 1);
    assert_eq!(bf["sub_filters"].as_array().unwrap().len(), 1);
    let log10 = bf["log10_estimated_false_positive_rate"].as_f64().unwrap();
    assert!(log10 < -20.0 && log10.is_finite(), "{bf}");
    let text = String::from_utf8(ok(&["info", "--redis", &url, "bf"], b"")).unwrap();
    assert!(!text.contains("0.000e0") && !text.contains("0.00e0"), "{text}");
    let w: serde_json::Value =
        serde_json::from_slice(&ok(&["info", "--redis", &url, "w", "--json"], b"")).unwrap();
    assert_eq!(w["kind"], "sliding-window filter");
    assert_eq!(w["items_in_window"], 1);
}

/// On a terminal (a pseudo-terminal from util-linux's `script`), dedup of
/// a file shows a bar with percentage, rate and ETA; of a pipe, a spinner
/// with counts. Off a terminal (every other test), nothing.
#[test]
fn progress_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lines.txt");
    let text: String = (0..3_000_000).map(|i| format!("line-{i}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let bin = env!("CARGO_BIN_EXE_bloomkit");
    let on_terminal = |command: String| {
        let mut cmd = Command::new("script");
        cmd.args(["-qfec", &command, "/dev/null"]);
        let out = bloomkit_testkit::output_within(&mut cmd, b"", std::time::Duration::from_secs(120));
        assert!(out.status.success(), "{command}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let screen = on_terminal(format!("{bin} dedup --count {}", file.display()));
    assert!(screen.contains("% ") && screen.contains("eta") && screen.contains("MiB/s"), "{screen}");
    let screen = on_terminal(format!("cat {} | {bin} dedup --count", file.display()));
    assert!(screen.contains("lines/s") && !screen.contains("eta"), "{screen}");
}

/// valkey-bloom's filters through the CLI: restored from the DUMPs it wrote
/// on Valkey 9, described by `info`, dumped to a file and restored into
/// Redis 7.0 (the payload retargeted to an RDB version it reads), copied
/// from Valkey to Redis, each answering every item and probe as before.
#[test]
fn valkey_bloom_filters_move_between_servers() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bloomkit-core/tests/fixtures/valkey-bloom");
    let examples: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures.join("examples.json")).unwrap()).unwrap();
    let valkey = TestServer::start(Server::Valkey, &[Module::bloomkit()], &[]);
    let redis = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let (vurl, rurl) = (redis_arg(&valkey), redis_arg(&redis));
    let mut v = valkey.conn();
    let mut r = redis.conn();
    let dir = std::env::temp_dir().join(format!("bloomkit-cli-vbloom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for key in ["f1", "f2", "f3"] {
        let hex = std::fs::read_to_string(fixtures.join(format!("{key}.dump.hex"))).unwrap();
        let payload = hex::decode(hex.trim()).unwrap();
        let restored = v.call(&[b"RESTORE".to_vec(), key.as_bytes().to_vec(), b"0".to_vec(), payload]);
        assert!(!restored.is_error(), "{key}: {}", restored.error_text());
        let info: serde_json::Value =
            serde_json::from_slice(&ok(&["info", "--redis", &vurl, key, "--json"], b"")).unwrap();
        assert_eq!(info["kind"], "valkey-bloom filter", "{info}");
        assert!(info["number_of_items_inserted"].as_i64().unwrap() > 0, "{info}");

        let items: Vec<String> = examples["items"][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        let probes: Vec<String> = (0..2000).map(|i| format!("cli-probe-{i}")).collect();
        let answers = |c: &mut bloomkit_testkit::Conn, k: &str| {
            let all = mexists(c, "BF.MEXISTS", k, &[items.clone(), probes.clone()].concat());
            all.as_array().iter().map(|x| x.as_int()).collect::<Vec<_>>()
        };
        let want = answers(&mut v, key);
        assert!(want[..items.len()].iter().all(|&x| x == 1), "{key}: every item");

        // A file, then Redis 7.0.
        let file = dir.join(format!("{key}.bk"));
        let f = file.to_str().unwrap();
        ok(&["dump", "--redis", &vurl, key, "-o", f], b"");
        let out = bloomkit(&["restore", "--redis", &rurl, key, "-i", f], b"");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("valkey-bloom filter"));
        assert_eq!(r.call(&["TYPE", key]).as_bytes(), bloomkit_core::vbloom::TYPE_NAME.as_bytes());
        assert_eq!(answers(&mut r, key), want, "{key}: the same answers on Redis 7.0");
        // Server to server, into another key: the same value.
        let copied = format!("{key}-copy");
        v.call(&["COPY", key, &copied]);
        ok(&["copy", "--from", &vurl, "--to", &rurl, &copied], b"");
        assert_eq!(answers(&mut r, &copied), want);
        let digest = |c: &mut bloomkit_testkit::Conn, k: &str| {
            c.call(&["DEBUG", "DIGEST-VALUE", k]).as_array()[0].as_bytes().to_vec()
        };
        assert_eq!(digest(&mut r, &copied), digest(&mut v, key), "{key}: the same value");
        fails(&["copy", "--from", &vurl, "--to", &rurl, &copied], b"", "already exists");
    }
    // A damaged file changes nothing.
    let file = dir.join("f1.bk");
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(&file, &bytes).unwrap();
    fails(&["restore", "--redis", &rurl, "damaged", "-i", file.to_str().unwrap()], b"", "checksum");
    assert_eq!(r.call(&["EXISTS", "damaged"]).as_int(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Cuckoo filters through the CLI: from RedisBloom 2.8.2 to bloomkit on
/// Valkey 9 by `copy`, back by `dump` and `restore`, described by `info`,
/// answering the same everywhere.
#[test]
fn cuckoo_filters_move_between_redisbloom_and_bloomkit() {
    let rb = TestServer::start(Server::Redis, &[Module::RedisBloom], &[]);
    let bk = TestServer::start(Server::Valkey, &[Module::bloomkit()], &[]);
    let (rurl, burl) = (redis_arg(&rb), redis_arg(&bk));
    let (mut r, mut b) = (rb.conn(), bk.conn());
    r.ok("CF.RESERVE cf 1000 BUCKETSIZE 4 EXPANSION 2");
    let items: Vec<String> = (0..3000).map(|i| format!("cf-item-{i}")).collect();
    let mut insert = vec!["CF.INSERT".to_string(), "cf".to_string(), "ITEMS".to_string()];
    insert.extend(items.iter().cloned());
    r.call(&insert);
    let mut deleted = 0;
    for i in (0..3000).step_by(3) {
        deleted += r.call(&["CF.DEL", "cf", &items[i]]).as_int();
    }
    assert!(deleted > 0);
    let probes: Vec<String> = (0..3000).map(|i| format!("cf-probe-{i}")).collect();
    let all = [items.clone(), probes].concat();
    let answers = |c: &mut bloomkit_testkit::Conn, k: &str| {
        mexists(c, "CF.MEXISTS", k, &all).as_array().iter().map(|x| x.as_int()).collect::<Vec<_>>()
    };
    let want = answers(&mut r, "cf");

    let info: serde_json::Value =
        serde_json::from_slice(&ok(&["info", "--redis", &rurl, "cf", "--json"], b"")).unwrap();
    assert_eq!(info["kind"], "cuckoo filter", "{info}");
    // (The deleted count restarts whenever a delete compacts the filter.)
    assert_eq!(info["number_of_items_inserted"], 3000 - deleted, "{info}");
    ok(&["copy", "--from", &rurl, "--to", &burl, "cf"], b"");
    assert_eq!(b.call(&["TYPE", "cf"]).as_bytes(), bloomkit_core::cf::TYPE_NAME.as_bytes());
    assert_eq!(answers(&mut b, "cf"), want, "bloomkit answers as RedisBloom did");
    b.call(&["CF.ADD", "cf", "added-on-bloomkit"]);

    let dir = std::env::temp_dir().join(format!("bloomkit-cli-cf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cf.bk");
    let f = file.to_str().unwrap();
    ok(&["dump", "--redis", &burl, "cf", "-o", f], b"");
    ok(&["restore", "--redis", &rurl, "cf-back", "-i", f], b"");
    assert_eq!(r.call(&["CF.EXISTS", "cf-back", "added-on-bloomkit"]).as_int(), 1);
    let mut back = answers(&mut r, "cf-back");
    back.truncate(want.len());
    assert_eq!(back, want, "and RedisBloom reads bloomkit's back");
    assert_eq!(&std::fs::read(&file).unwrap()[..8], b"BKCUCKOO", "chunk by chunk");

    // A filter with no items has no chunks: it moves whole.
    b.ok("CF.RESERVE empty 5000");
    ok(&["copy", "--from", &burl, "--to", &rurl, "empty"], b"");
    assert_eq!(r.call(&["CF.INFO", "empty"]).as_array()[1], b.call(&["CF.INFO", "empty"]).as_array()[1]);
    // A damaged file changes nothing.
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&file, &bytes).unwrap();
    fails(&["restore", "--redis", &rurl, "cf-damaged", "-i", f], b"", "checksum");
    assert_eq!(r.call(&["EXISTS", "cf-damaged"]).as_int(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `dedup` without `--capacity`: an expandable filter (XF) that grows from
/// a small start at the error rate, in process, in a state file that is a
/// dump (and the other way round), and on the server; `info`, `dump`,
/// `restore` and `copy --all` handle XF keys byte for byte.
#[test]
fn dedup_without_a_capacity_grows_an_expandable_filter() {
    // 300 000 unique lines: the filter doubles from its first 100 000.
    let (input, first) = stream(300_000, "xf-");
    let out = bloomkit(&["dedup"], &input);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // At 1e-6, 300 000 lines lose one at most by chance; more is a failure.
    assert_dedup(&out.stdout, &first, 3);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("expandable filter") && !stderr.contains("after 0 doublings"), "{stderr}");

    // A state file: remembered between runs, and it is a dump.
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("seen.xf");
    let state_arg = state.to_str().unwrap();
    ok(&["dedup", "--state", state_arg], b"monday\ntuesday\n");
    assert_eq!(&std::fs::read(&state).unwrap()[..8], b"BKXFFILE");
    assert_eq!(ok(&["dedup", "--state", state_arg], b"tuesday\nwednesday\nmonday\n"), b"wednesday\n");
    let a = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let b = TestServer::start(Server::Valkey, &[Module::bloomkit()], &[]);
    let (url_a, url_b) = (redis_arg(&a), redis_arg(&b));
    let out = bloomkit(&["restore", "--redis", &url_a, "days", "-i", state_arg], b"");
    assert!(String::from_utf8_lossy(&out.stderr).contains("(expandable filter)"), "{out:?}");
    let mut c = a.conn();
    assert_eq!(c.cmd("TYPE days").as_bytes(), bloomkit_core::xf::TYPE_NAME.as_bytes());
    assert_eq!(c.cmd("XF.CARD days").as_int(), 3);
    assert_eq!(c.cmd("XF.EXISTS days wednesday").as_int(), 1);
    assert_eq!(
        ok(&["dump", "--redis", &url_a, "days"], b""),
        std::fs::read(&state).unwrap(),
        "the same bytes"
    );

    on_the_server(&mut c, &url_a);

    // dump, restore, copy and copy --all, byte for byte.
    let file = dir.path().join("seen.dump");
    let file_arg = file.to_str().unwrap();
    let out = bloomkit(&["dump", "--redis", &url_a, "seen", "-o", file_arg], b"");
    assert!(String::from_utf8_lossy(&out.stderr).contains("(expandable filter)"), "{out:?}");
    ok(&["restore", "--redis", &url_b, "seen", "-i", file_arg], b"");
    let digest = |c: &mut bloomkit_testkit::Conn, key: &str| c.call(&["DEBUG", "DIGEST-VALUE", key]);
    let mut d = b.conn();
    assert_eq!(digest(&mut c, "seen"), digest(&mut d, "seen"), "restored byte for byte");
    fails(&["restore", "--redis", &url_b, "seen", "-i", file_arg], b"", "already exists");
    // A dumped server filter is a dedup state.
    assert_eq!(ok(&["dedup", "--state", file_arg], b"srv-xf-00000007\xc3\xa9\nfresh\n"), b"fresh\n");
    ok(&["copy", "--from", &url_a, "--to", &url_b, "seen", "--replace"], b"");
    assert_eq!(digest(&mut c, "seen"), digest(&mut d, "seen"), "copied byte for byte");
    let e = TestServer::start(Server::Valkey, &[Module::bloomkit()], &[]);
    let out = bloomkit(&["copy", "--from", &url_a, "--to", &redis_arg(&e), "--all"], b"");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("2 of 2 copied"), "{stderr}");
    // Small keys go whole, a batch at a time; larger ones chunk by chunk.
    assert!(stderr.contains("copied whole (DUMP and RESTORE, TTLs kept)"), "{stderr}");
    let mut f = e.conn();
    for key in ["seen", "days"] {
        assert_eq!(digest(&mut c, key), digest(&mut f, key), "{key}: copied by --all");
    }
    let mut damaged = std::fs::read(&file).unwrap();
    let n = damaged.len();
    damaged[n / 2] ^= 1;
    std::fs::write(&file, &damaged).unwrap();
    // (The server finds the damage in the slots, or the checksum at the end.)
    fails(&["restore", "--redis", &url_b, "seen2", "-i", file_arg], b"", "damaged");
    assert_eq!(d.cmd("EXISTS seen2"), Reply::Int(0), "a damaged file writes nothing");

    // A server without XF.*: say what to do.
    let redisbloom = TestServer::start(Server::Redis, &[Module::RedisBloom], &[]);
    fails(&["dedup", "--redis", &redis_arg(&redisbloom)], b"a\n", "give --capacity");
    assert!(!ok(&["dedup", "--redis", &redis_arg(&redisbloom), "--capacity", "1000"], b"a\n").is_empty());
    // Help and the manual mention them.
    let help = String::from_utf8(ok(&["dump", "--help"], b"")).unwrap();
    assert!(help.contains("expandable filter (XF"), "{help}");
    let page = String::from_utf8(ok(&["man", "dedup"], b"")).unwrap();
    assert!(page.contains("expandable filter"), "{page}");
}

/// [`dedup_without_a_capacity_grows_an_expandable_filter`] on the server:
/// XF.* keys, remembered between runs, that `info` describes.
fn on_the_server(c: &mut bloomkit_testkit::Conn, url_a: &str) {
    // On the server: XF.* keys, remembered between runs.
    let (input, first) = stream(150_000, "srv-xf-");
    let args = ["dedup", "--redis", url_a, "--key", "seen"];
    assert_dedup(&ok(&args, &input), &first, 2);
    assert!(ok(&args, &input).is_empty(), "a second run remembers");
    assert_eq!(c.cmd("TYPE seen").as_bytes(), bloomkit_core::xf::TYPE_NAME.as_bytes());
    let card = c.cmd("XF.CARD seen").as_int() as usize;
    assert!(card <= first.len() && card + 2 >= first.len(), "{card}: one entry per unique line");
    let info: serde_json::Value =
        serde_json::from_slice(&ok(&["info", "--redis", url_a, "seen", "--json"], b"")).unwrap();
    assert_eq!(info["kind"], "expandable filter", "{info}");
    assert_eq!(info["items"], card, "{info}");
    assert!(info["blocks"].as_i64().unwrap() >= 1, "{info}");
    assert!(info["guaranteed_rate"].as_f64().unwrap() <= 1e-6, "{info}");
    let text = String::from_utf8(ok(&["info", "--redis", url_a, "seen"], b"")).unwrap();
    assert!(text.contains("expandable filter") && text.contains("guaranteed rate"), "{text}");
}
