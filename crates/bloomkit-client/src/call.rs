//! One filter call as data, with no I/O: the commands of its next round
//! trip and what to make of their replies, until it has its answer. The
//! blocking and the async filter run the same calls, each with a loop of a
//! few lines, so every operation is written once (`operations.rs`) and
//! neither front can drift from the other.

use redis::{Cmd, Value};

use crate::error::Result;

/// What a round trip's replies are turned into: the rest of the call.
/// `Send`, so that an async filter's futures stay `Send`.
type Then<'a, T> = Box<dyn FnOnce(Result<Vec<Value>>) -> Call<'a, T> + Send + 'a>;

/// A call that either has its answer or needs one more round trip. The
/// replies are handed over with the transport's error, if any, so that a
/// call can act on a failure (create a missing window, count a missing
/// shard as empty) as on a reply.
pub(crate) enum Call<'a, T> {
    Done(Result<T>),
    Send { cmds: Vec<Cmd>, then: Then<'a, T> },
}

impl<'a, T: 'a> Call<'a, T> {
    /// One round trip whose replies `read` makes into the answer.
    pub fn round(cmds: Vec<Cmd>, read: impl FnOnce(Result<Vec<Value>>) -> Result<T> + Send + 'a) -> Self {
        Call::Send { cmds, then: Box::new(move |replies| Call::Done(read(replies))) }
    }

    /// This call, then `next` with its answer (or its error).
    pub fn then<U: 'a>(self, next: impl FnOnce(Result<T>) -> Call<'a, U> + Send + 'a) -> Call<'a, U> {
        match self {
            Call::Done(answer) => next(answer),
            Call::Send { cmds, then } => {
                Call::Send { cmds, then: Box::new(move |replies| then(replies).then(next)) }
            }
        }
    }

    /// This call, its answer (or error) then made into another by `f`.
    pub fn map<U: 'a>(self, f: impl FnOnce(Result<T>) -> Result<U> + Send + 'a) -> Call<'a, U> {
        self.then(move |answer| Call::Done(f(answer)))
    }

    /// Each call in turn, one round trip after another, with every answer:
    /// one failing does not stop the others.
    pub fn each(calls: Vec<Call<'a, T>>) -> Call<'a, Vec<Result<T>>>
    where
        T: Send,
    {
        fn from<'a, T: Send + 'a>(
            mut rest: std::vec::IntoIter<Call<'a, T>>,
            mut answers: Vec<Result<T>>,
        ) -> Call<'a, Vec<Result<T>>> {
            match rest.next() {
                None => Call::Done(Ok(answers)),
                Some(call) => call.then(move |answer| {
                    answers.push(answer);
                    from(rest, answers)
                }),
            }
        }
        let n = calls.len();
        from(calls.into_iter(), Vec::with_capacity(n))
    }
}
