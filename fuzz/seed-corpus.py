#!/usr/bin/env python3
"""Writes seed corpora for the fuzz targets from the RedisBloom 2.8.2 vectors."""
import json, os, struct

here = os.path.dirname(os.path.abspath(__file__))
vectors = json.load(open(os.path.join(here, "..", "crates", "bloomkit-core", "tests", "fixtures", "redisbloom-2.8.2.json")))

def put(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, name), "wb").write(data)

def file_format(header, arrays):
    import zlib
    body = b"BLOOMKIT" + struct.pack("<II", 1, len(header)) + header + b"".join(arrays)
    return body + struct.pack("<I", zlib.crc32(body) & 0xffffffff)

for case in vectors["cases"]:
    name = case["name"]
    stream = case["scandump"]
    header = bytes.fromhex(stream[0]["hex"])
    chunks = [(c["iter"], bytes.fromhex(c["hex"])) for c in stream[1:] if c["iter"] != 0]
    put("scandump_header", name, header)
    packed = bytes([min(len(header), 255)]) + header[:255]
    for it, data in chunks:
        packed += struct.pack("<q", it) + bytes([min(len(data), 255)]) + data[:255]
    put("scandump_chunks", name, packed)
    put("filter_file", name, file_format(header, [d for _, d in chunks]))
    # The RDB fields of the same filter, in the FieldStream encoding (tag + 8 bytes).
    h = struct.unpack_from("<QIII", header)
    fields = b"U" + struct.pack("<Q", h[0]) + b"U" + struct.pack("<Q", h[1]) + b"U" + struct.pack("<Q", h[2]) + b"U" + struct.pack("<Q", h[3])
    for i in range(h[1]):
        link = struct.unpack_from("<QQQddIQB", header, 20 + 53 * i)
        nbytes, bits, items, error, bpe, hashes, capacity, n2 = link
        data = b"".join(d for _, d in chunks)[:nbytes]
        fields += b"U" + struct.pack("<Q", capacity) + b"D" + struct.pack("<d", error) + b"U" + struct.pack("<Q", hashes)
        fields += b"D" + struct.pack("<d", bpe) + b"U" + struct.pack("<Q", bits) + b"U" + struct.pack("<Q", n2)
        fields += b"B" + struct.pack("<Q", len(data)) + data + b"U" + struct.pack("<Q", items)
    put("rdb_fields", name, b"\x04" + fields)
    reserve = case["reserve"]
    if reserve:
        words = [reserve["error_rate"], str(reserve["capacity"])] + reserve["options"]
        put("command_args", name, b"\x00".join(w.encode() for w in ["k"] + words))
for i, line in enumerate(["k CAPACITY 10 ERROR 0.1 EXPANSION 3 NONSCALING ITEMS a b",
                          "k ERR 0.01 Cx 5 NOCREATE Ifoo a", "k 0.001 100 EXPANSION 4", "k 1e-300 1 NONSCALING"]):
    put("command_args", "line%d" % i, b"\x00".join(w.encode() for w in line.split(" ")))
# Expandable filters: bloomkit 0.1's values (encoding 0, mode 4; DUMP, mode
# 1) and this release's (encoding 1, mode 0), as the core tests keep them.
xf_data = os.path.join(here, "..", "crates", "bloomkit-core", "tests", "data")
for enc, mode in (("xf-v0", 4), ("xf-v1", 0)):
    folder = os.path.join(xf_data, enc)
    for f in sorted(os.listdir(folder)):
        stem, ext = os.path.splitext(f)
        data = open(os.path.join(folder, f), "rb").read()
        if ext == ".rdb" and len(data) < 60000:
            put("xf_codecs", "%s-%s" % (enc, stem), bytes([mode]) + data)
        elif ext == ".dump" and len(data) < 60000:
            put("xf_codecs", "%s-%s-dump" % (enc, stem), bytes([1]) + data)
print("seed corpora written under", os.path.join(here, "corpus"))

# Sliding-window states: a count window and a time window, empty and with bits.
def apbf(k, l, slice_bits, generation, error, window_ms, front, in_gen, started, gens, fill):
    header = b"BKAPBF01" + struct.pack("<QQQQdQQQQQ", k, l, slice_bits, generation, error, window_ms, front, in_gen, started, gens)
    counts = b"".join(struct.pack("<Q", 3 * i) for i in range(k + l))
    return header + bytes([fill]) * (((slice_bits + 7) // 8) * (k + l)) + counts

put("apbf_state", "count-empty", apbf(3, 5, 64, 10, 0.01, 0, 0, 0, 0, 0, 0))
put("apbf_state", "time-filled", apbf(4, 9, 100, 7, 0.001, 600000, 5, 3, 1700000000000, 12, 0x5a))

def apbf2(k, l, lv, slice_bits, generation, error, window_ms, tick, front, in_gen, started, gens, clock, early, fill):
    header = b"BKAPBF02" + struct.pack("<QQQQdQQQQQQQQQ", k, l, slice_bits, generation, error, window_ms,
                                      front, in_gen, started, gens, lv, tick, clock, early)
    counts = b"".join(struct.pack("<Q", 3 * i) for i in range(k + l))
    times = b"".join(struct.pack("<Q", max(0, started - 1000 * i)) for i in range(k + l))
    return header + bytes([fill]) * (((slice_bits + 7) // 8) * (k + l)) + counts + times

put("apbf_state", "v2-count", apbf2(3, 5, 5, 64, 10, 0.01, 0, 0, 0, 0, 0, 0, 0, 0, 0))
put("apbf_state", "v2-time", apbf2(4, 9, 5, 100, 7, 0.001, 600000, 120000, 5, 3, 1700000000000, 12, 1700000000500, 2, 0x5a))
for i, line in enumerate(["0.01 1000 COUNT", "0.001 100000 TIME 600", "1e-9 99999999999 TIME 1", "0.5 1 count",
                          "0.01 1000000000000 COUNT", "0.01 10 TIME 315360000"]):
    put("apbf_args", "line%d" % i, b"\x00".join(w.encode() for w in line.split(" ")))

# Cuckoo filters: a header with chunks (mode 0) and RDB fields at version 4 (mode 1).
def cf_header(items, buckets, deletes, filters, bs, mi, exp):
    return struct.pack("<QQQQHHH", items, buckets, deletes, filters, bs, mi, exp)
for name, (buckets, filters, bs, exp) in {"one": (8, 1, 2, 1), "grown": (4, 3, 2, 2), "fixed": (16, 1, 4, 0)}.items():
    sizes = [buckets * (exp ** i if exp else 1) * bs for i in range(filters)]
    packed = b"\x00" + cf_header(5, buckets, 1, filters, bs, 20, exp)
    pos = 1
    for n in sizes:
        pos += n
        packed += struct.pack("<q", pos) + bytes([n]) + bytes((7 * i + 1) % 256 for i in range(n))
    put("cuckoo_codecs", "chunks-" + name, packed)
    fields = b"".join(b"U" + struct.pack("<Q", v) for v in [filters, buckets, 5, 1, bs, 20, exp])
    for i, n in enumerate(sizes):
        fields += b"U" + struct.pack("<Q", n // bs) + b"B" + struct.pack("<Q", n) + bytes(n)
    put("cuckoo_codecs", "rdb-" + name, bytes([1 | (4 << 1)]) + fields)

# Top-K: RedisBloom 2.8.2's DUMP of `TOPK.RESERVE tk 2 8 2 0.9; TOPK.ADD tk a b a`
# (mode 1), its RDB fields (mode 0) and RESERVE arguments (mode 2).
topk_dump = bytes.fromhex(
    "07814e8a4af9360f100002020208020204cdccccccccccec3f05c3274080010000e015000497eddf2a01e002220417f53cf202e0020fc000e00727c000e00f2f800001000005c327300f97eddf2a01000000687727bd097f0000400b40000317f53cf2400b01787a80170002401420000502620005026100000a002056ccf039905a6e")
put("topk_codecs", "dump-vector", b"\x01" + topk_dump)
buckets = bytearray(128)
struct.pack_into("<II", buckets, 6 * 8, 0xF23CF517, 2)
struct.pack_into("<II", buckets, 12 * 8, 0xF23CF517, 2)
struct.pack_into("<II", buckets, 4 * 8, 0x2ADFED97, 1)
struct.pack_into("<II", buckets, 9 * 8, 0x2ADFED97, 1)
heap = struct.pack("<IIQII", 0x2ADFED97, 1, 0, 1, 0) + struct.pack("<IIQII", 0xF23CF517, 1, 0, 2, 0)
fields = b"".join(b"U" + struct.pack("<Q", v) for v in [2, 8, 2]) + b"D" + struct.pack("<d", 0.9)
for blob in [bytes(buckets), heap, b"b\x00", b"a\x00"]:
    fields += b"B" + struct.pack("<Q", len(blob)) + blob
put("topk_codecs", "rdb-vector", b"\x00" + fields)
put("topk_codecs", "args-reserve", b"\x02" + b"\xff".join([b"TOPK.RESERVE", b"k", b"3", b"16", b"4", b"0.5"]))

# valkey-bloom (bloomfltr): the DUMP payload valkey-bloom 1.0 wrote for f3
# (mode 1, without its version and checksum, which the target re-seals), the
# BF.LOAD blobs its AOF rewrite wrote (mode 2), and its BF.INSERT options (mode 3).
vb_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "bloomkit-core", "tests", "fixtures", "valkey-bloom")
f3 = bytes.fromhex(open(os.path.join(vb_dir, "f3.dump.hex")).read().strip())
put("vbloom_codecs", "dump-f3", b"\x01" + f3[:-10])
base = open(os.path.join(vb_dir, "appendonlydir", "appendonly.aof.2.base.aof"), "rb").read()
args, pos = [], 0
while pos < len(base):
    if base[pos:pos + 1] == b"*":
        end = base.index(b"\r\n", pos)
        count, pos, cmd = int(base[pos + 1:end]), end + 2, []
        for _ in range(count):
            end = base.index(b"\r\n", pos)
            n = int(base[pos + 1:end])
            cmd.append(base[end + 2:end + 2 + n])
            pos = end + 2 + n + 2
        args.append(cmd)
    else:
        pos += 1
for cmd in args:
    if cmd[0].upper() == b"BF.LOAD":
        put("vbloom_codecs", "blob-" + cmd[1].decode(), b"\x02" + cmd[2])
put("vbloom_codecs", "args-insert", b"\x03" + b" ".join([b"BF.INSERT", b"k", b"CAPACITY", b"50", b"ERROR", b"0.01", b"TIGHTENING", b"0.5", b"EXPANSION", b"2", b"VALIDATESCALETO", b"1000", b"ITEMS", b"a"]))
