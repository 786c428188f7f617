#!/usr/bin/env python3
"""A scriptable origin server for Larder's integration tests (standard library only).

Binds 127.0.0.1 (::1 with `--ipv6`) on a free port and prints "PORT <n>" on its first stdout
line.
With `--tls CERT KEY` it speaks HTTPS with that certificate (each handshake runs in the
connection's own thread).

Every path answers according to its query string:
  status=N            response status (default 200)
  size=N              body length in bytes (default 64); the body is a pattern derived from
                      the path and the `id` parameter, so tests can compare bytes
  cc=VALUE            Cache-Control value
  h=Name:Value        extra response header (repeatable)
  delay=S             wait S seconds before the head
  chunked=1           send the body with chunked transfer coding
  slow=S              sleep S seconds between 64 KiB pieces of the body
  truncate=N          promise the full length but close after N body bytes
  reset=1             close the connection without answering
  hang=1              never answer (until the client gives up)
  noclen=1            no Content-Length: HTTP/1.0-style body ended by close
  echo=1              answer with the request body (and X-Method, X-Body-Length)
  ranges=1            honour one Range (206 with Content-Range, 416 past the end), with a strong
                      ETag and Last-Modified naming the body's version (see /_bump); an
                      If-None-Match of that ETag is answered 304
  cap=N               with ranges=1: a range's answer holds at most N bytes from its first (a
                      server that caps ranges)
  lie304=1            with ranges=1: any If-None-Match is answered 304 with the current ETag
                      (a server that answers validations wrongly)
  idle=S              keep the connection open after answering, but close it when no next
                      request arrives within S seconds (an origin's keep-alive timeout)
  late=S              S seconds after answering, send a second response nobody asked for
                      (body "late") on the same connection, then keep it
  behind=1            send that response at once, in the same write as the body's last
                      bytes (over TLS: in the same record)
Every answer carries X-Request-Number: how many requests the origin had counted when it
answered, so a test can tell one origin response from another.
Scripted resources (for the RFC 9111 conformance suite):
  POST /_script?target=/x  with a JSON body {"responses": [R, ...], "conditional": bool}
      Each request for exactly /x (path and query) gets the next R (the last one repeats):
      R = {"status": 200, "headers": [["Name", "value"], ...], "body": "text", "delay": 0.0}
      ("body64": base64 text in place of "body", for binary content)
      Header values may contain {now}, {now+N} or {now-N}: an HTTP date N seconds from now.
      A response without a Date header gets one (now). With "conditional", a request whose
      If-None-Match matches R's ETag (weak comparison), or whose If-Modified-Since is not
      before R's Last-Modified, is answered 304 with R's headers and no body.
Control endpoints (never counted):
  /_count             JSON {"total": n, "paths": {path+query: n}}
  /_requests          JSON list of {"method", "target", "headers"} for every counted request
  /_reset             forget the counters
  /_bump?path=/x      a new version of /x: other bytes and another ETag (with ranges=1)
/_count also has "bytes": body bytes sent per path+query, and "connections": how many
connections carried counted requests (keep-alive reuse shows as fewer connections).
"""
import base64
import hashlib
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

LOCK = threading.Lock()
COUNTS = {}
REQUESTS = []
SCRIPTS = {}
BYTES = {}
CONNECTIONS = [0]
# The response late=S and behind=1 send unasked.
LATE = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nCache-Control: max-age=600\r\n\r\nlate"
VERSIONS = {}


def byte_range(header, length):
    """One `bytes=` range of a body of `length` bytes: (first, last), "unsatisfiable", or None
    (no range, or one this fixture ignores, as RFC 9110 §14.2 allows)."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[6:].strip().partition("-")
    try:
        if not first:
            suffix = int(last)
            return (max(0, length - suffix), length - 1) if suffix > 0 and length > 0 else "unsatisfiable"
        start = int(first)
        end = min(int(last), length - 1) if last else length - 1
    except ValueError:
        return None
    if start >= length:
        return "unsatisfiable"
    return (start, end) if end >= start else None


def http_date(timestamp):
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(timestamp))


def expand(value):
    """Replaces {now}, {now+N}, {now-N} with HTTP dates."""
    out = ""
    while "{now" in value:
        start = value.index("{now")
        end = value.index("}", start)
        expression = value[start + 4:end]
        offset = float(expression) if expression else 0.0
        out += value[:start] + http_date(time.time() + offset)
        value = value[end + 1:]
    return out + value


def parse_date(text):
    try:
        return time.mktime(time.strptime(text.strip(), "%a, %d %b %Y %H:%M:%S GMT")) - time.timezone
    except (ValueError, OverflowError):
        return None


def opaque(tag):
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


def pattern(seed: str, size: int) -> bytes:
    block = hashlib.sha256(seed.encode()).digest() * 2048  # 64 KiB
    whole, rest = divmod(size, len(block))
    return block * whole + block[:rest]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "origin-fixture"

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        super().setup()
        # Head and body go out in separate writes; without this, Nagle plus the client's
        # delayed ACK adds 40 ms to every reused connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self):
        self.answer()

    do_HEAD = do_GET
    do_POST = do_GET
    do_PUT = do_GET
    do_DELETE = do_GET
    do_PATCH = do_GET
    do_OPTIONS = do_GET

    def __getattr__(self, name):
        # Any other method (extension methods, or "get": methods are case-sensitive) is
        # answered and counted like GET, so tests can see that it was forwarded.
        if name.startswith("do_"):
            return self.do_GET
        raise AttributeError(name)

    def read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length", "0") or "0")
        return self.rfile.read(length) if length else b""

    def answer(self):
        url = urlsplit(self.path)
        if url.path.startswith("/_"):
            return self.control(url.path, url.query)
        body_in = self.read_body()
        with LOCK:
            script = SCRIPTS.get(self.path)
        if script is not None:
            return self.scripted(script, body_in)
        query = parse_qs(url.query)
        one = lambda name, default=None: query.get(name, [default])[0]
        with LOCK:
            COUNTS[self.path] = COUNTS.get(self.path, 0) + 1
            if not getattr(self, "counted", False):
                self.counted = True
                CONNECTIONS[0] += 1
            number = sum(COUNTS.values())
            REQUESTS.append({"method": self.command, "target": self.path,
                             "headers": [[k, v] for k, v in self.headers.items()],
                             "body_length": len(body_in), "time": time.time()})
        if one("idle"):
            # http.server ends the connection when the wait for the next request times out.
            self.connection.settimeout(float(one("idle")))
        if one("reset"):
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if one("hang"):
            time.sleep(3600)
            return
        delay = float(one("delay", "0"))
        if delay:
            time.sleep(delay)
        status = int(one("status", "200"))
        if one("echo"):
            body = body_in
        else:
            version = VERSIONS.get(url.path, 0) if one("ranges") else 0
            body = pattern(url.path + "|" + (one("id") or "") + ("|%d" % version if version else ""), int(one("size", "64")))
        content_range = None
        etag = '"v%d-%s"' % (VERSIONS.get(url.path, 0), hashlib.sha256(url.path.encode()).hexdigest()[:12])
        if one("ranges"):
            wanted = byte_range(self.headers.get("Range"), len(body))
            inm = self.headers.get("If-None-Match")
            if (inm == etag or (inm and one("lie304"))) and status == 200:
                status, body = 304, b""
            elif wanted == "unsatisfiable":
                status, content_range, body = 416, "bytes */%d" % len(body), b""
            elif wanted is not None and status == 200:
                first, last = wanted
                if one("cap"):
                    last = min(last, first + int(one("cap")) - 1)
                status, content_range = 206, "bytes %d-%d/%d" % (first, last, len(body))
                body = body[first:last + 1]
        self.send_response(status)
        if one("ranges"):
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", http_date(1700000000 + VERSIONS.get(url.path, 0)))
            if content_range:
                self.send_header("Content-Range", content_range)
        if one("cc"):
            self.send_header("Cache-Control", one("cc"))
        for header in query.get("h", []):
            name, _, value = header.partition(":")
            self.send_header(name, value)
        self.send_header("X-Method", self.command)
        self.send_header("X-Request-Number", str(number))
        self.send_header("X-Body-Length", str(len(body_in)))
        chunked = bool(one("chunked"))
        noclen = bool(one("noclen"))
        no_body = self.command == "HEAD" or status in (204, 304)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        elif noclen:
            self.send_header("Connection", "close")
            self.close_connection = True
        elif status != 204:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if no_body:
            return
        truncate = one("truncate")
        limit = int(truncate) if truncate is not None else len(body)
        slow = float(one("slow", "0"))
        sent = 0
        piece = 64 * 1024
        try:
            while sent < limit:
                part = body[sent:min(sent + piece, limit)]
                if chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                elif one("behind") and sent + len(part) == limit:
                    self.wfile.write(part + LATE)
                else:
                    self.wfile.write(part)
                sent += len(part)
                with LOCK:
                    BYTES[self.path] = BYTES.get(self.path, 0) + len(part)
                if slow:
                    self.wfile.flush()
                    time.sleep(slow)
            if truncate is not None:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            if one("late"):
                self.wfile.flush()
                time.sleep(float(one("late")))
                self.wfile.write(LATE)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def scripted(self, script, body_in):
        with LOCK:
            COUNTS[self.path] = COUNTS.get(self.path, 0) + 1
            if not getattr(self, "counted", False):
                self.counted = True
                CONNECTIONS[0] += 1
            REQUESTS.append({"method": self.command, "target": self.path,
                             "headers": [[k, v] for k, v in self.headers.items()],
                             "body_length": len(body_in), "time": time.time()})
            responses = script["responses"]
            index = min(script["served"], len(responses) - 1)
            script["served"] += 1
            number = sum(COUNTS.values())
        spec = responses[index]
        if spec.get("delay"):
            time.sleep(spec["delay"])
        if spec.get("reset"):
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        headers = [(name, expand(value)) for name, value in spec.get("headers", [])]
        names = {name.lower() for name, _ in headers}
        status = spec.get("status", 200)
        if script.get("conditional") and self.not_modified(headers):
            status = 304
        body = base64.b64decode(spec["body64"]) if "body64" in spec else spec.get("body", "").encode()
        self.send_response_only(status)
        if "date" not in names and not spec.get("no_date"):
            self.send_header("Date", http_date(time.time()))
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("X-Request-Number", str(number))
        no_body = self.command == "HEAD" or status in (204, 304)
        if status != 304 and "content-length" not in names:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not no_body:
            if spec.get("truncate") is not None:
                self.wfile.write(body[:spec["truncate"]])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            self.wfile.write(body)

    def not_modified(self, headers):
        values = {name.lower(): value for name, value in headers}
        condition = self.headers.get("If-None-Match")
        if condition is not None:
            etag = values.get("etag")
            if etag is None:
                return False
            tags = [t.strip() for t in condition.split(",")]
            return "*" in tags or any(opaque(t) == opaque(etag) for t in tags)
        since = self.headers.get("If-Modified-Since")
        modified = values.get("last-modified")
        if since and modified:
            since_time, modified_time = parse_date(since), parse_date(modified)
            return since_time is not None and modified_time is not None and modified_time <= since_time
        return False

    def control(self, path, query=""):
        if path == "/_script":
            target = parse_qs(query)["target"][0]
            script = json.loads(self.read_body())
            script["served"] = 0
            with LOCK:
                SCRIPTS[target] = script
            data = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        with LOCK:
            if path == "/_count":
                payload = {"total": sum(COUNTS.values()), "paths": COUNTS, "bytes": BYTES,
                           "connections": CONNECTIONS[0]}
            elif path == "/_bump":
                target = parse_qs(query)["path"][0]
                VERSIONS[target] = VERSIONS.get(target, 0) + 1
                payload = {"version": VERSIONS[target]}
            elif path == "/_requests":
                payload = REQUESTS
            elif path == "/_reset":
                COUNTS.clear()
                REQUESTS.clear()
                BYTES.clear()
                CONNECTIONS[0] = 0
                payload = {"ok": True}
            else:
                payload = {"error": "unknown"}
            data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512


class Server6(Server):
    address_family = socket.AF_INET6


def main():
    arguments = sys.argv[1:]
    server = Server6(("::1", 0), Handler) if "--ipv6" in arguments else Server(("127.0.0.1", 0), Handler)
    if "--tls" in arguments:
        import ssl
        at = arguments.index("--tls")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(arguments[at + 1], arguments[at + 2])
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
