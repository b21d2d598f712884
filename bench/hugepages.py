#!/usr/bin/env python3
"""bf.huge-pages on a DRAM-bound filter: bloomkit with huge pages, bloomkit
with 4 KiB pages and RedisBloom 2.8.2, side by side on one redis-server binary.

Each server gets a filter of CAPACITY items at 1% (default 1.26e9: 1.7 GB,
3.5x a 480 MiB last-level cache) holding a hit set of 10^7 items, which
writes every page of it. Rows run in alternating order
(bench.alternating_medians), 3 rounds, medians; lookups replay a pool as
large as the run, so that they touch lines all over the filter. Prints the
ratios (bench/PROFILE.md quotes them).
Usage: python3 bench/hugepages.py [CAPACITY]  (after bench/run.sh built everything)
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def main():
    capacity = int(float(sys.argv[1])) if len(sys.argv) > 1 else 1258291200
    module = os.path.join(bench.ROOT, "target", "release", "libbloomkit.so")
    servers = {}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))  # the finally stops the servers
    try:
        servers["huge pages"] = bench.Server("bloomkit, huge pages", module)
        servers["4 KiB pages"] = bench.Server("bloomkit, 4 KiB pages", module)
        servers["RedisBloom"] = bench.Server("RedisBloom", os.path.join(bench.ROOT, ".test-servers", "redisbloom.so"))
        servers["huge pages"].conn.call("CONFIG", "SET", "bf.huge-pages", "yes")  # the default is no
        hits = 10**7
        for name, s in servers.items():
            t = time.time()
            s.conn.call("BF.RESERVE", "large", "0.01", capacity)
            bench.benchmark(s, " ".join(["BF.MADD", "large"] + ["{item}"] * 1000), hits // 1000, 16, sequence=0)
            rollup = open("/proc/%d/smaps_rollup" % s.proc.pid).read().splitlines()
            huge_kb = next(int(line.split()[1]) for line in rollup if line.startswith("AnonHugePages"))
            if name == "huge pages" and huge_kb * 1024 < s.conn.call("MEMORY", "USAGE", "large") // 2:
                raise SystemExit("bf.huge-pages yes got %d kB of huge pages: THP is off here "
                                 "(/sys/kernel/mm/transparent_hugepage/enabled), nothing to compare" % huge_kb)
            print("%s: prepared in %.1f s; %s" % (name, time.time() - t, "; ".join(
                " ".join(line.split()) for line in rollup if line.startswith(("Rss", "AnonHugePages")))), flush=True)
        n32 = 2_000_000
        x100 = " ".join(["{item}"] * 100)
        rows = [("BF.EXISTS hits, pipeline 32", "BF.EXISTS large {item}", n32, 32, hits, "", False, 1),
                ("BF.EXISTS misses, pipeline 32", "BF.EXISTS large {item}", n32, 32, bench.RANDOM_RANGE, "miss:", False, 1),
                ("BF.ADD new items, pipeline 32", "BF.ADD large {item}", n32, 32, bench.RANDOM_RANGE, "new:", True, 1),
                ("BF.MEXISTS 100 items, hits", "BF.MEXISTS large " + x100, 30000, 1, hits, "", False, 100),
                ("BF.MADD 100 new items", "BF.MADD large " + x100, 30000, 1, bench.RANDOM_RANGE, "new:", True, 100)]
        print("| row | huge pages, x RedisBloom | 4 KiB pages, x RedisBloom |\n|---|---:|---:|")
        for name, command, n, depth, rand_range, prefix, fresh, per in rows:
            med = bench.alternating_medians(servers, 3, lambda s, r: per * bench.benchmark(
                s, command, n, depth, rand_range=rand_range, prefix=prefix, fresh=fresh, seed=100 + r, pool=n))
            print("| %s | %.2f | %.2f |" % (name, med["huge pages"] / med["RedisBloom"],
                                          med["4 KiB pages"] / med["RedisBloom"]), flush=True)
    finally:
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
