#!/usr/bin/env bash
# What a memory-tier entry really holds against what `memory.max_bytes` counts for it: fills
# the memory tier of BIN with responses of each SIZE (misses through wrk, nothing on disk),
# and reports per entry the tier's own count (/stats memory.bytes) and the growth of the
# daemon's resident memory (VmRSS).
#
#   Benchmarks/probes/memory-tier-cost.sh BIN [SIZE...]     SIZE in bytes (default 100 1024 8192 20000)
#
# Same setup as compare.sh: local nginx origin (files of each size), proxy on CPU 1, wrk and
# the origin on CPU 0. Every response is asked for once, so every body stays the array it
# arrived in (a body of 32 KiB or more moves to a memory file, outside VmRSS, on its first
# hit). Past ~64 KiB the allocator gives back the pages of the received chunks during the run,
# and the resident growth understates what an entry holds.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 1 ]] || { echo "usage: $0 BIN [SIZE...]" >&2; exit 2; }
BINARY=$1; shift
SIZES=("$@"); [[ ${#SIZES[@]} -gt 0 ]] || SIZES=(100 1024 8192 20000)
ORIGIN_PORT=${ORIGIN_PORT:-18693}; PROXY_PORT=18694; ADMIN_PORT=18695

source Benchmarks/common.sh
bench_setup memory-cost "$ORIGIN_PORT"
for size in "${SIZES[@]}"; do head -c "$size" /dev/urandom > "$dir/www/obj/size-$size"; done
# Room for every entry of the run in memory, and none on disk.
printf '[log]\naccess = false\n[memory]\nmax_bytes = "4GiB"\nmax_entries = 1000000\n[disk]\nmax_object_bytes = "1B"\n' \
    > "$dir/larder.toml"

memory() {   # entries and bytes of the memory tier
    curl -s "http://127.0.0.1:$ADMIN_PORT/stats" |
        python3 -c 'import json, sys; m = json.load(sys.stdin)["memory"]; print(m["entries"], m["bytes"])'
}
resident() { awk '/^VmRSS:/ {printf "%d\n", $2 * 1024}' "/proc/$1/status"; }
load() { "${pin_load[@]}" wrk -t1 -c20 -d"$2"s -s Benchmarks/absolute-form.lua "http://127.0.0.1:$PROXY_PORT/" -- "$1" unique >/dev/null; }

for size in "${SIZES[@]}"; do
    rm -rf "$dir/cache"; mkdir -p "$dir/cache"
    "${pin_proxy[@]}" "$BINARY" serve --config "$dir/larder.toml" --listen "127.0.0.1:$PROXY_PORT" \
        --admin-listen "127.0.0.1:$ADMIN_PORT" --cache-dir "$dir/cache" >/dev/null 2>"$dir/larder.err" & pids+=($!)
    proxy=$!
    url="http://127.0.0.1:$ORIGIN_PORT/obj/size-$size"
    bench_wait_proxy "$PROXY_PORT" "$url"
    load "$url" 1   # warm-up: connections, pools, the allocator's first pages
    read -r entries_before bytes_before < <(memory); rss_before=$(resident "$proxy")
    load "$url" 4
    read -r entries_after bytes_after < <(memory); rss_after=$(resident "$proxy")
    added=$((entries_after - entries_before))
    [[ $added -gt 0 ]] || { echo "size $size: no entries added" >&2; exit 1; }
    echo "size $size: +$added entries; counted $(( (bytes_after - bytes_before) / added )) B, resident $(( (rss_after - rss_before) / added )) B per entry"
    kill "$proxy"; wait "$proxy" 2>/dev/null || true
done
