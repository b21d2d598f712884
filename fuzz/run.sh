#!/usr/bin/env bash
# Fuzzes every decoder of bloomkit-core with libFuzzer (cargo-fuzz).
#   fuzz/run.sh [SECONDS_PER_TARGET]      default 30 (CI smoke); 600 for a real run
# Installs cargo-fuzz if missing. cargo-fuzz needs nightly features; the
# stable toolchain allows them with RUSTC_BOOTSTRAP=1.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-30}"
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
python3 seed-corpus.py
for target in scandump_header scandump_chunks rdb_fields filter_file command_args apbf_state; do
  echo "== fuzzing $target for ${seconds}s"
  # regressions/ holds inputs that once failed; they are replayed every run.
  mkdir -p "regressions/$target"
  cargo fuzz run --sanitizer address "$target" "corpus/$target" "regressions/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 2>&1 \
    | grep -E "^(==|#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss|SUMMARY|ERROR|Done)" || true
  # cargo fuzz exits non-zero on a crash; the pipeline above hides it, so check artifacts.
  if ls "artifacts/$target"/crash-* "artifacts/$target"/leak-* "artifacts/$target"/oom-* >/dev/null 2>&1; then
    echo "fuzz target $target found a failing input:"; ls "artifacts/$target"
    exit 1
  fi
done
echo "fuzzing: no failures"
