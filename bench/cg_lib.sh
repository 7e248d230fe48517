# shellcheck shell=sh
# Shared by the bench scripts (sourced, not run): how a
# proxy is counted under callgrind.
#
# cg_binaries BUILD_DIR [TOKENTAP_BINARY]: B and TT, absolute (the
# scripts' two arguments, build by default)
cg_binaries() {
    B=${1:-build}
    case $B in /*) ;; *) B=$(pwd)/$B ;; esac
    TT=${2:-$B/tokentap}
    case $TT in /*) ;; *) TT=$(pwd)/$TT ;; esac
}

# cg_setup: valgrind present, copies counted as vector loops, the windowed
# metrics' slot clears left out of the count; sets TOGGLE (callgrind options
# for tokentap) and exports GLIBC_TUNABLES.
#
# Callgrind counts a `rep movsb` / `rep stosb` one instruction per byte, which
# glibc uses for memcpy / memset from 2 KiB up: a 32 KiB copy would count
# 32,768 instructions where the vector loop the CPU runs as fast counts about
# a thousand.  Every proxy runs with the vector loops (CG_REP=1 keeps glibc's
# choice), so that a copy counts as what it costs.
# The windowed metrics clear a ring slot when the clock enters it (every
# 10 s for the 1-minute window, whatever the traffic); under callgrind's
# slowdown a run crosses several, so K2's run would count clears K1's did
# not.  Their cost is per second, not per event: not counted (CG_CLEARS=1
# counts them).
# shellcheck disable=SC2034  # TOGGLE: used by the scripts that source this
cg_setup() {
    command -v valgrind >/dev/null 2>&1 || { echo "callgrind: valgrind missing (apt-get install valgrind)" >&2; exit 1; }
    if [ "${CG_REP:-0}" = 0 ]; then
        GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.cpu.x86_rep_movsb_threshold=0xffffffffffffffff:glibc.cpu.x86_rep_stosb_threshold=0xffffffffffffffff
        export GLIBC_TUNABLES
    fi
    TOGGLE=""
    [ -n "${CG_CLEARS:-}" ] || TOGGLE="--toggle-collect=ring_clear_slot --collect-atstart=yes"
}

# cg_nginx_conf FILE DIR LISTEN SIMPORT [SERVER-DIRECTIVES]: an nginx config
# forwarding to the sim as bench/run.sh does (proxy_buffering off, HTTP/1.1
# keep-alive upstream), one worker, its files under DIR; LISTEN is the whole
# listen directive's argument ("unix:PATH", "127.0.0.1:PORT ssl");
# CG_NGINX_MASTER=on: a master and one worker (callgrind follows the fork)
cg_nginx_conf() {
    # as root, the worker would switch to nobody, and callgrind could not
    # write its counts into the private temp dir
    u=""; [ "$(id -u)" = 0 ] && u="user root;"
    cat >"$1" <<EOF
daemon off; $u master_process ${CG_NGINX_MASTER:-off}; worker_processes 1; pid $2/nginx.pid;
error_log $2/error.log warn;
events { worker_connections 1024; use epoll; }
http {
    access_log off; client_body_temp_path $2/body; proxy_temp_path $2/proxy;
    fastcgi_temp_path $2/fcgi; uwsgi_temp_path $2/uwsgi; scgi_temp_path $2/scgi;
    keepalive_timeout 600s; keepalive_requests 1000000;
    tcp_nodelay on;
    upstream sim { server 127.0.0.1:$4; keepalive 16; }
    server {
        listen $3;
        ${5:-}
        location / { proxy_pass http://sim; proxy_http_version 1.1;
                     proxy_set_header Connection ""; proxy_buffering off;
                     proxy_request_buffering off; }
    }
}
EOF
}

# haproxy_conf FILE BIND SIMPORT MAXCONN: HAProxy forwarding to the sim as
# bench/run.sh measures it (mode http, one thread, http-reuse always,
# option http-no-delay); BIND is the bind line's arguments ("fd@3", with
# "ssl crt ..." for TLS).  Shared by bench/run.sh and bench/cost.sh.
haproxy_conf() {
    cat >"$1" <<EOF
global
    maxconn $4
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 600s
    timeout server 600s
    timeout http-keep-alive 600s
    option http-no-delay
frontend fe
    bind $2
    default_backend be
backend be
    http-reuse always
    server sim 127.0.0.1:$3 maxconn $4
EOF
}

# cg_nginx_start DIR: nginx with DIR/nginx.conf (listening on DIR/sock)
# under callgrind, counts in DIR/cg; returns once the socket is there,
# the valgrind process in $vp
cg_nginx_start() {
    valgrind --tool=callgrind --callgrind-out-file="$1/cg" \
        nginx -p "$1" -e "$1/error.log" -c "$1/nginx.conf" >"$1/out" 2>&1 &
    vp=$!
    i=0
    while [ ! -S "$1/sock" ] && [ $i -lt 600 ] && kill -0 "$vp" 2>/dev/null; do
        sleep 0.05; i=$((i + 1))
    done
    [ -S "$1/sock" ] || { cat "$1/out" "$1/error.log" >&2; exit 1; }
}

# cg_ir FILE...: the instructions counted in callgrind output files, summed
# (a forking server writes one file per process)
cg_ir() {
    sed -n 's/^summary: //p' "$@" | awk '{ s += $1 } END { printf "%.0f\n", s }'
}
