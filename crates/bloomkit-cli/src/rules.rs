//! Which flags go together, declared once: clap enforces each rule on the
//! flags (`conflicts_with_all`, `requires` on a group), and when one is
//! broken the message is the rule's own, which says why and what to give
//! (clap's would say only "cannot be used with"). The first broken rule in
//! the list is the one told, so a command line with two mistakes hears of
//! the same one every time.
//!
//! Rules that depend on what a flag implies rather than on which flags are
//! given (dedup's `--key` means a server; a `--layout` means a bitmap) and
//! checks of values stay in their commands.

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{ArgGroup, ArgMatches, Command};

/// What the flags of a rule need of the others.
pub enum Needs {
    /// None of these may be given with them.
    None(&'static [&'static str]),
    /// One of these at least must be given with them.
    AnyOf(&'static [&'static str]),
}

/// A rule: given any of `flags` (argument ids) of subcommand `command`,
/// the others must be as `needs` says; `why` is told when they are not.
pub struct Rule {
    pub command: &'static str,
    pub flags: &'static [&'static str],
    pub needs: Needs,
    pub why: &'static str,
}

const SHAPE: &[&str] = &["m", "k", "table"];
const WINDOW: &[&str] = &["window", "window_count"];
const POPULATION: &[&str] = &["population", "population_range"];

/// Every rule, in the order they are told.
pub const RULES: &[Rule] = &[
    Rule {
        command: "calc",
        flags: &["xf"],
        needs: Needs::None(SHAPE),
        why: "--bits, --hashes and --table shape a Bloom filter; an expandable filter (--xf) is sized from \
              --capacity and --error-rate (its memory limit: --max-bytes)",
    },
    Rule {
        command: "calc",
        flags: WINDOW,
        needs: Needs::None(SHAPE),
        why: "--bits, --hashes and --table shape a Bloom filter; a sliding-window filter is sized from \
              --capacity and --error-rate (its memory limit: --max-bytes)",
    },
    Rule {
        command: "calc",
        flags: &["xf"],
        needs: Needs::None(WINDOW),
        why: "--xf and --window/--window-count size different filters: give one",
    },
    Rule {
        command: "calc",
        flags: &["max_bytes"],
        needs: Needs::AnyOf(&["xf", "window", "window_count"]),
        why: "--max-bytes is the limit of --xf and --window/--window-count sizings",
    },
    Rule {
        command: "calc",
        flags: &["start_capacity", "max_capacity"],
        needs: Needs::AnyOf(&["xf"]),
        why: "--start-capacity and --max-capacity size an expandable filter: add --xf",
    },
    Rule {
        command: "calc",
        flags: &["keys", "like_bf", "ttl"],
        needs: Needs::AnyOf(POPULATION),
        why: "--keys, --like-bf and --ttl size a population of keys: give --population FILE or \
              --population-range LO..HI (with --xf)",
    },
    Rule {
        command: "calc",
        flags: POPULATION,
        needs: Needs::AnyOf(&["xf"]),
        why: "--population and --population-range size expandable filters: add --xf",
    },
    Rule {
        command: "calc",
        flags: POPULATION,
        needs: Needs::None(&["n"]),
        why: "a population gives each key's items: leave out --capacity",
    },
    Rule {
        command: "calc",
        flags: POPULATION,
        needs: Needs::None(&["max_bytes"]),
        why: "--max-bytes is one filter's limit: a population is sized whole, without it",
    },
    Rule {
        command: "calc",
        flags: &["population"],
        needs: Needs::None(&["keys"]),
        why: "--keys goes with --population-range; a file lists its keys",
    },
    Rule {
        command: "calc",
        flags: &["population_range"],
        needs: Needs::AnyOf(&["keys"]),
        why: "--population-range needs --keys (how many keys)",
    },
    Rule {
        command: "calc",
        flags: &["window_count"],
        needs: Needs::None(&["n"]),
        why: "--window-count N is the window's capacity (its last N adds): leave out --capacity",
    },
    Rule {
        command: "calc",
        flags: &["window"],
        needs: Needs::AnyOf(&["n", "window_count"]),
        why: "--window needs --capacity: the most adds within any one window, bursts included",
    },
    Rule {
        command: "calc",
        flags: WINDOW,
        needs: Needs::AnyOf(&["p"]),
        why: "a sliding-window filter needs --error-rate (APBF.RESERVE has no default rate)",
    },
    Rule { command: "calc", flags: &["table"], needs: Needs::AnyOf(&["n"]), why: "--table needs --capacity" },
];

/// The command line's grammar with every rule declared on its flags.
pub fn declare(mut cli: Command) -> Command {
    for (i, rule) in RULES.iter().enumerate() {
        cli = cli.mut_subcommand(rule.command, |mut sub| {
            let group = format!("rule {i}");
            if let Needs::AnyOf(others) = rule.needs {
                sub = sub.group(ArgGroup::new(group.clone()).args(others).multiple(true).required(false));
            }
            for flag in rule.flags {
                sub = sub.mut_arg(*flag, |arg| match rule.needs {
                    Needs::None(others) => arg.conflicts_with_all(others),
                    Needs::AnyOf(_) => arg.requires(group.clone()),
                });
            }
            sub
        });
    }
    cli
}

/// The rule a command line breaks, first in [`RULES`]' order: what clap
/// refused, told in the rule's words. `None` when clap refused something
/// else, or the line does not parse without the rules either.
pub fn broken(plain: Command, args: &[OsString]) -> Option<&'static str> {
    let matches = plain.try_get_matches_from(args).ok()?;
    let (command, sub) = matches.subcommand()?;
    RULES.iter().filter(|r| r.command == command).find(|r| is_broken(r, sub)).map(|r| r.why)
}

fn is_broken(rule: &Rule, sub: &ArgMatches) -> bool {
    let given = |id: &&str| sub.value_source(id) == Some(ValueSource::CommandLine);
    rule.flags.iter().any(given)
        && match rule.needs {
            Needs::None(others) => others.iter().any(given),
            Needs::AnyOf(others) => !others.iter().any(given),
        }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::{Needs, RULES};

    /// Every rule names flags its command has (a renamed field would make
    /// clap panic at start, or a rule silently never apply).
    #[test]
    fn every_rule_names_real_flags() {
        let cli = crate::Cli::command();
        for rule in RULES {
            let sub = cli.find_subcommand(rule.command).expect(rule.command);
            let others = match rule.needs {
                Needs::None(o) | Needs::AnyOf(o) => o,
            };
            for id in rule.flags.iter().chain(others) {
                assert!(sub.get_arguments().any(|a| a.get_id() == *id), "{}: no flag {id}", rule.command);
            }
        }
    }
}
