#!/usr/bin/env bash
# The whole test suite: installs the test servers, then runs every test of
# every crate (unit, property, integration against real servers, differential
# against RedisBloom 2.8.2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh
cargo build --workspace --all-targets
cargo test --workspace "$@"
