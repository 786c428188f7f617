#!/usr/bin/env bash
# Where a miss's CPU goes, by object (the kernel, the proxy's own code, each library), Larder
# beside HAProxy: microseconds of the proxy's CPU per miss under miss-1k at 50 connections,
# from `perf record` of the proxy process over one wrk run, split by `perf report --sort dso`.
# Each proxy first serves an unrecorded run of the same load, so a tier's first growth (the
# faults of fresh memory, which a VM may make dear) is not what is measured.
#
#   Benchmarks/probes/miss-cpu-split.sh [-d SECONDS] [-c CONNECTIONS] BIN...
#
# Root and perf. Same setup as cpu-per-request.sh: local nginx origin, caches on a tmpfs,
# Benchmarks/shared-bench.toml (CONFIG=FILE for another), proxies on CPU 1, wrk and the origin
# on CPU 0. HAProxy is configured as in ../shared/bench. The sampling adds to every figure.
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=5; CONNECTIONS=50
usage="usage: $0 [-d seconds] [-c connections] BIN..."
while getopts "d:c:" option; do
    case $option in
        d) DURATION=$OPTARG ;; c) CONNECTIONS=$OPTARG ;; *) echo "$usage" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -ge 1 ]] || { echo "$usage" >&2; exit 2; }
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 2; }
ORIGIN_PORT=${ORIGIN_PORT:-18793}; FIRST_PORT=18794

source Benchmarks/common.sh
bench_setup split "$ORIGIN_PORT"
bench_workload miss-1k

# load PORT: one wrk run; prints the requests it completed.
load() {
    "${pin_load[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s Benchmarks/absolute-form.lua \
        "http://127.0.0.1:$1/" -- "$url" "$mode" | awk '/requests in/ {print $1}'
}

# measure NAME PID PORT: a warm-up run, then a recorded one; prints µs per miss by object.
measure() {
    local name=$1 pid=$2 port=$3 recorder requests before after
    load "$port" >/dev/null
    before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    perf record -q -p "$pid" -o "$dir/$name.data" >/dev/null 2>&1 & recorder=$!; pids+=("$recorder")
    sleep 0.5
    requests=$(load "$port")
    after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill -INT "$recorder"; wait "$recorder" || true
    local perMiss
    perMiss=$(awk -v t=$((after - before)) -v n="$requests" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", t / hz * 1e6 / n}')
    echo "== $name: $requests misses, $perMiss µs of CPU a miss (utime + stime, sampling included)"
    perf report -i "$dir/$name.data" --no-children --sort dso --stdio -g none 2>/dev/null \
        | awk -v m="$perMiss" '/^ +[0-9.]+%/ {share = $1; sub("%", "", share); if (share >= 0.5) printf "  %-28s %5.1f %%  %5.1f µs\n", $2, share, share * m / 100}'
}

for index in $(seq 0 $(($# - 1))); do
    binaries=("$@"); port=$((FIRST_PORT + index))
    bench_start_larder "${binaries[$index]}" "$port" "$index"
    bench_wait_proxy "$port" "$url"
    measure "larder$index" "$proxy" "$port"
    kill "$proxy"
done
port=$((FIRST_PORT + 50))
bench_start_haproxy "$port" || exit 2
measure haproxy "$peer_pid" "$port"
