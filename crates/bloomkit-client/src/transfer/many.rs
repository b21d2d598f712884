//! Copies of many small keys: `copy --all` over a server of millions of
//! per-user filters. The key-by-key copy (kind, TTL, chunks through a
//! staging key, rename) costs a dozen round trips a key, about 3 ms: 32
//! hours for 10 million keys. Here a batch of keys takes three round trips
//! whatever its size: `TYPE`, `MEMORY USAGE` and `PTTL` of every key, then
//! `DUMP` of the small module values, then `RESTORE` of each with its TTL
//! left. `DUMP` and `RESTORE` are atomic, so no staging key is needed, and
//! what lands is the value byte for byte.
//!
//! Anything this path does not take goes the key-by-key way, which then
//! says what it says today: a large value (its chunks keep each command
//! short), a key that is not a module value, and every `RESTORE` the
//! destination refuses (a key that exists without `--replace`, a payload of
//! a newer server, a type its modules do not know).

use redis::Value;

use super::{kind_name, Kind, Server};
use crate::error::{Error, Result};

/// Values up to this size (`MEMORY USAGE`) are copied whole, in one
/// `DUMP`/`RESTORE` pair: a few milliseconds of server time at most.
pub const SMALL_VALUE_BYTES: i64 = 64 << 10;

/// Keys per batch: three round trips each.
pub const MANY_BATCH: usize = 256;

/// Copies what it can of `keys` from `from` to `to` (with `REPLACE` when
/// `replace`), a batch at a time; for each key, what it was when copied
/// here, or `None` when it must be copied key by key. `Err` only when a
/// connection fails or the copy is interrupted.
pub fn copy_small_keys(
    from: &mut Server,
    to: &mut Server,
    keys: &[String],
    replace: bool,
) -> Result<Vec<Option<&'static str>>> {
    let mut out = Vec::with_capacity(keys.len());
    for batch in keys.chunks(MANY_BATCH) {
        out.extend(copy_batch(from, to, batch, replace)?);
    }
    Ok(out)
}

/// One batch: what each key was, if copied.
fn copy_batch(
    from: &mut Server,
    to: &mut Server,
    keys: &[String],
    replace: bool,
) -> Result<Vec<Option<&'static str>>> {
    let mut looks = redis::pipe();
    for key in keys {
        looks.cmd("TYPE").arg(key).cmd("MEMORY").arg("USAGE").arg(key).cmd("PTTL").arg(key);
    }
    let looks = pipeline(from, &looks, keys.len() * 3)?;
    // (index, kind, ttl to restore with): the small module values.
    let small: Vec<(usize, Kind, i64)> = looks
        .chunks(3)
        .enumerate()
        .filter_map(|(i, r)| {
            let kind = match &r[0] {
                Value::SimpleString(t) => Kind::from_type_name(t),
                _ => return None,
            };
            let (Value::Int(bytes), Value::Int(ttl)) = (&r[1], &r[2]) else { return None };
            let ttl = if to.keep_ttls { (*ttl).max(0) } else { 0 };
            (kind.is_module_value() && *bytes <= SMALL_VALUE_BYTES && r[2] != Value::Int(-2))
                .then_some((i, kind, ttl))
        })
        .collect();
    let mut answers = vec![None; keys.len()];
    if small.is_empty() {
        return Ok(answers);
    }
    let mut dumps = redis::pipe();
    for (i, ..) in &small {
        dumps.cmd("DUMP").arg(&keys[*i]);
    }
    let payloads = pipeline(from, &dumps, small.len())?;
    let mut restores = redis::pipe();
    let mut sent = Vec::with_capacity(small.len());
    for ((i, kind, ttl), payload) in small.into_iter().zip(payloads) {
        let Value::BulkString(payload) = payload else { continue };
        restores.cmd("RESTORE").arg(&keys[i]).arg(ttl).arg(payload);
        if replace {
            restores.arg("REPLACE");
        }
        sent.push((i, kind));
    }
    let restored = pipeline(to, &restores, sent.len())?;
    for ((i, kind), reply) in sent.into_iter().zip(restored) {
        if matches!(reply, Value::Okay) || reply == Value::SimpleString("OK".into()) {
            answers[i] = Some(kind_name(&kind));
        }
    }
    Ok(answers)
}

/// A pipeline's `n` replies, error replies left in place.
fn pipeline(server: &mut Server, pipe: &redis::Pipeline, n: usize) -> Result<Vec<Value>> {
    if server.interrupted() {
        return Err(Error::Interrupted);
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut packed = Vec::new();
    for c in pipe.cmd_iter() {
        c.write_packed_command(&mut packed);
    }
    redis::ConnectionLike::req_packed_commands(&mut server.con, &packed, 0, n)
        .map_err(|e| Error::from_redis(e, "a batch of keys"))
}
