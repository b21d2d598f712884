#!/usr/bin/env bash
# Runs integration suites with every server under valgrind (memcheck) and
# fails if valgrind reports an invalid read or write, or a use of
# uninitialised memory, in a stack that passes through libbloomkit.so.
#   scripts/valgrind.sh [test name filters...]   default: the commands:: and persistence:: suites
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || apt-get install -y -qq valgrind >/dev/null
scripts/test-servers.sh >/dev/null
cargo build -p bloomkit-module --all-targets
logs="$(mktemp -d)"
export BLOOMKIT_SERVER_WRAPPER="valgrind --tool=memcheck --error-limit=no --num-callers=30 --suppressions=$PWD/scripts/valgrind.supp --log-file=$logs/vg.%p"
export BLOOMKIT_START_SECONDS=120
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(commands:: persistence::)
cargo test -p bloomkit-module --test it -- "${suites[@]}" --test-threads=1
python3 - "$logs" <<'PY'
import glob, re, sys
logs = sys.argv[1]
errors, ours, runs = 0, 0, 0
for path in glob.glob(logs + "/vg.*"):
    text = open(path, errors="replace").read()
    runs += 1
    # Each error record starts with "==pid== Invalid ..." / "Conditional jump ..." and ends at a blank line.
    for record in re.split(r"\n==\d+== \n", text):
        if re.search(r"Invalid (read|write)|Conditional jump|uninitialised|Invalid free|Mismatched free", record):
            errors += 1
            if "libbloomkit" in record or "bloomkit" in record:
                ours += 1
                print(record[:3000])
print("valgrind: %d server runs, %d error records, %d through bloomkit" % (runs, errors, ours))
sys.exit(1 if ours else 0)
PY
