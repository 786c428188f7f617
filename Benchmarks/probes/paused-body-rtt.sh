#!/usr/bin/env bash
# Does holding a large body 200 us behind its head (the "paused leads" Larder had until
# 2026-11-25) help a client on a real network? Two binaries, a client in a network namespace
# behind `tc netem delay`, interleaved:
#
#   sudo Benchmarks/probes/paused-body-netem.sh BEFORE_BINARY AFTER_BINARY [REPS]
#   DELAY=5ms SIZE=100k Benchmarks/probes/paused-body-netem.sh ...
#
# Per rep and binary: one fresh keep-alive connection fetching 32 cached SIZE bodies (the
# responses the pause applied to), seconds in total; then wrk at 8 connections for 5 s, req/s.
# Needs root (ip netns, tc), curl, wrk, nginx (the origin, as in the other scripts).
set -euo pipefail
cd "$(dirname "$0")/../.."
BEFORE=$1; AFTER=$2; REPS=${3:-5}
DELAY=${DELAY:-5ms}; SIZE=${SIZE:-100k}
ORIGIN_PORT=18493; PORT_A=18494; PORT_B=18495
ns=larder-netem-$$; host_ip=10.231.0.1; client_ip=10.231.0.2

if ! tc qdisc add dev lo root netem delay 0ms 2>/dev/null; then
    echo "this kernel has no netem qdisc (sch_netem): cannot delay packets here" >&2; exit 2
fi
tc qdisc del dev lo root
source Benchmarks/common.sh
bench_setup netem "$ORIGIN_PORT"
teardown() { ip link del lnetem0 2>/dev/null || true; ip netns del "$ns" 2>/dev/null || true; bench_cleanup; }
trap teardown EXIT
ip netns add "$ns"
ip link add lnetem0 type veth peer name lnetem1
ip link set lnetem1 netns "$ns"
ip addr add "$host_ip/24" dev lnetem0; ip link set lnetem0 up
ip netns exec "$ns" ip addr add "$client_ip/24" dev lnetem1
ip netns exec "$ns" ip link set lnetem1 up; ip netns exec "$ns" ip link set lo up
tc qdisc add dev lnetem0 root netem delay "$DELAY"
ip netns exec "$ns" tc qdisc add dev lnetem1 root netem delay "$DELAY"

printf '[proxy]\nallow = ["10.231.0.0/24", "127.0.0.0/8"]\nallow_local_destinations = true\n[log]\naccess = false\n' > "$dir/netem.toml"
for side in a b; do
    binary=$BEFORE; port=$PORT_A; [[ $side == b ]] && { binary=$AFTER; port=$PORT_B; }
    "${pin_proxy[@]}" "$binary" serve --config "$dir/netem.toml" --listen "$host_ip:$port" --admin-listen 127.0.0.1:0 \
        --cache-dir "$dir/$side" >/dev/null 2>"$dir/$side.err" & pids+=($!)
done
url="http://127.0.0.1:$ORIGIN_PORT/obj/$SIZE"
sleep 1
for port in $PORT_A $PORT_B; do curl -s -o /dev/null -x "http://$host_ip:$port" "$url"; curl -s -o /dev/null -x "http://$host_ip:$port" "$url"; done
urls=(); for _ in $(seq 32); do urls+=(-o /dev/null "$url"); done
burst() { ip netns exec "$ns" curl -s -x "http://$host_ip:$1" -w '%{time_total}\n' "${urls[@]}" | awk '{ total += $1 } END { printf "%.4f", total }'; }
rate() { ip netns exec "$ns" wrk -t1 -c8 -d5s -s Benchmarks/absolute-form.lua "http://$host_ip:$1/" -- "$url" same | awk '/Requests\/sec/ {print $2}'; }
printf 'delay %s each way, %s bodies\n%-4s %12s %12s %10s %10s\n' "$DELAY" "$SIZE" rep burst-before burst-after wrk-before wrk-after
for rep in $(seq "$REPS"); do
    printf '%-4s %12s %12s %10s %10s\n' "$rep" "$(burst $PORT_A)" "$(burst $PORT_B)" "$(rate $PORT_A)" "$(rate $PORT_B)"
done
