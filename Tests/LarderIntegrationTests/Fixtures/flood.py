#!/usr/bin/env python3
"""Opens many idle TCP connections to 127.0.0.1:PORT and holds them (the idle-flood test).

  flood.py PORT COUNT

Raises its own open-file limit to the hard limit, connects COUNT sockets without sending a
byte, prints "OPEN <connected> <failed>" once every attempt finished, then holds them until
SIGUSR1, prints "CLOSED <n>" (how many the server has closed by then) and exits.
Exits anyway after 120 seconds.
"""
import errno
import resource
import selectors
import signal
import socket
import sys
import threading
import time

port, count = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
threading.Timer(120, lambda: __import__("os")._exit(3)).start()

sockets = []
failed = 0
for _ in range(count):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    code = s.connect_ex(("127.0.0.1", port))
    if code not in (0, errno.EINPROGRESS):
        failed += 1
        s.close()
        continue
    sockets.append(s)

# Wait until every connect finished (writable) or 30 s passed.
selector = selectors.DefaultSelector()
for s in sockets:
    selector.register(s, selectors.EVENT_WRITE)
pending = len(sockets)
deadline = time.time() + 30
while pending and time.time() < deadline:
    for key, _ in selector.select(timeout=1):
        selector.unregister(key.fileobj)
        pending -= 1
connected = [s for s in sockets if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0]
failed += len(sockets) - len(connected)
print(f"OPEN {len(connected)} {failed}", flush=True)

signal.sigwait([signal.SIGUSR1])
closed = 0
for s in connected:
    try:
        data = s.recv(4096)
        if data == b"" or data.startswith(b"HTTP/1.1 503"):
            closed += 1
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
print(f"CLOSED {closed}", flush=True)
