#!/usr/bin/env bash
# Timer interrupts and TCP pacing per request on the proxy's core, for Larder and (with -n)
# nginx configured as in ../shared/bench, on the same workload one after the other.
#
#   Benchmarks/probes/pacing-timers.sh [-n] [-w hit-1k|hit-100k|miss-1k] [-d SECONDS] BIN
#
# For each proxy: req/s, CPU per request (utime + stime; for nginx its worker's), local timer
# interrupts on the proxy's CPU per request (/proc/interrupts, LOC), TCP pacing-timer expiries
# (`tcp_pace_kick`, from the timer:hrtimer_expire_entry tracepoint; needs perf, run as root) and
# the congestion control state of its client connections (`ss -ti`: the algorithm and BBR's
# pacing gain). An earlier measurement found that the system's default BBR paced about every
# other 100 KiB Larder response on loopback with a high-resolution timer, and no nginx response;
# a later one found why (Benchmarks/probes/first-responses.bt) and removed the cause.
# Same setup as compare.sh: local nginx origin, caches on a tmpfs, proxy on CPU 1, wrk on CPU 0.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKLOAD=hit-100k; DURATION=4; WITH_NGINX=0
while getopts "nw:d:" option; do
    case $option in
        n) WITH_NGINX=1 ;; w) WORKLOAD=$OPTARG ;; d) DURATION=$OPTARG ;;
        *) echo "usage: $0 [-n] [-w workload] [-d seconds] BIN" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -eq 1 ]] || { echo "usage: $0 [-n] [-w workload] [-d seconds] BIN" >&2; exit 2; }
BINARY=$1
ORIGIN_PORT=${ORIGIN_PORT:-18693}; LARDER_PORT=18694; NGINX_PORT=18696
PROXY_CPU=1

source Benchmarks/common.sh
bench_setup pacing "$ORIGIN_PORT"
[[ ${#pin_proxy[@]} -gt 0 ]] || { echo "needs two CPUs and taskset: the proxy's core is measured alone" >&2; exit 2; }
bench_workload "$WORKLOAD" || exit 2

"${pin_proxy[@]}" "$BINARY" serve --config Benchmarks/shared-bench.toml --listen "127.0.0.1:$LARDER_PORT" \
    --admin-listen 127.0.0.1:0 --cache-dir "$dir/cache" >/dev/null 2>"$dir/larder.err" & pids+=($!)
targets=("larder $! $LARDER_PORT")
if [[ $WITH_NGINX == 1 ]]; then
    bench_start_peer nginx "$NGINX_PORT" || exit 2
    targets+=("nginx $peer_pid $NGINX_PORT")
fi
for target in "${targets[@]}"; do
    read -r _ _ port <<<"$target"
    bench_wait_proxy "$port" "$url" || exit 1
done

local_timer_interrupts() { awk -v cpu=$((PROXY_CPU + 2)) '$1 == "LOC:" {print $cpu}' /proc/interrupts; }
tracing=0
if [[ $(id -u) == 0 ]] && command -v perf >/dev/null && perf list 'timer:hrtimer_expire_entry' 2>/dev/null | grep -q hrtimer_expire_entry; then tracing=1; fi
hertz=$(getconf CLK_TCK)

for target in "${targets[@]}"; do
    read -r name pid port <<<"$target"
    # nginx's master also has cache manager and loader children: measure the worker.
    if [[ $name == nginx ]]; then pid=$(bench_nginx_worker "$pid") || exit 1; fi
    "${pin_load[@]}" wrk -t1 -c50 -d"$((DURATION + 4))s" -s Benchmarks/absolute-form.lua "http://127.0.0.1:$port/" -- "$url" "$mode" \
        >"$dir/wrk-$name.out" &
    load=$!
    sleep 1
    # The connections' congestion state, while wrk is running.
    ss -tin state established "( sport = :$port )" >"$dir/ss-$name.txt"
    before_ticks=$(bench_cpu_ticks "$pid"); before_timers=$(local_timer_interrupts); started=$(date +%s.%N)
    if [[ $tracing == 1 ]]; then
        perf record -q -e timer:hrtimer_expire_entry -C "$PROXY_CPU" -o "$dir/timers-$name.data" -- sleep "$DURATION" >/dev/null 2>&1
    else
        sleep "$DURATION"
    fi
    after_ticks=$(bench_cpu_ticks "$pid"); after_timers=$(local_timer_interrupts); ended=$(date +%s.%N)
    wait "$load"
    rate=$(awk '/^Requests\/sec:/ {print $2}' "$dir/wrk-$name.out")
    # The CPU and interrupt window includes perf's start-up, so it is longer than DURATION; wrk
    # runs 4 s more than DURATION to cover it. Requests in a window come from wrk's rate.
    window=$(echo "$ended - $started" | bc -l)
    if (( $(echo "1 + $window > $DURATION + 4" | bc -l) )); then
        echo "$name: the measured window ($window s) outlasted wrk's run; figures would be wrong" >&2; exit 1
    fi
    requests=$(echo "$rate * $window" | bc -l)
    pace="n/a (needs root and perf)"
    if [[ $tracing == 1 ]]; then
        # perf recorded for DURATION seconds exactly.
        kicks=$(perf script -i "$dir/timers-$name.data" 2>/dev/null | grep -c 'function=tcp_pace_kick' || true)
        pace=$(printf '%d in %ss, %.3f per request' "$kicks" "$DURATION" "$(echo "$kicks / ($rate * $DURATION)" | bc -l)")
    fi
    cc=$( (grep -oE '^\s+[a-z0-9_]+ wscale' "$dir/ss-$name.txt" || true) | awk '{print $1}' | sort | uniq -c | sort -rn \
        | awk '{printf "%s%s on %d connections", (NR > 1 ? ", " : ""), $2, $1}')
    gain=$( (grep -oE 'pacing_gain:[0-9.]+' "$dir/ss-$name.txt" || true) | sort | uniq -c | sort -rn \
        | awk '{printf "%s%s on %d", (NR > 1 ? ", " : ""), $2, $1}')
    printf '%s: %.0f req/s, %.1f µs CPU per request, %.3f timer interrupts per request on CPU %d, pacing timers %s; %s; BBR %s\n' \
        "$name" "$rate" "$(echo "($after_ticks - $before_ticks) * 1000000 / $hertz / $requests" | bc -l)" \
        "$(echo "($after_timers - $before_timers) / $requests" | bc -l)" "$PROXY_CPU" "$pace" "${cc:-no connections seen}" "${gain:-none}"
done
