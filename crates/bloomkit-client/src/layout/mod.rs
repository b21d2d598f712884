//! Where a filter's bits live on the server and which commands reach them.
//! A [`Layout`] is a filter's name, options and kind, the kind decided once
//! by its constructor; each kind's commands and reply reading are in its
//! own file (`bloom.rs`, `window.rs`, `cuckoo.rs`, `xf.rs`, `bitmap.rs`), and this
//! file dispatches to them and spreads sharded filters over their shards.
//! Pure command building and reply reading: [`crate::RedisFilter`] and
//! [`crate::AsyncRedisFilter`] only move the bytes.

use bloomkit_core::bitmap::{BitmapLayout, BitmapSpec};
use bloomkit_core::common::hash::murmur64a;
use redis::{cmd, Cmd, Value};

use crate::error::{Error, Result};
use crate::options::{Info, Options, Window};
use crate::plan::{Decode, Join, Plan, Step};

mod bitmap;
mod bloom;
mod cuckoo;
mod window;
mod xf;

use bitmap::Bitmap;

/// Which backend a sharded filter's shards use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Over {
    /// Each shard is a `BF.*` filter (bloomkit, RedisBloom or valkey-bloom).
    Module,
    /// Each shard is a Guava-compatible bitmap over plain strings.
    Bitmap,
    /// Each shard is an expandable filter (`XF.*`, bloomkit only): the
    /// whole filter grows without a size to guess, adds are add-if-absent,
    /// and items can be removed and counted, as with
    /// [`Layout::expandable`].
    Expandable,
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
    /// An expandable filter (`XF.*`): grows at its rate, deletes and counts.
    Xf,
    /// Plain strings, in one system's layout.
    Bitmap(Bitmap),
    Sharded {
        over: Over,
        shards: Vec<Layout>,
    },
    /// A flow moving from one filter to another ([`Layout::moving`]).
    Moving {
        from: Box<Layout>,
        to: Box<Layout>,
    },
}

/// Seed of the shard-choosing hash: unrelated to every bit hash, so that the
/// items of one shard are spread evenly over its bits.
const SHARD_SEED: u64 = 0x5348_4152_4442_4b31;

/// One batch's add command and `PEXPIRE` of its key, atomically: KEYS[1]
/// the key, ARGV[1] the TTL in ms, ARGV[2] the command, ARGV[3..] its
/// arguments after the key. Its reply is the command's; an error reply
/// of the command (a refused batch) stops the script before `PEXPIRE`.
const REFRESH_SCRIPT: &str = "local reply = redis.call(ARGV[2], KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return reply";

/// `batch` (a module command whose first argument is its key) as one
/// `EVAL` that also sets the key's TTL again ([`Options::refresh_ttl`]).
fn with_ttl_refreshed(batch: Cmd, ttl: u64) -> Cmd {
    let args: Vec<&[u8]> = batch
        .args_iter()
        .map(|a| match a {
            redis::Arg::Simple(bytes) => bytes,
            // The add commands built here take no cursor.
            _ => b"0",
        })
        .collect();
    let mut c = cmd("EVAL");
    c.arg(REFRESH_SCRIPT).arg(1).arg(args[1]).arg(ttl).arg(args[0]);
    for a in &args[2..] {
        c.arg(*a);
    }
    c
}

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

    /// An expandable filter (`XF.*`, bloomkit only) in the key `name`: it
    /// grows as items arrive, one block at a time (no table is ever
    /// doubled or copied whole), at the options' error rate at every size (up to [`Options::max_capacity`]), so the
    /// capacity is only a first size, and a stream of unknown length needs
    /// no guess. Items can be removed ([`Filter::remove`]) and their copies
    /// counted ([`crate::RedisFilter::count_of`]). Created on first write
    /// with the options; an add stores an item only when it is not in yet,
    /// as [`Layout::cuckoo`]'s do, with one `XF.INSERT ... NX` per batch.
    /// Over a cluster: [`Layout::sharded`] with [`Over::Expandable`].
    ///
    /// [`Filter::remove`]: crate::Filter::remove
    pub fn expandable(name: impl Into<String>, options: Options) -> Result<Layout> {
        options.validate()?;
        if options.window.is_some() {
            return Err(Error::InvalidOptions(
                "sliding windows need APBF.* or the local backend, not XF.*".into(),
            ));
        }
        options.xf_params()?;
        Ok(Layout { name: name.into(), options, kind: Kind::Xf })
    }

    /// Whether items can be removed (a cuckoo or an expandable filter,
    /// sharded or not).
    pub fn removes(&self) -> bool {
        match &self.kind {
            Kind::Moving { to, .. } => to.removes(),
            kind => matches!(kind, Kind::Cuckoo | Kind::Xf | Kind::Sharded { over: Over::Expandable, .. }),
        }
    }

    /// Whether this is an expandable filter (`XF.*`): in one key, or
    /// sharded over several ([`Over::Expandable`]).
    pub fn is_expandable(&self) -> bool {
        match &self.kind {
            Kind::Moving { to, .. } => to.is_expandable(),
            kind => matches!(kind, Kind::Xf | Kind::Sharded { over: Over::Expandable, .. }),
        }
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
        if options.refresh_ttl {
            return Err(Error::InvalidOptions(
                "refresh_ttl needs a module layout: bitmap scripts set the TTL when they create the keys"
                    .into(),
            ));
        }
        let name = name.into();
        let bitmap = Bitmap::new(&name, layout, &options)?;
        Ok(Layout { name, options, kind: Kind::Bitmap(bitmap) })
    }

    /// The bitmap's layout and shape (`None` for other backends).
    pub fn bitmap_spec(&self) -> Option<BitmapSpec> {
        match &self.kind {
            Kind::Bitmap(bitmap) => Some(bitmap.spec),
            _ => None,
        }
    }

    /// The keys that hold a bitmap's bits (not its config): its own keys,
    /// empty for other backends.
    pub fn bitmap_keys(&self) -> &[String] {
        match &self.kind {
            Kind::Bitmap(bitmap) => &bitmap.keys,
            _ => &[],
        }
    }

    /// A Redisson filter's config key and the four fields this filter
    /// writes there (size, hashIterations, expectedInsertions,
    /// falseProbability).
    pub fn redisson_config(&self) -> Option<(String, [String; 4])> {
        match &self.kind {
            Kind::Bitmap(bitmap) => {
                bitmap.config.as_ref().map(|config| (config.clone(), bitmap.redisson_fields(&self.options)))
            }
            _ => None,
        }
    }

    /// One logical filter over `shards` filters in keys `{name:0}`,
    /// `{name:1}`, ...: each in its own hash slot, so that a Redis Cluster
    /// spreads them over its masters. An item goes to one shard, chosen by
    /// a hash of its own ([`Layout::shard_of`]), so it is added, found,
    /// removed and counted there alone, and an absent item risks only its
    /// shard's false-positive rate: every shard keeps the options' rate.
    ///
    /// `Over::Module` and `Over::Bitmap`: each shard holds `capacity /
    /// shards` items plus four standard deviations of the binomial spread,
    /// so the fullest shard stays within its capacity when the whole filter
    /// is full.
    ///
    /// `Over::Expandable`: `capacity` is the whole filter's first size, so
    /// each shard starts at `capacity / shards` (a hint: shards grow past
    /// it); [`Options::max_capacity`] is a limit, so each shard's is
    /// `max_capacity / shards` plus four standard deviations, and the
    /// fullest shard reaches its own only as the whole filter reaches the
    /// one asked for. Without one, each shard takes the server's default
    /// (2^36 items), and the whole filter holds `shards` times it.
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
        let per_shard = match over {
            Over::Module | Over::Bitmap => {
                Options { capacity: with_spread(options.capacity, shards), ..options.clone() }
            }
            Over::Expandable => Options {
                capacity: options.capacity.div_ceil(u64::from(shards)),
                max_capacity: options.max_capacity.map(|max| with_spread(max, shards)),
                ..options.clone()
            },
        };
        let shards = (0..shards)
            .map(|s| {
                let key = crate::shard_key(&name, s);
                match over {
                    Over::Module => Layout::module(key, per_shard.clone()),
                    Over::Bitmap => Layout::bitmap(key, per_shard.clone()),
                    Over::Expandable => Layout::expandable(key, per_shard.clone()),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Layout { name, options, kind: Kind::Sharded { over, shards } })
    }

    /// A flow moving from the filter `from` to the filter `to`, for as long
    /// as `from`'s keys live (their TTL): writes go to `to` and reads see
    /// both, in the same round trip, so a caller moved to `to` forgets
    /// nothing `from` holds. The way to move a per-user `BF.*` flow to
    /// `XF.*` under a new key prefix, since no tool can turn a Bloom
    /// filter's bits back into items (README: "Moving a per-user Bloom flow
    /// to XF"):
    ///
    /// - `add`: stored in `to` (as `to` adds: add-if-absent for an
    ///   expandable filter), and new only if `to` took it and `from` does
    ///   not hold it; so items of the old key move to the new one as they
    ///   come back.
    /// - `contains`: in `to` or in `from`. A missing `from` (expired)
    ///   holds nothing; `from` is never written, reserved or created.
    /// - `remove`, `count_of`: `to`'s capability; also in `from` where it
    ///   removes and counts (a cuckoo or expandable filter). An item still
    ///   in a Bloom `from` reads as present until that key expires.
    /// - `count_of`: the sum of both filters' counts where `from` counts, so
    ///   an item added to `from` and then to `to` counts twice: never below
    ///   the true count, as a count promises.
    /// - `info` and `count`: `to`'s alone (`from` only shrinks by expiring).
    /// - `keys` and `clear`: both filters' keys; `expire`: `to`'s only
    ///   (`from` keeps its own lifetime, which is the point of moving).
    ///
    /// An error from `from` (a key of another type, a module missing)
    /// fails the call after `to` took its adds: their answers are lost, and
    /// the same items added again answer `false`.
    ///
    /// Any two layouts whose keys differ, neither of them moving.
    pub fn moving(from: Layout, to: Layout) -> Result<Layout> {
        if matches!(from.kind, Kind::Moving { .. }) || matches!(to.kind, Kind::Moving { .. }) {
            return Err(Error::InvalidOptions("a moving filter moves from one filter to one other".into()));
        }
        let theirs = from.keys();
        if let Some(both) = to.keys().into_iter().find(|k| theirs.contains(k)) {
            return Err(Error::InvalidOptions(format!(
                "a moving filter needs new keys: key {both:?} is in both filters (give the new one another prefix)"
            )));
        }
        let (name, options) = (to.name.clone(), to.options.clone());
        Ok(Layout { name, options, kind: Kind::Moving { from: Box::new(from), to: Box::new(to) } })
    }

    /// The filters a sharded filter spreads over, in shard order (`{name:0}`
    /// first); none for a filter that is not sharded. Each is a filter of
    /// its own: a [`crate::RedisFilter`] over one reads that shard alone
    /// (its info, its node).
    pub fn shards(&self) -> &[Layout] {
        match &self.kind {
            Kind::Sharded { shards, .. } => shards,
            _ => &[],
        }
    }

    /// What a sharded filter's shards are (`None` for a filter that is not
    /// sharded).
    pub fn over(&self) -> Option<Over> {
        match &self.kind {
            Kind::Sharded { over, .. } => Some(*over),
            _ => None,
        }
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
        match &self.kind {
            Kind::Moving { to, .. } => to.is_window(),
            kind => matches!(kind, Kind::Window(_)),
        }
    }

    /// Every key the filter may occupy.
    pub fn keys(&self) -> Vec<String> {
        match &self.kind {
            Kind::Bloom | Kind::Window(_) | Kind::Cuckoo | Kind::Xf => vec![self.name.clone()],
            Kind::Bitmap(bitmap) => bitmap.keys.iter().chain(&bitmap.config).cloned().collect(),
            Kind::Sharded { shards, .. } => shards.iter().flat_map(|s| s.keys()).collect(),
            Kind::Moving { from, to } => to.keys().into_iter().chain(from.keys()).collect(),
        }
    }

    /// The shard an item belongs to (0 unless sharded).
    pub fn shard_of(&self, item: &[u8]) -> usize {
        match &self.kind {
            Kind::Sharded { shards, .. } => reduce(murmur64a(item, SHARD_SEED), shards.len()),
            _ => 0,
        }
    }

    /// Commands that create the filter now, each answering only an error
    /// or not.
    pub(crate) fn reserve(&self) -> Vec<Cmd> {
        let mut cmds = Vec::new();
        self.push_reserve(&mut cmds);
        cmds
    }

    fn push_reserve(&self, cmds: &mut Vec<Cmd>) {
        let (name, o) = (&self.name, &self.options);
        let create = match &self.kind {
            Kind::Bloom => bloom::reserve(name, o),
            Kind::Window(window) => window::reserve(name, o, *window),
            Kind::Cuckoo => cuckoo::reserve(name, o),
            Kind::Xf => xf::reserve(name, o),
            // Its script sets the TTLs itself.
            Kind::Bitmap(bitmap) => return cmds.push(bitmap.reserve(o)),
            Kind::Sharded { shards, .. } => return shards.iter().for_each(|s| s.push_reserve(cmds)),
            Kind::Moving { to, .. } => return to.push_reserve(cmds),
        };
        cmds.push(create);
        if let Some(ttl) = o.ttl_millis() {
            cmds.push(cmd("PEXPIRE").arg(name).arg(ttl).clone());
        }
    }

    pub(crate) fn add_plan(&self, items: &[&[u8]]) -> Plan {
        if let Kind::Moving { from, to } = &self.kind {
            return to.add_plan(items).join(from.contains_plan(items), Join::AddedAndNotIn, &from.name);
        }
        let mut plan = Plan::new(items.len(), false);
        self.push_items(items, &mut plan, true);
        plan
    }

    pub(crate) fn contains_plan(&self, items: &[&[u8]]) -> Plan {
        if let Kind::Moving { from, to } = &self.kind {
            return to.contains_plan(items).join(from.contains_plan(items), Join::Either, &from.name);
        }
        let mut plan = Plan::new(items.len(), true);
        self.push_items(items, &mut plan, false);
        plan
    }

    /// `CF.DEL` or `XF.DEL` of each item (in its shard's key): its answer
    /// is whether a copy was removed.
    pub(crate) fn remove_plan(&self, items: &[&[u8]]) -> Plan {
        if let Kind::Moving { from, to } = &self.kind {
            let plan = to.remove_plan(items);
            return match from.removes() {
                true => plan.join(from.remove_plan(items), Join::Either, &from.name),
                false => plan,
            };
        }
        let mut plan = Plan::new(items.len(), false);
        for (i, item) in items.iter().enumerate() {
            let target = self.holder_of(item);
            let c = match target.kind {
                Kind::Xf => xf::remove(&target.name, item),
                _ => cuckoo::remove(&target.name, item),
            };
            plan.steps.push(Step { cmd: c, decode: Decode::One(i as u32) });
        }
        plan
    }

    /// `CF.COUNT` or `XF.COUNT` (in the item's shard): how many copies of
    /// the item the filter may hold, the sum of the commands' answers (a
    /// moving filter's two, where its old filter counts).
    pub(crate) fn count_of(&self, item: &[u8]) -> Vec<Cmd> {
        if let Kind::Moving { from, to } = &self.kind {
            let old = if from.removes() { from.count_of(item) } else { Vec::new() };
            return to.count_of(item).into_iter().chain(old).collect();
        }
        let target = self.holder_of(item);
        vec![match target.kind {
            Kind::Xf => xf::count_of(&target.name, item),
            _ => cuckoo::count_of(&target.name, item),
        }]
    }

    /// The filter that holds `item`: its shard, or the filter itself.
    fn holder_of(&self, item: &[u8]) -> &Layout {
        match &self.kind {
            Kind::Sharded { shards, .. } => &shards[self.shard_of(item)],
            _ => self,
        }
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

    /// Commands for items of one filter that is not sharded, in batches of
    /// [`Options::batch_size`]; `owners[i]` is item i's position in the
    /// caller's slice.
    fn push_single(&self, items: &[&[u8]], owners: &[u32], plan: &mut Plan, write: bool) {
        let (name, o) = (&self.name, &self.options);
        for (chunk, owners) in items.chunks(o.batch_size).zip(owners.chunks(o.batch_size)) {
            let batch = match &self.kind {
                Kind::Bloom => bloom::batch(name, o, chunk, write),
                Kind::Window(_) => window::batch(name, chunk, write),
                Kind::Cuckoo => cuckoo::batch(name, o, chunk, write),
                Kind::Xf => xf::batch(name, o, chunk, write),
                Kind::Bitmap(bitmap) => {
                    bitmap.push_batch(o, chunk, owners, write, plan);
                    continue;
                }
                Kind::Sharded { .. } | Kind::Moving { .. } => unreachable!("planned above"),
            };
            let batch = match o.ttl_millis() {
                Some(ttl) if write && o.refresh_ttl => with_ttl_refreshed(batch, ttl),
                _ => batch,
            };
            plan.steps.push(Step { cmd: batch, decode: Decode::PerItem(owners.to_vec()) });
        }
        let single_key = match &self.kind {
            Kind::Bloom | Kind::Window(_) | Kind::Cuckoo | Kind::Xf => true,
            Kind::Bitmap(bitmap) => bitmap.is_single_key(),
            Kind::Sharded { .. } | Kind::Moving { .. } => false,
        };
        if write && single_key && !items.is_empty() && !o.refresh_ttl {
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
            Kind::Moving { to, .. } => to.info_parts(),
            _ => vec![self],
        }
    }

    /// Commands whose replies [`Layout::read_info`] reads (not sharded).
    pub(crate) fn info(&self) -> Vec<Cmd> {
        match &self.kind {
            Kind::Bloom => vec![bloom::info(&self.name)],
            Kind::Window(_) => vec![window::info(&self.name)],
            Kind::Cuckoo => vec![cuckoo::info(&self.name)],
            Kind::Xf => vec![xf::info(&self.name)],
            Kind::Bitmap(bitmap) => bitmap.info(),
            Kind::Sharded { .. } | Kind::Moving { .. } => unreachable!("shards are read one by one"),
        }
    }

    pub(crate) fn read_info(&self, replies: Vec<Value>) -> Result<Info> {
        let name = &self.name;
        let first = |replies: Vec<Value>| {
            replies.into_iter().next().ok_or_else(|| Error::Protocol("too few replies to INFO".into()))
        };
        match &self.kind {
            Kind::Bloom => bloom::read_info(name, first(replies)?),
            Kind::Window(_) => window::read_info(name, first(replies)?),
            Kind::Cuckoo => cuckoo::read_info(name, first(replies)?),
            Kind::Xf => xf::read_info(name, first(replies)?),
            Kind::Bitmap(bitmap) => bitmap.read_info(name, &self.options, self.keys(), replies),
            Kind::Sharded { .. } | Kind::Moving { .. } => unreachable!("shards are read one by one"),
        }
    }

    /// The info of the whole filter from its parts' (see [`Layout::info_parts`]).
    pub(crate) fn combine_info(&self, parts: Vec<Result<Info>>) -> Result<Info> {
        if let Kind::Moving { to, .. } = &self.kind {
            return to.combine_info(parts);
        }
        let Kind::Sharded { over, shards } = &self.kind else {
            return parts.into_iter().next().unwrap_or_else(|| Err(Error::Protocol("no info".into())));
        };
        let (module, bitmap, expandable) =
            (*over == Over::Module, *over == Over::Bitmap, *over == Over::Expandable);
        let mut total = Info {
            backend: format!(
                "sharded {}",
                match over {
                    Over::Module => "module",
                    Over::Bitmap => "bitmap",
                    Over::Expandable => "expandable",
                }
            ),
            keys: self.keys(),
            shards: Some(shards.len() as u32),
            items: (!bitmap).then_some(0),
            filters: module.then_some(0),
            estimated_items: bitmap.then_some(0.0),
            bits: bitmap.then_some(0),
            estimated_error_rate: expandable.then_some(0.0),
            ..Info::default()
        };
        let mut missing = 0;
        for (shard, info) in shards.iter().zip(parts) {
            let info = match info {
                // A shard nobody wrote to yet has no key: it counts as empty.
                Err(Error::NotFound(_)) => {
                    missing += 1;
                    total.capacity += shard.nominal_capacity();
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
            // An absent item is looked up in its own shard only, so the
            // rate for any one is its shard's: the largest bound holds for
            // every item, whichever shard it goes to.
            total.estimated_error_rate =
                total.estimated_error_rate.map(|t| t.max(info.estimated_error_rate.unwrap_or(0.0)));
        }
        if missing == shards.len() {
            return Err(Error::NotFound(self.name.clone()));
        }
        Ok(total)
    }

    /// The items a filter not yet created would report as its capacity:
    /// an expandable filter's max capacity (the server's default when the
    /// options give none), any other's capacity.
    fn nominal_capacity(&self) -> u64 {
        match self.kind {
            Kind::Xf => self.options.max_capacity.unwrap_or(bloomkit_core::xf::DEFAULT_MAX_CAPACITY),
            _ => self.options.capacity,
        }
    }

    /// Exact item count where the backend keeps one.
    pub(crate) fn count(&self) -> Option<Vec<Cmd>> {
        match &self.kind {
            Kind::Bloom => Some(vec![bloom::count(&self.name)]),
            // Items leave a window as it slides: it keeps no count.
            Kind::Window(_) => None,
            // Counted, but only in CF.INFO: see `Filter::count`.
            Kind::Cuckoo => None,
            Kind::Xf => Some(vec![xf::count(&self.name)]),
            Kind::Bitmap(_) => None,
            Kind::Sharded { shards, .. } => {
                shards.iter().map(|s| s.count()).collect::<Option<Vec<_>>>().map(|v| v.concat())
            }
            Kind::Moving { to, .. } => to.count(),
        }
    }

    pub(crate) fn clear(&self) -> Vec<Cmd> {
        // One DEL per key: a cluster cannot delete keys of several slots at once.
        self.keys().into_iter().map(|k| cmd("DEL").arg(k).clone()).collect()
    }

    pub(crate) fn expire(&self, ttl: std::time::Duration) -> Vec<Cmd> {
        if let Kind::Moving { to, .. } = &self.kind {
            return to.expire(ttl);
        }
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        self.keys().into_iter().map(|k| cmd("PEXPIRE").arg(k).arg(ms).clone()).collect()
    }
}

/// A shard's share of `total` items when the hash spreads them evenly:
/// the mean plus four standard deviations (of the binomial count), so the
/// fullest of the shards stays within it when the whole holds `total`.
fn with_spread(total: u64, shards: u32) -> u64 {
    let mean = total as f64 / f64::from(shards);
    (mean + 4.0 * mean.sqrt()).ceil() as u64
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
        let layout =
            Layout::bitmap("clicks", Options { max_key_bits: 1 << 20, ..Options::new(1_000_000, 0.01) })
                .unwrap();
        let keys = layout.keys();
        assert_eq!(keys.len(), 10, "9.6 Mbit over 1 Mbit keys");
        assert_eq!(keys[0], "{clicks}:0");
        let tagged =
            Layout::bitmap("a:{u1}", Options { max_key_bits: 1 << 20, ..Options::new(1_000_000, 0.01) })
                .unwrap();
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
    fn expandable_shards_split_the_first_size_and_the_limit() {
        let options = Options { max_capacity: Some(1 << 30), ..Options::new(1_000_000, 0.01) };
        let layout = Layout::sharded("x", 16, Over::Expandable, options).unwrap();
        assert!(layout.is_expandable() && layout.removes());
        assert_eq!(layout.over(), Some(Over::Expandable));
        let shards = layout.shards();
        assert_eq!(shards.len(), 16);
        assert_eq!(shards[15].name(), "{x:15}");
        assert!(shards.iter().all(|s| s.is_expandable() && s.shards().is_empty()));
        let per = shards[0].options();
        // The first size is a hint: an even share. The limit is a limit:
        // an even share and four standard deviations.
        assert_eq!(per.capacity, 62_500);
        let mean = (1u64 << 30) as f64 / 16.0;
        assert_eq!(per.max_capacity, Some((mean + 4.0 * mean.sqrt()).ceil() as u64));
        assert_eq!(per.error_rate, 0.01, "each shard keeps the rate: an absent item meets one shard");
        // Without a limit each shard takes the server's default.
        let open = Layout::sharded("y", 3, Over::Expandable, Options::new(10, 0.01)).unwrap();
        assert_eq!(open.shards()[2].options().max_capacity, None);
        assert_eq!(open.shards()[2].options().capacity, 4);
        // An item's remove and count go to its shard's key.
        let item = b"item-17";
        let shard = &open.shards()[open.shard_of(item)];
        let packed = String::from_utf8_lossy(&open.count_of(item)[0].get_packed_command()).into_owned();
        assert!(packed.contains(shard.name()) && packed.contains("XF.COUNT"), "{packed}");
        // A shard whose options an expandable filter refuses is refused whole.
        let bad = Options { max_capacity: Some(100), ..Options::new(1000, 0.01) };
        assert!(Layout::sharded("z", 4, Over::Expandable, bad).is_err());
        assert!(Layout::sharded("z", 4, Over::Expandable, Options::new(10, 0.7)).is_err());
    }

    #[test]
    fn options_are_checked() {
        assert!(Layout::module("k", Options::new(10, 1.5)).is_err());
        assert!(Layout::module("k", Options::new(0, 0.1)).is_err());
        assert!(Layout::bitmap("k", Options { batch_size: 0, ..Options::new(10, 0.1) }).is_err());
        assert!(Layout::bitmap("k", Options { max_key_bits: 1 << 33, ..Options::new(10, 0.1) }).is_err());
    }
}
