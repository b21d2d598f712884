//! `bloomkit dedup`: print each line the first time it is seen.
//!
//! Lines are bytes (not necessarily UTF-8), split on `\n`; the key is the
//! whole line without its `\n`, or one field of it. Lines are read in
//! batches, so that the in-process filter can hash a batch and prefetch its
//! bits, and the Redis backend sends one pipelined round trip per batch.

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bloomkit_client::{Error as ClientError, Filter, Layout, LocalFilter, RedisFilter};
use bloomkit_core::bitmap::BitmapLayout;
use bloomkit_core::local::{BlockedError, BlockedFilter};
use bloomkit_core::xf::{Hashing, XfHash};
use indicatif::{ProgressBar, ProgressStyle};

use bloomkit_client::transfer::{self, describe, log10_estimated_rate, Server};
use bloomkit_client::Place;

use crate::units::{human_bytes_exact, plural};

const BATCH: usize = 4096;
/// Items per server command: a bounded time for each on the server.
const SERVER_BATCH: usize = 1000;
/// The capacity of filters that cannot grow (bitmaps, windows) or that
/// grow by stacking sub-filters (an existing Bloom filter), when none is given.
pub const DEFAULT_CAPACITY: u64 = 10_000_000;
/// Without a capacity, the expandable filter's first size: small enough
/// for a short stream, and it grows a block at a time as the stream goes on.
const EXPANDABLE_START: u64 = 100_000;

pub struct Options {
    pub inputs: Vec<PathBuf>,
    pub duplicates: bool,
    pub count_only: bool,
    pub state: Option<PathBuf>,
    pub redis: Option<String>,
    pub bitmap: bool,
    /// With `bitmap`: whose layout, and explicit bits and hashes.
    pub layout: BitmapLayout,
    pub shape: Option<(u64, u32)>,
    pub key: String,
    /// Dedup over a sliding window (count: the last `capacity` lines).
    pub window: Option<bloomkit_client::Window>,
    /// Lines expected; without it, an expandable filter (`XF`) that needs
    /// no guess (unless a bitmap, a window or an existing filter says otherwise).
    pub capacity: Option<u64>,
    pub error_rate: f64,
    pub field: Option<usize>,
    pub delimiter: u8,
    /// Shard the filter over this many keys (`{key:0}`, ...); on a cluster
    /// it is always sharded ([`bloomkit_client::DEFAULT_SHARDS`] without it).
    pub shards: Option<u32>,
}

/// Where "seen before" is remembered: the client's filters, local or on a server.
enum Backend {
    /// No state file: nothing reads the filter's layout, so it is the
    /// cache-line-blocked one (one memory access per line).
    Ephemeral(BlockedFilter),
    Local(LocalFilter),
    /// The module: a Bloom or sliding-window filter over the connection
    /// that also reads its state at the end (BF.DEBUG, APBF.INFO), and
    /// the server's address as messages show it.
    Module(RedisFilter<Server>, String),
    Bitmap(RedisFilter<Server>, String),
    /// bloomkit's expandable filter on the server (`XF.*`): one key, or
    /// sharded over keys (`--shards`, and always on a cluster, over the
    /// cluster connection).
    Expandable(Box<dyn Filter>, String),
}

impl Backend {
    /// For each key: true when it was new. The filters in this process
    /// without a state file (a Bloom filter sized for the lines) or with an
    /// expandable one take the keys' hashes, made by the reader thread
    /// ([`PreHash`]); the others take the keys.
    fn add(&mut self, keys: &[&[u8]], hashes: &[(u64, u64)]) -> Result<Vec<bool>> {
        match self {
            Backend::Ephemeral(filter) => {
                let mut new = Vec::with_capacity(hashes.len());
                filter.add_each_hashed(hashes, |n| new.push(n)).map_err(|e| {
                    anyhow!(
                        "the filter cannot grow past {} lines: {e}; give a --capacity nearer the number \
                         of distinct lines, or leave it out to use an expandable filter",
                        filter.items()
                    )
                })?;
                Ok(new)
            }
            Backend::Local(filter) => {
                let added = if filter.expandable_hashing().is_some() {
                    let hashes: Vec<XfHash> = hashes
                        .iter()
                        .map(|&(hi, lo)| XfHash(u128::from(hi) << 64 | u128::from(lo)))
                        .collect();
                    filter.add_hashes(&hashes)
                } else {
                    filter.add_many(keys)
                };
                added.map_err(|e| anyhow!("the filter cannot take more items: {e}"))
            }
            Backend::Module(filter, url) => filter.add_many(keys).map_err(|e| explain(e, url, Kind::Bloom)),
            Backend::Bitmap(filter, url) => filter.add_many(keys).map_err(|e| explain(e, url, Kind::Bitmap)),
            Backend::Expandable(filter, url) => {
                filter.add_slice(keys).map_err(|e| explain(e, url, Kind::Expandable))
            }
        }
    }

    /// A window's measured state: adds within the window, generations lost
    /// early (more than its capacity arrived within a window), its capacity.
    fn window_state(&mut self) -> Result<Option<(u64, u64, u64)>> {
        Ok(match self {
            Backend::Local(filter) => filter.window().map(|w| {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                (w.items_in_window(now), w.early_losses(), w.shape().capacity())
            }),
            Backend::Module(filter, _) if filter.layout().options().window.is_some() => {
                let key = filter.layout().name().to_string();
                let info = match transfer::window_info(filter.connection(), &key) {
                    Ok(info) => info,
                    // Empty input never created the key.
                    Err(ClientError::NotFound(_)) => {
                        return Ok(Some((0, 0, filter.layout().options().capacity)))
                    }
                    Err(e) => return Err(e.into()),
                };
                let field = |name: &str| {
                    info.iter().find(|(l, _)| l == name).and_then(|(_, v)| v.parse().ok()).unwrap_or(0)
                };
                Some((field("Items in window"), field("Generations lost early"), field("Capacity")))
            }
            _ => None,
        })
    }

    /// The rate now, as its base-10 logarithm (it can be far below an f64).
    fn log10_false_positive_rate(&mut self) -> Result<f64> {
        Ok(match self {
            Backend::Ephemeral(filter) => filter.estimated_false_positive_rate().log10(),
            Backend::Local(filter) => match (filter.window(), filter.expandable_filter()) {
                (Some(w), _) => w.error_rate().log10(),
                (None, Some(xf)) => xf.guaranteed_rate().log10(),
                (None, None) => filter.chain().log10_estimated_false_positive_rate(),
            },
            // The rate it guarantees now (empty input never created the key).
            Backend::Expandable(filter, url) => match filter.info() {
                Ok(info) => info.estimated_error_rate.unwrap_or(0.0).log10(),
                Err(ClientError::NotFound(_)) => f64::NEG_INFINITY,
                Err(e) => return Err(explain(e, url, Kind::Expandable)),
            },
            Backend::Module(filter, _) if filter.layout().options().window.is_some() => {
                filter.layout().options().error_rate.log10()
            }
            Backend::Module(filter, _) => {
                let key = filter.layout().name().to_string();
                // Empty input never created the key: an empty filter.
                match describe(filter.connection(), &key) {
                    Ok((_, subs)) => log10_estimated_rate(&subs),
                    Err(ClientError::NotFound(_)) => f64::NEG_INFINITY,
                    Err(e) => return Err(e.into()),
                }
            }
            Backend::Bitmap(filter, url) => {
                let info = filter.info().map_err(|e| explain(e, url, Kind::Bitmap))?;
                let (m, k) = (info.bits.unwrap_or(1) as f64, f64::from(info.hashes.unwrap_or(1)));
                bloomkit_core::common::sizing::log10_false_positive_rate(
                    m,
                    k,
                    info.estimated_items.unwrap_or(0.0),
                )
            }
        })
    }
}

/// Which kind of filter on a server dedup uses, for its messages.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Bloom,
    Bitmap,
    Expandable,
}

/// A client error in the CLI's words: which server, and what to do.
fn explain(e: ClientError, url: &str, kind: Kind) -> anyhow::Error {
    match (e, kind) {
        (ClientError::ModuleMissing(_), Kind::Expandable) => anyhow!(
            "the server at {url} has no Bloom filter module with XF.* (bloomkit's expandable filter, \
             which dedup uses when no --capacity is given): load libbloomkit.so (redis-server \
             --loadmodule /path/to/libbloomkit.so), or give --capacity to use a BF.* filter \
             (RedisBloom has those too), or add --bitmap to keep the filter in plain Redis bitmaps"
        ),
        (ClientError::ModuleMissing(_), _) => anyhow!(
            "the server at {url} has no Bloom filter module: load libbloomkit.so \
             (redis-server --loadmodule /path/to/libbloomkit.so) or RedisBloom, \
             or add --bitmap to keep the filter in plain Redis bitmaps"
        ),
        (ClientError::WrongType(key), Kind::Bitmap) => {
            anyhow!("key '{key}' on {url} holds another type of value, not a bitmap")
        }
        (ClientError::WrongType(key), Kind::Bloom) => {
            anyhow!("key '{key}' on {url} holds another type of value, not a Bloom filter")
        }
        (ClientError::WrongType(key), Kind::Expandable) => {
            anyhow!("key '{key}' on {url} holds another type of value, not a Bloom or expandable filter")
        }
        (other, _) => anyhow!("{url}: {other}"),
    }
}

/// The error for a key that holds what dedup cannot use there, naming it
/// ("holds an expandable filter (XF)", "holds a hash") and what to do.
fn holds(key: &str, server: &Server, kind: &transfer::Kind, what_to_do: &str) -> anyhow::Error {
    anyhow!("key '{key}' on {} holds {}: {what_to_do}", server.url, transfer::describe_kind(kind))
}

/// The filter the options ask for: sharded on a server, one key on a
/// server (a bitmap, a Bloom or window filter, an expandable filter), or in
/// process (a state file's, an expandable one, the blocked one). Option
/// combinations that cannot work are refused before anything is connected.
fn open_backend(o: &Options) -> Result<Backend> {
    let capacity = o.capacity.unwrap_or(DEFAULT_CAPACITY);
    let mut options = bloomkit_client::Options {
        batch_size: SERVER_BATCH,
        ..bloomkit_client::Options::new(capacity, o.error_rate)
    };
    // No capacity, nothing that needs one: a filter that grows at its rate.
    let expandable = o.capacity.is_none() && o.window.is_none() && !o.bitmap;
    if let Some(window) = o.window {
        if o.bitmap {
            return Err(usage!(
                "--window and --window-count need the module (APBF.*) or the in-process filter, not --bitmap"
            ));
        }
        options.window = Some(window);
    }
    if o.shards.is_some() && o.redis.is_none() {
        return Err(usage!("--shards spreads the filter over keys on a server: give it with --redis"));
    }
    match (&o.redis, &o.state) {
        (Some(_), Some(_)) => {
            Err(usage!("--state keeps an in-process filter; with --redis the filter lives on the server"))
        }
        (Some(url), None) => open_on_server(o, url, options, expandable),
        (None, _) if o.bitmap => {
            Err(usage!("--bitmap keeps the filter in Redis bitmaps: give the server with --redis"))
        }
        (None, Some(path)) if path.exists() => open_state(o, path),
        (None, _) if expandable => Ok(Backend::Local(LocalFilter::expandable(xf_options(o))?)),
        (None, None) if o.window.is_none() => open_ephemeral(o, capacity),
        (None, _) => Ok(Backend::Local(LocalFilter::new(options).map_err(|e| anyhow!("{e}"))?)),
    }
}

/// The filter on the server at `url`, set up over one connection
/// ([`Place::open`]): it finds whether the server is a cluster node and
/// what the key holds, and then runs the filter (on a cluster, the
/// sharded filter runs over a cluster connection).
fn open_on_server(
    o: &Options,
    url: &str,
    mut options: bloomkit_client::Options,
    expandable: bool,
) -> Result<Backend> {
    // What the options alone decide is refused before anything is connected.
    let sharded = match o.shards {
        Some(_) => Some(sharded_layout(o, "with --shards")?),
        None => None,
    };
    let bitmap = match o.bitmap {
        true => {
            options.shape = o.shape;
            Some(Layout::bitmap_with(o.key.as_str(), o.layout, options.clone()).map_err(|e| usage!("{e}"))?)
        }
        false => None,
    };
    let place = Place::open(url)?;
    let server = match (place, sharded) {
        (Place::Single(server), None) => server,
        (place, sharded) => {
            let layout = match sharded {
                Some(layout) => layout,
                None => sharded_layout(o, "on a cluster")?,
            };
            let shown = place.url().to_string();
            return Ok(Backend::Expandable(place.into_filter(layout)?, shown));
        }
    };
    match bitmap {
        Some(layout) => open_bitmap(server, layout),
        None if expandable => open_growing(o, server, options),
        None => open_module(o, server, options),
    }
}

/// The options of an expandable filter: its first size is small, since it
/// grows a block at a time, at the rate asked for.
fn xf_options(o: &Options) -> bloomkit_client::Options {
    bloomkit_client::Options {
        batch_size: SERVER_BATCH,
        ..bloomkit_client::Options::new(EXPANDABLE_START, o.error_rate)
    }
}

/// `--bitmap`: the filter in plain Redis bitmaps, allocated whole now.
fn open_bitmap(server: Server, layout: Layout) -> Result<Backend> {
    let url = server.url.clone();
    let mut filter = RedisFilter::new(server, layout);
    // Allocate the whole bitmap now rather than growing it bit by bit
    // (a Redisson filter writes its config hash, as tryInit does).
    match filter.reserve() {
        Ok(()) | Err(ClientError::AlreadyExists(_)) => {}
        Err(e) => return Err(explain(e, &url, Kind::Bitmap)),
    }
    Ok(Backend::Bitmap(filter, url))
}

/// No `--capacity` on a server: the expandable filter (`XF.*`), or the
/// Bloom filter already in the key, which goes on as one.
fn open_growing(o: &Options, mut server: Server, options: bloomkit_client::Options) -> Result<Backend> {
    // A Bloom filter already there goes on as one (BF.INSERT).
    match transfer::kind(&mut server, &o.key)? {
        transfer::Kind::Bloom | transfer::Kind::ValkeyBloom => {
            let layout = Layout::module(o.key.as_str(), options).map_err(|e| anyhow!("{e}"))?;
            let url = server.url.clone();
            Ok(Backend::Module(RedisFilter::new(server, layout), url))
        }
        transfer::Kind::Missing | transfer::Kind::Xf => {
            // Created on the first batch (XF.RESERVE) with our error rate.
            let layout = Layout::expandable(o.key.as_str(), xf_options(o))?;
            let url = server.url.clone();
            Ok(Backend::Expandable(Box::new(RedisFilter::new(server, layout)), url))
        }
        other => Err(holds(&o.key, &server, &other, "dedup keeps a Bloom or expandable filter there")),
    }
}

/// `--capacity` or a window on a server: a Bloom filter (`BF.*`) or a
/// sliding-window one (`APBF.*`) of the module, in a key that is empty or
/// holds the same kind.
fn open_module(o: &Options, mut server: Server, options: bloomkit_client::Options) -> Result<Backend> {
    // Checked before any input is read, so that the error names
    // what the key holds rather than answering a batch WRONGTYPE.
    let kind = transfer::kind(&mut server, &o.key)?;
    let (fits, wanted) = match o.window {
        Some(_) => (matches!(kind, transfer::Kind::Window), "a sliding-window filter"),
        None => (matches!(kind, transfer::Kind::Bloom | transfer::Kind::ValkeyBloom), "a Bloom filter"),
    };
    match kind {
        transfer::Kind::Missing => {}
        _ if fits => {}
        transfer::Kind::Xf if o.window.is_none() => {
            let to_do = "dedup --capacity keeps a Bloom filter there; leave out --capacity to go on \
                         with the expandable filter, or give another --key";
            return Err(holds(&o.key, &server, &kind, to_do));
        }
        _ => return Err(holds(&o.key, &server, &kind, &format!("dedup keeps {wanted} there"))),
    }
    // Created on the first batch (BF.INSERT or APBF.RESERVE) with our capacity and error rate.
    let layout = Layout::module(o.key.as_str(), options).map_err(|e| anyhow!("{e}"))?;
    let url = server.url.clone();
    Ok(Backend::Module(RedisFilter::new(server, layout), url))
}

/// An existing `--state` file, whose window (or none) must be the one asked for.
fn open_state(o: &Options, path: &std::path::Path) -> Result<Backend> {
    let filter =
        LocalFilter::open(path).with_context(|| format!("cannot load the state file {}", path.display()))?;
    if filter.window().is_some() != o.window.is_some() {
        bail!(
            "the state file {} holds a {} filter; use {} or another file",
            path.display(),
            if filter.window().is_some() { "sliding-window" } else { "plain" },
            if filter.window().is_some() { "the same --window/--window-count" } else { "no window" }
        );
    }
    Ok(Backend::Local(filter))
}

/// No state, no server, a capacity: the cache-line-blocked filter. Too
/// large a filter is a usage error, unless memory ran out.
fn open_ephemeral(o: &Options, capacity: u64) -> Result<Backend> {
    Ok(Backend::Ephemeral(BlockedFilter::with_capacity(capacity, o.error_rate).map_err(|e| {
        let rate = match o.error_rate {
            r if r >= 1e-4 => r.to_string(),
            r => format!("{r:e}"),
        };
        let why = format!("cannot make a filter for {capacity} lines at error rate {rate}: {e}");
        match e {
            BlockedError::OutOfMemory { .. } => anyhow!(why),
            _ => usage!("{why}"),
        }
    })?))
}

/// An expandable filter sharded over keys in distinct hash slots
/// (`Layout::sharded(.., Over::Expandable, ..)`), with `--shards` on one
/// server or on a cluster (`place_words` says which, for the message; there
/// each batch reaches every master at once over the cluster connection):
/// the options it refuses are refused here.
fn sharded_layout(o: &Options, place_words: &str) -> Result<Layout> {
    if o.bitmap || o.window.is_some() || o.capacity.is_some() {
        return Err(usage!(
            "{place_words}, dedup keeps a sharded expandable filter (XF, over keys {{KEY:0}}, {{KEY:1}}, ...), \
             which needs no --capacity; --capacity, --bitmap and the windows are for a filter in one key (the \
             client library shards Bloom filters and bitmaps too: Layout::sharded)"
        ));
    }
    let shards = o.shards.unwrap_or(bloomkit_client::DEFAULT_SHARDS);
    Layout::sharded(o.key.as_str(), shards, bloomkit_client::Over::Expandable, xf_options(o))
        .map_err(|e| usage!("{e}"))
}

/// How the reader thread hashes each key for the filter in this process,
/// so that the main thread, which the filter keeps busy, only probes and
/// writes: the Bloom filter's hashes, or the expandable filter's (by a copy
/// of its hashing, the secret's own function).
#[derive(Clone, Copy)]
enum PreHash {
    /// A filter on a server, which takes the keys.
    No,
    Blocked,
    Expandable(Hashing),
}

impl PreHash {
    fn of(backend: &Backend) -> PreHash {
        match backend {
            Backend::Ephemeral(_) => PreHash::Blocked,
            Backend::Local(filter) => filter.expandable_hashing().map_or(PreHash::No, PreHash::Expandable),
            _ => PreHash::No,
        }
    }

    fn hashes(self) -> bool {
        !matches!(self, PreHash::No)
    }

    /// The key's hash as two words (an expandable filter's 128 bits, high first).
    fn push(self, key: &[u8], to: &mut Vec<(u64, u64)>) {
        match self {
            PreHash::No => {}
            PreHash::Blocked => to.push(BlockedFilter::hash(key)),
            PreHash::Expandable(hashing) => {
                let h = hashing.hash(key).0;
                to.push(((h >> 64) as u64, h as u64));
            }
        }
    }
}

/// A block of whole lines and what the reader thread found in it.
#[derive(Default)]
struct Parsed {
    buf: Vec<u8>,
    /// Line ends, just after each `\n` (the last line may have none).
    ends: Vec<usize>,
    /// Each line's key as a range of `buf`, if it has one.
    keys: Vec<Option<(usize, usize)>>,
    /// The keys' hashes for the in-process filter, in line order.
    hashes: Vec<(u64, u64)>,
}

impl Parsed {
    /// Gives back what a huge line grew the buffers to.
    fn shrink(&mut self) {
        if self.buf.capacity() > 2 * BLOCK_BYTES {
            self.buf = Vec::new();
        }
        for cap in [self.ends.capacity(), self.keys.capacity(), self.hashes.capacity()] {
            if cap > 2 * MAX_LINES {
                *self = Parsed::default();
                return;
            }
        }
    }

    fn fill(&mut self, block: &[u8], field: Option<usize>, delimiter: u8, pre_hash: PreHash) {
        self.buf.clear();
        self.buf.extend_from_slice(block);
        self.ends.clear();
        self.ends.extend(memchr::memchr_iter(b'\n', block).map(|i| i + 1));
        if block.last() != Some(&b'\n') {
            self.ends.push(block.len());
        }
        self.keys.clear();
        self.hashes.clear();
        let mut from = 0;
        for &end in &self.ends {
            let key = key_of(&self.buf[from..end], field, delimiter);
            if let Some(k) = key {
                pre_hash.push(k, &mut self.hashes);
            }
            self.keys.push(key.map(|k| {
                let start = k.as_ptr() as usize - self.buf.as_ptr() as usize;
                (start, start + k.len())
            }));
            from = end;
        }
    }
}

/// What the reader thread (or the signal handler) tells the main thread.
enum Message {
    Block(Result<Parsed>),
    /// Every input was read.
    End,
    /// SIGINT or SIGTERM: stop after what was already written.
    Interrupted,
}

/// The reader thread: every input in order, block by block; buffers come
/// back through `recycled` so that blocks are not allocated anew.
fn read_all(
    paths: Vec<Option<PathBuf>>,
    field: Option<usize>,
    delimiter: u8,
    pre_hash: PreHash,
    to_main: mpsc::SyncSender<Message>,
    recycled: mpsc::Receiver<Parsed>,
) {
    read_inputs(paths, field, delimiter, pre_hash, &to_main, recycled);
    let _ = to_main.send(Message::End);
}

fn read_inputs(
    paths: Vec<Option<PathBuf>>,
    field: Option<usize>,
    delimiter: u8,
    pre_hash: PreHash,
    to_main: &mpsc::SyncSender<Message>,
    recycled: mpsc::Receiver<Parsed>,
) {
    for path in paths {
        let reader: Box<dyn Read> = match &path {
            None => Box::new(io::stdin()),
            Some(p) => match File::open(p) {
                Ok(f) => Box::new(f),
                Err(e) => {
                    let _ = to_main.send(Message::Block(Err(
                        anyhow::Error::new(e).context(format!("cannot open {}", p.display()))
                    )));
                    return;
                }
            },
        };
        let mut blocks = Blocks::new(reader);
        loop {
            let block = match blocks.next_block() {
                Ok(Some(block)) => block,
                Ok(None) => break,
                Err(e) => {
                    let name =
                        path.as_ref().map_or("standard input".to_string(), |p| p.display().to_string());
                    let _ = to_main.send(Message::Block(Err(
                        anyhow::Error::new(e).context(format!("cannot read {name}"))
                    )));
                    return;
                }
            };
            let mut parsed = recycled.try_recv().unwrap_or_default();
            parsed.shrink();
            parsed.fill(block, field, delimiter, pre_hash);
            if to_main.send(Message::Block(Ok(parsed))).is_err() {
                return; // the main thread stopped (an error, or a closed pipe)
            }
        }
    }
}

/// Lines handed out in one block at most (see [`Blocks::next_block`]).
const MAX_LINES: usize = 16 << 10;

/// This process's peak resident memory (Linux: VmHWM), for the summary.
fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Bytes read at a time. With one block waiting in the channel, one being
/// read and one being probed, each with its line offsets and hashes
/// (40 bytes a line: short lines cost more than their bytes), dedup holds a
/// few MiB beyond its filter and its binary: the promise is the filter plus
/// 16 MiB. Blocks of 256 KiB measured as fast as 4 MiB ones on 1e7 lines.
const BLOCK_BYTES: usize = 256 << 10;

/// Reads input in large blocks and hands out whole lines without copying
/// them one by one: the partial last line of a block starts the next.
struct Blocks<R> {
    input: R,
    buf: Vec<u8>,
    /// Bytes of `buf` already handed out.
    start: usize,
    filled: usize,
    eof: bool,
}

impl<R: Read> Blocks<R> {
    fn new(input: R) -> Blocks<R> {
        Blocks::with_size(input, BLOCK_BYTES)
    }

    fn with_size(input: R, size: usize) -> Blocks<R> {
        Blocks { input, buf: vec![0; size.max(1)], start: 0, filled: 0, eof: false }
    }

    /// The next run of whole lines (at the end of the input, the rest,
    /// which may lack a final `\n`); `None` when nothing is left.
    fn next_block(&mut self) -> io::Result<Option<&[u8]>> {
        self.buf.copy_within(self.start..self.filled, 0);
        self.filled -= self.start;
        self.start = 0;
        // After a line longer than a block, give the memory back.
        if self.buf.len() > 2 * BLOCK_BYTES && self.filled < BLOCK_BYTES {
            self.buf.truncate(BLOCK_BYTES);
            self.buf.shrink_to_fit();
        }
        loop {
            while !self.eof && self.filled < self.buf.len() {
                match self.input.read(&mut self.buf[self.filled..]) {
                    Ok(0) => self.eof = true,
                    Ok(n) => self.filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if self.eof {
                let cut = memchr::memchr_iter(b'\n', &self.buf[..self.filled]).nth(MAX_LINES - 1);
                self.start = cut.map_or(self.filled, |c| c + 1);
                return Ok((self.start > 0).then(|| &self.buf[..self.start]));
            }
            match memchr::memrchr(b'\n', &self.buf[..self.filled]) {
                Some(last) => {
                    // At most MAX_LINES lines a block: short lines cost 48
                    // bytes of offsets and hashes each, more than their text.
                    let end =
                        memchr::memchr_iter(b'\n', &self.buf[..last + 1]).nth(MAX_LINES - 1).unwrap_or(last);
                    self.start = end + 1;
                    return Ok(Some(&self.buf[..end + 1]));
                }
                // A line longer than the buffer: make room and read on.
                None => self.buf.resize(self.buf.len() * 2, 0),
            }
        }
    }
}

/// The key of a line: the line without `\n`, or field `n` (1-based) of it.
fn key_of(line: &[u8], field: Option<usize>, delimiter: u8) -> Option<&[u8]> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    match field {
        None => Some(line),
        Some(n) => line.split(|&b| b == delimiter).nth(n - 1),
    }
}

struct Counts {
    read: u64,
    written: u64,
    duplicates: u64,
    without_field: u64,
}

/// Checks every path before any input is read or output written: each
/// input opens and is not a directory, and the state file's directory takes
/// a new file (the state is saved there at the end). Returns the inputs'
/// total size when all are regular files, for the progress bar.
fn check_paths(o: &Options) -> Result<Option<u64>> {
    let mut total = Some(0u64);
    for p in &o.inputs {
        if is_stdin(p) {
            total = None;
            continue;
        }
        let meta = std::fs::metadata(p).with_context(|| format!("cannot open {}", p.display()))?;
        if meta.is_dir() {
            bail!("cannot read {}: it is a directory", p.display());
        }
        // Opening a FIFO here would take the writer's first data from the
        // reader: only regular files are tried now.
        if meta.is_file() {
            File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
        }
        total = total.filter(|_| meta.is_file()).map(|t| t + meta.len());
    }
    if o.inputs.is_empty() {
        total = None;
    }
    if let Some(state) = &o.state {
        if state.is_dir() {
            bail!("the state file {} is a directory", state.display());
        }
        let dir = state.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        // (tempfile's error names its random file: say what matters instead.)
        if let Err(e) = tempfile::NamedTempFile::new_in(dir) {
            let why = std::io::Error::from(e.kind());
            bail!(
                "cannot write the state file {}: no file can be created in {} ({why}); choose a \
                 folder that exists and is writable",
                state.display(),
                dir.display()
            );
        }
    }
    Ok(total)
}

/// Standard output that notes when its reader went away (`| head`)
/// instead of failing the write, so that dedup stops after the block it is
/// on and says what that means for its state (see [`closed_output`]).
struct Watched<W: Write> {
    out: W,
    closed: bool,
}

impl<W: Write> Write for Watched<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        match self.out.write(buf) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(buf.len())
            }
            other => other,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.out.flush() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            other => other,
        }
    }
}

/// Standard output closed before the end: every line read is in the
/// filter (a block is added before it is written), but the reader did not
/// take all that was written. Without a state this ends quietly, as every
/// command does at a closed pipe. A `--state` file is left as it was, since
/// saving it would remember lines nobody received, which the next run would
/// then never write; a server's filter already holds them, which is said.
/// Either way dedup fails (status 1), so that `set -o pipefail` sees it.
fn closed_output(o: &Options, counts: &Counts) -> Result<()> {
    let read = plural(counts.read, "line", "lines");
    match (&o.state, &o.redis) {
        (Some(path), _) => bail!(
            "standard output was closed (its reader stopped reading) after {read} were read; the state \
             file {} was NOT updated, since saving it would also remember lines that were read but never \
             written, which the next run would then not write: run again with the whole output read",
            path.display()
        ),
        (None, Some(_)) => bail!(
            "standard output was closed (its reader stopped reading) after {read} were read; the filter \
             '{}' on the server already holds all of them, some never written, and a run over the same \
             input will not write those",
            o.key
        ),
        (None, None) => Err(io::Error::from(io::ErrorKind::BrokenPipe).into()),
    }
}

/// `-` names standard input.
fn is_stdin(path: &std::path::Path) -> bool {
    path.as_os_str() == "-"
}

/// A bar with percentage, rate and ETA when the input's size is known
/// (files), a spinner with counts otherwise (pipes); nothing when standard
/// error is not a terminal.
fn progress_for(total: Option<u64>) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(bytes) => {
            let bar = ProgressBar::new(bytes);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:30} {percent:>3}% {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {msg}",
                )
                .expect("valid template"),
            );
            bar
        }
        None => {
            let bar = ProgressBar::new_spinner();
            bar.set_style(ProgressStyle::with_template("{spinner} {bytes} {msg}").expect("valid template"));
            bar
        }
    };
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Standard output as dedup writes it: buffered, and watched for a reader
/// that went away (see [`Watched`]).
type Output = BufWriter<Watched<io::StdoutLock<'static>>>;

/// The command in four steps, each on one screen: open (paths checked, the
/// filter opened, the reader started), stream (every block added and its
/// kept lines written), close (the output flushed, the state saved, a
/// closed output or an interrupt reported) and report (the summary).
pub fn run(o: &Options) -> Result<()> {
    let started = Instant::now();
    let total = check_paths(o)?;
    let mut backend = open_backend(o)?;
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 18, Watched { out: stdout.lock(), closed: false });
    let progress = progress_for(total);
    let mut counts = Counts { read: 0, written: 0, duplicates: 0, without_field: 0 };
    let paths = input_paths(o);
    // A reader thread reads, splits and (for the in-process filter) hashes
    // the next block while this one probes the filter and writes.
    let pre_hash = PreHash::of(&backend);
    let (from_reader, to_reader) = start_reader(o, paths, pre_hash);
    let stream = Stream { o, pre_hash, started, progress: &progress };
    let interrupted = stream.all(&mut backend, &from_reader, &to_reader, &mut out, &mut counts)?;
    if out.get_ref().closed || out.flush().is_ok_and(|()| out.get_ref().closed) {
        progress.finish_and_clear();
        return closed_output(o, &counts);
    }
    // The bar goes before anything else is printed, on either stream.
    progress.finish_and_clear();
    if o.count_only && !interrupted {
        writeln!(
            out,
            "{}, {} unique, {}",
            plural(counts.read, "line", "lines"),
            counts.read - counts.duplicates,
            plural(counts.duplicates, "duplicate", "duplicates")
        )?;
    }
    // What was written is in the filter already (each block is added
    // before its lines are written), so flushing it and then saving the
    // filter keeps the state file a superset of the output.
    let flushed = out.flush();
    if let (Backend::Local(filter), Some(path)) = (&backend, &o.state) {
        filter.save(path).with_context(|| format!("cannot save the state file {}", path.display()))?;
        crate::interrupt::set_unfinished("");
    }
    if interrupted {
        return Err(stopped(o, &backend, &counts));
    }
    flushed?;
    report(o, &mut backend, &counts, started)
}

/// The inputs in order, `None` for standard input (no paths, or `-`);
/// says how to end the input when standard input is a terminal, since
/// dedup would otherwise seem to hang there.
fn input_paths(o: &Options) -> Vec<Option<PathBuf>> {
    let inputs: Vec<Option<&PathBuf>> = if o.inputs.is_empty() {
        vec![None]
    } else {
        o.inputs.iter().map(|p| Some(p).filter(|p| !is_stdin(p))).collect()
    };
    if inputs.iter().any(|p| p.is_none()) && io::stdin().is_terminal() {
        say!(
            "bloomkit dedup: reading lines from standard input, which is a terminal: type them, end \
             with Ctrl-D, or give a file (or pipe one in)"
        );
    }
    inputs.iter().map(|p| p.cloned()).collect()
}

/// Starts the reader thread over `paths`, with the interrupt handling it
/// needs: the signal handler wakes the main thread through the same
/// channel as the blocks. Returns where blocks arrive and where their
/// buffers go back for reuse.
fn start_reader(
    o: &Options,
    paths: Vec<Option<PathBuf>>,
    pre_hash: PreHash,
) -> (mpsc::Receiver<Message>, mpsc::Sender<Parsed>) {
    let (to_main, from_reader) = mpsc::sync_channel::<Message>(1);
    // SIGINT/SIGTERM: the main thread stops after the block it is on (or
    // at once if it is waiting for one) with everything it wrote in its
    // filter, and saves the state; see `interrupt.rs`.
    crate::interrupt::install();
    let wake = to_main.clone();
    crate::interrupt::set_waker(move || {
        // A full channel means the main thread is busy, not waiting: it
        // checks the flag after each block.
        let _ = wake.try_send(Message::Interrupted);
    });
    if let Some(state) = &o.state {
        crate::interrupt::set_unfinished(format!(
            "the state file {} was NOT updated with this run's lines",
            state.display()
        ));
    }
    let (to_reader, recycled) = mpsc::channel::<Parsed>();
    let (field, delimiter) = (o.field, o.delimiter);
    std::thread::spawn(move || read_all(paths, field, delimiter, pre_hash, to_main, recycled));
    (from_reader, to_reader)
}

/// What streaming the blocks needs besides the filter, the output and the
/// counts it changes.
struct Stream<'a> {
    o: &'a Options,
    /// How the reader hashed the keys (the in-process filters take hashes).
    pre_hash: PreHash,
    started: Instant,
    progress: &'a ProgressBar,
}

impl Stream<'_> {
    /// Every block from the reader, until the end, an error, an interrupt
    /// or a closed output. Returns whether it was interrupted.
    fn all(
        &self,
        backend: &mut Backend,
        from_reader: &mpsc::Receiver<Message>,
        to_reader: &mpsc::Sender<Parsed>,
        out: &mut Output,
        counts: &mut Counts,
    ) -> Result<bool> {
        for message in from_reader.iter() {
            let parsed = match message {
                Message::Block(parsed) => parsed?,
                Message::End => break,
                Message::Interrupted => return Ok(true),
            };
            self.block(backend, &parsed, out, counts)?;
            let rate = counts.read as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
            self.progress.inc(parsed.buf.len() as u64);
            self.progress.set_message(format!(
                "{} lines, {:.0} lines/s, {}",
                counts.read,
                rate,
                plural(counts.duplicates, "duplicate", "duplicates")
            ));
            let _ = to_reader.send(parsed);
            if crate::interrupt::interrupted() {
                return Ok(true);
            }
            if out.get_ref().closed {
                break;
            }
        }
        Ok(false)
    }

    /// One block: its keys added batch by batch, and the lines to keep
    /// (new ones, or with `--duplicates` the others) written as contiguous
    /// runs of the block rather than line by line. The key slices borrow
    /// the block, so they live here, until the block goes back to the reader.
    fn block(
        &self,
        backend: &mut Backend,
        parsed: &Parsed,
        out: &mut Output,
        counts: &mut Counts,
    ) -> Result<()> {
        let (o, pre_hash) = (self.o, self.pre_hash);
        let block = &parsed.buf[..];
        let mut keys: Vec<&[u8]> = Vec::with_capacity(BATCH);
        let mut at = 0;
        let mut hashed = 0;
        for (first, ends) in parsed.ends.chunks(BATCH).enumerate() {
            let line_keys = &parsed.keys[first * BATCH..first * BATCH + ends.len()];
            let keyed_here = line_keys.iter().filter(|k| k.is_some()).count();
            keys.clear();
            if !pre_hash.hashes() {
                keys.extend(line_keys.iter().flatten().map(|&(a, b)| &block[a..b]));
            }
            let hashes: &[(u64, u64)] =
                if pre_hash.hashes() { &parsed.hashes[hashed..hashed + keyed_here] } else { &[] };
            hashed += hashes.len();
            let new = backend.add(&keys, hashes)?;
            counts.without_field += (ends.len() - keyed_here) as u64;
            // Kept lines are written as contiguous runs of the block.
            let (mut run_start, mut run_end) = (at, at);
            let mut answers = new.iter();
            let mut from = at;
            for (&e, key) in ends.iter().zip(line_keys) {
                // Lines without the field pass through as unique.
                let fresh = if key.is_some() { *answers.next().expect("one answer per key") } else { true };
                counts.read += 1;
                counts.duplicates += u64::from(!fresh);
                if !o.count_only && fresh != o.duplicates {
                    if from != run_end {
                        out.write_all(&block[run_start..run_end])?;
                        run_start = from;
                    }
                    run_end = e;
                    counts.written += 1;
                }
                from = e;
            }
            out.write_all(&block[run_start..run_end])?;
            if run_end > run_start && block[run_end - 1] != b'\n' {
                out.write_all(b"\n")?;
            }
            at = from;
        }
        Ok(())
    }
}

/// The error for an interrupted run: how far it got and where what it
/// wrote is remembered (the state is saved before this is made).
fn stopped(o: &Options, backend: &Backend, counts: &Counts) -> anyhow::Error {
    let kept = match (backend, &o.state, &o.redis) {
        (Backend::Local(_), Some(path), _) => {
            format!("the state file {} holds every line written", path.display())
        }
        (_, _, Some(_)) => format!("the filter '{}' on the server holds every line written", o.key),
        _ => "nothing was saved (no --state)".to_string(),
    };
    crate::interrupt::Stopped(format!(
        "bloomkit dedup: interrupted after {} ({} written); {kept}",
        plural(counts.read, "line", "lines"),
        counts.written
    ))
    .into()
}

/// The summary on standard error after a whole run: counts, speed, the
/// filter's rate and size, memory, a window's state, lines without the
/// field; and a warning when a window forgot lines early.
fn report(o: &Options, backend: &mut Backend, counts: &Counts, started: Instant) -> Result<()> {
    let elapsed = started.elapsed().as_secs_f64();
    let fp_rate = crate::units::format_rate(backend.log10_false_positive_rate()?);
    let mut summary = format!(
        "bloomkit dedup: {} read, {} written, {}, {:.2} s, {:.0} lines/s, \
         filter false-positive rate now {}",
        plural(counts.read, "line", "lines"),
        counts.written,
        plural(counts.duplicates, "duplicate", "duplicates"),
        elapsed,
        counts.read as f64 / elapsed.max(1e-9),
        fp_rate
    );
    if let Backend::Ephemeral(filter) = &backend {
        summary += &format!(", filter {}", human_bytes_exact(filter.bytes() as f64));
    }
    if let Some(xf) = match &backend {
        Backend::Local(filter) => filter.expandable_filter(),
        _ => None,
    } {
        summary += &format!(
            ", expandable filter {} in {}",
            human_bytes_exact(xf.size_bytes() as f64),
            plural(xf.block_count(), "block", "blocks")
        );
    }
    if let Some(peak) = peak_memory() {
        summary += &format!(", peak memory {}", human_bytes_exact(peak as f64));
    }
    let window = backend.window_state()?;
    if let Some((in_window, lost, capacity)) = window {
        summary += &format!(
            ", window holds {in_window} lines of its capacity {capacity}, {lost} generations lost early"
        );
    }
    if counts.without_field > 0 {
        summary += &format!(
            ", {} without field {} kept as unique",
            plural(counts.without_field, "line", "lines"),
            o.field.unwrap_or(0)
        );
    }
    say!("{summary}");
    if let Some((_, lost, capacity)) = window.filter(|w| w.1 > 0) {
        say!(
            "bloomkit dedup: warning: more lines than the window's capacity ({capacity}) arrived within \
             one window, so the oldest of them were forgotten early ({lost} generations) and some of \
             their repeats may have been written again; raise --capacity to the most lines per window"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{key_of, Blocks};

    #[test]
    fn blocks_hand_out_whole_lines() {
        let input = b"a\nlonger than the buffer\nb\n\nlast without newline";
        for size in [1, 3, 8, 64] {
            let mut blocks = Blocks::with_size(&input[..], size);
            let mut seen = Vec::new();
            while let Some(block) = blocks.next_block().unwrap() {
                assert!(block.ends_with(b"\n") || block.ends_with(b"newline"), "{size}: {block:?}");
                seen.extend_from_slice(block);
            }
            assert_eq!(seen, input, "buffer of {size}");
        }
    }

    #[test]
    fn keys_of_lines_and_fields() {
        assert_eq!(key_of(b"a,b,c\n", None, b','), Some(&b"a,b,c"[..]));
        assert_eq!(key_of(b"a,b,c\n", Some(2), b','), Some(&b"b"[..]));
        assert_eq!(key_of(b"a,b,c\n", Some(3), b','), Some(&b"c"[..]));
        assert_eq!(key_of(b"a,b\n", Some(3), b','), None);
        assert_eq!(key_of(b"no newline", None, b','), Some(&b"no newline"[..]));
    }
}
