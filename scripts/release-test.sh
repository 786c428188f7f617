#!/usr/bin/env bash
# The release artefacts against the real thing (make test runs this last; make release-test alone):
#  1. the binary is built by `make release` in a folder holding exactly what the Dockerfile's
#     COPY lines copy (scripts/docker-context.sh), so a missing COPY fails here;
#  2. ldd lists only libraries Debian packages own: nothing from the toolchain, no RUNPATH;
#  3. it serves, and caches, with /opt/swift hidden (a mount namespace) and LD_LIBRARY_PATH
#     empty; the debug build, which needs the toolchain, must fail the same way (a control);
#  4. make install honours PREFIX and DESTDIR and keeps an existing configuration;
#  5. make deb packages it; the package installs into a scratch root with its files and
#     conffiles, its binary runs from there, remove keeps the conffiles and purge drops them;
#  6. lintian finds nothing beyond packaging/lintian-allow.
# Everything stays on 127.0.0.1; every process started is stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d /tmp/larder-release-test.XXXXXX)
pids=()
cleanup() {
    local status=$?
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null && { wait "$pid" 2>/dev/null || true; }; done
    rm -rf "$work"
    exit $status
}
trap cleanup EXIT
fail() { echo "release-test: FAIL: $*" >&2; exit 1; }
step() { echo "release-test: $*"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { # url, seconds
    for _ in $(seq 1 $(($2 * 10))); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}

step "1. make release in the Dockerfile's context"
scripts/docker-context.sh "$work/context"
binary="$work/context/.build/release/larder"
if [[ -n ${RELEASE_TEST_BINARY:-} ]]; then
    # Iterating on this script: a binary built before stands in for the build (not in make test).
    install -D "$RELEASE_TEST_BINARY" "$binary"
else
    (cd "$work/context" && make release SWIFT="${SWIFT:-swift}" >"$work/build.log" 2>&1) || { tail -30 "$work/build.log"; fail "make release failed in the Dockerfile's context"; }
fi
[[ -x $binary ]] || fail "no binary at $binary"

step "2. linked libraries"
ldd "$binary" > "$work/ldd"
grep -q "not found" "$work/ldd" && fail "unresolved libraries: $(grep 'not found' "$work/ldd")"
readelf -d "$binary" | grep -Eq 'R(UN)?PATH' && fail "the binary carries a search path: $(readelf -d "$binary" | grep -E 'R(UN)?PATH')"
readelf -d "$binary" | grep -q 'BIND_NOW' || fail "not linked with -z now"
while read -r path; do
    case $path in /opt/*|*swift*) fail "links $path from the toolchain" ;; esac
    dpkg -S "$(readlink -f "$path")" >/dev/null 2>&1 || dpkg -S "$path" >/dev/null 2>&1 || fail "$path belongs to no Debian package"
done < <(awk '/=>/ { print $3 } !/=>/ && $1 ~ /^\// { print $1 }' "$work/ldd")
step "   $(grep -c . "$work/ldd") libraries, all Debian's"

step "3. serving with the toolchain hidden"
mkdir -p "$work/origin"
head -c 100000 /dev/urandom > "$work/origin/blob"
# http.server sends Last-Modified and no Cache-Control: a week-old file is heuristically fresh
# for most of a day (RFC 9111 §4.2.2), so the second fetch is a hit.
touch -d '7 days ago' "$work/origin/blob"
origin_port=$(free_port)
python3 -m http.server "$origin_port" --bind 127.0.0.1 --directory "$work/origin" >/dev/null 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$origin_port/blob" 10 || fail "the origin did not start"
hidden() { # runs "$@" in a mount namespace where /opt/swift is an empty tmpfs
    # exec all the way down: started in the background, the PID in $! is the program's own,
    # which cleanup stops.
    exec unshare --mount --propagation private sh -c 'mount -t tmpfs none /opt/swift && exec env LD_LIBRARY_PATH= "$@"' hide "$@"
}
[[ -d /opt/swift ]] || mkdir -p /opt/swift
(hidden sh -c '! ls /opt/swift/usr/lib/swift >/dev/null 2>&1') || fail "the namespace does not hide the toolchain"
if [[ -x .build/debug/larder ]] && (hidden .build/debug/larder --version >/dev/null 2>&1); then
    fail "the debug build ran with the toolchain hidden: the check cannot tell"
fi
proxy_port=$(free_port); admin_port=$(free_port)
hidden "$binary" serve --listen "127.0.0.1:$proxy_port" --admin-listen "127.0.0.1:$admin_port" \
    --cache-dir "$work/cache" >"$work/serve.out" 2>"$work/serve.err" &
pids+=($!)
wait_http "http://127.0.0.1:$admin_port/healthz" 20 || { cat "$work/serve.err"; fail "the release binary did not serve with the toolchain hidden"; }
for round in miss hit; do
    status=$(curl -fsS -x "http://127.0.0.1:$proxy_port" -o "$work/got" -D - "http://127.0.0.1:$origin_port/blob" | tr -d '\r' | grep -i '^cache-status:' || true)
    cmp -s "$work/got" "$work/origin/blob" || fail "the body through the proxy differs ($round)"
    if [[ $round == hit ]]; then [[ $status == *hit* ]] || fail "second fetch not a hit: $status"; fi
done
step "   served and cached (${status#*: })"

step "4. make install PREFIX=/opt/larder DESTDIR=..., twice"
stage="$work/stage"
make --no-print-directory install PREFIX=/opt/larder DESTDIR="$stage" BINARY="$binary" >/dev/null
grep -q '^ExecStart=/opt/larder/bin/larder serve' "$stage/opt/larder/lib/systemd/system/larder.service" || fail "make install's unit does not name \$PREFIX/bin/larder"
[[ -x $stage/opt/larder/bin/larder && -f $stage/etc/larder/larder.toml && -f $stage/etc/logrotate.d/larder ]] || fail "make install left out files: $(cd "$stage" && find . -type f)"
check_token() { # path: a random 256-bit hex token only root can read
    [[ $(stat -c '%a %U' "$1") == "600 root" ]] || fail "$1 is $(stat -c '%a %U' "$1"), not 600 root"
    grep -Eqx '[0-9a-f]{64}' "$1" || fail "$1 does not hold a 64-digit hex token"
}
check_token "$stage/etc/larder/admin.token"
first_token=$(cat "$stage/etc/larder/admin.token")
echo '# edited by the operator' >> "$stage/etc/larder/larder.toml"
make --no-print-directory install PREFIX=/opt/larder DESTDIR="$stage" BINARY="$binary" >/dev/null
grep -q 'edited by the operator' "$stage/etc/larder/larder.toml" || fail "a second make install overwrote the configuration"
[[ $(cat "$stage/etc/larder/admin.token") == "$first_token" ]] || fail "a second make install replaced the admin token"

step "5. make deb, install into a scratch root"
deb=$(DEB_OUT="$work/deb" scripts/make-deb.sh "$binary" | tail -1)
[[ -f $deb ]] || fail "make deb made no package"
root="$work/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
touch "$root/var/lib/dpkg/status"
# The libraries are the host's; the scratch root has no Debian in it, hence --force-depends.
# --force-script-chrootless: the maintainer scripts run here with DPKG_ROOT set, and must
# touch nothing outside it.
dpkg_root() { dpkg --root="$root" --force-depends --force-script-chrootless --log=/dev/null "$@"; }
dpkg_root -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i into the scratch root failed"; }
dpkg --root="$root" -L larder | sort > "$work/files"
for path in /usr/bin/larder /lib/systemd/system/larder.service /lib/systemd/system/larder.socket \
    /lib/systemd/system/larder-admin.socket /etc/larder/larder.toml /etc/logrotate.d/larder \
    /usr/share/man/man1/larder.1.gz /usr/share/doc/larder/copyright /usr/share/doc/larder/changelog.gz \
    /usr/share/doc/larder/README.md.gz /usr/share/doc/larder/OPERATIONS.md.gz; do
    grep -qx "$path" "$work/files" || fail "the package does not install $path"
    [[ -e $root$path ]] || fail "$path is listed but not in the scratch root"
done
conffiles=$(dpkg-query --root="$root" -W -f='${Conffiles}' larder | awk 'NF { print $1 }' | sort | tr '\n' ' ')
[[ $conffiles == "/etc/larder/larder.toml /etc/logrotate.d/larder " ]] || fail "conffiles are: $conffiles"
grep -q '^ExecStart=/usr/bin/larder serve' "$root/lib/systemd/system/larder.service" || fail "the unit does not start /usr/bin/larder"
grep -qx 'LoadCredential=admin-token:/etc/larder/admin.token' "$root/lib/systemd/system/larder.service" || fail "the unit does not load the admin token"
check_token "$root/etc/larder/admin.token"
grep -q 'admin.token' "$work/files" && fail "the package ships an admin token: every installation would share it"
(hidden "$root/usr/bin/larder" check-config "$root/etc/larder/larder.toml" >/dev/null) || fail "the installed binary rejects the installed configuration"
echo '# edited by the operator' >> "$root/etc/larder/larder.toml"
(hidden "$root/usr/bin/larder" client --apply --root "$root" --tool env --proxy http://127.0.0.1:3128 >/dev/null) ||
    fail "larder client --apply into the scratch root failed"
[[ -f $root/etc/profile.d/larder-proxy.sh ]] || fail "larder client --apply wrote no proxy variables"
dpkg_root -r larder >>"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -r failed"; }
[[ ! -e $root/usr/bin/larder ]] || fail "remove left the binary"
[[ ! -e $root/etc/profile.d/larder-proxy.sh && ! -e $root/etc/larder/client.manifest ]] ||
    fail "remove left what larder client --apply wrote: every shell would still point at the proxy"
grep -q 'edited by the operator' "$root/etc/larder/larder.toml" || fail "remove did not keep the edited configuration"
dpkg_root -P larder >>"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -P failed"; }
[[ ! -e $root/etc/larder/larder.toml ]] || fail "purge left the configuration"
[[ ! -e $root/etc/larder/admin.token ]] || fail "purge left the admin token"
step "   $(grep -c . "$work/files") paths installed, conffiles kept on remove, dropped on purge; remove takes back larder client --apply"

step "6. lintian"
allowed=$(grep -v '^#' packaging/lintian-allow | awk 'NF { print $1 }')
lintian --no-cfg --info --display-level '>=pedantic' "$deb" 2>/dev/null | grep -E '^[EWIPX]: ' > "$work/lintian" || true
unexpected=$(awk '{ print $3 }' "$work/lintian" | sort -u | grep -vxF "$allowed" || true)
if [[ -n $unexpected ]]; then
    grep -F "$unexpected" "$work/lintian" >&2
    fail "lintian tags not in packaging/lintian-allow: $(echo $unexpected)"
fi
step "   $(grep -c . "$work/lintian") tags, all in packaging/lintian-allow"
step "passed"
