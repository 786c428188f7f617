#!/usr/bin/env bash
# Reproducible load tests of Larder alone: wrk through the proxy on loopback against a local
# nginx origin. Prints req/s and, for each workload, the ratio to the same load sent straight
# to the origin in the same run (for misses: the proxy's share of the time).
#
#   Benchmarks/run.sh                 # hit-1k, hit-100k, miss-1k; 5 s each
#   DURATION=10 CONNECTIONS=100 Benchmarks/run.sh
#
# The proxy is pinned to CPU 1 and wrk to CPU 0 when the machine has two or more CPUs.
# For the side-by-side comparison with Squid, nginx, Varnish, HAProxy and Traffic Server
# use ../shared/bench/run.sh (see docs/PERFORMANCE.md).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-50}
PROXY_PORT=${PROXY_PORT:-18390}
ORIGIN_PORT=${ORIGIN_PORT:-18391}
LARDER=${LARDER:-.build/release/larder}

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || need+=(nginx-light)
if [[ ${#need[@]} -gt 0 ]]; then
    echo "bench: installing ${need[*]}"
    sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
[[ -x $LARDER ]] || { echo "bench: $LARDER missing (make release)"; exit 1; }

source Benchmarks/common.sh
bench_setup bench "$ORIGIN_PORT"
[[ -n "${BENCH_DEBUG:-}" ]] && trap - EXIT   # keep the scratch directory and processes
"${pin_proxy[@]}" "$LARDER" serve --listen "127.0.0.1:$PROXY_PORT" --admin-listen 127.0.0.1:0 \
    --cache-dir "$dir/cache" >/dev/null 2>"$dir/larder.err" &
pids+=($!)
for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$ORIGIN_PORT/obj/1k" && \
        curl -s -o /dev/null -x "http://127.0.0.1:$PROXY_PORT" "http://127.0.0.1:$ORIGIN_PORT/obj/1k" && break
    sleep 0.1
done

# wrk's req/s from its summary line; a run with failed or non-2xx responses is an error.
rate() {
    local output; output=$(cat)
    if grep -qE 'Non-2xx|Socket errors' <<<"$output"; then
        echo "bench: errors during the run:" >&2; echo "$output" >&2; exit 1
    fi
    awk '/Requests\/sec/ {print $2}' <<<"$output"
}

load() {  # load TARGET_URL MODE → req/s through the proxy
    "${pin_load[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s Benchmarks/absolute-form.lua \
        "http://127.0.0.1:$PROXY_PORT/" -- "$1" "$2" | rate
}
direct() {  # direct TARGET_URL → req/s straight to the origin
    "${pin_load[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "$1" | rate
}

printf '%-10s %14s %14s %10s\n' workload "larder req/s" "origin req/s" "ratio"
for workload in hit-1k hit-100k miss-1k; do
    bench_workload "$workload"
    status=$(curl -s -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$PROXY_PORT" "$url")   # warm
    [[ $status == 200 ]] || { echo "bench: $url through the proxy answered $status"; exit 1; }
    proxied=$(load "$url" "$mode")
    straight=$(direct "$url")
    printf '%-10s %14.0f %14.0f %10.2f\n' "$workload" "$proxied" "$straight" "$(echo "$proxied / $straight" | bc -l)"
done
