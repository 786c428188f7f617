#!/usr/bin/env bash
# Proxy CPU time per request (and the kernel's part of it) and wrk's p50 latency, for one or more Larder binaries on the same
# workload, interleaved in one run. CPU per request (utime + stime of the proxy process over the
# requests wrk completed) moves far less between runs on a noisy VM than req/s does. Where wrk
# is the bottleneck (hit-100k), its own CPU per request ("client") is what sets req/s: a proxy
# changes it through what the client's kernel does with its writes (docs/PERFORMANCE.md, "Design choices").
#
#   Benchmarks/cpu-per-request.sh [-n] [-a] [-m MIB] [-w miss-1k|miss-100k|miss-10m|hit-1k|hit-100k|hit-512k|hit-1m|hit-2m|hit-10m] [-c CONNECTIONS] [-r REPS] BIN[@CONFIG]...
#
# -n adds nginx configured as in ../shared/bench (its worker's CPU) to the interleave, -a
# HAProxy configured as there. -m MIB keeps that much memory touched by another process during
# the run, as the idle peers of the shared harness do (HAProxy's cache alone is 2 GiB): on a VM
# whose memory the host backs on first touch, a proxy's new pages then cost more ("faults" is
# page faults per request). "switches" is context switches per request over all the proxy's
# threads: a thread hand-off shows there whatever the VM's speed does to the CPU figures.
# Same setup as compare.sh: local nginx origin, caches on a tmpfs, proxies pinned to CPU 1 and
# wrk and the origin to CPU 0. Prints each rep and the medians per binary. CONFIG=FILE runs
# every binary with that configuration (Benchmarks/shared-bench.toml: as the shared harness);
# BIN@FILE runs that one with FILE instead (the same binary can come more than once).
# PERF=DIR writes DIR/INDEX.data, `perf record -g` of the proxies' CPU under the same load, in
# a run of its own before the reps.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKLOAD=miss-1k; CONNECTIONS=50; REPS=5; DURATION=${DURATION:-3}; WITH_NGINX=0; WITH_HAPROXY=0; NEIGHBOUR_MIB=0
usage="usage: $0 [-n] [-a] [-m MiB] [-w workload] [-c connections] [-r reps] BIN[@CONFIG]..."
while getopts "nam:w:c:r:" option; do
    case $option in
        n) WITH_NGINX=1 ;; a) WITH_HAPROXY=1 ;; m) NEIGHBOUR_MIB=$OPTARG ;; w) WORKLOAD=$OPTARG ;; c) CONNECTIONS=$OPTARG ;;
        r) REPS=$OPTARG ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -ge 1 ]] || { echo "$usage" >&2; exit 2; }
[[ $NEIGHBOUR_MIB =~ ^[0-9]+$ ]] || { echo "-m takes a number of MiB" >&2; exit 2; }
ORIGIN_PORT=${ORIGIN_PORT:-18493}; FIRST_PORT=18494
if [[ -n ${PERF:-} ]] && ! command -v perf >/dev/null; then echo "PERF= needs perf (apt-get install linux-perf)" >&2; exit 2; fi

source Benchmarks/common.sh
bench_setup cpu "$ORIGIN_PORT"
bench_workload "$WORKLOAD" || exit 2
binaries=("$@"); proxies=()
for index in "${!binaries[@]}"; do
    binary=${binaries[$index]%%@*}; config=${CONFIG:-}
    [[ ${binaries[$index]} == *@* ]] && config=${binaries[$index]#*@}
    port=$((FIRST_PORT + index))
    "${pin_proxy[@]}" "$binary" serve ${config:+--config "$config"} --listen "127.0.0.1:$port" --admin-listen 127.0.0.1:0 \
        --cache-dir "$dir/cache$index" >/dev/null 2>"$dir/proxy$index.err" & pids+=($!)
    proxies+=($!)
done
# Larder first, then the peers: HAProxy faults in its whole cache (total-max-size, 2 GiB) as it
# starts, which takes seconds of the proxies' CPU.
for index in "${!proxies[@]}"; do
    bench_wait_proxy $((FIRST_PORT + index)) "$url" || exit 1
done
first_peer=${#proxies[@]}
if [[ $WITH_NGINX == 1 ]]; then
    bench_start_peer nginx $((FIRST_PORT + ${#binaries[@]})) || exit 2
    binaries+=(nginx); proxies+=("$peer_pid")
fi
if [[ $WITH_HAPROXY == 1 ]]; then
    bench_start_peer haproxy $((FIRST_PORT + ${#binaries[@]})) || exit 2
    binaries+=(haproxy); proxies+=("$peer_pid")
fi
for ((index = first_peer; index < ${#proxies[@]}; index++)); do
    bench_wait_proxy $((FIRST_PORT + index)) "$url" 30 || exit 1
done
# Measure nginx's worker, not its master.
if [[ $WITH_NGINX == 1 ]]; then
    nginx_index=$((${#binaries[@]} - 1 - WITH_HAPROXY))
    proxies[$nginx_index]=$(bench_nginx_worker "${proxies[$nginx_index]}") || exit 1
fi

if [[ $NEIGHBOUR_MIB -gt 0 ]]; then
    "${pin_load[@]}" python3 -c '
import mmap, sys, time
size = int(sys.argv[1]) << 20
block = mmap.mmap(-1, size)
for offset in range(0, size, 4096):
    block[offset] = 1
open(sys.argv[2], "w").close()
time.sleep(86400)' "$NEIGHBOUR_MIB" "$dir/neighbour-ready" & pids+=($!)
    for _ in $(seq 600); do [[ -e $dir/neighbour-ready ]] && break; sleep 0.1; done
    [[ -e $dir/neighbour-ready ]] || { echo "the $NEIGHBOUR_MIB MiB neighbour did not start within 60 s" >&2; exit 1; }
fi

# PERF=DIR: before the reps, one run of the same load per proxy with `perf record -g` on CPU 1
# (the proxy's), kept out of the figures, which sampling would inflate.
if [[ -n ${PERF:-} ]]; then
    mkdir -p "$PERF"
    for index in "${!proxies[@]}"; do
        perf record -q -C 1 -g -o "$PERF/$index.data" >/dev/null 2>&1 & recorder=$!
        sleep 0.5
        "${pin_load[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s Benchmarks/absolute-form.lua \
            "http://127.0.0.1:$((FIRST_PORT + index))/" -- "$url" "$mode" >/dev/null
        kill -INT "$recorder" 2>/dev/null || true; wait "$recorder" || true
    done
fi

hertz=$(getconf CLK_TCK)
declare -A cpu system client latency rates faults switches
for rep in $(seq "$REPS"); do
    line="rep $rep:"
    for index in "${!proxies[@]}"; do
        pid=${proxies[$index]}; port=$((FIRST_PORT + index))
        before=$(bench_cpu_ticks "$pid"); system_before=$(bench_system_ticks "$pid"); faults_before=$(bench_minor_faults "$pid")
        switches_before=$(bench_switches "$pid")
        # wrk runs in a subshell whose `times` then reports its children's user and system time.
        out=$( ("${pin_load[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s Benchmarks/absolute-form.lua \
            "http://127.0.0.1:$port/" -- "$url" "$mode"; times >"$dir/times") )
        after=$(bench_cpu_ticks "$pid"); system_after=$(bench_system_ticks "$pid"); faults_after=$(bench_minor_faults "$pid")
        switches_after=$(bench_switches "$pid")
        requests=$(awk '/requests in/ {print $1}' <<<"$out")
        p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
        rate=$(awk '/^Requests\/sec:/ {printf "%d", $2}' <<<"$out")
        micros=$(echo "($after - $before) * 1000000 / $hertz / $requests" | bc -l)
        system_micros=$(echo "($system_after - $system_before) * 1000000 / $hertz / $requests" | bc -l)
        read -r client_user client_system < <(sed -n 2p "$dir/times")
        client_micros=$(echo "($(bench_seconds "$client_user") + $(bench_seconds "$client_system")) * 1000000 / $requests" | bc -l)
        cpu[$index]="${cpu[$index]:-} $micros"; system[$index]="${system[$index]:-} $system_micros"
        faults[$index]="${faults[$index]:-} $(echo "($faults_after - $faults_before) / $requests" | bc -l)"
        switches[$index]="${switches[$index]:-} $(echo "($switches_after - $switches_before) / $requests" | bc -l)"
        latency[$index]="${latency[$index]:-} $p50"
        client[$index]="${client[$index]:-} $client_micros"; rates[$index]="${rates[$index]:-} $rate"
        line+=$(printf '  #%d %6.1f µs CPU/req (system %5.1f, client %5.1f) %6d req/s p50 %s' \
            "$index" "$micros" "$system_micros" "$client_micros" "$rate" "$p50")
    done
    echo "$line"
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for index in "${!proxies[@]}"; do
    printf '#%d %s: median %.1f µs CPU per request (system %.1f, client %.1f, faults %.2f, switches %.2f), median %d req/s, p50 latencies:%s (%s, %s connections)\n' \
        "$index" "${binaries[$index]}" "$(median <<<"${cpu[$index]}")" "$(median <<<"${system[$index]}")" "$(median <<<"${client[$index]}")" \
        "$(median <<<"${faults[$index]}")" "$(median <<<"${switches[$index]}")" \
        "$(median <<<"${rates[$index]}")" "${latency[$index]}" "$WORKLOAD" "$CONNECTIONS"
done
