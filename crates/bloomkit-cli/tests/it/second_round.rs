//! What a new user tripped on, second round (issue 43), each held by a test
//! against the real binary and real servers: dedup growing past its
//! capacity, messages that name the type a key holds, sizes for people,
//! and a closed pipe that must not lose a state file silently.

use std::process::{Command, Output};
use std::time::Duration;

/// The binary, with no server variable from the caller's environment.
fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomkit"));
    cmd.args(args).env_remove("BLOOMKIT_URL").env_remove("REDIS_URL").env_remove("REDISCLI_AUTH");
    bloomkit_testkit::output_within(&mut cmd, stdin, Duration::from_secs(300))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `dedup --capacity 100000` on 2.1 million distinct lines grows past its
/// capacity, as `--help` says, instead of stopping after 1.5 million with
/// "out of memory growing the filter" (the fifth part's rate, 3.1e-8, had
/// no shape: the sizing searched only hash counts near `bits x ln 2`).
#[test]
fn dedup_grows_far_past_its_capacity() {
    let lines = 2_100_000u64;
    let mut input = Vec::with_capacity(lines as usize * 32);
    for i in 0..lines {
        input.extend_from_slice(format!("https://example.com/p/{i}?q={}\n", i * 7919 % 1_000_003).as_bytes());
    }
    let o = run(&["dedup", "--capacity", "100000", "--count"], &input);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let unique: u64 =
        out.split(", ").nth(1).and_then(|u| u.trim_end_matches(" unique").parse().ok()).unwrap();
    // At most 1e-6 per line: about 2 expected false positives; 12 is far out.
    assert!(unique >= lines - 12, "{unique} of {lines} distinct lines written: {out}");
    bloomkit_testkit::figure(&format!(
        "dedup --capacity 100000 over {lines} distinct lines: {}",
        stderr(&o).trim()
    ));
}

/// A filter that cannot be made says why, and that the value is the
/// problem (exit 2): no "out of memory" for a rate no shape reaches.
#[test]
fn a_filter_that_cannot_be_made_says_why() {
    let o = run(&["dedup", "--capacity", "1000", "--error-rate", "1e-300"], b"a\n");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("error rate 1e-300") && e.contains("bits per item") && !e.contains("memory"), "{e}");
}
