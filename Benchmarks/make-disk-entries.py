#!/usr/bin/env python3
"""Writes N disk-cache entries in Larder's documented format (docs/DISK-FORMAT.md), without
going through the daemon, to measure start-up with a large cache.

    make-disk-entries.py [--segments] [--format 2|3|4|5] DIRECTORY COUNT URL_PREFIX [BODY_SIZE]

Entry i has key URL_PREFIX + str(i), a body of BODY_SIZE bytes (default 1024) derived from i,
and Cache-Control: max-age=86400. Prints the key of the last entry. Each entry is a file of its
own (v1/ab/cd/<name>), or with --segments a record in a segment file (v1/seg/<id>, 32 MiB
each), the form Larder stores bodies up to 64 KiB in. --format 2 and 3 write the entries an older
Larder wrote (2: one checksum chain instead of four lanes; both: no block table after a body
over 1 MiB, which Larder now drops); --format 4 those with format 4's multiply checksums; the
default is the current format, 5 (CRC-64/XZ).
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


def absorb(state, word):
    product = (state ^ word) * 0xA0761D6478BD642F
    return (product >> 64) ^ (product & M)


def words(data):
    return [int.from_bytes(data[offset:offset + 8], "little") for offset in range(0, len(data) // 8 * 8, 8)]


BLOCK = 1 << 20


def crc64_tables():
    """Eight tables of the reflected ECMA-182 polynomial: table k advances a byte k more places."""
    first = []
    for byte in range(256):
        value = byte
        for _ in range(8):
            value = (value >> 1) ^ (0xC96C5795D7870F42 if value & 1 else 0)
        first.append(value)
    tables = [first]
    for _ in range(7):
        tables.append([(value >> 8) ^ first[value & 0xFF] for value in tables[-1]])
    return tables


CRC_TABLES = crc64_tables()


def crc64(data):
    """CRC-64/XZ: initial value and final XOR all ones, eight bytes a step."""
    t0, t1, t2, t3, t4, t5, t6, t7 = CRC_TABLES
    state = M
    whole = len(data) // 8 * 8
    for word in words(data):
        state ^= word
        state = (t7[state & 0xFF] ^ t6[(state >> 8) & 0xFF] ^ t5[(state >> 16) & 0xFF] ^ t4[(state >> 24) & 0xFF]
                 ^ t3[(state >> 32) & 0xFF] ^ t2[(state >> 40) & 0xFF] ^ t1[(state >> 48) & 0xFF] ^ t0[state >> 56])
    for byte in data[whole:]:
        state = t0[(state ^ byte) & 0xFF] ^ (state >> 8)
    return state ^ M


def checksum(body, version=5):
    """BodyChecksum (docs/DISK-FORMAT.md, "Checksums") of entry format `version`."""
    if version >= 5:
        return crc64(body)
    seed, step = 0x243F6A8885A308D3, 0x9E3779B97F4A7C15
    whole = len(body) // 8 * 8
    if version == 2:
        state = seed
        for word in words(body):
            state = absorb(state, word)
    else:
        lanes = [(seed + lane * step) & M for lane in range(4)]
        blocks = len(body) // 32 * 32
        for index, word in enumerate(words(body[:blocks])):
            lanes[index % 4] = absorb(lanes[index % 4], word)
        state = lanes[0]
        for lane in lanes[1:]:
            state = absorb(state, lane)
        for word in words(body[blocks:whole]):
            state = absorb(state, word)
    if whole < len(body):
        state = absorb(state, int.from_bytes(body[whole:], "little") ^ 0xE7037ED1A0B428DB)
    state = absorb(state, len(body))
    return mix(state)


def entry(key, body, now, version):
    head = (f"key {key}\nstatus 200 OK\nrequest-time {now}\nresponse-time {now}\n\n"
            f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S GMT', time.gmtime(now))}\r\n"
            "Cache-Control: max-age=86400\r\nContent-Type: application/octet-stream\r\n").encode()
    preamble = (f"LARDER-ENTRY {version}\nbody-length {len(body):020d}\nbody-checksum {checksum(body, version):016x}\n"
                f"head-checksum {checksum(head, version):016x}\nhead-length {len(head):010d}\n").encode()
    assert len(preamble) == 133
    return preamble + head + body + block_table(body, version)


def block_table(body, version):
    """The table after a body over one block (from format 4): each 1 MiB block's checksum, 8
    bytes little-endian (docs/DISK-FORMAT.md, "Checksums per block")."""
    if version < 4 or len(body) <= BLOCK:
        return b""
    return b"".join(checksum(body[start:start + BLOCK], version).to_bytes(8, "little") for start in range(0, len(body), BLOCK))


def main():
    arguments = sys.argv[1:]
    segments = "--segments" in arguments
    arguments = [argument for argument in arguments if argument != "--segments"]
    version = 5
    if "--format" in arguments:
        at = arguments.index("--format")
        version = int(arguments[at + 1])
        if version not in (2, 3, 4, 5):
            sys.exit(f"make-disk-entries.py: no format {version} (2 to 5)")
        del arguments[at:at + 2]
    directory, count, prefix = arguments[0], int(arguments[1]), arguments[2]
    size = int(arguments[3]) if len(arguments) > 3 else 1024
    now = time.time()
    key = None
    segment, segment_id = None, 0
    for index in range(count):
        key = prefix + str(index)
        body = (str(index).encode() * (size // len(str(index)) + 1))[:size]
        record = entry(key, body, now, version)
        if segments:
            if segment is None or segment.tell() + len(record) > 32 << 20:
                if segment is not None:
                    segment.close()
                segment_id += 1
                os.makedirs(os.path.join(directory, "v1", "seg"), exist_ok=True)
                segment = open(os.path.join(directory, "v1", "seg", "%08x" % segment_id), "wb")
            segment.write(record)
            continue
        name = stable_hash(key)
        folder = os.path.join(directory, "v1", name[0:2], name[2:4])
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, name), "wb") as file:
            file.write(record)
    if segment is not None:
        segment.close()
    os.makedirs(os.path.join(directory, "tmp"), exist_ok=True)
    print(key)


if __name__ == "__main__":
    main()
