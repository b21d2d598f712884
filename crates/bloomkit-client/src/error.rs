//! Typed errors that say what went wrong and what to do about it.

use std::fmt;

use bloomkit_core::bf::file::FileError;

/// Everything a filter operation can fail with.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The server could not be reached or dropped the connection.
    Connection(String),
    /// The server did not answer in time.
    Timeout(String),
    /// The server has no `BF.*` commands: no Bloom module is loaded.
    ModuleMissing(String),
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
    Server(String),
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
                 for TLS, redis://user:password@host:port with a password, unix:///path/to/socket), \
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

impl std::error::Error for Error {}

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

impl Error {
    /// Classifies an error from the redis crate; `key` names the filter.
    pub(crate) fn from_redis(e: redis::RedisError, key: &str) -> Error {
        if e.is_timeout() {
            return Error::Timeout(e.to_string());
        }
        if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_cluster_error() {
            return Error::Connection(e.to_string());
        }
        let text = match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            _ => e.to_string(),
        };
        Error::from_reply(&text, key)
    }

    /// Classifies an error reply's text.
    pub(crate) fn from_reply(text: &str, key: &str) -> Error {
        let lower = text.to_ascii_lowercase();
        // redis 1.x wraps a pipeline's error replies ("Pipeline failure:
        // [(Index 0, error: "WRONGTYPE": ...)]"), so the code is looked for
        // anywhere in the text, not only at its start. bloomkit's own
        // messages, which may quote key names, are matched first.
        if lower.contains("config has been changed") || lower.contains("bloom filter is not initialized") {
            let at = lower.find("bloom filter").unwrap_or(0);
            Error::ConfigMismatch(text[at..].trim_end_matches(['"', ')', ']']).to_string())
        } else if lower.contains("wrongtype") {
            Error::WrongType(key.to_string())
        } else if (lower.contains("unknown command")
            && (lower.contains("bf.") || lower.contains("cf.") || lower.contains("xf.")))
            // An XF.* call from the expandable filter's script, on a server
            // without bloomkit (no other script of the client's calls a
            // module).
            || lower.contains("unknown redis command called from script")
        {
            Error::ModuleMissing(text.to_string())
        } else if lower.contains("item exists") || lower.contains("already exists") {
            Error::AlreadyExists(key.to_string())
        } else if lower.contains("not found") {
            Error::NotFound(key.to_string())
        } else {
            Error::Server(text.to_string())
        }
    }
}
