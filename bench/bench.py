#!/usr/bin/env python3
"""bloomkit against RedisBloom 2.8.2, side by side on one redis-server binary.

Two servers are started from the same binary, one with each module (three
with --reference: an older bloomkit build as well, see bench/run.sh
--reference-build). Every throughput row runs the load generator against
each in turn, for several rounds, the order turning every round, and
reports medians and the ratio bloomkit / RedisBloom (and bloomkit /
reference). The ceiling row is the same server's built-in EXISTS under the
same load: the most any module command can reach there, and a check that
the load generator is not the bottleneck. Usage: bench/run.sh [--quick]
[--only SECTION] [--reference-build REV] [--output FILE].
"""
import argparse
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Random items for "new" and "absent" rows are drawn from 10^12 values.
RANDOM_RANGE = 10**12


class Conn:
    """A minimal RESP client for setup and measurements outside redis-benchmark."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(max(1 << 20, n + 2 - len(self.buf)))
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, *args):
        self.send(*args)
        return self.read()

    def close(self):
        self.sock.close()


def used_memory(conn):
    """The server's used_memory, as INFO gives it."""
    fields = dict(l.split(":", 1) for l in conn.call("INFO", "memory").decode().split("\r\n") if ":" in l)
    return int(fields["used_memory"])


class Quiet:
    """Memory readings that no client's buffers disturb.

    A client's buffers grow with what it sends and receives (pipelined
    batches of a thousand items make a query buffer of hundreds of KB) and
    the server's timer shrinks them later, also those of a client that sits
    idle: tens of KB that come and go, as large as a small filter. So the
    server's own connection is closed while memory is measured, every fill
    and probe goes over a connection of its own (`bulk`) that is closed
    when done, and each reading is taken over a new connection once it is
    the only one left: every reading carries the same one fresh client."""

    def __init__(self, server):
        self.server = server

    def __enter__(self):
        self.server.conn.close()
        return self

    def __exit__(self, *exc):
        self.server.conn = Conn(self.server.port)
        return False

    def bulk(self):
        return Conn(self.server.port)

    def reading(self, *commands):
        """used_memory, then each command's reply, over a new connection
        once every other has gone."""
        conn = Conn(self.server.port)
        deadline = time.time() + 10
        while True:
            info = conn.call("INFO", "clients").decode()
            if int(info.split("connected_clients:")[1].split("\r\n")[0]) == 1:
                break
            if time.time() > deadline:
                raise RuntimeError("the server kept a closed connection for 10 s")
            time.sleep(0.001)
        replies = [used_memory(conn)] + [conn.call(*c) for c in commands]
        conn.close()
        return replies


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name, module, extra_modules=(), binary="redis-server", module_args=(), extra_args=(), cpu=0):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix="bloomkit-bench-")
        self.port = free_port()
        # Servers on core 0, the load generator on core 1 (bench/run.sh needs
        # two cores): neither steals the other's CPU mid-measurement.
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(cpu), binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--logfile", "server.log",
             "--enable-debug-command", "yes",
             # Each command's latency histogram (about 25 KB, made at its
             # first call) would count as the memory of the first filter
             # the memory benchmarks make.
             "--latency-tracking", "no", "--loadmodule", module, *module_args]
            + [arg for m in extra_modules for arg in ("--loadmodule", m)] + list(extra_args),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while True:
            try:
                self.conn = Conn(self.port)
                if self.conn.call("PING") == "PONG":
                    break
            except (OSError, RuntimeError):
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise SystemExit("%s did not start; see %s/server.log" % (name, self.dir))
            time.sleep(0.05)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


LOADGEN = os.path.join(ROOT, "target", "release", "bloomkit-loadgen")


def benchmark(server, command, requests, pipeline, clients=50, rand_range=None, prefix="", fresh=False, seed=42,
              pool=None, sequence=None):
    """Requests per second of one bloomkit-loadgen run ({item} = a random item)."""
    args = ["taskset", "-c", "1", LOADGEN, "--threads", "1", "--port", str(server.port), "--clients", str(clients),
            "--pipeline", str(pipeline), "--requests", str(requests), "--seed", str(seed)]
    if pool:
        args += ["--pool", str(pool)]
    if sequence is not None:
        args += ["--sequence", str(sequence)]
    if rand_range:
        args += ["--range", str(rand_range)]
    if prefix:
        args += ["--prefix", prefix]
    if fresh:
        args.append("--fresh")
    out = subprocess.run(args + ["--"] + command.split(), capture_output=True, text=True, check=True).stdout.split()
    rps, errors = float(out[0]), int(out[1])
    if errors:
        raise SystemExit("%s: %d error replies to %s" % (server.name, errors, command))
    return rps


def command_stats(conn, command):
    """(calls, usec) of `command` (lower case, e.g. "xf.merge") in INFO
    commandstats since the server started or CONFIG RESETSTAT; (0, 0) if none."""
    text = conn.call("INFO", "commandstats")
    text = text.decode() if isinstance(text, bytes) else text
    for line in text.split("\r\n"):
        if line.startswith("cmdstat_%s:" % command):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            return int(fields["calls"]), int(fields["usec"])
    return 0, 0


def alternating_medians(servers, rounds, measure):
    """Median per server of measure(server, round), run on each server in each
    round, the order turning every round (reversed every other round, and
    rotated, for three servers) so that no side always goes first into a
    machine that drifts."""
    results = {who: [] for who in servers}
    names = list(servers)
    for r in range(rounds):
        order = names[r // 2 % len(names):] + names[:r // 2 % len(names)]
        for who in (order if r % 2 == 0 else list(reversed(order))):
            results[who].append(measure(servers[who], r))
    return {who: statistics.median(v) for who, v in results.items()}


# The single-item writes of every family (the rows --only writes runs, and
# the rows a reference build is compared on): their names start with these.
WRITE_ROWS = ("BF.ADD new items", "CF.ADD new items", "CF.DEL", "CMS.INCRBY 1 item", "TOPK.ADD 1 item",
              "TDIGEST.ADD 1 value")


def is_single_write(name):
    return name.startswith(WRITE_ROWS)


def madd_command(key, n):
    return " ".join(["BF.MADD", key] + ["{item}"] * n)


def fill_hit_set(server, key, count, command="BF.MADD", after_key=()):
    """Adds items 000000000000 .. count-1: what the load generator's {item} draws with --range count."""
    c = server.conn
    for start in range(0, count, 1000):
        items = [b"%012d" % i for i in range(start, min(start + 1000, count))]
        c.send(command, key, *after_key, *items)
    for _ in range(0, count, 1000):
        c.read()


def scandump_all(conn, key):
    chunks, it = [], 0
    while True:
        nxt, data = conn.call("BF.SCANDUMP", key, it)
        if nxt == 0:
            return chunks
        chunks.append((nxt, data))
        it = nxt


def loadchunks(conn, key, chunks):
    for i, (it, data) in enumerate(chunks):
        conn.call("BF.LOADCHUNK", key, 1 if i == 0 else it, data)


def l3_bytes():
    """The last-level cache, from sysfs (0 if unknown)."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    for index in os.listdir(base) if os.path.isdir(base) else ():
        try:
            text = open(os.path.join(base, index, "size")).read().strip()
            units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
            value = int(text.rstrip("KMG")) * units.get(text[-1], 1)
        except (OSError, ValueError, IndexError):
            continue
        best = max(best, value)
    return best


def machine():
    model = "unknown CPU"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = int(open("/proc/meminfo").readline().split()[1]) // (1024 * 1024)
    redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()
    return "%s, %d cores, %d GiB, last-level cache %d MiB, Linux %s; %s" % (
        model, os.cpu_count(), mem, l3_bytes() >> 20, platform.release(), redis)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a short smoke run (checks that it works, not timings)")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "RESULTS.md"))
    parser.add_argument("--only", action="append", metavar="SECTION",
                        help="run only these throughput sections (ceiling, small, large, cuckoo, sketches, or "
                             "writes: every family's single-item writes, alone and pipelined), skipping the "
                             "ceiling, floor, memory and dump comparisons: for iterating")
    parser.add_argument("--reference", metavar="MODULE",
                        help="an older bloomkit build, measured beside the two on the throughput rows "
                             "(bench/run.sh --reference-build REV builds one)")
    parser.add_argument("--reference-name", default="reference", help="how the results name the reference build")
    parser.add_argument("--module", default=os.path.join(ROOT, "target", "release", "libbloomkit.so"))
    parser.add_argument("--redisbloom", default=os.path.join(ROOT, ".test-servers", "redisbloom.so"))
    parser.add_argument("--floor", default=os.path.join(ROOT, "target", "release", "bench-floor.so"))
    opts = parser.parse_args()

    quick = opts.quick
    rounds = 1 if quick else 5
    scale = 0.02 if quick else 1.0
    small_capacity = 10**5
    # The large filter is DRAM-bound only if it dwarfs the last-level cache:
    # at least three times its size (1.2 bytes per item at 1%, 1.38 with the
    # tighter first sub-filter of a scaling reserve: about 3.5x), and
    # never under 10^8 items. Its lookups draw hits from a hit set of 10^7
    # items and replay a pool as large as the run (bloomkit-loadgen --pool),
    # so that they touch lines all over it rather than the same 45 MB.
    large_capacity = 10**6 if quick else max(10**8, -(-3 * l3_bytes() * 10 // 12))
    large_hits = small_capacity if quick else 10**7
    if opts.only and "large" not in opts.only:
        large_capacity, large_hits = 10**6, small_capacity  # not measured: made quickly
    started = time.time()

    # A TERM (a timeout, a kill) unwinds like an error, so the finally below
    # still stops the servers (each holds gigabytes).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
    servers = {"bloomkit": Server("bloomkit", opts.module, [opts.floor])}
    if opts.reference:
        servers["reference"] = Server(opts.reference_name, opts.reference, [opts.floor])
    servers["RedisBloom"] = Server("RedisBloom", opts.redisbloom, [opts.floor])
    bk, rb = servers["bloomkit"], servers["RedisBloom"]
    # The ceiling, floor, memory and dump comparisons are bloomkit's against RedisBloom's only.
    pair = {"bloomkit": bk, "RedisBloom": rb}
    rows = []  # (section, name, bloomkit, redisbloom, unit, reference or None)

    def add(section, name, a, b, unit, ref=None):
        rows.append((section, name, a, b, unit, ref))
        ratio = a / b if b else float("nan")
        line = "%-58s bloomkit %14.1f  RedisBloom %14.1f  %s  ratio %.2f" % (name, a, b, unit, ratio)
        if ref is not None:
            line += "  %s %14.1f  ratio %.2f" % (opts.reference_name, ref, a / ref if ref else float("nan"))
        print(line, flush=True)

    try:
        # Filters: the small one fits in cache, the large one does not.
        print("preparing filters (large: %d items capacity, filled to 50%%)" % large_capacity, flush=True)
        for s in servers.values():
            s.conn.call("BF.RESERVE", "small", "0.01", small_capacity)
            fill_hit_set(s, "small", small_capacity)
            s.conn.call("SET", "plain", "x")
        bk.conn.call("BF.RESERVE", "large", "0.01", large_capacity)
        benchmark(bk, madd_command("large", 100), large_capacity // 2 // 100, 16, rand_range=RANDOM_RANGE, fresh=True)
        # The hit set: items 000000000000 .. large_hits-1, as fill_hit_set adds them.
        benchmark(bk, " ".join(["BF.MADD", "large"] + ["{item}"] * 1000), large_hits // 1000, 16, sequence=0)
        filled = bk.conn.call("BF.CARD", "large")
        if filled < large_capacity * 0.45:
            raise SystemExit("the large filter holds %d items, not about half of %d: the fill failed" % (filled, large_capacity))
        # The same bytes on both sides: the large filter moves by SCANDUMP/LOADCHUNK (measured below).
        t = time.time()
        chunks = scandump_all(bk.conn, "large")
        dump_seconds = time.time() - t
        total_mb = sum(len(d) for _, d in chunks) / 1e6
        for who, s in servers.items():
            if who != "bloomkit":
                loadchunks(s.conn, "large", chunks)
        t = time.time()
        chunks_rb = scandump_all(rb.conn, "large")
        dump_seconds_rb = time.time() - t
        assert [d for _, d in chunks_rb] == [d for _, d in chunks], "the large filters differ"
        del chunks_rb
        # LOADCHUNK is timed on equal terms: both servers hold "large" and load
        # "large-add" (RedisBloom 2.8.2 has no COPY), alternately, medians of
        # up to three rounds (one load varies by a factor of two here).
        def timed_load(server, _round):
            server.conn.call("DEL", "large-add")
            t = time.time()
            loadchunks(server.conn, "large-add", chunks)
            return time.time() - t
        load_seconds = alternating_medians(servers, min(rounds, 3), timed_load)
        del chunks
        print("large filter: %.0f MB, %d items" % (total_mb, bk.conn.call("BF.CARD", "large")), flush=True)

        # Throughput rows: (section, name, command, requests, pipeline, range, per request, prefix, fresh).
        n1, n32, nm = int(200_000 * scale), int(2_000_000 * scale), int(30_000 * scale)
        scenarios = [("ceiling", "EXISTS plain (built-in)", "EXISTS plain", n1, 1, None, 1, "", False, []),
                     ("ceiling", "EXISTS plain (built-in), pipeline 32", "EXISTS plain", n32, 32, None, 1, "", False, [])]
        # Lookups run on the pristine filters. Adds go to other keys, so that
        # they do not grow the filters the lookups measure: "small-add" is
        # made anew before each measurement (it scales as it would in
        # service), "large-add" is a copy of the large filter (made above by
        # LOADCHUNK) that absorbs every round's adds (a few % of its capacity).
        reset_small_add = [("DEL", "small-add"), ("BF.RESERVE", "small-add", "0.01", small_capacity)]
        for size, key, hits in (("small", "small", small_capacity), ("large", "large", large_hits)):
            add_key, setup = (("small-add", reset_small_add) if size == "small" else ("large-add", []))
            for depth, n in ((1, n1), (32, n32)):
                tag = "" if depth == 1 else ", pipeline 32"
                scenarios += [
                    (size, "BF.ADD new items%s" % tag, "BF.ADD %s {item}" % add_key, n, depth, RANDOM_RANGE, 1, "new:", True, setup),
                    (size, "BF.EXISTS hits%s" % tag, "BF.EXISTS %s {item}" % key, n, depth, hits, 1, "", False, []),
                    (size, "BF.EXISTS misses%s" % tag, "BF.EXISTS %s {item}" % key, n, depth, RANDOM_RANGE, 1, "miss:", False, []),
                ]
            scenarios += [
                (size, "BF.MADD 100 new items (items/s)", madd_command(add_key, 100), nm, 1, RANDOM_RANGE, 100, "new:", True, setup),
                (size, "BF.MEXISTS 100 items, hits (items/s)",
                 " ".join(["BF.MEXISTS", key] + ["{item}"] * 100), nm, 1, hits, 100, "", False, []),
            ]
        # Cuckoo filters (CF.*): "cf" holds the hit set; adds go to "cf-add"
        # and deletes to "cf-del", both made anew before each measurement
        # (deletes of items drawn with replacement: about 2/3 find their item).
        cf_capacity = small_capacity * 2
        for s in servers.values():
            s.conn.call("CF.RESERVE", "cf", cf_capacity)
            fill_hit_set(s, "cf", small_capacity, "CF.INSERT", ("ITEMS",))
        reset_cf_add = [("DEL", "cf-add"), ("CF.RESERVE", "cf-add", cf_capacity)]
        reset_cf_del = [("DEL", "cf-del"), ("CF.RESERVE", "cf-del", cf_capacity),
                        lambda srv: fill_hit_set(srv, "cf-del", small_capacity, "CF.INSERT", ("ITEMS",))]
        for depth, n in ((1, n1), (32, n32)):
            tag = "" if depth == 1 else ", pipeline 32"
            scenarios += [
                ("cuckoo", "CF.ADD new items%s" % tag, "CF.ADD cf-add {item}", min(n, small_capacity), depth, RANDOM_RANGE, 1, "new:", True, reset_cf_add),
                ("cuckoo", "CF.EXISTS hits%s" % tag, "CF.EXISTS cf {item}", n, depth, small_capacity, 1, "", False, []),
                ("cuckoo", "CF.EXISTS misses%s" % tag, "CF.EXISTS cf {item}", n, depth, RANDOM_RANGE, 1, "miss:", False, []),
                ("cuckoo", "CF.DEL%s" % tag, "CF.DEL cf-del {item}", min(n, small_capacity), depth, small_capacity, 1, "", False, reset_cf_del),
            ]
        scenarios += [
            ("cuckoo", "CF.INSERT 100 new items (items/s)", " ".join(["CF.INSERT", "cf-add", "ITEMS"] + ["{item}"] * 100),
             max(1, small_capacity // 100), 1, RANDOM_RANGE, 100, "new:", True, reset_cf_add),
            ("cuckoo", "CF.MEXISTS 100 items, hits (items/s)", " ".join(["CF.MEXISTS", "cf"] + ["{item}"] * 100),
             nm, 1, small_capacity, 100, "", False, []),
        ]
        # Sketches: "cms", "topk" and "td" hold a stream already counted;
        # writes go to "-add" keys made anew before each measurement. The
        # last t-digest row reads after every write (one script per pair, the
        # same on both modules): bloomkit's reads never compress in place but
        # read a compressed copy made after each write, RedisBloom's compress.
        td_fill = 100_000 if not quick else 2_000
        for s in servers.values():
            s.conn.call("CMS.INITBYPROB", "cms", "0.001", "0.01")
            s.conn.call("TOPK.RESERVE", "topk", "50", "2000", "7", "0.925")
            s.conn.call("TDIGEST.CREATE", "td", "COMPRESSION", "100")
            for start in range(0, td_fill, 1000):
                values = [str((i * 7919) % 100_003) for i in range(start, start + 1000)]
                s.conn.call("TDIGEST.ADD", "td", *values)
                s.conn.call("CMS.INCRBY", "cms", *[x for v in values[:100] for x in (v, "1")])
                s.conn.call("TOPK.ADD", "topk", *values[:100])
        reset_cms = [("DEL", "cms-add"), ("CMS.INITBYPROB", "cms-add", "0.001", "0.01")]
        reset_topk = [("DEL", "topk-add"), ("TOPK.RESERVE", "topk-add", "50", "2000", "7", "0.925")]
        reset_td = [("DEL", "td-add"), ("TDIGEST.CREATE", "td-add", "COMPRESSION", "100")]
        read_after_write = ("EVAL redis.call('TDIGEST.ADD',KEYS[1],ARGV[1]);"
                            "return(redis.call('TDIGEST.QUANTILE',KEYS[1],'0.5','0.99')) 1 td-add {item}")
        sketch_range = 10**6
        for depth, n in ((1, n1), (32, n32)):
            tag = "" if depth == 1 else ", pipeline 32"
            scenarios += [
                ("sketches", "CMS.INCRBY 1 item%s" % tag, "CMS.INCRBY cms-add {item} 1", n, depth, sketch_range, 1, "", False, reset_cms),
                ("sketches", "CMS.QUERY 1 item%s" % tag, "CMS.QUERY cms {item}", n, depth, sketch_range, 1, "", False, []),
                ("sketches", "TOPK.ADD 1 item%s" % tag, "TOPK.ADD topk-add {item}", n, depth, sketch_range, 1, "", False, reset_topk),
                ("sketches", "TOPK.QUERY 1 item%s" % tag, "TOPK.QUERY topk {item}", n, depth, sketch_range, 1, "", False, []),
                ("sketches", "TDIGEST.ADD 1 value%s" % tag, "TDIGEST.ADD td-add {item}", n, depth, sketch_range, 1, "", False, reset_td),
                ("sketches", "TDIGEST.QUANTILE 0.5 0.99%s" % tag, "TDIGEST.QUANTILE td 0.5 0.99", n, depth, None, 1, "", False, []),
                ("sketches", "TDIGEST.CDF 1 value%s" % tag, "TDIGEST.CDF td {item}", n, depth, sketch_range, 1, "", False, []),
            ]
        scenarios += [
            ("sketches", "CMS.INCRBY 100 items (items/s)", " ".join(["CMS.INCRBY", "cms-add"] + ["{item} 1"] * 100),
             nm, 1, sketch_range, 100, "", False, reset_cms),
            ("sketches", "CMS.QUERY 100 items (items/s)", " ".join(["CMS.QUERY", "cms"] + ["{item}"] * 100),
             nm, 1, sketch_range, 100, "", False, []),
            ("sketches", "TOPK.ADD 100 items (items/s)", " ".join(["TOPK.ADD", "topk-add"] + ["{item}"] * 100),
             nm, 1, sketch_range, 100, "", False, reset_topk),
            ("sketches", "TOPK.QUERY 100 items (items/s)", " ".join(["TOPK.QUERY", "topk"] + ["{item}"] * 100),
             nm, 1, sketch_range, 100, "", False, []),
            ("sketches", "TDIGEST.ADD 100 values (items/s)", " ".join(["TDIGEST.ADD", "td-add"] + ["{item}"] * 100),
             nm, 1, sketch_range, 100, "", False, reset_td),
            ("sketches", "TDIGEST.CDF 100 values (items/s)", " ".join(["TDIGEST.CDF", "td"] + ["{item}"] * 100),
             nm, 1, sketch_range, 100, "", False, []),
            ("sketches", "TDIGEST.ADD then QUANTILE, script (pairs/s)", read_after_write,
             n1 // 2, 1, sketch_range, 1, "", False, reset_td),
        ]
        if opts.only:
            scenarios = [s for s in scenarios if s[0] in opts.only or ("writes" in opts.only and is_single_write(s[1]))]
        for section, name, command, n, depth, rand_range, per_request, prefix, fresh, setup in scenarios:
            def measure(server, r):
                for cmd in setup:
                    if callable(cmd):
                        cmd(server)
                    else:
                        server.conn.call(*cmd)
                rps = benchmark(server, command, n, depth, rand_range=rand_range, prefix=prefix,
                                fresh=fresh, seed=100 + r, pool=n if section == "large" else None)
                return rps * per_request
            medians = alternating_medians(servers, rounds, measure)
            unit = "items/s" if per_request > 1 else "ops/s"
            add(section, name, medians["bloomkit"], medians["RedisBloom"], unit, medians.get("reference"))

        # Each module command against the built-in EXISTS, measured back to
        # back on the same server in each round, so that drift in the
        # machine's speed between rows does not bend the ratio.
        ceiling_ratios = {}
        for name, command, rand_range, prefix in () if opts.only else (
                ("BF.EXISTS hits, small filter", "BF.EXISTS small {item}", small_capacity, ""),
                ("BF.EXISTS misses, small filter", "BF.EXISTS small {item}", RANDOM_RANGE, "miss:")):
            per_server = {}
            for who, srv in pair.items():
                ratios = []
                for r in range(rounds):
                    top = benchmark(srv, "EXISTS plain", n32, 32, seed=300 + r)
                    ratios.append(benchmark(srv, command, n32, 32, rand_range=rand_range, prefix=prefix, seed=300 + r) / top)
                per_server[who] = statistics.median(ratios)
            ceiling_ratios[name] = (per_server["bloomkit"], per_server["RedisBloom"])
            print("%-58s bloomkit %.2f of ceiling, RedisBloom %.2f" % (name, per_server["bloomkit"], per_server["RedisBloom"]), flush=True)

        # The same against the floor of a module command (bench/floor.c:
        # open the key, reply): what each module's own path costs.
        floor_ratios = {}
        x100 = " ".join(["{item}"] * 100)
        floor_rows = [
            # (name, command, floor command, requests, pipeline, range, prefix, pool, fresh, setup)
            ("BF.EXISTS hits, small filter", "BF.EXISTS small {item}", "FLOOR.EXISTS small {item}",
             n32, 32, small_capacity, "", None, False, []),
            ("BF.EXISTS misses, small filter", "BF.EXISTS small {item}", "FLOOR.EXISTS small {item}",
             n32, 32, RANDOM_RANGE, "miss:", None, False, []),
            ("BF.EXISTS hits, large filter", "BF.EXISTS large {item}", "FLOOR.EXISTS large {item}",
             n32, 32, large_hits, "", n32, False, []),
            ("BF.MEXISTS 100 items, hits, small filter", "BF.MEXISTS small " + x100, "FLOOR.MEXISTS small " + x100,
             nm, 1, small_capacity, "", None, False, []),
            ("BF.MEXISTS 100 items, hits, large filter", "BF.MEXISTS large " + x100, "FLOOR.MEXISTS large " + x100,
             nm, 1, large_hits, "", nm, False, []),
            ("BF.MADD 100 new items, small filter", "BF.MADD small-add " + x100, "FLOOR.MADD small-add " + x100,
             nm, 1, RANDOM_RANGE, "new:", None, True, reset_small_add),
        ]
        # The sketches' pipelined and batch rows against floors of their own
        # shapes (bench/floor.c: the same arguments parsed, the same replies):
        # the most any module could reach on RedisBloom in those rows.
        sketch_floor_rows = [] if opts.only and "sketches" not in opts.only else [
            ("CMS.INCRBY 1 item, pipeline 32", "CMS.INCRBY cms-add {item} 1", "FLOOR.INCRBY cms-add {item} 1",
             n32, 32, sketch_range, "", None, False, reset_cms),
            ("CMS.QUERY 1 item, pipeline 32", "CMS.QUERY cms {item}", "FLOOR.MEXISTS cms {item}",
             n32, 32, sketch_range, "", None, False, []),
            ("TOPK.ADD 1 item, pipeline 32", "TOPK.ADD topk-add {item}", "FLOOR.MADDNIL topk-add {item}",
             n32, 32, sketch_range, "", None, False, reset_topk),
            ("TOPK.QUERY 1 item, pipeline 32", "TOPK.QUERY topk {item}", "FLOOR.MEXISTS topk {item}",
             n32, 32, sketch_range, "", None, False, []),
            ("TDIGEST.ADD 1 value, pipeline 32", "TDIGEST.ADD td-add {item}", "FLOOR.ADDVALUES td-add {item}",
             n32, 32, sketch_range, "", None, False, reset_td),
            ("TDIGEST.QUANTILE 0.5 0.99, pipeline 32", "TDIGEST.QUANTILE td 0.5 0.99", "FLOOR.MDOUBLES td 0.5 0.99",
             n32, 32, None, "", None, False, []),
            ("TDIGEST.CDF 1 value, pipeline 32", "TDIGEST.CDF td {item}", "FLOOR.MDOUBLES td {item}",
             n32, 32, sketch_range, "", None, False, []),
            ("CMS.INCRBY 100 items", " ".join(["CMS.INCRBY", "cms-add"] + ["{item} 1"] * 100),
             " ".join(["FLOOR.INCRBY", "cms-add"] + ["{item} 1"] * 100), nm, 1, sketch_range, "", None, False, reset_cms),
            ("CMS.QUERY 100 items", "CMS.QUERY cms " + x100, "FLOOR.MEXISTS cms " + x100,
             nm, 1, sketch_range, "", None, False, []),
            ("TOPK.ADD 100 items", "TOPK.ADD topk-add " + x100, "FLOOR.MADDNIL topk-add " + x100,
             nm, 1, sketch_range, "", None, False, reset_topk),
            ("TOPK.QUERY 100 items", "TOPK.QUERY topk " + x100, "FLOOR.MEXISTS topk " + x100,
             nm, 1, sketch_range, "", None, False, []),
            ("TDIGEST.ADD 100 values", "TDIGEST.ADD td-add " + x100, "FLOOR.ADDVALUES td-add " + x100,
             nm, 1, sketch_range, "", None, False, reset_td),
            ("TDIGEST.CDF 100 values", "TDIGEST.CDF td " + x100, "FLOOR.MDOUBLES td " + x100,
             nm, 1, sketch_range, "", None, False, []),
        ]
        sketch_floor_names = {row[0] for row in sketch_floor_rows}
        for name, command, floor_command, n, depth, rand_range, prefix, pool, fresh, setup in \
                tuple(() if opts.only else floor_rows) + tuple(sketch_floor_rows):
            per_server = {}
            for who, srv in pair.items():
                ratios = []
                # Three rounds for the sketch rows: the section is long already.
                for r in range(min(rounds, 3) if name in sketch_floor_names else rounds):
                    for cmd in setup:
                        srv.conn.call(*cmd)
                    floor = benchmark(srv, floor_command, n, depth, rand_range=rand_range, prefix=prefix, fresh=fresh,
                                      seed=400 + r, pool=pool)
                    ratios.append(benchmark(srv, command, n, depth, rand_range=rand_range, prefix=prefix, fresh=fresh,
                                            seed=400 + r, pool=pool) / floor)
                per_server[who] = statistics.median(ratios)
            floor_ratios[name] = (per_server["bloomkit"], per_server["RedisBloom"])
            print("%-58s bloomkit %.2f of floor, RedisBloom %.2f" % (name, per_server["bloomkit"], per_server["RedisBloom"]), flush=True)

        # Memory and false-positive rate: same bytes by design, measured anyway.
        for s in servers.values():
            s.conn.call("BF.RESERVE", "mem", "0.01", 100_000)
        for fill, label in () if opts.only else ((100_000, "100%"), (400_000, "400% (scaled)")):
            per_server = {}
            for who, s in pair.items():
                have = s.conn.call("BF.CARD", "mem")
                for start in range(have, fill, 1000):
                    s.conn.send("BF.MADD", "mem", *[b"m%d" % i for i in range(start, min(start + 1000, fill))])
                for _ in range(have, fill, 1000):
                    s.conn.read()
                usage = s.conn.call("MEMORY", "USAGE", "mem")
                probes = int(1_000_000 * (0.05 if quick else 1))
                hits = 0
                for start in range(0, probes, 1000):
                    s.conn.send("BF.MEXISTS", "mem", *[b"absent%d" % i for i in range(start, start + 1000)])
                for _ in range(0, probes, 1000):
                    hits += sum(s.conn.read())
                per_server[who] = (usage / s.conn.call("BF.CARD", "mem"), hits / probes)
            add("memory", "bytes per item at %s" % label, per_server["bloomkit"][0], per_server["RedisBloom"][0], "bytes")
            add("memory", "false-positive rate at %s (1%% configured)" % label,
                per_server["bloomkit"][1] * 100, per_server["RedisBloom"][1] * 100, "%")

        # --only measures some sections and still writes them (nothing else).
        if not opts.only:
            add("dump", "SCANDUMP of the large filter", total_mb / dump_seconds, total_mb / dump_seconds_rb, "MB/s")
            add("dump", "LOADCHUNK into an empty key", total_mb / load_seconds["bloomkit"], total_mb / load_seconds["RedisBloom"], "MB/s")
            for s in servers.values():
                for key in ("small", "small-add", "large-add", "mem"):
                    s.conn.call("DEL", key)
            save, reload_ = {}, {}
            for who, s in pair.items():
                t = time.time()
                s.conn.call("SAVE")
                save[who] = time.time() - t
                t = time.time()
                s.conn.call("DEBUG", "RELOAD", "NOSAVE")  # loads the file SAVE just wrote
                reload_[who] = time.time() - t
            add("dump", "RDB save of the large filter (seconds)", save["bloomkit"], save["RedisBloom"], "s")
            add("dump", "RDB load of the large filter (seconds)", reload_["bloomkit"], reload_["RedisBloom"], "s")
    finally:
        for s in servers.values():
            s.stop()

    elapsed = time.time() - started
    with open(opts.output, "w") as out:
        out.write("# bloomkit vs RedisBloom 2.8.2\n\n")
        invocation = os.environ.get("BENCH_INVOCATION", "bench/run.sh" + (" --quick" if quick else ""))
        out.write("Generated by `%s` on %s in %.0f s.\n\n" % (invocation, time.strftime("%Y-%m-%d"), elapsed))
        out.write("Machine: %s.\n\n" % machine())
        out.write("Both modules in two servers of the same binary (three with a reference), measured alternately "
                  "(%d rounds, medians), "
                  "50 clients on loopback, bloomkit-loadgen (crates/bloomkit-bench) as the load generator. Ratio = bloomkit / RedisBloom "
                  "(for seconds, RedisBloom / bloomkit, so that above 1 is always better). The two ceiling rows run the "
                  "same built-in command on both servers: their ratio shows this machine's noise. "
                  "\"small\" is a cache-resident filter; \"large\" a filter of %.0f MB (at least three times the "
                  "last-level cache) with lookups all over it, at the default `bf.huge-pages no`. Where the time "
                  "goes, and what huge pages change: bench/PROFILE.md.\n\n" % (rounds, total_mb))
        if opts.reference:
            out.write("The reference, `%s`, is an older bloomkit build (bench/run.sh --reference-build) in a third "
                      "server of the same binary, measured in the same rounds; its last column is bloomkit / %s.\n\n"
                      % (opts.reference_name, opts.reference_name))
        section = None
        for sec, name, a, b, unit, ref in rows:
            fmt = "%.4f" if unit in ("%", "s") else "%.2f" if unit == "bytes" else "%.0f"
            if sec != section:
                section = sec
                extra = (" %s | ratio to %s |" % (opts.reference_name, opts.reference_name), "---:|---:|") \
                    if opts.reference else ("", "")
                out.write("\n## %s\n\n| measurement | bloomkit | RedisBloom | ratio |%s\n|---|---:|---:|---:|%s\n"
                          % (sec, extra[0], extra[1]))
            ratio = (b / a if unit == "s" else a / b) if a and b else float("nan")
            line = ("| %s | " + fmt + " %s | " + fmt + " %s | %.2f |") % (name, a, unit, b, unit, ratio)
            if opts.reference:
                line += (" " + fmt + " %s | %.2f |") % (ref, unit, a / ref) if ref else " | |"
            out.write(line + "\n")
        out.write("\n## Against the ceiling (same server, built-in EXISTS, pipeline 32, measured back to back)\n\n")
        out.write("| command | bloomkit / ceiling | RedisBloom / ceiling |\n|---|---:|---:|\n")
        for name, (a, b) in ceiling_ratios.items():
            out.write("| %s | %.2f | %.2f |\n" % (name, a, b))
        out.write("\n## Against the floor (same server, measured back to back)\n\n"
                  "The floor commands of bench/floor.c open the key and reply (and a write replicates) without any "
                  "Bloom work: `FLOOR.EXISTS` at pipeline 32, `FLOOR.MEXISTS`/`FLOOR.MADD` with 100 items; for the "
                  "sketch rows, floors of each command's shape (its arguments parsed, its replies: `FLOOR.INCRBY`, "
                  "`FLOOR.MADDNIL`, `FLOOR.ADDVALUES`, `FLOOR.MDOUBLES`, `FLOOR.MEXISTS`). The last "
                  "column, floor / RedisBloom, is the most any module could gain on RedisBloom in that row on this "
                  "server: what the server spends around the command is not the module's to cut.\n\n")
        out.write("| command | bloomkit / floor | RedisBloom / floor | most any module could reach (x RedisBloom) |\n"
                  "|---|---:|---:|---:|\n")
        for name, (a, b) in floor_ratios.items():
            out.write("| %s | %.2f | %.2f | %.2f |\n" % (name, a, b, 1 / b if b else float("nan")))
    print("wrote %s (%.0f s)" % (opts.output, elapsed))


if __name__ == "__main__":
    main()
