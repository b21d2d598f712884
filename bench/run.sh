#!/usr/bin/env bash
# bloomkit vs RedisBloom 2.8.2 on this machine; writes bench/RESULTS.md.
#   bench/run.sh            full profile (about 10 minutes)
#   bench/run.sh --quick    smoke run: checks that everything works, not timings
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
# The floor module (bench/floor.c), against the module API header the
# redis-module crate ships.
header=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -path '*/redis-module-2*/src/include/redismodule.h' | sort | tail -1)
[ -n "$header" ] || { echo "redismodule.h not found in the cargo registry (build bloomkit-module first)" >&2; exit 1; }
cc -O2 -shared -fPIC -I"$(dirname "$header")" -o target/release/bench-floor.so bench/floor.c
exec python3 bench/bench.py "$@"
