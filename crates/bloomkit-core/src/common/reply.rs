//! How an error becomes a reply: every family's error type says, in its own
//! `errors.rs`, what its client reads; the module sends it without knowing
//! which family it came from.

use std::borrow::Cow;

/// What a command answers when it fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The server's own wrong-arity error, which quotes the command's name.
    WrongArity,
    /// An error reply with this text, exactly as sent.
    Error(Cow<'static, str>),
}

/// Any family's error becomes its reply with `?`.
impl<E: ReplyError> From<E> for Reply {
    fn from(e: E) -> Reply {
        e.reply()
    }
}

/// An error that a command can answer with.
pub trait ReplyError {
    fn reply(&self) -> Reply;

    /// The error's text (for [`Reply::WrongArity`], a generic one).
    fn message(&self) -> Cow<'static, str> {
        match self.reply() {
            Reply::Error(text) => text,
            Reply::WrongArity => Cow::Borrowed("ERR wrong number of arguments"),
        }
    }
}

/// A key holds a value of another type: the server's standard text, which
/// every family answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrongType;

impl ReplyError for WrongType {
    fn reply(&self) -> Reply {
        Reply::Error(Cow::Borrowed("WRONGTYPE Operation against a key holding the wrong kind of value"))
    }
}

/// `Display` and `std::error::Error` for a family's error, from its reply text.
macro_rules! display_as_reply {
    ($t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&$crate::common::reply::ReplyError::message(self))
            }
        }
        impl std::error::Error for $t {}
    };
}
pub(crate) use display_as_reply;
