#!/usr/bin/env bash
# User-space instructions per request (callgrind's Ir) for one or more Larder binaries, over N
# sequential requests on one curl connection through the local nginx origin. Unlike timings,
# instruction counts repeat to within a few per cent on a noisy VM (hits: to 0.1 %), so small
# changes on the request path can be measured. Kernel time is not counted. Swift's hashing is
# made deterministic (SWIFT_DETERMINISTIC_HASHING), but a miss's count still moves by up to
# 2.5 % between runs of one binary (lower when the origin's answer is already there at curl's
# first readiness check): name a binary more than once and compare the lowest.
#
#   Benchmarks/instructions-per-request.sh [-w miss|hit] [-n REQUESTS] [-b] [-v] BIN...
#
# -b: requests shaped as the shared harness's wrk sends them (request line and Host only)
# instead of curl's (Host, User-Agent, Accept, Proxy-Connection). -v: responses that carry
# `Vary: Accept-Encoding`, asked for with `Accept-Encoding: gzip, deflate, br`. CONFIG=FILE runs every
# binary with that configuration (default Benchmarks/shared-bench.toml, as the harness does).
# ORIGIN_PORT and PROXY_PORT (default 18693, 18694) let two measurements run side by side.
#
# miss: N distinct 1 KiB URLs, the same for every binary (each a miss, stored in memory and
# on disk, into a fresh cache directory); hit: 200 URLs
# fetched once, then N memory hits on them. Counting starts after a warm-up and covers every
# thread of the proxy. Needs valgrind; a copy of each binary without DWARF is profiled
# (valgrind 3.19 cannot read the DWARF 5 of Swift 6 binaries; symbols are kept).
# `callgrind_annotate --inclusive=yes $dir/BIN.out` on a kept profile (KEEP=1) shows where.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKLOAD=miss; REQUESTS=1000; SHAPE=(); VARY=()
while getopts "w:n:bv" option; do
    case $option in
        w) WORKLOAD=$OPTARG ;; n) REQUESTS=$OPTARG ;; b) SHAPE=(-H "User-Agent:" -H "Accept:" -H "Proxy-Connection:") ;;
        v) VARY=(-H "Accept-Encoding: gzip, deflate, br") ;;
        *) echo "usage: $0 [-w miss|hit] [-n requests] [-b] [-v] BIN..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -ge 1 ]] || { echo "usage: $0 [-w miss|hit] [-n requests] [-b] [-v] BIN..." >&2; exit 2; }
[[ $WORKLOAD == miss || $WORKLOAD == hit ]] || { echo "unknown workload $WORKLOAD" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
ORIGIN_PORT=${ORIGIN_PORT:-18693}; PROXY_PORT=${PROXY_PORT:-18694}

source Benchmarks/common.sh
bench_setup instructions "$ORIGIN_PORT"
origin="http://127.0.0.1:$ORIGIN_PORT/obj/1k"
[[ ${#VARY[@]} -gt 0 ]] && origin="http://127.0.0.1:$ORIGIN_PORT/vary/1k"
for _ in $(seq 50); do curl -s -o /dev/null "$origin" && break; sleep 0.1; done

binaries=("$@")
for index in "${!binaries[@]}"; do
    binary=${binaries[$index]}
    copy="$dir/bin$index"
    objcopy --strip-debug "$binary" "$copy"
    mkdir -p "$dir/cache$index"
    # Pinned to one CPU as the shared harness pins a proxy: `workers = "auto"` then starts one
    # loop, as there (two loops add the fill registry's work to every miss).
    SWIFT_DETERMINISTIC_HASHING=1 ${pin_proxy[@]+"${pin_proxy[@]}"} valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/bin$index.out" \
        "$copy" serve --config "${CONFIG:-Benchmarks/shared-bench.toml}" --listen "127.0.0.1:$PROXY_PORT" \
        --admin-listen 127.0.0.1:0 --cache-dir "$dir/cache$index" >/dev/null 2>"$dir/valgrind$index.err" &
    proxy=$!; pids+=("$proxy")
    proxy_url="http://127.0.0.1:$PROXY_PORT"
    fetch() { curl -s ${SHAPE[@]+"${SHAPE[@]}"} ${VARY[@]+"${VARY[@]}"} -x "$proxy_url" "$@"; }
    for _ in $(seq 300); do fetch -o /dev/null "$origin?warm=start" && break; sleep 0.2; done
    # Warm-up: connections, the curl handle pool, the first leaf directories, the hit set.
    fetch "$origin?warm=[1-200]" >/dev/null
    callgrind_control -i on "$proxy" >/dev/null 2>&1
    if [[ $WORKLOAD == miss ]]; then
        fetch "$origin?run=[1-$REQUESTS]" >/dev/null
    else
        for _ in $(seq $((REQUESTS / 200))); do fetch "$origin?warm=[1-200]" >/dev/null; done
    fi
    callgrind_control -i off "$proxy" >/dev/null 2>&1
    kill "$proxy"; wait "$proxy" 2>/dev/null || true
    total=$(awk '/^totals:/ {print $2; exit}' "$dir/bin$index.out")
    [[ $WORKLOAD == hit ]] && REQUESTS=$((REQUESTS / 200 * 200))
    printf '#%d %s: %d instructions per request (%s, %d requests)\n' "$index" "$binary" $((total / REQUESTS)) "$WORKLOAD" "$REQUESTS"
done
if [[ ${KEEP:-0} == 1 ]]; then
    trap - EXIT
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    echo "profiles kept in $dir (bin*.out)"
fi
