# Shared set-up for run.sh and the comparison scripts (sourced, not run): a scratch directory
# on a tmpfs when there is one (as in ../shared/bench: file creation on a disk filesystem costs
# the miss path far more than the proxy itself, and varies run to run), CPU pinning (proxies on CPU 1, load and origin on CPU 0), the local nginx
# origin serving /obj/1k, /obj/100k and /obj/10m, and an EXIT trap that stops every process in `pids`.
#
#   source Benchmarks/common.sh; bench_setup NAME ORIGIN_PORT
# Sets: dir, pids, pin_proxy, pin_load, origin_port. Then bench_workload, bench_wait_proxy and
# bench_cpu_ticks below. bench_scratch NAME alone: the scratch directory, the EXIT trap and the
# pinning, for scripts with an origin of their own.

bench_scratch() {
    local name=$1 base=/tmp
    [[ -d /dev/shm && -w /dev/shm ]] && base=/dev/shm
    dir=$(mktemp -d "$base/larder-$name.XXXXXX"); chmod 755 "$dir"   # nginx and squid workers run as other users
    pids=()
    trap bench_cleanup EXIT
    pin_proxy=(); pin_load=()
    if [[ $(nproc) -ge 2 ]] && command -v taskset >/dev/null; then pin_proxy=(taskset -c 1); pin_load=(taskset -c 0); fi
}

bench_setup() {
    bench_scratch "$1"
    origin_port=$2
    mkdir -p "$dir/www/obj" "$dir/tmp"
    head -c 1024 /dev/urandom > "$dir/www/obj/1k"
    head -c 102400 /dev/urandom > "$dir/www/obj/100k"
    head -c 524288 /dev/urandom > "$dir/www/obj/512k"
    head -c 1048576 /dev/urandom > "$dir/www/obj/1m"
    head -c 2097152 /dev/urandom > "$dir/www/obj/2m"
    head -c 10485760 /dev/urandom > "$dir/www/obj/10m"
    sed -e "s#@DIR@#$dir#g" -e "s#@PORT@#$origin_port#g" Benchmarks/origin-nginx.conf > "$dir/nginx.conf"
    "${pin_load[@]}" nginx -c "$dir/nginx.conf" -e "$dir/nginx-error.log" & pids+=($!)
}

bench_cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}

# bench_workload NAME: sets `url` (on the origin of bench_setup) and `mode` (for
# absolute-form.lua: `same` is a hit after the first request, `unique` a miss every time).
bench_workload() {
    case $1 in
        hit-1k) url="http://127.0.0.1:$origin_port/obj/1k"; mode=same ;;
        hit-100k) url="http://127.0.0.1:$origin_port/obj/100k"; mode=same ;;
        hit-512k) url="http://127.0.0.1:$origin_port/obj/512k"; mode=same ;;   # a memory file, sent with sendfile
        hit-1m) url="http://127.0.0.1:$origin_port/obj/1m"; mode=same ;;   # the first size kept as an array
        hit-2m) url="http://127.0.0.1:$origin_port/obj/2m"; mode=same ;;   # an array, written in 4 MiB calls
        hit-10m) url="http://127.0.0.1:$origin_port/obj/10m"; mode=same ;;   # two slices, promoted on their disk hit
        miss-1k) url="http://127.0.0.1:$origin_port/obj/1k"; mode=unique ;;
        miss-100k) url="http://127.0.0.1:$origin_port/obj/100k"; mode=unique ;;
        miss-10m) url="http://127.0.0.1:$origin_port/obj/10m"; mode=unique ;;   # streamed to the client and the disk writer
        *) echo "unknown workload $1 (hit-1k, hit-100k, hit-512k, hit-1m, hit-2m, hit-10m, miss-1k, miss-100k, miss-10m)" >&2; return 2 ;;
    esac
}

# bench_wait_proxy PORT URL [SECONDS]: waits (up to SECONDS, default 5) until the proxy on PORT
# answers URL, which also puts URL in its cache; fails with a message if it never does.
bench_wait_proxy() {
    local seconds=${3:-5}
    for _ in $(seq $((seconds * 10))); do
        curl -s -o /dev/null -x "http://127.0.0.1:$1" "$2" && return 0
        sleep 0.1
    done
    echo "the proxy on port $1 did not answer $2 within $seconds s" >&2
    return 1
}

# bench_start_larder BIN PORT INDEX: Larder on PORT, pinned as a proxy, with CONFIG (default
# Benchmarks/shared-bench.toml, as the shared harness runs it) and a cache directory of its own
# ($dir/cacheINDEX, its stderr beside it); sets `proxy` to its PID.
bench_start_larder() {
    mkdir -p "$dir/cache$3"
    "${pin_proxy[@]}" "$1" serve --config "${CONFIG:-Benchmarks/shared-bench.toml}" --listen "127.0.0.1:$2" \
        --admin-listen 127.0.0.1:0 --cache-dir "$dir/cache$3" >/dev/null 2>"$dir/larder$3.err" & pids+=($!)
    proxy=$!
}

# bench_start_haproxy PORT: HAProxy as a peer (bench_start_peer), waited for: its 2 GB cache is
# set up before it listens, so up to 20 s. Its start.sh execs haproxy -db: `peer_pid` is
# HAProxy's own PID.
bench_start_haproxy() {
    bench_start_peer haproxy "$1" || return 2
    for attempt in 1 2 3 4; do bench_wait_proxy "$1" "$url" 2>/dev/null && return 0; [[ $attempt -lt 4 ]] || return 1; done
}

# bench_start_peer NAME PORT: starts a peer configured as in ../shared/bench (its
# peers/NAME/start.sh: nginx, haproxy) on PORT, pinned as a proxy, in front of the origin;
# sets `peer_pid`. Fails with a message if the harness is not there.
bench_start_peer() {
    local start=../shared/bench/peers/$1/start.sh
    [[ -x $start ]] || { echo "$1 as a peer needs $start" >&2; return 2; }
    "${pin_proxy[@]}" "$start" "$dir/$1-peer" "$2" "$origin_port" >/dev/null 2>&1 & pids+=($!)
    peer_pid=$!
}

# bench_nginx_worker MASTER_PID: the PID of that nginx's worker process (its master also has
# cache manager and loader children; the worker does the proxying), once it answers.
bench_nginx_worker() {
    local worker
    worker=$(pgrep -P "$1" -f 'worker process' | head -1)
    [[ -n $worker ]] || { echo "no nginx worker process found" >&2; return 1; }
    echo "$worker"
}

# bench_cpu_ticks PID: CPU time (utime + stime) of a process, in clock ticks (getconf CLK_TCK).
bench_cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# bench_system_ticks PID: its system (kernel) time alone, in clock ticks.
bench_system_ticks() { awk '{print $15}' "/proc/$1/stat"; }
# bench_minor_faults PID: the page faults a process took that needed no I/O (its new pages).
bench_minor_faults() { awk '{print $10}' "/proc/$1/stat"; }
# bench_switches PID: context switches, voluntary and not, summed over all its threads (a hand-off
# between threads costs a wake-up and a switch on each side).
bench_switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/_ctxt_switches:/ {n += $2} END {print n + 0}'; }
# bench_seconds "XmY.ZZZs": the seconds in one field of bash's `times` (a subshell's children).
bench_seconds() { awk -v t="$1" 'BEGIN { split(t, p, "m"); sub("s", "", p[2]); print p[1] * 60 + p[2] }'; }
