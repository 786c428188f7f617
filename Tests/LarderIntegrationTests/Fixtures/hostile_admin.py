"""A fake admin listener that answers every request with one misbehaving /healthz answer.

Usage: hostile_admin.py MODE. Listens on 127.0.0.1 (a port the kernel picks, printed on the
first line), serves one connection at a time, and exits after 60 seconds whatever happens.
Modes: huge (a 2 GB Content-Length, sent as fast as it goes), endless (a chunked body that
never ends), drip (one byte every half second), control (a short 503 answer full of terminal
control sequences).
"""

import signal
import socket
import sys
import time

MODE = sys.argv[1]
signal.alarm(60)
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.bind(("127.0.0.1", 0))
listener.listen(8)
print(listener.getsockname()[1], flush=True)


def answer(connection):
    connection.recv(65536)
    if MODE == "huge":
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2000000000\r\n\r\n")
        block = b"x" * 65536
        while True:
            connection.sendall(block)
    elif MODE == "endless":
        connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"10000\r\n" + b"x" * 65536 + b"\r\n"
        while True:
            connection.sendall(chunk)
    elif MODE == "drip":
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        while True:
            time.sleep(0.5)
            connection.sendall(b"o")
    elif MODE == "control":
        body = b"draining \x1b]0;owned\x07\x1b[2J\xc2\x9b31m\r"
        connection.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


while True:
    connection, _ = listener.accept()
    try:
        answer(connection)
    except OSError:
        pass
    connection.close()
