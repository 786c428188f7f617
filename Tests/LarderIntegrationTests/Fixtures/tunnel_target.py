#!/usr/bin/env python3
"""Servers on the far side of Larder's CONNECT tunnels, for the integration tests
(standard library plus the openssl command for a throwaway certificate).

  tunnel_target.py tls DIR    HTTPS on 127.0.0.1 with a self-signed certificate written to
                              DIR/cert.pem (valid for IP 127.0.0.1, one day):
                                GET /bytes?size=N  N bytes of a fixed pattern, with
                                                   X-Content-SHA256 (hex) of those bytes
                                POST /digest       answers the SHA-256 (hex) of the body
  tunnel_target.py raw        plain TCP; the first line a client sends is a command:
                                ECHO      read until the client half-closes, then answer
                                          "RECEIVED <count> <sha256 hex>\\n" and close
                                SEND <n>  send n pattern bytes as fast as the client takes
                                          them, then close
                                COUNT     answer how many ECHO/SEND connections were made
                                HOLD      read and discard until the client closes
  tunnel_target.py blackhole  listens with a backlog it never accepts from and fills it
                              itself, so further connection attempts hang (connect timeouts)

Prints "PORT <n>" on its first stdout line; runs until the test stops it (SIGTERM).
"""
import hashlib
import os
import socket
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

BLOCK = bytes((i * 131 + (i >> 9)) & 0xFF for i in range(1 << 20))


def pattern(size):
    """Yields `size` bytes in 1 MiB pieces; each piece starts with its index so no two are alike."""
    index = 0
    while size > 0:
        piece = index.to_bytes(8, "big") + BLOCK[8:]
        yield piece[: min(size, len(piece))]
        size -= len(piece)
        index += 1


def pattern_digest(size):
    digest = hashlib.sha256()
    for piece in pattern(size):
        digest.update(piece)
    return digest.hexdigest()


class TLSHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        url = urlsplit(self.path)
        size = int(parse_qs(url.query).get("size", ["1024"])[0])
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.send_header("X-Content-SHA256", pattern_digest(size))
        self.end_headers()
        for piece in pattern(size):
            self.wfile.write(piece)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        digest = hashlib.sha256()
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 16))
            if not chunk:
                break
            digest.update(chunk)
            length -= len(chunk)
        body = digest.hexdigest().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve_tls(directory):
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = ThreadingHTTPServer(("127.0.0.1", 0), TLSHandler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    start(server.server_address[1], server.serve_forever)


COUNT = 0
LOCK = threading.Lock()


def raw_client(connection):
    global COUNT
    with connection:
        line = b""
        while not line.endswith(b"\n"):
            byte = connection.recv(1)
            if not byte:
                return
            line += byte
        command = line.decode().split()
        if command[0] == "COUNT":
            with LOCK:
                connection.sendall(f"{COUNT}\n".encode())
            return
        with LOCK:
            COUNT += 1
        if command[0] == "ECHO":
            digest = hashlib.sha256()
            count = 0
            while True:
                chunk = connection.recv(1 << 16)
                if not chunk:
                    break
                digest.update(chunk)
                count += len(chunk)
            connection.sendall(f"RECEIVED {count} {digest.hexdigest()}\n".encode())
        elif command[0] == "SEND":
            for piece in pattern(int(command[1])):
                connection.sendall(piece)
        elif command[0] == "HOLD":
            while connection.recv(1 << 16):
                pass


def serve_raw():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)

    def loop():
        while True:
            connection, _ = listener.accept()
            threading.Thread(target=raw_client, args=(connection,), daemon=True).start()

    start(listener.getsockname()[1], loop)


def serve_blackhole():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    # Fill the accept queue (backlog 0 holds one, plus one in flight); later SYNs are dropped.
    fillers = []
    for _ in range(3):
        filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    start(port, lambda: threading.Event().wait())


def start(port, serve):
    print(f"PORT {port}", flush=True)
    threading.Thread(target=serve, daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "tls":
        serve_tls(sys.argv[2])
    elif mode == "raw":
        serve_raw()
    elif mode == "blackhole":
        serve_blackhole()
    else:
        sys.exit(f"unknown mode {mode}")
