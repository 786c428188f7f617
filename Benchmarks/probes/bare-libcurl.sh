#!/usr/bin/env bash
# What libcurl alone costs per transfer, doing what a Larder miss asks of it (bare-libcurl.c on
# an epoll loop, as Larder drives curl), against the local nginx origin of the benchmarks: the
# share of a miss no Larder change can remove while the design keeps libcurl. Prints, for one
# connection and for CONCURRENCY keep-alive connections: user-space instructions per transfer
# (the difference between runs of 500 and 500 + COUNT transfers under callgrind, so start-up is
# not counted), and CPU time per transfer over TIMED transfers with the client pinned to CPU 1
# and the origin to CPU 0, as cpu-per-request.sh pins a proxy. Compare with
# `Benchmarks/instructions-per-request.sh -w miss -b BIN` and `cpu-per-request.sh -a BIN`.
# Needs gcc, libcurl's headers (libcurl4-openssl-dev), valgrind and nginx. CURL_PREFIX=DIR
# builds against the libcurl installed under DIR instead (DIR/include, DIR/lib), to compare
# versions.
#
#   Benchmarks/probes/bare-libcurl.sh [COUNT] [CONCURRENCY] [TIMED]
set -euo pipefail
cd "$(dirname "$0")/../.."
COUNT=${1:-2000}
CONCURRENCY=${2:-50}
TIMED=${3:-100000}
ORIGIN_PORT=${ORIGIN_PORT:-18695}
source Benchmarks/common.sh
bench_setup bare-libcurl "$ORIGIN_PORT"
if [[ -n ${CURL_PREFIX:-} ]]; then
    gcc -O2 -Wall -I"$CURL_PREFIX/include" -o "$dir/bare-libcurl" Benchmarks/probes/bare-libcurl.c \
        -L"$CURL_PREFIX/lib" -Wl,-rpath,"$CURL_PREFIX/lib" -lcurl
else
    gcc -O2 -Wall -o "$dir/bare-libcurl" Benchmarks/probes/bare-libcurl.c -lcurl
fi
echo "libcurl: $(ldd "$dir/bare-libcurl" | awk '/libcurl/ {print $3}')"
origin="http://127.0.0.1:$ORIGIN_PORT/obj/1k"
for _ in $(seq 50); do curl -s -o /dev/null "$origin" && break; sleep 0.1; done
instructions() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$dir/bare-libcurl" "$origin" "$1" "$2" 2>&1 |
        awk '/refs:/ {gsub(",", "", $NF); print $NF}'
}
for connections in 1 "$CONCURRENCY"; do
    base=$(instructions 500 "$connections")
    total=$(instructions $((500 + COUNT)) "$connections")
    # The client's user and system time: bash's `times` in a subshell reports its children's.
    read -r user system < <( ("${pin_proxy[@]}" "$dir/bare-libcurl" "$origin" "$TIMED" "$connections"; times) | sed -n 2p)
    printf 'bare libcurl, %d connection(s): %d instructions per transfer (%d transfers of 1 KiB); %.1f µs CPU per transfer (user %.1f, system %.1f; %d transfers)\n' \
        "$connections" $(((total - base) / COUNT)) "$COUNT" \
        "$(echo "($(bench_seconds "$user") + $(bench_seconds "$system")) * 1000000 / $TIMED" | bc -l)" \
        "$(echo "$(bench_seconds "$user") * 1000000 / $TIMED" | bc -l)" "$(echo "$(bench_seconds "$system") * 1000000 / $TIMED" | bc -l)" \
        "$TIMED"
done
