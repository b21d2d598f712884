#!/usr/bin/env bash
# Issue 15 (b): a billion items (default) through the sharded client into a
# 3-master Redis Cluster on loopback, bloomkit on every master; appends to
# bench/SCALE-RESULTS.md. Needs about 3 GB of memory and 1.5 GB of disk.
#   bench/cluster.sh [--items N] [--probes N] [--rate P] [--threads T] [--output FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh --server-only >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
exec python3 bench/cluster.py "$@"
