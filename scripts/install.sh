#!/usr/bin/env bash
# `make install`: copies a built larder and its files under $DESTDIR$PREFIX (and $SYSCONFDIR).
# PREFIX=/usr/local by default; DESTDIR stages into a folder (make deb uses it). Enables nothing:
# systemctl daemon-reload and enable are the operator's step (README, "Install as a service").
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${BINARY:-.build/release/larder}
prefix=${PREFIX:-/usr/local}
destdir=${DESTDIR:-}
sysconfdir=${SYSCONFDIR:-/etc}
unitdir=${UNITDIR:-$prefix/lib/systemd/system}
docdir=${DOCDIR:-$prefix/share/doc/larder}
mandir=${MANDIR:-$prefix/share/man}

if [[ ! -x $binary ]]; then
    echo "install: $binary is missing; run 'make release' first (or pass BINARY=path)" >&2
    exit 1
fi
case $prefix in /*) ;; *) echo "install: PREFIX must be absolute, got '$prefix'" >&2; exit 1 ;; esac

install -D -m 0755 "$binary" "$destdir$prefix/bin/larder"

# The units name the binary by its installed path.
install -d -m 0755 "$destdir$unitdir"
for unit in larder.service larder.socket larder-admin.socket; do
    sed "s|/usr/local/bin/larder|$prefix/bin/larder|g" "systemd/$unit" > "$destdir$unitdir/$unit"
    chmod 0644 "$destdir$unitdir/$unit"
done

# An existing configuration is the operator's: never overwritten.
config="$destdir$sysconfdir/larder/larder.toml"
if [[ -e $config ]]; then
    echo "install: kept $config (the shipped one is $docdir/larder.toml.example)"
else
    install -D -m 0644 config/larder.toml "$config"
fi
# The admin token the unit hands the service as a credential (LoadCredential=admin-token:...):
# random, root's alone, never replaced. Packages make it in postinst instead, so that no two
# installations share one (MAKE_TOKEN=no).
token="$destdir$sysconfdir/larder/admin.token"
if [[ ${MAKE_TOKEN:-yes} == yes && ! -e $token ]]; then
    (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' > "$token")
fi
install -D -m 0644 packaging/logrotate "$destdir$sysconfdir/logrotate.d/larder"
install -D -m 0644 packaging/larder.1 "$destdir$mandir/man1/larder.1"

install -d -m 0755 "$destdir$docdir"
install -m 0644 README.md docs/*.md "$destdir$docdir/"
install -m 0644 config/larder.toml "$destdir$docdir/larder.toml.example"
echo "install: larder in $destdir$prefix/bin, units in $destdir$unitdir, configuration in $destdir$sysconfdir/larder"
