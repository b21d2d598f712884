#!/usr/bin/env python3
"""One filter of a billion items, bloomkit beside RedisBloom 2.8.2.

For each module in turn (one at a time: each filter is 1.2 GB), on the same
redis-server binary: BF.RESERVE big 0.01 N, load N distinct items with
pipelined BF.MADD (bloomkit-loadgen --sequence), then report items/s,
MEMORY USAGE and bits per item against the 1.44 log2(1/p) bound, the
false-positive rate on never-added probes, BGSAVE time and the time a
restarted server takes to load the key. Appends a section to
bench/SCALE-RESULTS.md. Usage: bench/scale.sh [--items N] [--probes N].
"""
import argparse
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Conn, LOADGEN, ROOT, free_port, machine  # noqa: E402


class Server:
    """A redis-server on core 0 with one module, in a directory that outlives restarts."""

    def __init__(self, module, directory):
        self.module, self.dir, self.port, self.proc = module, directory, free_port(), None

    def start(self, deadline=3600):
        self.proc = subprocess.Popen(
            ["taskset", "-c", "0", "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--logfile", "server.log", "--loadmodule", self.module],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.time()
        while True:
            try:
                self.conn = Conn(self.port)
                if self.conn.call("PING") == "PONG":
                    return time.time() - started
            except (OSError, RuntimeError):  # not listening yet, or LOADING
                pass
            if time.time() - started > deadline or self.proc.poll() is not None:
                raise SystemExit("the server did not start; see %s/server.log" % self.dir)
            time.sleep(0.05)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def info_field(conn, section, field):
    for line in conn.call("INFO", section).decode().splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    raise KeyError(field)


def run(name, module, items, probes, rate):
    directory = tempfile.mkdtemp(prefix="bloomkit-scale-")
    server = Server(module, directory)
    server.start()
    c = server.conn
    try:
        c.call("BF.RESERVE", "big", str(rate), str(items))
        per_request = 1000
        requests = items // per_request
        t = time.time()
        out = subprocess.run(
            ["taskset", "-c", "1", LOADGEN, "--threads", "1", "--port", str(server.port), "--clients", "8",
             "--pipeline", "8", "--requests", str(requests), "--sequence", "0", "--prefix", "item:", "--"]
            + ["BF.MADD", "big"] + ["{item}"] * per_request,
            capture_output=True, text=True, check=True).stdout.split()
        load_seconds = time.time() - t
        if int(out[1]):
            raise SystemExit("%s: %s error replies while loading" % (name, out[1]))
        card = c.call("BF.CARD", "big")
        usage = c.call("MEMORY", "USAGE", "big")
        # Never-added probes, 1000 per BF.MEXISTS, pipelined 16 deep.
        found, sent, batch = 0, 0, 1000
        while sent < probes:
            depth = 0
            for _ in range(16):
                if sent >= probes:
                    break
                n = min(batch, probes - sent)
                c.send("BF.MEXISTS", "big", *[b"probe:%012d" % (sent + i) for i in range(n)])
                sent += n
                depth += 1
            for _ in range(depth):
                found += sum(c.read())
        t = time.time()
        c.call("BGSAVE")
        while info_field(c, "persistence", "rdb_bgsave_in_progress") != "0":
            if time.time() - t > 3600:
                raise SystemExit("BGSAVE did not finish within an hour")
            time.sleep(0.1)
        save_seconds = time.time() - t
        if info_field(c, "persistence", "rdb_last_bgsave_status") != "ok":
            raise SystemExit("%s: BGSAVE failed" % name)
        rdb_bytes = os.path.getsize(os.path.join(directory, "dump.rdb"))
        server.stop()
        load_rdb_seconds = server.start()
        assert server.conn.call("BF.CARD", "big") == card, "the restarted server holds another filter"
        return {
            "items/s": items / load_seconds, "load s": load_seconds, "card": card, "usage": usage,
            "bits/item": usage * 8 / items, "fp": found / probes, "save s": save_seconds,
            "rdb": rdb_bytes, "restart s": load_rdb_seconds,
        }
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=float, default=1e9)
    parser.add_argument("--probes", type=float, default=1e6)
    parser.add_argument("--rate", type=float, default=0.01)
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "SCALE-RESULTS.md"))
    parser.add_argument("--module", default=os.path.join(ROOT, "target", "release", "libbloomkit.so"))
    parser.add_argument("--redisbloom", default=os.path.join(ROOT, ".test-servers", "redisbloom.so"))
    opts = parser.parse_args()
    items, probes = int(opts.items), int(opts.probes)
    results = {}
    for name, module in (("bloomkit", opts.module), ("RedisBloom 2.8.2", opts.redisbloom)):
        print("%s: loading %d items" % (name, items), flush=True)
        results[name] = run(name, module, items, probes, opts.rate)
        print("%s: %s" % (name, results[name]), flush=True)
    bound = 1.44 * math.log2(1 / opts.rate)
    rows = [
        ("load (BF.MADD x1000, 8 connections x 8 deep)", "items/s", lambda r: "%.2fM items/s (%.0f s)" % (r["items/s"] / 1e6, r["load s"])),
        ("BF.CARD after loading", "", lambda r: "%d" % r["card"]),
        ("MEMORY USAGE", "", lambda r: "%.2f GB" % (r["usage"] / 1e9)),
        ("bits per item (bound 1.44 log2(1/p) = %.2f)" % bound, "", lambda r: "%.2f" % r["bits/item"]),
        ("false-positive rate, %d never-added probes (%g configured)" % (probes, opts.rate), "",
         lambda r: "%.4f %%" % (100 * r["fp"])),
        ("BGSAVE", "", lambda r: "%.1f s (%.2f GB RDB)" % (r["save s"], r["rdb"] / 1e9)),
        ("restart: server up with the key loaded", "", lambda r: "%.1f s" % r["restart s"]),
    ]
    with open(opts.output, "a") as out:
        out.write("\n## BF.RESERVE big %g %d on one server (%s)\n\n" % (opts.rate, items, time.strftime("%Y-%m-%d")))
        out.write("Machine: %s. Reproduce: `bench/scale.sh --items %d --probes %d`.\n\n" % (machine(), items, probes))
        out.write("| measurement | %s |\n|---|%s\n" % (" | ".join(results), "---:|" * len(results)))
        for label, _, fmt in rows:
            out.write("| %s | %s |\n" % (label, " | ".join(fmt(r) for r in results.values())))
    print("appended to %s" % opts.output)


if __name__ == "__main__":
    main()
