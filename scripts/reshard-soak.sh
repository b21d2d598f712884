#!/usr/bin/env bash
# Runs the cluster test N times (default 15): each run moves all of one
# master's slots to another twice under the async cluster connection, so
# 15 runs are 30 reshards. A connection that hangs fails its run.
#   scripts/reshard-soak.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-15}"
scripts/test-servers.sh >/dev/null
cargo build --workspace --all-targets
for i in $(seq 1 "$runs"); do
  cargo test -q -p bloomkit-client --test it -- cluster:: 2>&1 | tail -1 | sed "s/^/run $i: /"
done
