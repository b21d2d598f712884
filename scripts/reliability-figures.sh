#!/usr/bin/env bash
# Rewrites the "Last run" section of RELIABILITY.md from a run, so that its
# figures are measured, never hand-edited: the lines the durability,
# hostile, window and load tests print ("figure: ..."), fuzz/run.sh's
# counts, and with VALGRIND=1 the summary of scripts/valgrind.sh.
#   scripts/reliability-figures.sh [FUZZ_SECONDS_PER_TARGET]   default 600
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
scripts/test-servers.sh 2>/dev/null
cargo build --workspace --all-targets
tests=$(mktemp); fuzz=$(mktemp); valgrind=$(mktemp); trap 'rm -f "$tests" "$fuzz" "$valgrind"' EXIT
cargo test -p bloomkit-module --test it -- reliability:: hostile:: apbf_commands:: \
  --nocapture --test-threads=1 >"$tests" 2>&1 || { tail -50 "$tests"; exit 1; }
fuzz/run.sh "$seconds" | tee "$fuzz"
if [ "${VALGRIND:-0}" = 1 ]; then scripts/valgrind.sh 2>&1 | tail -1 >"$valgrind"; fi
python3 - "$tests" "$fuzz" "$valgrind" "$seconds" <<'PY'
import re, subprocess, sys, time
tests, fuzz, valgrind, seconds = sys.argv[1:]
# A figure may follow libtest's "test name ... " on the same line.
figures = [m.group(1).strip() for m in (re.search(r"figure: (.*)", l) for l in open(tests)) if m]
runs, target = [], None
for line in open(fuzz):
    m = re.match(r"== fuzzing (\S+) for \S+ \((\d+) regressions replayed\)", line)
    if m:
        target = (m.group(1), m.group(2))
    m = re.match(r"Done (\d+) runs", line)
    if m and target:
        runs.append((target[0], int(m.group(1)), target[1]))
        target = None
def version(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.split()[2]
    except Exception:
        return "?"
servers = "redis-server %s, valkey-server %s" % (version(["redis-server", "--version"]),
                                                   version([".test-servers/valkey-server", "--version"]))
out = ["## Last run", "",
       "Written by `scripts/reliability-figures.sh %s` on %s (%s; tests under `cargo test`, "
       "fuzzing with AddressSanitizer, %s s per target). Every line below is what a test or "
       "the fuzzer printed in that run." % (seconds, time.strftime("%Y-%m-%d"), servers, seconds), "",
       "| what | figures |", "|---|---|"]
for f in figures:
    what, _, figure = f.partition(": ")
    out.append("| %s | %s |" % (what, figure))
out += ["", "| fuzz target | inputs run | regressions replayed |", "|---|---:|---:|"]
out += ["| %s | %s | %s |" % (t, format(n, ",").replace(",", " "), r) for t, n, r in runs]
v = open(valgrind).read().strip()
if v:
    out += ["", "valgrind (`scripts/valgrind.sh`): " + v]
out.append("")
text = open("RELIABILITY.md").read()
head = text[: text.index("## Last run")] if "## Last run" in text else text + "\n"
open("RELIABILITY.md", "w").write(head + "\n".join(out))
print("RELIABILITY.md: %d figures, %d fuzz targets" % (len(figures), len(runs)))
PY
