#!/usr/bin/env python3
"""Clients for Larder's HTTPS interception tests (standard library only). Each mode prints one
JSON line with what it saw.

  keepalive PROXY_PORT HOST PORT CAFILE PATH N
      One CONNECT through the proxy, one TLS session trusting CAFILE, then N GETs of PATH on it.
      {"statuses": [...], "cache": [Cache-Status of each], "bytes": total body bytes}
  mixed PROXY_PORT HOST PORT CAFILE PATH N
      N clients through intercepted TLS tunnels and N plain-text clients asking for the same
      https URL in absolute form, all released at once. {"tls": [statuses], "plain": [statuses],
      "cache": [Cache-Status values]}
  abort PROXY_PORT HOST PORT N
      N connections at once, each a CONNECT that, once answered, closes (even ones) or resets
      (odd ones, SO_LINGER 0) without sending a ClientHello. {"answers": [first line of each]}
  hello-close PROXY_PORT HOST PORT SOURCE_ADDRESS N
      N times from SOURCE_ADDRESS: a CONNECT, a ClientHello, then a close once the server's first
      flight (its certificate) has arrived, with no alert. {"flights": [bytes received each]}
      A "{}" in HOST is replaced by the attempt's number (0, 1, ...): one name each.
  wheel NAME VERSION
      A minimal pure-Python wheel, base64: {"file": name, "body64": ..., "sha256": ...}
"""
import base64
import hashlib
import http.client
import io
import json
import socket
import ssl
import struct
import sys
import threading
import zipfile


def tls_connection(proxy_port, host, port, cafile):
    context = ssl.create_default_context(cafile=cafile)
    connection = http.client.HTTPSConnection("127.0.0.1", proxy_port, context=context, timeout=30)
    connection.set_tunnel(host, port)
    return connection


def keepalive(proxy_port, host, port, cafile, path, count):
    connection = tls_connection(proxy_port, host, port, cafile)
    statuses, cache, total = [], [], 0
    for _ in range(count):
        connection.request("GET", path)
        response = connection.getresponse()
        total += len(response.read())
        statuses.append(response.status)
        cache.append(response.getheader("Cache-Status", ""))
    connection.close()
    print(json.dumps({"statuses": statuses, "cache": cache, "bytes": total}), flush=True)


def mixed(proxy_port, host, port, cafile, path, count):
    barrier = threading.Barrier(2 * count, timeout=30)
    results = {"tls": [], "plain": [], "cache": []}
    lock = threading.Lock()

    def record(kind, status, cache_status):
        with lock:
            results[kind].append(status)
            results["cache"].append(cache_status)

    def over_tls():
        try:
            connection = tls_connection(proxy_port, host, port, cafile)
            connection.connect()  # CONNECT and the handshake happen before the barrier
            barrier.wait()
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            record("tls", response.status, response.getheader("Cache-Status", ""))
        except Exception as error:  # reported, not raised: the test counts what succeeded
            record("tls", repr(error), "")

    def plain():
        try:
            connection = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=30)
            connection.connect()
            barrier.wait()
            connection.request("GET", f"https://{host}:{port}{path}")
            response = connection.getresponse()
            response.read()
            record("plain", response.status, response.getheader("Cache-Status", ""))
        except Exception as error:
            record("plain", repr(error), "")

    threads = [threading.Thread(target=over_tls) for _ in range(count)]
    threads += [threading.Thread(target=plain) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    print(json.dumps(results), flush=True)


def connect_tunnel(proxy_port, host, port, source=None):
    """A CONNECT to host:port (from the SOURCE address when given), read up to the end of the
    answer's head: the socket and the answer's status line."""
    bind = (source, 0) if source else None
    sock = socket.create_connection(("127.0.0.1", proxy_port), timeout=10, source_address=bind)
    sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    return sock, head.split(b"\r\n", 1)[0].decode(errors="replace")


def abort(proxy_port, host, port, count):
    barrier = threading.Barrier(count, timeout=30)
    answers = []
    lock = threading.Lock()

    def one(index):
        answer = ""
        try:
            sock, answer = connect_tunnel(proxy_port, host, port)
            barrier.wait()
            if index % 2:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        except Exception as error:
            answer = repr(error)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=one, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    print(json.dumps({"answers": answers}), flush=True)


def hello_close(proxy_port, host, port, source, count):
    flights = []
    pattern = host
    for attempt in range(count):
        host = pattern.replace("{}", str(attempt))
        sock, _ = connect_tunnel(proxy_port, host, port, source)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        session = context.wrap_bio(incoming, outgoing, server_hostname=host)
        try:
            session.do_handshake()
        except ssl.SSLWantReadError:
            pass
        sock.sendall(outgoing.read())
        received = 0
        try:
            # The server's flight: ServerHello and, encrypted, its Certificate (TLS 1.3).
            while received < 400:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += len(chunk)
        except socket.timeout:
            pass
        sock.close()
        flights.append(received)
    print(json.dumps({"flights": flights}), flush=True)


def wheel(name, version):
    buffer = io.BytesIO()
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"VALUE = 1\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: larder-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    record += f"{info}/RECORD,,\n"
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr(f"{info}/RECORD", record)
    data = buffer.getvalue()
    print(json.dumps({
        "file": f"{name}-{version}-py3-none-any.whl",
        "body64": base64.b64encode(data).decode(),
        "sha256": hashlib.sha256(data).hexdigest(),
    }), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "wheel":
        wheel(sys.argv[2], sys.argv[3])
    elif mode == "hello-close":
        hello_close(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
    elif mode == "abort":
        abort(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        proxy_port, host, port, cafile, path, count = sys.argv[2:8]
        {"keepalive": keepalive, "mixed": mixed}[mode](int(proxy_port), host, int(port), cafile, path, int(count))
