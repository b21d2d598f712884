//! `bloomkit completions SHELL`: a shell completion script.

use std::io;

use anyhow::Result;

/// Writes the completion script of `top` (the whole command line, given
/// by `main.rs`, which owns it) for `shell` to standard output.
pub fn run(shell: clap_complete::Shell, mut top: clap::Command) -> Result<()> {
    clap_complete::generate(shell, &mut top, "bloomkit", &mut io::stdout());
    Ok(())
}
