#!/usr/bin/env bash
# A new operator's walk from `apt install ./larder_*.deb` to apt and pip hits, counted and timed,
# against apt-cacher-ng for apt and Squid with ssl-bump for pip (issue 58, "Report").
#
#   Benchmarks/onboarding/walkthrough.sh [--deb FILE] [--out FILE] [--reps N] [--keep]
#
# As root, on Debian bookworm, with deb.debian.org and pypi.org reachable. See --help and
# docs/OPERATIONS.md, "Onboarding walkthrough".
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: Benchmarks/onboarding/walkthrough.sh [--deb FILE] [--out FILE] [--reps N] [--keep]

Walks a new operator's steps, as the README gives them, from `apt install ./larder_*.deb` to
apt hits (Debian's mirror, plain HTTP) and pip hits (PyPI over HTTPS, tls.intercept), then the
same apt steps with apt-cacher-ng and the same pip steps with Squid ssl-bump. Every command an
operator types is one step, written down as typed; each product's hits are verified from its
own log or /stats. Prints a table and writes it, with every step, as markdown to --out.

  --deb FILE   the package to install (default: build it with `make deb`)
  --out FILE   the markdown report (default: /tmp/walkthrough.md)
  --reps N     hit runs per product, interleaved (default 3; the table shows the median)
  --keep       keep the scratch directory (logs, configs) instead of removing it

Needs root, no larder package installed and no /etc/larder, ports 3128, 3129, 3142 and 13128
free. Leaves the machine as it found it: the apt and pip steps use a scratch APT_CONFIG and venv;
`larder client --apply` writes under a scratch --root (never the system's apt or pip
configuration or trust store); larder and apt-cacher-ng are purged at the end (apt-cacher-ng only
if this script installed it) and /etc/larder removed; Squid's ssl-bump build (squid-openssl) is
extracted into the scratch directory, not installed; every process is stopped by its PID.
Without systemd as PID 1 the service is started as larder.service's ExecStart would, and the
report says so. Network steps have timeouts (STEP_TIMEOUT, default 600 s).
EOF
}

deb="" out=/tmp/walkthrough.md reps=3 keep=no
while (($#)); do
    case $1 in
        --deb) deb=$(realpath "$2"); shift 2 ;;
        --out) out=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        --keep) keep=yes; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "unknown argument $1 (--help)" >&2; exit 64 ;;
    esac
done
STEP_TIMEOUT=${STEP_TIMEOUT:-600}
cd "$(dirname "$0")/../.."
repo=$(pwd)

[[ $(id -u) -eq 0 ]] || { echo "walkthrough: run as root (dpkg, apt)" >&2; exit 2; }
if dpkg-query -W -f='${Status}' larder 2>/dev/null | grep -q 'ok installed'; then
    echo "walkthrough: a larder package is installed already; this walk starts from none" >&2; exit 2
fi
if [[ -e /etc/larder || -e /var/lib/larder ]]; then
    echo "walkthrough: /etc/larder or /var/lib/larder exists; this walk starts from none (and removes them at the end)" >&2; exit 2
fi
for port in 3128 3129 3142 13128; do
    if ss -ltnH "sport = :$port" | grep -q .; then echo "walkthrough: port $port is in use" >&2; exit 2; fi
done
for tool in apt-get dpkg-deb python3 curl openssl ss timeout; do
    command -v "$tool" >/dev/null || { echo "walkthrough: needs $tool" >&2; exit 2; }
done

# The fixed workload: Debian packages fetched with `apt-get download` (so what is installed here
# does not change what is fetched), and wheels pinned by version (pure Python, each < 4 MB:
# Squid's default maximum_object_size).
APT_PACKAGES=(hello jq libjq1 libonig5 tree figlet htop nano zstd lsof vim-runtime)
PIP_PACKAGES=(six==1.16.0 idna==3.10 certifi==2024.8.30 urllib3==2.2.3 requests==2.32.3
    packaging==24.2 attrs==24.2.0 pyparsing==3.2.0 typing_extensions==4.12.2 setuptools==75.6.0)

S=$(mktemp -d /tmp/walkthrough.XXXXXX)
chmod 755 "$S"
# A fresh machine's environment: no proxy, CA bundle or pip settings inherited from this one's
# (a CI or sandbox host may set PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE..., which would
# override the steps being counted); HOME is scratch, so root's own pip config is not read.
for var in $(compgen -e); do
    case $var in
        PIP_* | REQUESTS_CA_BUNDLE | SSL_CERT_FILE | SSL_CERT_DIR | CURL_CA_BUNDLE | [Hh][Tt][Tt][Pp]*_[Pp][Rr][Oo][Xx][Yy] | [Nn][Oo]_[Pp][Rr][Oo][Xx][Yy] | [Aa][Ll][Ll]_[Pp][Rr][Oo][Xx][Yy]) unset "$var" ;;
    esac
done
export HOME=$S/home
mkdir -p "$HOME"
log=$S/walk.log
pids=()
installed_acng=no
installed_larder=no
larder_pid=""

cleanup() {
    local rc=$?
    set +e
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
    done
    if [[ $installed_larder == yes ]]; then
        # the copies of `larder client`'s bundle put beside the package's files (see the pip steps)
        rm -f /etc/larder/ca-bundle.pem /etc/larder/larder-ca.pem
        dpkg --purge larder >>"$log" 2>&1
        rm -rf /etc/larder /var/lib/larder /var/cache/larder
    fi
    if [[ $installed_acng == yes ]]; then
        # exactly the packages its install added (never a blanket autoremove)
        [[ -f $S/dpkg-after ]] || dpkg-query -W -f='${Package}\n' | sort > "$S/dpkg-after"
        # shellcheck disable=SC2046
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $(comm -13 "$S/dpkg-before" "$S/dpkg-after") >>"$log" 2>&1
    fi
    if [[ $keep == yes ]]; then echo "walkthrough: scratch kept in $S" >&2; else rm -rf "$S"; fi
    exit $rc
}
trap cleanup EXIT

say() { printf '%s\n' "$*" | tee -a "$log"; }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

# step PRODUCT TRACK "command as the operator types it" [-- command run here]
# TRACK: setup (counts for every goal of that product), apt or pip. Without `-- ...` the typed command is what runs (through bash).
declare -A nsteps
steps_md=()
step() {
    local product=$1 track=$2 typed=$3 shown
    shift 3
    nsteps[$product/$track]=$((${nsteps[$product/$track]:-0} + 1))
    # as the operator types it: pip from the venv, scratch folders as /tmp/...
    shown=${typed//$S\/venv\/bin\//}
    shown=${shown//"cd $S/dl && "/}
    shown=${shown//$S\//\/tmp\/}
    steps_md+=("$product|$track|$shown")
    say "[$product $track] \$ $shown"
    local rc=0
    if (($#)) && [[ $1 == -- ]]; then
        shift
        if declare -F "$1" >/dev/null; then
            "$@" >>"$log" 2>&1 || rc=$?   # a function here (bounded waits of its own)
        else
            timeout "$STEP_TIMEOUT" "$@" >>"$log" 2>&1 || rc=$?
        fi
    else
        timeout "$STEP_TIMEOUT" bash -c "$typed" >>"$log" 2>&1 || rc=$?
    fi
    ((rc == 0)) || { say "  failed with exit $rc (log: $log)"; return $rc; }
}
note() { # a deviation from the operator's literal step, for the report
    steps_md+=("$1|note|$2")
    say "  note: $2"
}

# --- the package ---------------------------------------------------------------------------------
if [[ -z $deb ]]; then
    say "building the package: make deb"
    make deb >>"$log" 2>&1 || { echo "make deb failed; log: $log" >&2; exit 1; }
    deb=$(ls -t "$repo"/.build/deb/larder_*.deb | head -1)
fi
[[ -f $deb ]] || { echo "no package at $deb" >&2; exit 2; }
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/^model name\s*: //')
say "walkthrough: $(date -u +%FT%TZ), $(basename "$deb"), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?'), CPU: $cpu, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# --- scratch apt: nothing under /etc/apt is read or written --------------------------------------
# Each run gets fresh lists and archives, as a new client machine would.
mkdir -p "$S/apt/apt.conf.d" "$S/apt/sources.list.d" "$S/apt/preferences.d"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" > "$S/apt/sources.list"
cat > "$S/apt/apt.conf" <<EOF
Dir::Etc::main "/dev/null";
Dir::Etc::parts "$S/apt/apt.conf.d";
Dir::Etc::sourcelist "$S/apt/sources.list";
Dir::Etc::sourceparts "$S/apt/sources.list.d";
Dir::Etc::preferences "/dev/null";
Dir::Etc::preferencesparts "$S/apt/preferences.d";
Dir::State "$S/apt/state";
Dir::State::status "/var/lib/dpkg/status";
Dir::Cache "$S/apt/cache";
Dir::Log "$S/apt/log";
APT::Sandbox::User "root";
Acquire::http::Timeout "60";
Acquire::Retries "0";
Acquire::Languages "none";
EOF
fresh_apt() { rm -rf "$S/apt/state" "$S/apt/cache" "$S/dl"; mkdir -p "$S/apt/state/lists/partial" "$S/apt/cache/archives/partial" "$S/apt/log" "$S/dl"; }
export APT_CONFIG=$S/apt/apt.conf
pkgs="${APT_PACKAGES[*]}"
apt_update="apt-get update"
apt_fetch="cd $S/dl && apt-get download $pkgs"

# --- scratch pip: a venv whose site config holds pip's settings ----------------------------------
python3 -m venv "$S/venv" >>"$log" 2>&1
pip=$S/venv/bin/pip
wheels="${PIP_PACKAGES[*]}"
pip_fetch() { echo "$pip download --no-deps --no-cache-dir --only-binary=:all: --timeout 60 --retries 0 -d $1 $wheels"; }

declare -A t_setup t_miss t_hit hits_ok
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# --- Larder: install, start ----------------------------------------------------------------------
L=Larder
cfg=/etc/larder/larder.toml
t0=$(now)
step $L setup "apt install ./$(basename "$deb")" -- env -u APT_CONFIG DEBIAN_FRONTEND=noninteractive apt-get install -y "$deb"
installed_larder=yes
step $L setup "larder check-config $cfg"

# What larder.service does on start, without systemd: ExecStartPre (if the unit has one), then
# ExecStart, in the StateDirectory, with STATE_DIRECTORY and CACHE_DIRECTORY set as systemd sets
# them and the admin token as the credential LoadCredential= would pass.
mkdir -p /var/lib/larder /var/cache/larder "$S/credentials"
unit=$(dpkg -L larder | grep '/larder.service$')
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
exec_pre=$(sed -n 's/^ExecStartPre=//p' "$unit")
start_larder() {
    # shellcheck disable=SC2086
    if [[ -n $exec_pre ]]; then (cd /var/lib/larder && STATE_DIRECTORY=/var/lib/larder $exec_pre) >>"$log" 2>&1; fi
    cp /etc/larder/admin.token "$S/credentials/admin-token"
    local argv=${exec_start//\$\{CACHE_DIRECTORY\}//var/cache/larder}
    # shellcheck disable=SC2086
    (cd /var/lib/larder && STATE_DIRECTORY=/var/lib/larder CACHE_DIRECTORY=/var/cache/larder CREDENTIALS_DIRECTORY=$S/credentials exec $argv) \
        >>"$S/larder.stdout" 2>>"$S/larder.stderr" &
    larder_pid=$!
    pids+=("$larder_pid")
    for _ in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:3129/healthz && return 0; sleep 0.1; done
    echo "larder did not start; $S/larder.stderr:" >&2; tail -5 "$S/larder.stderr" >&2; return 1
}
stop_larder() {
    kill "$larder_pid"
    for _ in $(seq 300); do kill -0 "$larder_pid" 2>/dev/null || break; sleep 0.1; done
}
step $L setup "systemctl daemon-reload" -- true
note $L "no systemd here: daemon-reload is a no-op; 'enable --now' runs the unit's ${exec_pre:+ExecStartPre ($exec_pre) and }ExecStart ($exec_start) as root in /var/lib/larder with STATE_DIRECTORY and CACHE_DIRECTORY set, binding the configured addresses (no socket units)"
step $L setup "systemctl enable --now larder.socket larder-admin.socket" -- start_larder

# --- Larder apt ----------------------------------------------------------------------------------
step $L apt "edit $cfg: [cache] presets = [\"debian\"]" -- sed -i 's/^presets = \[\]/presets = ["debian"]/' "$cfg"
step $L apt "systemctl reload larder" -- kill -HUP "$larder_pid"
sleep 1
say "  larder's log after the reload: $(grep -i reload "$S/larder.stderr" | tail -1)"
step $L apt "echo 'Acquire::http::Proxy \"http://127.0.0.1:3128\";' | tee /etc/apt/apt.conf.d/01larder" \
    -- bash -c "echo 'Acquire::http::Proxy \"http://127.0.0.1:3128\";' > $S/apt/apt.conf.d/01larder"
note $L "the proxy line goes to the scratch APT_CONFIG's apt.conf.d, not /etc/apt; apt-get runs with fresh lists and archives per run"

stats() { curl -s --max-time 5 http://127.0.0.1:3129/stats; }
stat_field() { python3 -c "import json,sys; d=json.load(sys.stdin)['requests']; print(sum(d[k] for k in sys.argv[1:]))" "$@"; }
marker() { curl -s -o /dev/null --max-time 10 -x "http://127.0.0.1:$1" "http://walkthrough-marker.invalid/$2" || true; }

fresh_apt
marker 3128 larder-apt-miss
t1=$(now); t_setup[$L/apt]=$(elapsed "$t0" "$t1")
step $L apt "$apt_update"
step $L apt "$apt_fetch"
t_miss[$L/apt]=$(elapsed "$t1" "$(now)")

# --- apt-cacher-ng: install, start (its postinst would start the service under systemd) ----------
A=apt-cacher-ng
if dpkg-query -W -f='${Status}' apt-cacher-ng 2>/dev/null | grep -q 'ok installed'; then
    echo "walkthrough: apt-cacher-ng is installed already; refusing to purge it later" >&2; exit 2
fi
t0=$(now)
dpkg-query -W -f='${Package}\n' | sort > "$S/dpkg-before"
installed_acng=yes
step $A setup "apt install apt-cacher-ng" -- env -u APT_CONFIG DEBIAN_FRONTEND=noninteractive apt-get install -y -q apt-cacher-ng
dpkg-query -W -f='${Package}\n' | sort > "$S/dpkg-after"
mkdir -p "$S/acng/cache" "$S/acng/log"
chown -R apt-cacher-ng: "$S/acng" 2>/dev/null || true
note $A "no systemd here: the service its postinst starts is run as 'apt-cacher-ng -c /etc/apt-cacher-ng ForeGround=1' with the cache and logs in the scratch directory (not a step: the package does it)"
note $A "this machine's DNS resolves only deb.debian.org, not ftp.debian.org where apt-cacher-ng sends Debian requests by default (503 Host not found): it runs with Remap-debrep's backend set to deb.debian.org/debian (not a step: on an open network the default works)"
start_acng() {
    (exec setpriv --reuid=apt-cacher-ng --regid=apt-cacher-ng --init-groups /usr/sbin/apt-cacher-ng -c /etc/apt-cacher-ng ForeGround=1 \
        BindAddress=127.0.0.1 Port=3142 CacheDir="$S/acng/cache" LogDir="$S/acng/log" PidFile="$S/acng/pid" SocketPath="$S/acng/socket" 'Remap-debrep=file:deb_mirror*.gz /debian ; deb.debian.org/debian') \
        >>"$S/acng/stdout" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:3142/acng-report.html && return 0; sleep 0.1; done
    echo "apt-cacher-ng did not start" >&2; return 1
}
start_acng
step $A apt "echo 'Acquire::http::Proxy \"http://127.0.0.1:3142\";' | tee /etc/apt/apt.conf.d/01acng" \
    -- bash -c "echo 'Acquire::http::Proxy \"http://127.0.0.1:3142\";' > $S/apt/apt.conf.d/01larder"
fresh_apt
t1=$(now); t_setup[$A/apt]=$(elapsed "$t0" "$t1")
step $A apt "$apt_update"
step $A apt "$apt_fetch"
t_miss[$A/apt]=$(elapsed "$t1" "$(now)")
acng_count() { cat "$S"/acng/log/apt-cacher.log 2>/dev/null | awk -F'|' -v t="$1" '$2 == t && $5 ~ /\.deb$/' | wc -l; }

# --- apt hit runs, interleaved: each a new client (fresh lists and archives) ---------------------
larder_hit_runs=() acng_hit_runs=()
larder_apt_ok=yes acng_apt_ok=yes
ndeb=0
for rep in $(seq "$reps"); do
    for product in $L $A; do
        if [[ $product == "$L" ]]; then port=3128; else port=3142; fi
        echo "Acquire::http::Proxy \"http://127.0.0.1:$port\";" > "$S/apt/apt.conf.d/01larder"
        fresh_apt
        if [[ $product == "$L" ]]; then marker 3128 "larder-apt-hit-$rep"; before=$(stats); else i_before=$(acng_count I); o_before=$(acng_count O); fi
        t1=$(now)
        if ((rep == 1)); then
            step "$product" apt "$apt_update"
            step "$product" apt "$apt_fetch"
        else
            timeout "$STEP_TIMEOUT" apt-get update >>"$log" 2>&1
            (cd "$S/dl" && timeout "$STEP_TIMEOUT" apt-get download "${APT_PACKAGES[@]}") >>"$log" 2>&1
        fi
        t=$(elapsed "$t1" "$(now)")
        ndeb=$(find "$S/dl" -name '*.deb' | wc -l)
        if [[ $product == "$L" ]]; then
            after=$(stats)
            misses=$(($(stat_field miss <<<"$after") - $(stat_field miss <<<"$before")))
            hits=$(($(stat_field hit disk_hit <<<"$after") - $(stat_field hit disk_hit <<<"$before")))
            say "  $L apt hit run $rep: ${t}s, /stats: +$hits hits, +$misses misses, $ndeb .debs"
            ((hits >= ndeb)) || larder_apt_ok=no   # InRelease may be fetched again: the access log decides (below)
            larder_hit_runs+=("$t")
        else
            sleep 1
            hits=$(($(acng_count O) - o_before)); misses=$(($(acng_count I) - i_before))
            say "  $A apt hit run $rep: ${t}s, apt-cacher.log: +$hits .debs sent (O), +$misses .debs fetched upstream (I), $ndeb .debs"
            ((misses == 0 && hits >= ndeb)) || acng_apt_ok=no
            acng_hit_runs+=("$t")
        fi
    done
done
step $L apt "journalctl -u larder | grep pool/" -- true
step $A apt "grep pool/ /var/log/apt-cacher-ng/apt-cacher.log" -- true
t_hit[$L/apt]=$(median "${larder_hit_runs[@]}")
t_hit[$A/apt]=$(median "${acng_hit_runs[@]}")

# --- Larder pip: the README's pip quick start ----------------------------------------------------
# `larder client --apply` runs with --root into a scratch root holding a copy of the system's CA
# bundle (what it reads to make its combined bundle), so nothing under /etc outside /etc/larder is
# written. pip reads the pip.conf it wrote there through PIP_CONFIG_FILE, where a real operator's
# pip reads /etc/xdg/pip/pip.conf; the combined bundle that file names is copied to its real path,
# /etc/larder/ca-bundle.pem (Larder's own directory, removed at the end).
croot=$S/root
mkdir -p "$croot/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$croot/etc/ssl/certs/ca-certificates.crt"
larder_pip() { rm -f "$S/venv/pip.conf"; export PIP_CONFIG_FILE=$croot/etc/xdg/pip/pip.conf; }
client_apply() {
    larder client --apply --tool pip --dir /var/lib/larder/larder-ca --root "$croot" || return
    cp "$croot/etc/larder/ca-bundle.pem" "$croot/etc/larder/larder-ca.pem" /etc/larder/
    echo "--- pip.conf as written:"; cat "$croot/etc/xdg/pip/pip.conf"
}
t0=$(now)
step $L pip "edit $cfg: [cache] presets = [\"debian\", \"pypi\"], [tls] intercept = [\"pypi.org\", \"files.pythonhosted.org\"]" \
    -- sed -i -e 's/^presets = \[.*\]/presets = ["debian", "pypi"]/' -e 's/^intercept = \[\]/intercept = ["pypi.org", "files.pythonhosted.org"]/' "$cfg"
restart_larder() { stop_larder; start_larder; }
step $L pip "systemctl restart larder" -- restart_larder
say "  larder's log on start: $(grep 'created the CA' "$S/larder.stderr" | tail -1)"
step $L pip "larder ca show --dir /var/lib/larder/larder-ca"
step $L pip "larder client --apply --tool pip --dir /var/lib/larder/larder-ca" -- client_apply
note $L "run with --root /tmp/…/root (a scratch root holding a copy of /etc/ssl/certs/ca-certificates.crt): its files (/etc/xdg/pip/pip.conf, /etc/larder/ca-bundle.pem and larder-ca.pem, /etc/ca-certificates/update.d/larder-bundle, /etc/profile.d/larder-{proxy,python}.sh) land there, not in /etc; pip reads that pip.conf through PIP_CONFIG_FILE instead of from /etc/xdg/pip, and the bundle it names is copied to /etc/larder. The operator's own command writes those files in /etc and, like this one, reads the system store without changing it"
if [[ -e /etc/pip.conf ]]; then
    note $L "this machine has an /etc/pip.conf ($(grep -v '^\s*#' /etc/pip.conf | tr '\n' ' ')): pip reads it after /etc/xdg/pip/pip.conf, so its settings would win over the file --apply writes; PIP_CONFIG_FILE outranks both here. A fresh Debian has none"
fi
larder_pip
# Not a step: the onboarding page other machines would use, through the proxy.
say "  http://larder.setup/ through the proxy: $(curl -s -o /dev/null -w '%{http_code} %{content_type} %{size_download} bytes' --max-time 10 -x http://127.0.0.1:3128 http://larder.setup/ || true)"
t1=$(now); t_setup[$L/pip]=$(elapsed "$t0" "$t1")
before=$(stats)
step $L pip "$(pip_fetch "$S/pip-l0")"
t_miss[$L/pip]=$(elapsed "$t1" "$(now)")
after=$(stats)
say "  $L pip miss run: /stats: +$(($(stat_field intercept <<<"$after") - $(stat_field intercept <<<"$before"))) intercepted requests"
unset PIP_CONFIG_FILE

# --- Squid ssl-bump: the steps of Squid's documentation (SslBump, "Configuring Squid") -----------
Q="Squid ssl-bump"
t0=$(now)
sq=$S/squid
mkdir -p "$sq"
step "$Q" setup "apt install squid-openssl" -- bash -c "cd $sq && apt-get download -q squid-openssl && dpkg-deb -x squid-openssl_*.deb root"
note "$Q" "squid-openssl is extracted into the scratch directory (apt-get download + dpkg-deb -x), not installed, so the machine's squid stays; Debian's squid-common (error pages, /etc/squid) is the one installed here"
step "$Q" pip "openssl req -x509 -new -newkey rsa:2048 -nodes -days 365 -subj '/CN=squid-bump-ca' -keyout /etc/squid/bump.key -out /etc/squid/bump.crt" \
    -- openssl req -x509 -new -newkey rsa:2048 -nodes -days 365 -subj /CN=squid-bump-ca -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign -keyout "$sq/bump.key" -out "$sq/bump.crt"
step "$Q" pip "/usr/lib/squid/security_file_certgen -c -s /var/lib/squid/ssl_db -M 4MB" -- "$sq/root/usr/lib/squid/security_file_certgen" -c -s "$sq/ssl_db" -M 4MB
step "$Q" pip "chown -R proxy: /var/lib/squid/ssl_db /etc/squid/bump.key" -- chown -R proxy:proxy "$sq"
cat > "$sq/squid.conf" <<EOF
# Debian's default squid.conf, reduced to its active lines, plus the ssl-bump lines.
acl localnet src 10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 fc00::/7 fe80::/10
acl SSL_ports port 443
acl Safe_ports port 80 443 21 70 210 1025-65535 280 488 591 777
http_access deny !Safe_ports
http_access deny CONNECT !SSL_ports
http_access allow localhost manager
http_access deny manager
http_access allow localhost
http_access deny all
coredump_dir $sq
cache_dir ufs $sq/cache 1000 16 256
refresh_pattern ^ftp: 1440 20% 10080
refresh_pattern -i (/cgi-bin/|\?) 0 0% 0
# not an operator's step (see the note): this machine's network strips Cache-Control and
# Last-Modified from PyPI's answers, which on the open internet give wheels a year's freshness.
refresh_pattern -i ^https://files\.pythonhosted\.org/packages/ 525600 100% 525600
refresh_pattern . 0 20% 4320
# the edit:
http_port 127.0.0.1:13128 ssl-bump generate-host-certificates=on dynamic_cert_mem_cache_size=4MB tls-cert=$sq/bump.crt tls-key=$sq/bump.key
sslcrtd_program $sq/root/usr/lib/squid/security_file_certgen -s $sq/ssl_db -M 4MB
acl step1 at_step SslBump1
ssl_bump peek step1
ssl_bump bump all
# scratch paths instead of Debian's:
pid_filename $sq/squid.pid
cache_log $sq/cache.log
access_log stdio:$sq/access.log squid   # stdio: written at once (the default daemon: module buffers)
buffered_logs off
cache_effective_user proxy
visible_hostname walkthrough-squid
shutdown_lifetime 1 seconds
pinger_enable off
EOF
chown proxy:proxy "$sq/squid.conf"
step "$Q" pip "edit /etc/squid/squid.conf: http_port 3128 ssl-bump generate-host-certificates=on tls-cert=… tls-key=…; sslcrtd_program …; acl step1 at_step SslBump1; ssl_bump peek step1; ssl_bump bump all" -- true
note "$Q" "Squid listens on 127.0.0.1:13128 here (3128 is Larder's); its access log is in the scratch directory"
note "$Q" "this machine's network strips Cache-Control, ETag and Last-Modified from pypi.org and files.pythonhosted.org answers (and deb.debian.org's); files.pythonhosted.org sends max-age=365000000 on the open internet, so Squid's defaults would keep wheels; here a refresh_pattern giving them a year is added (not a step). Larder's pypi preset and apt-cacher-ng keep package files whatever the headers"
start_squid() {
    chown -R proxy:proxy "$sq"
    "$sq/root/usr/sbin/squid" -N -d 1 -f "$sq/squid.conf" >"$sq/stdout" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:13128/ && return 0; sleep 0.1; done
    echo "squid did not start; $sq/cache.log:" >&2; tail -5 "$sq/cache.log" >&2; return 1
}
step "$Q" pip "edit /etc/squid/squid.conf: cache_dir ufs /var/spool/squid 1000 16 256 (Debian's has none: memory only, objects <= 512 KB)" -- true
step "$Q" pip "squid -z" -- "$sq/root/usr/sbin/squid" -N -z -f "$sq/squid.conf"
step "$Q" pip "systemctl restart squid" -- start_squid
cp /etc/ssl/certs/ca-certificates.crt "$S/squid-ca-certificates.crt"
cat "$sq/bump.crt" >> "$S/squid-ca-certificates.crt"
step "$Q" pip "cp /etc/squid/bump.crt /usr/local/share/ca-certificates/squid-bump.crt && update-ca-certificates" -- true
note "$Q" "as for Larder, the bundle is a scratch copy of the system's plus the CA"
step "$Q" pip "pip config set global.cert /etc/ssl/certs/ca-certificates.crt" -- true
note "$Q" "pip config goes to the scratch venv's site file (pip config --site) and points at the scratch bundle"
step "$Q" pip "export HTTPS_PROXY=http://127.0.0.1:3128" -- true
squid_count() { # hit | other: wheel lines in Squid's access log
    awk -v want="$1" '$7 ~ /files\.pythonhosted\.org\/packages\// { hit = ($4 ~ /^TCP_[A-Z_]*HIT\//); if ((want == "hit") == hit) n++ } END { print n + 0 }' "$sq/access.log" 2>/dev/null
}
t1=$(now); t_setup[$Q/pip]=$(elapsed "$t0" "$t1")
squid_pip() { unset PIP_CONFIG_FILE; "$pip" config --site set global.cert "$S/squid-ca-certificates.crt" >>"$log" 2>&1; }
squid_pip
step "$Q" pip "HTTPS_PROXY=http://127.0.0.1:13128 $(pip_fetch "$S/pip-s0")"
t_miss[$Q/pip]=$(elapsed "$t1" "$(now)")

# --- pip hit runs, interleaved -------------------------------------------------------------------
larder_hit_runs=() squid_hit_runs=()
larder_pip_ok=yes squid_pip_ok=yes
nwhl=${#PIP_PACKAGES[@]}
for rep in $(seq "$reps"); do
    for product in $L "$Q"; do
        # Larder: pip.conf from `larder client --apply` (proxy and cert); Squid: HTTPS_PROXY and the venv's cert
        if [[ $product == "$L" ]]; then port=3128; larder_pip; proxy_env=""; else port=13128; squid_pip; proxy_env="HTTPS_PROXY=http://127.0.0.1:$port "; fi
        d=$S/pip-$port-$rep
        if [[ $product == "$L" ]]; then marker 3128 "larder-pip-hit-$rep"; before=$(stats); else h0=$(squid_count hit); m0=$(squid_count other); fi
        t1=$(now)
        if ((rep == 1)); then
            step "$product" pip "$proxy_env$(pip_fetch "$d")"
        else
            timeout "$STEP_TIMEOUT" bash -c "$proxy_env$(pip_fetch "$d")" >>"$log" 2>&1
        fi
        t=$(elapsed "$t1" "$(now)")
        got=$(find "$d" -name '*.whl' | wc -l)
        if [[ $product == "$L" ]]; then
            after=$(stats)
            misses=$(($(stat_field miss <<<"$after") - $(stat_field miss <<<"$before")))
            hits=$(($(stat_field hit disk_hit <<<"$after") - $(stat_field hit disk_hit <<<"$before")))
            say "  $L pip hit run $rep: ${t}s, /stats: +$hits hits, +$misses misses, $got wheels"
            ((hits >= nwhl && got == nwhl)) || larder_pip_ok=no   # index pages are revalidated: the access log decides (below)
            larder_hit_runs+=("$t")
        else
            sleep 1
            hits=$(($(squid_count hit) - h0)); misses=$(($(squid_count other) - m0))
            say "  $Q pip hit run $rep: ${t}s, access.log: +$hits wheel hits (TCP_*HIT), +$misses other wheel lines (TCP_MISS, TCP_REFRESH_*...), $got wheels"
            ((misses == 0 && hits >= nwhl && got == nwhl)) || squid_pip_ok=no
            squid_hit_runs+=("$t")
        fi
    done
done
step $L pip "journalctl -u larder | grep files.pythonhosted.org" -- true
step "$Q" pip "grep files.pythonhosted.org /var/log/squid/access.log" -- true
t_hit[$L/pip]=$(median "${larder_hit_runs[@]}")
t_hit[$Q/pip]=$(median "${squid_hit_runs[@]}")
hits_ok[$L/apt]=$larder_apt_ok hits_ok[$A/apt]=$acng_apt_ok hits_ok[$L/pip]=$larder_pip_ok hits_ok[$Q/pip]=$squid_pip_ok

# Larder's own access log, per URL, once the process has exited (it flushes on exit).
stop_larder
# Every pool/ and wheel line of the hit runs must be a hit (the log is complete once Larder has exited).
pool_total=$(awk '/walkthrough-marker.invalid\/larder-apt-hit-1/ {on=1} /walkthrough-marker.invalid\/larder-pip/ {on=0} on && /\/pool\//' "$S/larder.stdout" | wc -l)
pool_hit=$(awk '/walkthrough-marker.invalid\/larder-apt-hit-1/ {on=1} /walkthrough-marker.invalid\/larder-pip/ {on=0} on && /\/pool\// && $6 ~ /hit/' "$S/larder.stdout" | wc -l)
whl_total=$(awk '/walkthrough-marker.invalid\/larder-pip-hit-1/ {on=1} on && /files\.pythonhosted\.org\/packages/' "$S/larder.stdout" | wc -l)
whl_hit=$(awk '/walkthrough-marker.invalid\/larder-pip-hit-1/ {on=1} on && /files\.pythonhosted\.org\/packages/ && $6 ~ /hit/' "$S/larder.stdout" | wc -l)
((pool_total == reps * ndeb && pool_hit == pool_total)) || hits_ok[$L/apt]=no
((whl_total == reps * nwhl && whl_hit == whl_total)) || hits_ok[$L/pip]=no
say "Larder access log: apt hit runs $pool_hit of $pool_total pool/ lines hits (expected $((reps * ndeb))); pip hit runs $whl_hit of $whl_total wheel lines hits (expected $((reps * nwhl)))"
pool_hits=$(awk '/walkthrough-marker.invalid\/larder-apt-hit-1/ {on=1} /walkthrough-marker.invalid\/larder-pip/ {on=0} on && /\/pool\// {print $6}' "$S/larder.stdout" | sort | uniq -c | tr '\n' ' ')
whl_hits=$(awk '/walkthrough-marker.invalid\/larder-pip-hit-1/ {on=1} on && /files\.pythonhosted\.org/ {print $6}' "$S/larder.stdout" | sort | uniq -c | tr '\n' ' ')
say "Larder access log, apt hit runs, pool/ lines by outcome: ${pool_hits:-none}"
say "Larder access log, pip hit runs, files.pythonhosted.org lines by outcome: ${whl_hits:-none}"

# --- the table -----------------------------------------------------------------------------------
count() { echo $((${nsteps[$1/setup]:-0} + ${nsteps[$1/$2]:-0})); }
ratio() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.2f}' if b else 'inf')" "$1" "$2"; }
{
    echo "## Onboarding walkthrough: $(date -u +%FT%TZ)"
    echo
    echo "$(basename "$deb") (commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')); CPU: $cpu, $(nproc) CPUs, load at start $(cut -d' ' -f1-3 /proc/loadavg);"
    echo "$reps hit runs per product, interleaved, median shown; $ndeb .debs (${APT_PACKAGES[*]}) with apt-get update; $nwhl wheels."
    echo
    echo "| product | goal | steps | setup s | first (miss) run s | hit run s | hits verified | hit run / peer's |"
    echo "|---|---|---:|---:|---:|---:|---|---:|"
    echo "| Larder | apt | $(count $L apt) | ${t_setup[$L/apt]} | ${t_miss[$L/apt]} | ${t_hit[$L/apt]} | ${hits_ok[$L/apt]} (/stats, access log) | $(ratio "${t_hit[$L/apt]}" "${t_hit[$A/apt]}") |"
    echo "| apt-cacher-ng | apt | $(count $A apt) | ${t_setup[$A/apt]} | ${t_miss[$A/apt]} | ${t_hit[$A/apt]} | ${hits_ok[$A/apt]} (apt-cacher.log) | 1 |"
    echo "| Larder | pip | $(count $L pip) | ${t_setup[$L/pip]} | ${t_miss[$L/pip]} | ${t_hit[$L/pip]} | ${hits_ok[$L/pip]} (/stats, access log) | $(ratio "${t_hit[$L/pip]}" "${t_hit[$Q/pip]}") |"
    echo "| Squid ssl-bump | pip | $(count "$Q" pip) | ${t_setup[$Q/pip]} | ${t_miss[$Q/pip]} | ${t_hit[$Q/pip]} | ${hits_ok[$Q/pip]} (access.log) | 1 |"
    echo
    echo "Steps: every command the operator types from the package's install to a verified hit"
    echo "(Larder's pip row counts its install steps too, as a pip-only operator would type them; the"
    echo "Larder pip row's setup time starts at the config edit, after apt's walk). Setup s: install to"
    echo "ready, typing not included. Times are wall seconds on a shared machine: compare the ratio."
    echo
    echo "Larder access log, apt hit runs, pool/ lines by outcome: ${pool_hits:-none}; pip hit runs, wheel lines: ${whl_hits:-none}."
    echo
    echo "### Steps as typed"
    echo
    for p in $L $A "$Q"; do
        echo "**$p**"
        echo
        n=0
        for s in "${steps_md[@]}"; do
            IFS='|' read -r product track text <<<"$s"
            [[ $product == "$p" ]] || continue
            if [[ $track == note ]]; then echo "   - _note: ${text}_"; else n=$((n + 1)); echo "$n. ($track) \`$text\`"; fi
        done
        echo
    done
} > "$out"
say ""
sed -n '/^| product/,/^$/p' "$out" | tee -a "$log"
cp "$log" "${out%.md}.log"
say "walkthrough: report in $out, log in ${out%.md}.log"
