#!/usr/bin/env bash
# Installs the system packages Larder builds and tests with, when they are missing.
# Debian/Ubuntu only (apt-get); does nothing when everything is present.
set -euo pipefail

packages=(libcurl4-openssl-dev libssl-dev libsystemd-dev libcrypt-dev libmimalloc-dev pkg-config curl python3)
if [[ "${1:-}" == "--test" ]]; then
    # Tools the integration tests drive: systemd-socket-activate and systemd-analyze (systemd),
    # promtool (prometheus), headless Chromium for the dashboard, HAProxy for the cluster
    # test, openssl for the CONNECT test's throwaway certificate, calamaris and goaccess to
    # read the squid and combined access logs, logrotate for the shipped snippet; for the
    # release test (scripts/release-test.sh): dpkg-dev (dpkg-shlibdeps), binutils (strip,
    # readelf) and lintian; git and pip read the files larder client writes (apt-config comes with apt).
    packages+=(systemd prometheus chromium fonts-dejavu-core haproxy openssl calamaris goaccess logrotate git python3-pip
        dpkg-dev binutils lintian)
    # node runs the onboarding page's PAC file in a real JavaScript engine.
    packages+=(nodejs)
fi

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if ! command -v apt-get >/dev/null; then
    echo "install-deps: missing ${missing[*]} and no apt-get here; install them by hand" >&2
    exit 1
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
        echo "install-deps: missing ${missing[*]}; run as root or install them" >&2
        exit 1
    fi
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
