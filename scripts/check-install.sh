#!/usr/bin/env bash
# What a new user installs, checked as they would use it (run by CI, as
# root, after the test suite):
#   1. the Debian package: built, installed, a Redis and a Valkey server
#      started with the installed module, `bloomkit` from /usr/bin, the
#      manual pages; then removed, and nothing of it left;
#   2. `cargo publish --dry-run` for the three published crates;
#   3. scripts/run-server.sh beside a server that holds port 6379.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$HOME/.cargo/bin:$PATH"
say() { echo "check-install: $*"; }
fail() { echo "check-install: FAILED: $*" >&2; exit 1; }
command -v man >/dev/null || apt-get install -y -qq man-db >/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ping() {   # port: polls with a deadline
    for _ in $(seq 100); do redis-cli -p "$1" ping 2>/dev/null | grep -q PONG && return 0; sleep 0.1; done
    return 1
}
scratch=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$scratch"
}
trap cleanup EXIT

# ---- 1. the package ----
scripts/package.sh
deb=$(ls target/debian/bloomkit_*.deb | head -1)
dpkg -i "$deb" >/dev/null
[ -x /usr/bin/bloomkit ] || fail "/usr/bin/bloomkit missing"
/usr/bin/bloomkit --version
man -w bloomkit-dedup >/dev/null || fail "man -w bloomkit-dedup found no page"
man -w bloomkit >/dev/null || fail "man -w bloomkit found no page"
MANPAGER=cat man bloomkit-copy 2>/dev/null | grep -q -- "--all" || fail "bloomkit-copy(1) lacks --all"
[ -s /usr/share/bash-completion/completions/bloomkit ] || fail "no bash completions"

# Redis 7 with the one include line the snippet asks for.
rport=$(free_port)
printf 'include /usr/share/bloomkit/*.conf\n' > "$scratch/redis.conf"
redis-server "$scratch/redis.conf" --port "$rport" --bind 127.0.0.1 --save "" --dir "$scratch" \
    --logfile "$scratch/redis.log" &
pids+=($!)
wait_ping "$rport" || { cat "$scratch/redis.log"; fail "redis-server did not start with the installed module"; }
[ "$(redis-cli -p "$rport" BF.ADD f hello)" = 1 ] || fail "BF.ADD"
[ "$(redis-cli -p "$rport" BF.EXISTS f hello)" = 1 ] || fail "BF.EXISTS"
[ "$(redis-cli -p "$rport" CF.ADD c hello)" = 1 ] || fail "CF.ADD"
redis-cli -p "$rport" MODULE LIST | grep -q '^bf$' || fail "MODULE LIST has no bf"
/usr/bin/bloomkit info --redis "redis://127.0.0.1:$rport" f | grep -qi "bloom filter" || fail "bloomkit info"

# Valkey 9 from its own module folder.
vport=$(free_port)
.test-servers/valkey-server --port "$vport" --bind 127.0.0.1 --save "" --dir "$scratch" \
    --loadmodule /usr/lib/valkey/modules/libbloomkit.so --logfile "$scratch/valkey.log" &
pids+=($!)
wait_ping "$vport" || { cat "$scratch/valkey.log"; fail "valkey-server did not start with the installed module"; }
[ "$(redis-cli -p "$vport" BF.ADD f hello)" = 1 ] || fail "BF.ADD on Valkey"
/usr/bin/bloomkit copy --from "redis://127.0.0.1:$rport" --to "redis://127.0.0.1:$vport" c ||
    fail "bloomkit copy"
[ "$(redis-cli -p "$vport" CF.EXISTS c hello)" = 1 ] || fail "the copied cuckoo filter"
redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1 || true
redis-cli -p "$vport" shutdown nosave >/dev/null 2>&1 || true

# Removed (and purged): every file it installed is gone, the removal says
# what happens to data and how to restart, and a server with the same
# configuration still starts.
files=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' | grep -v '/$')
removal=$(dpkg -P bloomkit 2>&1 >/dev/null)
echo "$removal" | grep -q "no matching module type" || fail "the removal message does not say what happens to data"
echo "$removal" | grep -q "service redis-server restart" || fail "the removal message has no restart without systemd"
after=$(free_port)
redis-server "$scratch/redis.conf" --port "$after" --bind 127.0.0.1 --save "" --dir "$scratch" \
    --logfile "$scratch/after.log" &
pids+=($!)
wait_ping "$after" || { cat "$scratch/after.log"; fail "redis-server did not start with the include line after removal"; }
! redis-cli -p "$after" MODULE LIST | grep -q '^bf$' || fail "the module is still loaded after removal"
redis-cli -p "$after" shutdown nosave >/dev/null 2>&1 || true
left=""
for f in $files; do
    if [ -e "$f" ] || [ -L "$f" ]; then left="$left $f"; fi
done
[ -z "$left" ] || fail "left behind after removal:$left"
! dpkg -s bloomkit >/dev/null 2>&1 || fail "dpkg still knows bloomkit"
[ ! -e /usr/lib/redis/modules ] || [ -n "$(ls -A /usr/lib/redis/modules)" ] || fail "an empty module folder was left"
say "package: installed, used by Redis $(redis-server --version | grep -o 'v=[0-9.]*') and Valkey, removed clean"

# ---- 2. publishable crates ----
# Packaged as crates.io would take them. Not rebuilt from the packages
# (`--no-verify`, a minute of CI): their sources are the workspace's, built
# and tested above; what a package can get wrong is a file it leaves out,
# which is checked against git here.
cargo publish --dry-run --allow-dirty --no-verify -p bloomkit-core -p bloomkit-client -p bloomkit-cli
for crate in bloomkit-core bloomkit-client bloomkit-cli; do
    listed=$(cargo package --allow-dirty --no-verify --list -p "$crate")
    while read -r f; do
        grep -qxF "$f" <<<"$listed" || fail "the $crate package leaves out $f"
    done < <(git ls-files "crates/$crate" | sed "s|^crates/$crate/||" | grep -E '^(src/|benches/|examples/|build\.rs$|README\.md$|Cargo\.toml$)')
done
# Each crate built alone, as a user's build builds it: in the workspace the
# others' features mask a missing one (the client's tokio, behind a feature).
for crate in bloomkit-core bloomkit-client bloomkit-cli; do
    cargo check -q -p "$crate" || fail "$crate does not build on its own"
done
say "cargo publish --dry-run: bloomkit-core, bloomkit-client, bloomkit-cli (every source file packaged, each builds alone)"

# ---- 3. run-server.sh beside a server on 6379 ----
if redis-cli -p 6379 ping >/dev/null 2>&1; then
    holder_started=""
else
    redis-server --port 6379 --bind 127.0.0.1 --save "" --dir "$scratch" --logfile "$scratch/holder.log" &
    pids+=($!)
    holder_started=1
    wait_ping 6379 || fail "could not start the server that holds 6379"
fi
out=$(scripts/run-server.sh --daemonize yes 2>&1) || fail "run-server.sh: $out"
echo "$out"
port=$(echo "$out" | sed -n 's/.*bloomkit on 127\.0\.0\.1:\([0-9]*\).*/\1/p' | head -1)
[ -n "$port" ] && [ "$port" != 6379 ] || fail "run-server.sh did not move off 6379"
echo "$out" | grep -q "port 6379 is taken by" || fail "run-server.sh did not say why it moved"
echo "$out" | grep -q "stop it with: redis-cli -p $port shutdown" || fail "no stop line"
redis-cli -p "$port" MODULE LIST | grep -q '^bf$' || fail "run-server.sh's server has no module"
bound=$(redis-cli -p "$port" CONFIG GET bind | tail -1)
[ "$bound" = 127.0.0.1 ] || fail "run-server.sh bound '$bound', not 127.0.0.1"
[ -s ".run/$port/redis.pid" ] && [ -s ".run/$port/redis.log" ] || fail "no pid or log in .run/$port"
git check-ignore -q ".run/$port/redis.log" || fail ".run is not ignored by git"
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
# An explicit port that is taken: refused, naming a free one.
if out=$(scripts/run-server.sh --port 6379 2>&1); then fail "run-server.sh --port 6379 started on a taken port"; fi
echo "$out" | grep -q "port 6379 is taken by .*choose another port" || fail "no explanation: $out"
[ -n "$holder_started" ] && redis-cli -p 6379 shutdown nosave >/dev/null 2>&1 || true
rm -rf "$root/.run/$port"
say "run-server.sh: moved to $port beside the server on 6379, bound 127.0.0.1, refused --port 6379"
