#!/usr/bin/env bash
# bloomkit vs RedisBloom 2.8.2 on this machine; writes bench/RESULTS.md.
#   bench/run.sh            full profile (about 10 minutes)
#   bench/run.sh --quick    smoke run: checks that everything works, not timings
#   bench/run.sh --reference-build REV [other options]
#                           also builds bloomkit as of git revision REV (a tag,
#                           a commit) and measures it in a third server of the
#                           same binary, in the same rounds: the throughput rows
#                           gain its figures and bloomkit / REV, so that a
#                           regression against an older release shows in one run
#                           (say `--only writes --output FILE`).
# Other options go to bench/bench.py (--only SECTION, --output FILE, --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
invocation="bench/run.sh $*"
reference=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --reference-build)
            [ $# -ge 2 ] || { echo "--reference-build needs a git revision" >&2; exit 2; }
            reference="$2"
            shift 2
            ;;
        *)
            args+=("$1")
            shift
            ;;
    esac
done
scripts/test-servers.sh >/dev/null
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
if [ -n "$reference" ]; then
    # The revision's files (git archive: nothing is checked out or registered
    # in this repository), built in a target folder of their own that later
    # runs reuse (target/ is ignored). Only the module: the load generator
    # and the floor are this tree's, the same for every server.
    commit=$(git rev-parse --verify --quiet "$reference^{commit}") \
        || { echo "--reference-build: '$reference' is not a revision of this repository" >&2; exit 2; }
    source_dir=$(mktemp -d "${TMPDIR:-/tmp}/bloomkit-reference.XXXXXX")
    trap 'rm -rf "$source_dir"' EXIT
    git archive "$commit" | tar -x -C "$source_dir"
    target_dir="$PWD/target/reference-build"
    echo "building the reference: $reference ($commit) in $source_dir"
    (cd "$source_dir" && CARGO_TARGET_DIR="$target_dir" cargo build --release -p bloomkit-module)
    mkdir -p "$target_dir/modules"
    # One copy per commit, so that a later build of another revision leaves it alone.
    cp "$target_dir/release/libbloomkit.so" "$target_dir/modules/libbloomkit-$commit.so"
    args+=(--reference "$target_dir/modules/libbloomkit-$commit.so" --reference-name "$reference")
fi
# The floor module (bench/floor.c), against the module API header the
# redis-module crate ships.
header=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -path '*/redis-module-2*/src/include/redismodule.h' | sort | tail -1)
[ -n "$header" ] || { echo "redismodule.h not found in the cargo registry (build bloomkit-module first)" >&2; exit 1; }
cc -O2 -shared -fPIC -I"$(dirname "$header")" -o target/release/bench-floor.so bench/floor.c
BENCH_INVOCATION="$invocation" python3 bench/bench.py ${args[@]+"${args[@]}"}
