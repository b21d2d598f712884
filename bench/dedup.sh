#!/usr/bin/env bash
# bloomkit dedup vs awk and sort -u on 1e6 and 1e7 generated lines (time, peak memory, memory beyond
# the filter); writes bench/DEDUP-RESULTS.md.
#   bench/dedup.sh [--lines N] [--rounds R] [--redis-port PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p bloomkit-cli
exec python3 bench/dedup.py "$@"
