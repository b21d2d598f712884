#!/usr/bin/env bash
# One filter of a billion items (default), bloomkit beside RedisBloom 2.8.2;
# appends to bench/SCALE-RESULTS.md. Needs about 3 GB of memory and disk.
#   bench/scale.sh [--items N] [--probes N] [--rate P]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
exec python3 bench/scale.py "$@"
