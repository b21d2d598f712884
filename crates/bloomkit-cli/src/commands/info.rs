//! `bloomkit info`: a key's kind and the server's INFO fields, as aligned
//! text or JSON, with any staging key an interrupted transfer left; with
//! --shards, a sharded filter's shards and its whole.

use std::io::{self, Write};

use anyhow::{bail, Result};
use bloomkit_client::{transfer, Place};
use clap::Args;

use super::{bitmap_params, BitmapArgs};
use crate::output::Scrubbed;
use crate::{server, units};

#[derive(Args)]
pub struct InfoArgs {
    /// The server: redis://host:port[/db], host:port, host or :port
    /// [default: $BLOOMKIT_URL, else $REDIS_URL].
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// The filter's key.
    key: String,
    /// JSON output (one object).
    #[arg(long)]
    json: bool,
    /// The key names a filter sharded over N keys {KEY:0} .. {KEY:N-1}
    /// (as `dedup --shards` and the client's Layout::sharded make): each
    /// shard's figures, read on the node that serves it on a cluster, and
    /// the whole filter's.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    shards: Option<u32>,
    #[command(flatten)]
    bitmap: BitmapArgs,
}

/// `info`: one key (and the staging keys beside it, said on standard
/// error), or with --shards each shard of a sharded filter.
pub fn run(a: InfoArgs) -> Result<()> {
    let mut place = Place::open(&server::resolve(a.redis.as_deref(), "--redis")?)?;
    if let Some(shards) = a.shards {
        return sharded_info(&mut place, &a.key, shards, &a.bitmap, a.json);
    }
    let server = place.server_for(&a.key)?;
    let mut info = key_info(server, &a.key, &a.bitmap)?;
    let leftovers = transfer::leftover_staging(server, &a.key)?;
    info["leftover_staging_keys"] = serde_json::json!(leftovers
        .iter()
        .map(|l| serde_json::json!({
            "key": l.key, "idle_seconds": l.idle_seconds, "ttl_seconds": l.ttl_seconds,
            "stale": l.is_stale(),
        }))
        .collect::<Vec<_>>());
    print_info(&info, a.json)?;
    for l in leftovers {
        say!(
            "bloomkit info: '{}' is a staging key an interrupted restore or copy into '{}' left{}; \
             the next restore or copy of '{}' removes it (its TTL does in {}s), or UNLINK it",
            l.key,
            a.key,
            if l.is_stale() { "" } else { " (or one still running: it was written to in the last seconds)" },
            a.key,
            l.ttl_seconds.unwrap_or(0)
        );
    }
    Ok(())
}

/// What `bloomkit info` says of one key: its kind and its INFO fields.
fn key_info(server: &mut transfer::Server, key: &str, bitmap: &BitmapArgs) -> Result<serde_json::Value> {
    let info = match transfer::kind(server, key)? {
        transfer::Kind::Bloom => bloom_info(server, key)?,
        kind @ (transfer::Kind::Window
        | transfer::Kind::ValkeyBloom
        | transfer::Kind::Cuckoo
        | transfer::Kind::Xf
        | transfer::Kind::Sketch(_)) => {
            let (command, name) = match kind {
                transfer::Kind::Window => ("APBF.INFO", "sliding-window filter"),
                transfer::Kind::Xf => ("XF.INFO", "expandable filter"),
                transfer::Kind::ValkeyBloom => ("BF.INFO", "valkey-bloom filter"),
                transfer::Kind::Sketch(s) => (s.info_command(), s.name()),
                _ => ("CF.INFO", "cuckoo filter"),
            };
            let fields = transfer::info_fields(server, key, command)?;
            let mut v = serde_json::json!({"key": key, "kind": name});
            for (label, value) in fields {
                let name = label.to_lowercase().replace(' ', "_");
                v[name] = value
                    .parse::<i64>()
                    .map(|n| serde_json::json!(n))
                    .or_else(|_| value.parse::<f64>().map(|x| serde_json::json!(x)))
                    .unwrap_or_else(|_| serde_json::json!(value));
            }
            v
        }
        transfer::Kind::String | transfer::Kind::Missing if bitmap_params(bitmap)?.is_some() => {
            let params = bitmap_params(bitmap)?.expect("checked");
            let info = transfer::bitmap_info(server, key, &params)?;
            let rate = info.estimated_error_rate.unwrap_or(0.0);
            serde_json::json!({
                "key": key, "kind": "bitmap filter", "layout": info.layout, "keys": info.keys,
                "capacity": info.capacity, "bits": info.bits, "hashes": info.hashes,
                "bytes": info.bytes, "fill": info.fill, "estimated_items": info.estimated_items,
                "estimated_false_positive_rate": rate,
                "log10_estimated_false_positive_rate": if rate > 0.0 { serde_json::json!(rate.log10()) } else { serde_json::Value::Null },
            })
        }
        transfer::Kind::Missing => {
            // Nothing there, but perhaps what an interrupted
            // transfer into it left.
            let leftovers = transfer::leftover_staging(server, key)?;
            if leftovers.is_empty() {
                return Err(transfer::unreadable(server, key, &transfer::Kind::Missing).into());
            }
            serde_json::json!({"key": key, "kind": "missing"})
        }
        other => return Err(transfer::unreadable(server, key, &other).into()),
    };
    Ok(info)
}

/// `bloomkit info --shards N`: each of a sharded filter's keys ({KEY:0},
/// ...) read on the node that serves it, and the whole filter's figures:
/// items, bytes and capacity summed over the shards, and each rate the
/// largest shard's (an item is looked up in its own shard alone, so the
/// largest bound holds for any item).
fn sharded_info(place: &mut Place, key: &str, shards: u32, bitmap: &BitmapArgs, json: bool) -> Result<()> {
    let mut total = serde_json::Map::new();
    let mut kinds = Vec::new();
    let mut rows = Vec::new();
    let mut missing = 0;
    for shard in bloomkit_client::shard_keys(key, shards) {
        let node = place.node_of(&shard)?;
        let server = place.server_for(&shard)?;
        if !server.exists(&shard)? {
            missing += 1;
            rows.push(serde_json::json!({"key": shard, "node": node, "kind": "missing"}));
            continue;
        }
        let mut info = key_info(server, &shard, bitmap)?;
        add_to_total(&mut total, &info);
        if let Some(kind) = info["kind"].as_str() {
            if !kinds.contains(&kind.to_string()) {
                kinds.push(kind.to_string());
            }
        }
        info["node"] = serde_json::json!(node);
        rows.push(info);
    }
    if missing == shards as usize {
        bail!(
            "none of {} on {} exists: '{key}' is not a sharded filter of {shards} shards there (`bloomkit info \
             {key}` without --shards reads one key)",
            bloomkit_client::shard_keys(key, shards.min(2)).join(", ") + if shards > 2 { ", ..." } else { "" },
            place.url()
        );
    }
    let mut info = serde_json::Map::new();
    info.insert("key".into(), serde_json::json!(key));
    info.insert("kind".into(), serde_json::json!(format!("sharded {}", kinds.join(" and "))));
    info.insert("shards".into(), serde_json::json!(shards));
    info.insert("missing_shards".into(), serde_json::json!(missing));
    info.insert("cluster".into(), serde_json::json!(place.is_cluster()));
    info.extend(total);
    if json {
        info.insert("per_shard".into(), serde_json::Value::Array(rows));
        return Ok(print_info(&serde_json::Value::Object(info), true)?);
    }
    print_info(&serde_json::Value::Object(info), false)?;
    print_shard_table(rows)
}

/// Adds one shard's figures to the sharded filter's: the counts summed,
/// each rate the largest.
fn add_to_total(total: &mut serde_json::Map<String, serde_json::Value>, info: &serde_json::Value) {
    const SUMMED: [&str; 7] =
        ["items", "number_of_items_inserted", "size", "bytes", "capacity", "max_capacity", "entries"];
    for (name, value) in info.as_object().expect("an object") {
        match value {
            serde_json::Value::Number(n) if SUMMED.contains(&name.as_str()) => {
                let sum = total.get(name).and_then(|v| v.as_u64()).unwrap_or(0) + n.as_u64().unwrap_or(0);
                total.insert(name.clone(), serde_json::json!(sum));
            }
            serde_json::Value::Number(n) if name.ends_with("rate") && !name.starts_with("log10_") => {
                let max =
                    total.get(name).and_then(|v| v.as_f64()).unwrap_or(0.0).max(n.as_f64().unwrap_or(0.0));
                total.insert(name.clone(), serde_json::json!(max));
            }
            _ => {}
        }
    }
}

/// `info --shards N` as text: after the whole filter's fields, one row per
/// shard (its node, items, bytes and rate).
fn print_shard_table(rows: Vec<serde_json::Value>) -> Result<()> {
    let mut out = Scrubbed(io::stdout().lock());
    writeln!(out)?;
    writeln!(out, "{:<20} {:<28} {:>14} {:>12} {:>12}", "shard", "node", "items", "bytes", "rate")?;
    for row in rows {
        let field = |names: &[&str]| names.iter().find_map(|n| row.get(*n)).cloned();
        let items = field(&["items", "number_of_items_inserted"]).map_or("-".into(), |v| v.to_string());
        let bytes = field(&["size", "bytes"])
            .and_then(|v| v.as_u64())
            .map_or("-".into(), |b| units::human_bytes_exact(b as f64));
        let rate = field(&["guaranteed_rate", "estimated_false_positive_rate"])
            .and_then(|v| v.as_f64())
            .map_or("-".into(), |r| format!("{r:.6}"));
        let node = row["node"].as_str().unwrap_or("");
        writeln!(
            out,
            "{:<20} {:<28} {items:>14} {bytes:>12} {rate:>12}",
            row["key"].as_str().unwrap_or(""),
            node
        )?;
    }
    out.flush()?;
    Ok(())
}

/// A Bloom filter's description: totals, the estimated rate now, and each sub-filter.
fn bloom_info(server: &mut transfer::Server, key: &str) -> Result<serde_json::Value> {
    let (items, subs) = transfer::describe(server, key)?;
    let rate = transfer::log10_estimated_rate(&subs);
    let subs: Vec<serde_json::Value> = subs
        .iter()
        .map(|s| {
            serde_json::json!({
                "capacity": s.capacity, "items": s.items, "bytes": s.bytes, "hashes": s.hashes,
                "error_rate": s.error,
            })
        })
        .collect();
    Ok(serde_json::json!({
        "key": key,
        "kind": "Bloom filter",
        "items": items,
        "capacity": subs.iter().map(|s| s["capacity"].as_u64().unwrap_or(0)).sum::<u64>(),
        "bytes": subs.iter().map(|s| s["bytes"].as_u64().unwrap_or(0)).sum::<u64>(),
        "filters": subs.len(),
        "estimated_false_positive_rate": 10f64.powf(rate),
        "log10_estimated_false_positive_rate": if rate.is_finite() { serde_json::json!(rate) } else { serde_json::Value::Null },
        "sub_filters": subs,
    }))
}

/// `info`: the JSON object, or the same as aligned text (byte counts
/// with a human size beside them; JSON keeps the exact integer).
fn print_info(info: &serde_json::Value, json: bool) -> io::Result<()> {
    let mut out = Scrubbed(io::stdout().lock());
    if json {
        writeln!(out, "{info}")?;
        return out.flush();
    }
    let obj = info.as_object().expect("an object");
    for (name, value) in obj {
        if name == "sub_filters" || name.starts_with("log10_") || name == "leftover_staging_keys" {
            continue;
        }
        // Byte counts for people, with the exact count beside them: a Bloom
        // filter's `bytes`, and the `Size` (`Memory usage` for a t-digest)
        // that XF.INFO, APBF.INFO, CF.INFO and valkey-bloom's BF.INFO give.
        let is_bytes = matches!(name.as_str(), "bytes" | "size" | "memory_usage") || name.ends_with("_bytes");
        if let (true, Some(bytes)) = (is_bytes, value.as_u64()) {
            writeln!(out, "{:<32} {}", name.replace('_', " "), units::human_bytes_exact(bytes as f64))?;
            continue;
        }
        if name == "estimated_false_positive_rate" {
            let log10 = obj
                .get("log10_estimated_false_positive_rate")
                .and_then(|v| v.as_f64())
                .unwrap_or(f64::NEG_INFINITY);
            writeln!(out, "{:<32} {}", name.replace('_', " "), units::format_rate(log10))?;
            continue;
        }
        let text = match value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(a) => {
                a.iter().map(|v| v.as_str().map_or(v.to_string(), String::from)).collect::<Vec<_>>().join(" ")
            }
            other => other.to_string(),
        };
        writeln!(out, "{:<32} {text}", name.replace('_', " "))?;
    }
    if let Some(subs) = obj.get("sub_filters").and_then(|s| s.as_array()) {
        writeln!(out)?;
        writeln!(
            out,
            "{:>3} {:>12} {:>12} {:>6} {:>12} {:>7} {:>10}",
            "#", "capacity", "items", "fill", "bytes", "hashes", "error"
        )?;
        for (i, s) in subs.iter().enumerate() {
            let n = |f: &str| s[f].as_u64().unwrap_or(0);
            writeln!(
                out,
                "{:>3} {:>12} {:>12} {:>5.0}% {:>12} {:>7} {:>10.3e}",
                i + 1,
                n("capacity"),
                n("items"),
                100.0 * n("items") as f64 / n("capacity").max(1) as f64,
                n("bytes"),
                n("hashes"),
                s["error_rate"].as_f64().unwrap_or(0.0)
            )?;
        }
    }
    out.flush()
}
