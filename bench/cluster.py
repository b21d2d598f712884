#!/usr/bin/env python3
"""A billion items through the sharded client into a 3-master Redis Cluster.

Issue 15 (b), beside bench/scale.py's one-server run: three redis-servers
with bloomkit on loopback, made a cluster by `redis-cli --cluster create`;
one filter `Layout::sharded(NAME, 3, Over::Module, capacity N, rate P)`
reserved and loaded through bloomkit-client (bloomkit-cluster-load: several
threads, each its own stretch of the items and its own cluster connection,
add_many of 30000 items, split by the client into per-shard BF.INSERTs of
1000). Reports load items/s, MEMORY USAGE and bits per item against the
1.44 log2(1/p) bound, the false-positive rate on never-added probes
(contains_many through the same client), BGSAVE time on each master, the
time each master takes to come back with its shard after a restart, and the
per-shard fill spread (BF.CARD per shard). Appends a section to
bench/SCALE-RESULTS.md. Usage: bench/cluster.sh [--items N] [--probes N].
"""
import argparse
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Conn, ROOT, free_port, machine  # noqa: E402

LOADER = os.path.join(ROOT, "target", "release", "bloomkit-cluster-load")
MASTERS = 3


def crc16(data):
    """Redis Cluster's key hash (CRC16/XMODEM)."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def info_field(conn, section, field):
    for line in conn.call("INFO", section).decode().splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    raise KeyError(field)


def wait_for(what, deadline, check, pause=0.05):
    """Polls `check` until it returns something true; its time in seconds and that value."""
    started = time.time()
    while True:
        try:
            value = check()
            if value:
                return time.time() - started, value
        except (OSError, RuntimeError):  # not listening yet, LOADING, CLUSTERDOWN
            pass
        if time.time() - started > deadline:
            raise SystemExit("timed out after %d s waiting for %s" % (deadline, what))
        time.sleep(pause)


class Node:
    """A cluster-enabled redis-server with bloomkit, in a directory that outlives restarts."""

    def __init__(self, module, directory):
        self.module, self.dir = module, directory
        # The bus port is given, not port + 10000, which may be past 65535.
        self.port, self.bus = free_port(), free_port()
        self.proc = None
        os.makedirs(directory, exist_ok=True)

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--logfile", "server.log", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-port", str(self.bus), "--save", "", "--appendonly", "no",
             "--proto-max-bulk-len", "2gb", "--loadmodule", self.module],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def conn(self):
        return Conn(self.port)

    def wait_up(self, deadline):
        """Until the server answers PING (after loading its RDB, if any); returns the seconds."""
        def up():
            if self.proc.poll() is not None:
                raise SystemExit("redis-server on %d exited; see %s/server.log" % (self.port, self.dir))
            return self.conn().call("PING") == "PONG"
        return wait_for("redis-server on port %d" % self.port, deadline, up)[0]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def slot_owners(conn):
    """(first slot, last slot, port) of each range, from CLUSTER SLOTS."""
    return sorted((r[0], r[1], r[2][1]) for r in conn.call("CLUSTER", "SLOTS"))


def wait_cluster_ok(nodes, deadline=120):
    """Until every node says cluster_state:ok and all agree on who owns the 16384 slots."""
    def settled():
        views = []
        for n in nodes:
            c = n.conn()
            if b"cluster_state:ok" not in c.call("CLUSTER", "INFO"):
                return False
            views.append(slot_owners(c))
        covered = sum(last - first + 1 for first, last, _ in views[0])
        return covered == 16384 and all(v == views[0] for v in views)
    return wait_for("the cluster to settle", deadline, settled)[0]


def run_loader(nodes, name, shards, capacity, rate, mode, *extra, over="module", timeout_secs=120):
    """Runs bloomkit-cluster-load (progress passes through on stderr): its key=value line as a
    dict, with its own CPU seconds and peak RSS (from wait4, this child alone)."""
    args = [LOADER, "--nodes", ",".join("127.0.0.1:%d" % n.port for n in nodes), "--name", name,
            "--shards", str(shards), "--over", over, "--capacity", str(int(capacity)), "--rate", str(rate),
            "--timeout-secs", str(timeout_secs), mode]
    proc = subprocess.Popen(args + [str(a) for a in extra], stdout=subprocess.PIPE, text=True)
    try:
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit("bloomkit-cluster-load %s failed (exit %d)" % (mode, code))
    fields = dict(word.split("=", 1) for word in out.split())
    result = {k: (v if k == "keys" else float(v)) for k, v in fields.items()}
    result["cpu"] = usage.ru_utime + usage.ru_stime
    result["rss"] = usage.ru_maxrss * 1024
    return result


def loader(nodes, opts, mode, *extra):
    """The loader over this benchmark's Bloom filter sharded over the masters."""
    return run_loader(nodes, opts.name, MASTERS, opts.items, opts.rate, mode, *extra)


def start_nodes(module, directory, count):
    """`count` cluster-enabled servers with the module, up and answering."""
    nodes = [Node(module, os.path.join(directory, "node%d" % i)) for i in range(count)]
    try:
        for n in nodes:
            n.start()
        for n in nodes:
            n.wait_up(30)
    except BaseException:
        # Those started are stopped: the caller never gets the list.
        for n in nodes:
            n.stop()
        raise
    return nodes


def cpu_seconds(conn):
    return float(info_field(conn, "cpu", "used_cpu_user")) + float(info_field(conn, "cpu", "used_cpu_sys"))


def run(opts, directory):
    items, probes = int(opts.items), int(opts.probes)
    nodes = []
    try:
        nodes = start_nodes(opts.module, directory, MASTERS)
        create = subprocess.run(
            ["redis-cli", "--cluster", "create"] + ["127.0.0.1:%d" % n.port for n in nodes]
            + ["--cluster-replicas", "0", "--cluster-yes"], capture_output=True, text=True, timeout=120)
        if create.returncode != 0:
            raise SystemExit("redis-cli --cluster create failed:\n%s%s" % (create.stdout, create.stderr))
        settle_seconds = wait_cluster_ok(nodes)
        print("cluster of %d masters ok after %.1f s (ports %s)" % (
            MASTERS, settle_seconds, ", ".join(str(n.port) for n in nodes)), flush=True)

        # Which master holds which shard ({name:i}, as Layout::sharded names them).
        keys = ["{%s:%d}" % (opts.name, s) for s in range(MASTERS)]
        ranges = slot_owners(nodes[0].conn())
        by_port = {n.port: n for n in nodes}
        owner = {}
        for key in keys:
            slot = crc16(("%s:%d" % (opts.name, keys.index(key))).encode()) % 16384
            assert nodes[0].conn().call("CLUSTER", "KEYSLOT", key) == slot
            owner[key] = by_port[next(port for first, last, port in ranges if first <= slot <= last)]
        if len(set(owner.values())) != MASTERS:
            raise SystemExit("shards of %r do not land on %d different masters (%s); pick another --name" % (
                opts.name, MASTERS, {k: v.port for k, v in owner.items()}))

        reserved = loader(nodes, opts, "reserve")
        assert reserved["keys"].split(",") == keys, reserved

        print("loading %d items through the sharded client, %d threads" % (items, opts.threads), flush=True)
        cpu_before = [cpu_seconds(owner[k].conn()) for k in keys]
        load = loader(nodes, opts, "add", "--first", 0, "--count", items, "--prefix", "item:",
                      "--threads", opts.threads)
        server_cpu = [cpu_seconds(owner[k].conn()) - b for k, b in zip(keys, cpu_before)]
        print("loaded: %s" % load, flush=True)

        shards = []
        for key in keys:
            c = owner[key].conn()
            raw = c.call("BF.INFO", key)
            bf = {raw[i].decode() if isinstance(raw[i], bytes) else raw[i]: raw[i + 1] for i in range(0, len(raw), 2)}
            shards.append({
                "key": key, "port": owner[key].port, "card": c.call("BF.CARD", key),
                "usage": c.call("MEMORY", "USAGE", key), "capacity": bf["Capacity"],
                "filters": bf["Number of filters"], "used_memory": int(info_field(c, "memory", "used_memory")),
            })
        whole = loader(nodes, opts, "info")
        card = sum(s["card"] for s in shards)
        usage = sum(s["usage"] for s in shards)
        assert whole["count"] == card, (whole, card)
        if load["new"] != card:
            print("note: add_many answered %d new, the shards count %d" % (load["new"], card), flush=True)

        print("probing %d never-added items" % probes, flush=True)
        fp = loader(nodes, opts, "contains", "--first", 0, "--count", probes, "--prefix", "probe:",
                    "--threads", opts.threads)

        # BGSAVE on each master in turn, so each fork has the machine to itself.
        for s in shards:
            c = by_port[s["port"]].conn()
            before = int(info_field(c, "persistence", "rdb_saves"))
            t = time.time()
            c.call("BGSAVE")
            wait_for("BGSAVE on %d" % s["port"], 3600,
                     lambda: info_field(c, "persistence", "rdb_bgsave_in_progress") == "0", pause=0.1)
            seconds = time.time() - t
            if info_field(c, "persistence", "rdb_last_bgsave_status") != "ok" \
                    or int(info_field(c, "persistence", "rdb_saves")) != before + 1:
                raise SystemExit("BGSAVE failed on %d; see its server.log" % s["port"])
            s["save s"] = seconds
            s["rdb"] = os.path.getsize(os.path.join(by_port[s["port"]].dir, "dump.rdb"))

        # Restart each master in turn on its port, directory and nodes.conf:
        # the time until its RDB is loaded (INFO loading:0), and until it
        # serves its shard again (BF.CARD as before; a restarted master waits
        # for the cluster to be ok, 2 s at least in Redis 7.0).
        for s in shards:
            node = by_port[s["port"]]
            node.stop()
            t = time.time()
            node.start()

            def check_alive():
                if node.proc.poll() is not None:
                    raise SystemExit("redis-server on %d exited on restart; see %s/server.log" % (node.port, node.dir))
            s["loaded s"], _ = wait_for(
                "master %d to load its RDB" % node.port, 3600,
                lambda: check_alive() or info_field(node.conn(), "persistence", "loading") == "0")
            wait_for("master %d to serve its shard" % node.port, 600,
                     lambda: check_alive() or node.conn().call("BF.CARD", s["key"]) == s["card"])
            s["restart s"] = time.time() - t
        wait_cluster_ok(nodes)
        after = loader(nodes, opts, "info")
        assert after["count"] == card, "the restarted cluster holds %d items, not %d" % (after["count"], card)

        cards = [s["card"] for s in shards]
        mean = sum(cards) / len(cards)
        return {
            "items": items, "probes": probes, "load": load, "fp": fp, "shards": shards, "card": card,
            "usage": usage, "bits/item": usage * 8 / items, "spread": (max(cards) - min(cards)) / mean,
            # Each item picks its shard uniformly: a shard's count is binomial(items, 1/3).
            "sigma": math.sqrt(items * (1 / MASTERS) * (1 - 1 / MASTERS)),
            "server cpu": server_cpu, "loader cpu": load["cpu"], "loader rss": load["rss"],
        }
    finally:
        for n in nodes:
            n.stop()


def module_name(opts):
    return "RedisBloom 2.8.2" if "redisbloom" in os.path.basename(opts.module).lower() else "bloomkit"


def report(opts, r):
    items, probes, load, shards = r["items"], r["probes"], r["load"], r["shards"]
    bound = 1.44 * math.log2(1 / opts.rate)
    cards = [s["card"] for s in shards]
    mean = sum(cards) / len(cards)
    wall = load["seconds"]
    cores = os.cpu_count()
    used = r["loader cpu"] + sum(r["server cpu"])
    busy = used / (wall * cores)
    lines = [
        "\n## Layout::sharded(\"%s\", 3, Over::Module, %d, %g) over a 3-master cluster of %s (%s)\n" % (
            opts.name, items, opts.rate, module_name(opts), time.strftime("%Y-%m-%d")),
        "Machine: %s. Reproduce: `bench/cluster.sh --items %d --probes %d --rate %g --threads %d%s`.\n" % (
            machine(), items, probes, opts.rate, opts.threads,
            "" if module_name(opts) == "bloomkit" else " --module .test-servers/redisbloom.so"),
        "Three redis-server masters with %s on loopback (`redis-cli --cluster create`, no replicas), "
        "one shard per master; items `item:%%012d` loaded by `bloomkit-cluster-load` through "
        "bloomkit-client (`RedisFilter` over `BlockingCluster`, %d threads each with its own stretch and "
        "cluster connection, `add_many` of 30000 items split into per-shard `BF.INSERT`s of 1000, up to "
        "8 in flight per thread).\n" % (module_name(opts), opts.threads),
        "| measurement | whole filter |",
        "|---|---:|",
        "| load (add_many x30000 through the client) | %.2fM items/s (%.1f s) |" % (
            load["items_per_s"] / 1e6, wall),
        "| BF.CARD, summed over the shards | %d (add_many answered %d new) |" % (r["card"], load["new"]),
        "| MEMORY USAGE, summed over the shards | %.2f GB |" % (r["usage"] / 1e9),
        "| bits per item (bound 1.44 log2(1/p) = %.2f) | %.2f |" % (bound, r["bits/item"]),
        "| false-positive rate, %d never-added probes (%g configured) | %.4f %% |" % (
            probes, opts.rate, 100 * r["fp"]["fraction"]),
        "| BGSAVE, each master in turn | %s s (%.2f GB RDB in all) |" % (
            " / ".join("%.1f" % s["save s"] for s in shards), sum(s["rdb"] for s in shards) / 1e9),
        "| restart, each master in turn: RDB loaded (INFO loading:0) | %s s |" % (
            " / ".join("%.1f" % s["loaded s"] for s in shards)),
        "| restart, each master in turn: serving its shard again (BF.CARD as before) | %s s |" % (
            " / ".join("%.1f" % s["restart s"] for s in shards)),
        "| per-shard fill spread: (max - min) / mean of BF.CARD | %.4f %% (%d items, %.1f binomial sigma) |" % (
            100 * r["spread"], max(cards) - min(cards), (max(cards) - min(cards)) / r["sigma"]),
        "| CPU during the load: loader / each master (core-seconds) | %.1f / %s of %.1f on %d cores |" % (
            r["loader cpu"], " / ".join("%.1f" % c for c in r["server cpu"]), wall * cores, cores),
        "",
        "| shard | master port | BF.CARD | share | capacity | sub-filters | MEMORY USAGE | bits per BF.CARD item "
        "| master's used_memory |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in shards:
        lines.append("| `%s` | %d | %d | %.4f %% | %d | %d | %.3f GB | %.2f | %.3f GB |" % (
            s["key"], s["port"], s["card"], 100 * s["card"] / sum(cards), s["capacity"], s["filters"],
            s["usage"] / 1e9, s["usage"] * 8 / s["card"], s["used_memory"] / 1e9))
    lines += [
        "",
        "Min / mean / max items per shard: %d / %.0f / %d; the binomial sigma of a shard's count is %.0f "
        "items, so a spread of a few sigma is the hash choosing shards evenly. Each shard is reserved for "
        "capacity/3 + 4 sigma (`Layout::sharded`), so the fullest stays within its capacity." % (
            min(cards), mean, max(cards), r["sigma"]),
        "",
        "Where the time goes: all three masters and the loader share the machine's %d cores (nothing "
        "pinned). During the %.1f s load the loader used %.1f core-seconds and the masters %s: %.1f of the "
        "%.1f available (%.0f %%), %s. The loader's share is the client's work per item (formatting, "
        "hashing each item to its shard, building and parsing per-shard commands), which the one-server "
        "run's bloomkit-loadgen avoids by replaying raw bytes; a master's includes its DRAM stalls. "
        "Loader peak RSS %.0f MB." % (
            cores, wall, r["loader cpu"], " + ".join("%.1f" % c for c in r["server cpu"]), used, wall * cores,
            100 * busy, "so CPU was the limit" if busy > 0.9 else "so part of the time went to waiting, not CPU",
            r["loader rss"] / 1e6),
    ]
    with open(opts.output, "a") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("appended to %s" % opts.output)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=float, default=1e9, help="items loaded; also the filter's capacity")
    parser.add_argument("--probes", type=float, default=1e6, help="never-added items looked up")
    parser.add_argument("--rate", type=float, default=0.01)
    parser.add_argument("--threads", type=int, default=4, help="loader threads, each with its own connection")
    parser.add_argument("--name", default="big", help="the sharded filter's name (shards {NAME:0}, ...)")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "SCALE-RESULTS.md"))
    parser.add_argument("--module", default=os.path.join(ROOT, "target", "release", "libbloomkit.so"))
    opts = parser.parse_args()
    opts.module = os.path.abspath(opts.module)  # the servers run in their own directories
    # SIGTERM runs the finally blocks too: no server is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
    directory = tempfile.mkdtemp(prefix="bloomkit-cluster-")
    ok = False
    try:
        result = run(opts, directory)
        ok = True
    finally:
        if ok:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            print("left %s (server logs, RDBs) for a look; remove it when done" % directory, file=sys.stderr)
    report(opts, result)


if __name__ == "__main__":
    main()
