#!/usr/bin/env bash
# Fuzzes every decoder and argument parser of bloomkit-core with libFuzzer
# (cargo-fuzz), and fails unless every target built, replayed each of its
# committed regressions, and ran ("Done N runs") without a failing input.
#   fuzz/run.sh [SECONDS_PER_TARGET]      default 30 (CI smoke); 600 for a real run
# Installs cargo-fuzz if missing. cargo-fuzz needs nightly features; the
# stable toolchain allows them with RUSTC_BOOTSTRAP=1.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-30}"
# AddressSanitizer by default; CI's smoke run uses none (FUZZ_SANITIZER=none):
# the targets are safe Rust, and the smoke proves build, replay and run.
sanitizer="${FUZZ_SANITIZER:-address}"
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
python3 seed-corpus.py
targets=(scandump_header scandump_chunks rdb_fields filter_file command_args apbf_state apbf_args cuckoo_codecs cms_codecs topk_codecs tdigest_codecs vbloom_codecs xf_codecs)
# Every target in Cargo.toml is fuzzed: a new one cannot be forgotten here.
declared=$(grep -c '^\[\[bin\]\]' Cargo.toml)
[ "$declared" -eq "${#targets[@]}" ] || { echo "fuzz/run.sh lists ${#targets[@]} targets, Cargo.toml $declared" >&2; exit 1; }
log=$(mktemp); trap 'rm -f "$log"' EXIT
fail() { echo "fuzz target $1: $2" >&2; tail -40 "$log" >&2; exit 1; }
for target in "${targets[@]}"; do
  mkdir -p "regressions/$target" "corpus/$target"
  cargo fuzz build --sanitizer "$sanitizer" "$target" >"$log" 2>&1 || fail "$target" "did not build"
  # regressions/ holds inputs that once failed: each is run once, by name.
  mapfile -t regressions < <(find "regressions/$target" -type f | sort)
  if [ ${#regressions[@]} -gt 0 ]; then
    cargo fuzz run --sanitizer "$sanitizer" "$target" "${regressions[@]}" -- -runs=1 >"$log" 2>&1 \
      || fail "$target" "a committed regression fails again"
    executed=$(grep -c '^Executed ' "$log" || true)
    [ "$executed" -eq ${#regressions[@]} ] \
      || fail "$target" "replayed $executed of ${#regressions[@]} regressions"
  fi
  echo "== fuzzing $target for ${seconds}s (${#regressions[@]} regressions replayed)"
  cargo fuzz run --sanitizer "$sanitizer" "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1 \
    || fail "$target" "found a failing input (see fuzz/artifacts/$target)"
  grep -qE '^Done [0-9]+ runs' "$log" || fail "$target" "did not report a finished run"
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss)' "$log"
done
echo "fuzzing: ${#targets[@]} targets built, replayed and ran; no failures"
