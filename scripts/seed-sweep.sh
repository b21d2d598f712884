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
#   scripts/seed-sweep.sh                 # CI's handful: sweep-1 .. sweep-4
#   scripts/seed-sweep.sh --count 50      # sweep-1 .. sweep-50 (a hunt, by hand)
#   scripts/seed-sweep.sh --seeds "a b"   # these values
#   scripts/seed-sweep.sh --all-servers   # every server of the matrix, not Redis 7's only
#   scripts/seed-sweep.sh --broad         # every test file that makes such filters
#
# Each seed also seeds the property tests' cases (PROPTEST_RNG_SEED, the
# seed's checksum: --broad runs core's under each). Replay a failure with
# the seed it names:
#   BLOOMKIT_HASH_SEED=sweep-7 cargo test -p bloomkit-module --test it xf_commands
set -euo pipefail
cd "$(dirname "$0")/.."

seeds=(sweep-1 sweep-2 sweep-3 sweep-4)
skip=(--skip redis8 --skip valkey8 --skip valkey9)
while [ $# -gt 0 ]; do
  case "$1" in
    --count) mapfile -t seeds < <(seq -f 'sweep-%g' 1 "$2"); shift 2 ;;
    --seeds) read -r -a seeds <<<"$2"; shift 2 ;;
    --all-servers) skip=(); shift ;;
    --broad) use_broad=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "seed-sweep: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# Per package, the name filters of the tests to run (a test runs if its
# path holds any of them). CI's: the tests that hash with the secret (they
# do not pin a SEED) and check exact answers, counts or digests, or lean on
# valkey-bloom's random seeds.
declare -A lean=(
  [bloomkit-module]="xf_commands:: xf_persistence:: xf_hostile:: vbloom_compat::"
  [bloomkit-client]="xf:: transfer::"
  [bloomkit-cli]="dedup_in_process"
)
# --broad: every test file that makes such a filter at all (a hunt by hand).
declare -A broad=(
  [bloomkit-core]="xf::"
  [bloomkit-module]="xf_ vbloom_ memory:: info_counts:: defrag:: server_states:: cluster_keys::"
  [bloomkit-client]="xf:: transfer:: conformance:: cluster::"
  [bloomkit-cli]="sizing:: cli:: frictions:: second_round:: cluster:: ttl:: credentials::"
)
filters_of() {
  if [ -n "${use_broad:-}" ]; then echo "${broad[$1]:-}"; else echo "${lean[$1]:-}"; fi
}

export RUST_TEST_THREADS="${RUST_TEST_THREADS:-8}"
# The test programs, built as `cargo test --workspace` builds them; each
# seed runs them side by side (most of their time is spent waiting on
# servers), each in its package's folder as cargo would run it.
mapfile -t programs < <(cargo test --workspace --lib --tests --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(os.path.dirname(m["manifest_path"]) + "|" + m["executable"])')
[ ${#programs[@]} -gt 0 ] || { echo "seed-sweep: no test programs built" >&2; exit 1; }
failed=()
for seed in "${seeds[@]}"; do
  t=$SECONDS
  pids=() logs=()
  for program in "${programs[@]}"; do
    dir=${program%%|*} exe=${program#*|}
    read -r -a filters <<<"$(filters_of "$(basename "$dir")")"
    [ ${#filters[@]} -gt 0 ] || continue
    log="target/seed-sweep-$seed-$(basename "$exe").log"
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" BLOOMKIT_HASH_SEED="$seed" PROPTEST_RNG_SEED="$(cksum <<<"$seed" | cut -d' ' -f1)" \
      "$exe" --quiet "${filters[@]}" "${skip[@]}" >"$OLDPWD/$log" 2>&1) &
    pids+=($!) logs+=("$log")
  done
  for i in "${!pids[@]}"; do
    if wait "${pids[$i]}"; then
      rm -f "${logs[$i]}"
    else
      # The failures' whole output (the log is lost with the machine in CI).
      # A program that aborted has no failures section: its last lines then.
      # (`|| true`: past 150 lines `head` closes the pipe, and under
      # pipefail sed's SIGPIPE would end the script here, silently.)
      details=$(sed -n '/^failures:$/,/^failures:$/p' "${logs[$i]}" | head -150 || true)
      if [ -n "$details" ]; then echo "$details" >&2; else tail -40 "${logs[$i]}" >&2; fi
      echo "seed-sweep: failed under BLOOMKIT_HASH_SEED=$seed (log: ${logs[$i]})" >&2
      failed+=("$seed")
    fi
  done
  echo "seed-sweep: BLOOMKIT_HASH_SEED=$seed done in $((SECONDS - t)) s"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "seed-sweep: failed: ${failed[*]}" >&2
  exit 1
fi
echo "seed-sweep: ${#seeds[@]} seeds passed"
