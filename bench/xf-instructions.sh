#!/usr/bin/env bash
# Instructions per item of XF and qfilter, counted by Callgrind (issue 48):
# the same figure on every run, where this shared machine's timings move by
# 30%, so that a change of a few percent to XF's hot paths can be judged.
# Writes bench/XF-INSTRUCTIONS-RESULTS.md. What is counted and why: the doc
# comment of crates/bloomkit-bench/src/bin/xf-instructions.rs.
#   bench/xf-instructions.sh                       25,000 to 1.6M items, 4 points per doubling, 1% and 0.1% (about 6 minutes)
#   bench/xf-instructions.sh --items 200000 --rates 0.01   one size, one rate (an A/B of a change)
#   bench/xf-instructions.sh --output FILE         elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."
output=bench/XF-INSTRUCTIONS-RESULTS.md
# Four points per doubling from 100,000 to 400,000 (a filter that grows is
# at a different phase of its growth at each), and the ends further out.
sizes=25000,100000,118921,141421,168179,200000,237841,282843,336359,400000,1600000
rates=0.01,0.001
invocation="bench/xf-instructions.sh"
while [ $# -gt 0 ]; do
    case "$1" in
        --items) sizes="$2"; invocation+=" --items $2"; shift 2 ;;
        --rates) rates="$2"; invocation+=" --rates $2"; shift 2 ;;
        --output) output="$2"; shift 2 ;;
        *) echo "xf-instructions.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
command -v valgrind > /dev/null || { echo "needs valgrind (apt-get install -y valgrind)" >&2; exit 2; }
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # one feature set for every release build: no rebuilds
bin=target/release/xf-instructions
rev=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- crates bench/xf-instructions.sh Cargo.toml || rev+=" with uncommitted changes"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ops=(insert hit miss hit_x100 miss_x100)
# Instructions per item of each operation of one row: `ops`' order.
count() {
    local row=$1 rate=$2 n=$3 out=$work/$1.$2.$3 toggles=() op
    # Each operation's function by its whole name: a pattern would also
    # match a closure, and entering one would switch counting off.
    for op in "${ops[@]}"; do toggles+=(--toggle-collect="xf_instructions::${row}_${op}"); done
    valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no "${toggles[@]}" \
        "$bin" "$row" "$rate" "$n" > /dev/null 2> "$out.log" || { cat "$out.log" >&2; return 1; }
    local report
    report=$(callgrind_annotate --inclusive=yes --threshold=100 "$out")
    for op in "${ops[@]}"; do
        # The trailing space: `hit` must not match `hit_x100`.
        awk -v fn="xf_instructions::${row}_${op} " -v n="$n" \
            'index($0, fn) && !done { gsub(",", "", $1); printf "%d ", $1 / n; done = 1 }
             END { if (!done) { print "no count for " fn > "/dev/stderr"; exit 1 } }' <<< "$report"
    done
    echo
}
kernel=$(valgrind -q "$bin" kernel)
{
    echo "# XF and qfilter: instructions per item, counted"
    echo
    echo "Made by \`$invocation\` at $rev with $(valgrind --version) (Callgrind), $(rustc --version);"
    echo "XF's lookup kernel under Valgrind's CPU: $kernel. Each operation runs in a function of its own"
    echo "and Callgrind counts the instructions inside it, over the items: hashing included (XF: SipHash-1-3,"
    echo "keyed; qfilter: its own). XF starts at 100 items and grows, qfilter starts at 100 told the count."
    echo "Batches: XF.MEXISTS's path (hashed 100 at a time, later items' loads asked for early); qfilter has"
    echo "none, so its batch columns are its one-by-one lookups again. Instructions, not time: where both"
    echo "wait on memory the ratio of times is smaller (bench/XF-INPROC-RESULTS.md)."
    for rate in ${rates//,/ }; do
        echo
        echo "### $rate: instructions per item"
        echo
        echo "| items | XF insert | hit | miss | hit x100 | miss x100 | qfilter insert | hit | miss \
| XF / qfilter: insert | hit | miss | hit x100 | miss x100 |"
        echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        for n in ${sizes//,/ }; do
            count xf "$rate" "$n" > "$work/xf" &
            count qfilter "$rate" "$n" > "$work/q"
            wait $!
            read -r -a x < "$work/xf"
            read -r -a q < "$work/q"
            ratios=$(for i in 0 1 2 3 4; do awk -v a="${x[$i]}" -v b="${q[$i]}" 'BEGIN { printf "%.2f | ", a / b }'; done)
            echo "| $n | ${x[0]} | ${x[1]} | ${x[2]} | ${x[3]} | ${x[4]} | ${q[0]} | ${q[1]} | ${q[2]} | ${ratios% }"
            echo "${ratios//|/}" >> "$work/ratios.$rate"
        done
        # The mean and the worst of each ratio over the sizes.
        awk '{ for (i = 1; i <= NF; i++) { sum[i] += $i; if ($i > worst[i]) worst[i] = $i } n++ }
             END { printf "| mean, XF / qfilter | | | | | | | | |"; for (i = 1; i <= 5; i++) printf " %.2f |", sum[i] / n
                   printf "\n| worst, XF / qfilter | | | | | | | | |"; for (i = 1; i <= 5; i++) printf " %.2f |", worst[i]
                   printf "\n" }' "$work/ratios.$rate"
    done
} > "$output"
cat "$output"
