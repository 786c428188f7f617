#!/usr/bin/env python3
"""Keep-alive load of one large URL through a proxy, bodies discarded in the kernel
(recv with MSG_TRUNC), so the client spends little CPU per byte and the proxy is what is
measured. wrk reads 8 KiB at a time and saturates its core near 1 GB/s, below a proxy's
sendfile rate on loopback.

    bigload.py PROXY_PORT URL [CONNECTIONS] [SECONDS]    prints "Requests/sec: N" as wrk does
"""
import selectors
import socket
import sys
import time


def main():
    port, url = int(sys.argv[1]), sys.argv[2]
    connections = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 5.0
    host = url.split("/")[2]
    request = f"GET {url} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    sink = bytearray(4 << 20)  # never written: MSG_TRUNC drops the bytes in the kernel
    selector = selectors.DefaultSelector()
    state = {}  # socket -> [head bytes so far, body bytes left or None]
    for _ in range(connections):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.setblocking(False)
        sock.send(request)
        state[sock] = [b"", None]
        selector.register(sock, selectors.EVENT_READ)
    done = 0
    start = time.monotonic()
    deadline = start + seconds
    while time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.2):
            sock = key.fileobj
            entry = state[sock]
            if entry[1] is None:
                data = sock.recv(65536)
                if not data:
                    sys.exit("bigload: the proxy closed a connection")
                entry[0] += data
                head, separator, rest = entry[0].partition(b"\r\n\r\n")
                if not separator:
                    continue
                lines = head.decode("latin-1").split("\r\n")
                if lines[0].split()[1] != "200":
                    sys.exit(f"bigload: {lines[0]}")
                length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
                entry[1] = length - len(rest)
            else:
                count = sock.recv_into(sink, min(entry[1], len(sink)), socket.MSG_TRUNC)
                if count == 0:
                    sys.exit("bigload: the proxy closed a connection")
                entry[1] -= count
            if entry[1] is not None and entry[1] <= 0:
                done += 1
                state[sock] = [b"", None]
                sock.send(request)
    print(f"Requests/sec: {done / (time.monotonic() - start):.2f}")


if __name__ == "__main__":
    main()
