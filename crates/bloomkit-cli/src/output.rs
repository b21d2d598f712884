//! How the CLI speaks: `say!` for messages on standard error, `usage!`
//! for the errors that exit 2, and the writers and bars of its output.
//! Declared first in `main.rs` with `#[macro_use]`, so that every module
//! uses the macros by name and none reaches up into the binary's root for
//! them.

use std::io::{self, IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};

use crate::redact;

/// Writes a line to standard error, ignoring failures (a closed pipe):
/// `eprintln!` would panic there. Passwords are hidden ([`redact::scrub`]).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "{}", $crate::redact::scrub(&format!($($arg)*)));
    }};
}

/// A [`Usage`] error, formatted.
macro_rules! usage {
    ($($arg:tt)*) => { anyhow::Error::new($crate::output::Usage(format!($($arg)*))) };
}

/// An invalid value or combination of options, as opposed to a failure at
/// run time: the CLI exits 2 for it, as clap does for its own usage errors.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// An error and its causes, each said once: a client error that keeps
/// the redis crate's error as its source already quotes its text.
pub fn describe(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let said = cause.to_string();
        if !text.contains(&said) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&said);
        }
    }
    text
}

/// A transfer's bar of bytes on standard error, named `what`; hidden when
/// standard error is not a terminal (a log keeps only the summary line).
pub fn progress_bar(what: &str) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let what = redact::scrub(what);
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{what} [{{bar:30}}] {{bytes}}/{{total_bytes}} {{bytes_per_sec}} eta {{eta}}"
        ))
        .expect("valid template"),
    );
    bar
}

/// Standard output for what people read (`info`), line by line with
/// passwords hidden ([`redact::scrub`]): a key named after a URL prints as
/// every message does. (Data, such as `dedup`'s lines, is never altered.)
pub struct Scrubbed<W: Write>(pub W);

impl<W: Write> Write for Scrubbed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_all(redact::scrub(&String::from_utf8_lossy(buf)).as_bytes())?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}
