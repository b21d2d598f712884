//! The bitmap backend's commands: a Bloom filter in plain Redis strings,
//! for servers that cannot load a module, in the layout of the system it
//! shares bits with (Guava, Redisson, PHP). Redis has no command that sets
//! and reads many bits of several keys at once, so split bitmaps and
//! Redisson's config check go through Lua scripts, one per batch, which
//! keeps each batch atomic.

use bloomkit_core::bitmap::{java_double_to_string, redisson_config_key, BitmapLayout, BitmapSpec};
use redis::{cmd, Cmd, Value};

use crate::error::{Error, Result};
use crate::options::{Info, Options};
use crate::plan::{integer, Decode, Plan, Step};

/// A bitmap filter's shape and where it lives.
#[derive(Clone, Debug)]
pub(super) struct Bitmap {
    pub spec: BitmapSpec,
    /// The keys holding the bits: the name itself, or its parts when the
    /// bitmap is split past [`Options::max_key_bits`].
    pub keys: Vec<String>,
    /// Redisson's parameter hash, for the `Redisson` layouts.
    pub config: Option<String>,
}

/// Sets the bits of a bitmap split over several keys for several items and
/// returns the old bits, per key in KEYS order (one key needs no script). ARGV: TTL in ms (0: none), then for each key its count
/// of offsets and the offsets. BITFIELD applies its operations in order, so
/// an item repeated in the batch finds its bits already set. 1000 operations
/// per call keep `unpack` under Lua's stack limit; the value is the string
/// '1' because converting a Lua number to an argument costs more than the
/// bit operation itself.
const ADD_SCRIPT: &str = r#"
local ttl = tonumber(ARGV[1])
local a = 2
local olds = {}
for i = 1, #KEYS do
  local count = tonumber(ARGV[a])
  a = a + 1
  local res = {}
  local s = 0
  while s < count do
    local e = math.min(count, s + 1000)
    local args = {KEYS[i]}
    for j = s, e - 1 do
      local n = #args
      args[n + 1] = 'SET'; args[n + 2] = 'u1'; args[n + 3] = ARGV[a + j]; args[n + 4] = '1'
    end
    local r = redis.call('BITFIELD', unpack(args))
    for _, v in ipairs(r) do res[#res + 1] = v end
    s = e
  end
  a = a + count
  olds[i] = res
  if ttl > 0 and count > 0 and redis.call('PTTL', KEYS[i]) == -1 then
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
return olds
"#;

/// Redisson's filter: checks (or, for a new filter, writes as Redisson's
/// `tryInit` does) the config hash, then sets or reads the bits, returning
/// the old bits as `BITFIELD` does. Redisson checks size and hash count on
/// every call: bits set under other parameters mean something else, and
/// bits without a config ("not initialized" in Redisson) are refused too.
/// The bitmap expires when its config does.
/// KEYS: config, bitmap. ARGV: 'add' or 'get', size, hashIterations,
/// expectedInsertions, falseProbability (Java's text), TTL in ms (0:
/// none), then the offsets.
const REDISSON_SCRIPT: &str = r#"
local size = redis.call('HGET', KEYS[1], 'size')
local k = redis.call('HGET', KEYS[1], 'hashIterations')
local add = ARGV[1] == 'add'
local ttl = tonumber(ARGV[6])
local n = #ARGV - 6
if not size and not k then
  if redis.call('EXISTS', KEYS[2]) == 1 then
    return redis.error_reply('ERR Bloom filter is not initialized: ' .. KEYS[2] ..
      ' holds bits but its config hash ' .. KEYS[1] .. ' is missing (expired or deleted)')
  end
  if not add then
    local zeros = {}
    for i = 1, n do zeros[i] = 0 end
    return zeros
  end
  redis.call('HSET', KEYS[1], 'size', ARGV[2], 'hashIterations', ARGV[3],
    'expectedInsertions', ARGV[4], 'falseProbability', ARGV[5])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
elseif size ~= ARGV[2] or k ~= ARGV[3] then
  return redis.error_reply('ERR Bloom filter config has been changed: ' .. KEYS[1] .. ' holds size ' ..
    tostring(size) .. ' and hashIterations ' .. tostring(k) .. ', this filter has size ' .. ARGV[2] ..
    ' and hashIterations ' .. ARGV[3])
end
local res = {}
local s = 0
while s < n do
  local e = math.min(n, s + 1000)
  local args = {KEYS[2]}
  for j = s, e - 1 do
    local m = #args
    if add then
      args[m + 1] = 'SET'; args[m + 2] = 'u1'; args[m + 3] = ARGV[7 + j]; args[m + 4] = '1'
    else
      args[m + 1] = 'GET'; args[m + 2] = 'u1'; args[m + 3] = ARGV[7 + j]
    end
  end
  local r = redis.call(add and 'BITFIELD' or 'BITFIELD_RO', unpack(args))
  for _, v in ipairs(r) do res[#res + 1] = v end
  s = e
end
-- A bitmap this add created expires with its config, as Redisson's
-- expire covers both keys: the config's remaining time, or never.
if add and n > 0 and redis.call('PTTL', KEYS[2]) == -1 then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then redis.call('PEXPIRE', KEYS[2], left) end
end
return res
"#;

/// Redisson's `tryInit`: writes the config hash unless it exists.
/// KEYS: config. ARGV: size, hashIterations, expectedInsertions,
/// falseProbability, TTL in ms (0: none).
const REDISSON_INIT_SCRIPT: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('ERR item exists: ' .. KEYS[1])
end
redis.call('HSET', KEYS[1], 'size', ARGV[1], 'hashIterations', ARGV[2],
  'expectedInsertions', ARGV[3], 'falseProbability', ARGV[4])
if tonumber(ARGV[5]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
return 'OK'
"#;

/// Creates every key of a bitmap at full size, or fails if any exists.
/// ARGV: TTL in ms (0: none), then each key's last bit offset.
const RESERVE_SCRIPT: &str = r#"
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    return redis.error_reply('ERR item exists: ' .. KEYS[i])
  end
end
local ttl = tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('SETBIT', KEYS[i], ARGV[i + 1], 0)
  if ttl > 0 then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return 'OK'
"#;

impl Bitmap {
    /// Sizes the bitmap and names its keys: `name` when it fits in one
    /// string, else `{name}:0`, `{name}:1`, ... in one hash slot (`name:0`,
    /// ... when `name` already has a hash tag), so one script reaches them all.
    pub fn new(name: &str, layout: BitmapLayout, options: &Options) -> Result<Bitmap> {
        let spec = match options.shape {
            Some((bits, hashes)) => BitmapSpec::explicit(layout, bits, hashes),
            None => BitmapSpec::sized(layout, options.capacity, options.error_rate),
        }
        .map_err(|e| Error::InvalidOptions(e.to_string()))?;
        let parts = spec.shape.bits.div_ceil(options.max_key_bits);
        let keys = if parts == 1 {
            vec![name.to_string()]
        } else if !layout.may_split() {
            return Err(Error::InvalidOptions(format!(
                "the {} layout keeps its {} bits in one key, as its own code does; bits per key {} is \
                 too few",
                layout.name(),
                spec.shape.bits,
                options.max_key_bits
            )));
        } else if super::has_hash_tag(name) {
            (0..parts).map(|i| format!("{name}:{i}")).collect()
        } else {
            (0..parts).map(|i| format!("{{{name}}}:{i}")).collect()
        };
        let config = layout.is_redisson().then(|| redisson_config_key(name));
        Ok(Bitmap { spec, keys, config })
    }

    /// Whether one key holds everything, so that a write's `PEXPIRE ... NX`
    /// can follow it; split bitmaps and Redisson's (whose script sets both
    /// keys' TTLs) set theirs inside their script.
    pub fn is_single_key(&self) -> bool {
        self.keys.len() == 1 && self.config.is_none()
    }

    /// Redisson's four config fields (size, hashIterations,
    /// expectedInsertions, falseProbability), as its Java code writes them.
    pub fn redisson_fields(&self, options: &Options) -> [String; 4] {
        [
            self.spec.shape.bits.to_string(),
            self.spec.shape.hashes.to_string(),
            options.capacity.to_string(),
            java_double_to_string(options.error_rate),
        ]
    }

    /// Creates the filter now: Redisson's config alone (as its `tryInit`:
    /// Redisson never sizes the bitmap ahead), or every key at full size.
    pub fn reserve(&self, o: &Options) -> Cmd {
        let mut c = cmd("EVAL");
        match &self.config {
            Some(config) => {
                c.arg(REDISSON_INIT_SCRIPT).arg(1).arg(config).arg(&self.redisson_fields(o));
                c.arg(o.ttl_millis().unwrap_or(0));
            }
            None => {
                c.arg(RESERVE_SCRIPT).arg(self.keys.len()).arg(&self.keys).arg(o.ttl_millis().unwrap_or(0));
                for i in 0..self.keys.len() {
                    c.arg(part_bits(self.spec.shape.bits, o.max_key_bits, i) - 1);
                }
            }
        }
        c
    }

    /// The commands that set (`write`) or read one batch's bits, each bit
    /// reported back to its item: `owners[i]` is item i's position in the
    /// caller's slice.
    pub fn push_batch(&self, o: &Options, chunk: &[&[u8]], owners: &[u32], write: bool, plan: &mut Plan) {
        let Bitmap { spec, keys, config } = self;
        // Offsets grouped by key, in item order within each key.
        let mut offsets: Vec<Vec<u64>> = vec![Vec::new(); keys.len()];
        let mut bit_owners: Vec<Vec<u32>> = vec![Vec::new(); keys.len()];
        let mut positions = Vec::with_capacity(spec.shape.hashes as usize);
        for (item, &owner) in chunk.iter().zip(owners) {
            positions.clear();
            spec.positions(item, &mut positions);
            for &p in &positions {
                let part = (p / o.max_key_bits) as usize;
                offsets[part].push(p % o.max_key_bits);
                bit_owners[part].push(owner);
            }
        }
        if let Some(config) = config {
            let mut c = cmd("EVAL");
            c.arg(REDISSON_SCRIPT).arg(2).arg(config).arg(&keys[0]);
            c.arg(if write { "add" } else { "get" }).arg(&self.redisson_fields(o));
            c.arg(o.ttl_millis().unwrap_or(0)).arg(&offsets[0]);
            plan.steps.push(Step { cmd: c, decode: Decode::Bits(bit_owners.concat()) });
        } else if write && keys.len() == 1 {
            // One key: BITFIELD alone is atomic, and five times
            // faster than the same operations from Lua.
            let mut c = cmd("BITFIELD");
            c.arg(&keys[0]);
            for off in &offsets[0] {
                c.arg("SET").arg("u1").arg(*off).arg("1");
            }
            let owners = bit_owners.concat();
            plan.steps.push(Step { cmd: c, decode: Decode::Bits(owners) });
        } else if write {
            let mut c = cmd("EVAL");
            c.arg(ADD_SCRIPT).arg(keys.len()).arg(keys).arg(o.ttl_millis().unwrap_or(0));
            for part in &offsets {
                c.arg(part.len()).arg(part);
            }
            let owners = bit_owners.concat();
            plan.steps.push(Step { cmd: c, decode: Decode::Bits(owners) });
        } else {
            for ((key, part), owners) in keys.iter().zip(&offsets).zip(bit_owners) {
                if part.is_empty() {
                    continue;
                }
                let mut c = cmd("BITFIELD_RO");
                c.arg(key);
                for off in part {
                    c.arg("GET").arg("u1").arg(*off);
                }
                plan.steps.push(Step { cmd: c, decode: Decode::Bits(owners) });
            }
        }
    }

    /// Per key: whether it exists, its bytes and the bits set, read by
    /// [`Bitmap::read_info`]. A bitmap keeps no count, so its items are
    /// estimated from the bits set.
    pub fn info(&self) -> Vec<Cmd> {
        self.keys
            .iter()
            .flat_map(|k| {
                [cmd("EXISTS").arg(k).clone(), cmd("STRLEN").arg(k).clone(), cmd("BITCOUNT").arg(k).clone()]
            })
            .collect()
    }

    /// `all_keys` are the filter's keys, its config included.
    pub fn read_info(
        &self,
        name: &str,
        o: &Options,
        all_keys: Vec<String>,
        replies: Vec<Value>,
    ) -> Result<Info> {
        let mut replies = replies.into_iter();
        let mut next = || replies.next().ok_or_else(|| Error::Protocol("too few replies to INFO".into()));
        let shape = self.spec.shape;
        let (mut exists, mut bytes, mut set) = (false, 0u64, 0u64);
        for _ in &self.keys {
            exists |= integer(&next()?, name)? == 1;
            bytes += integer(&next()?, name)? as u64;
            set += integer(&next()?, name)? as u64;
        }
        if !exists {
            return Err(Error::NotFound(name.to_string()));
        }
        let (m, k) = (shape.bits as f64, f64::from(shape.hashes));
        let fill = (set as f64 / m).min(1.0);
        // Swamidass & Baldi: items from the fraction of bits set.
        let estimated = -(m / k) * (1.0 - fill.min(1.0 - 1.0 / m)).ln();
        Ok(Info {
            backend: "bitmap".into(),
            keys: all_keys,
            capacity: o.capacity,
            bytes,
            estimated_items: Some(estimated),
            bits: Some(shape.bits),
            hashes: Some(shape.hashes),
            layout: Some(self.spec.layout.name().into()),
            fill: Some(fill),
            estimated_error_rate: Some(fill.powf(k)),
            ..Info::default()
        })
    }
}

/// Bits held by key `part` of a split bitmap.
fn part_bits(bits: u64, per_key: u64, part: usize) -> u64 {
    (bits - part as u64 * per_key).min(per_key)
}
