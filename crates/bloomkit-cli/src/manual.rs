//! Manual pages: `bloomkit(1)` and one `bloomkit-<subcommand>(1)` per
//! subcommand with every option, generated from the same clap definitions
//! that parse the command line, so they cannot drift from it.

use std::io::{self, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};

/// The pages, as (file name without section, command) pairs: the top page
/// first, then each subcommand's, named as `man bloomkit-dedup` finds it.
fn pages(top: clap::Command) -> Vec<(String, clap::Command)> {
    let top = top.disable_help_subcommand(true);
    let mut pages = Vec::new();
    for sub in top.get_subcommands() {
        let name = format!("{}-{}", top.get_name(), sub.get_name());
        // The page's title and synopsis name the subcommand as it is typed.
        let sub = sub.clone().name(name.clone()).bin_name(format!("{} {}", top.get_name(), sub.get_name()));
        let sub = match top.get_version() {
            Some(v) => sub.version(v.to_string()),
            None => sub,
        };
        pages.push((name, sub));
    }
    pages.insert(0, (top.get_name().to_string(), top));
    pages
}

/// Writes `subcommand`'s page (the top page without one) as roff to `out`.
pub fn print(top: clap::Command, subcommand: Option<&str>, out: &mut dyn Write) -> Result<()> {
    let wanted = match subcommand {
        Some(s) => format!("{}-{s}", top.get_name()),
        None => top.get_name().to_string(),
    };
    let pages = pages(top);
    let Some((_, cmd)) = pages.iter().find(|(name, _)| *name == wanted) else {
        let names: Vec<&str> = pages[1..].iter().map(|(n, _)| &n["bloomkit-".len()..]).collect();
        bail!(crate::Usage(format!(
            "there is no subcommand '{}'; pages exist for: {}",
            subcommand.unwrap_or_default(),
            names.join(", ")
        )));
    };
    clap_mangen::Man::new(cmd.clone()).render(out)?;
    Ok(())
}

/// Writes every page as `<name>.1` into `dir` (created if missing); returns
/// the files written.
pub fn write_all(top: clap::Command, dir: &Path) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for (name, cmd) in pages(top) {
        let path = dir.join(format!("{name}.1"));
        let mut file = io::BufWriter::new(
            std::fs::File::create(&path).with_context(|| format!("writing {}", path.display()))?,
        );
        clap_mangen::Man::new(cmd).render(&mut file)?;
        file.flush().with_context(|| format!("writing {}", path.display()))?;
        written.push(path.display().to_string());
    }
    Ok(written)
}
