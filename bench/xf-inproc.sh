#!/usr/bin/env bash
# XF beside qfilter, growable-bloom-filter and fastbloom in one process
# (issue 48: per-item work within 1.5x of qfilter's, with today's memory);
# writes bench/XF-INPROC-RESULTS.md. What it measures and why: the doc
# comment of crates/bloomkit-bench/src/bin/xf-inproc.rs.
#   bench/xf-inproc.sh                 4M items at 1% and 0.1%, 3 runs (about 5 minutes)
#   bench/xf-inproc.sh --quick         smoke run: checks that it works, not figures
#   bench/xf-inproc.sh --secrets 24    XF's memory under 24 more secrets (8 by default): the
#                                      worst max/min of bits per item over secrets
#   bench/xf-inproc.sh --merges 1000000,6000000 --items 10000 --rates 0.01 --memory no
#                                      XF merges' ns per input entry by size (issue 47: linear)
#   bench/xf-inproc.sh --output FILE   elsewhere; other flags go to xf-inproc
set -euo pipefail
cd "$(dirname "$0")/.."
output=bench/XF-INPROC-RESULTS.md
args=()
invocation="bench/xf-inproc.sh"
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) args+=(--items 20000 --runs 1); invocation+=" --quick"; shift ;;
        --output) output="$2"; shift 2 ;;
        *) args+=("$1"); invocation+=" $1"; shift ;;
    esac
done
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
model=$(sed -n '/^model name/{s/^model name[[:space:]]*: //p;q}' /proc/cpuinfo)  # no head: pipefail and SIGPIPE
mem=$(awk '/MemTotal/ {printf "%d", $2 / 1048576}' /proc/meminfo)
overrides=$(env | grep '^CARGO_PROFILE_RELEASE_' | sort | paste -sd ' ' || true)
overrides=${overrides:-nothing (as Cargo.toml sets it)}
rev=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- crates bench/xf-inproc.sh Cargo.toml || rev+=" with uncommitted changes"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
target/release/xf-inproc "${args[@]+"${args[@]}"}" > "$tmp"
{
    echo "# XF in process, beside the filters that do the same job"
    echo
    echo "Made by \`$invocation\` at $rev on $model, $(nproc) cores, $mem GiB, Linux $(uname -r);"
    echo "$(rustc --version), release profile overridden by: $overrides."
    echo
    echo "Single lookups and inserts: every filter hashes a random \`u64\` through its own \`Hash\` path (XF:"
    echo "SipHash-1-3, keyed; qfilter: foldhash, unkeyed; qfilter-keyed: qfilter given XF's keyed hash). XF and"
    echo "growable-bloom-filter start at 100 items and grow, qfilter starts at 100 told the run's largest count,"
    echo "fastbloom is sized exactly for it. Time: thread CPU time per item; ratios are each run's figure over"
    echo "qfilter's in the same run, median over runs. Memory: one counting allocator (every row's own bytes)."
    echo "growable-bloom-filter runs with its defaults, whose tightening bounds its rate only at about 6.7x"
    echo "the one asked (its measured rate column shows it): its bits and times are not at equal rates."
    echo "Batch columns: items in batches of 100 as XF.MADD / XF.MEXISTS take them (XF: hashed a chunk at"
    echo "a time in vector lanes, adds in an all-or-nothing batch, lookups with later items' loads started"
    echo "early); the others one at a time. \"Given their hashes\": lookups with every hash made before the"
    echo "clock starts, for XF and qfilter: a lookup's own work, apart from its hash."
    echo "Speed while growing: the memory run's growth, timed at each of its points (fastbloom, sized per"
    echo "point, does not grow): the mean and the worst of each row's per-point ratios to qfilter."
    cat "$tmp"
} > "$output"
cat "$output"
