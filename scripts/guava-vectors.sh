#!/usr/bin/env bash
# Regenerates crates/bloomkit-core/tests/fixtures/guava-31.1.json with real
# Guava (Debian's libguava-java) and the JDK: the reference for the bitmap
# backend's Guava-compatible hashing. Not run by CI; the fixture is committed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jar=${GUAVA_JAR:-/usr/share/java/guava.jar}
[ -f "$jar" ] || { echo "needs $jar: apt-get install -y libguava-java default-jdk-headless" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
javac -encoding UTF-8 -cp "$jar" -d "$work" "$root/scripts/guava-vectors/GuavaVectors.java"
java -cp "$jar:$work" GuavaVectors > "$root/crates/bloomkit-core/tests/fixtures/guava-31.1.json"
echo "wrote crates/bloomkit-core/tests/fixtures/guava-31.1.json" >&2
