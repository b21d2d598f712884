#!/usr/bin/env bash
# XF.MERGE's server time by size (1M to 6M items per source), primary and
# replica, on Redis 7.0, Redis 8.2 and Valkey 9; writes bench/XF-MERGE-RESULTS.md.
#   bench/xf-merge.sh            the full run (a few minutes per server)
#   bench/xf-merge.sh --quick    smoke run: checks that everything works, not figures
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
exec python3 bench/xf-merge.py "$@"
