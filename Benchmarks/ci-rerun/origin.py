#!/usr/bin/env python3
"""The origin of the "second CI run" benchmark: package artefacts and indexes laid out like
PyPI, npm, a Debian mirror and the Go module proxy, with the headers those services send.

  origin.py PORT URLS_FILE [SEED]

Writes the list of URLs a CI job fetches (indexes and artefacts, mixed sizes) to URLS_FILE,
then serves them on 127.0.0.1:PORT with ETag and Last-Modified (304 on If-None-Match or
If-Modified-Since). GET /_stats -> {"requests": n, "bytes": n, "not_modified": n,
"by_kind": {"artefact": {...}, "index": {...}}}; POST /_reset zeroes the counters.
"""
import hashlib
import http.server
import json
import random
import sys
import threading

LOCK = threading.Lock()
STATS = {}
LAST_MODIFIED = "Wed, 25 Nov 2026 12:00:00 GMT"


def reset():
    global STATS
    STATS = {"requests": 0, "bytes": 0, "not_modified": 0,
             "by_kind": {kind: {"requests": 0, "bytes": 0, "not_modified": 0} for kind in ("artefact", "index")}}


def catalogue(seed):
    """(path, kind, size, cache-control or None) for every object a job fetches."""
    rng = random.Random(seed)
    sizes = [2_000, 20_000, 150_000, 600_000, 2_000_000]
    objects = []
    for n in range(60):
        name = f"pkg{n}"
        objects.append((f"/simple/{name}/", "index", 2_000, "max-age=600, public"))
        objects.append((f"/packages/{n % 16:02x}/{n:02x}/{hashlib.sha1(name.encode()).hexdigest()[:20]}/{name}-1.{n}-py3-none-any.whl",
                        "artefact", rng.choice(sizes), "max-age=365000000, immutable, public"))
    for n in range(60):
        name = f"lib{n}"
        objects.append((f"/npm/{name}", "index", 8_000, "public, max-age=300"))
        objects.append((f"/npm/{name}/-/{name}-2.{n}.0.tgz", "artefact", rng.choice(sizes), "public, immutable, max-age=31557600"))
    objects.append(("/debian/dists/bookworm/InRelease", "index", 150_000, None))
    objects.append(("/debian/dists/bookworm/main/binary-amd64/Packages.xz", "index", 600_000, None))
    for n in range(60):
        objects.append((f"/debian/pool/main/p/p{n}/p{n}_1.{n}-1_amd64.deb", "artefact", rng.choice(sizes), None))
    for n in range(40):
        module = f"/go/example.org/mod{n}/@v"
        objects.append((f"{module}/list", "index", 200, "public, max-age=60"))
        objects.append((f"{module}/v1.{n}.0.mod", "artefact", 500, "public, max-age=10800"))
        objects.append((f"{module}/v1.{n}.0.zip", "artefact", rng.choice(sizes), "public, max-age=10800"))
    return objects


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    objects = {}

    def log_message(self, *args):
        pass

    def do_POST(self):
        if self.path == "/_reset":
            with LOCK:
                reset()
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        path = self.path.split("://", 1)[-1]
        path = path[path.index("/"):] if "://" in self.path else self.path
        if path == "/_stats":
            with LOCK:
                data = json.dumps(STATS).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        found = Handler.objects.get(path)
        if found is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        kind, size, cache_control = found
        etag = '"' + hashlib.sha1(path.encode()).hexdigest()[:16] + '"'
        not_modified = self.headers.get("If-None-Match") == etag or self.headers.get("If-Modified-Since") == LAST_MODIFIED
        body = b"" if not_modified else (hashlib.sha256(path.encode()).digest() * (size // 32 + 1))[:size]
        with LOCK:
            for counters in (STATS, STATS["by_kind"][kind]):
                counters["requests"] += 1
                counters["bytes"] += len(body)
                counters["not_modified"] += 1 if not_modified else 0
        self.send_response(304 if not_modified else 200)
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", LAST_MODIFIED)
        if cache_control:
            self.send_header("Cache-Control", cache_control)
        if not not_modified:
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    port, urls_file = int(sys.argv[1]), sys.argv[2]
    objects = catalogue(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    Handler.objects = {path: (kind, size, cc) for path, kind, size, cc in objects}
    with open(urls_file, "w") as out:
        for path, _, _, _ in objects:
            out.write(f"http://127.0.0.1:{port}{path}\n")
    reset()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"PORT {port} OBJECTS {len(objects)}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
