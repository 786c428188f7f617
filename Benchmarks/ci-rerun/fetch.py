#!/usr/bin/env python3
"""Fetches every URL of a list through a forward proxy, with PARALLEL keep-alive clients,
as a CI job on a fresh machine does (no client-side cache, no conditional requests).

  fetch.py PROXY_PORT URLS_FILE [PARALLEL]

Prints {"seconds": wall time, "objects": n, "bytes": n, "failures": n}.
"""
import http.client
import json
import queue
import sys
import threading
import time


def main():
    port, urls_file = int(sys.argv[1]), sys.argv[2]
    parallel = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    work = queue.Queue()
    for line in open(urls_file):
        if line.strip():
            work.put(line.strip())
    total = {"objects": 0, "bytes": 0, "failures": 0}
    lock = threading.Lock()

    def client():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            try:
                url = work.get_nowait()
            except queue.Empty:
                return
            try:
                connection.request("GET", url, headers={"User-Agent": "ci-rerun"})
                response = connection.getresponse()
                body = response.read()
                ok = response.status == 200
            except Exception:
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                ok, body = False, b""
            with lock:
                total["objects"] += 1
                total["bytes"] += len(body)
                total["failures"] += 0 if ok else 1

    start = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(parallel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total["seconds"] = round(time.monotonic() - start, 3)
    print(json.dumps(total), flush=True)


if __name__ == "__main__":
    sys.exit(main())
