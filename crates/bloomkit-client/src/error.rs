//! Typed errors that say what went wrong and what to do about it.

use std::fmt;

use bloomkit_core::bf::file::FileError;

/// What the server or the connection said: a message, and the redis
/// crate's own error when there was one, kept whole so that callers can
/// ask it what redis-rs offers ([`Failure::kind`], [`Failure::code`],
/// `is_timeout()`, ...) rather than read the message; it is also the
/// [`Error`]'s `source()`.
#[derive(Debug, Clone)]
pub struct Failure {
    message: String,
    redis: Option<redis::RedisError>,
}

impl Failure {
    /// A failure with no redis error behind it (a reply that says
    /// something went wrong, such as a full cuckoo filter's -1).
    pub fn new(message: impl Into<String>) -> Failure {
        Failure { message: message.into(), redis: None }
    }

    /// A failure the redis crate reported, with `message` as its text.
    pub fn from_redis(message: impl Into<String>, e: redis::RedisError) -> Failure {
        Failure { message: message.into(), redis: Some(e) }
    }

    /// The text: the server's reply (code and detail), or the connection's error.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The redis crate's error, if it reported this.
    pub fn redis_error(&self) -> Option<&redis::RedisError> {
        self.redis.as_ref()
    }

    /// The redis crate's kind of error (`Io`, `Server(ResponseError)`,
    /// `Extension` for codes it does not know, ...).
    pub fn kind(&self) -> Option<redis::ErrorKind> {
        self.redis.as_ref().map(redis::RedisError::kind)
    }

    /// The server's error code (`ERR`, `WRONGTYPE`, ...), for an error
    /// reply, a pipeline's first included.
    pub fn code(&self) -> Option<String> {
        let e = self.redis.as_ref()?;
        e.code().map(String::from).or_else(|| {
            e.clone().into_server_errors().and_then(|all| all.first().map(|(_, s)| s.code().to_string()))
        })
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Everything a filter operation can fail with. The variants that come
/// from the server or the connection hold a [`Failure`], which keeps the
/// redis crate's error (also `source()`); [`Error::redis_kind`] gives its kind.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The server could not be reached or dropped the connection.
    Connection(Failure),
    /// The server wants a password (`NOAUTH`) or refused the one given
    /// (`WRONGPASS`, a failed `AUTH`): the message says where to give it.
    Auth(Failure),
    /// The server did not answer in time.
    Timeout(Failure),
    /// The server has no `BF.*` commands: no Bloom module is loaded.
    ModuleMissing(Failure),
    /// A key of the filter holds another type of value.
    WrongType(String),
    /// `reserve` found the filter already there.
    AlreadyExists(String),
    /// The filter does not exist yet.
    NotFound(String),
    /// A Redisson filter's config hash holds another size or hash count
    /// than this filter's, or is missing while the bitmap holds bits: its
    /// bits mean something else (the server's reply, which says which).
    ConfigMismatch(String),
    /// The options cannot describe a filter.
    InvalidOptions(String),
    /// A server address that is not a Redis URL.
    InvalidUrl(String),
    /// The backend cannot do this (for example an expiry on a local filter).
    Unsupported(&'static str),
    /// Any other error reply from the server, verbatim.
    Server(Failure),
    /// A reply of a shape the backend did not ask for.
    Protocol(String),
    /// A local filter file could not be read or written.
    File(FileError),
    /// The in-process filter refused the operation.
    Filter(bloomkit_core::bf::BfError),
    /// The in-process expandable filter refused the operation (full at
    /// its max capacity, or a file it cannot load).
    Expandable(bloomkit_core::xf::XfError),
    /// A dump, restore or copy that could not complete safely (nothing was
    /// changed), with what to do.
    Transfer(String),
    /// A transfer stopped because it was asked to
    /// ([`crate::transfer::Server::interrupt_on`]); what it had staged on
    /// the destination was removed, and the destination's keys are as they
    /// were.
    Interrupted,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connection(e) => {
                write!(f, "cannot talk to the server ({e}); check its address and that it is running")
            }
            Error::Auth(e) => {
                let lead = match e.code().as_deref() {
                    Some("NOAUTH") => "the server requires a password",
                    _ => "the server refused the user name or password",
                };
                // (The hint is written with no URL in it: messages hide
                // every URL's password, an example's too.)
                write!(
                    f,
                    "{lead} ({e}); give it in the URL, as user:password@ before the host (:password@ for \
                     the default user), or in ${}, as redis-cli takes it",
                    crate::AUTH_VARIABLE
                )
            }
            Error::Timeout(e) => write!(
                f,
                "the server did not answer in time ({e}); it may be overloaded, or lower the batch size"
            ),
            Error::ModuleMissing(e) => write!(
                f,
                "the server has no Bloom filter commands ({e}); load bloomkit (loadmodule libbloomkit.so) \
                 or use the bitmap backend, which needs no module"
            ),
            Error::WrongType(key) => write!(f, "key {key:?} holds a value that is not this kind of filter"),
            Error::AlreadyExists(key) => {
                write!(f, "filter {key:?} already exists; delete it or use it as is")
            }
            Error::NotFound(key) => write!(f, "filter {key:?} does not exist"),
            Error::ConfigMismatch(e) => {
                write!(f, "{}; open it with the parameters it was made with", e.trim_start_matches("ERR "))
            }
            Error::InvalidOptions(e) => write!(f, "invalid filter options: {e}"),
            Error::InvalidUrl(url) => write!(
                f,
                "'{url}' is not a server address; write it as redis://host:port[/db] (rediss:// \
                 for TLS, with a password as user:password@ before the host, unix:///path/to/socket), \
                 or as host:port, host (port 6379) or :port (on 127.0.0.1)"
            ),
            Error::Unsupported(e) => write!(f, "not supported: {e}"),
            Error::Server(e) => write!(f, "the server refused: {e}"),
            Error::Protocol(e) => write!(f, "unexpected reply from the server: {e}"),
            Error::File(e) => write!(f, "{e}"),
            Error::Filter(e) => write!(f, "{}", e.to_string().trim_start_matches("ERR ")),
            Error::Expandable(e) => write!(f, "{}", e.to_string().trim_start_matches("ERR ")),
            Error::Transfer(e) => f.write_str(e),
            Error::Interrupted => f.write_str("interrupted; nothing on the destination was changed"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Connection(f)
            | Error::Auth(f)
            | Error::Timeout(f)
            | Error::ModuleMissing(f)
            | Error::Server(f) => f.redis.as_ref().map(|e| e as &(dyn std::error::Error + 'static)),
            // (File, Filter and Expandable errors display the inner error
            // itself, so it is not their source as well.)
            _ => None,
        }
    }
}

impl From<FileError> for Error {
    fn from(e: FileError) -> Error {
        Error::File(e)
    }
}

impl From<bloomkit_core::bf::BfError> for Error {
    fn from(e: bloomkit_core::bf::BfError) -> Error {
        Error::Filter(e)
    }
}

impl From<bloomkit_core::xf::XfError> for Error {
    fn from(e: bloomkit_core::xf::XfError) -> Error {
        Error::Expandable(e)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::File(FileError::Io(e))
    }
}

/// The detail of the error a connection gives for a command it did not
/// send because its transfer was interrupted ([`crate::transfer::Server`]).
pub(crate) const INTERRUPTED: &str = "interrupted before this command was sent";

impl Error {
    /// The redis crate's kind of the error behind this one, if it came
    /// from the server or the connection.
    pub fn redis_kind(&self) -> Option<redis::ErrorKind> {
        match self {
            Error::Connection(f)
            | Error::Auth(f)
            | Error::Timeout(f)
            | Error::ModuleMissing(f)
            | Error::Server(f) => f.kind(),
            _ => None,
        }
    }

    /// Classifies an error from the redis crate by what it says it is
    /// (`is_timeout`, `is_io_error`, ...) and, for an error reply, by the
    /// reply's code and detail, taken from the reply itself (the first of
    /// a pipeline's), never from the wrapper's text; `key` names the filter.
    pub(crate) fn from_redis(e: redis::RedisError, key: &str) -> Error {
        if e.kind() == redis::ErrorKind::Client && e.detail() == Some(INTERRUPTED) {
            return Error::Interrupted;
        }
        if e.is_timeout() {
            return Error::Timeout(Failure::from_redis(e.to_string(), e));
        }
        if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_cluster_error() {
            return Error::Connection(Failure::from_redis(e.to_string(), e));
        }
        // A failed AUTH at connection (the password given was refused).
        if e.kind() == redis::ErrorKind::AuthenticationFailed {
            return Error::Auth(Failure::from_redis(e.to_string(), e));
        }
        let reply = e.clone().into_server_errors().and_then(|all| {
            all.first().map(|(_, s)| (s.code().to_string(), s.details().unwrap_or_default().to_string()))
        });
        let Some((code, detail)) = reply else {
            return Error::Server(Failure::from_redis(e.to_string(), e));
        };
        let text = if detail.is_empty() { code.clone() } else { format!("{code} {detail}") };
        // NOAUTH (a password is needed) or WRONGPASS (the one given was
        // refused): the message says where a password goes.
        // (The redis crate's own text, which callers that print an
        // error's sources find already said.)
        if matches!(code.as_str(), "NOAUTH" | "WRONGPASS") {
            return Error::Auth(Failure::from_redis(e.to_string(), e));
        }
        // (The whole reply: RedisBloom answers "-Not found", whose "code"
        // is "Not".)
        let lower = text.to_ascii_lowercase();
        // The server's own reply texts (RedisBloom's and bloomkit's) are
        // the only place these conditions are told.
        // (A script's error, on servers before Redis 7, carries the
        // command's code inside an ERR detail.)
        if code == "WRONGTYPE" || lower.contains("wrongtype") {
            Error::WrongType(key.to_string())
        } else if lower.contains("config has been changed")
            || lower.contains("bloom filter is not initialized")
        {
            let at = lower.find("bloom filter").unwrap_or(0);
            Error::ConfigMismatch(text[at..].to_string())
        } else if (lower.contains("unknown command")
            && (lower.contains("bf.") || lower.contains("cf.") || lower.contains("xf.")))
            // An XF.* call from the expandable filter's script, on a server
            // without bloomkit (no other script of the client's calls a
            // module): "Unknown Redis (or Valkey) command called from script".
            || (lower.contains("unknown") && lower.contains("command called from script"))
        {
            Error::ModuleMissing(Failure::from_redis(text, e))
        } else if lower.contains("item exists") || lower.contains("already exists") {
            Error::AlreadyExists(key.to_string())
        } else if lower.contains("not found") {
            Error::NotFound(key.to_string())
        } else {
            Error::Server(Failure::from_redis(text, e))
        }
    }
}
