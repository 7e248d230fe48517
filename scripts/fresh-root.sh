#!/bin/sh
# The README's commands on a machine nobody has touched.
#
#   sh scripts/fresh-root.sh            (as root, on Debian)
#
# Builds a minimal Debian 12 root (debootstrap --variant=minbase) with only
# `make` and `git` added, clones this repository's current commit into it
# (with ../shared visible beside the clone, read-only) and runs `make demo`
# there as the very first command, then once more (the second run); then
# the same in a second fresh root for `make test`, and in a third for
# `make install` (twice, then the installed binary runs).  Each command must
# succeed; the script exits non-zero otherwise.
#
# Cache (build-root/, not tracked): the debootstrapped base as a tarball and
# apt's downloaded packages.  Every run still starts from a freshly
# extracted root in which nothing has been built or installed beyond
# minbase + make + git; the package cache only saves downloads.
#
# Mounts (/proc, /sys, /dev, /dev/pts, ../shared, the package cache) are
# made in a private mount namespace (unshare), so they are invisible to the
# rest of the machine and vanish with the script even if it is killed; a
# trap also undoes them on every exit path, and a root is only deleted
# once nothing is mounted under it any more.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
cache="$repo/build-root"
suite=bookworm
commit=$(git -C "$repo" rev-parse HEAD)
shared=$(cd "$repo/.." && pwd)/shared

if [ "$(id -u)" != 0 ]; then
    echo "fresh-root: must run as root (debootstrap, chroot, mounts)" >&2
    exit 1
fi
# a private mount namespace: nothing mounted here is seen outside, and the
# kernel drops it all when the last process of the namespace exits
if [ -z "${TT_FRESH_ROOT_NS:-}" ]; then
    TT_FRESH_ROOT_NS=1 exec unshare --mount --propagation private sh "$0" "$@"
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "fresh-root: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq \
        --no-install-recommends debootstrap >/dev/null
fi

# the machine's own Debian mirror (deb822 or one-line sources)
mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/*$/\1/p' \
             /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=$(sed -n 's/^deb[[:space:]]\{1,\}\(http[^[:space:]]*\/debian\)\/*[[:space:]].*/\1/p' \
             /etc/apt/sources.list 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
security=$(echo "$mirror" | sed 's,/debian$,/debian-security,')

mkdir -p "$cache/apt-archives/partial"
base="$cache/base-$suite-minbase-make-git.tar.gz"
root=""

unmount_all() {
    # deepest first; lazy as a last resort so that a busy mount cannot
    # leave the root half mounted
    [ -n "$root" ] || return 0
    for m in $(awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r); do
        umount "$m" 2>/dev/null || umount -l "$m"
    done
}

remove_root() {
    [ -n "$root" ] && [ -d "$root" ] || return 0
    unmount_all
    if awk -v r="$root" '$2 == r || index($2, r "/") == 1 { found = 1 } END { exit !found }' /proc/mounts; then
        echo "fresh-root: $root still has mounts; not deleting it" >&2
        return 1
    fi
    rm -rf "$root"
    root=""
}

trap 'remove_root' EXIT
trap 'exit 130' INT TERM HUP

# the base: debootstrap once, then reused as a tarball
if [ ! -f "$base" ]; then
    echo "fresh-root: debootstrap $suite (minbase + make, git) from $mirror"
    tmp="$cache/base.tmp"
    root="$tmp"
    rm -rf "$tmp"
    debootstrap --variant=minbase --include=make,git \
        --cache-dir="$cache/apt-archives" "$suite" "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
        echo "fresh-root: debootstrap failed; see $cache/debootstrap.log" >&2; exit 1; }
    rm -rf "$tmp/var/cache/apt/archives"/*.deb
    tar -C "$tmp" -czf "$base.tmp" . && mv "$base.tmp" "$base"
    remove_root
fi

# run "$@" as the first command in a fresh root
in_fresh_root() {
    what=$1
    root=$(mktemp -d "$cache/root.XXXXXX")
    tar -C "$root" -xzf "$base"
    cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
EOF
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    cp /etc/hosts "$root/etc/hosts"
    # and the host's own trust anchors, as a new machine on this network has
    # them (/usr/local/share/ca-certificates: e.g. a TLS-inspecting egress
    # proxy's CA): `npm ci` (scripts/deps.sh) fetches tests/node's packages
    # over https, and Debian's node trusts the system store, which
    # ca-certificates builds from these when apt installs it in the root
    if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
        mkdir -p "$root/usr/local/share/ca-certificates"
        cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    fi
    # packages installed in a chroot must not start services
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod 0755 "$root/usr/sbin/policy-rc.d"

    mount -t proc proc "$root/proc"
    mount -t sysfs sysfs "$root/sys"
    mount --bind /dev "$root/dev"
    mount --bind /dev/pts "$root/dev/pts"
    mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
    mkdir -p "$root/src/tokentap" "$root/src/shared"
    if [ -d "$shared" ]; then
        mount --bind "$shared" "$root/src/shared"
        mount -o remount,bind,ro "$root/src/shared"
    else
        echo "fresh-root: no $shared; fixture tests will be reported as skipped"
    fi
    git clone -q "$repo" "$root/src/tokentap"
    git -C "$root/src/tokentap" checkout -q --detach "$commit"

    echo "fresh-root: $what in a fresh $suite root (commit $(echo "$commit" | cut -c1-12))"
    start=$(date +%s)
    rc=0
    chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        LANG=C.UTF-8 TERM=dumb /bin/sh -c "cd /src/tokentap && $what" || rc=$?
    echo "fresh-root: '$what' exited $rc after $(( $(date +%s) - start )) s"
    remove_root
    return "$rc"
}

t0=$(date +%s)
in_fresh_root "make demo && echo 'fresh-root: second run' && make demo"
in_fresh_root "make test"
in_fresh_root "make install && make install && /usr/local/bin/tokentap --version"
echo "fresh-root: all passed in $(( $(date +%s) - t0 )) s"
