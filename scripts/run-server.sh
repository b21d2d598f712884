#!/usr/bin/env bash
# Builds the module (release) and starts redis-server with it, for trying
# bloomkit out on this machine:
#   - on 127.0.0.1 only, unless you pass --bind;
#   - on port 6379 if it is free, else the next free one (said so); with
#     --port N, on N or not at all (naming what holds it);
#   - with its data, log and PID file in .run/<port>/ (ignored by git), so
#     servers on different ports never share a dump.rdb.
# Every other argument goes to redis-server (e.g. --daemonize yes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

port="" bind_given="" daemonize=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --port) port="${2:?--port needs a number}"; shift 2 ;;
        --port=*) port="${1#--port=}"; shift ;;
        --bind|--bind=*) bind_given=1; args+=("$1"); shift ;;
        --daemonize) daemonize="${2:-}"; args+=("$1" "${2:-}"); shift 2 || shift ;;
        *) args+=("$1"); shift ;;
    esac
done
port_given=""
if [ -n "$port" ]; then port_given=1; elif [ -n "${PORT:-}" ]; then port=$PORT; port_given=1; fi

# Whether nothing listens on 127.0.0.1:$1 (binding it fails if anything
# holds the port on loopback or on every interface).
port_free() {
    python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
EOF
}

# What holds port $1, in words.
holder() {
    local who=""
    if command -v ss >/dev/null; then
        who=$(ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'users:(("[^"]*",pid=[0-9]*' | head -1 |
            sed 's/users:(("\([^"]*\)",pid=\([0-9]*\)/\1 (pid \2)/')
    fi
    echo "${who:-another process}"
}

if [ -n "$port_given" ]; then
    if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
        echo "run-server: '$port' is not a port; give a number from 1 to 65535" >&2
        exit 2
    fi
    if ! port_free "$port"; then
        other=$((port + 1))
        while ! port_free "$other"; do other=$((other + 1)); done
        echo "run-server: port $port is taken by $(holder "$port"); stop it, or choose another port: $0 --port $other" >&2
        exit 1
    fi
else
    port=6379
    while ! port_free "$port"; do port=$((port + 1)); done
    if [ "$port" != 6379 ]; then
        echo "run-server: port 6379 is taken by $(holder 6379); using $port (choose with --port N)" >&2
    fi
fi

scripts/test-servers.sh --server-only   # redis-server and libclang; nothing else
# The release build's one package set (as bench/ and scripts/package.sh):
# building the module alone would resolve shared crates' features
# differently and rebuild them after every other release build.
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli

dir="$root/.run/$port"
mkdir -p "$dir"
module="$root/target/release/libbloomkit.so"   # absolute: the server changes into --dir first
server=(redis-server --port "$port" --dir "$dir" --pidfile "$dir/redis.pid" --loadmodule "$module")
[ -n "$bind_given" ] || server+=(--bind 127.0.0.1)
stop="redis-cli -p $port shutdown"

if [ "$daemonize" = yes ]; then
    "${server[@]}" --logfile "$dir/redis.log" "${args[@]}"
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    if ! redis-cli -p "$port" ping >/dev/null 2>&1; then
        echo "run-server: the server did not start; the end of its log ($dir/redis.log):" >&2
        tail -n 5 "$dir/redis.log" >&2
        exit 1
    fi
    echo "run-server: redis-server with bloomkit on 127.0.0.1:$port (pid $(cat "$dir/redis.pid"))"
    echo "run-server: data in $dir, log $dir/redis.log"
    echo "run-server: export BLOOMKIT_URL=redis://127.0.0.1:$port/   # for the examples"
    echo "run-server: stop it with: $stop"
else
    echo "run-server: redis-server with bloomkit on 127.0.0.1:$port, data in $dir; stop it with Ctrl-C (or: $stop)"
    echo "run-server: export BLOOMKIT_URL=redis://127.0.0.1:$port/   # for the examples"
    exec "${server[@]}" "${args[@]}"
fi
