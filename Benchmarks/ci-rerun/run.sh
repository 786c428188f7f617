#!/usr/bin/env bash
# "The second CI run": a job's package downloads (PyPI, npm, Debian and Go module shapes, a
# few hundred artefacts and indexes of mixed sizes, with the headers those services send),
# fetched twice through each proxy by parallel clients, as two CI jobs on fresh machines do.
# Larder runs with presets (pypi, npm, debian, go); Squid with the widely published
# refresh_pattern recipe for package caches. Reports, per proxy, each run's wall time and
# what reached the origin on the second run (requests, bytes, 304s; artefacts and indexes).
#
#   Benchmarks/ci-rerun/run.sh [LARDER_BINARY] [PARALLEL]     (as root: Squid drops privileges)
set -euo pipefail
cd "$(dirname "$0")/../.."
LARDER=${1:-.build/release/larder}
PARALLEL=${2:-8}
ORIGIN_PORT=18490; LARDER_PORT=18491; SQUID_PORT=18492
[[ -x $LARDER ]] || { echo "no larder binary at $LARDER (make release)" >&2; exit 2; }
command -v squid >/dev/null || { echo "needs squid (../shared/bench/setup.sh installs it)" >&2; exit 2; }

source Benchmarks/common.sh
bench_scratch ci-rerun

"${pin_load[@]}" python3 Benchmarks/ci-rerun/origin.py "$ORIGIN_PORT" "$dir/urls" >"$dir/origin.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q '^PORT ' "$dir/origin.out" 2>/dev/null && break; sleep 0.1; done

printf '[log]\naccess = false\n[cache]\npresets = ["pypi", "npm", "debian", "go"]\n' > "$dir/larder.toml"
"${pin_proxy[@]}" "$LARDER" serve --config "$dir/larder.toml" --listen "127.0.0.1:$LARDER_PORT" --admin-listen 127.0.0.1:0 \
    --cache-dir "$dir/larder-cache" >/dev/null 2>"$dir/larder.err" &
pids+=($!)

mkdir -p "$dir/squid/cache"
cat > "$dir/squid/squid.conf" <<CONF
http_port 127.0.0.1:$SQUID_PORT
visible_hostname ci-rerun-squid
pid_filename $dir/squid/squid.pid
cache_effective_user proxy
cache_log $dir/squid/cache.log
access_log none
cache_store_log none
coredump_dir $dir/squid
shutdown_lifetime 1 seconds
acl bench src 127.0.0.1/32
http_access allow bench
http_access deny all
cache_mem 512 MB
maximum_object_size_in_memory 8 MB
cache_dir aufs $dir/squid/cache 4096 16 256
maximum_object_size 1 GB
collapsed_forwarding on
# The package-cache recipe (apt-cacher-ng's and many blog posts' refresh_pattern lines):
# package files kept for 90 days whatever their headers say, indexes always revalidated.
refresh_pattern -i \.(deb|udeb|rpm|whl|tgz|crate|zip|mod|tar\.(gz|xz|bz2|zst))$ 129600 100% 129600 refresh-ims override-expire ignore-reload ignore-no-store ignore-private
refresh_pattern -i (/InRelease|/Release|/Packages(\.gz|\.xz)?|/repomd\.xml)$ 0 0% 0 refresh-ims
refresh_pattern -i /simple/ 0 0% 0 refresh-ims
refresh_pattern -i /@v/list$ 0 0% 0 refresh-ims
refresh_pattern . 0 20% 4320
CONF
chown -R proxy:proxy "$dir/squid"
squid -N -z -f "$dir/squid/squid.conf" >"$dir/squid/z.log" 2>&1
"${pin_proxy[@]}" squid -N -d 1 -f "$dir/squid/squid.conf" >"$dir/squid/stdout" 2>&1 &
pids+=($!)

wait_proxy() { for _ in $(seq 100); do curl -s -o /dev/null -x "http://127.0.0.1:$1" "http://127.0.0.1:$ORIGIN_PORT/_stats" && return 0; sleep 0.1; done; return 1; }
wait_proxy $LARDER_PORT || { echo "larder did not answer" >&2; exit 1; }
wait_proxy $SQUID_PORT || { echo "squid did not answer" >&2; tail "$dir/squid/cache.log" >&2; exit 1; }

stats() { curl -s "http://127.0.0.1:$ORIGIN_PORT/_stats"; }
echo "CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs; $(sed -n 's/^PORT .* OBJECTS //p' "$dir/origin.out") objects, $PARALLEL clients"
for name in larder squid; do
    port=$LARDER_PORT; [[ $name == squid ]] && port=$SQUID_PORT
    curl -s -X POST "http://127.0.0.1:$ORIGIN_PORT/_reset"
    first=$("${pin_load[@]}" python3 Benchmarks/ci-rerun/fetch.py "$port" "$dir/urls" "$PARALLEL")
    curl -s -X POST "http://127.0.0.1:$ORIGIN_PORT/_reset"
    second=$("${pin_load[@]}" python3 Benchmarks/ci-rerun/fetch.py "$port" "$dir/urls" "$PARALLEL")
    python3 - "$name" "$first" "$second" "$(stats)" <<'PY'
import json, sys
name, first, second, origin = sys.argv[1], *map(json.loads, sys.argv[2:])
a, i = origin["by_kind"]["artefact"], origin["by_kind"]["index"]
print(f"{name}: first run {first['seconds']} s ({first['failures']} failures), second run {second['seconds']} s "
      f"({second['failures']} failures); second run at the origin: artefacts {a['requests']} requests {a['bytes']} bytes "
      f"({a['not_modified']} 304), indexes {i['requests']} requests {i['bytes']} bytes ({i['not_modified']} 304)")
PY
done
