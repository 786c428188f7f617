#!/usr/bin/env bash
# Where the time of a request goes inside the proxy, system call by system call: for each
# Larder binary (and, with -a, HAProxy configured as in ../shared/bench), the mean time per
# request inside each system call and between consecutive ones (user space), from
# syscall-gaps.bt, over one wrk run. At one connection (the default) the pairs follow one
# request's path; the sum without the waits is the proxy's own part of the latency.
#
#   Benchmarks/probes/syscall-gaps.sh [-a] [-w miss-1k|hit-1k|hit-100k] [-c CONNECTIONS] [-d SECONDS] BIN...
#
# Root, bpftrace and a tracefs (mounted here if it is not). Same setup as compare.sh: local
# nginx origin, caches on a tmpfs, proxies on CPU 1, wrk and the origin on CPU 0.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORKLOAD=miss-1k; CONNECTIONS=1; DURATION=4; WITH_HAPROXY=0
usage="usage: $0 [-a] [-w workload] [-c connections] [-d seconds] BIN..."
while getopts "aw:c:d:" option; do
    case $option in
        a) WITH_HAPROXY=1 ;; w) WORKLOAD=$OPTARG ;; c) CONNECTIONS=$OPTARG ;; d) DURATION=$OPTARG ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -ge 1 || $WITH_HAPROXY == 1 ]] || { echo "$usage" >&2; exit 2; }
command -v bpftrace >/dev/null || { echo "needs bpftrace (apt-get install bpftrace)" >&2; exit 2; }
if [[ ! -d /sys/kernel/tracing/events ]]; then
    mount -t tracefs nodev /sys/kernel/tracing || { echo "no tracefs at /sys/kernel/tracing" >&2; exit 2; }
fi
ORIGIN_PORT=${ORIGIN_PORT:-18693}; FIRST_PORT=18694

source Benchmarks/common.sh
bench_setup gaps "$ORIGIN_PORT"
bench_workload "$WORKLOAD" || exit 2

# measure NAME PID PORT: traces PID during one wrk run through PORT and prints the table.
measure() {
    local name=$1 pid=$2 port=$3 tracer attached=0
    bpftrace Benchmarks/probes/syscall-gaps.bt "$pid" >"$dir/trace.out" 2>"$dir/trace.err" &
    tracer=$!; pids+=("$tracer")
    for _ in $(seq 100); do
        grep -q "Attaching" "$dir/trace.out" "$dir/trace.err" 2>/dev/null && { attached=1; break; }
        kill -0 "$tracer" 2>/dev/null || break
        sleep 0.1
    done
    [[ $attached == 1 ]] || { echo "bpftrace did not attach:" >&2; cat "$dir/trace.err" >&2; exit 1; }
    sleep 1   # attaching reports before every probe is live
    local out requests p50
    out=$("${pin_load[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s Benchmarks/absolute-form.lua \
        "http://127.0.0.1:$port/" -- "$url" "$mode")
    kill -INT "$tracer"; wait "$tracer" || true
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    echo "== $name: $requests requests, p50 $p50 ($WORKLOAD, $CONNECTIONS connections)"
    python3 - "$dir/trace.out" "$requests" <<'PY'
import re, sys
# x86-64 system call numbers of the calls a proxy makes per request.
names = {0: "read", 1: "write", 3: "close", 7: "poll", 17: "pread64", 18: "pwrite64", 19: "readv",
         20: "writev", 40: "sendfile", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg",
         202: "futex", 228: "clock_gettime", 232: "epoll_wait", 233: "epoll_ctl", 281: "epoll_pwait",
         288: "accept4", 295: "preadv", 296: "pwritev", 441: "epoll_pwait2"}
maps = {}
for line in open(sys.argv[1]):
    match = re.match(r"@(\w+)\[([\d, ]+)\]: (\d+)", line)
    if match:
        maps.setdefault(match.group(1), {})[tuple(int(x) for x in match.group(2).split(","))] = int(match.group(3))
requests = int(sys.argv[2])
name = lambda number: names.get(number, str(number))
waits = {232, 281, 441}
busy = 0.0
for key, total in sorted(maps.get("gap_ns", {}).items(), key=lambda item: -item[1]):
    count = maps["gap_count"][key]
    if count >= 0.2 * requests:
        print(f"  {name(key[0]):>13} -> {name(key[1]):<13} {total / count / 1000:7.1f} µs  x{count / requests:.2f}")
        busy += total / requests
for key, total in sorted(maps.get("in_ns", {}).items(), key=lambda item: -item[1]):
    count = maps["in_count"][key]
    if count >= 0.2 * requests:
        print(f"  in {name(key[0]):<27} {total / count / 1000:7.1f} µs  x{count / requests:.2f}")
        if key[0] not in waits:
            busy += total / requests
# Only the pairs and calls of at least one in five requests: the request path, not the
# other threads' occasional work.
print(f"  on the request path, per request (all but the waits): {busy / 1000:.1f} µs")
PY
}

for index in $(seq 0 $(($# - 1))); do
    binaries=("$@"); binary=${binaries[$index]}; port=$((FIRST_PORT + index))
    CONFIG=Benchmarks/shared-bench.toml bench_start_larder "$binary" "$port" "$index"
    bench_wait_proxy "$port" "$url"
    measure "$binary" "$proxy" "$port"
    kill "$proxy"
done
if [[ $WITH_HAPROXY == 1 ]]; then
    port=$((FIRST_PORT + 50))
    bench_start_haproxy "$port" || exit 1
    measure haproxy "$peer_pid" "$port"
fi
