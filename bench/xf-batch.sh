#!/usr/bin/env bash
# XF.MEXISTS / XF.MADD x100 against BF.MEXISTS / BF.MADD x100 on a Bloom
# filter sized exactly (bloomkit's, and RedisBloom's in the same run),
# cache-resident and DRAM-bound, server time per item; writes
# bench/XF-BATCH-RESULTS.md.
#   bench/xf-batch.sh            the full run (about 5 minutes, 1.5 GB)
#   bench/xf-batch.sh --quick    smoke run: checks that everything works, not figures
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
exec python3 bench/xf-batch.py "$@"
