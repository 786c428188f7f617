#!/usr/bin/env python3
"""A tiny Debian repository for Larder's apt tests (standard library plus dpkg-deb).

  apt_repo.py DIR COUNT

Builds COUNT packages (larder-demo-N, 1.0, all; a few hundred KiB of data each) with dpkg-deb
under DIR/debian/pool/main/, writes dists/stable/main/binary-all/Packages and an unsigned
dists/stable/Release naming it (clients use [trusted=yes]), then serves DIR on 127.0.0.1 with
Last-Modified and If-Modified-Since (304) as a static mirror does. Prints "PORT <n>".
Control endpoint (never counted): /_stats -> {"requests": {path: [status, ...]}, "bytes": {path: n}}
"""
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading

LOCK = threading.Lock()
REQUESTS = {}
BYTES = {}


def build(root, count):
    pool = os.path.join(root, "debian/pool/main/l")
    os.makedirs(pool, exist_ok=True)
    stanzas = []
    for n in range(count):
        name = f"larder-demo-{n}"
        tree = os.path.join(root, "build", name)
        os.makedirs(os.path.join(tree, "DEBIAN"), exist_ok=True)
        os.makedirs(os.path.join(tree, "usr/share", name), exist_ok=True)
        with open(os.path.join(tree, "usr/share", name, "data"), "wb") as data:
            data.write(os.urandom(65536 * (n + 1)))  # incompressible, so the .deb is that large
        with open(os.path.join(tree, "DEBIAN/control"), "w") as control:
            control.write(f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: Larder <t@example.org>\n"
                          f"Description: test package {n}\n")
        deb = os.path.join(pool, f"{name}_1.0_all.deb")
        subprocess.run(["dpkg-deb", "-Zgzip", "--build", tree, deb], check=True, capture_output=True)
        body = open(deb, "rb").read()
        stanzas.append(f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: Larder <t@example.org>\n"
                       f"Filename: pool/main/l/{name}_1.0_all.deb\nSize: {len(body)}\n"
                       f"SHA256: {hashlib.sha256(body).hexdigest()}\nDescription: test package {n}\n")
    dists = os.path.join(root, "debian/dists/stable")
    os.makedirs(os.path.join(dists, "main/binary-all"), exist_ok=True)
    packages = "\n".join(stanzas).encode()
    with open(os.path.join(dists, "main/binary-all/Packages"), "wb") as out:
        out.write(packages)
    with open(os.path.join(dists, "Release"), "w") as release:
        release.write("Origin: Larder test\nSuite: stable\nCodename: stable\nArchitectures: all amd64\nComponents: main\n"
                      "Date: Thu, 26 Nov 2026 00:00:00 UTC\nSHA256:\n"
                      f" {hashlib.sha256(packages).hexdigest()} {len(packages)} main/binary-all/Packages\n")


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/_stats":
            with LOCK:
                data = json.dumps({"requests": REQUESTS, "bytes": BYTES}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        super().do_GET()

    def send_response(self, code, message=None):
        if self.path != "/_stats":
            with LOCK:
                REQUESTS.setdefault(self.path, []).append(code)
        super().send_response(code, message)

    def copyfile(self, source, outputfile):
        data = source.read()
        with LOCK:
            BYTES[self.path] = BYTES.get(self.path, 0) + len(data)
        outputfile.write(data)


def main():
    root, count = sys.argv[1], int(sys.argv[2])
    build(root, count)
    handler = lambda *args: Handler(*args, directory=root)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
