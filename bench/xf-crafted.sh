#!/usr/bin/env bash
# Items crafted against a known seed, and one item added tens of thousands of
# times, on Redis 7.0, Redis 8.2 and Valkey 9: the slowest command per 1,000
# items and the measured rate; writes bench/XF-CRAFTED-RESULTS.md.
#   bench/xf-crafted.sh            the full run (a few minutes; crafting takes most of it)
#   bench/xf-crafted.sh --quick    smoke run: checks that everything works, not figures
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
exec python3 bench/xf-crafted.py "$@"
