#!/usr/bin/env bash
# make deb: a Debian package of a built larder (default .build/release/larder) in .build/deb/,
# with dpkg-deb alone (no debian/ source tree): scripts/install.sh stages the files under
# /usr, packaging/deb/ holds the control files. Prints the package's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-.build/release/larder}
out=${DEB_OUT:-.build/deb}
for tool in dpkg-deb dpkg-shlibdeps strip; do
    command -v $tool >/dev/null || { echo "make-deb: $tool is missing (apt-get install dpkg-dev binutils)" >&2; exit 1; }
done
[[ -x $binary ]] || { echo "make-deb: $binary is missing; run make release" >&2; exit 1; }

version=$(sed -n 's/.*static let larder = "\(.*\)".*/\1/p' Sources/LarderServer/Telemetry/StatsDocument.swift)
arch=$(dpkg --print-architecture)
mkdir -p "$out"
root="$(realpath "$out")/root"
rm -rf "$root" && mkdir -p "$root"

# Debian bookworm keeps units in /lib/systemd/system (usrmerge is not finished there).
DESTDIR="$root" MAKE_TOKEN=no PREFIX=/usr SYSCONFDIR=/etc UNITDIR=/lib/systemd/system BINARY="$binary" \
    scripts/install.sh >/dev/null
# Debug information stays in the build folder; Debian ships stripped binaries.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/larder"
doc="$root/usr/share/doc/larder"
install -m 0644 packaging/deb/copyright "$doc/copyright"
{
    echo "larder ($version) unstable; urgency=medium"
    echo
    echo "  * Built from $(git rev-parse --short HEAD 2>/dev/null || echo 'a source tree') ;"
    echo "    the project's history is its git log."
    echo
    echo " -- Larder maintainers <maintainers@users.noreply.a-seed-c68fe930.example>  $(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")"
} | gzip -9n > "$doc/changelog.gz"
gzip -9n "$root/usr/share/man/man1/larder.1"
# Documents over 4 KiB are compressed, as dh_compress does (the example config stays readable).
find "$doc" -name '*.md' -size +4k -exec gzip -9n {} +

# Depends: the packages that provide the libraries the binary links, at the versions it needs.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debian"
printf 'Source: larder\n\nPackage: larder\nArchitecture: any\n' > "$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O "$root/usr/bin/larder" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[[ -n $depends ]] || { echo "make-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

mkdir -p "$root/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@DEPENDS@/$depends/" \
    packaging/deb/control > "$root/DEBIAN/control"
install -m 0644 packaging/deb/conffiles "$root/DEBIAN/conffiles"
install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"

package="$out/larder_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$package" >/dev/null
echo "$package"
