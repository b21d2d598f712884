//! Adding a family (ARCHITECTURE.md, "Adding a family"), walked through as
//! a test: every family in core's list (`bloomkit_core::family::KINDS`)
//! has its folder in core and in the module, its persistence and hostile
//! suites here, a fuzz target over its decoders, a key in the INFO count
//! suite, and its defrag row (which `defrag.rs` derives from the list). A
//! family added to the list and missing from any of these fails here,
//! named with what it misses; the module's `families_are_core_s_kinds`
//! fails for one missing from the module's `FAMILIES`, the client's
//! `every_family_is_a_kind_that_moves` for one the client cannot move.

use std::path::{Path, PathBuf};

use bloomkit_core::family::KINDS;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files: Vec<(String, String)> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| {
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_family_is_in_every_list() {
    // The test files the test program declares, and the fuzz targets the
    // fuzz crate builds: a file of neither would pass unrun.
    let declared = std::fs::read_to_string(root().join("crates/bloomkit-module/tests/it/main.rs")).unwrap();
    let tests: Vec<(String, String)> = sources(&root().join("crates/bloomkit-module/tests/it"))
        .into_iter()
        .filter(|(name, _)| declared.contains(&format!("mod {};", name.trim_end_matches(".rs"))))
        .collect();
    let built = std::fs::read_to_string(root().join("fuzz/Cargo.toml")).unwrap();
    let fuzz: Vec<(String, String)> = sources(&root().join("fuzz/fuzz_targets"))
        .into_iter()
        .filter(|(name, _)| built.contains(&format!("fuzz_targets/{name}")))
        .collect();
    let counted = crate::info_counts::families(true);
    let mut missing = Vec::new();
    for k in KINDS {
        let f = k.folder;
        let mut miss = |what: &str| missing.push(format!("{} ({f}): {what}", k.name));
        for krate in ["bloomkit-core", "bloomkit-module"] {
            if !root().join("crates").join(krate).join("src").join(f).is_dir() {
                miss(&format!("no folder crates/{krate}/src/{f}"));
            }
        }
        let own: Vec<&(String, String)> =
            tests.iter().filter(|(name, _)| name.starts_with(&format!("{f}_"))).collect();
        if !own.iter().any(|(name, _)| *name == format!("{f}_persistence.rs")) {
            miss(&format!("no tests/it/{f}_persistence.rs"));
        }
        if !own.iter().any(|(_, text)| text.contains("bloomkit_testkit::hostile")) {
            miss(&format!("no hostile suite (a tests/it/{f}_*.rs using bloomkit_testkit::hostile)"));
        }
        let decoders =
            [format!("bloomkit_core::{f}::"), format!("bloomkit_core::{f};"), format!("bloomkit_core::{f},")];
        if !fuzz.iter().any(|(_, text)| decoders.iter().any(|d| text.contains(d.as_str()))) {
            miss("no fuzz target under fuzz/fuzz_targets reads its formats");
        }
        // valkey-bloom's keys answer BF.*: BF's entry makes one (with
        // valkey-bloom's fields when the module runs at that level).
        let creates = format!("{}.", k.prefix);
        if !counted.iter().any(|(_, create)| create.starts_with(creates.as_str())) {
            miss("no key in info_counts::families");
        }
    }
    assert!(missing.is_empty(), "families missing from a list:\n{}", missing.join("\n"));
}
