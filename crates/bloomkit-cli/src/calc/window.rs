//! `bloomkit calc --window` / `--window-count`: a sliding-window filter's
//! (`APBF.*`) shape and memory, from the sizing the server runs
//! (`ApbfShape::new`), so the bytes are exactly `APBF.INFO`'s `Size`; and
//! what the server's allocator holds for them (`MEMORY USAGE`), which
//! rounds the one block they are up to its size class.

use std::io::Write;

use anyhow::Result;
use bloomkit_core::apbf::{Apbf, ApbfShape, Window, MAX_WINDOW_SECONDS};
use bloomkit_core::common::memory::alloc_class;
use serde_json::json;

use crate::units::{human_bytes, human_bytes_exact};

/// What was asked.
#[derive(Clone, Copy, Debug)]
pub struct WindowInputs {
    pub error_rate: f64,
    /// The most adds within one window (`APBF.RESERVE`'s capacity; for a
    /// count window, its length).
    pub capacity: u64,
    /// `None`: a count window; else its length in whole seconds.
    pub seconds: Option<u64>,
    pub max_bytes: u64,
}

pub struct WindowSizing {
    pub inputs: WindowInputs,
    pub shape: ApbfShape,
    /// `APBF.INFO`'s `Size`: the state's slices and counts, the bytes
    /// `bf.max-filter-bytes` is checked against.
    pub bytes: u64,
    /// What the allocator holds for it: the state's block at its size
    /// class (jemalloc's: up to a quarter more than `bytes` past 16 KiB)
    /// and the filter's own fields; `MEMORY USAGE` adds the key's few
    /// dozen bytes.
    pub held: u64,
}

impl WindowInputs {
    fn window(&self) -> Window {
        match self.seconds {
            None => Window::Count,
            Some(s) => Window::Time { millis: s * 1000 },
        }
    }

    /// `APBF.RESERVE`'s arguments.
    fn reserve_command(&self) -> String {
        let window = self.seconds.map_or_else(|| "COUNT".to_string(), |s| format!("TIME {s}"));
        format!("APBF.RESERVE key {} {} {window}", self.error_rate, self.capacity)
    }
}

pub fn solve(inputs: WindowInputs) -> Result<WindowSizing> {
    if !(inputs.error_rate > 0.0 && inputs.error_rate < 1.0) {
        return Err(usage!("--error-rate must be strictly between 0 and 1, got {}", inputs.error_rate));
    }
    if inputs.seconds.is_some_and(|s| s > MAX_WINDOW_SECONDS as u64) {
        return Err(usage!("--window may be at most 10 years ({MAX_WINDOW_SECONDS} seconds)"));
    }
    let shape = ApbfShape::new(inputs.error_rate, inputs.capacity, inputs.window()).ok_or_else(|| {
        usage!(
            "no sliding-window filter reaches a rate of {:e} for {} adds per window (APBF.RESERVE answers the \
             same): raise --error-rate",
            inputs.error_rate,
            inputs.capacity
        )
    })?;
    let bytes = shape.bytes().ok_or_else(|| {
        usage!(
            "{} adds per window at {:e} need more bytes than a machine has",
            inputs.capacity,
            inputs.error_rate
        )
    })?;
    let held = alloc_class(bytes) + alloc_class(std::mem::size_of::<Apbf>() as u64);
    Ok(WindowSizing { inputs, shape, bytes, held })
}

pub fn print(s: &WindowSizing, as_json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let (i, shape) = (&s.inputs, &s.shape);
    // As the server computes it: the tick rounded up from the window.
    let tick_ms = i.seconds.map(|sec| (sec * 1000).div_ceil(u64::from(shape.window_generations)));
    let bits_per_item = s.bytes as f64 * 8.0 / shape.capacity() as f64;
    let fits = s.bytes <= i.max_bytes;
    if as_json {
        let v = json!({
            "kind": "apbf", "window": if i.seconds.is_some() { "time" } else { "count" },
            "window_seconds": i.seconds, "error_rate": i.error_rate, "capacity": i.capacity,
            "reserve": i.reserve_command(), "bytes": s.bytes, "memory": human_bytes(s.bytes as f64),
            "held_bytes": s.held,
            "bits_per_item": bits_per_item, "info_capacity": shape.capacity(), "slices": shape.slices(),
            "hashes": shape.k, "generation_size": shape.generation, "generation_ms": tick_ms,
            "false_positive_rate": shape.false_positive_rate(), "max_bytes": i.max_bytes, "fits_max_bytes": fits,
        });
        writeln!(out, "{v}")?;
        return out.flush();
    }
    let window = match i.seconds {
        None => format!("the last {} adds", i.capacity),
        Some(sec) => format!("the last {sec} seconds, at most {} adds within any one", i.capacity),
    };
    let mut rows = vec![
        ("sliding-window filter".to_string(), format!("{} ({window})", i.reserve_command())),
        (
            "memory".to_string(),
            format!("{}: APBF.INFO's Size, allocated whole at APBF.RESERVE", human_bytes_exact(s.bytes as f64)),
        ),
        (
            "memory held".to_string(),
            format!(
                "{}: the allocator's size class for it (MEMORY USAGE, less the key's few dozen bytes)",
                human_bytes_exact(s.held as f64)
            ),
        ),
        ("bits per item".to_string(), format!("{bits_per_item:.2} (per add the window holds)")),
        (
            "slices".to_string(),
            format!(
                "{} of {} ({} hashes: an add sets a bit in the {} newest; {} generations are remembered for sure)",
                shape.slices(),
                human_bytes(shape.slice_bytes() as f64),
                shape.k,
                shape.k,
                shape.l
            ),
        ),
        (
            "generation".to_string(),
            match tick_ms {
                None => format!("{} adds", shape.generation),
                Some(ms) => format!("{} adds or {ms} ms, whichever comes first", shape.generation),
            },
        ),
        ("capacity remembered".to_string(), format!("{} adds (APBF.INFO's Capacity)", shape.capacity())),
        ("false-positive rate".to_string(), format!("{:.3e} at its worst moment", shape.false_positive_rate())),
    ];
    if !fits {
        rows.push((
            "refused".to_string(),
            format!(
                "over --max-bytes {} (bf.max-filter-bytes): APBF.RESERVE would answer an error",
                human_bytes(i.max_bytes as f64)
            ),
        ));
    }
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, value) in rows {
        writeln!(out, "{name:<width$} {value}")?;
    }
    out.flush()
}
