//! README names what the server prints: every `INFO bf` field and section
//! README mentions is printed, and every one printed is in README (a
//! `<type>` in README's name stands for any word).

use std::collections::BTreeSet;

use bloomkit_testkit::{Server, TestServer};

/// Every backticked `bf_...` name in README.
fn readme_names() -> BTreeSet<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    readme
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| t.starts_with("bf_") && t.chars().all(|c| c.is_ascii_alphanumeric() || "_<>".contains(c)))
        .map(str::to_string)
        .collect()
}

/// Whether README's `name` (maybe with `<type>`) names `printed`.
fn names(name: &str, printed: &str) -> bool {
    match name.split_once("<type>") {
        None => name == printed,
        Some((head, tail)) => {
            printed.len() > head.len() + tail.len() && printed.starts_with(head) && printed.ends_with(tail)
        }
    }
}

#[test]
fn info_fields_and_sections_are_the_ones_readme_names() {
    for server in [Server::Redis, Server::Valkey] {
        let s = TestServer::with_bloomkit(server);
        let mut c = s.conn();
        let info = String::from_utf8(c.cmd("INFO bf").as_bytes().to_vec()).unwrap();
        let sections: BTreeSet<String> =
            info.lines().filter_map(|l| l.strip_prefix("# ")).map(|s| s.trim().to_string()).collect();
        let fields: BTreeSet<String> =
            info.lines().filter_map(|l| l.split_once(':')).map(|(k, _)| k.to_string()).collect();
        let readme = readme_names();
        assert!(readme.len() > 40, "README's names: {readme:?}");
        for name in &readme {
            let printed = fields.iter().chain(&sections).any(|p| names(name, p));
            assert!(printed, "{server:?}: README names `{name}`, which INFO bf does not print:\n{info}");
        }
        for field in &fields {
            assert!(
                readme.iter().any(|n| names(n, field)),
                "{server:?}: INFO bf prints {field}, which README does not name"
            );
        }
    }
}
