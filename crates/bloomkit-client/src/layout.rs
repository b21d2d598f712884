//! Where a filter's bits live on the server and which commands reach them:
//! the module backend, the bitmap backend, and shards of either. Pure
//! command building and reply reading; [`crate::RedisFilter`] and
//! [`crate::AsyncRedisFilter`] only move the bytes.

use bloomkit_core::bitmap::{java_double_to_string, redisson_config_key, BitmapLayout, BitmapSpec};
use bloomkit_core::hash::murmur64a;
use redis::{cmd, Cmd, Value};

use crate::error::{Error, Result};
use crate::options::{Info, Options, Window};
use crate::plan::{array, integer, Decode, Plan, Step};

/// Which backend a sharded filter's shards use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Over {
    /// Each shard is a `BF.*` filter (bloomkit, RedisBloom or valkey-bloom).
    Module,
    /// Each shard is a Guava-compatible bitmap over plain strings.
    Bitmap,
}

/// A filter's name, options and backend, from which every command is built.
#[derive(Clone, Debug)]
pub struct Layout {
    name: String,
    options: Options,
    kind: Kind,
}

/// Which commands reach the filter, decided once by the constructor so
/// that no command builder has to look at the options again.
#[derive(Clone, Debug)]
enum Kind {
    /// A Bloom filter (`BF.*`).
    Bloom,
    /// A sliding-window filter (`APBF.*`, bloomkit only): `Layout::module`
    /// with [`Options::window`].
    Window(Window),
    /// A cuckoo filter (`CF.*`): deletes as well as adds.
    Cuckoo,
    /// `keys` hold the bits; `config` is Redisson's parameter hash.
    Bitmap {
        spec: BitmapSpec,
        keys: Vec<String>,
        config: Option<String>,
    },
    Sharded {
        over: Over,
        shards: Vec<Layout>,
    },
}

/// Seed of the shard-choosing hash: unrelated to every bit hash, so that the
/// items of one shard are spread evenly over its bits.
const SHARD_SEED: u64 = 0x5348_4152_4442_4b31;

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

impl Layout {
    /// A `BF.*` filter in the key `name`, created on first write with the
    /// options' capacity and error rate (`BF.INSERT`); with
    /// [`Options::window`], an `APBF.*` filter (bloomkit only), created by
    /// the first write that finds it missing.
    pub fn module(name: impl Into<String>, options: Options) -> Result<Layout> {
        options.validate()?;
        let kind = match options.window {
            Some(window) => Kind::Window(window),
            None => Kind::Bloom,
        };
        Ok(Layout { name: name.into(), options, kind })
    }

    /// A cuckoo filter (`CF.*`, bloomkit or RedisBloom) in the key `name`,
    /// created on first write with the options' capacity (`CF.INSERTNX`):
    /// like a module filter, and items can be removed ([`Filter::remove`]).
    /// Its false-positive rate follows from its 8-bit fingerprints and
    /// bucket size (about 2 x 2 / 255 = 1.6% at the default bucket size of
    /// 2), not from `error_rate`.
    ///
    /// [`Filter::remove`]: crate::Filter::remove
    pub fn cuckoo(name: impl Into<String>, options: Options) -> Result<Layout> {
        options.validate()?;
        if options.window.is_some() {
            return Err(Error::InvalidOptions(
                "sliding windows need APBF.* or the local backend, not CF.*".into(),
            ));
        }
        Ok(Layout { name: name.into(), options, kind: Kind::Cuckoo })
    }

    /// Whether items can be removed (a cuckoo filter).
    pub fn removes(&self) -> bool {
        matches!(self.kind, Kind::Cuckoo)
    }

    /// `CF.DEL` of each item: its answer is whether a copy was removed.
    pub(crate) fn remove_plan(&self, items: &[&[u8]]) -> Plan {
        let mut plan = Plan::new(items.len(), false);
        for (i, item) in items.iter().enumerate() {
            let c = cmd("CF.DEL").arg(&self.name).arg(*item).clone();
            plan.steps.push(Step { cmd: c, decode: Decode::One(i as u32) });
        }
        plan
    }

    /// `CF.COUNT`: how many copies of the item a cuckoo filter may hold.
    pub(crate) fn count_of(&self, item: &[u8]) -> Cmd {
        cmd("CF.COUNT").arg(&self.name).arg(item).clone()
    }

    /// A Guava-sized bitmap over plain strings: the key `name` itself when
    /// it fits in one string, else `{name}:0`, `{name}:1`, ... in one slot
    /// (`name:0`, ... when `name` already has a hash tag).
    pub fn bitmap(name: impl Into<String>, options: Options) -> Result<Layout> {
        Layout::bitmap_with(name, BitmapLayout::Guava, options)
    }

    /// A bitmap in another system's layout, sharing its bits with that
    /// system's code: sized from the options' capacity and error rate as
    /// that code sizes it, or by [`Options::shape`] (required for
    /// `PhpBkdr`). Only `Guava` may spread over several keys; the others
    /// keep the one key their own code uses. A `Redisson` filter also has
    /// its config hash (`{name}:config`), written by the first write or
    /// `reserve` as Redisson writes it and checked by every call:
    /// a mismatch is [`Error::ConfigMismatch`].
    pub fn bitmap_with(name: impl Into<String>, layout: BitmapLayout, options: Options) -> Result<Layout> {
        options.validate()?;
        if options.window.is_some() {
            return Err(Error::InvalidOptions(
                "sliding windows need the module (APBF.*) or local backend, not bitmaps".into(),
            ));
        }
        let name = name.into();
        let spec = match options.shape {
            Some((bits, hashes)) => BitmapSpec::explicit(layout, bits, hashes),
            None => BitmapSpec::sized(layout, options.capacity, options.error_rate),
        }
        .map_err(|e| Error::InvalidOptions(e.to_string()))?;
        let parts = spec.shape.bits.div_ceil(options.max_key_bits);
        let keys = if parts == 1 {
            vec![name.clone()]
        } else if !layout.may_split() {
            return Err(Error::InvalidOptions(format!(
                "the {} layout keeps its {} bits in one key, as its own code does; bits per key {} is \
                 too few",
                layout.name(),
                spec.shape.bits,
                options.max_key_bits
            )));
        } else if has_hash_tag(&name) {
            (0..parts).map(|i| format!("{name}:{i}")).collect()
        } else {
            (0..parts).map(|i| format!("{{{name}}}:{i}")).collect()
        };
        let config = layout.is_redisson().then(|| redisson_config_key(&name));
        Ok(Layout { name, options, kind: Kind::Bitmap { spec, keys, config } })
    }

    /// The bitmap's layout and shape (`None` for other backends).
    pub fn bitmap_spec(&self) -> Option<BitmapSpec> {
        match &self.kind {
            Kind::Bitmap { spec, .. } => Some(*spec),
            _ => None,
        }
    }

    /// The keys that hold a bitmap's bits (not its config): its own keys,
    /// empty for other backends.
    pub fn bitmap_keys(&self) -> &[String] {
        match &self.kind {
            Kind::Bitmap { keys, .. } => keys,
            _ => &[],
        }
    }

    /// A Redisson filter's config key and the four fields this filter
    /// writes there (size, hashIterations, expectedInsertions,
    /// falseProbability).
    pub fn redisson_config(&self) -> Option<(String, [String; 4])> {
        match &self.kind {
            Kind::Bitmap { spec, config: Some(config), .. } => {
                Some((config.clone(), self.redisson_fields(spec)))
            }
            _ => None,
        }
    }

    /// Redisson's four config fields, as its Java code writes them.
    fn redisson_fields(&self, spec: &BitmapSpec) -> [String; 4] {
        [
            spec.shape.bits.to_string(),
            spec.shape.hashes.to_string(),
            self.options.capacity.to_string(),
            java_double_to_string(self.options.error_rate),
        ]
    }

    /// One logical filter over `shards` filters in keys `{name:0}`,
    /// `{name:1}`, ...: each in its own hash slot, so that a Redis Cluster
    /// spreads them over its masters. Each shard holds `capacity / shards`
    /// items plus four standard deviations of the binomial spread, so the
    /// fullest shard stays within its capacity when the whole filter is full.
    pub fn sharded(name: impl Into<String>, shards: u32, over: Over, options: Options) -> Result<Layout> {
        options.validate()?;
        if options.window.is_some() {
            return Err(Error::InvalidOptions(
                "sliding windows need the module (APBF.*) or local backend, not shards".into(),
            ));
        }
        let name = name.into();
        if shards == 0 {
            return Err(Error::InvalidOptions("a sharded filter needs at least one shard".into()));
        }
        if name.contains(['{', '}']) {
            return Err(Error::InvalidOptions(format!(
                "sharded filter name {name:?} may not contain braces: each shard's key is its own hash tag"
            )));
        }
        let mean = options.capacity as f64 / f64::from(shards);
        let per_shard = Options { capacity: (mean + 4.0 * mean.sqrt()).ceil() as u64, ..options.clone() };
        let shards = (0..shards)
            .map(|s| {
                let key = format!("{{{name}:{s}}}");
                match over {
                    Over::Module => Layout::module(key, per_shard.clone()),
                    Over::Bitmap => Layout::bitmap(key, per_shard.clone()),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Layout { name, options, kind: Kind::Sharded { over, shards } })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// A sliding-window filter on the module (`APBF.*`): writes to a missing
    /// one fail with `NotFound`, and the filter reserves it and retries.
    pub(crate) fn is_window(&self) -> bool {
        matches!(self.kind, Kind::Window(_))
    }

    /// Every key the filter may occupy.
    pub fn keys(&self) -> Vec<String> {
        match &self.kind {
            Kind::Bloom | Kind::Window(_) | Kind::Cuckoo => vec![self.name.clone()],
            Kind::Bitmap { keys, config, .. } => keys.iter().chain(config).cloned().collect(),
            Kind::Sharded { shards, .. } => shards.iter().flat_map(|s| s.keys()).collect(),
        }
    }

    /// The shard an item belongs to (0 unless sharded).
    pub fn shard_of(&self, item: &[u8]) -> usize {
        match &self.kind {
            Kind::Sharded { shards, .. } => reduce(murmur64a(item, SHARD_SEED), shards.len()),
            _ => 0,
        }
    }

    pub(crate) fn reserve(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        self.push_reserve(&mut steps);
        steps
    }

    fn push_reserve(&self, steps: &mut Vec<Step>) {
        let o = &self.options;
        match &self.kind {
            Kind::Bloom => {
                steps.push(Step::ignore(
                    cmd("BF.RESERVE").arg(&self.name).arg(o.error_rate).arg(o.capacity).clone(),
                ));
                if let Some(ttl) = o.ttl_millis() {
                    steps.push(Step::ignore(cmd("PEXPIRE").arg(&self.name).arg(ttl).clone()));
                }
            }
            Kind::Window(window) => {
                let mut c = cmd("APBF.RESERVE");
                c.arg(&self.name).arg(o.error_rate).arg(o.capacity);
                match window {
                    Window::Count => c.arg("COUNT"),
                    Window::Time(t) => c.arg("TIME").arg(t.as_millis().div_ceil(1000).max(1) as u64),
                };
                steps.push(Step::ignore(c));
                if let Some(ttl) = o.ttl_millis() {
                    steps.push(Step::ignore(cmd("PEXPIRE").arg(&self.name).arg(ttl).clone()));
                }
            }
            Kind::Cuckoo => {
                steps.push(Step::ignore(cmd("CF.RESERVE").arg(&self.name).arg(o.capacity).clone()));
                if let Some(ttl) = o.ttl_millis() {
                    steps.push(Step::ignore(cmd("PEXPIRE").arg(&self.name).arg(ttl).clone()));
                }
            }
            Kind::Bitmap { spec, config: Some(config), .. } => {
                // As Redisson's tryInit: the config only; Redisson never
                // sizes the bitmap ahead.
                let mut c = cmd("EVAL");
                c.arg(REDISSON_INIT_SCRIPT).arg(1).arg(config).arg(&self.redisson_fields(spec));
                c.arg(o.ttl_millis().unwrap_or(0));
                steps.push(Step::ignore(c));
            }
            Kind::Bitmap { spec, keys, config: None } => {
                let mut c = cmd("EVAL");
                c.arg(RESERVE_SCRIPT).arg(keys.len()).arg(keys).arg(o.ttl_millis().unwrap_or(0));
                for (i, _) in keys.iter().enumerate() {
                    c.arg(part_bits(spec.shape.bits, o.max_key_bits, i) - 1);
                }
                steps.push(Step::ignore(c));
            }
            Kind::Sharded { shards, .. } => shards.iter().for_each(|s| s.push_reserve(steps)),
        }
    }

    pub(crate) fn add_plan(&self, items: &[&[u8]]) -> Plan {
        let mut plan = Plan::new(items.len(), false);
        self.push_items(items, &mut plan, true);
        plan
    }

    pub(crate) fn contains_plan(&self, items: &[&[u8]]) -> Plan {
        let mut plan = Plan::new(items.len(), true);
        self.push_items(items, &mut plan, false);
        plan
    }

    fn push_items(&self, items: &[&[u8]], plan: &mut Plan, write: bool) {
        match &self.kind {
            Kind::Sharded { shards, .. } => {
                // Group by shard; a shard's commands go to its node together.
                let mut owners: Vec<Vec<u32>> = vec![Vec::new(); shards.len()];
                for (i, item) in items.iter().enumerate() {
                    owners[self.shard_of(item)].push(i as u32);
                }
                for (shard, owners) in shards.iter().zip(owners) {
                    if !owners.is_empty() {
                        let mine: Vec<&[u8]> = owners.iter().map(|&i| items[i as usize]).collect();
                        shard.push_single(&mine, &owners, plan, write);
                    }
                }
            }
            _ => {
                let owners: Vec<u32> = (0..items.len() as u32).collect();
                self.push_single(items, &owners, plan, write);
            }
        }
    }

    /// Commands for items of one module filter or bitmap; `owners[i]` is
    /// item i's position in the caller's slice.
    fn push_single(&self, items: &[&[u8]], owners: &[u32], plan: &mut Plan, write: bool) {
        let o = &self.options;
        for (chunk, owners) in items.chunks(o.batch_size).zip(owners.chunks(o.batch_size)) {
            match &self.kind {
                Kind::Window(_) => {
                    let mut c = cmd(if write { "APBF.MADD" } else { "APBF.MEXISTS" });
                    c.arg(&self.name);
                    chunk.iter().for_each(|item| {
                        c.arg(*item);
                    });
                    plan.steps.push(Step { cmd: c, decode: Decode::PerItem(owners.to_vec()) });
                }
                Kind::Bloom => {
                    let mut c;
                    if write {
                        c = cmd("BF.INSERT");
                        c.arg(&self.name).arg("CAPACITY").arg(o.capacity).arg("ERROR").arg(o.error_rate);
                        c.arg("ITEMS");
                    } else {
                        c = cmd("BF.MEXISTS");
                        c.arg(&self.name);
                    }
                    chunk.iter().for_each(|item| {
                        c.arg(*item);
                    });
                    plan.steps.push(Step { cmd: c, decode: Decode::PerItem(owners.to_vec()) });
                }
                Kind::Cuckoo => {
                    // CF.INSERTNX answers 1 (added), 0 (already there) or
                    // -1 (no room: the filter cannot grow).
                    let mut c = cmd(if write { "CF.INSERTNX" } else { "CF.MEXISTS" });
                    c.arg(&self.name);
                    if write {
                        c.arg("CAPACITY").arg(o.capacity).arg("ITEMS");
                    }
                    chunk.iter().for_each(|item| {
                        c.arg(*item);
                    });
                    plan.steps.push(Step { cmd: c, decode: Decode::PerItem(owners.to_vec()) });
                }
                Kind::Bitmap { spec, keys, config } => {
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
                        c.arg(if write { "add" } else { "get" }).arg(&self.redisson_fields(spec));
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
                Kind::Sharded { .. } => unreachable!("shards are module or bitmap filters"),
            }
        }
        let single_key = match &self.kind {
            Kind::Bloom | Kind::Window(_) | Kind::Cuckoo => true,
            // Redisson's script sets both keys' TTLs itself.
            Kind::Bitmap { keys, config, .. } => keys.len() == 1 && config.is_none(),
            Kind::Sharded { .. } => false,
        };
        if write && single_key && !items.is_empty() {
            if let Some(ttl) = o.ttl_millis() {
                // Gives a key created by this write its lifetime; NX keeps an
                // existing one (Redis 7 and later, Valkey). Split bitmaps set
                // it inside their script.
                let c = cmd("PEXPIRE").arg(&self.keys()[0]).arg(ttl).arg("NX").clone();
                plan.steps.push(Step::ignore(c));
            }
        }
    }

    /// The filters whose info is read one by one: the shards, or itself.
    /// Each is queried alone so that a shard with no key yet (an error reply
    /// to `BF.INFO`) does not fail the others.
    pub(crate) fn info_parts(&self) -> Vec<&Layout> {
        match &self.kind {
            Kind::Sharded { shards, .. } => shards.iter().collect(),
            _ => vec![self],
        }
    }

    /// Commands whose replies [`Layout::read_info`] reads (not sharded).
    pub(crate) fn info(&self) -> Vec<Cmd> {
        match &self.kind {
            Kind::Window(_) => vec![cmd("APBF.INFO").arg(&self.name).clone()],
            Kind::Bloom => vec![cmd("BF.INFO").arg(&self.name).clone()],
            Kind::Cuckoo => vec![cmd("CF.INFO").arg(&self.name).clone()],
            Kind::Bitmap { keys, .. } => keys
                .iter()
                .flat_map(|k| {
                    [
                        cmd("EXISTS").arg(k).clone(),
                        cmd("STRLEN").arg(k).clone(),
                        cmd("BITCOUNT").arg(k).clone(),
                    ]
                })
                .collect(),
            Kind::Sharded { .. } => unreachable!("shards are read one by one"),
        }
    }

    pub(crate) fn read_info(&self, replies: Vec<Value>) -> Result<Info> {
        let mut replies = replies.into_iter();
        let mut next = || replies.next().ok_or_else(|| Error::Protocol("too few replies to INFO".into()));
        match &self.kind {
            Kind::Bloom | Kind::Window(_) | Kind::Cuckoo => {
                let fields = module_info_fields(next()?, &self.name)?;
                let field =
                    |label: &str| fields.iter().find(|(l, _)| l.eq_ignore_ascii_case(label)).map(|f| f.1);
                if matches!(self.kind, Kind::Cuckoo) {
                    return Ok(Info {
                        backend: "cuckoo".into(),
                        keys: vec![self.name.clone()],
                        // Slots in every sub-filter: sub-filter i has the
                        // first's buckets times expansion^i.
                        capacity: {
                            let slots =
                                field("Number of buckets").unwrap_or(0) * field("Bucket size").unwrap_or(0);
                            let growth = field("Expansion rate").unwrap_or(1).max(1);
                            (0..field("Number of filters").unwrap_or(1))
                                .map(|i| slots.saturating_mul(growth.saturating_pow(i as u32)))
                                .fold(0u64, u64::saturating_add)
                        },
                        bytes: field("Size").unwrap_or(0),
                        items: field("Number of items inserted"),
                        filters: field("Number of filters"),
                        ..Info::default()
                    });
                }
                Ok(Info {
                    backend: if self.is_window() { "module window" } else { "module" }.into(),
                    keys: vec![self.name.clone()],
                    capacity: field("Capacity").unwrap_or(0),
                    bytes: field("Size").unwrap_or(0),
                    items: field("Number of items inserted"),
                    filters: field("Number of filters"),
                    ..Info::default()
                })
            }
            Kind::Bitmap { spec, keys, .. } => {
                let shape = spec.shape;
                let (mut exists, mut bytes, mut set) = (false, 0u64, 0u64);
                for _ in keys {
                    exists |= integer(&next()?, &self.name)? == 1;
                    bytes += integer(&next()?, &self.name)? as u64;
                    set += integer(&next()?, &self.name)? as u64;
                }
                if !exists {
                    return Err(Error::NotFound(self.name.clone()));
                }
                let (m, k) = (shape.bits as f64, f64::from(shape.hashes));
                let fill = (set as f64 / m).min(1.0);
                // Swamidass & Baldi: items from the fraction of bits set.
                let estimated = -(m / k) * (1.0 - fill.min(1.0 - 1.0 / m)).ln();
                Ok(Info {
                    backend: "bitmap".into(),
                    keys: self.keys(),
                    capacity: self.options.capacity,
                    bytes,
                    estimated_items: Some(estimated),
                    bits: Some(shape.bits),
                    hashes: Some(shape.hashes),
                    layout: Some(spec.layout.name().into()),
                    fill: Some(fill),
                    estimated_error_rate: Some(fill.powf(k)),
                    ..Info::default()
                })
            }
            Kind::Sharded { .. } => unreachable!("shards are read one by one"),
        }
    }

    /// The info of the whole filter from its parts' (see [`Layout::info_parts`]).
    pub(crate) fn combine_info(&self, parts: Vec<Result<Info>>) -> Result<Info> {
        let Kind::Sharded { over, shards } = &self.kind else {
            return parts.into_iter().next().unwrap_or_else(|| Err(Error::Protocol("no info".into())));
        };
        let module = *over == Over::Module;
        let mut total = Info {
            backend: format!("sharded {}", if module { "module" } else { "bitmap" }),
            keys: self.keys(),
            shards: Some(shards.len() as u32),
            items: module.then_some(0),
            filters: module.then_some(0),
            estimated_items: (!module).then_some(0.0),
            bits: (!module).then_some(0),
            ..Info::default()
        };
        let mut missing = 0;
        for (shard, info) in shards.iter().zip(parts) {
            let info = match info {
                // A shard nobody wrote to yet has no key: it counts as empty.
                Err(Error::NotFound(_)) => {
                    missing += 1;
                    total.capacity += shard.options.capacity;
                    continue;
                }
                other => other?,
            };
            total.capacity += info.capacity;
            total.bytes += info.bytes;
            total.items = total.items.map(|t| t + info.items.unwrap_or(0));
            total.filters = total.filters.map(|t| t + info.filters.unwrap_or(0));
            total.estimated_items = total.estimated_items.map(|t| t + info.estimated_items.unwrap_or(0.0));
            total.bits = total.bits.map(|t| t + info.bits.unwrap_or(0));
            total.hashes = info.hashes.or(total.hashes);
        }
        if missing == shards.len() {
            return Err(Error::NotFound(self.name.clone()));
        }
        Ok(total)
    }

    /// Exact item count where the backend keeps one.
    pub(crate) fn count(&self) -> Option<Vec<Cmd>> {
        match &self.kind {
            // Items leave a window as it slides: it keeps no count.
            Kind::Window(_) => None,
            Kind::Bloom => Some(vec![cmd("BF.CARD").arg(&self.name).clone()]),
            // Counted, but only in CF.INFO: see `Filter::count`.
            Kind::Cuckoo => None,
            Kind::Bitmap { .. } => None,
            Kind::Sharded { shards, .. } => {
                shards.iter().map(|s| s.count()).collect::<Option<Vec<_>>>().map(|v| v.concat())
            }
        }
    }

    pub(crate) fn clear(&self) -> Vec<Cmd> {
        // One DEL per key: a cluster cannot delete keys of several slots at once.
        self.keys().into_iter().map(|k| cmd("DEL").arg(k).clone()).collect()
    }

    pub(crate) fn expire(&self, ttl: std::time::Duration) -> Vec<Cmd> {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        self.keys().into_iter().map(|k| cmd("PEXPIRE").arg(k).arg(ms).clone()).collect()
    }
}

/// Bits held by key `part` of a split bitmap.
fn part_bits(bits: u64, per_key: u64, part: usize) -> u64 {
    (bits - part as u64 * per_key).min(per_key)
}

/// Redis Cluster's hash-tag rule: a `{` followed later by `}` with
/// something between; the slot is then that of what is between.
pub fn has_hash_tag(key: &str) -> bool {
    key.find('{').is_some_and(|open| key[open + 1..].find('}').is_some_and(|close| close > 0))
}

/// Lemire's multiply-shift: a uniform index below `n` from a 64-bit hash.
fn reduce(hash: u64, n: usize) -> usize {
    ((u128::from(hash) * n as u128) >> 64) as usize
}

/// BF.INFO's label/value pairs (a flat array in RESP2, a map in RESP3).
fn module_info_fields(reply: Value, key: &str) -> Result<Vec<(String, u64)>> {
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
    Ok(pairs
        .into_iter()
        .filter_map(|(l, v)| {
            let label = match l {
                Value::SimpleString(s) => s,
                Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                _ => return None,
            };
            let value = match v {
                Value::Int(i) => u64::try_from(i).ok()?,
                _ => return None,
            };
            Some((label, value))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tags_follow_redis() {
        assert!(has_hash_tag("a{b}c"));
        assert!(!has_hash_tag("a{}c"));
        assert!(!has_hash_tag("a}b{c"));
        assert!(!has_hash_tag("plain"));
    }

    #[test]
    fn big_bitmaps_split_into_keys_of_one_slot() {
        let layout = Layout::bitmap("clicks", Options::new(1_000_000, 0.01).max_key_bits(1 << 20)).unwrap();
        let keys = layout.keys();
        assert_eq!(keys.len(), 10, "9.6 Mbit over 1 Mbit keys");
        assert_eq!(keys[0], "{clicks}:0");
        let tagged = Layout::bitmap("a:{u1}", Options::new(1_000_000, 0.01).max_key_bits(1 << 20)).unwrap();
        assert_eq!(tagged.keys()[3], "a:{u1}:3");
        let small = Layout::bitmap("clicks", Options::new(1000, 0.01)).unwrap();
        assert_eq!(
            small.keys(),
            vec!["clicks".to_string()],
            "one key: the name itself, as hand-written SETBITs use"
        );
    }

    #[test]
    fn shards_have_their_own_tags_and_share_the_load() {
        let layout = Layout::sharded("s", 8, Over::Module, Options::new(80_000, 0.01)).unwrap();
        assert_eq!(layout.keys()[5], "{s:5}");
        let mut counts = [0u32; 8];
        for i in 0..80_000u32 {
            counts[layout.shard_of(format!("item{i}").as_bytes())] += 1;
        }
        let per_shard = match &layout.kind {
            Kind::Sharded { shards, .. } => shards[0].options.capacity,
            _ => unreachable!(),
        };
        assert!(counts.iter().all(|&c| u64::from(c) <= per_shard), "{counts:?} over {per_shard}");
        assert!(Layout::sharded("a{b}", 2, Over::Bitmap, Options::new(10, 0.1)).is_err());
    }

    #[test]
    fn options_are_checked() {
        assert!(Layout::module("k", Options::new(10, 1.5)).is_err());
        assert!(Layout::module("k", Options::new(0, 0.1)).is_err());
        assert!(Layout::bitmap("k", Options::new(10, 0.1).batch_size(0)).is_err());
        assert!(Layout::bitmap("k", Options::new(10, 0.1).max_key_bits(1 << 33)).is_err());
    }
}
