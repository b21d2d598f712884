#!/usr/bin/env bash
# bloomkit vs RedisBloom 2.8.2 on this machine; writes bench/RESULTS.md.
#   bench/run.sh            full profile (about 10 minutes)
#   bench/run.sh --quick    smoke run: checks that everything works, not timings
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench
exec python3 bench/bench.py "$@"
