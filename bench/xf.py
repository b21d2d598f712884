#!/usr/bin/env python3
"""bloomkit's expandable filter (XF.*) beside RedisBloom 2.8.2's scalable
Bloom filter (BF.*), both started small and grown, on two servers of the
same redis-server binary. Measured in one run (issues 33 and 41):

1. stable rate: the false-positive rate on never-added items at every
   fourth sample of the item count, for 1% and 0.1%;
2. memory: bits per item of real memory (the growth of the server's
   used_memory since before the key, each filter alone on its server) at
   16 points per doubling of the item count, not only where a structure
   is at its best: the mean over the run as a ratio to RedisBloom's, the
   worst ratio, and XF's highest bits per item over its lowest past 10,000
   items (its sawtooth); MEMORY USAGE beside the real bytes;
3. lookups on the grown filters: XF.MEXISTS x100 against BF.MEXISTS x100,
   and XF.EXISTS against BF.EXISTS at pipeline 32 (hits, drawn from all
   over the filters);
4. no stall: the slowest PING answered while the filter grows;
5. deletes: after deleting half of what was added, no false negative on
   the other half, and the rate on never-added items.

Usage: bench/xf.sh [--items N] [--quick] [--output FILE]
(N = 2,000,000 by default; --items 100000000 for the scale run).
"""
import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import LOADGEN, ROOT, Conn, Quiet, Server, alternating_medians, benchmark, machine  # noqa: E402

START = 1000
PROBES = 100_000


def fill(server, command, key, first, count, clients=4, pipeline=8):
    """Adds items fill:<first> .. fill:<first+count-1>, 1000 to a command."""
    if count <= 0:
        return
    whole, rest = divmod(count, 1000)
    if whole:
        subprocess.run(
            ["taskset", "-c", "1", LOADGEN, "--threads", "1", "--port", str(server.port), "--clients", str(clients),
             "--pipeline", str(pipeline), "--requests", str(whole), "--sequence", str(first), "--prefix", "fill:", "--"]
            + [command, key] + ["{item}"] * 1000, check=True, capture_output=True)
    if rest:
        server.conn.call(command, key, *["fill:%012d" % i for i in range(first + whole * 1000, first + count)])


def fill_steady(conn, command, key, first, count, pipeline=1, batch=1000):
    """As `fill`, over one connection (`pipeline` commands of `batch` items
    in flight)."""
    sent = 0
    for start in range(first, first + count, batch):
        conn.send(command, key, *[b"fill:%012d" % i for i in range(start, min(start + batch, first + count))])
        sent += 1
        if sent >= pipeline:
            conn.read()
            sent -= 1
    for _ in range(sent):
        conn.read()


def positives(conn, command, key, prefix, first, count, batch=1000):
    """How many of prefix<first> .. answer 1, pipelined a batch per command."""
    hits = 0
    for start in range(first, first + count, batch * 50):
        n = 0
        for b in range(start, min(start + batch * 50, first + count), batch):
            conn.send(command, key, *["%s%012d" % (prefix, i) for i in range(b, min(b + batch, first + count))])
            n += 1
        for _ in range(n):
            hits += sum(1 for r in conn.read() if r == 1)
    return hits


def points(start, items, per_doubling=16):
    """The counts sampled: `per_doubling` per doubling from `start` to `items`."""
    out, base = [], float(start)
    while base < items:
        for k in range(1, per_doubling + 1):
            c = min(int(round(base * 2 ** (k / per_doubling))), items)
            if not out or c > out[-1]:
                out.append(c)
        base *= 2
    return out


def growth(servers, rate, items, probes, stall_ms):
    """Grows an XF and a scalable BF from START to `items`, sampling both at
    16 points per doubling: real memory (used_memory since before the key)
    and MEMORY USAGE, and at every fourth point the false-positive rate.

    The XF is filled by one client sending one MADD of 1000 at a time, so
    that the slowest PING answered meanwhile is the longest the server was
    busy with one command (with pipelines from several clients it would
    also count the queue ahead of it); SLOWLOG gives that longest command
    as the server timed it."""
    bk, rb = servers["bloomkit"], servers["RedisBloom"]
    xf_key, bf_key = "xf-%s" % rate, "bf-%s" % rate
    for s in (bk, rb):
        s.conn.call("FLUSHALL")
    bk.conn.call("CONFIG", "SET", "slowlog-log-slower-than", "1000")
    bk.conn.call("CONFIG", "SET", "slowlog-max-len", "100000")
    bk.conn.call("SLOWLOG", "RESET")
    slowest, longest = [0.0], [0]

    # Pings over a connection of its own while the XF is filled (the probes
    # in between queue batches of their own ahead of a PING, and share this
    # process's GIL).
    def pinger(done):
        c = Conn(bk.port)
        while not done.is_set():
            t = time.perf_counter()
            c.call("PING")
            slowest[0] = max(slowest[0], time.perf_counter() - t)
        c.close()

    rows, have = [], 0
    with Quiet(bk) as qk, Quiet(rb) as qb:
        # A first key of each type, filled, probed and dropped, and a first
        # INFO: their one-time allocations (tens of KB) are not the filters'.
        # The probe matters: the first pipelined lookups free 2 KB that the
        # server held since before the base reading (RedisBloom's figures
        # read 2 KB low at every point after the first probe without it).
        for q, command, probe in ((qk, "XF.MADD", "XF.MEXISTS"), (qb, "BF.MADD", "BF.MEXISTS")):
            c = q.bulk()
            fill_steady(c, command, "warm-type", 0, 3000)
            positives(c, probe, "warm-type", "absent:", 0, probes)
            c.call("DEL", "warm-type")
            c.close()
            q.reading()
        base = {"bloomkit": qk.reading(["XF.RESERVE", xf_key, rate, "CAPACITY", START])[0],
                "RedisBloom": qb.reading(["BF.RESERVE", bf_key, rate, START])[0]}
        for k, n in enumerate(points(START, items)):
            done = threading.Event()
            thread = threading.Thread(target=pinger, args=(done,))
            c = qk.bulk()
            thread.start()
            fill_steady(c, "XF.MADD", xf_key, have, n - have)
            done.set()
            thread.join()
            # The longest XF command the server ran (microseconds), and the
            # slow log emptied: its entries are memory too.
            longest[0] = max([longest[0]] + [e[2] for e in c.call("SLOWLOG", "GET", "-1")
                                             if e[3] and e[3][0].upper().startswith(b"XF.")])
            c.call("SLOWLOG", "RESET")
            c.close()
            c = qb.bulk()
            fill_steady(c, "BF.MADD", bf_key, have, n - have, pipeline=8)
            c.close()
            have = n
            xf_used, xf_usage, info = qk.reading(["MEMORY", "USAGE", xf_key, "SAMPLES", "0"], ["XF.INFO", xf_key])
            bf_used, bf_usage, filters = qb.reading(["MEMORY", "USAGE", bf_key, "SAMPLES", "0"],
                                                    ["BF.INFO", bf_key, "FILTERS"])
            xf_real = (xf_used - base["bloomkit"]) * 8 / have
            bf_real = (bf_used - base["RedisBloom"]) * 8 / have
            xf_fp = bf_fp = None
            if k % 4 == 3 or have == items:
                for q, command, key in ((qk, "XF.MEXISTS", xf_key), (qb, "BF.MEXISTS", bf_key)):
                    c = q.bulk()
                    fp = positives(c, command, key, "absent:", have, probes) / probes
                    c.close()
                    xf_fp, bf_fp = (fp, bf_fp) if q is qk else (xf_fp, fp)
            blocks = info[info.index("Blocks") + 1]
            rows.append((have, xf_fp, bf_fp, xf_real, bf_real, xf_usage * 8 / have, bf_usage * 8 / have, blocks,
                         filters[0]))
            if xf_fp is not None:
                print("rate %s, %10d items: XF %5.1f bits (%d blocks) fp %.5f | BF %5.1f bits (%d filters) fp %.5f"
                      % (rate, have, xf_real, blocks, xf_fp, bf_real, filters[0], bf_fp), flush=True)
    stall_ms.append((slowest[0] * 1000, longest[0] / 1000))
    return rows


def deletes(server, rate, items, probes):
    """Deletes every second item of a grown XF: no false negative on the rest."""
    key = "xf-del"
    server.conn.call("XF.RESERVE", key, rate, "CAPACITY", START)
    fill(server, "XF.MADD", key, 0, items)
    for start in range(0, items, 2000):
        for i in range(start, min(start + 2000, items), 2):
            server.conn.send("XF.DEL", key, "fill:%012d" % i)
        for i in range(start, min(start + 2000, items), 2):
            assert server.conn.read() == 1, "fill:%012d was not deleted" % i
    kept = sum(positives(server.conn, "XF.MEXISTS", key, "fill:", i, 1) for i in range(1, min(items, 20001), 2))
    missing = min(items, 20000) // 2 - kept
    fp = positives(server.conn, "XF.MEXISTS", key, "absent:", 0, probes) / probes
    server.conn.call("DEL", key)
    return missing, fp


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2_000_000)
    parser.add_argument("--quick", action="store_true", help="a smoke run (20,000 items, small probes)")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "XF-RESULTS.md"))
    parser.add_argument("--module", default=os.path.join(ROOT, "target", "release", "libbloomkit.so"))
    parser.add_argument("--redisbloom", default=os.path.join(ROOT, ".test-servers", "redisbloom.so"))
    opts = parser.parse_args()
    items = 20_000 if opts.quick else opts.items
    probes = 5_000 if opts.quick else PROBES
    rounds = 1 if opts.quick else 5
    started = time.time()
    servers = {"bloomkit": Server("bloomkit", opts.module), "RedisBloom": Server("RedisBloom", opts.redisbloom)}
    bk, rb = servers["bloomkit"], servers["RedisBloom"]
    out = []
    try:
        stalls = []
        grown = {rate: growth(servers, rate, items, probes, stalls) for rate in ("0.01", "0.001")}
        # Lookups on the grown 1% filters, hits drawn from all their items.
        n100, n32 = (300 if opts.quick else 30_000), (20_000 if opts.quick else 2_000_000)
        lookups = []
        for name, xf_cmd, bf_cmd, n, depth, per in (
                ("MEXISTS 100 hits (items/s)", ["XF.MEXISTS", "xf-0.01"] + ["{item}"] * 100,
                 ["BF.MEXISTS", "bf-0.01"] + ["{item}"] * 100, n100, 1, 100),
                ("EXISTS hits, pipeline 32 (ops/s)", ["XF.EXISTS", "xf-0.01", "{item}"],
                 ["BF.EXISTS", "bf-0.01", "{item}"], n32, 32, 1)):
            def measure(server, r, xf_cmd=xf_cmd, bf_cmd=bf_cmd, n=n, depth=depth, per=per):
                cmd = " ".join(xf_cmd if server is bk else bf_cmd)
                return per * benchmark(server, cmd, n, depth, rand_range=items, prefix="fill:", seed=500 + r, pool=n)
            m = alternating_medians(servers, rounds, measure)
            lookups.append((name, m["bloomkit"], m["RedisBloom"]))
            print("%-40s XF %12.0f  BF %12.0f  ratio %.2f" % (name, m["bloomkit"], m["RedisBloom"],
                                                              m["bloomkit"] / m["RedisBloom"]), flush=True)
        missing, del_fp = deletes(bk, "0.01", min(items, 200_000), probes)
        print("deletes: %d false negatives, rate %.5f" % (missing, del_fp), flush=True)
    finally:
        for s in servers.values():
            s.stop()

    elapsed = time.time() - started
    out.append("# XF (bloomkit's expandable filter) vs RedisBloom 2.8.2's scalable filter\n")
    out.append("Generated by `bench/xf.sh%s` on %s in %.0f s.\n" % (
        " --quick" if opts.quick else ("" if opts.items == 2_000_000 else " --items %d" % opts.items),
        time.strftime("%Y-%m-%d"), elapsed))
    out.append("Machine: %s.\n" % machine())
    out.append("Both filters start at %d items (`XF.RESERVE k rate CAPACITY %d`, `BF.RESERVE k rate %d`, "
               "RedisBloom's default expansion 2), each alone on a server of the same redis-server binary, and "
               "grow to %d items by `MADD`s of 1000. Memory is real: the growth of `used_memory` since before "
               "the key, sampled at 16 points per doubling; the false-positive rate on %d never-added items at "
               "every fourth point. Lookups: hits drawn from every item, 50 clients on loopback, medians of %d "
               "alternating rounds.\n" % (START, START, START, items, probes, rounds))
    for rate, rows in grown.items():
        out.append("\n## Growth at %s\n" % rate)
        out.append("Bits per item of real memory at 16 points per doubling (every fourth row shown, with the "
                   "false-positive rates measured there); MEMORY USAGE beside it.\n")
        out.append("| items | XF bits/item | BF bits/item | ratio | XF MEMORY USAGE / real | XF false positives | "
                   "BF false positives | XF blocks | BF sub-filters |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for have, xf_fp, bf_fp, xf_real, bf_real, xf_usage, bf_usage, blocks, filters in rows:
            if xf_fp is None:
                continue
            out.append("| %d | %.1f | %.1f | %.2f | %.3f | %.5f | %.5f | %d | %d |"
                       % (have, xf_real, bf_real, xf_real / bf_real, xf_usage / xf_real, xf_fp, bf_fp, blocks,
                          filters))
        past = [r for r in rows if r[0] >= 10_000]
        mean_ratio = statistics.mean(r[3] for r in rows) / statistics.mean(r[4] for r in rows)
        worst = max(r[3] / r[4] for r in rows)
        worst_past = max(r[3] / r[4] for r in past) if past else float("nan")
        hi, lo = (max(r[3] for r in past), min(r[3] for r in past)) if past else (float("nan"),) * 2
        usage = [r[5] / r[3] for r in rows if r[0] >= 10_000]
        out.append("\n%d points from %d to %d items. Mean bits per item: XF %.2f, BF %.2f, **%.3f** of BF's "
                   "(goal: at most %s); the worst ratio at any point %.2f, past 10,000 items **%.2f** (goal: at "
                   "most 1); XF's highest bits per item over its lowest past 10,000 items: %.2f / %.2f = **%.3f** "
                   "(goal: at most 1.15). XF's MEMORY USAGE over its real bytes: %.3f to %.3f. Highest measured "
                   "false-positive rate: XF %.5f, BF %.5f (configured %s)."
                   % (len(rows), START, rows[-1][0], statistics.mean(r[3] for r in rows),
                      statistics.mean(r[4] for r in rows), mean_ratio, "0.65" if rate == "0.01" else "0.55",
                      worst, worst_past, hi, lo, hi / lo, min(usage or [0]), max(usage or [0]),
                      max(r[1] for r in rows if r[1] is not None), max(r[2] for r in rows if r[2] is not None),
                      rate))
    out.append("\n## Lookups on the grown 1% filters\n")
    out.append("| measurement | XF | BF | ratio |")
    out.append("|---|---:|---:|---:|")
    for name, a, b in lookups:
        out.append("| %s | %.0f | %.0f | %.2f |" % (name, a, b, a / b))
    out.append("\n## No stall, and deletes\n")
    out.append("While the XF filters grew (one client sending one `XF.MADD` of 1000 items at a time): the "
               "slowest PING answered, %s ms (goal: at most 10); the longest XF command the server ran "
               "(`SLOWLOG`), %s ms. Everything growth does (a block split per write at most) is in those "
               "commands."
               % (" and ".join("%.2f" % p for p, _ in stalls), " and ".join("%.2f" % c for _, c in stalls)))
    out.append("\nAfter adding %d items and deleting every second one: %d false negatives on the kept half "
               "(of the first 10,000 checked), false-positive rate %.5f on never-added items."
               % (min(items, 200_000), missing, del_fp))
    with open(opts.output, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s (%.0f s)" % (opts.output, elapsed))


if __name__ == "__main__":
    main()
