#!/usr/bin/env bash
# Builds the Debian package of cxv's installed tree (make_tree.sh's tar) with prefix /usr:
#
#   make_deb.sh OUT.deb VERSION TREE.tar
#
# Its Depends are the packages that hold the shared libraries its programs and libraries
# need (their NEEDED entries, found with ldconfig and dpkg -S on the building machine),
# except those the tree brings itself (lib/cxv/ for cxv exec).
set -euo pipefail

out=$1
version=$2
tar=$3

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/usr" "$stage/DEBIAN"
tar -C "$stage/usr" -xf "$tar"
sed -i 's|^ExecStart=[^ ]*/cxvd|ExecStart=/usr/bin/cxvd|' "$stage/usr/lib/systemd/system/cxvd.service"

own=$(find "$stage/usr" -name '*.so*' -printf '%f\n' | sort -u)
needed=$(find "$stage/usr" -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
    xargs -0 -r objdump -p 2>/dev/null | awk '$1 == "NEEDED" {print $2}' | sort -u)
cache=$(/sbin/ldconfig -p)
packages=()
for lib in $needed; do
    grep -qxF "$lib" <<<"$own" && continue
    path=$(awk -v l="$lib" '$1 == l && /x86-64/ && !found {print $NF; found = 1}' <<<"$cache")
    [ -n "$path" ] || { echo "make_deb.sh: no package holds $lib" >&2; exit 1; }
    pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null || true)
    pkg=${pkg%%:*}
    [ -n "$pkg" ] || { echo "make_deb.sh: no package holds $path ($lib)" >&2; exit 1; }
    packages+=("$pkg")
done
depends=$(printf '%s\n' "${packages[@]}" | sort -u | paste -sd, | sed 's/,/, /g')

cat >"$stage/DEBIAN/control" <<CONTROL
Package: cxv
Version: $version
Architecture: amd64
Maintainer: cxv developers <cxv@users.noreply.github.com>
Section: net
Priority: optional
Depends: $depends
Suggests: libibverbs-dev
Homepage: https://github.com/cxv/cxv
Description: user-space ConnectX (mlx5) driver over VFIO
 cxv drives NVIDIA ConnectX HCAs from user space through Linux VFIO: the firmware
 command queue, PDs, MRs, CQs, QPs and SRQs, and lock-free fast paths with
 write-combined doorbells. This package has the tools (cxv, cxvd, cxv-perf and
 cxv-sim, a software model of the card), libcxv (C++ and verbs-compatible C APIs,
 with pkg-config and CMake files) and the libraries cxv exec runs unmodified
 libibverbs and librdmacm programs on. The headers need libibverbs-dev's.
CONTROL
echo "activate-noawait ldconfig" >"$stage/DEBIAN/triggers"
dpkg-deb --root-owner-group -Zgzip --build "$stage" "$out" >/dev/null
