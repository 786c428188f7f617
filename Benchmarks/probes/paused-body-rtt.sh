#!/usr/bin/env bash
# Does holding a large body 200 us behind its head (the "paused leads" Larder had until
# 2026-11-25) help a client on a real network? Two binaries, a client in a network namespace
# behind a real round-trip time, interleaved:
#
#   sudo Benchmarks/probes/paused-body-rtt.sh BEFORE_BINARY AFTER_BINARY [REPS]
#   DELAY_US=2500 SIZE=10m Benchmarks/probes/paused-body-rtt.sh ...
#
# The delay (each way, so 5 ms round trip by default) comes from `tc netem` where the kernel has
# it, else from delayline.c: two TUN devices joined by a program that holds each packet
# DELAY_US. Per rep and binary: one fresh keep-alive connection fetching 32 cached SIZE bodies
# (the responses the pause applied to), seconds in total; then wrk at 8 connections for 5 s,
# req/s. Needs root (ip netns, tc or /dev/net/tun), cc, curl, wrk, nginx.
set -euo pipefail
cd "$(dirname "$0")/../.."
BEFORE=$1; AFTER=$2; REPS=${3:-5}
DELAY_US=${DELAY_US:-2500}; SIZE=${SIZE:-100k}
ORIGIN_PORT=18493; PORT_A=18494; PORT_B=18495
ns=larder-rtt-$$; host_ip=10.231.0.1; client_ip=10.231.0.2

source Benchmarks/common.sh
bench_setup rtt "$ORIGIN_PORT"
teardown() { ip link del lnetem0 2>/dev/null || true; ip netns del "$ns" 2>/dev/null || true; bench_cleanup; }
trap teardown EXIT
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
if tc qdisc add dev lo root netem delay 0ms 2>/dev/null; then
    tc qdisc del dev lo root
    method="tc netem"
    ip link add lnetem0 type veth peer name lnetem1
    ip link set lnetem1 netns "$ns"
    ip addr add "$host_ip/24" dev lnetem0; ip link set lnetem0 up
    ip netns exec "$ns" ip addr add "$client_ip/24" dev lnetem1
    ip netns exec "$ns" ip link set lnetem1 up
    tc qdisc add dev lnetem0 root netem delay "${DELAY_US}us"
    ip netns exec "$ns" tc qdisc add dev lnetem1 root netem delay "${DELAY_US}us"
else
    method="delayline.c (no netem in this kernel)"
    cc -O2 -o "$dir/delayline" Benchmarks/probes/delayline.c
    # On the load CPU: the wire must not take the proxy's CPU.
    coproc line { exec "${pin_load[@]}" "$dir/delayline" "$ns" "$DELAY_US"; }
    pids+=($line_PID)
    read -r ready <&"${line[0]}"; [[ $ready == ready ]] || { echo "delayline did not start" >&2; exit 1; }
    ip addr add "$host_ip" peer "$client_ip" dev dl-host; ip link set dl-host up
    ip netns exec "$ns" ip addr add "$client_ip" peer "$host_ip" dev dl-peer
    ip netns exec "$ns" ip link set dl-peer up
fi

printf '[proxy]\nallow = ["10.231.0.0/24", "127.0.0.0/8"]\nallow_local_destinations = true\nallow_destinations = ["127.0.0.1/32"]\n[log]\naccess = false\n' > "$dir/rtt.toml"
for side in a b; do
    binary=$BEFORE; port=$PORT_A; [[ $side == b ]] && { binary=$AFTER; port=$PORT_B; }
    "${pin_proxy[@]}" "$binary" serve --config "$dir/rtt.toml" --listen "$host_ip:$port" --admin-listen 127.0.0.1:0 \
        --cache-dir "$dir/$side" >/dev/null 2>"$dir/$side.err" & pids+=($!)
done
url="http://127.0.0.1:$ORIGIN_PORT/obj/$SIZE"
sleep 1
for port in $PORT_A $PORT_B; do
    curl -s -o /dev/null -x "http://$host_ip:$port" "$url"
    got=$(ip netns exec "$ns" curl -s -o /dev/null -w '%{http_code} %{size_download}' -x "http://$host_ip:$port" "$url")
    echo "through port $port: status and bytes $got"
done
echo "TCP connect over the line (one round trip): $(ip netns exec "$ns" curl -s -o /dev/null -w '%{time_connect}' -x "http://$host_ip:$PORT_A" "$url") s"
urls=(); for _ in $(seq 32); do urls+=(-o /dev/null "$url"); done
burst() { ip netns exec "$ns" "${pin_load[@]}" curl -s -x "http://$host_ip:$1" -w '%{time_total}\n' "${urls[@]}" | awk '{ total += $1 } END { printf "%.4f", total }'; }
rate() { ip netns exec "$ns" "${pin_load[@]}" wrk -t1 -c8 -d5s -s Benchmarks/absolute-form.lua "http://$host_ip:$1/" -- "$url" same | awk '/Requests\/sec/ {print $2}'; }
printf 'delay %s us each way by %s, %s bodies\n%-4s %12s %12s %10s %10s\n' "$DELAY_US" "$method" "$SIZE" rep burst-before burst-after wrk-before wrk-after
for rep in $(seq "$REPS"); do
    printf '%-4s %12s %12s %10s %10s\n' "$rep" "$(burst $PORT_A)" "$(burst $PORT_B)" "$(rate $PORT_A)" "$(rate $PORT_B)"
done
