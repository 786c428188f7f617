#!/usr/bin/env bash
# Two Larder binaries on the same workload, in one run, interleaved: the before/after ratio of a
# change (for example with and without a feature on the hit path).
#
#   Benchmarks/compare.sh BEFORE_BINARY AFTER_BINARY [hit-1k|hit-100k|hit-512k|hit-1m|hit-2m|hit-10m|miss-1k] [REPS]
#   BEFORE_CONFIG=a.toml AFTER_CONFIG=b.toml Benchmarks/compare.sh BIN BIN hit-100k   # two configurations
#
# Prints each rep's req/s for both and the median ratio after/before. Same setup as run.sh:
# local nginx origin, cache on a tmpfs, proxy pinned to CPU 1 and wrk to CPU 0; hit-10m is
# loaded by bigload.py at 8 connections (CONNECTIONS_10M), as the shared harness does.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=$1; AFTER=$2; WORKLOAD=${3:-hit-1k}; REPS=${4:-5}
DURATION=${DURATION:-5}; CONNECTIONS=${CONNECTIONS:-50}
ORIGIN_PORT=${ORIGIN_PORT:-18393}; PORT_A=18394; PORT_B=18395

source Benchmarks/common.sh
bench_setup compare "$ORIGIN_PORT"
"${pin_proxy[@]}" "$BEFORE" serve ${BEFORE_CONFIG:+--config "$BEFORE_CONFIG"} --listen "127.0.0.1:$PORT_A" --admin-listen 127.0.0.1:0 --cache-dir "$dir/a" >/dev/null 2>"$dir/a.err" & pids+=($!)
"${pin_proxy[@]}" "$AFTER" serve ${AFTER_CONFIG:+--config "$AFTER_CONFIG"} --listen "127.0.0.1:$PORT_B" --admin-listen 127.0.0.1:0 --cache-dir "$dir/b" >/dev/null 2>"$dir/b.err" & pids+=($!)
bench_workload "$WORKLOAD" || exit 2
for port in $PORT_A $PORT_B; do bench_wait_proxy "$port" "$url" || exit 1; done
if [[ $WORKLOAD == hit-10m ]]; then
    # As in ../shared/bench: 8 connections and a client that discards bodies in the kernel.
    rate() { "${pin_load[@]}" python3 Benchmarks/bigload.py "$1" "$url" "${CONNECTIONS_10M:-8}" "$DURATION" | awk '/Requests\/sec/ {print $2}'; }
else
    rate() { "${pin_load[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s Benchmarks/absolute-form.lua "http://127.0.0.1:$1/" -- "$url" "$mode" | awk '/Requests\/sec/ {print $2}'; }
fi
ratios=()
printf '%-4s %14s %14s %8s\n' rep before after ratio
for rep in $(seq "$REPS"); do
    a=$(rate $PORT_A); b=$(rate $PORT_B)
    ratio=$(echo "$b / $a" | bc -l)
    ratios+=("$ratio")
    printf '%-4s %14.0f %14.0f %8.3f\n' "$rep" "$a" "$b" "$ratio"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
printf '%s: median after/before %.3f over %s interleaved reps\n' "$WORKLOAD" "$median" "$REPS"
