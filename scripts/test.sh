#!/usr/bin/env bash
# The whole test suite: installs the test servers, then runs every test of
# every crate (unit, property, integration against real servers, differential
# against RedisBloom 2.8.2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-servers.sh
cargo build --workspace --all-targets
# Most tests wait on servers they started (startups, syncs, restarts), not
# on the CPU: 8 at a time take the module suite from 180 s to under 80 s on
# 2 cores. Each test has its own servers and ports, so they never share state.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-8}"
# Filters hash with a random secret in production; here with one fixed
# value (every test process and every server it starts inherit it), so a
# run replays exactly and an assertion that holds for some secrets only
# fails every time. scripts/seed-sweep.sh runs the seed-sensitive tests
# under other values; BLOOMKIT_HASH_SEED= (empty) draws secrets at random.
export BLOOMKIT_HASH_SEED="${BLOOMKIT_HASH_SEED-suite}"
# The property tests' cases, likewise: proptest draws new ones every run
# unless told a seed, and a run that finds a new failing case fails CI by
# chance (it did: a RAISERATE case, 2026-12-02). Here one fixed seed;
# scripts/seed-sweep.sh --broad runs them under others, and
# PROPTEST_RNG_SEED= (empty) draws at random, for a hunt by hand. A case
# found that way goes into the crate's proptest-regressions/ file.
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED-1}"
cargo test --workspace "$@"
