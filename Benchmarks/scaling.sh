#!/usr/bin/env bash
# Multi-core scaling on this host: Larder with `workers = 1` against `workers = "auto"` (one
# event loop per CPU this process may use), unpinned, wrk unpinned too (-t2, 50 connections),
# interleaved reps of hit-1k and miss-1k; then the lock contention of the "auto" daemon under
# the same loads, counted rather than guessed: the daemon runs under `strace --seccomp-bpf
# -e trace=futex`, which stops it only at futex calls. An uncontended Mutex never makes one;
# FUTEX_LOCK_PI/FUTEX_UNLOCK_PI are a Mutex that was held by another thread,
# FUTEX_WAIT/FUTEX_WAKE the disk threads' and Dispatch's waits and wake-ups.
#
#   Benchmarks/scaling.sh BIN [SECONDS] [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:?usage: $0 BIN [SECONDS] [REPS]}
DURATION=${2:-5}; REPS=${3:-3}
command -v strace >/dev/null || { echo "needs strace (apt-get install strace)" >&2; exit 2; }
ORIGIN_PORT=${ORIGIN_PORT:-18593}; FIRST_PORT=18594

source Benchmarks/common.sh
bench_setup scaling "$ORIGIN_PORT"
pin_proxy=(); pin_load=()   # unpinned: the loops may use both CPUs
for workers in 1 auto; do
    { cat Benchmarks/shared-bench.toml; printf '\n[proxy]\nworkers = %s\n' "$([[ $workers == auto ]] && echo '"auto"' || echo 1)"; } \
        > "$dir/workers-$workers.toml"
done

start() { # start PORT CONFIG [LAUNCHER...]: a daemon; sets `started`
    local port=$1 config=$2; shift 2
    "$@" "$binary" serve --config "$config" --listen "127.0.0.1:$port" --admin-listen 127.0.0.1:0 \
        --cache-dir "$dir/cache-$port" >/dev/null 2>"$dir/proxy-$port.err" & pids+=($!)
    started=$!
}
start "$FIRST_PORT" "$dir/workers-1.toml"; one=$started
start $((FIRST_PORT + 1)) "$dir/workers-auto.toml"; auto=$started

hertz=$(getconf CLK_TCK)
load() { # load PORT WORKLOAD: wrk's req/s, then the requests made
    bench_workload "$2"
    local out
    out=$(wrk -t2 -c50 -d"${DURATION}s" -s Benchmarks/absolute-form.lua "http://127.0.0.1:$1/" -- "$url" "$mode")
    echo "$(awk '/^Requests\/sec:/ {printf "%d", $2}' <<<"$out") $(awk '/requests in/ {print $1}' <<<"$out")"
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A rate cpu
for workload in hit-1k miss-1k; do
    bench_workload "$workload"
    bench_wait_proxy "$FIRST_PORT" "$url"; bench_wait_proxy $((FIRST_PORT + 1)) "$url"
    for rep in $(seq "$REPS"); do
        for name in one auto; do
            pid=${!name}; port=$FIRST_PORT; [[ $name == auto ]] && port=$((FIRST_PORT + 1))
            before=$(bench_cpu_ticks "$pid")
            read -r per_second requests < <(load "$port" "$workload")
            after=$(bench_cpu_ticks "$pid")
            rate[$workload-$name]="${rate[$workload-$name]:-} $per_second"
            cpu[$workload-$name]="${cpu[$workload-$name]:-} $(echo "($after - $before) * 1000000 / $hertz / $requests" | bc -l)"
            printf '%s rep %d workers=%s: %d req/s\n' "$workload" "$rep" "$([[ $name == one ]] && echo 1 || echo auto)" "$per_second"
        done
    done
done
loops=$(grep -o 'workers=[0-9]*' "$dir/proxy-$((FIRST_PORT + 1)).err" | head -1)
for workload in hit-1k miss-1k; do
    printf '%s: workers=1 %d req/s (%.1f µs CPU/req), workers=auto (%s) %d req/s (%.1f µs CPU/req): %.2fx\n' "$workload" \
        "$(median <<<"${rate[$workload-one]}")" "$(median <<<"${cpu[$workload-one]}")" "$loops" \
        "$(median <<<"${rate[$workload-auto]}")" "$(median <<<"${cpu[$workload-auto]}")" \
        "$(echo "$(median <<<"${rate[$workload-auto]}") / $(median <<<"${rate[$workload-one]}")" | bc -l)"
done

# Contention: a third daemon, "auto", under strace that sees only futex calls.
kill "$one" "$auto"
port=$((FIRST_PORT + 2))
start "$port" "$dir/workers-auto.toml" strace -f --seccomp-bpf -e trace=futex -o "$dir/futex.txt"
for workload in hit-1k miss-1k; do
    bench_workload "$workload"
    bench_wait_proxy "$port" "$url"
    offset=$(stat -c %s "$dir/futex.txt")
    read -r per_second requests < <(load "$port" "$workload")
    printf '%s under strace: %d requests (%d req/s); futex calls per 1,000 requests by operation:\n' "$workload" "$requests" "$per_second"
    tail -c +$((offset + 1)) "$dir/futex.txt" | grep -ao 'futex([^,]*, FUTEX_[A-Z_]*' | sed 's/.*FUTEX_/FUTEX_/; s/_PRIVATE$//' | sort | uniq -c |
        awk -v n="$requests" '{ printf "  %-16s %8.2f\n", $2, $1 * 1000 / n }'
done
# strace does not end the daemon it started when it is itself stopped: stop the daemon.
pkill -P "$started" || true
