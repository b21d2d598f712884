//! Measured figures printed for RELIABILITY.md.

/// Prints a measured figure for `scripts/reliability-figures.sh`, which
/// collects these lines (run the tests with `--nocapture`) into
/// RELIABILITY.md, so that its figures come from a run, never a hand edit.
pub fn figure(line: &str) {
    eprintln!("figure: {line}");
}
