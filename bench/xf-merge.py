#!/usr/bin/env python3
"""XF.MERGE's server time by size, on a primary and on its replica (issue 47).

Merges used to be quadratic on a primary (its byte limit re-summed every
block built so far for each new one) while replicas, which have no limit,
were fast. This measures what the done-when of issue 47 asks, on each
server binary: two filters of N items each (1%, grown from the defaults by
XF.MADD) merged into a new key, the merge's time as the server counts it
(INFO commandstats, usec of cmdstat_xf.merge) on the primary and on a
replica that receives it by replication, per input entry (XF.INFO's
Entries of both sources), at N = 1M, 2M, 4M and 6M; the median of
--rounds merges; and the ratio of each size's time per entry to 1M's
(linear merges keep it near 1). The primary runs at default settings
(bf.max-filter-bytes 8 GiB, bf.xf-max-merge-entries 2^24, bf.xf-merge-threads
2), each merge measured again on one thread (bf.xf-merge-threads 1).

Usage: bench/xf-merge.sh [--quick] [--rounds R] [--sizes 1000000,...] [--output FILE]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ROOT, Server, command_stats, machine  # noqa: E402
from xf import fill  # noqa: E402

MODULE = os.path.join(ROOT, "target", "release", "libbloomkit.so")
SERVERS = [
    ("Redis 7.0", "redis-server"),
    ("Redis 8.2", os.path.join(ROOT, ".test-servers", "redis8-server")),
    ("Valkey 9", os.path.join(ROOT, ".test-servers", "valkey-server")),
]


def info_fields(conn, section):
    text = conn.call("INFO", section).decode()
    return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l)


def merge_usec(conn):
    """usec of every XF.MERGE since the last CONFIG RESETSTAT (0 if none)."""
    return command_stats(conn, "xf.merge")[1]


def entries(conn, key):
    reply = conn.call("XF.INFO", key)
    return dict(zip(reply[0::2], reply[1::2]))["Entries"]


def wait_replica(primary, replica):
    """Until the replica has everything the primary sent (WAIT, then its offset)."""
    primary.conn.call("WAIT", 1, 60000)
    deadline = time.time() + 120
    while True:
        p = int(info_fields(primary.conn, "replication")["master_repl_offset"])
        r = info_fields(replica.conn, "replication")
        if r.get("master_link_status") == "up" and int(r.get("slave_repl_offset", -1)) >= p:
            return
        if time.time() > deadline:
            raise SystemExit("the replica did not catch up")
        time.sleep(0.01)


# bf.xf-merge-threads: the default, then the server's thread alone.
THREADS = (2, 1)


def one_server(label, binary, sizes, rounds):
    # Both servers may run on both cores (no load generator here; they merge
    # one after the other): a merge runs on bf.xf-merge-threads threads.
    primary = Server("primary", MODULE, binary=binary, cpu="0,1")
    replica = Server("replica", MODULE, binary=binary, cpu="0,1",
                     extra_args=["--replicaof", "127.0.0.1", str(primary.port)])
    rows = []
    try:
        wait_replica(primary, replica)
        # Every size's sources first, then the merges of every size in each
        # round: a slow minute of a shared machine then falls on every size
        # alike instead of on one, whose ratio to the smallest it would bend.
        totals = {}
        for n in sizes:
            for key in ("a", "b"):
                fill(primary, "XF.MADD", "%s%d" % (key, n), 0 if key == "a" else 10**9, n)
            totals[n] = entries(primary.conn, "a%d" % n) + entries(primary.conn, "b%d" % n)
        wait_replica(primary, replica)
        times = {(n, side, t): [] for n in sizes for side in ("primary", "replica") for t in THREADS}
        for _ in range(rounds):
            for n in sizes:
                for t in THREADS:
                    primary.conn.call("DEL", "m")
                    wait_replica(primary, replica)
                    for s in (primary, replica):
                        s.conn.call("CONFIG", "SET", "bf.xf-merge-threads", t)
                        s.conn.call("CONFIG", "RESETSTAT")
                    primary.conn.call("XF.MERGE", "m", 2, "a%d" % n, "b%d" % n, "RAISERATE")
                    wait_replica(primary, replica)
                    times[(n, "primary", t)].append(merge_usec(primary.conn))
                    times[(n, "replica", t)].append(merge_usec(replica.conn))
        for n in sizes:
            row = {"n": n, "entries": totals[n]}
            for side in ("primary", "replica"):
                for t in THREADS:
                    row[(side, t)] = statistics.median(times[(n, side, t)]) * 1000 / totals[n]
            rows.append(row)
            print("%s: %d + %d items, %d entries: primary %.1f ns/entry, replica %.1f (one thread: %.1f, %.1f)" %
                  (label, n, n, totals[n], row[("primary", 2)], row[("replica", 2)], row[("primary", 1)],
                   row[("replica", 1)]), flush=True)
    finally:
        replica.stop()
        primary.stop()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a short smoke run (checks that it works, not figures)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="1000000,2000000,4000000,6000000")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "XF-MERGE-RESULTS.md"))
    opts = parser.parse_args()
    sizes = [100_000, 200_000] if opts.quick else [int(s) for s in opts.sizes.split(",")]
    rounds = 1 if opts.quick else opts.rounds
    lines = ["# XF.MERGE by size, primary and replica", "",
             "Made by `bench/xf-merge.sh%s` on %s." % (" --quick" if opts.quick else "", machine()), "",
             "Server time of `XF.MERGE m 2 a b RAISERATE` (INFO commandstats) per input entry, median of %d merges, "
             "every size's sources filled first and the sizes merged in turn in each round; "
             "the replica's is the same merge received by replication. Both servers may run on both cores; "
             "the merge runs on `bf.xf-merge-threads` threads: 2 (the default) in the first columns, 1 in the "
             "last two (the server's thread alone: what the merge costs in CPU). Ratio: ns per entry against the "
             "smallest size's, on the same node. Target (issue 47): at most 25 ns per entry and 1.3x." % rounds, "",
             "| server | items per source | input entries | primary ns/entry | replica ns/entry | "
             "primary ratio | replica ratio | primary, 1 thread | replica, 1 thread |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label, binary in SERVERS:
        if not os.path.exists(binary) and binary != "redis-server":
            print("%s: %s missing (scripts/test-servers.sh), skipped" % (label, binary), file=sys.stderr)
            continue
        rows = one_server(label, binary, sizes, rounds)
        base = rows[0]
        for r in rows:
            p, q = r[("primary", 2)], r[("replica", 2)]
            lines.append("| %s | %d | %d | %.1f | %.1f | %.2f | %.2f | %.1f | %.1f |" % (
                label, r["n"], r["entries"], p, q, p / base[("primary", 2)], q / base[("replica", 2)],
                r[("primary", 1)], r[("replica", 1)]))
    with open(opts.output, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
