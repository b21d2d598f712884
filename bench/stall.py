#!/usr/bin/env python3
"""Does creating a large filter stall the server? bloomkit beside RedisBloom.

One client PINGs the server without pause and records the slowest answer;
another creates large filters (BF.RESERVE of 1.2 GB, three times) and then
grows a chain (capacity 1e7, expansion 4) through two scale-outs, whose new
sub-filters are about 70 MB and 290 MB. Reported: each
creation's time and the slowest PING seen meanwhile, per module, on the same
redis-server binary (Debian's 7.0, which has no RedisModule_TryCalloc).
Appends to bench/SCALE-RESULTS.md. Usage: python3 bench/stall.py
"""
import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import LOADGEN, Conn, ROOT, Server, machine  # noqa: E402


def fill(server, key, first, count):
    """Adds items first .. first+count-1 with the load generator (BF.MADD x1000)."""
    subprocess.run(
        ["taskset", "-c", "1", LOADGEN, "--threads", "1", "--port", str(server.port), "--clients", "4",
         "--pipeline", "8", "--requests", str(count // 1000), "--sequence", str(first), "--prefix", "fill:", "--"]
        + ["BF.MADD", key] + ["{item}"] * 1000, check=True, capture_output=True)


def measure(server):
    stop = threading.Event()
    worst = [0.0, 0]

    def pinger():
        c = Conn(server.port)
        while not stop.is_set():
            t = time.perf_counter()
            c.call("PING")
            worst[0] = max(worst[0], time.perf_counter() - t)
            worst[1] += 1

    thread = threading.Thread(target=pinger)
    c = server.conn
    rows = {}

    def timed(label, *cmd):
        worst[0] = 0.0
        t = time.perf_counter()
        c.call(*cmd)
        rows[label] = (time.perf_counter() - t, worst[0])

    thread.start()
    try:
        time.sleep(0.2)  # the pinger is running before anything is measured
        for i in range(3):
            timed("BF.RESERVE big%d 0.01 1000000000 (1.2 GB)" % i, "BF.RESERVE", "big%d" % i, "0.01", "1000000000")
        c.call("BF.RESERVE", "chain", "0.01", "10000000", "EXPANSION", "4")
        added = 0
        for step in range(2):
            capacity = c.call("BF.INFO", "chain", "CAPACITY")[0]
            fill(server, "chain", added, capacity - added)  # up to full, not timed
            added = capacity
            before = c.call("BF.INFO", "chain", "FILTERS")[0]
            label = "BF.MADD that scales out to sub-filter %d" % (before + 1)
            worst[0] = 0.0
            t = time.perf_counter()
            n = 0
            while c.call("BF.INFO", "chain", "FILTERS")[0] == before:
                c.call("BF.MADD", "chain", *[b"scale:%d:%d" % (step, i) for i in range(n, n + 1000)])
                n += 1000
            rows[label] = (time.perf_counter() - t, worst[0])
    finally:
        stop.set()
        thread.join()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "SCALE-RESULTS.md"))
    parser.add_argument("--module", default=os.path.join(ROOT, "target", "release", "libbloomkit.so"))
    parser.add_argument("--redisbloom", default=os.path.join(ROOT, ".test-servers", "redisbloom.so"))
    parser.add_argument("--huge-pages", action="store_true", help="bloomkit with bf.huge-pages yes (default no)")
    opts = parser.parse_args()
    results = {}
    bloomkit = "bloomkit, bf.huge-pages yes" if opts.huge_pages else "bloomkit"
    for name, module in ((bloomkit, opts.module), ("RedisBloom 2.8.2", opts.redisbloom)):
        server = Server(name, module)
        try:
            if opts.huge_pages and module == opts.module:
                server.conn.call("CONFIG", "SET", "bf.huge-pages", "yes")
            results[name] = measure(server)
        finally:
            server.stop()
        for label, (secs, worst) in results[name].items():
            print("%-18s %-50s %8.1f ms, slowest PING %7.1f ms" % (name, label, secs * 1e3, worst * 1e3), flush=True)
    labels = list(next(iter(results.values())))
    with open(opts.output, "a") as out:
        out.write("\n## Creating and growing large filters: the slowest PING meanwhile (%s)\n\n" % time.strftime("%Y-%m-%d"))
        out.write("Machine: %s. Reproduce: `python3 bench/stall.py%s` (after `bench/run.sh` built the module). One "
                  "client PINGs without pause while another runs each command; each cell is the command's time / "
                  "the slowest PING answer during it.\n\n" % (machine(), " --huge-pages" if opts.huge_pages else ""))
        out.write("| command | %s |\n|---|%s\n" % (" | ".join(results), "---:|" * len(results)))
        for label in labels:
            cells = ["%.1f ms / %.1f ms" % (results[n][label][0] * 1e3, results[n][label][1] * 1e3) for n in results]
            out.write("| %s | %s |\n" % (label, " | ".join(cells)))
    print("appended to %s" % opts.output)


if __name__ == "__main__":
    main()
