#!/usr/bin/env bash
# Hit ratio at a fixed budget: one seeded trace (Benchmarks/trace.py: 200,000 objects, sizes
# lognormal with median 8 KiB and sigma 2 up to 50 MiB, 1,000,000 requests drawn Zipf(0.9)) is
# replayed, in order over 8 keep-alive connections, through Larder and through Squid, nginx,
# Varnish and Traffic Server, each given a 64 MiB memory tier and a 1 GiB disk tier and started
# cold. The origin counts what reaches it, so every proxy is measured the same way:
#   object hit ratio = 1 - origin requests / requests, byte hit ratio = 1 - origin bytes / bytes.
#
#   Benchmarks/trace.sh [--only larder,squid,nginx,nginx-tight,varnish,trafficserver] [--seed N]
#                       [--objects N] [--requests N] [--larder BIN] [--larder-config FILE]
#                       [--out FILE]
#
# The peers are started by ../shared/bench/peers/*/start.sh, from a copy whose budget lines are
# changed to the ones above (peer_budget below); a peer whose script is missing is skipped.
# nginx and Varnish have no memory tier of their own (nginx keeps bodies in files, Varnish's
# file storage is a mapped file): they get the 1 GiB disk budget and the kernel's page cache.
# Larder runs with Benchmarks/trace.toml (the defaults but the budget and the access log), or
# --larder-config.
# "peak GiB on disk" is the largest size of the proxy's state directory, sampled every 5 s (a
# file storage that is created at its full size, as Varnish's and Traffic Server's, shows that).
# About 2-6 minutes per proxy on 2 cores; the state lives on /dev/shm.
set -euo pipefail
cd "$(dirname "$0")/.."

only=larder,squid,nginx,nginx-tight,varnish,trafficserver
seed=1 objects=200000 requests=1000000 out="" larder=.build/release/larder larder_config=Benchmarks/trace.toml
while [[ $# -gt 0 ]]; do
    case $1 in
        --only) only=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --objects) objects=$2; shift 2 ;;
        --requests) requests=$2; shift 2 ;;
        --larder) larder=$2; shift 2 ;;
        --larder-config) larder_config=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "trace: unknown option $1 (--help)" >&2; exit 2 ;;
    esac
done
[[ $(id -u) -eq 0 ]] || { echo "trace: run as root (the peers drop privileges themselves)" >&2; exit 2; }
[[ -x $larder ]] || { echo "trace: $larder missing (make release)" >&2; exit 2; }

source Benchmarks/common.sh
bench_scratch trace
origin_port=18491 proxy_port=18492
peers=../shared/bench

python3 Benchmarks/trace.py generate --dir "$dir/trace" --seed "$seed" --objects "$objects" \
    --requests "$requests" > "$dir/trace.json"
python3 Benchmarks/trace.py origin --dir "$dir/trace" --port "$origin_port" > "$dir/origin.log" 2>&1 & pids+=($!)
stats() { curl -sf "http://127.0.0.1:$origin_port/__stats"; }
for _ in $(seq 50); do stats >/dev/null && break; sleep 0.1; done
stats >/dev/null || { echo "trace: the origin did not start" >&2; cat "$dir/origin.log" >&2; exit 1; }

# peer_budget NAME DIR: rewrites the copied peer's budget lines; fails loudly when a line it
# expects is not there (the shared harness changed), rather than measuring another budget.
peer_budget() {
    local name=$1 copy=$2
    change() {   # change FILE OLD NEW
        grep -qF -- "$2" "$1" || { echo "trace: '$2' not found in $1" >&2; return 1; }
        sed -i "s#$2#$3#" "$1"
    }
    case $name in
        squid)
            change "$copy/peers/squid/squid.conf.in" "cache_mem 2048 MB" "cache_mem 64 MB"
            change "$copy/peers/squid/squid.conf.in" "cache_dir aufs @STATE@/cache 4096" "cache_dir aufs @STATE@/cache 1024" ;;
        nginx)
            change "$copy/peers/nginx/nginx.conf.in" "max_size=4g" "max_size=1g" ;;
        nginx-tight)
            # nginx's cache manager removes at most manager_files (100) entries per pass, then
            # sleeps: under this load its cache grows past max_size (2.3 GiB for 1g). Here it
            # may remove 10,000 a pass, with a shorter sleep, so that it keeps to the budget.
            change "$copy/peers/nginx/nginx.conf.in" "max_size=4g" \
                "max_size=1g manager_files=10000 manager_sleep=10ms manager_threshold=1000ms" ;;
        varnish)
            # nuke_limit: at its default (50 evictions per stored object) Varnish fails the fetch
            # of a large object into a tier full of small ones and truncates the body (1,170
            # requests in one run); raised so that the ratios compare what is kept.
            change "$copy/peers/varnish/start.sh" '-s malloc,2G' '-s file,$STATE/storage.bin,1G -p nuke_limit=100000' ;;
        trafficserver)
            change "$copy/peers/trafficserver/records.config.in" "ram_cache.size INT 2147483648" "ram_cache.size INT 67108864"
            change "$copy/peers/trafficserver/storage.config.in" "@STATE@/cache 2G" "@STATE@/cache 1G" ;;
    esac
}

rows=()
for name in ${only//,/ }; do
    state="$dir/state-$name"
    mkdir -p "$state"
    if [[ $name == larder ]]; then
        "$larder" serve --config "$larder_config" --listen "127.0.0.1:$proxy_port" \
            --admin-listen 127.0.0.1:0 --cache-dir "$state" > "$dir/$name.log" 2>&1 &
    else
        peer=${name%%-*}   # nginx-tight: nginx, with its own budget lines
        [[ -x $peers/peers/$peer/start.sh ]] || { echo "trace: $name skipped ($peers/peers/$peer/start.sh missing)"; continue; }
        rm -rf "$dir/bench"; mkdir -p "$dir/bench"
        cp -r "$peers/peers" "$peers/lib" "$dir/bench/"
        peer_budget "$name" "$dir/bench"
        setsid "$dir/bench/peers/$peer/start.sh" "$state" "$proxy_port" "$origin_port" > "$dir/$name.log" 2>&1 &
    fi
    proxy_pid=$!; pids+=("$proxy_pid")
    up=no
    for _ in $(seq 300); do
        if curl -sf -o /dev/null -x "http://127.0.0.1:$proxy_port" "http://127.0.0.1:$origin_port/__stats"; then up=yes; break; fi
        sleep 0.1
    done
    if [[ $up == no ]]; then
        echo "trace: $name did not answer within 30 s; its log:" >&2; tail -20 "$dir/$name.log" >&2
        kill -- "-$proxy_pid" 2>/dev/null || kill "$proxy_pid" 2>/dev/null || true; wait "$proxy_pid" 2>/dev/null || true
        continue
    fi
    before=$(stats)
    echo "trace: $name replaying $requests requests"
    # What the proxy really keeps on disk, every 5 s: a budget is only the same if it is kept.
    ( peak=0; while sleep 5; do
        size=$(du -sb "$state" 2>/dev/null | cut -f1); size=${size:-0}
        (( size > peak )) && peak=$size && echo "$peak" > "$dir/peak-$name"
    done ) & sampler=$!
    result=$(python3 Benchmarks/trace.py replay --dir "$dir/trace" --proxy "127.0.0.1:$proxy_port" \
        --origin-port "$origin_port") || true
    after=$(stats)
    kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true
    peak=$(cat "$dir/peak-$name" 2>/dev/null || echo 0)
    # Stops the proxy: the peers run in a session of their own (setsid), so the whole group.
    kill -- "-$proxy_pid" 2>/dev/null || kill "$proxy_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$proxy_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$proxy_pid" 2>/dev/null || kill -KILL "$proxy_pid" 2>/dev/null || true
    wait "$proxy_pid" 2>/dev/null || true
    rm -rf "$state"
    rows+=("$(python3 - "$name" "$peak" "$before" "$after" "$result" <<'EOF'
import json, sys
name, peak, (before, after, result) = sys.argv[1], int(sys.argv[2]), map(json.loads, sys.argv[3:])
origin_requests = after["requests"] - before["requests"]
origin_bytes = after["bytes"] - before["bytes"]
requests, body = max(result["requests"], 1), max(result["bytes"], 1)
errors = result["errors"]
print(f"| {name} | {result['requests']:,} | {origin_requests:,} | {1 - origin_requests / requests:.4f} "
      f"| {result['bytes'] / 1e9:.2f} | {origin_bytes / 1e9:.2f} | {1 - origin_bytes / body:.4f} "
      f"| {peak / 2**30:.2f} | {result['seconds']:.0f} | {errors}{(' ' + result['first_errors'][0]) if errors else ''} |")
EOF
)")
    echo "${rows[-1]}"
done

{
    echo "Trace: $(cat "$dir/trace.json")"
    echo "Host: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "| proxy | requests | origin requests | object hit ratio | GB to clients | GB from origin | byte hit ratio | peak GiB on disk | seconds | errors |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} | tee "${out:-/dev/null}"
