//! Bitmap filters between servers and files: bloomkit's BKBITMAP file
//! (any layout, with what it was made with) and Guava's own serial form
//! (`BloomFilter.writeTo` / `readFrom`), for the `guava` layout.

use std::io::{Read, Write};

use bloomkit_core::bitmap::guava::{swap_bit_order, GuavaShape, SerialHeader, SERIAL_HEADER_LEN};
use bloomkit_core::bitmap::{BitmapLayout, BitmapSpec};
use bloomkit_core::common::MAX_CHUNK;

use super::checked::{CrcReader, CrcWriter};
use super::{arm_staging, kind, stage_and_commit, unreadable, Kind, Progress, Server};
use crate::error::{Error, Result};
use crate::{Filter, Layout, Options, RedisFilter};

/// The first bytes of a bitmap filter file.
pub const BITMAP_MAGIC: &[u8; 8] = b"BKBITMAP";

/// What a bitmap filter was made with: the bitmap itself stores nothing
/// (a Redisson filter keeps its size and hashes in its config hash).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BitmapParams {
    pub layout: BitmapLayout,
    pub capacity: u64,
    pub error_rate: f64,
    /// Explicit bits and hashes, in place of the layout's sizing.
    pub shape: Option<(u64, u32)>,
}

impl BitmapParams {
    /// bloomkit's own bitmap: Guava's layout, sized from these.
    pub fn guava(capacity: u64, error_rate: f64) -> BitmapParams {
        BitmapParams { layout: BitmapLayout::Guava, capacity, error_rate, shape: None }
    }

    /// The client's layout of the filter in `key`.
    pub fn layout(&self, key: &str) -> Result<Layout> {
        let mut options = Options::new(self.capacity, self.error_rate);
        options.shape = self.shape;
        Layout::bitmap_with(key, self.layout, options).map_err(|e| transfer!("{e}"))
    }
}

/// The bitmap layout `dedup --bitmap` and the client make for these options.
pub fn bitmap_layout(key: &str, capacity: u64, error_rate: f64) -> Result<Layout> {
    BitmapParams::guava(capacity, error_rate).layout(key)
}

fn strlen(server: &mut Server, key: &str) -> Result<u64> {
    server.call(redis::cmd("STRLEN").arg(key), key)
}

/// The keys holding a bitmap filter's bits (one, or `{key}:0`, `{key}:1`,
/// ... when split): each a string or missing, at least one present. A
/// Redisson filter's config must agree with `params`.
fn bitmap_keys(server: &mut Server, key: &str, layout: &Layout) -> Result<Vec<String>> {
    let keys = layout.bitmap_keys().to_vec();
    let mut present = false;
    for k in &keys {
        match kind(server, k)? {
            Kind::String => present = true,
            Kind::Missing => {}
            other => return Err(unreadable(server, k, &other)),
        }
    }
    if let Some((config, fields)) = layout.redisson_config() {
        let stored: Vec<Option<String>> =
            server.call(redis::cmd("HMGET").arg(&config).arg("size").arg("hashIterations"), &config)?;
        match (&stored[0], &stored[1]) {
            (None, None) if present => {
                return Err(transfer!(
                    "'{key}' has bits but no Redisson config hash '{config}': it was not written by \
                     Redisson's RBloomFilter (pick its layout with --layout)"
                ))
            }
            (None, None) => {}
            (size, k) if size.as_deref() != Some(&fields[0]) || k.as_deref() != Some(&fields[1]) => {
                return Err(Error::ConfigMismatch(format!(
                    "Bloom filter config has been changed: {config} holds size {} and hashIterations {}, \
                     this filter has size {} and hashIterations {}",
                    size.as_deref().unwrap_or("(none)"),
                    k.as_deref().unwrap_or("(none)"),
                    fields[0],
                    fields[1]
                )))
            }
            _ => present = true,
        }
    }
    if !present {
        return Err(Error::NotFound(key.to_string()));
    }
    Ok(keys)
}

/// A Redisson filter's expected insertions and error rate as its config
/// hash holds them (they label the filter; size and hashes decide its bits).
fn redisson_labels(server: &mut Server, config: &str, params: &BitmapParams) -> Result<(u64, f64)> {
    let stored: Vec<Option<String>> = server
        .call(redis::cmd("HMGET").arg(config).arg("expectedInsertions").arg("falseProbability"), config)?;
    let n = stored[0].as_deref().and_then(|v| v.parse().ok()).unwrap_or(params.capacity);
    let p = stored[1]
        .as_deref()
        .and_then(|v| v.parse().ok())
        .filter(|p: &f64| *p > 0.0 && *p < 1.0)
        .unwrap_or(params.error_rate);
    Ok((n, p))
}

/// A bitmap filter file, version 2: magic, version, the layout's name,
/// capacity, error rate, bits, hashes, the number of keys and each one's
/// length, then their bytes, then a CRC-32 of everything before it.
/// (Version 1, which only `guava` wrote, had no bits and hashes.)
pub fn dump_bitmap(
    server: &mut Server,
    key: &str,
    params: &BitmapParams,
    out: impl Write,
    progress: &dyn Progress,
) -> Result<u64> {
    let layout = params.layout(key)?;
    let keys = bitmap_keys(server, key, &layout)?;
    let spec = layout.bitmap_spec().expect("a bitmap layout");
    let (capacity, error_rate) = match layout.redisson_config() {
        Some((config, _)) => redisson_labels(server, &config, params)?,
        None => (params.capacity, params.error_rate),
    };
    let mut lengths = Vec::new();
    for k in &keys {
        lengths.push(strlen(server, k)?);
    }
    progress.set_length(lengths.iter().sum());
    let name = spec.layout.name().as_bytes();
    let mut out = CrcWriter::new(out, BITMAP_MAGIC)?;
    out.write_all(&2u32.to_le_bytes())?;
    out.write_all(&(name.len() as u32).to_le_bytes())?;
    out.write_all(name)?;
    out.write_all(&capacity.to_le_bytes())?;
    out.write_all(&error_rate.to_le_bytes())?;
    out.write_all(&spec.shape.bits.to_le_bytes())?;
    out.write_all(&spec.shape.hashes.to_le_bytes())?;
    out.write_all(&(keys.len() as u32).to_le_bytes())?;
    for len in &lengths {
        out.write_all(&len.to_le_bytes())?;
    }
    for (k, &len) in keys.iter().zip(&lengths) {
        read_string(server, k, len, |data| {
            out.write_all(data)?;
            progress.inc(data.len() as u64);
            Ok(())
        })?;
    }
    Ok(out.finish()?)
}

/// Reads `len` bytes of string `k` in chunks of at most [`MAX_CHUNK`].
fn read_string(
    server: &mut Server,
    k: &str,
    len: u64,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut at = 0u64;
    while at < len {
        let end = (at + MAX_CHUNK).min(len);
        let data: Vec<u8> = server.call(redis::cmd("GETRANGE").arg(k).arg(at).arg(end - 1), k)?;
        if data.len() as u64 != end - at {
            return Err(transfer!("the bitmap '{k}' changed during the dump; try again"));
        }
        each(&data)?;
        at = end;
    }
    Ok(())
}

/// Restores a bitmap filter file (its magic already read) into the keys the
/// same layout gives `key` (with a Redisson filter's config hash): each
/// through a staging key, all renamed in one transaction once the checksum
/// is verified. Returns the layout it restored.
pub fn restore_bitmap(
    server: &mut Server,
    key: &str,
    input: impl Read,
    replace: bool,
    progress: &dyn Progress,
) -> Result<BitmapSpec> {
    let mut file = CrcReader::new(input, BITMAP_MAGIC, "bitmap file");
    let version = file.u32()?;
    if version != 1 && version != 2 {
        return Err(transfer!(
            "bitmap file version {version} is not supported (this bloomkit reads versions 1 and 2)"
        ));
    }
    let name_len = file.u32()?.min(64) as usize;
    let name = String::from_utf8_lossy(&file.bytes(name_len)?).into_owned();
    let Some(bitmap_layout) =
        BitmapLayout::from_name(&name).filter(|l| version == 2 || *l == BitmapLayout::Guava)
    else {
        return Err(transfer!(
            "bitmap layout '{name}' is not one this bloomkit knows ({})",
            BitmapLayout::names()
        ));
    };
    let capacity = file.u64()?;
    let error_rate = f64::from_bits(file.u64()?);
    let shape = if version == 2 { Some((file.u64()?, file.u32()?)) } else { None };
    let params = BitmapParams { layout: bitmap_layout, capacity, error_rate, shape };
    let layout = params.layout(key)?;
    let nkeys = file.u32()?;
    let keys = layout.bitmap_keys().to_vec();
    if keys.len() != nkeys as usize {
        return Err(transfer!(
            "the file holds {nkeys} bitmap keys where its filter's {} bits take {} here",
            layout.bitmap_spec().expect("bitmap").shape.bits,
            keys.len()
        ));
    }
    let lengths = (0..keys.len()).map(|_| file.u64()).collect::<Result<Vec<u64>>>()?;
    // Each key holds at most its part of the filter's bits.
    let bits = layout.bitmap_spec().expect("bitmap").shape.bits;
    let per_key = layout.options().max_key_bits;
    for (i, &len) in lengths.iter().enumerate() {
        let part_bytes = (bits - i as u64 * per_key).min(per_key).div_ceil(8);
        if len > part_bytes {
            return Err(transfer!(
                "the file holds {len} bytes for bitmap key {i}, more than its {part_bytes}: it is damaged"
            ));
        }
    }
    progress.set_length(lengths.iter().sum());
    stage_and_commit(server, &layout.keys(), replace, |server, staging| {
        for (k, &len) in staging.iter().zip(&lengths) {
            // Every part gets its key, an empty one too, so that every
            // RENAME of the transaction has a source.
            server.call::<()>(redis::cmd("SET").arg(k).arg(""), k)?;
            arm_staging(server, k)?;
            let mut at = 0u64;
            while at < len {
                let n = (len - at).min(MAX_CHUNK);
                let data = file.bytes(n as usize)?;
                server.call::<i64>(redis::cmd("SETRANGE").arg(k).arg(at).arg(data), k)?;
                progress.inc(n);
                at += n;
            }
        }
        file.finish()?;
        stage_redisson_config(server, &layout, staging)
    })?;
    Ok(layout.bitmap_spec().expect("bitmap"))
}

/// Writes a Redisson filter's config hash into its staging key (the last one).
fn stage_redisson_config(server: &mut Server, layout: &Layout, staging: &[String]) -> Result<()> {
    if let Some((_, fields)) = layout.redisson_config() {
        let k = staging.last().expect("the config's staging key");
        let mut c = redis::cmd("HSET");
        c.arg(k);
        for (name, value) in
            ["size", "hashIterations", "expectedInsertions", "falseProbability"].iter().zip(&fields)
        {
            c.arg(name).arg(value);
        }
        server.call::<i64>(&c, k)?;
        arm_staging(server, k)?;
    }
    Ok(())
}

pub fn copy_bitmap(
    from: &mut Server,
    to: &mut Server,
    key: &str,
    params: &BitmapParams,
    replace: bool,
    progress: &dyn Progress,
) -> Result<()> {
    let mut file = Vec::new();
    dump_bitmap(from, key, params, &mut file, &())?;
    restore_bitmap(to, key, &file[BITMAP_MAGIC.len()..], replace, progress).map(|_| ())
}

/// The client's view of a bitmap filter: fill, estimated items and rate.
pub fn bitmap_info(server: &mut Server, key: &str, params: &BitmapParams) -> Result<crate::Info> {
    let layout = params.layout(key)?;
    bitmap_keys(server, key, &layout)?;
    RedisFilter::new(server.connection(), layout).info()
}

// ---- Guava's serial form ----

/// Writes a `guava`-layout bitmap as `BloomFilter.writeTo` does, for
/// `BloomFilter.readFrom(in, Funnels.stringFunnel(UTF_8))` on the Java side.
/// Returns the bytes written.
pub fn dump_guava(
    server: &mut Server,
    key: &str,
    params: &BitmapParams,
    mut out: impl Write,
    progress: &dyn Progress,
) -> Result<u64> {
    if params.layout != BitmapLayout::Guava {
        return Err(transfer!(
            "Guava's serial form holds only the guava layout (bits in whole longs, MURMUR128_MITZ_64), \
             not {}",
            params.layout.name()
        ));
    }
    let layout = params.layout(key)?;
    let spec = layout.bitmap_spec().expect("bitmap");
    let header = SerialHeader::for_shape(GuavaShape { bits: spec.shape.bits, hashes: spec.shape.hashes })
        .ok_or_else(|| {
            transfer!("Guava cannot hold {} bits in its array of at most 2^31 - 1 longs", spec.shape.bits)
        })?;
    let keys = bitmap_keys(server, key, &layout)?;
    let max_key_bits = layout.options().max_key_bits;
    out.write_all(&header.to_bytes())?;
    progress.set_length(header.body_len());
    let mut words = WordWriter { out: &mut out, pending: Vec::with_capacity(MAX_CHUNK as usize + 8) };
    for (i, k) in keys.iter().enumerate() {
        let part_bytes = (spec.shape.bits - i as u64 * max_key_bits).min(max_key_bits) / 8;
        let len = strlen(server, k)?;
        if len > part_bytes {
            return Err(transfer!(
                "'{k}' holds {len} bytes, more than its {part_bytes} of a {}-bit guava filter: it was made \
                 with other parameters",
                spec.shape.bits
            ));
        }
        read_string(server, k, len, |data| {
            progress.inc(data.len() as u64);
            words.write(data)
        })?;
        // A bitmap is only as long as its highest set bit: the rest is zeros.
        let mut left = part_bytes - len;
        let zeros = vec![0u8; left.min(MAX_CHUNK) as usize];
        while left > 0 {
            let n = left.min(MAX_CHUNK);
            words.write(&zeros[..n as usize])?;
            progress.inc(n);
            left -= n;
        }
    }
    if !words.pending.is_empty() {
        return Err(transfer!("the bitmap does not end on a whole long; it is not a guava filter"));
    }
    out.flush()?;
    Ok(SERIAL_HEADER_LEN as u64 + header.body_len())
}

/// Converts Redis-order bytes to Guava's words as whole longs arrive.
struct WordWriter<'a, W: Write> {
    out: &'a mut W,
    pending: Vec<u8>,
}

impl<W: Write> WordWriter<'_, W> {
    fn write(&mut self, data: &[u8]) -> Result<()> {
        self.pending.extend_from_slice(data);
        let whole = self.pending.len() / 8 * 8;
        swap_bit_order(&mut self.pending[..whole]);
        self.out.write_all(&self.pending[..whole])?;
        self.pending.drain(..whole);
        Ok(())
    }
}

/// Loads a file written by Guava's `BloomFilter.writeTo` (strategy
/// MURMUR128_MITZ_64, items funneled as UTF-8 strings) into a `guava`-layout
/// bitmap in `key`: staged, its bit count checked, then renamed over `key`.
/// A damaged or unsupported file changes nothing. Returns the filter's
/// shape: open it with these bits and hashes.
pub fn restore_guava(
    server: &mut Server,
    key: &str,
    mut input: impl Read,
    replace: bool,
    progress: &dyn Progress,
) -> Result<BitmapSpec> {
    let mut head = [0u8; SERIAL_HEADER_LEN];
    input
        .read_exact(&mut head)
        .map_err(|_| transfer!("the file is shorter than a Guava BloomFilter's 6-byte header"))?;
    let header = SerialHeader::parse(&head)
        .map_err(|e| transfer!("not a Guava BloomFilter bloomkit can load: {e}"))?;
    let shape = header.shape();
    // Guava stores no capacity or rate: label the filter with the capacity
    // its hash count is optimal for, and that capacity's rate.
    let capacity = ((shape.bits as f64 / f64::from(shape.hashes)) * std::f64::consts::LN_2).round().max(1.0);
    let error_rate = 0.5f64.powi(shape.hashes as i32).max(f64::MIN_POSITIVE);
    let params = BitmapParams {
        layout: BitmapLayout::Guava,
        capacity: capacity as u64,
        error_rate,
        shape: Some((shape.bits, shape.hashes)),
    };
    let layout = params.layout(key)?;
    let keys = layout.bitmap_keys().to_vec();
    let max_key_bits = layout.options().max_key_bits;
    progress.set_length(header.body_len());
    stage_and_commit(server, &keys, replace, |server, staging| {
        let mut ones = 0u64;
        let mut buf = vec![0u8; MAX_CHUNK as usize];
        for (i, k) in staging.iter().enumerate() {
            let part_bytes = (shape.bits - i as u64 * max_key_bits).min(max_key_bits) / 8;
            // Only chunks with bits are written as they arrive, and the
            // last one always (giving the key its full length): a file
            // claiming a huge array over a few bytes costs the server nothing.
            let mut at = 0u64;
            while at < part_bytes {
                let n = (part_bytes - at).min(MAX_CHUNK) as usize;
                input.read_exact(&mut buf[..n]).map_err(|_| {
                    transfer!(
                        "the Guava file ends inside its bit array ({} longs, {} bytes): it is cut short",
                        header.words,
                        header.body_len()
                    )
                })?;
                swap_bit_order(&mut buf[..n]);
                let set: u64 = buf[..n].iter().map(|b| u64::from(b.count_ones())).sum();
                if set > 0 || at + n as u64 == part_bytes {
                    server.call::<i64>(redis::cmd("SETRANGE").arg(k).arg(at).arg(&buf[..n]), k)?;
                    arm_staging(server, k)?;
                }
                ones += set;
                progress.inc(n as u64);
                at += n as u64;
            }
        }
        let mut extra = [0u8; 1];
        if input.read(&mut extra).map_err(Error::from)? != 0 {
            return Err(transfer!(
                "the file goes on after the bit array its header describes ({} longs): it is damaged or \
                 not one Guava filter",
                header.words
            ));
        }
        // Checked before it replaces anything.
        let mut counted = 0u64;
        for k in staging {
            counted += server.call::<u64>(redis::cmd("BITCOUNT").arg(k), k)?;
        }
        if counted != ones {
            return Err(transfer!(
                "verification failed: {counted} bits set on the server, {ones} in the file"
            ));
        }
        Ok(())
    })?;
    Ok(layout.bitmap_spec().expect("bitmap"))
}
