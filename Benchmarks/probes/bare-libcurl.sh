#!/usr/bin/env bash
# User-space instructions per transfer of a bare libcurl multi client (bare-libcurl.c) doing
# what a Larder miss asks of libcurl, against the local nginx origin of the benchmarks: the
# share of a miss no Larder change can remove while the design keeps libcurl. Compare with
# `Benchmarks/instructions-per-request.sh -w miss -b BIN`. Counts are the difference between
# runs of 200 and 200 + COUNT transfers, so start-up is not counted. Needs gcc, libcurl's
# headers (libcurl4-openssl-dev), valgrind and nginx.
#
#   Benchmarks/probes/bare-libcurl.sh [COUNT]
set -euo pipefail
cd "$(dirname "$0")/../.."
COUNT=${1:-2000}
ORIGIN_PORT=${ORIGIN_PORT:-18695}
source Benchmarks/common.sh
bench_setup bare-libcurl "$ORIGIN_PORT"
gcc -O2 -o "$dir/bare-libcurl" Benchmarks/probes/bare-libcurl.c -lcurl
origin="http://127.0.0.1:$ORIGIN_PORT/obj/1k"
for _ in $(seq 50); do curl -s -o /dev/null "$origin" && break; sleep 0.1; done
instructions() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$dir/bare-libcurl" "$origin" "$1" 2>&1 |
        awk '/refs:/ {gsub(",", "", $NF); print $NF}'
}
base=$(instructions 200)
total=$(instructions $((200 + COUNT)))
echo "bare libcurl: $(( (total - base) / COUNT )) instructions per transfer ($COUNT transfers of 1 KiB)"
