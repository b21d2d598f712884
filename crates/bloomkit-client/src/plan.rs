//! The commands of one `add_many`, `contains_many` or `remove_many` and
//! how their replies become one answer per item, with no I/O; and the
//! readers of replies every command builder shares. A call's items are
//! split into batches, shards and keys, so each reply says which items it
//! answers for.

use redis::{Cmd, Value};

use crate::call::Call;
use crate::error::{Error, Result};

/// How one command's reply feeds the per-item answers.
pub(crate) enum Decode {
    /// Only errors matter.
    Ignore,
    /// One integer per item: the items' positions in the caller's slice.
    PerItem(Vec<u32>),
    /// One integer answering for one item (`CF.DEL`).
    One(u32),
    /// A (possibly nested) array of bits: `Bits[j]` names the item of bit j.
    /// A 0 bit flips that item's answer away from the plan's `init`.
    Bits(Vec<u32>),
}

pub(crate) struct Step {
    pub cmd: Cmd,
    pub decode: Decode,
}

impl Step {
    pub fn ignore(cmd: Cmd) -> Step {
        Step { cmd, decode: Decode::Ignore }
    }
}

/// The commands of one `add_many` or `contains_many` call and the answers'
/// starting value: `false` for adds (new once any bit was 0), `true` for
/// lookups (present until a bit is 0).
pub(crate) struct Plan {
    pub steps: Vec<Step>,
    pub items: usize,
    pub init: bool,
    /// A second filter's plan for the same items, sent in the same round
    /// trip, and how its answers join these ([`Plan::join`]).
    also: Option<Box<Also>>,
}

/// How the answers of a filter being moved from ([`crate::Layout::moving`])
/// join those of the filter it moves to.
#[derive(Clone, Copy)]
pub(crate) enum Join {
    /// An add is new only if the new filter took it and the old one does
    /// not hold it.
    AddedAndNotIn,
    /// Present (or removed) if either answers so.
    Either,
}

struct Also {
    plan: Plan,
    join: Join,
    /// The old filter's name, for its errors.
    key: String,
}

impl Plan {
    pub fn new(items: usize, init: bool) -> Plan {
        Plan { steps: Vec::new(), items, init, also: None }
    }

    /// This plan with `other`'s commands (of the filter `key`, for the same
    /// items) sent after its own in one round trip, each item's answers
    /// joined as `join` says. A missing `other` answers `false` for every
    /// item (a key that expired holds nothing), and so does a missing first
    /// filter in a lookup.
    pub fn join(mut self, other: Plan, join: Join, key: &str) -> Plan {
        debug_assert!(self.also.is_none() && other.also.is_none() && other.items == self.items);
        self.also = Some(Box::new(Also { plan: other, join, key: key.to_string() }));
        self
    }

    /// The call that sends the plan's commands in one round trip and makes
    /// their replies the per-item answers; `key` names the filter in errors.
    pub fn into_call(self, key: &str) -> Call<'_, Vec<bool>> {
        let Plan { steps, items, init, also } = self;
        let (mut cmds, decodes) = unzip(steps);
        let second = also.map(|also| {
            let (more, decodes) = unzip(also.plan.steps);
            let n = more.len();
            cmds.extend(more);
            (decodes, also.plan.init, also.join, also.key, n)
        });
        Call::round(cmds, move |replies| {
            let mut replies = replies?;
            let Some((decodes2, init2, join, key2, n)) = second else {
                return answers(decodes, items, init, replies, key);
            };
            let rest = replies.split_off(replies.len().saturating_sub(n));
            // Either filter may be missing: the old one once it expired, the
            // new one before its first write (a lookup). An add that finds
            // the new filter missing says so, since the caller creates it
            // then and adds again (a sliding window).
            let or_none = |answers: Result<Vec<bool>>| match answers {
                Err(Error::NotFound(_)) => Ok(vec![false; items]),
                other => other,
            };
            let first = answers(decodes, items, init, replies, key);
            let first = if matches!(join, Join::Either) { or_none(first)? } else { first? };
            let second = or_none(answers(decodes2, items, init2, rest, &key2))?;
            let joined = first.into_iter().zip(second).map(|(a, b)| match join {
                Join::AddedAndNotIn => a && !b,
                Join::Either => a || b,
            });
            Ok(joined.collect())
        })
    }
}

fn unzip(steps: Vec<Step>) -> (Vec<Cmd>, Vec<Decode>) {
    steps.into_iter().map(|s| (s.cmd, s.decode)).unzip()
}

/// Turns the replies (one per command, in order) into one answer per item.
fn answers(
    decodes: Vec<Decode>,
    items: usize,
    init: bool,
    replies: Vec<Value>,
    key: &str,
) -> Result<Vec<bool>> {
    if replies.len() != decodes.len() {
        return Err(Error::Protocol(format!("{} replies to {} commands", replies.len(), decodes.len())));
    }
    let mut answers = vec![init; items];
    for (decode, reply) in decodes.into_iter().zip(replies) {
        match decode {
            Decode::Ignore => check(&reply, key)?,
            Decode::PerItem(owners) => {
                let values = array(reply, key)?;
                // BF.MADD/BF.INSERT end their array at the first item
                // that fails (a full non-scaling filter).
                if let Some(e) = values.iter().find(|v| matches!(v, Value::ServerError(_))) {
                    return Err(reply_error(e.clone(), key));
                }
                if values.len() != owners.len() {
                    return Err(Error::Protocol(format!(
                        "{} answers for {} items",
                        values.len(),
                        owners.len()
                    )));
                }
                for (owner, v) in owners.into_iter().zip(values) {
                    answers[owner as usize] = match integer(&v, key)? {
                        -1 => {
                            return Err(Error::Server(crate::error::Failure::new(format!(
                                "cuckoo filter {key:?} is full and cannot grow (EXPANSION 0, or its \
                                     last sub-filter at the size limit)"
                            ))))
                        }
                        n => n == 1,
                    };
                }
            }
            Decode::One(owner) => answers[owner as usize] = integer(&reply, key)? == 1,
            Decode::Bits(owners) => {
                let mut bits = Vec::with_capacity(owners.len());
                flatten(reply, key, &mut bits)?;
                if bits.len() != owners.len() {
                    return Err(Error::Protocol(format!(
                        "{} bits for {} positions",
                        bits.len(),
                        owners.len()
                    )));
                }
                for (owner, bit) in owners.into_iter().zip(bits) {
                    if bit == 0 {
                        answers[owner as usize] = !init;
                    }
                }
            }
        }
    }
    Ok(answers)
}

/// An error reply as an `Error`; anything else is fine.
pub(crate) fn check(v: &Value, key: &str) -> Result<()> {
    match v {
        Value::ServerError(_) => Err(reply_error(v.clone(), key)),
        _ => Ok(()),
    }
}

/// The error an error reply stands for (`v` must be `Value::ServerError`).
fn reply_error(v: Value, key: &str) -> Error {
    match v.extract_error() {
        Err(e) => Error::from_redis(e, key),
        Ok(_) => Error::Protocol("an error reply that is not an error".into()),
    }
}

pub(crate) fn array(v: Value, key: &str) -> Result<Vec<Value>> {
    match v {
        Value::Array(a) | Value::Set(a) => Ok(a),
        v @ Value::ServerError(_) => Err(reply_error(v, key)),
        other => Err(Error::Protocol(format!("expected an array, got {other:?}"))),
    }
}

pub(crate) fn integer(v: &Value, key: &str) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::Boolean(b) => Ok(i64::from(*b)),
        Value::ServerError(_) => Err(reply_error(v.clone(), key)),
        other => Err(Error::Protocol(format!("expected an integer, got {other:?}"))),
    }
}

fn flatten(v: Value, key: &str, out: &mut Vec<i64>) -> Result<()> {
    match v {
        Value::Array(a) => a.into_iter().try_for_each(|v| flatten(v, key, out)),
        v => {
            out.push(integer(&v, key)?);
            Ok(())
        }
    }
}

/// The numeric fields of an `*.INFO` reply (`BF.INFO`, `CF.INFO`,
/// `APBF.INFO`, `XF.INFO`), by label: a flat array in RESP2, a map in
/// RESP3. Integers, and apart the doubles (a bulk string in RESP2).
pub(crate) struct InfoFields(Vec<(String, u64)>, Vec<(String, f64)>);

impl InfoFields {
    pub fn read(reply: Value, key: &str) -> Result<InfoFields> {
        let pairs: Vec<(Value, Value)> = match reply {
            Value::Map(m) => m,
            other => {
                let flat = array(other, key)?;
                let mut it = flat.into_iter();
                let mut pairs = Vec::new();
                while let (Some(l), Some(v)) = (it.next(), it.next()) {
                    pairs.push((l, v));
                }
                pairs
            }
        };
        let (mut ints, mut doubles) = (Vec::new(), Vec::new());
        for (l, v) in pairs {
            let label = match l {
                Value::SimpleString(s) => s,
                Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                _ => continue,
            };
            match v {
                Value::Int(i) => ints.extend(u64::try_from(i).ok().map(|i| (label, i))),
                Value::Double(d) => doubles.push((label, d)),
                Value::BulkString(b) => doubles
                    .extend(std::str::from_utf8(&b).ok().and_then(|t| t.parse().ok()).map(|d| (label, d))),
                _ => {}
            }
        }
        Ok(InfoFields(ints, doubles))
    }

    /// A field whose value is a double (`XF.INFO`'s rates).
    pub fn get_f64(&self, label: &str) -> Option<f64> {
        self.1.iter().find(|(l, _)| l.eq_ignore_ascii_case(label)).map(|f| f.1)
    }

    /// The field's value; labels differ in case between servers.
    pub fn get(&self, label: &str) -> Option<u64> {
        self.0.iter().find(|(l, _)| l.eq_ignore_ascii_case(label)).map(|f| f.1)
    }

    /// The [`Info`] of a one-key filter whose reply has `BF.INFO`'s labels
    /// (`BF.INFO` and `APBF.INFO` both do), shown as `backend`.
    pub fn bloom_info(&self, backend: &str, name: &str) -> crate::options::Info {
        crate::options::Info {
            backend: backend.into(),
            keys: vec![name.to_string()],
            capacity: self.get("Capacity").unwrap_or(0),
            bytes: self.get("Size").unwrap_or(0),
            items: self.get("Number of items inserted"),
            filters: self.get("Number of filters"),
            ..crate::options::Info::default()
        }
    }
}
