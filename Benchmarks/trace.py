#!/usr/bin/env python3
"""Hit ratio at a fixed budget: a synthetic trace, its origin and its replaying client.

Used by Benchmarks/trace.sh, which runs the same trace through Larder and the peers.

  trace.py generate --dir D [--seed 1 --objects 200000 --requests 1000000 ...]
      D/sizes.u32: the size of each object (lognormal, median 8 KiB, sigma 2, at most 50 MiB);
      D/trace.u32: the object of each request (Zipf(0.9) over the objects, in a seeded order);
      D/blob: the bytes every body is cut from; D/trace.json: the parameters and totals.
  trace.py origin --dir D --port P
      serves GET /t/<id> with that object's size, Cache-Control: max-age=86400, by sendfile;
      GET /__stats answers {"requests": n, "bytes": n} (bodies of /t/ only).
  trace.py simulate --dir D [--cache-bytes N ...] [--min-bytes N ...] [--window-divisor 20]
      the ratios plain LRU and LRU behind Larder's doorkeeper reach on the trace, without a proxy
      (how cache.admission's defaults were chosen: docs/PERFORMANCE.md).
  trace.py replay --dir D --proxy HOST:PORT --origin-port P [--connections 8 --processes 2]
      sends every request of the trace, in order, over keep-alive connections to the proxy in
      absolute form; checks each body's length and its first bytes; prints a JSON summary.

The sizes and the trace depend only on the parameters and the seed (Python's random module,
which is stable across versions for random() and lognormvariate()).
"""

import argparse
import array
import bisect
import collections
import email.utils
import itertools
import json
import math
import os
import random
import socket
import sys
import threading
import time

PREFIX_CHECK = 32  # bytes of each body compared with the blob
BLOB_SLACK = 1 << 16  # bodies start at an offset below this, so two objects differ


def body_offset(object_id):
    return (object_id * 2654435761) % BLOB_SLACK


def load_u32(path):
    values = array.array("I")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    return values


def generate(args):
    os.makedirs(args.dir, exist_ok=True)
    rng = random.Random(args.seed)
    cap = args.max_size
    sizes = array.array("I", (min(cap, max(1, int(rng.lognormvariate(math.log(args.median), args.sigma))))
                              for _ in range(args.objects)))
    # Zipf(s): the object of rank k is asked for with weight k^-s. Ranks are given to objects in
    # a seeded random order, so popularity and size are independent.
    ranks = list(range(args.objects))
    rng.shuffle(ranks)
    cumulative, total = [], 0.0
    for k in range(1, args.objects + 1):
        total += k ** -args.zipf
        cumulative.append(total)
    trace = array.array("I", (ranks[bisect.bisect_left(cumulative, rng.random() * total)]
                              for _ in range(args.requests)))
    with open(os.path.join(args.dir, "sizes.u32"), "wb") as f:
        sizes.tofile(f)
    with open(os.path.join(args.dir, "trace.u32"), "wb") as f:
        trace.tofile(f)
    with open(os.path.join(args.dir, "blob"), "wb") as f:
        f.write(random.Random(args.seed + 1).randbytes(cap + BLOB_SLACK))
    distinct = set(trace)
    summary = {
        "seed": args.seed, "objects": args.objects, "requests": args.requests,
        "zipf": args.zipf, "median": args.median, "sigma": args.sigma, "max_size": cap,
        "object_bytes": sum(sizes), "distinct_requested": len(distinct),
        "distinct_bytes": sum(sizes[i] for i in distinct),
        "request_bytes": sum(sizes[i] for i in trace),
        "largest": max(sizes),
    }
    with open(os.path.join(args.dir, "trace.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes = 0

    def add(self, size):
        with self.lock:
            self.requests += 1
            self.bytes += size


def read_head(sock, pending):
    """Returns (head bytes, leftover bytes) or (None, b"") when the peer closed cleanly."""
    while b"\r\n\r\n" not in pending:
        chunk = sock.recv(65536)
        if not chunk:
            if pending:
                raise ConnectionError("connection closed inside a head")
            return None, b""
        pending += chunk
    head, _, rest = pending.partition(b"\r\n\r\n")
    return head, rest


def serve_connection(conn, sizes, blob_fd, counters):
    pending = b""
    try:
        while True:
            head, pending = read_head(conn, pending)
            if head is None:
                return
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request_line.split(" ")
            target = parts[1] if len(parts) == 3 else ""
            if target.startswith("http://"):
                target = "/" + target.split("/", 3)[3] if target.count("/") >= 3 else "/"
            if target == "/__stats":
                with counters.lock:
                    body = json.dumps({"requests": counters.requests, "bytes": counters.bytes}).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                continue
            object_id = -1
            if target.startswith("/t/") and target[3:].isdigit():
                object_id = int(target[3:])
            if not 0 <= object_id < len(sizes) or parts[0] not in ("GET", "HEAD"):
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                continue
            size = sizes[object_id]
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nDate: %s\r\n"
                         b"Cache-Control: max-age=86400\r\nLast-Modified: Mon, 02 Nov 2026 00:00:00 GMT\r\n"
                         b"Content-Length: %d\r\n\r\n" % (email.utils.formatdate(usegmt=True).encode(), size))
            if parts[0] == "HEAD":
                continue
            offset, left = body_offset(object_id), size
            while left > 0:
                sent = os.sendfile(conn.fileno(), blob_fd, offset, left)
                if sent == 0:
                    raise ConnectionError("peer closed during a body")
                offset += sent
                left -= sent
            counters.add(size)
    except (ConnectionError, OSError):
        pass
    finally:
        conn.close()


def origin(args):
    sizes = load_u32(os.path.join(args.dir, "sizes.u32"))
    blob_fd = os.open(os.path.join(args.dir, "blob"), os.O_RDONLY)
    counters = Counters()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(1024)
    print(f"origin: {len(sizes)} objects on 127.0.0.1:{args.port}", flush=True)
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve_connection, args=(conn, sizes, blob_fd, counters), daemon=True).start()


class Replayer:
    def __init__(self, args):
        self.sizes = load_u32(os.path.join(args.dir, "sizes.u32"))
        self.trace = load_u32(os.path.join(args.dir, "trace.u32"))
        with open(os.path.join(args.dir, "blob"), "rb") as f:
            self.blob = f.read()
        host, _, port = args.proxy.rpartition(":")
        self.proxy = (host, int(port))
        self.origin = f"127.0.0.1:{args.origin_port}"
        # Process p of n sends requests p, p + n, ...: next() on a count is atomic under the GIL.
        self.next_index = itertools.count(args.part, args.processes)
        self.lock = threading.Lock()
        self.requests = self.bytes = 0
        self.errors = []

    def fail(self, message):
        with self.lock:
            self.errors.append(message)

    def connect(self):
        sock = socket.create_connection(self.proxy, timeout=120)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def read_body(self, sock, rest, length, first):
        """Reads `length` body bytes (some already in `rest`); returns the leftover."""
        prefix = bytearray(rest[:length])
        got = len(prefix)
        rest = rest[length:]
        buffer = bytearray(1 << 20)
        view = memoryview(buffer)
        while got < length:
            n = sock.recv_into(view, min(len(buffer), length - got))
            if n == 0:
                raise ConnectionError("closed inside a body")
            if len(prefix) < PREFIX_CHECK:
                prefix += buffer[:min(n, PREFIX_CHECK - len(prefix))]
            got += n
        if first is not None:
            first += bytes(prefix[:PREFIX_CHECK])
        return rest

    @staticmethod
    def read_line(sock, rest, where):
        """Returns (one CRLF-terminated line without its CRLF, leftover)."""
        while b"\r\n" not in rest:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed inside {where}")
            rest += chunk
        line, _, rest = rest.partition(b"\r\n")
        return line, rest

    def read_chunked(self, sock, rest, first):
        """Reads a chunked body; returns (decoded length, leftover)."""
        total = 0
        while True:
            line, rest = self.read_line(sock, rest, "a chunk size")
            size = int(line.split(b";")[0], 16)
            if size == 0:  # then trailer fields, up to an empty line (RFC 9112 section 7.1)
                while True:
                    line, rest = self.read_line(sock, rest, "the trailer")
                    if not line:
                        return total, rest
            rest = self.read_body(sock, rest, size, first if len(first) < PREFIX_CHECK else None)
            total += size
            while len(rest) < 2:
                rest += sock.recv(65536)
            rest = rest[2:]

    def worker(self):
        sock, rest = None, b""
        requests = received = 0
        for index in self.next_index:
            if index >= len(self.trace):
                break
            object_id = self.trace[index]
            size = self.sizes[object_id]
            try:
                if sock is None:
                    sock, rest = self.connect(), b""
                sock.sendall(f"GET http://{self.origin}/t/{object_id} HTTP/1.1\r\nHost: {self.origin}\r\n"
                             "User-Agent: larder-trace\r\n\r\n".encode())
                head, rest = read_head(sock, rest)
                if head is None:
                    raise ConnectionError("closed before a response")
                lines = head.decode("latin-1").split("\r\n")
                status = lines[0].split(" ")[1]
                fields = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
                first = bytearray()
                if "chunked" in fields.get("transfer-encoding", "").lower():
                    length, rest = self.read_chunked(sock, rest, first)
                else:
                    length = int(fields.get("content-length", "-1"))
                    if length < 0:
                        raise ConnectionError("a response without a length")
                    rest = self.read_body(sock, rest, length, first)
                offset = body_offset(object_id)
                expected = self.blob[offset:offset + min(size, PREFIX_CHECK)]
                if status != "200" or length != size or bytes(first[:len(expected)]) != expected:
                    self.fail(f"request {index} /t/{object_id}: status {status}, {length} bytes of {size}")
                if fields.get("connection", "").lower() == "close":
                    sock.close()
                    sock = None
                requests += 1
                received += length
            except (OSError, ConnectionError, ValueError, IndexError) as error:
                self.fail(f"request {index} /t/{object_id}: {error}")
                if sock is not None:
                    sock.close()
                sock = None
        if sock is not None:
            sock.close()
        with self.lock:
            self.requests += requests
            self.bytes += received


def replay_part(args):
    replayer = Replayer(args)
    threads = [threading.Thread(target=replayer.worker) for _ in range(args.connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"requests": replayer.requests, "bytes": replayer.bytes, "errors": replayer.errors[:5],
            "error_count": len(replayer.errors)}


def replay(args):
    """Splits the trace over --processes processes (the client is bound by the GIL), each
    with its share of --connections, and adds up what they report."""
    started = time.monotonic()
    children = []
    for part in range(args.processes):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            args.part, args.connections = part, max(1, args.connections // args.processes)
            result = replay_part(args)
            with os.fdopen(write_end, "w") as out:
                json.dump(result, out)
            os._exit(0)
        os.close(write_end)
        children.append((pid, read_end))
    total = {"requests": 0, "bytes": 0, "errors": 0, "first_errors": []}
    for pid, read_end in children:
        with os.fdopen(read_end) as source:
            text = source.read()
        os.waitpid(pid, 0)
        if not text:
            total["errors"] += 1
            total["first_errors"].append(f"client process {pid} reported nothing")
            continue
        result = json.loads(text)
        total["requests"] += result["requests"]
        total["bytes"] += result["bytes"]
        total["errors"] += result["error_count"]
        total["first_errors"] += result["errors"]
    total["seconds"] = round(time.monotonic() - started, 2)
    total["first_errors"] = total["first_errors"][:5]
    print(json.dumps(total))
    return 1 if total["errors"] else 0


def simulate(args):
    """Least-recently-used replacement over the trace at a byte budget, optionally behind the
    doorkeeper Larder's `cache.admission = "second_request"` uses (Doorkeeper.swift: two
    generations of keys, a window of a twentieth of the entries held, at least 1,000 keys,
    engaged from 90 % of the budget). Eviction, as Larder's disk tier does it, runs past the
    budget and goes down to 90 % of it. Counts every request, cold start included."""
    sizes = load_u32(os.path.join(args.dir, "sizes.u32"))
    trace = load_u32(os.path.join(args.dir, "trace.u32"))
    for capacity in args.cache_bytes:
        for min_bytes in [None] + args.min_bytes:
            lru, used = collections.OrderedDict(), 0
            current, previous, window = set(), set(), 1000
            hits = hit_bytes = total_bytes = 0
            for object_id in trace:
                size = sizes[object_id]
                total_bytes += size
                if object_id in lru:
                    lru.move_to_end(object_id)
                    hits += 1
                    hit_bytes += size
                    continue
                if size > capacity:
                    continue
                if min_bytes is not None and size > min_bytes and used >= capacity - capacity // 10:
                    if object_id not in current and object_id not in previous:
                        current.add(object_id)
                        if len(current) >= window:
                            previous, current = current, set()
                            window = max(1000, len(lru) // args.window_divisor)
                        continue
                lru[object_id] = size
                used += size
                if used > capacity:
                    while used > capacity - capacity // 10:
                        used -= lru.popitem(last=False)[1]
            print(json.dumps({"cache_bytes": capacity, "admission": "always" if min_bytes is None else "second_request",
                              "min_bytes": min_bytes, "object_hit_ratio": round(hits / len(trace), 4),
                              "byte_hit_ratio": round(hit_bytes / total_bytes, 4)}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    g = commands.add_parser("generate")
    g.add_argument("--dir", required=True)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--objects", type=int, default=200_000)
    g.add_argument("--requests", type=int, default=1_000_000)
    g.add_argument("--zipf", type=float, default=0.9)
    g.add_argument("--median", type=int, default=8192)
    g.add_argument("--sigma", type=float, default=2.0)
    g.add_argument("--max-size", type=int, default=50 << 20)
    o = commands.add_parser("origin")
    o.add_argument("--dir", required=True)
    o.add_argument("--port", type=int, required=True)
    r = commands.add_parser("replay")
    r.add_argument("--dir", required=True)
    r.add_argument("--proxy", required=True)
    r.add_argument("--origin-port", type=int, required=True)
    r.add_argument("--connections", type=int, default=8)
    r.add_argument("--processes", type=int, default=2)
    m = commands.add_parser("simulate")
    m.add_argument("--dir", required=True)
    m.add_argument("--cache-bytes", type=int, nargs="+", default=[1 << 30])
    m.add_argument("--min-bytes", type=int, nargs="*", default=[8192])
    m.add_argument("--window-divisor", type=int, default=20)
    args = parser.parse_args()
    if args.command == "generate":
        generate(args)
    elif args.command == "simulate":
        simulate(args)
    elif args.command == "origin":
        origin(args)
    else:
        sys.exit(replay(args))


if __name__ == "__main__":
    main()
