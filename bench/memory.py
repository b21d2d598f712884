#!/usr/bin/env python3
"""What one value of each type really costs, beside RedisBloom 2.8.2.

"Real" is what `used_memory` grows by per key over many keys (20,000 by
default): every block the server's allocator hands out for the key, the
value and the server's own bookkeeping, at the allocator's sizes. The keys
are made in a database whose hash table was first grown past them (string
keys made by DEBUG POPULATE up to the point where the table has just
doubled), so that no resize lands inside a measurement; the table's size
is read before and after (DEBUG HTSTATS) and a measurement it changed in
is refused. Both modules run in servers of the same binary, measured one
after the other. Beside each real cost: what `MEMORY USAGE` says (the
server's count of the key plus the module's figure for the value) and
`INFO bf`'s bytes per key (the value alone), and for RedisBloom's
t-digests the growth of the process's resident memory, since RedisBloom
2.8.2 allocates their nodes with libc's malloc, which `used_memory` does
not see.

Usage: bench/memory.sh [--keys N] [--server BINARY]... [--output FILE]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the RESP client and the server runner)

ROOT = bench.ROOT

# (type, case, commands that make key {k}, whether RedisBloom has it)
VALUES = "".join(" v%d" % i for i in range(1000))
CASES = [
    ("BF", "capacity 10", ["BF.RESERVE {k} 0.01 10"], True),
    ("BF", "capacity 100", ["BF.RESERVE {k} 0.01 100"], True),
    ("BF", "capacity 1000", ["BF.RESERVE {k} 0.01 1000"], True),
    ("BF", "capacity 10000", ["BF.RESERVE {k} 0.01 10000"], True),
    ("BF", "BF.ADD (defaults)", ["BF.ADD {k} x"], True),
    ("BF", "grown: capacity 10, 100 items (4 sub-filters)",
     ["BF.RESERVE {k} 0.01 10", "BF.MADD {k}" + "".join(" i%d" % i for i in range(100))], True),
    ("CF", "capacity 1000", ["CF.RESERVE {k} 1000"], True),
    ("CF", "CF.ADD (defaults)", ["CF.ADD {k} x"], True),
    ("CF", "grown: capacity 100, 500 items",
     ["CF.RESERVE {k} 100"] + ["CF.INSERT {k} ITEMS" + "".join(" i%d" % i for i in range(j, j + 100))
                               for j in range(0, 500, 100)], True),
    ("CMS", "10 x 2", ["CMS.INITBYDIM {k} 10 2"], True),
    ("CMS", "100 x 5", ["CMS.INITBYDIM {k} 100 5"], True),
    ("CMS", "INITBYPROB 0.01 0.01", ["CMS.INITBYPROB {k} 0.01 0.01"], True),
    ("TOPK", "k 10 (defaults)", ["TOPK.RESERVE {k} 10"], True),
    ("TOPK", "k 10, 50 items", ["TOPK.RESERVE {k} 10", "TOPK.ADD {k}" + "".join(" item-%d" % i for i in range(50))], True),
    ("TOPK", "k 50, 2000 x 7", ["TOPK.RESERVE {k} 50 2000 7 0.925"], True),
    ("TDIGEST", "compression 100, empty", ["TDIGEST.CREATE {k}"], True),
    ("TDIGEST", "compression 100, 1000 values", ["TDIGEST.CREATE {k}", "TDIGEST.ADD {k}" + VALUES.replace("v", "")], True),
    ("TDIGEST", "1000 values, then read", ["TDIGEST.CREATE {k}", "TDIGEST.ADD {k}" + VALUES.replace("v", ""),
                                          "TDIGEST.QUANTILE {k} 0.5"], True),
    ("APBF", "capacity 100, count window", ["APBF.RESERVE {k} 0.01 100 COUNT"], False),
    ("XF", "XF.RESERVE, empty", ["XF.RESERVE {k} 0.01"], False),
    ("XF", "XF.ADD (defaults)", ["XF.ADD {k} x"], False),
    ("XF", "XF.MADD (defaults), 100 items", ["XF.MADD {k}" + "".join(" i%d" % i for i in range(100))], False),
    ("valkey-bloom", "BF.ADD (defaults)", ["BF.ADD {k} x"], False),
]


def info(conn, section):
    text = conn.call("INFO", section).decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line and not line.startswith("#"))


def table_sizes(conn):
    """The main hash table's size(s) (two while it rehashes)."""
    text = conn.call("DEBUG", "HTSTATS", "0").decode()
    main = text.split("[Expires HT]")[0]
    return [int(line.split(":")[1]) for line in main.split("\n") if "table size:" in line]


def wait_rehashed(conn, deadline=30):
    end = time.time() + deadline
    while len(table_sizes(conn)) > 1:
        if time.time() > end:
            raise SystemExit("the hash table did not finish rehashing")
        conn.call("EXISTS", "pad:0")  # each lookup moves a rehash step on
    sizes = table_sizes(conn)
    return sizes[0] if sizes else 0


def wait_freed(conn, deadline=30):
    end = time.time() + deadline
    while info(conn, "memory").get("lazyfree_pending_objects", "0") != "0":
        if time.time() > end:
            raise SystemExit("the server did not finish freeing")
        time.sleep(0.01)


# Each section's bytes once (BF's `stats` counts valkey-bloom's objects too).
BYTES_FIELDS = ("bf_bytes", "bf_cf_bytes", "bf_cms_bytes", "bf_topk_bytes", "bf_tdigest_bytes", "bf_apbf_bytes",
                "bf_xf_bytes")


def counted_bytes(conn):
    fields = info(conn, "bf")
    return sum(int(fields[f]) for f in BYTES_FIELDS)


def used(conn):
    """`used_memory` less the clients' buffers (the measuring connection's
    reply buffer grows and shrinks with what it reads)."""
    fields = info(conn, "memory")
    return int(fields["used_memory"]) - int(fields.get("mem_clients_normal", 0))


def quiet(conn):
    """Nothing kept about commands beside the keys: no slow log, no latency histograms."""
    conn.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
    conn.call("SLOWLOG", "RESET")
    conn.call("CONFIG", "SET", "latency-tracking", "no")


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(server, commands, keys):
    """(real, MEMORY USAGE, INFO bf bytes, RSS) per key for `keys` keys made by `commands`."""
    c = server.conn
    quiet(c)
    c.call("FLUSHALL", "SYNC")
    wait_freed(c)
    # Padding until the table has just grown with room for the keys at
    # three quarters full (the servers grow theirs at full, or near it).
    size, padding = wait_rehashed(c), 0
    while True:
        padding += max(1000, keys // 20)
        c.call("DEBUG", "POPULATE", padding, "pad")
        grown = table_sizes(c)[-1]
        if grown != size and grown * 3 >= (padding + keys) * 4:
            break
        size = grown
    size = wait_rehashed(c)
    bytes_before = counted_bytes(c) if server.name != "RedisBloom" else 0
    used_before, rss_before = used(c), rss(server.proc.pid)
    names = ["key:%08d" % i for i in range(keys)]
    for start in range(0, keys, 500):
        batch = names[start:start + 500]
        for k in batch:
            for line in commands:
                c.send(*line.replace("{k}", k).split())
        for _ in batch:
            for _ in commands:
                c.read()
    wait_freed(c)
    if table_sizes(c) != [size]:
        raise SystemExit("the hash table resized during the measurement (%s, was %d)" % (table_sizes(c), size))
    used_after, rss_after = used(c), rss(server.proc.pid)
    bytes_after = counted_bytes(c) if server.name != "RedisBloom" else 0
    for k in names:
        c.send("MEMORY", "USAGE", k, "SAMPLES", "0")
    usage = statistics.mean(c.read() for _ in names)
    return ((used_after - used_before) / keys, usage, (bytes_after - bytes_before) / keys,
            (rss_after - rss_before) / keys)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--server", action="append", metavar="BINARY",
                        help="server binaries to measure on (default: redis-server on PATH)")
    parser.add_argument("--module", default=os.path.join(ROOT, "target", "release", "libbloomkit.so"))
    parser.add_argument("--redisbloom", default=os.path.join(ROOT, ".test-servers", "redisbloom.so"))
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "MEMORY-RESULTS.md"))
    parser.add_argument("--only", action="append", metavar="TYPE",
                        help="measure only these types (BF, CF, CMS, TOPK, TDIGEST, APBF, XF, valkey-bloom)")
    opts = parser.parse_args()
    binaries = opts.server or ["redis-server"]
    started = time.time()
    sections = []
    for binary in binaries:
        version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
        print("==", version, flush=True)
        servers = {"bloomkit": bench.Server("bloomkit", opts.module, binary=binary),
                   "valkey-bloom": bench.Server("bloomkit", opts.module, binary=binary,
                                                module_args=["COMPAT", "valkey-bloom"]),
                   "RedisBloom": bench.Server("RedisBloom", opts.redisbloom, binary=binary)}
        rows = []
        try:
            for family, case, commands, redisbloom in CASES:
                if opts.only and family not in opts.only:
                    continue
                ours = servers["valkey-bloom" if family == "valkey-bloom" else "bloomkit"]
                real, usage, counted, _ = measure(ours, commands, opts.keys)  # _: our RSS growth
                theirs = measure(servers["RedisBloom"], commands, opts.keys) if redisbloom else None
                rows.append((family, case, real, usage, counted, theirs, _))
                line = "%-13s %-46s real %9.1f  MEMORY USAGE %9.1f (%.3f)  INFO bytes %9.1f" % (
                    family, case, real, usage, usage / real, counted)
                if theirs:
                    line += "  | RedisBloom real %9.1f (x%.3f)  RSS %9.1f" % (theirs[0], real / theirs[0], theirs[3])
                print(line, flush=True)
        finally:
            for s in servers.values():
                s.stop()
        sections.append((version, rows))
    write(opts, sections, time.time() - started)


def write(opts, sections, elapsed):
    with open(opts.output, "w") as out:
        out.write("# What one value costs: bloomkit vs RedisBloom 2.8.2\n\n")
        out.write("Generated by `bench/memory.sh%s` on %s in %.0f s (%d keys per row).\n\n" % (
            "".join(" --server " + b for b in (opts.server or [])), time.strftime("%Y-%m-%d"), elapsed, opts.keys))
        out.write(
            "*Real* is what `used_memory` grew by per key: the key, the server's bookkeeping and the value, at "
            "the allocator's sizes (the database's hash table was grown beforehand, and a row it resized in "
            "would have been refused). *vs RedisBloom* is bloomkit's real cost over RedisBloom's for the same "
            "value on a server of the same binary (at most 1.00 is the goal). *MEMORY USAGE* is the server's "
            "figure for the key, *INFO bytes* the growth of the type's `INFO bf` bytes per key (the value "
            "alone, at the allocator's sizes). RedisBloom 2.8.2 allocates a t-digest's nodes with libc's "
            "malloc, which `used_memory` never sees: its t-digest rows are compared by resident memory "
            "(*RSS*) too, which counts those (and, for bloomkit, only pages written).\n")
        for version, rows in sections:
            out.write("\n## %s\n\n" % version)
            out.write("| type | value | real (bytes) | RedisBloom real | vs RedisBloom | MEMORY USAGE | "
                      "MEMORY USAGE / real | INFO bytes | RSS growth | RedisBloom RSS growth |\n")
            out.write("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
            for family, case, real, usage, counted, theirs, our_rss in rows:
                tdigest = family == "TDIGEST"
                out.write("| %s | %s | %.0f | %s | %s | %.0f | %.3f | %.0f | %s | %s |\n" % (
                    family, case, real, "%.0f" % theirs[0] if theirs else "-",
                    "%.2f" % (real / theirs[0]) if theirs and theirs[0] > 0 else "-", usage, usage / real, counted,
                    "%.0f" % our_rss if tdigest else "-", "%.0f" % theirs[3] if theirs and tdigest else "-"))
    print("wrote %s (%.0f s)" % (opts.output, elapsed))


if __name__ == "__main__":
    main()
