#!/usr/bin/env python3
"""One filter per user, sizes unknown (issue 41): the commonest deployment of
Bloom filters on Redis, measured as its users run it.

KEYS keys whose final item counts are log-uniform over 1..65,536 (a fixed
seed, so every run sees the same keys), at 1%, four ways, each alone on a
server of the same redis-server binary:

- RedisBloom reserving 100,000 per key (`BF.RESERVE k 0.01 100000`), the
  tutorials' practice;
- RedisBloom grown from `BF.MADD`'s defaults (capacity 100, expansion 2);
- RedisBloom sized to each key's exact final count (a bound no user has);
- bloomkit's XF with its defaults (`XF.MADD` creates it).

Memory is real: the growth of `used_memory` over all keys. The keys of at
most 100 items are made first and measured alone (their cost per key, key
included). Then each key's false-positive rate on never-added items (XF and
the grown RedisBloom), and XF's MEMORY USAGE beside its real bytes.

Usage: bench/peruser.sh [--keys N] [--probes P] [--quick] [--output FILE]
"""
import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import LOADGEN, ROOT, Quiet, Server, machine  # noqa: E402


def counts(keys, seed=41):
    rng = random.Random(seed)
    return [max(1, min(65536, int(round(math.exp(rng.uniform(0, math.log(65536))))))) for _ in range(keys)]


def add_items(server, conn, command, key, prefix, n):
    """`n` items prefix000000000000.. to `key`, 1000 to a command (the load
    generator for the whole thousands, this process over `conn` for the
    rest)."""
    whole, rest = divmod(n, 1000)
    if whole:
        subprocess.run(
            ["taskset", "-c", "1", LOADGEN, "--threads", "1", "--port", str(server.port), "--clients", "1",
             "--pipeline", "8", "--requests", str(whole), "--sequence", "0", "--prefix", prefix, "--"]
            + [command, key] + ["{item}"] * 1000, check=True, capture_output=True)
    if rest:
        conn.call(command, key, *["%s%012d" % (prefix, i) for i in range(whole * 1000, n)])


VARIANTS = [
    ("RedisBloom reserving 100,000", "rb", lambda c, k, n: c.call("BF.RESERVE", k, "0.01", "100000"), "BF.MADD"),
    ("RedisBloom grown from BF.MADD's defaults", "rb", None, "BF.MADD"),
    ("RedisBloom sized exactly", "rb", lambda c, k, n: c.call("BF.RESERVE", k, "0.01", str(n)), "BF.MADD"),
    ("XF with its defaults", "bk", None, "XF.MADD"),
]


def settle(quiet, keys, command):
    """Grows the keyspace's table to its final size, runs the load generator
    once and makes (and drops) a key of the type measured, before the
    baseline, so that neither a table resize nor a first connection's
    buffers nor a module's first-use allocations land inside what is
    measured (the first filter key of either module costs about 50 KB more
    than the next)."""
    c = quiet.bulk()
    for n in (2, 100, 2000):
        add_items(quiet.server, c, command, "warm-type", "w%d:" % n, n)
        c.call("DEL", "warm-type")
    for i in range(2 * keys):
        c.send("SET", "pad:%d" % i, "x")
    for _ in range(2 * keys):
        c.read()
    for i in range(keys):
        c.send("DEL", "pad:%d" % i)
    for _ in range(keys):
        c.read()
    add_items(quiet.server, c, "SADD", "warm", "w:", 1000)
    c.call("DEL", "warm")
    c.close()
    # The first INFO allocates about 25 KB that the next ones find in place.
    quiet.reading()


def fill(quiet, make, command, sizes, which):
    c = quiet.bulk()
    for i in which:
        key, n = "u:%d" % i, sizes[i]
        if make:
            make(c, key, n)
        add_items(quiet.server, c, command, key, "u%d:" % i, n)
    c.close()


def false_positive_rates(conn, command, sizes, probes):
    """Each key's rate on `probes` never-added items."""
    rates = []
    for i, _ in enumerate(sizes):
        hits, sent = 0, 0
        for start in range(0, probes, 1000):
            conn.send(command, "u:%d" % i, *["x%d:%d" % (i, j) for j in range(start, min(start + 1000, probes))])
            sent += 1
        for _ in range(sent):
            hits += sum(1 for r in conn.read() if r == 1)
        rates.append(hits / probes)
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--probes", type=int, default=10_000, help="never-added items per key, for its rate")
    parser.add_argument("--quick", action="store_true", help="a smoke run (100 keys, 1,000 probes)")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "XF-PERUSER-RESULTS.md"))
    parser.add_argument("--module", default=os.path.join(ROOT, "target", "release", "libbloomkit.so"))
    parser.add_argument("--redisbloom", default=os.path.join(ROOT, ".test-servers", "redisbloom.so"))
    opts = parser.parse_args()
    keys = 100 if opts.quick else opts.keys
    probes = 1_000 if opts.quick else opts.probes
    sizes = counts(keys)
    small = [i for i, n in enumerate(sizes) if n <= 100]
    large = [i for i, n in enumerate(sizes) if n > 100]
    total = sum(sizes)
    started = time.time()
    print("%d keys, %d items (%d keys of at most 100 items)" % (keys, total, len(small)), flush=True)
    results = []
    for name, kind, make, command in VARIANTS:
        server = Server(name, opts.module if kind == "bk" else opts.redisbloom)
        try:
            with Quiet(server) as quiet:
                settle(quiet, keys, command)
                base = quiet.reading()[0]
                fill(quiet, make, command, sizes, small)
                small_bytes = quiet.reading()[0] - base
                fill(quiet, make, command, sizes, large)
                real = quiet.reading()[0] - base
            usage = sum(server.conn.call("MEMORY", "USAGE", "u:%d" % i, "SAMPLES", "0") for i in range(keys))
            rates = None
            if command == "XF.MADD" or name.startswith("RedisBloom grown"):
                rates = false_positive_rates(server.conn, command.replace("MADD", "MEXISTS"), sizes,
                                             probes if command == "XF.MADD" else max(1000, probes // 5))
            results.append((name, real, small_bytes, usage, rates))
            print("%-44s %8.1f MB  %5.2f bits/item  small keys %6.1f B/key  MEMORY USAGE/real %.3f"
                  % (name, real / 1e6, real * 8 / total, small_bytes / max(1, len(small)), usage / real),
                  flush=True)
        finally:
            server.stop()
    elapsed = time.time() - started
    by = {r[0]: r for r in results}
    grown, exact, xf = by[VARIANTS[1][0]], by[VARIANTS[2][0]], by[VARIANTS[3][0]]
    bound = 0.01 + 3 * math.sqrt(0.01 * 0.99 / probes)
    xf_rates = xf[4]
    out = ["# One filter per user, sizes unknown: XF beside RedisBloom 2.8.2\n"]
    out.append("Generated by `bench/peruser.sh%s` on %s in %.0f s.\n"
               % (" --quick" if opts.quick else "", time.strftime("%Y-%m-%d"), elapsed))
    out.append("Machine: %s.\n" % machine())
    out.append("%d keys whose final item counts are log-uniform over 1..65,536 (fixed seed): %d items in all, "
               "%d keys of at most 100 items. 1%% everywhere. Each variant alone on a server of the same "
               "binary; memory is the growth of `used_memory` (real bytes, keys included); the keys of at most "
               "100 items are made first and measured alone.\n" % (keys, total, len(small)))
    out.append("| variant | real memory | bits per item | vs RedisBloom grown | vs RedisBloom sized exactly | "
               "per key of at most 100 items | MEMORY USAGE / real |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for name, real, small_bytes, usage, _ in results:
        out.append("| %s | %.1f MB | %.2f | %.2f | %.2f | %.0f B | %.3f |"
                   % (name, real / 1e6, real * 8 / total, real / grown[1], real / exact[1],
                      small_bytes / max(1, len(small)), usage / real))
    above = [(i, r) for i, r in enumerate(xf_rates) if r > bound]
    out.append("\nXF: **%.2f** of RedisBloom grown's real memory (goal: at most 0.55) and **%.2f** of RedisBloom "
               "sized exactly (goal: at most 1.6); keys of at most 100 items **%.0f** bytes each against "
               "RedisBloom grown's %.0f (goal: no more). Each key's false-positive rate on %d never-added "
               "items: mean %.5f, highest %.5f; %d keys above 1%% plus three standard deviations (%.4f). "
               "RedisBloom grown: mean %.5f, highest %.5f."
               % (xf[1] / grown[1], xf[1] / exact[1], xf[2] / max(1, len(small)), grown[2] / max(1, len(small)),
                  probes, statistics.mean(xf_rates), max(xf_rates), len(above), bound,
                  statistics.mean(grown[4]), max(grown[4])))
    with open(opts.output, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s (%.0f s)" % (opts.output, elapsed))


if __name__ == "__main__":
    main()
