#!/usr/bin/env bash
# Start-up with a large disk cache: writes COUNT entries (default 100,000) in the documented
# format, starts Larder on them, and reports how long until it accepts connections, whether a
# hit on the last entry is served correctly at once, and how long the background index rebuild
# took (from the daemon's log).
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
status=$(curl -s -o "$dir/body" -w '%{http_code}' -D "$dir/headers" -x "http://127.0.0.1:$PORT" "$last")
first_hit=$(( ($(date +%s%N) - start) / 1000000 ))
expected=$(python3 -c "import sys; i=sys.argv[1].rsplit('/',1)[1]; print(len((i*(1024//len(i)+1))[:1024]))" "$last")
for _ in $(seq 600); do grep -q "index rebuilt" "$dir/err" && break; sleep 0.05; done
echo "entries:                 $COUNT"
echo "accepting connections:   ${accepting} ms after exec"
echo "first hit (last entry):  ${first_hit} ms after exec, status $status, $(grep -i '^cache-status' "$dir/headers" | tr -d '\r'), $(stat -c %s "$dir/body") bytes (expected $expected)"
echo "index rebuild:           $(grep -o 'ms=[0-9]*' "$dir/err" | head -1) (in the background)"
