//! What a filter is asked to be, and what it reports about itself.

use std::time::Duration;

use crate::error::{Error, Result};

/// Largest bitmap Redis keeps in one string: 512 MiB.
pub const MAX_STRING_BITS: u64 = 1 << 32;

/// A sliding window: the filter answers "seen within the window" and
/// forgets older items (module `APBF.*` and local backends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// The last `capacity` items added.
    Count,
    /// The last stretch of time (whole seconds on a server); `capacity` is
    /// the most items expected within it.
    Time(Duration),
}

/// Sizing and behaviour shared by every backend.
///
/// One way to set each option: its public field, from [`Options::new`]'s
/// defaults with struct update syntax (there are no setter methods):
///
/// ```
/// use std::time::Duration;
/// use bloomkit_client::Options;
///
/// let options = Options { ttl: Some(Duration::from_secs(86_400)), batch_size: 500, ..Options::new(1_000_000, 0.001) };
/// assert_eq!(options.capacity, 1_000_000);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Items the filter holds at the target error rate; for an expandable
    /// filter only where it starts (it grows past it, up to
    /// [`Options::max_capacity`]).
    pub capacity: u64,
    /// Target false-positive rate, strictly between 0 and 1.
    pub error_rate: f64,
    /// Lifetime of the filter's keys, set when a key is created (by `reserve`
    /// or by the first write) and, unless [`Options::refresh_ttl`], never
    /// extended by later writes. Server backends only.
    pub ttl: Option<Duration>,
    /// Every write sets [`Options::ttl`] again, atomically with its adds and
    /// in the same round trip (each batch is one `EVAL` of the add command
    /// and `PEXPIRE`), so that a key lives `ttl` past its last write: the
    /// "already seen in the last 30 days" pattern. Module layouts (Bloom,
    /// cuckoo, expandable, windows, and their shards); bitmap layouts refuse
    /// it. At most [`MAX_REFRESH_BATCH`] items per batch.
    pub refresh_ttl: bool,
    /// Items per server command. Bounds how long one command holds the
    /// server; a larger call is split into several pipelined commands.
    pub batch_size: usize,
    /// Bits per Redis key for the bitmap backend (64 to 2^32, [`MAX_STRING_BITS`]); a larger filter is split
    /// over several keys in one hash slot.
    pub max_key_bits: u64,
    /// Dedup over a sliding window instead of forever.
    pub window: Option<Window>,
    /// Bitmap layouts: this many bits and hashes, in place of the sizing
    /// the layout derives from `capacity` and `error_rate` (required for
    /// `php-bkdr`, whose code is given them; for a Guava file restored
    /// without its parameters; `capacity` then only labels the filter).
    pub shape: Option<(u64, u32)>,
    /// Expandable filters ([`crate::Layout::expandable`],
    /// [`crate::LocalFilter::expandable`]): the most items it will hold,
    /// its error rate guaranteed up to there (default: 2^36, so that only
    /// memory stops it). `capacity` is then only its first size. For a
    /// sharded one ([`crate::Over::Expandable`]), the whole filter's: each
    /// shard takes its share (see [`crate::Layout::sharded`]).
    pub max_capacity: Option<u64>,
}

/// The most items per batch with [`Options::refresh_ttl`]: each batch's
/// arguments pass through a script, whose interpreter unpacks at most
/// 8,000 values at once.
pub const MAX_REFRESH_BATCH: usize = 7_000;

impl Options {
    /// A filter for `capacity` items at `error_rate`, no TTL, 1000 items per
    /// command, 512 MiB per bitmap key.
    pub fn new(capacity: u64, error_rate: f64) -> Options {
        Options {
            capacity,
            error_rate,
            ttl: None,
            refresh_ttl: false,
            batch_size: 1000,
            max_key_bits: MAX_STRING_BITS,
            window: None,
            shape: None,
            max_capacity: None,
        }
    }

    /// The core parameters of an expandable filter, checked against its
    /// ranges (error rate 1e-9 to 0.5, sizes up to 2^40).
    pub(crate) fn xf_params(&self) -> Result<bloomkit_core::xf::XfParams> {
        let params = bloomkit_core::xf::XfParams {
            error_rate: self.error_rate,
            capacity: self.capacity,
            max_capacity: self.max_capacity.unwrap_or(bloomkit_core::xf::DEFAULT_MAX_CAPACITY),
        };
        params.check().map_err(|e| {
            Error::InvalidOptions(format!(
                "an expandable filter: {}",
                e.to_string().trim_start_matches("ERR ")
            ))
        })?;
        Ok(params)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if !(self.error_rate > 0.0 && self.error_rate < 1.0) {
            return Err(Error::InvalidOptions(format!(
                "error rate {} must be strictly between 0 and 1",
                self.error_rate
            )));
        }
        if self.capacity == 0 {
            return Err(Error::InvalidOptions("capacity must be at least 1".into()));
        }
        if self.batch_size == 0 {
            return Err(Error::InvalidOptions("batch size must be at least 1".into()));
        }
        if self.max_key_bits < 64 || self.max_key_bits > MAX_STRING_BITS {
            return Err(Error::InvalidOptions(format!(
                "bits per key {} must be between 64 and 2^32 (Redis's 512 MiB string limit)",
                self.max_key_bits
            )));
        }
        if matches!(self.window, Some(Window::Time(t)) if t.as_millis() == 0) {
            return Err(Error::InvalidOptions("a time window must be at least one millisecond".into()));
        }
        if matches!(self.ttl, Some(t) if t.as_millis() == 0) {
            return Err(Error::InvalidOptions("a TTL must be at least one millisecond".into()));
        }
        if self.refresh_ttl && self.ttl.is_none() {
            return Err(Error::InvalidOptions("refresh_ttl needs a ttl to set again".into()));
        }
        if self.refresh_ttl && self.batch_size > MAX_REFRESH_BATCH {
            return Err(Error::InvalidOptions(format!(
                "with refresh_ttl, a batch holds at most {MAX_REFRESH_BATCH} items (the script's arguments); \
                 got batch_size {}",
                self.batch_size
            )));
        }
        Ok(())
    }

    pub(crate) fn ttl_millis(&self) -> Option<u64> {
        self.ttl.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
    }
}

/// What a filter reports about itself; fields a backend cannot know are `None`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Info {
    /// "module", "bitmap", "cuckoo", "expandable", "local", "local
    /// expandable", or "sharded module"/"sharded bitmap"/"sharded expandable".
    pub backend: String,
    /// The keys that hold it (none for a local filter).
    pub keys: Vec<String>,
    /// Items it holds at its error rate (all sub-filters or shards; an
    /// expandable filter's max capacity, summed over shards).
    pub capacity: u64,
    /// Memory of its bit arrays (the module's own accounting where it has one).
    pub bytes: u64,
    /// Items added: exact for the module, expandable and local backends.
    pub items: Option<u64>,
    /// Items estimated from the bits set (bitmap backend).
    pub estimated_items: Option<f64>,
    /// Sub-filters of a scalable filter.
    pub filters: Option<u64>,
    /// Bits and hashes per item of a bitmap.
    pub bits: Option<u64>,
    pub hashes: Option<u32>,
    /// A bitmap's layout name (`guava`, `redisson`, ...).
    pub layout: Option<String>,
    /// Fraction of a bitmap's bits that are set.
    pub fill: Option<f64>,
    /// The false-positive rate it answers with now: a bitmap's
    /// `fill ^ hashes`; the bound an expandable filter guarantees. For a
    /// sharded expandable filter, the largest of its shards' bounds: an
    /// absent item is looked up in its own shard only, so that bound holds
    /// for every item whichever shard it goes to (the shard hash is no
    /// secret, so items can be chosen to go to the worst one); the mean of
    /// the shards' bounds, the rate over random items, is at most it.
    pub estimated_error_rate: Option<f64>,
    /// Shards of a sharded filter.
    pub shards: Option<u32>,
}
