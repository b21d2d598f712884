#!/usr/bin/env bash
# The format check CI runs: rustfmt on every tracked `.rs` file, named one by
# one. `cargo fmt` alone follows `mod` lines from each crate's root and
# misses any file it cannot reach that way (a module declared inside a
# macro, the fuzz crate outside the workspace); naming the files reaches all.
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files -z '*.rs' | xargs -0 rustfmt --edition 2021 --config-path rustfmt.toml --check
echo "format: $(git ls-files '*.rs' | wc -l) files checked"
