#!/usr/bin/env python3
"""What one small disk entry costs the kernel, apart from Larder: create, write and close
COUNT files of SIZE bytes under 256 directories on a tmpfs (as the disk tier does for each
miss), then, in the same directory tree, append COUNT records of SIZE bytes to one file (as a
segment file would). Prints microseconds per file / per record for each 100,000.

    python3 Benchmarks/probes/tmpfs-file-cost.py [COUNT] [SIZE]        # default 600000 2048

On a VM whose free memory goes back to the host (virtio-balloon free page reporting), the
first write to a page the guest has not used recently faults in the host: once the files
outgrow the recently freed memory, each file costs about twice as much (see this script's
commit message). The second pass over files reuses the pages the first one freed. Python adds a few
microseconds per call; compare the rows, not the absolute figures. Needs ~2.5 GiB of /dev/shm
at the defaults; everything is deleted at the end.
"""
import os
import shutil
import sys
import tempfile
import time

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 600_000
SIZE = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
STEP = 100_000
payload = os.urandom(SIZE)


def report(label, started, done):
    print(f"  {label} {done - STEP + 1:>7}-{done:<7} {(time.monotonic() - started) / STEP * 1e6:6.2f} µs each", flush=True)


def files(root, label):
    for d in range(256):
        os.mkdir(os.path.join(root, f"{d:02x}"))
    started = time.monotonic()
    for i in range(COUNT):
        fd = os.open(os.path.join(root, f"{i % 256:02x}", str(i)), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, payload)
        os.close(fd)
        if (i + 1) % STEP == 0:
            report(label, started, i + 1)
            started = time.monotonic()


def appends(root):
    fd = os.open(os.path.join(root, "segment"), os.O_CREAT | os.O_WRONLY, 0o644)
    started = time.monotonic()
    offset = 0
    for i in range(COUNT):
        os.pwrite(fd, payload, offset)
        offset += SIZE
        if (i + 1) % STEP == 0:
            report("append", started, i + 1)
            started = time.monotonic()
    os.close(fd)
    os.unlink(os.path.join(root, "segment"))


base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
root = tempfile.mkdtemp(prefix="larder-tmpfs-cost.", dir=base)
try:
    print(f"{COUNT} entries of {SIZE} bytes in {root}")
    for label in ("files, first pass ", "files, second pass"):
        files(root, label)
        for d in range(256):
            shutil.rmtree(os.path.join(root, f"{d:02x}"))
    time.sleep(5)  # let the freed pages go back to the host, if they do
    appends(root)
finally:
    shutil.rmtree(root, ignore_errors=True)
