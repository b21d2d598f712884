#!/usr/bin/env python3
"""XF's batches in the server beside a Bloom filter sized exactly (issue 48.3):
the server's own time per item (INFO commandstats) of XF.MEXISTS x100
(hits and misses) and XF.MADD x100 (new items) against BF.MEXISTS x100 and
BF.MADD x100 on a Bloom filter reserved for exactly the items it will hold,
at 1%: bloomkit's, and RedisBloom's in the same run (the module XF's users
replace; its version is read from the server). Two sizes: cache-resident
(100,000 items, every filter a few hundred KB) and DRAM-bound (bloomkit's
Bloom filter 3.5x the last-level cache; XF and RedisBloom's are other
sizes, which the table's heading gives). Each filter alone on a server of
the same binary (bloomkit's two on the same module), pinned to core 0, the
load generator on core 1; rounds alternate between the three, medians of
5. XF grows to its size from CAPACITY 1000, as a filter that was never
sized does.

Usage: bench/xf-batch.sh [--quick] [--big N] [--output FILE] [--module SO] [--redisbloom SO]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ROOT, Server, alternating_medians, benchmark, command_stats, l3_bytes, machine  # noqa: E402
from xf import fill  # noqa: E402

BF_BITS_PER_ITEM = 9.585  # a Bloom filter sized exactly at 1%


# The same command on a key that does not exist: no hash, no probe, so what
# is left is the server's own per-item cost (the argument, the reply), which
# every filter pays alike. The lookups' rows less this row are the filters'
# own work.
FLOOR = "MEXISTS x100, a key that does not exist"


def per_item_ns(server, command, run, items_per_call=100):
    """Runs `run()` and returns the server's ns per item of `command` during it."""
    calls0, us0 = command_stats(server.conn, command)
    run()
    calls1, us1 = command_stats(server.conn, command)
    return (us1 - us0) * 1000.0 / max(1, (calls1 - calls0) * items_per_call)


def module_version(server, name):
    """The version `MODULE LIST` gives the module `name` (20802 is 2.8.2)."""
    for entry in server.conn.call("MODULE", "LIST"):
        fields = {k.decode() if isinstance(k, bytes) else k: v for k, v in zip(entry[::2], entry[1::2])}
        if fields.get("name") in (name, name.encode()):
            v = int(fields["ver"])
            return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)
    return "unknown"


def measure_size(items, adds_per_round, rounds, module, redisbloom):
    servers = {"XF": Server("XF", module), "BF": Server("BF", module), "RedisBloom": Server("RedisBloom", redisbloom)}
    xf = servers["XF"]
    try:
        xf.conn.call("XF.RESERVE", "k", "0.01", "CAPACITY", "1000")
        for name in ("BF", "RedisBloom"):
            servers[name].conn.call("BF.RESERVE", "k", "0.01", str(items + adds_per_round * rounds))
        for name, s in servers.items():
            started = time.time()
            fill(s, "XF.MADD" if s is xf else "BF.MADD", "k", 0, items)
            print("  filled %s with %d items in %.0f s" % (name, items, time.time() - started), flush=True)
        sizes = {name: int(s.conn.call("MEMORY", "USAGE", "k")) for name, s in servers.items()}
        sizes["RedisBloom version"] = module_version(servers["RedisBloom"], "bf")
        rows = []
        requests = max(200, min(3000, 3_000_000 // max(1, items // 1000)))
        # A round of hits on each server first, not counted: on a large
        # filter the first rounds after a fill ran 1.3-1.6x slower than the
        # later ones (98M items, every build alike), which five rounds do
        # not average away.
        for s in servers.values():
            prefix = "XF" if s is xf else "BF"
            benchmark(s, "%s.MEXISTS k %s" % (prefix, " ".join(["{item}"] * 100)), requests, 1, clients=1,
                      rand_range=items, prefix="fill:", seed=699)
        for label, what in (("MEXISTS x100, hits", "hits"), ("MEXISTS x100, misses", "misses"),
                            ("MADD x100, new items", "adds"), (FLOOR, "floor")):
            def one(server, r, what=what):
                prefix = "XF" if server is xf else "BF"
                if what == "adds":
                    cmd = "%s.MADD k %s" % (prefix, " ".join(["{item}"] * 100))
                    run = lambda: benchmark(server, cmd, adds_per_round // 100, 1, clients=1,  # noqa: E731
                                            prefix="new%d:" % r, sequence=0)
                    return per_item_ns(server, prefix.lower() + ".madd", run)
                key = "absent" if what == "floor" else "k"
                cmd = "%s.MEXISTS %s %s" % (prefix, key, " ".join(["{item}"] * 100))
                run = lambda: benchmark(server, cmd, requests, 1, clients=1, rand_range=items,  # noqa: E731
                                        prefix="fill:" if what == "hits" else "miss:", seed=700 + r)
                return per_item_ns(server, prefix.lower() + ".mexists", run)
            m = alternating_medians(servers, rounds, one)
            rows.append((label, m["XF"], m["BF"], m["RedisBloom"]))
            print("  %-24s XF %7.1f ns  BF %7.1f ns  RedisBloom %7.1f ns  XF/BF %.2f  XF/RedisBloom %.2f" % (
                label, m["XF"], m["BF"], m["RedisBloom"], m["XF"] / m["BF"], m["XF"] / m["RedisBloom"]), flush=True)
        return rows, sizes
    finally:
        for s in servers.values():
            s.stop()


def net_of_floor(rows):
    """The lookups less the floor row: each filter's own work per item."""
    by = {label: (a, b, c) for label, a, b, c in rows}
    fa, fb, fc = by[FLOOR]
    parts = []
    for label in ("MEXISTS x100, hits", "MEXISTS x100, misses"):
        a, b, c = by[label]
        parts.append("%s XF %.1f, BF %.1f, RedisBloom %.1f ns (XF / BF %.2f)" % (
            label.split(", ")[1], a - fa, b - fb, c - fc, (a - fa) / max(0.1, b - fb)))
    return "Each filter's own work per item (the lookup rows less the last row): %s." % "; ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run (20,000 and 200,000 items, 1 round)")
    parser.add_argument("--big", type=int, default=0, help="items of the DRAM-bound size (default: the Bloom "
                        "filter 3.5x the last-level cache)")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "XF-BATCH-RESULTS.md"))
    parser.add_argument("--module", default=os.path.join(ROOT, "target", "release", "libbloomkit.so"))
    parser.add_argument("--redisbloom", default=os.path.join(ROOT, ".test-servers", "redisbloom.so"))
    opts = parser.parse_args()
    llc = l3_bytes() or 32 << 20
    big = opts.big or int(3.5 * llc * 8 / BF_BITS_PER_ITEM) // 1000 * 1000
    sizes = [20_000, 200_000] if opts.quick else [100_000, big]
    rounds = 1 if opts.quick else 5
    started = time.time()
    results = []
    for items in sizes:
        print("%d items:" % items, flush=True)
        results.append((items,) + measure_size(items, 5_000 if items <= 200_000 else 50_000, rounds, opts.module,
                                                 opts.redisbloom))
    elapsed = time.time() - started
    out = ["# XF's batches in the server beside a Bloom filter sized exactly\n"]
    out.append("Generated by `bench/xf-batch.sh%s` on %s in %.0f s.\n" % (
        " --quick" if opts.quick else ("" if not opts.big else " --big %d" % opts.big), time.strftime("%Y-%m-%d"),
        elapsed))
    out.append("Machine: %s.\n" % machine())
    out.append("The server's own time per item (`INFO commandstats` usec over calls x 100) of 100-item "
               "commands from one client, each filter alone on a server of the same binary (bloomkit's BF and XF "
               "on the same module, RedisBloom %s on its own), medians of %d alternating rounds. XF grows to "
               "its size from `XF.RESERVE k 0.01 CAPACITY 1000`; each Bloom filter is `BF.RESERVE k 0.01 n` for "
               "exactly the items it ends with. Hits are drawn from every "
               "item added; misses are never-added items; adds are new items. Last-level cache: %d MiB.\n"
               % (results[0][2]["RedisBloom version"], rounds, llc >> 20))
    for items, rows, bytes_ in results:
        out.append("\n## %d items (XF %.1f MB, BF %.1f MB, RedisBloom's BF %.1f MB: %.3gx / %.3gx / %.3gx the "
                   "last-level cache)\n" % (items, bytes_["XF"] / 1e6, bytes_["BF"] / 1e6, bytes_["RedisBloom"] / 1e6,
                                            bytes_["XF"] / llc, bytes_["BF"] / llc, bytes_["RedisBloom"] / llc))
        out.append("| batch of 100 | XF ns/item | BF ns/item | RedisBloom BF ns/item | XF / BF | XF / RedisBloom |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for label, a, b, c in rows:
            out.append("| %s | %.1f | %.1f | %.1f | %.2f | %.2f |" % (label, a, b, c, a / b, a / c))
        out.append("")
        out.append(net_of_floor(rows))
    with open(opts.output, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s (%.0f s)" % (opts.output, elapsed))


if __name__ == "__main__":
    main()
