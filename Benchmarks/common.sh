# Shared set-up for run.sh and the comparison scripts (sourced, not run): a scratch directory
# on a tmpfs when there is one (as in ../shared/bench: file creation on a disk filesystem costs
# the miss path far more than the proxy itself, and varies run to run), CPU pinning (proxies on CPU 1, load and origin on CPU 0), the local nginx
# origin serving /obj/1k and /obj/100k, and an EXIT trap that stops every process in `pids`.
#
#   source Benchmarks/common.sh; bench_setup NAME ORIGIN_PORT
# Sets: dir, pids, pin_proxy, pin_load.

bench_setup() {
    local name=$1 origin_port=$2 base=/tmp
    [[ -d /dev/shm && -w /dev/shm ]] && base=/dev/shm
    dir=$(mktemp -d "$base/larder-$name.XXXXXX"); chmod 755 "$dir"   # nginx workers run as another user
    pids=()
    trap bench_cleanup EXIT
    pin_proxy=(); pin_load=()
    if [[ $(nproc) -ge 2 ]] && command -v taskset >/dev/null; then pin_proxy=(taskset -c 1); pin_load=(taskset -c 0); fi
    mkdir -p "$dir/www/obj" "$dir/tmp"
    head -c 1024 /dev/urandom > "$dir/www/obj/1k"
    head -c 102400 /dev/urandom > "$dir/www/obj/100k"
    sed -e "s#@DIR@#$dir#g" -e "s#@PORT@#$origin_port#g" Benchmarks/origin-nginx.conf > "$dir/nginx.conf"
    "${pin_load[@]}" nginx -c "$dir/nginx.conf" -e "$dir/nginx-error.log" & pids+=($!)
}

bench_cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
