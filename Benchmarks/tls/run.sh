#!/usr/bin/env bash
# HTTPS interception, Larder against Squid with ssl-bump, in one run, interleaved.
#
#   Benchmarks/tls/run.sh [LARDER_BINARY] [REPS]      (as root: Squid drops to the proxy user)
#
# Both proxies decrypt CONNECTs to `localhost` with the same name-constrained CA (made by
# `larder ca init`), verify a local TLS origin (Tests/.../origin.py, its own CA from
# tls_certs.sh) and serve hits from memory; neither writes an access log (as in
# ../shared/bench). Squid is Debian's squid-openssl 5.7 (the ssl-bump build), extracted into
# the scratch directory with `apt-get download` rather than installed, so the system's squid
# (GnuTLS, used by ../shared/bench) stays as it is; it runs single-process (squid -N) with
# client-first bumping (`ssl_bump bump all`: no origin contact before the client's
# handshake, its cheapest mode) and `generate-host-certificates=on`.
#
# Workloads, each measured by tlsload (Benchmarks/tls/tlsload.c) pinned to CPU 0 with the
# proxies on CPU 1:
#   hit-1k, hit-100k   keep-alive GETs on CONNECTIONS (8) intercepted sessions, req/s
#   hit-2m             the same for a 2 MiB body (a wheel, a layer), req/s; only when named
#   handshake          a new connection per request (CONNECT, full TLS 1.3 handshake, no
#                      resumption, one 1 KiB hit), handshakes/s
# Prints each rep and the median ratio Larder/Squid per workload. WORKLOADS (default "hit-1k
# hit-100k handshake") picks which run.
set -euo pipefail
cd "$(dirname "$0")/../.."
LARDER=${1:-.build/release/larder}
REPS=${2:-5}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-8}
LARDER_PORT=18396
SQUID_PORT=18397

[[ -x $LARDER ]] || { echo "no larder binary at $LARDER (make release)" >&2; exit 2; }
for tool in cc openssl python3 curl apt-get dpkg-deb; do
    command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done

source Benchmarks/common.sh
bench_scratch tls

# The load client, the certificates, the CA both proxies sign with.
cc -O2 -o "$dir/tlsload" Benchmarks/tls/tlsload.c -lssl -lcrypto -lpthread
sh Tests/LarderIntegrationTests/Fixtures/tls_certs.sh "$dir"
printf '[tls]\nintercept = ["localhost"]\n' > "$dir/ca.toml"
"$LARDER" ca init --config "$dir/ca.toml" --dir "$dir/ca" >/dev/null

# The origin (HTTPS, as localhost).
"${pin_load[@]}" python3 Tests/LarderIntegrationTests/Fixtures/origin.py --tls "$dir/localhost.pem" "$dir/localhost.key" >"$dir/origin.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q '^PORT ' "$dir/origin.out" 2>/dev/null && break; sleep 0.1; done
origin_port=$(sed -n 's/^PORT //p' "$dir/origin.out")
[[ -n $origin_port ]] || { echo "the origin did not start" >&2; exit 1; }

# Larder: the embedded defaults, no access log, interception of localhost.
cat > "$dir/larder.toml" <<EOF
[proxy]
connect_ports = [443, $origin_port]
[log]
access = false
[tls]
intercept = ["localhost"]
ca_dir = "$dir/ca"
upstream_ca_file = "$dir/origin-ca.pem"
EOF
"${pin_proxy[@]}" "$LARDER" serve --config "$dir/larder.toml" --listen "127.0.0.1:$LARDER_PORT" --admin-listen 127.0.0.1:0 \
    --cache-dir "$dir/larder-cache" >/dev/null 2>"$dir/larder.err" &
pids+=($!)

# Squid with ssl-bump.
(cd "$dir" && apt-get download -qq squid-openssl >/dev/null 2>&1) || { echo "cannot download squid-openssl" >&2; exit 2; }
dpkg-deb -x "$dir"/squid-openssl_*.deb "$dir/squid-root"
squid="$dir/squid-root/usr/sbin/squid"
mkdir -p "$dir/squid"
"$dir/squid-root/usr/lib/squid/security_file_certgen" -c -s "$dir/squid/ssl_db" -M 16MB >/dev/null
cat > "$dir/squid/squid.conf" <<EOF
http_port 127.0.0.1:$SQUID_PORT ssl-bump generate-host-certificates=on dynamic_cert_mem_cache_size=16MB tls-cert=$dir/ca/ca.pem tls-key=$dir/squid/ca.key
sslcrtd_program $dir/squid-root/usr/lib/squid/security_file_certgen -s $dir/squid/ssl_db -M 16MB
sslcrtd_children 4 startup=1 idle=1
ssl_bump bump all
tls_outgoing_options cafile=$dir/origin-ca.pem
acl SSL_ports port $origin_port
acl CONNECT method CONNECT
http_access deny CONNECT !SSL_ports
acl bench_clients src 127.0.0.1/32
http_access allow bench_clients
http_access deny all
visible_hostname larder-tls-bench
pid_filename $dir/squid/squid.pid
cache_effective_user proxy
cache_log $dir/squid/cache.log
access_log none
cache_store_log none
coredump_dir $dir/squid
shutdown_lifetime 1 seconds
cache_mem 512 MB
memory_cache_mode always
maximum_object_size_in_memory 16 MB
collapsed_forwarding on
pinger_enable off
EOF
cp "$dir/ca/ca.key" "$dir/squid/ca.key"   # the same CA; Squid reads its key as the proxy user
chown -R proxy:proxy "$dir/squid"
"${pin_proxy[@]}" "$squid" -N -d 1 -f "$dir/squid/squid.conf" >"$dir/squid/stdout" 2>&1 &
pids+=($!)

# Preflight: each object through each proxy three times, bytes equal to the origin's.
objects=(hit-1k "/obj/1k?size=1024&cc=max-age=86400" hit-100k "/obj/100k?size=102400&cc=max-age=86400"
    hit-2m "/obj/2m?size=2097152&cc=max-age=86400")
for port in $LARDER_PORT $SQUID_PORT; do
    ready=no
    for _ in $(seq 100); do
        if curl -s -o /dev/null --proxy "http://127.0.0.1:$port" --cacert "$dir/ca/ca.pem" "https://localhost:$origin_port/ready"; then ready=yes; break; fi
        sleep 0.1
    done
    [[ $ready == yes ]] || { echo "the proxy on $port never answered over TLS; logs: $dir" >&2; tail -5 "$dir/larder.err" "$dir/squid/cache.log" >&2; exit 1; }
    for ((i = 1; i < ${#objects[@]}; i += 2)); do
        path=${objects[i]}
        curl -s --cacert "$dir/origin-ca.pem" "https://localhost:$origin_port$path" -o "$dir/direct"
        for _ in 1 2 3; do
            curl -s --proxy "http://127.0.0.1:$port" --cacert "$dir/ca/ca.pem" "https://localhost:$origin_port$path" -o "$dir/through"
            cmp -s "$dir/direct" "$dir/through" || { echo "preflight: $path through port $port differs from the origin's" >&2; exit 1; }
        done
    done
done

load() { # port path [--new-connections]
    "${pin_load[@]}" "$dir/tlsload" --proxy "127.0.0.1:$1" --host localhost --port "$origin_port" --ca "$dir/ca/ca.pem" \
        --path "$2" --connections "$CONNECTIONS" --seconds "$DURATION" ${3:-}
}
field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(d[sys.argv[2]] if d['errors'] == 0 else 0)" "$1" "$2"; }

echo "CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs; Larder $($LARDER --version 2>/dev/null || echo "$LARDER"), Squid $($squid -v | sed -n 's/^Squid Cache: Version //p') (OpenSSL)"
printf '%-10s %-4s %14s %14s %8s\n' workload rep larder squid ratio
for workload in ${WORKLOADS:-hit-1k hit-100k handshake}; do
    case $workload in
        hit-1k) path=${objects[1]}; extra=""; key=requests_per_second ;;
        hit-100k) path=${objects[3]}; extra=""; key=requests_per_second ;;
        hit-2m) path=${objects[5]}; extra=""; key=requests_per_second ;;
        handshake) path=${objects[1]}; extra=--new-connections; key=handshakes_per_second ;;
        *) echo "unknown workload $workload (hit-1k, hit-100k, hit-2m, handshake)" >&2; exit 2 ;;
    esac
    ratios=()
    for rep in $(seq "$REPS"); do
        # Alternate which proxy goes first.
        if ((rep % 2)); then a=$(load $LARDER_PORT "$path" $extra); b=$(load $SQUID_PORT "$path" $extra)
        else b=$(load $SQUID_PORT "$path" $extra); a=$(load $LARDER_PORT "$path" $extra); fi
        larder_rate=$(field "$a" "$key"); squid_rate=$(field "$b" "$key")
        ratio=$(python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.3f}' if b else 'inf')" "$larder_rate" "$squid_rate")
        ratios+=("$ratio")
        printf '%-10s %-4s %14.0f %14.0f %8s\n' "$workload" "$rep" "$larder_rate" "$squid_rate" "$ratio"
    done
    median=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
    printf '%s: median larder/squid %s over %s interleaved reps\n' "$workload" "$median" "$REPS"
done
