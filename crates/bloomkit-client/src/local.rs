//! The core filters in process, with a file for persistence: the scalable
//! Bloom filter, a sliding window, or the expandable filter.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use std::io::Read;
use std::time::{SystemTime, UNIX_EPOCH};

use bloomkit_core::apbf::{self, Apbf};
use bloomkit_core::bf::args::Defaults;
use bloomkit_core::bf::{file, Chain, ChainParams};
use bloomkit_core::xf::{Hashing, XfFilter, XfHash};
use bloomkit_core::Limits;

use crate::error::{Error, Result};
use crate::options::{Info, Options, Window};
use crate::Filter;

/// Milliseconds since the Unix epoch: the clock of local time windows.
fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A scalable filter in this process, laid out as RedisBloom lays out
/// `BF.*` filters. Its file holds the same bytes as the SCANDUMP of the
/// same filter on a server, so `bloomkit restore` can load it into one.
///
/// ```
/// use bloomkit_client::{Filter, LocalFilter, Options};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("seen.bloom");
/// let mut seen = LocalFilter::new(Options::new(100_000, 0.001))?;
/// assert!(seen.add(b"order-17")?);
/// assert!(!seen.add(b"order-17")?);
/// seen.save(&path)?;
///
/// let mut again = LocalFilter::open(&path)?;
/// assert!(again.contains(b"order-17")?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LocalFilter {
    chain: Chain,
    params: ChainParams,
    /// With [`Options::window`]: the sliding-window filter, used instead of `chain`.
    window: Option<Apbf>,
    /// Made by [`LocalFilter::expandable`]: the expandable filter, used
    /// instead of `chain` (boxed: the others are small beside it).
    xf: Option<Box<XfFilter>>,
}

impl LocalFilter {
    /// An empty filter that grows (doubling) when it reaches its capacity.
    pub fn new(options: Options) -> Result<LocalFilter> {
        options.validate()?;
        let params = ChainParams {
            capacity: options.capacity,
            error: options.error_rate,
            ..Defaults::REDISBLOOM.params()
        };
        let window = match options.window {
            None => None,
            Some(w) => {
                let w = match w {
                    Window::Count => apbf::Window::Count,
                    Window::Time(t) => apbf::Window::Time { millis: t.as_millis().max(1) as u64 },
                };
                let params =
                    apbf::ApbfParams { error: options.error_rate, capacity: options.capacity, window: w };
                Some(
                    Apbf::new(params, now_ms(), Limits::NONE)
                        .map_err(|e| Error::InvalidOptions(e.to_string()))?,
                )
            }
        };
        let chain =
            Chain::new(if window.is_some() { Defaults::REDISBLOOM.params() } else { params }, Limits::NONE)?;
        Ok(LocalFilter { chain, params, window, xf: None })
    }

    /// An empty expandable filter (bloomkit's `XF.*` filter, in process):
    /// it grows a block at a time as items arrive, at the options' error rate at
    /// every size up to [`Options::max_capacity`], so the capacity is only
    /// its first size. Items can be removed ([`Filter::remove`]) and
    /// counted ([`LocalFilter::count_of`]); an add stores an item only when
    /// it is not in yet. Its file ([`LocalFilter::save`]) is a dump of the
    /// same filter on a server (`bloomkit restore` loads it into one).
    ///
    /// ```
    /// use bloomkit_client::{Filter, LocalFilter, Options};
    ///
    /// // A first size of 1000 lines, and no guess at how many will come.
    /// let mut seen = LocalFilter::expandable(Options::new(1000, 0.001))?;
    /// let mut stored = 0;
    /// for i in 0..100_000u32 {
    ///     // false: already in (about 0.1% of new items, by chance); nothing stored.
    ///     stored += u64::from(seen.add(&i.to_le_bytes())?);
    /// }
    /// assert!(stored > 99_800);
    /// assert!(seen.contains(&17u32.to_le_bytes())?);
    /// assert_eq!(seen.count()?, Some(stored));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn expandable(options: Options) -> Result<LocalFilter> {
        options.validate()?;
        if options.window.is_some() {
            return Err(Error::InvalidOptions("a sliding window is not an expandable filter".into()));
        }
        let xf = Box::new(XfFilter::with_params(options.xf_params()?, Limits::NONE)?);
        let chain = Chain::new(Defaults::REDISBLOOM.params(), Limits::NONE)?;
        Ok(LocalFilter { chain, params: Defaults::REDISBLOOM.params(), window: None, xf: Some(xf) })
    }

    /// The filter saved at `path` (by [`LocalFilter::save`] or `bloomkit dump`).
    /// A dump's expiry record (its key's TTL) is skipped: a filter in
    /// process does not expire, and [`LocalFilter::save`] writes none.
    pub fn open(path: impl AsRef<Path>) -> Result<LocalFilter> {
        let mut input = BufReader::new(File::open(path)?);
        if input.fill_buf()?.starts_with(crate::transfer::EXPIRY_MAGIC) {
            let mut record = [0u8; crate::transfer::EXPIRY_LEN];
            input.read_exact(&mut record)?;
            crate::transfer::read_expiry(record[8..].try_into().expect("12 bytes"))?;
        }
        if input.fill_buf()?.starts_with(crate::transfer::XF_MAGIC) {
            input.consume(crate::transfer::XF_MAGIC.len());
            let xf = Box::new(crate::transfer::read_xf_file(input)?);
            let chain = Chain::new(Defaults::REDISBLOOM.params(), Limits::NONE)?;
            return Ok(LocalFilter {
                chain,
                params: Defaults::REDISBLOOM.params(),
                window: None,
                xf: Some(xf),
            });
        }
        if Apbf::header_len(input.fill_buf()?).is_ok() {
            let mut bytes = Vec::new();
            input.read_to_end(&mut bytes)?;
            let window = Apbf::decode(&bytes, None).map_err(|e| match e {
                apbf::ApbfError::BadState(why) => Error::File(file::FileError::Corrupt(why)),
                e => Error::InvalidOptions(e.to_string()),
            })?;
            let chain = Chain::new(Defaults::REDISBLOOM.params(), Limits::NONE)?;
            return Ok(LocalFilter {
                chain,
                params: Defaults::REDISBLOOM.params(),
                window: Some(window),
                xf: None,
            });
        }
        Ok(LocalFilter::from(file::read(input, Limits::NONE)?))
    }

    /// The filter at `path` if the file exists, else a new one.
    pub fn open_or_new(path: impl AsRef<Path>, options: Options) -> Result<LocalFilter> {
        match LocalFilter::open(path.as_ref()) {
            Err(Error::File(file::FileError::Io(e))) if e.kind() == std::io::ErrorKind::NotFound => {
                LocalFilter::new(options)
            }
            other => other,
        }
    }

    /// Writes the filter to `path` atomically: a reader sees the old file or
    /// the new one, never a part.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        {
            let mut out = BufWriter::new(tmp.as_file_mut());
            match (&self.window, &self.xf) {
                (Some(w), _) => out.write_all(&w.encode())?,
                (None, Some(xf)) => {
                    crate::transfer::write_xf_file(xf, &mut out)?;
                }
                (None, None) => file::write(&self.chain, &mut out)?,
            }
            out.flush()?;
        }
        tmp.as_file().sync_all()?;
        tmp.persist(path).map_err(|e| Error::from(e.error))?;
        Ok(())
    }

    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// The sliding-window filter, when made with a window.
    pub fn window(&self) -> Option<&Apbf> {
        self.window.as_ref()
    }

    /// The expandable filter, when made by [`LocalFilter::expandable`] (or
    /// opened from its file).
    pub fn expandable_filter(&self) -> Option<&XfFilter> {
        self.xf.as_deref()
    }

    /// How an expandable filter hashes its items (`None` for the others):
    /// a copy hashes items on another thread for [`LocalFilter::add_hashes`].
    /// It stays this filter's through [`Filter::clear`]; a filter opened
    /// from a file has its own.
    pub fn expandable_hashing(&self) -> Option<Hashing> {
        self.xf.as_ref().map(|xf| xf.hashing())
    }

    /// [`Filter::add_slice`] of items this filter's hashing
    /// ([`LocalFilter::expandable_hashing`]) already hashed: true for each
    /// one that was new. Hashes made by another filter's hashing would be
    /// other positions, and their items would not be found. At an error
    /// (only a filter at its `max_capacity` or out of rate refuses) the
    /// items before it stay added, as with `add_slice`. Other local
    /// filters answer [`Error::Unsupported`].
    pub fn add_hashes(&mut self, hashes: &[XfHash]) -> Result<Vec<bool>> {
        let Some(xf) = &mut self.xf else {
            return Err(Error::Unsupported(
                "adding hashes: only expandable filters (LocalFilter::expandable) take them",
            ));
        };
        let mut answers = Vec::with_capacity(hashes.len());
        add_each(xf, hashes, &mut answers)?;
        Ok(answers)
    }

    /// How many copies of the item an expandable filter holds (never fewer
    /// than were added and not removed); other local filters answer
    /// [`Error::Unsupported`].
    pub fn count_of(&self, item: &[u8]) -> Result<u64> {
        match &self.xf {
            Some(xf) => Ok(xf.count(item)),
            None => Err(Error::Unsupported(
                "counting copies of an item: only expandable filters (LocalFilter::expandable) can",
            )),
        }
    }
}

/// Adds each hash not in yet, answering whether it was new.
fn add_each(xf: &mut XfFilter, hashes: &[XfHash], answers: &mut Vec<bool>) -> Result<()> {
    xf.insert_if_absent_each(hashes, Limits::NONE, |new| answers.push(new)).map_err(|(_, e)| Error::from(e))
}

/// A chain's own parameters, so that `clear` makes the same filter again.
impl From<Chain> for LocalFilter {
    fn from(chain: Chain) -> LocalFilter {
        let first = chain.filters().first().map(|f| (f.shape().capacity, f.shape().error));
        let (capacity, error) = first.unwrap_or((100, 0.01));
        let params = ChainParams {
            capacity,
            error,
            expansion: chain.expansion().unwrap_or(2),
            scaling: chain.expansion().is_some(),
        };
        LocalFilter { chain, params, window: None, xf: None }
    }
}

impl Filter for LocalFilter {
    /// A local filter exists as soon as it is made: nothing to do.
    fn reserve(&mut self) -> Result<()> {
        Ok(())
    }

    fn add_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        if let Some(xf) = &mut self.xf {
            // As the server's script does: an item already in is not added
            // again. Hashed a chunk at a time, so that each add can ask for
            // the block of an item a few places on.
            let mut answers = Vec::with_capacity(items.len());
            xf.hashing().hash_chunks(items, |i| i, |_, _, hashes| add_each(xf, hashes, &mut answers))?;
            return Ok(answers);
        }
        if let Some(w) = &mut self.window {
            let now = now_ms();
            return Ok(items.iter().map(|i| w.add(i, now)).collect());
        }
        let mut answers = Vec::with_capacity(items.len());
        let mut failure = None;
        self.chain.add_each(items, Limits::NONE, |result| match result {
            Ok(new) => {
                answers.push(new);
                true
            }
            Err(e) => {
                failure = Some(e);
                false
            }
        });
        match failure {
            Some(e) => Err(e.into()),
            None => Ok(answers),
        }
    }

    fn contains_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        if let Some(xf) = &self.xf {
            let mut answers = Vec::with_capacity(items.len());
            let looked_up: Result<()> = xf.hashing().hash_chunks(
                items,
                |i| i,
                |_, _, hashes| {
                    xf.contains_each(hashes, |found| answers.push(found));
                    Ok(())
                },
            );
            looked_up?;
            return Ok(answers);
        }
        if let Some(w) = &self.window {
            let now = now_ms();
            return Ok(items.iter().map(|i| w.contains(i, now)).collect());
        }
        let mut answers = Vec::with_capacity(items.len());
        self.chain.contains_each(items, |present| answers.push(present));
        Ok(answers)
    }

    /// Removes one copy of each item from an expandable filter.
    fn remove_slice(&mut self, items: &[&[u8]]) -> Result<Vec<bool>> {
        match &mut self.xf {
            Some(xf) => items.iter().map(|i| xf.delete(i).map_err(Error::from)).collect(),
            None => Err(Error::Unsupported(
                "removing items: only expandable filters (LocalFilter::expandable) can, in process",
            )),
        }
    }

    fn count(&mut self) -> Result<Option<u64>> {
        if let Some(xf) = &self.xf {
            return Ok(Some(xf.items()));
        }
        Ok(self.window.is_none().then(|| self.chain.items()))
    }

    fn info(&mut self) -> Result<Info> {
        if let Some(xf) = &self.xf {
            let info = xf.info();
            return Ok(Info {
                backend: "local expandable".into(),
                capacity: info.max_capacity,
                bytes: info.size_bytes,
                items: Some(info.items),
                estimated_error_rate: Some(info.guaranteed_rate),
                ..Info::default()
            });
        }
        if let Some(w) = &self.window {
            return Ok(Info {
                backend: "local window".into(),
                capacity: w.shape().capacity(),
                bytes: w.bytes() as u64,
                hashes: Some(w.shape().k),
                ..Info::default()
            });
        }
        Ok(Info {
            backend: "local".into(),
            capacity: self.chain.capacity(),
            bytes: self.chain.size_bytes(),
            items: Some(self.chain.items()),
            filters: Some(self.chain.filters().len() as u64),
            ..Info::default()
        })
    }

    fn clear(&mut self) -> Result<()> {
        if let Some(xf) = &mut self.xf {
            // The same hashing, so that a copy taken for `add_hashes` stays
            // right (bloomkit 0.1's murmur3 hashing, which a new filter
            // cannot take, gives way to a new key).
            let hashing = xf.hashing();
            **xf = if hashing.is_murmur() {
                XfFilter::with_params(xf.params(), Limits::NONE)?
            } else {
                XfFilter::with_hashing(xf.params(), hashing, Limits::NONE)?
            };
            return Ok(());
        }
        if let Some(w) = &mut self.window {
            w.clear(now_ms());
            return Ok(());
        }
        self.chain = Chain::new(self.params, Limits::NONE)?;
        Ok(())
    }

    fn expire(&mut self, _ttl: Duration) -> Result<()> {
        Err(Error::Unsupported("a local filter has no expiry; delete its file instead"))
    }
}
