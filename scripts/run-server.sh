#!/usr/bin/env bash
# Builds the module (release) and starts redis-server with it on port
# ${PORT:-6379}. Extra arguments go to redis-server (e.g. --port 7000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh --server-only   # redis-server and libclang; nothing else
cargo build --release -p bloomkit-module
exec redis-server --port "${PORT:-6379}" --loadmodule "$PWD/target/release/libbloomkit.so" "$@"
