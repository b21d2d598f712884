//! The CLI's side of servers: which one a command talks to, and a
//! progress bar the client library's transfers report to. Connections,
//! transfers and error classification are the library's
//! (`bloomkit_client::transfer`), so library users get the same.

use bloomkit_client::transfer::Progress;
use indicatif::ProgressBar;

/// A progress bar the library's transfers report to.
pub struct Bar<'a>(pub &'a ProgressBar);

impl Progress for Bar<'_> {
    fn set_length(&self, bytes: u64) {
        self.0.set_length(bytes);
    }

    fn inc(&self, bytes: u64) {
        self.0.inc(bytes);
    }
}

/// Where a command's server comes from, for `--help` and the manual.
pub const SERVER_HELP: &str = "\
Server: every command that talks to a server takes it from --redis (copy: --to), \
else from $BLOOMKIT_URL, else from $REDIS_URL. An address is a URL \
(redis://host:port[/db], rediss://..., unix:///path) or host:port, host (port 6379) \
or :port (127.0.0.1). A password goes in the URL (redis://user:password@host:port, \
redis://:password@host:port for the default user) or, as redis-cli takes it, in \
$REDISCLI_AUTH (used when the URL has none); no message prints it.";

/// The environment variables a server address is taken from, in order,
/// when no option names one.
pub const SERVER_VARIABLES: [&str; 2] = [bloomkit_client::URL_VARIABLE, "REDIS_URL"];

/// The server to use: `given` (the option), else the first of
/// [`SERVER_VARIABLES`] that is set and not empty; normalised to a URL
/// (`host:port` accepted). With none, a usage error naming all three.
pub fn resolve(given: Option<&str>, option: &str) -> anyhow::Result<String> {
    let (address, source) = match given.filter(|g| !g.is_empty()) {
        Some(g) => (g.to_string(), option.to_string()),
        None => SERVER_VARIABLES
            .iter()
            .find_map(|v| {
                std::env::var(v).ok().filter(|s| !s.trim().is_empty()).map(|s| (s, format!("${v}")))
            })
            .ok_or_else(|| {
                usage!(
                    "no server given: pass {option} URL (redis://host:port or host:port), or set \
                     $BLOOMKIT_URL or $REDIS_URL (scripts/run-server.sh prints the line to export)"
                )
            })?,
    };
    bloomkit_client::server_url(&address).map_err(|e| usage!("{source}: {e}"))
}
