#!/usr/bin/env python3
"""Writes N disk-cache entries in Larder's documented format (docs/DISK-FORMAT.md), without
going through the daemon, to measure start-up with a large cache.

    make-disk-entries.py DIRECTORY COUNT URL_PREFIX [BODY_SIZE]

Entry i has key URL_PREFIX + str(i), a body of BODY_SIZE bytes (default 1024) derived from i,
and Cache-Control: max-age=86400. Prints the key of the last entry.
"""
import os
import sys
import time

M = (1 << 64) - 1


def mix(x):
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M
    x ^= x >> 31
    return x


def stable_hash(text):
    first, second = 0xCBF29CE484222325, 0x9E3779B97F4A7C15
    for byte in text.encode():
        first = ((first ^ byte) * 0x100000001B3) & M
        second = ((second ^ byte) * 0xBF58476D1CE4E5B9) & M
        second ^= second >> 31
    return "%016x%016x" % (mix(first), mix(second ^ first))


def checksum(body):
    state = 0x243F6A8885A308D3

    def absorb(state, word):
        product = (state ^ word) * 0xA0761D6478BD642F
        return (product >> 64) ^ (product & M)

    whole = len(body) // 8 * 8
    for offset in range(0, whole, 8):
        state = absorb(state, int.from_bytes(body[offset:offset + 8], "little"))
    if whole < len(body):
        state = absorb(state, int.from_bytes(body[whole:], "little") ^ 0xE7037ED1A0B428DB)
    state = absorb(state, len(body))
    return mix(state)


def entry(key, body, now):
    head = (f"key {key}\nstatus 200 OK\nrequest-time {now}\nresponse-time {now}\n\n"
            f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S GMT', time.gmtime(now))}\r\n"
            "Cache-Control: max-age=86400\r\nContent-Type: application/octet-stream\r\n").encode()
    preamble = (f"LARDER-ENTRY 1\nbody-length {len(body):020d}\nbody-checksum {checksum(body):016x}\n"
                f"head-length {len(head):010d}\n").encode()
    assert len(preamble) == 102
    return preamble + head + body


def main():
    directory, count, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 1024
    now = time.time()
    key = None
    for index in range(count):
        key = prefix + str(index)
        body = (str(index).encode() * (size // len(str(index)) + 1))[:size]
        name = stable_hash(key)
        folder = os.path.join(directory, "v1", name[0:2], name[2:4])
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, name), "wb") as file:
            file.write(entry(key, body, now))
    os.makedirs(os.path.join(directory, "tmp"), exist_ok=True)
    print(key)


if __name__ == "__main__":
    main()
