//! The workspace's layout rule, checked on every test run: no crate has an
//! import loop, between its top-level modules or between the files of one
//! family's folder (`scripts/import-graph.py`, which prints the graph).

use std::path::Path;
use std::process::Command;

#[test]
fn no_crate_has_an_import_loop() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/import-graph.py");
    let out = Command::new("python3").arg(&script).output().expect("python3 runs scripts/import-graph.py");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "import loops (see LOOP lines):\n{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The graph it checked has every crate in it, so an empty walk cannot pass.
    for krate in ["bloomkit-core:", "bloomkit-module:", "bloomkit-client:", "bloomkit-cli:"] {
        assert!(report.contains(krate), "{krate} missing from:\n{report}");
    }
    assert!(report.contains("vbloom -> bf, common"), "core's graph looks wrong:\n{report}");
}
