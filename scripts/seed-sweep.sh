#!/usr/bin/env bash
# The tests whose filters hash with a secret (XF on a server and in
# process, the client's expandable layout and its transfers, the CLI over
# XF, valkey-bloom's random seeds), run once per hashing seed.
#
# A secret is drawn at random in production; BLOOMKIT_HASH_SEED fixes it
# for a whole run (every filter the test process makes and every server it
# starts, which inherit the variable). scripts/test.sh runs the suite under
# one fixed value; this runs the seed-sensitive part under others, so that
# an assertion which holds for some secrets only fails every time rather
# than once in fifty runs.
#
#   scripts/seed-sweep.sh                 # CI's handful: sweep-1 .. sweep-3
#   scripts/seed-sweep.sh --count 50      # sweep-1 .. sweep-50 (a hunt, by hand)
#   scripts/seed-sweep.sh --seeds "a b"   # these values
#   scripts/seed-sweep.sh --all-servers   # every server of the matrix, not Redis 7's only
#   scripts/seed-sweep.sh --broad         # every test file that makes such filters
#
# Replay a failure with the seed it names:
#   BLOOMKIT_HASH_SEED=sweep-7 cargo test -p bloomkit-module --test it xf_commands
set -euo pipefail
cd "$(dirname "$0")/.."

seeds=(sweep-1 sweep-2 sweep-3)
skip=(--skip redis8 --skip valkey8 --skip valkey9)
while [ $# -gt 0 ]; do
  case "$1" in
    --count) mapfile -t seeds < <(seq -f 'sweep-%g' 1 "$2"); shift 2 ;;
    --seeds) read -r -a seeds <<<"$2"; shift 2 ;;
    --all-servers) skip=(); shift ;;
    --broad) use_broad=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "seed-sweep: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# The selections: package, test target, then the name filters (any of them).
# CI's: the tests that hash with a secret and check answers, sizes or counts.
runs=(
  "bloomkit-core|--lib|xf::"
  "bloomkit-core|--test it|xf::"
  "bloomkit-client|--test it|xf:: transfer:: expandable"
  "bloomkit-module|--test it|xf_ vbloom_"
  "bloomkit-cli|--test it|sizing:: dedup_in_process dedup_without_a_capacity"
)
# --broad: every file that makes such a filter at all (a hunt by hand).
broad=(
  "bloomkit-core|--lib|xf::"
  "bloomkit-core|--test it|xf::"
  "bloomkit-client|--test it|xf:: transfer:: conformance:: cluster::"
  "bloomkit-module|--test it|xf_ vbloom_ memory:: info_counts:: defrag:: server_states:: cluster_keys::"
  "bloomkit-cli|--test it|sizing:: cli:: frictions:: second_round:: cluster:: ttl:: credentials::"
)

[ -z "${use_broad:-}" ] || runs=("${broad[@]}")

cargo build --workspace --all-targets --quiet
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-8}"
failed=()
for seed in "${seeds[@]}"; do
  t=$SECONDS
  for run in "${runs[@]}"; do
    IFS='|' read -r package target filters <<<"$run"
    r=$SECONDS
    # shellcheck disable=SC2086 # target and filters are word lists
    if ! BLOOMKIT_HASH_SEED="$seed" cargo test --quiet -p "$package" $target -- $filters "${skip[@]}" \
      >"target/seed-sweep.log" 2>&1; then
      kept="target/seed-sweep-$seed-$package.log"
      cp target/seed-sweep.log "$kept"
      grep -E "^(test .* FAILED|---- )|panicked" "$kept" | head -20 >&2 || true
      echo "seed-sweep: $package ($filters) failed under BLOOMKIT_HASH_SEED=$seed (log: $kept)" >&2
      failed+=("$seed:$package")
    fi
    [ -z "${SEED_SWEEP_VERBOSE:-}" ] || echo "seed-sweep: $seed $package ($filters): $((SECONDS - r)) s"
  done
  echo "seed-sweep: BLOOMKIT_HASH_SEED=$seed done in $((SECONDS - t)) s"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "seed-sweep: failed: ${failed[*]}" >&2
  exit 1
fi
echo "seed-sweep: ${#seeds[@]} seeds passed"
