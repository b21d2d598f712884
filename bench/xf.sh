#!/usr/bin/env bash
# bloomkit's expandable filter (XF.*) vs RedisBloom 2.8.2's scalable filter,
# grown from 1,000 items; writes bench/XF-RESULTS.md.
#   bench/xf.sh                      to 2 million items (a few minutes)
#   bench/xf.sh --items 100000000    the scale run (about 40 minutes, 6 GB)
#   bench/xf.sh --quick              smoke run: checks that everything works, not figures
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
exec python3 bench/xf.py "$@"
