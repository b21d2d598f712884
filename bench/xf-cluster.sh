#!/usr/bin/env bash
# Issue 42, point 5: one expandable filter sharded over a 3-master Redis
# Cluster (Layout::sharded(.., Over::Expandable)) loaded through the client,
# beside one RedisBloom BF of the same count; appends to
# bench/XF-CLUSTER-RESULTS.md. 1e8 items (default) take about 3 GB of memory.
#   bench/xf-cluster.sh [--items N] [--probes N] [--rate P] [--threads T] [--shards S]
#   bench/xf-cluster.sh --quick      smoke run (200,000 items): checks that everything works, not figures
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
exec python3 bench/xf-cluster.py "$@"
