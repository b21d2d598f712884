#!/usr/bin/env bash
# Where BF.EXISTS spends the server's CPU: perf on redis-server (core 0) while
# bloomkit-loadgen (core 1) sends BF.EXISTS hits at pipeline 32.
#   bench/profile.sh          a cache-resident filter (100 000 items at 1%)
#   bench/profile.sh large    a DRAM-bound one: 3x the last-level cache (at
#                             least 1.2 GB), 10^7 items, lookups all over it
#   HUGE_PAGES=yes bench/profile.sh large   the same with bf.huge-pages yes
# Needs perf (Debian: linux-perf) and bench/run.sh's release builds.
set -e
cd "$(dirname "$0")/.."
size=${1:-small}
port=7111
taskset -c 0 redis-server --port $port --save "" --appendonly no --daemonize yes --loadmodule $PWD/target/release/libbloomkit.so HUGE_PAGES ${HUGE_PAGES:-no} --loadmodule $PWD/target/release/bench-floor.so --dir /tmp --logfile /tmp/prof-redis.log
trap 'redis-cli -p $port SHUTDOWN NOSAVE >/dev/null 2>&1 || true' EXIT
for _ in $(seq 200); do redis-cli -p $port PING >/dev/null 2>&1 && break; sleep 0.05; done
if [ "$size" = large ]; then
    l3=$(python3 -c 'import sys; sys.path.insert(0, "bench"); import bench; print(bench.l3_bytes())')
    capacity=$(( l3 * 3 * 10 / 12 > 1000000000 ? l3 * 3 * 10 / 12 : 1000000000 ))
    hits=10000000 pool=3000000
else
    capacity=100000 hits=100000 pool=100000
fi
redis-cli -p $port BF.RESERVE filter 0.01 $capacity >/dev/null
target/release/bloomkit-loadgen --threads 1 --port $port --clients 4 --pipeline 8 --requests $((hits / 1000)) --sequence 0 -- BF.MADD filter $(printf '{item} %.0s' $(seq 1000)) >/dev/null
pid=$(redis-cli -p $port INFO server | grep process_id | cut -d: -f2 | tr -d '\r')
perf record -F 4999 -g -p $pid -o /tmp/perf.data -- sleep 8 >/dev/null 2>&1 &
perfpid=$!
sleep 0.5  # perf attaching: a profile, not a measurement, so a margin is enough
taskset -c 1 target/release/bloomkit-loadgen --threads 1 --port $port --clients 50 --pipeline 32 --requests 3000000 --pool $pool --range $hits -- BF.EXISTS filter {item}
wait $perfpid || true
perf report -i /tmp/perf.data --no-children --stdio --sort dso -g none 2>/dev/null | grep -v "^#" | grep -v "^$" | head -12
perf report -i /tmp/perf.data --no-children --percent-limit 0.5 --stdio --sort dso,symbol -g none 2>/dev/null | grep -v "^#" | grep -v "^$" | head -40
