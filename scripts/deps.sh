#!/bin/sh
# Installs what tokentap needs to build and test, when something is missing.
# Debian/Ubuntu as root: apt-get. Elsewhere: prints the command to run.
# Then the npm packages of the WebSocket test peers (tests/node: the OpenAI
# SDK's clients and ws), `npm ci` from the committed package-lock.json when
# tests/node/node_modules is missing or older than that file.
#
#   sh scripts/deps.sh          packages, then tests/node's npm packages
#   sh scripts/deps.sh node     tests/node's npm packages only (make test and
#                               make check run this each time: it does
#                               nothing while node_modules is up to date)
#   sh scripts/deps.sh deb|bench  see below
set -u
cd "$(dirname "$0")/.."

# tests/node/node_modules from package-lock.json (npm ci: exactly the
# pinned versions).  A failure is not fatal to the build: the tests that
# need these peers then report SKIP and name what is missing.
node_deps() {
    dir=tests/node
    stamp=$dir/node_modules/.package-lock.json     # npm ci writes it last
    if [ -f "$stamp" ] && [ ! "$dir/package-lock.json" -nt "$stamp" ]; then
        return 0
    fi
    if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
        echo "tokentap: node/npm not installed: the WebSocket client tests will be skipped" >&2
        return 0
    fi
    echo "tokentap: npm ci in $dir (its node_modules is missing or older than package-lock.json)"
    # --ignore-scripts: the pinned packages have no install scripts to run
    if ! (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null); then
        echo "tokentap: npm ci in $dir failed: the WebSocket client tests will be skipped" >&2
    fi
    return 0
}

if [ "${1:-}" = node ]; then
    node_deps
    exit 0
fi

PKGS="build-essential clang pkg-config libevent-dev libssl-dev libcjson-dev libinih-dev \
libcmocka-dev libsystemd-dev node-llhttp curl openssl python3 prometheus systemd procps chromium groff-base postgresql \
libclang-rt-dev iproute2 libcurl4-openssl-dev zlib1g-dev protobuf-compiler"

missing=""
# `sh scripts/deps.sh deb`: what `make deb` needs on top (dpkg-buildpackage, dh)
if [ "${1:-}" = deb ]; then
    PKGS="dpkg-dev debhelper"
    command -v dpkg-buildpackage >/dev/null 2>&1 || missing="$missing dpkg-dev"
    command -v dh >/dev/null 2>&1 || missing="$missing debhelper"
# `sh scripts/deps.sh bench`: what `make bench` compares against and counts with
elif [ "${1:-}" = bench ]; then
    PKGS="nginx-light haproxy valgrind util-linux strace curl"
    command -v nginx >/dev/null 2>&1 || missing="$missing nginx-light"
    command -v strace >/dev/null 2>&1 || missing="$missing strace"
    command -v curl >/dev/null 2>&1 || missing="$missing curl"
    command -v haproxy >/dev/null 2>&1 || missing="$missing haproxy"
    command -v valgrind >/dev/null 2>&1 || missing="$missing valgrind"
    command -v taskset >/dev/null 2>&1 || missing="$missing util-linux"
else
have_hdr() { [ -f "/usr/include/$1" ] || [ -f "/usr/include/x86_64-linux-gnu/$1" ] || \
             [ -f "/usr/include/aarch64-linux-gnu/$1" ]; }
have_hdr event2/bufferevent_ssl.h || missing="$missing libevent-dev"
have_hdr openssl/ssl.h            || missing="$missing libssl-dev"
have_hdr cjson/cJSON.h            || missing="$missing libcjson-dev"
have_hdr ini.h                    || missing="$missing libinih-dev"
have_hdr cmocka.h                 || missing="$missing libcmocka-dev"
have_hdr systemd/sd-daemon.h      || missing="$missing libsystemd-dev"
# the OTLP span exporter: libcurl sends, zlib gzips
have_hdr curl/curl.h              || missing="$missing libcurl4-openssl-dev"
have_hdr zlib.h                   || missing="$missing zlib1g-dev"
if ! pkg-config --exists libllhttp 2>/dev/null && [ ! -f /usr/share/llhttp/llhttp.c ]; then
    missing="$missing node-llhttp"
fi
# clang's sanitizer and libFuzzer runtimes (make fuzz, run by make test):
# only a Recommends of clang, which --no-install-recommends leaves out
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1 || \
    missing="$missing libclang-rt-dev"
# chromium: the dashboard test loads /dashboard in headless Chromium
# PostgreSQL's server binaries (initdb, pg_ctl) are not on PATH in Debian
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$missing postgresql"
# /bin/kill (procps): the service unit's ExecReload, which systemd-analyze
# verify requires to exist
[ -x /bin/kill ] || [ -x /usr/bin/kill ] || missing="$missing procps"
# iproute2 (ip, tc): the delivery tests put a client behind a slow link
# in a network namespace of their own; protoc: the OTLP tests decode
# exported spans with protoc --decode_raw
for tool in cc clang make pkg-config curl openssl python3 promtool prometheus groff psql chromium systemd-analyze ip tc protoc; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
# node and npm: the WebSocket test peers (tests/node).  Asked for only when
# missing: a Node.js already installed from elsewhere (e.g. NodeSource's
# nodejs, which bundles npm and conflicts with Debian's npm package) stays
command -v node >/dev/null 2>&1 || { missing="$missing node"; PKGS="$PKGS nodejs"; }
command -v npm >/dev/null 2>&1 || { missing="$missing npm"; PKGS="$PKGS npm"; }
fi

if [ -z "$missing" ]; then
    [ -z "${1:-}" ] && node_deps
    exit 0
fi

echo "tokentap: missing build/test dependencies:$missing"
if [ -r /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        echo "tokentap: installing with apt-get: $PKGS"
        export DEBIAN_FRONTEND=noninteractive
        # wait for another apt-get holding the lock instead of failing
        lock="-o DPkg::Lock::Timeout=900"
        apt-get $lock update -qq && apt-get $lock install -y -qq --no-install-recommends $PKGS >/dev/null || {
            echo "tokentap: apt-get install failed" >&2; exit 1; }
        [ -z "${1:-}" ] && node_deps
        exit 0
    fi
    echo "tokentap: run as root:  apt-get update && apt-get install -y $PKGS" >&2
    exit 1
fi
echo "tokentap: install the equivalents of these Debian packages: $PKGS" >&2
exit 1
