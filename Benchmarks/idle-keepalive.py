#!/usr/bin/env python3
"""Resident memory per idle keep-alive connection.

  Benchmarks/idle-keepalive.py [COUNT]     (default 10,000; run from the repository root)

Starts a local origin (python http.server on a temporary directory), the release binary
with max_connections above COUNT, makes one cached object, then opens COUNT connections that
each fetch it once through the proxy (a memory hit) and stay open. Prints the daemon's RSS
before and after and the growth per connection. Stops everything it started.
"""
import http.server
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time

count = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

work = tempfile.mkdtemp(prefix="larder-idle-")
with open(os.path.join(work, "obj"), "wb") as f:
    f.write(b"x" * 1024)


class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k):
        super().__init__(*a, directory=work, **k)

    def end_headers(self):
        self.send_header("Cache-Control", "max-age=3600")
        super().end_headers()

    def log_message(self, *a):
        pass


origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=origin.serve_forever, daemon=True).start()
origin_port = origin.server_address[1]

config = os.path.join(work, "larder.toml")
with open(config, "w") as f:
    f.write("[proxy]\nmax_connections = %d\nidle_timeout = \"10m\"\n[log]\naccess = false\n" % (count + 100))
larder = subprocess.Popen(
    [os.environ.get("LARDER", ".build/release/larder"), "serve", "--config", config,
     "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--cache-dir", os.path.join(work, "cache")],
    stderr=subprocess.PIPE, text=True)
try:
    port = None
    deadline = time.time() + 10
    while port is None and time.time() < deadline:
        line = larder.stderr.readline()
        m = re.search(r"proxy=127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
    if port is None:
        sys.exit("larder did not start")
    url = "http://127.0.0.1:%d/obj" % origin_port
    request = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (url, origin_port)).encode()

    def fetch(sock):
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + 1024:
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError("closed")
            data += chunk
        return data

    warm = socket.create_connection(("127.0.0.1", port))
    fetch(warm)
    fetch(warm)

    def rss():
        with open("/proc/%d/status" % larder.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    time.sleep(0.5)
    before = rss()
    sockets = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        data = fetch(s)
        if b" 200 " not in data.split(b"\r\n", 1)[0]:
            raise RuntimeError("not a 200: %r" % data[:80])
        sockets.append(s)
    time.sleep(1)
    after = rss()
    print("idle keep-alive connections: %d, RSS %d KiB -> %d KiB, %.2f KiB per connection"
          % (count, before, after, (after - before) / count))
    for s in sockets:
        s.close()
finally:
    larder.terminate()
    larder.wait(timeout=15)
    origin.shutdown()
    subprocess.run(["rm", "-rf", work])
