#!/usr/bin/env bash
# Builds the module and starts redis-server with it on port ${PORT:-6379}
# (extra arguments go to redis-server, e.g. --port 7000 or --daemonize yes).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh >/dev/null 2>&1 || scripts/test-servers.sh
cargo build --release -p bloomkit-module
exec redis-server --port "${PORT:-6379}" --loadmodule "$PWD/target/release/libbloomkit.so" "$@"
