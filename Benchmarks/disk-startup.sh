#!/usr/bin/env bash
# Start-up with a large disk cache: writes COUNT entries (default 100,000) in the documented
# format, starts Larder on them, and reports how long until it accepts connections, until the
# last entry written is served from the cache (and whether correctly), and until the background
# index rebuild is done (from the daemon's log), and the resident memory the index takes per
# entry (against the same daemon on an empty cache).
#
#   Benchmarks/disk-startup.sh [COUNT]
#   SEGMENTS=1 Benchmarks/disk-startup.sh [COUNT]    entries as records in segment files
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${1:-100000}
LARDER=${LARDER:-.build/release/larder}
PORT=${PORT:-18392}
dir=$(mktemp -d /tmp/larder-startup.XXXXXX)
pid=""
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

echo "writing $COUNT entries..."
last=$(python3 Benchmarks/make-disk-entries.py ${SEGMENTS:+--segments} "$dir/cache" "$COUNT" "http://127.0.0.1:9/startup/")
sync
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "(page cache not dropped: not root)"

start=$(date +%s%N)
"$LARDER" serve --listen "127.0.0.1:$PORT" --admin-listen 127.0.0.1:0 --cache-dir "$dir/cache" \
    >/dev/null 2>"$dir/err" &
pid=$!
until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do sleep 0.005; done
accepting=$(( ($(date +%s%N) - start) / 1000000 ))
# only-if-cached (RFC 9111 §5.2.1.7): 504 without going upstream until the entry is indexed;
# asked again every 10 ms, for at most 30 s.
for _ in $(seq 3000); do
    status=$(curl -s -o "$dir/body" -w '%{http_code}' -D "$dir/headers" -H "Cache-Control: only-if-cached" \
        -x "http://127.0.0.1:$PORT" "$last")
    [[ $status == 504 ]] || break
    sleep 0.01
done
first_hit=$(( ($(date +%s%N) - start) / 1000000 ))
expected=$(python3 -c "import sys; i=sys.argv[1].rsplit('/',1)[1]; print(len((i*(1024//len(i)+1))[:1024]))" "$last")
for _ in $(seq 600); do grep -q "index rebuilt" "$dir/err" && break; sleep 0.05; done
echo "entries:                 $COUNT"
echo "accepting connections:   ${accepting} ms after exec"
echo "last entry served:       ${first_hit} ms after exec, status $status, $(grep -i '^cache-status' "$dir/headers" | tr -d '\r'), $(stat -c %s "$dir/body") bytes (expected $expected)"
echo "index rebuild:           $(grep -o 'ms=[0-9]*' "$dir/err" | head -1) (in the background)"
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
full=$(rss_kib "$pid")
kill "$pid"; wait "$pid" 2>/dev/null || true
mkdir -p "$dir/empty"
"$LARDER" serve --listen "127.0.0.1:$PORT" --admin-listen 127.0.0.1:0 --cache-dir "$dir/empty" >/dev/null 2>>"$dir/err" &
pid=$!
until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do sleep 0.005; done
curl -s -o /dev/null -x "http://127.0.0.1:$PORT" "$last" || true   # the same first lookup, a miss here
empty=$(rss_kib "$pid")
echo "resident memory:         $((full / 1024)) MiB after the rebuild, $((empty / 1024)) MiB on an empty cache: $(( (full - empty) * 1024 / COUNT )) bytes per entry"
