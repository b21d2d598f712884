#!/usr/bin/env bash
# Builds the Debian package into target/debian/: the module where Redis
# and Valkey packages look for modules, the CLI, a manual page per
# subcommand, shell completions and a configuration snippet. Needs only
# dpkg-deb (no cargo-deb): the layout is this file.
#
#   scripts/package.sh            # build (release) and package
#   sudo apt-get install ./target/debian/bloomkit_*.deb
#   echo 'include /usr/share/bloomkit/*.conf' | sudo tee -a /etc/redis/redis.conf
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
cargo build --release -p bloomkit-module -p bloomkit-bench -p bloomkit-cli  # as bench/: one feature set, no rebuilds

out=target/debian
stage=$out/bloomkit_${version}_${arch}
rm -rf "$stage"
mkdir -p "$stage/DEBIAN"

# The module: one file, reachable from both servers' module folders.
install -D -m 755 target/release/libbloomkit.so "$stage/usr/lib/redis/modules/libbloomkit.so"
mkdir -p "$stage/usr/lib/valkey/modules"
ln -s ../../redis/modules/libbloomkit.so "$stage/usr/lib/valkey/modules/libbloomkit.so"
install -D -m 755 target/release/bloomkit "$stage/usr/bin/bloomkit"
strip --strip-debug "$stage/usr/lib/redis/modules/libbloomkit.so" "$stage/usr/bin/bloomkit"

# Manual pages and completions, from the binary's own definitions.
man="$stage/usr/share/man/man1"
mkdir -p "$man"
"$stage/usr/bin/bloomkit" man --out-dir "$man" 2>/dev/null
gzip -9n "$man"/*.1
install -d "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
    "$stage/usr/share/fish/vendor_completions.d"
"$stage/usr/bin/bloomkit" completions bash > "$stage/usr/share/bash-completion/completions/bloomkit"
"$stage/usr/bin/bloomkit" completions zsh > "$stage/usr/share/zsh/vendor-completions/_bloomkit"
"$stage/usr/bin/bloomkit" completions fish > "$stage/usr/share/fish/vendor_completions.d/bloomkit.fish"

# The snippet to include from redis.conf / valkey.conf, and the licences.
install -D -m 644 packaging/bloomkit.conf "$stage/usr/share/bloomkit/bloomkit.conf"
doc="$stage/usr/share/doc/bloomkit"
install -d "$doc"
{
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: bloomkit"
    echo
    echo "Files: *"
    echo "Copyright: the bloomkit authors"
    echo "License: MIT or Apache-2.0"
    echo
    echo "License: MIT"
    sed 's/^$/./; s/^/ /' LICENSE-MIT
    echo
    echo "License: Apache-2.0"
    echo " On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0."
} > "$doc/copyright"
gzip -9n < README.md > "$doc/README.md.gz"

size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
# The newest glibc symbol version either binary needs.
glibc=$(objdump -T "$stage/usr/lib/redis/modules/libbloomkit.so" "$stage/usr/bin/bloomkit" |
    grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: bloomkit
Version: $version
Architecture: $arch
Maintainer: bloomkit developers <bloomkit@users.noreply.github.com>
Installed-Size: $size
Depends: libc6 (>= $glibc)
Suggests: redis-server (>= 5:7.0) | valkey-server
Section: database
Priority: optional
Homepage: https://github.com/bloomkit/bloomkit
Description: Bloom filters and RedisBloom's sketches for Redis and Valkey
 The bf module (libbloomkit.so) replaces RedisBloom 2.8 and 8 (Bloom,
 cuckoo, Count-Min Sketch, Top-K, t-digest) and loads valkey-bloom's data,
 with the same commands, replies and data formats, on Redis 7 and 8 and
 Valkey 8 and 9. Include /usr/share/bloomkit/bloomkit.conf from the
 server's configuration to load it.
 .
 The bloomkit command sizes filters, deduplicates streams, and dumps,
 restores and copies filters between servers and files.
CONTROL

# Maintainer scripts: what to add on install, and on removal what happens
# (the glob include matches nothing once the snippet is gone, so the server
# still starts; data of bloomkit's types does not load without the module).
cat > "$stage/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    cat >&2 <<'MSG'
bloomkit: to load the bf module, add this line to /etc/redis/redis.conf
(or /etc/valkey/valkey.conf), then restart the server:

    include /usr/share/bloomkit/*.conf

    sudo systemctl restart redis-server      # with systemd
    sudo service redis-server restart        # without
MSG
fi
exit 0
POSTINST
cat > "$stage/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
    cat >&2 <<'MSG'
bloomkit: removing the bf module.
- A server that loads it with `include /usr/share/bloomkit/*.conf` starts
  without it after its next restart (the pattern then matches nothing).
  If your configuration names the file (include /usr/share/bloomkit/bloomkit.conf)
  or loads /usr/lib/redis/modules/libbloomkit.so itself, remove that line
  first, or the server will not start.
- Data of the module's types (Bloom, cuckoo, Count-Min Sketch, Top-K,
  t-digest, sliding-window and expandable filters) cannot be loaded
  without it: a server whose RDB or AOF holds such keys refuses to start
  ("no matching module type"). Before its next restart, copy them out
  (bloomkit dump / bloomkit copy --all) and delete them, or keep bloomkit
  installed until then.
- Restart: sudo systemctl restart redis-server   (without systemd:
  sudo service redis-server restart)
MSG
fi
exit 0
PRERM
chmod 755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm"

mkdir -p "$out"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$out/bloomkit_${version}_${arch}.deb" >/dev/null
rm -rf "$stage"
echo "package: $out/bloomkit_${version}_${arch}.deb"
