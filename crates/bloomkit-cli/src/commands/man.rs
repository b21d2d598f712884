//! `bloomkit man [SUBCOMMAND]`: manual pages (roff), printed or written
//! into a folder; the pages themselves are [`crate::manual`]'s.

use std::io;

use anyhow::Result;
use clap::Args;

use crate::manual;

#[derive(Args)]
pub struct ManArgs {
    /// The subcommand whose page to print (bloomkit-SUBCOMMAND(1)); without
    /// one, the page of bloomkit itself.
    subcommand: Option<String>,
    /// Write every page (bloomkit.1 and one per subcommand) into this
    /// folder instead, e.g. for /usr/share/man/man1.
    #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
    out_dir: Option<std::path::PathBuf>,
}

/// Prints the page asked for, or writes every page with --out-dir; `top`
/// is the whole command line, given by `main.rs`, which owns it.
pub fn run(a: ManArgs, top: clap::Command) -> Result<()> {
    match a.out_dir {
        Some(dir) => {
            for file in manual::write_all(top, &dir)? {
                say!("bloomkit man: wrote {file}");
            }
        }
        None => manual::print(top, a.subcommand.as_deref(), &mut io::stdout().lock())?,
    }
    Ok(())
}
