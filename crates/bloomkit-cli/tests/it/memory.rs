//! dedup's memory: its peak RSS stays within its filter's size plus 16 MiB
//! (reader blocks, output buffer and hashes are bounded), as dedup itself
//! reports it (VmHWM). (getrusage over children would count the test
//! process's own pages, shared with the child before it execs.)

use std::process::Command;
use std::time::Duration;

#[test]
fn dedup_peak_memory_is_its_filter_plus_at_most_16_mib() {
    let lines = 2_000_000u64;
    let mut input = Vec::with_capacity(lines as usize * 24);
    for i in 0..lines {
        input.extend_from_slice(format!("user-{},/p/{}\n", i % 1_800_000, i * 7919 % 1_000_003).as_bytes());
    }
    check(&input, "2M lines");
    // Short lines cost more in offsets and hashes than in text: 8M of them.
    let short: Vec<u8> = (0..8_000_000u32).flat_map(|i| [b'a' + (i % 26) as u8, b'\n']).collect();
    check(&short, "8M one-letter lines");
}

fn check(input: &[u8], what: &str) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomkit"));
    cmd.args(["dedup", "--capacity", "2M", "--count"]);
    let out = bloomkit_testkit::output_within(&mut cmd, input, Duration::from_secs(120));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let filter = summary_bytes(&stderr, ", filter ");
    let peak = summary_bytes(&stderr, ", peak memory ");
    let beyond = peak.saturating_sub(filter);
    assert!(
        beyond <= 16 << 20,
        "{what}: peak RSS {} MiB is {} MiB beyond the {} MiB filter",
        peak >> 20,
        beyond >> 20,
        filter >> 20
    );
    bloomkit_testkit::figure(&format!(
        "dedup memory: {what}, peak {} MiB, {} MiB beyond the filter",
        peak >> 20,
        beyond >> 20
    ));
}

/// The exact byte count after `label` in dedup's summary line, which
/// reads "55.1 MiB (57747392 bytes)" (or "900 B" below a KiB).
fn summary_bytes(summary: &str, label: &str) -> u64 {
    let field = summary.rsplit(label).next().and_then(|s| s.split(',').next()).unwrap_or("").trim();
    let exact = match field.split_once('(') {
        Some((_, inside)) => inside.trim_end_matches(" bytes)"),
        None => field.trim_end_matches(" B"),
    };
    exact.trim().parse().unwrap_or_else(|_| panic!("no '{label}' bytes in the summary: {summary}"))
}
