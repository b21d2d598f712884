//! `bloomkit copy`: filters and sketches from one server to another, each
//! key through a staging key on the destination as restore loads; with
//! --all, the small values first in batches. Either side may be a cluster.

use std::io::{self, IsTerminal};

use anyhow::{bail, Result};
use bloomkit_client::{transfer, Place};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::{bitmap_params, report_leftovers, BitmapArgs};
use crate::output::{describe, progress_bar};
use crate::{interrupt, server, units};

#[derive(Args)]
pub struct CopyArgs {
    /// The source server (redis://host:port[/db], host:port, ...).
    #[arg(long, value_name = "URL")]
    from: String,
    /// The destination server (redis://host:port[/db], host:port, ...)
    /// [default: $BLOOMKIT_URL, else $REDIS_URL].
    #[arg(long, value_name = "URL")]
    to: Option<String>,
    /// The keys to copy; each keeps its name.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    keys: Vec<String>,
    /// Copy every filter and sketch on the source (every key of a Bloom,
    /// cuckoo, sliding-window, expandable (XF), valkey-bloom, Count-Min
    /// Sketch, Top-K or t-digest type), found with SCAN; other keys are
    /// left alone.
    #[arg(long)]
    all: bool,
    /// With --all: only keys matching this SCAN MATCH pattern.
    #[arg(long, value_name = "PATTERN", requires = "all", default_value = "*")]
    r#match: String,
    /// Each KEY names a filter sharded over N keys {KEY:0} .. {KEY:N-1}
    /// (as `dedup --shards` and the client's Layout::sharded make): copy
    /// those. Either server may be a Redis Cluster, found out from it: a
    /// key is read from and written to the master that serves its slot,
    /// so a sharded filter moves between clusters, or to one server, where
    /// `info --shards` and `dedup --shards` read it.
    #[arg(long, value_name = "N", conflicts_with = "all", value_parser = clap::value_parser!(u32).range(1..))]
    shards: Option<u32>,
    /// Overwrite existing keys on the destination.
    #[arg(long)]
    replace: bool,
    /// Copy keys without their TTLs. By default each key keeps the TTL it
    /// has left on the source.
    #[arg(long)]
    no_ttl: bool,
    #[command(flatten)]
    bitmap: BitmapArgs,
}

/// `copy`: the keys found (named, a sharded filter's, or every module key
/// with --all), then copied one by one; one line per key, one summary, and
/// an error naming the keys not copied.
pub fn run(a: CopyArgs) -> Result<()> {
    let flag = interrupt::install();
    let to_url = server::resolve(a.to.as_deref(), "--to")?;
    // Either side may be a cluster: each key is then read from, or
    // written to, the master that serves its slot.
    let mut from = Place::open(&a.from)?;
    let mut to = Place::open(&to_url)?;
    from.interrupt_on(flag.clone());
    to.interrupt_on(flag);
    if a.no_ttl {
        to.drop_ttls();
    }
    let keys = keys_to_copy(&a, &mut from)?;
    let bitmap = bitmap_params(&a.bitmap)?;
    let (mut copied, rest) = match a.all && bitmap.is_none() {
        true => copy_small_first(&mut from, &mut to, &keys, a.replace)?,
        false => (0, keys.clone()),
    };
    let mut failures = Vec::new();
    for key in &rest {
        match copy_one(&mut from, &mut to, key, bitmap, a.replace) {
            Outcome::Copied => copied += 1,
            Outcome::Failed => failures.push(key.clone()),
            Outcome::Interrupted { url } => {
                return Err(interrupt::Stopped(format!(
                    "bloomkit copy: interrupted while copying '{key}'; its staging key was removed and \
                     '{key}' on {url} is as it was; {copied} of {} copied before it",
                    keys.len()
                ))
                .into());
            }
        }
    }
    say!("bloomkit copy: {copied} of {} copied", keys.len());
    if !failures.is_empty() {
        bail!("not copied: {}", failures.join(", "));
    }
    Ok(())
}

/// The keys `copy` copies: every filter and sketch on the source's masters
/// with --all (and how many other keys it left alone, said), each shard of
/// each key with --shards, else the keys named.
fn keys_to_copy(a: &CopyArgs, from: &mut Place) -> Result<Vec<String>> {
    Ok(if a.all {
        let (mut keys, mut others) = (Vec::new(), 0);
        for server in from.masters()? {
            let (mine, theirs) = transfer::module_keys(server, &a.r#match)?;
            keys.extend(mine);
            others += theirs;
        }
        say!(
            "bloomkit copy: {} on {} ({} left alone)",
            units::plural(keys.len() as u64, "filter or sketch", "filters and sketches"),
            from.url(),
            units::plural(others as u64, "other key", "other keys"),
        );
        keys
    } else if let Some(shards) = a.shards {
        a.keys.iter().flat_map(|k| bloomkit_client::shard_keys(k, shards)).collect()
    } else {
        a.keys.clone()
    })
}

/// How one key's copy ended.
enum Outcome {
    Copied,
    /// Said why.
    Failed,
    /// Stopped by a signal while copying to the destination at `url`; its
    /// staging key was removed.
    Interrupted {
        url: String,
    },
}

/// One key copied through a staging key on the destination, with a bar
/// and a line saying how it went (a failure is said, not returned: the
/// other keys are still copied).
fn copy_one(
    from: &mut Place,
    to: &mut Place,
    key: &str,
    bitmap: Option<transfer::BitmapParams>,
    replace: bool,
) -> Outcome {
    let bar = progress_bar(key);
    let (source, to) = match (from.server_for(key), to.server_for(key)) {
        (Ok(source), Ok(to)) => (source, to),
        (Err(e), _) | (_, Err(e)) => {
            say!("bloomkit copy: {key}: {}", describe(&e.into()));
            return Outcome::Failed;
        }
    };
    interrupt::set_unfinished(format!(
        "a staging key for '{key}' may be left on {}: the next restore or copy of that key \
         removes it, and `bloomkit info` shows it",
        to.url
    ));
    let result = transfer::copy_key(source, to, key, bitmap, replace, &server::Bar(&bar));
    interrupt::set_unfinished("");
    bar.finish_and_clear();
    report_leftovers("copy", to);
    match result {
        Ok(kind) => {
            match to.last_ttl() {
                Some(ttl) => {
                    say!("bloomkit copy: {key} ({kind}, TTL {}): done", units::human_ttl(ttl))
                }
                None => say!("bloomkit copy: {key} ({kind}): done"),
            }
            Outcome::Copied
        }
        Err(_) if interrupt::interrupted() => Outcome::Interrupted { url: to.url.clone() },
        Err(e) => {
            say!("bloomkit copy: {key}: {}", describe(&anyhow::Error::from(e)));
            Outcome::Failed
        }
    }
}

/// `copy --all` between two single servers: the small module values first,
/// a batch of keys per three round trips (`transfer::copy_small_keys`),
/// with a bar of keys and one summary line; how many were copied, and the
/// keys left for the key-by-key copy (large values, and whatever the
/// destination refused: that copy then says why).
fn copy_small_first(
    from: &mut Place,
    to: &mut Place,
    keys: &[String],
    replace: bool,
) -> Result<(usize, Vec<String>)> {
    let (Place::Single(source), Place::Single(dest)) = (from, to) else {
        return Ok((0, keys.to_vec()));
    };
    let bar =
        if io::stderr().is_terminal() { ProgressBar::new(keys.len() as u64) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("small keys [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
            .expect("valid template"),
    );
    let mut rest = Vec::new();
    let mut copied = 0;
    for batch in keys.chunks(transfer::MANY_BATCH * 8) {
        let done = match transfer::copy_small_keys(source, dest, batch, replace) {
            Ok(done) => done,
            Err(_) if interrupt::interrupted() => {
                return Err(interrupt::Stopped(format!(
                    "bloomkit copy: interrupted; {copied} of {} copied whole before it (each is complete: no \
                     staging key is used for them)",
                    keys.len()
                ))
                .into())
            }
            Err(e) => return Err(e.into()),
        };
        for (key, done) in batch.iter().zip(done) {
            match done {
                Some(_) => copied += 1,
                None => rest.push(key.clone()),
            }
        }
        bar.inc(batch.len() as u64);
    }
    bar.finish_and_clear();
    say!(
        "bloomkit copy: {} copied whole (DUMP and RESTORE, TTLs kept); {} key by key",
        units::plural(copied as u64, "small key", "small keys"),
        rest.len()
    );
    Ok((copied, rest))
}
