#!/usr/bin/env bash
# What one value of each type really costs, beside RedisBloom 2.8.2; writes
# bench/MEMORY-RESULTS.md.
#   bench/memory.sh                          on redis-server (PATH), 20,000 keys per row
#   bench/memory.sh --server redis-server --server .test-servers/valkey-server
#   bench/memory.sh --keys 2000              a quick look
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module
exec python3 bench/memory.py "$@"
