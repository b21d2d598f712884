//! Manual pages: `bloomkit(1)` and one `bloomkit-<subcommand>(1)` per
//! subcommand. NAME, DESCRIPTION and OPTIONS come from the same clap
//! definitions that parse the command line, so they cannot drift from it;
//! the SYNOPSIS is written here with each option's value (clap_mangen's
//! leaves them out); EXAMPLES (the README's), ENVIRONMENT, EXIT STATUS and
//! SIGNALS are written here, per subcommand.

use std::io::{self, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use roff::{bold, italic, roman, Roff};

/// The pages, as (file name without section, command) pairs: the top page
/// first, then each subcommand's, named as `man bloomkit-dedup` finds it.
fn pages(top: clap::Command) -> Vec<(String, clap::Command)> {
    let mut top = top.disable_help_subcommand(true);
    top.build();
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

/// The README's examples for each subcommand: (command line, what it does).
/// Each list is a constant of its own, so that this reads as the table it is.
fn examples(subcommand: &str) -> &'static [(&'static str, &'static str)] {
    match subcommand {
        "calc" => CALC_EXAMPLES,
        "dedup" => DEDUP_EXAMPLES,
        "dump" => DUMP_EXAMPLES,
        "restore" => RESTORE_EXAMPLES,
        "copy" => COPY_EXAMPLES,
        "info" => INFO_EXAMPLES,
        "completions" => COMPLETIONS_EXAMPLES,
        "man" => MAN_EXAMPLES,
        _ => TOP_EXAMPLES,
    }
}

/// `bloomkit calc`'s examples.
const CALC_EXAMPLES: &[(&str, &str)] = &[
    ("bloomkit calc -n 1e9 -p 0.001", "size a filter for a billion items at 0.1%"),
    (
        "bloomkit calc -n 1e9 --table --bits-per-item 30,50 --table-hashes 8,16",
        "a grid of false-positive rate, expected false positives and memory",
    ),
    ("bloomkit calc -m 512MiB -n 1e8 --json", "what 512 MiB holds for 1e8 items, as one JSON object"),
    (
        "bloomkit calc --xf -n 10M -p 0.01",
        "an expandable filter's memory at 10M items, and what fits in 8 GiB",
    ),
    (
        "bloomkit calc --window 10m -n 1M -p 0.001",
        "a sliding window of 10 minutes, at most 1M adds in any one",
    ),
];

/// `bloomkit dedup`'s examples.
const DEDUP_EXAMPLES: &[(&str, &str)] = &[
    ("bloomkit dedup access.log > unique.log", "each line the first time it is seen"),
    ("bloomkit dedup --count < access.log", "only the counts"),
    ("bloomkit dedup --state seen.bkf < today.log", "remember the lines between runs in a file"),
    (
        "bloomkit dedup --redis redis://host:6379 --key seen",
        "the filter on a server with bloomkit (XF.*, or BF.* with --capacity)",
    ),
    (
        "bloomkit dedup --redis redis://host:6379 --bitmap --key seen",
        "a plain Redis bitmap, for servers without modules",
    ),
    (
        "bloomkit dedup --redis redis://node:7000 --key seen",
        "on a Redis Cluster: an expandable filter sharded over 12 keys {seen:0} ... on the masters",
    ),
    ("bloomkit dedup --window 10m", "a line is written again once it was last seen ten minutes ago"),
    ("bloomkit dedup --field 2 --delimiter ,", "dedup on the second column"),
];

/// `bloomkit dump`'s examples.
const DUMP_EXAMPLES: &[(&str, &str)] = &[
    ("bloomkit dump --redis redis://host:6379 seen -o seen.bkf", "save a filter or sketch of any size"),
    ("bloomkit dump seen -o - | gzip > seen.bkf.gz", "to standard output ($BLOOMKIT_URL's server)"),
    (
        "bloomkit dump --redis URL KEY --bitmap --capacity 1M --error-rate 0.001 --format guava -o f.bin",
        "a guava-layout bitmap as Guava's BloomFilter.writeTo writes it",
    ),
];

/// `bloomkit restore`'s examples.
const RESTORE_EXAMPLES: &[(&str, &str)] = &[
    ("bloomkit restore --redis redis://host:6379 seen -i seen.bkf", "load a file of any kind"),
    ("gunzip -c seen.bkf.gz | bloomkit restore seen -i - --replace", "from standard input, over the key"),
    ("bloomkit restore --format guava -i f.bin --redis URL KEY", "a Guava BloomFilter file"),
];

/// `bloomkit copy`'s examples.
const COPY_EXAMPLES: &[(&str, &str)] = &[
    (
        "bloomkit copy --from redis://old:6379 --to redis://new:6379 --all",
        "every filter and sketch on the source",
    ),
    ("bloomkit copy --from redis://old:6379 --all --match 'clicks:*'", "to $BLOOMKIT_URL's server"),
    ("bloomkit copy --from redis://old:6379 --to redis://new:6379 seen --replace", "one key, over"),
    (
        "bloomkit copy --from redis://node:7000 --to redis://other:7000 seen --shards 12",
        "a sharded filter's 12 keys, each from and to the master of its slot",
    ),
];

/// `bloomkit info`'s examples.
const INFO_EXAMPLES: &[(&str, &str)] = &[
    ("bloomkit info --redis redis://host:6379 seen", "describe a filter or sketch"),
    ("bloomkit info seen --json", "as one JSON object"),
    ("bloomkit info seen --bitmap --capacity 1M --error-rate 0.001", "a bitmap filter"),
    (
        "bloomkit info --redis redis://node:7000 seen --shards 12",
        "each shard of a sharded filter on its node, and the whole filter",
    ),
];

/// `bloomkit completions`'s examples.
const COMPLETIONS_EXAMPLES: &[(&str, &str)] = &[(
    "bloomkit completions bash > ~/.local/share/bash-completion/completions/bloomkit",
    "bash completion (or zsh, fish)",
)];

/// `bloomkit man`'s examples.
const MAN_EXAMPLES: &[(&str, &str)] = &[
    ("bloomkit man dedup | man -l -", "read a subcommand's page"),
    ("bloomkit man --out-dir ~/.local/share/man/man1", "install every page"),
];

/// The top page's examples (and any other name's): one each for the main subcommands.
const TOP_EXAMPLES: &[(&str, &str)] = &[
    ("bloomkit calc -n 1e9 -p 0.001", "size a filter"),
    ("bloomkit dedup access.log > unique.log", "each line the first time it is seen"),
    ("bloomkit dump --redis redis://host:6379 seen -o seen.bkf", "save a filter"),
    ("bloomkit restore --redis redis://host:6379 seen -i seen.bkf", "load it"),
];

/// What a signal leaves, per subcommand (README's "Interrupted" list).
fn interrupted(subcommand: &str) -> &'static str {
    match subcommand {
        "restore" => {
            "SIGINT or SIGTERM: the restore stops at its next command, removes its staging key \
             ({KEY}:bloomkit-staging:PID) and exits; KEY is as it was. Killed outright (SIGKILL), it \
             leaves the staging key with a one-hour TTL: bloomkit info KEY reports it, and the next \
             restore or copy into KEY removes it."
        }
        "copy" => {
            "SIGINT or SIGTERM: the key being copied is left as it was on the destination and its \
             staging key removed; keys copied before it stay copied. Killed outright (SIGKILL), the \
             staging key stays with a one-hour TTL until the next restore or copy of that key removes it."
        }
        "dump" => {
            "SIGINT or SIGTERM: the partial file (FILE's name with the extension tmp-PID) is removed and \
             FILE is not written (an existing FILE is kept as it was). To standard output, what was \
             written is incomplete. Killed outright (SIGKILL), it leaves the partial file, which \
             the next dump to FILE removes."
        }
        "dedup" => {
            "SIGINT or SIGTERM: dedup stops after the block it is on, writes out what it kept, and \
             with --state saves the state, which then holds every line written; with --redis every \
             line written is in the server's filter. A second signal stops it at once and says \
             that the state was not saved."
        }
        _ => "SIGINT and SIGTERM end it at once: it leaves nothing behind.",
    }
}

/// Renders one page: clap_mangen's NAME, DESCRIPTION and OPTIONS, and
/// this file's SYNOPSIS, EXAMPLES, ENVIRONMENT, EXIT STATUS and SIGNALS.
fn render(cmd: &clap::Command, subcommand: &str, out: &mut dyn Write) -> io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut text = Vec::new();
    man.render_title(&mut text)?;
    man.render_name_section(&mut text)?;
    let mut roff = Roff::new();
    roff.control("SH", ["SYNOPSIS"]);
    roff.text(synopsis(cmd));
    if cmd.has_subcommands() {
        roff.text([line_break(), bold("bloomkit"), roman(" "), italic("COMMAND"), roman(" --help")]);
    }
    text.extend(strip_preamble(&roff.to_roff()).bytes());
    man.render_description_section(&mut text)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut text)?;
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut text)?;
    }
    let mut roff = Roff::new();
    roff.control("SH", ["EXAMPLES"]);
    for (line, what) in examples(subcommand) {
        roff.control("TP", []);
        roff.text([bold(*line)]);
        roff.text([roman(*what)]);
    }
    roff.control("SH", ["ENVIRONMENT"]);
    roff.control("TP", []).text([bold("BLOOMKIT_URL")]);
    roff.text([roman(
        "The server for commands given none (--redis, or copy's --to): a URL (redis://host:port[/db], \
         rediss://..., unix:///path) or host:port, host (port 6379) or :port (127.0.0.1).",
    )]);
    roff.control("TP", []).text([bold("REDIS_URL")]);
    roff.text([roman("The same, when BLOOMKIT_URL is not set. --redis wins over both.")]);
    roff.control("TP", []).text([bold("REDISCLI_AUTH")]);
    roff.text([roman(
        "The password, when the server's URL has none (as redis-cli takes it); a password in the URL \
         (user:password@ before the host) wins. No output shows either.",
    )]);
    roff.control("SH", ["EXIT STATUS"]);
    for (status, meaning) in [
        ("0", "Success; also when standard output was closed early (bloomkit dump | head)."),
        ("1", "A failure at run time (a server that does not answer, a damaged file; copy: a key not copied), with a message that says what to do."),
        ("2", "A usage error or an invalid value (an option, a URL, a size)."),
        ("130, 143", "Stopped by SIGINT (Ctrl-C) or SIGTERM after cleaning up, see SIGNALS."),
        ("128+N", "Stopped at once by a second signal N, or by one it had not acted on within 10 seconds; the message says what may be left."),
    ] {
        roff.control("TP", []).text([bold(status)]);
        roff.text([roman(meaning)]);
    }
    roff.control("SH", ["SIGNALS"]);
    roff.text([roman(interrupted(subcommand))]);
    text.extend(strip_preamble(&roff.to_roff()).bytes());
    if let Some(v) = cmd.get_version() {
        let mut roff = Roff::new();
        roff.control("SH", ["VERSION"]).text([roman(format!("v{v}"))]);
        text.extend(strip_preamble(&roff.to_roff()).bytes());
    }
    // Each section rendered alone carries roff's preamble: keep the first.
    let text = String::from_utf8_lossy(&text);
    let preamble = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";
    out.write_all(preamble.as_bytes())?;
    out.write_all(strip_preamble(&text).as_bytes())
}

fn line_break() -> roff::Inline {
    roff::line_break()
}

/// Every section after the first carries roff's preamble again: once is enough.
fn strip_preamble(roff: &str) -> String {
    roff.lines().filter(|l| !l.starts_with(".ie \\n(.g") && !l.starts_with(".el .ds Aq")).fold(
        String::new(),
        |mut s, l| {
            s.push_str(l);
            s.push('\n');
            s
        },
    )
}

/// `bloomkit dump [--redis URL] [-o|--output FILE] ... <KEY>`: every
/// option with its value's name, required ones without brackets.
fn synopsis(cmd: &clap::Command) -> Vec<roff::Inline> {
    let mut parts = vec![bold(cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string())];
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let values: Vec<String> = if arg.get_action().takes_values() {
            arg.get_value_names()
                .map(|v| v.iter().map(|s| s.to_string()).collect())
                .unwrap_or_else(|| vec![arg.get_id().as_str().to_uppercase()])
        } else {
            Vec::new()
        };
        parts.push(roman(" "));
        if arg.is_positional() {
            let name = values.first().cloned().unwrap_or_default();
            let many = matches!(arg.get_num_args(), Some(r) if r.max_values() > 1);
            let (open, close) = if arg.is_required_set() { ("<", ">") } else { ("[", "]") };
            parts.push(roman(open));
            parts.push(italic(name));
            parts.push(roman(close));
            if many {
                parts.push(roman("..."));
            }
            continue;
        }
        let required = arg.is_required_set();
        if !required {
            parts.push(roman("["));
        }
        let mut names = Vec::new();
        if let Some(s) = arg.get_short() {
            names.push(format!("-{s}"));
        }
        if let Some(l) = arg.get_long() {
            names.push(format!("--{l}"));
        }
        for (i, n) in names.iter().enumerate() {
            if i > 0 {
                parts.push(roman("|"));
            }
            parts.push(bold(n.clone()));
        }
        let optional_value = matches!(arg.get_num_args(), Some(r) if r.min_values() == 0);
        for v in values {
            parts.push(roman(if optional_value { " [" } else { " " }));
            parts.push(italic(v));
            if optional_value {
                parts.push(roman("]"));
            }
        }
        if !required {
            parts.push(roman("]"));
        }
    }
    parts
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
        bail!(crate::output::Usage(format!(
            "there is no subcommand '{}'; pages exist for: {}",
            subcommand.unwrap_or_default(),
            names.join(", ")
        )));
    };
    render(cmd, subcommand.unwrap_or(""), out)?;
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
        let subcommand = name.strip_prefix("bloomkit-").unwrap_or("");
        render(&cmd, subcommand, &mut file)?;
        file.flush().with_context(|| format!("writing {}", path.display()))?;
        written.push(path.display().to_string());
    }
    Ok(written)
}
