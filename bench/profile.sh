#!/usr/bin/env bash
# Where a cache-resident BF.EXISTS spends the server's CPU: perf on redis-server
# (core 0) while bloomkit-loadgen (core 1) sends BF.EXISTS at pipeline 32.
# Needs perf (Debian: linux-perf) and bench/run.sh's release builds.
set -e
cd "$(dirname "$0")/.."
port=7111
taskset -c 0 redis-server --port $port --save "" --appendonly no --daemonize yes --loadmodule $PWD/target/release/libbloomkit.so --loadmodule $PWD/target/release/bench-floor.so --dir /tmp --logfile /tmp/prof-redis.log
for _ in $(seq 200); do redis-cli -p $port PING >/dev/null 2>&1 && break; sleep 0.05; done
redis-cli -p $port BF.RESERVE small 0.01 100000 >/dev/null
target/release/bloomkit-loadgen --threads 1 --port $port --clients 4 --pipeline 8 --requests 100 --sequence 0 -- BF.MADD small $(printf '{item} %.0s' $(seq 1000)) >/dev/null
pid=$(redis-cli -p $port INFO server | grep process_id | cut -d: -f2 | tr -d '\r')
perf record -F 4999 -g -p $pid -o /tmp/perf.data -- sleep 8 >/dev/null 2>&1 &
perfpid=$!
sleep 0.5  # perf attaching: a profile, not a measurement, so a margin is enough
taskset -c 1 target/release/bloomkit-loadgen --threads 1 --port $port --clients 50 --pipeline 32 --requests 3000000 --range 100000 -- BF.EXISTS small {item}
wait $perfpid || true
redis-cli -p $port SHUTDOWN NOSAVE >/dev/null || true
perf report -i /tmp/perf.data --no-children --stdio --sort dso -g none 2>/dev/null | grep -v "^#" | grep -v "^$" | head -12
perf report -i /tmp/perf.data --no-children --percent-limit 0.5 --stdio --sort dso,symbol -g none 2>/dev/null | grep -v "^#" | grep -v "^$" | head -40
