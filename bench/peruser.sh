#!/usr/bin/env bash
# One filter per user, sizes unknown: XF with its defaults beside RedisBloom
# 2.8.2 reserving 100,000, grown, and sized exactly; writes
# bench/XF-PERUSER-RESULTS.md.
#   bench/peruser.sh            2,000 keys, 11 million items (about 10 minutes)
#   bench/peruser.sh --quick    smoke run: checks that everything works, not figures
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli
exec python3 bench/peruser.py "$@"
