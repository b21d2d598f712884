#!/usr/bin/env bash
# APBF.* beside BF.* on this machine; writes bench/WINDOW-RESULTS.md.
#   bench/window.sh            full profile (a few minutes)
#   bench/window.sh --quick    smoke run: checks that everything works, not timings
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
exec python3 bench/window.py "$@"
