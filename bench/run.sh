#!/bin/sh
# tokentap benchmark (SPEC section 8): `make bench`, or  sh bench/run.sh BUILD_DIR
#
# Side by side in one run, on loopback against tokentap-sim:
#   direct (to the sim), nginx (proxy_buffering off, HTTP/1.1 keep-alive
#   upstream), HAProxy (mode http), tokentap (records off / records to a file)
# measures
#   lat100  lateness of each token event vs the sim's schedule, 100 streams x 50 ev/s
#   lat1    the same on a single stream
#   mix1    every configuration at once, one stream each, their events
#           interleaved over the gap (sse_load with one --connect each):
#           the same moments of the machine for all, so that one-way delays
#           compare within the run; mix100: 100 streams in all, shared
#           by the sim direct, nginx and tokentap (with and without records)
#   tput    events/s through one worker with gap 0, and the proxy's CPU -> events/s per core
#   wrk2    tokentap --workers 1 vs 2 under the same saturating load
#   ttft    client-observed TTFT vs tokentap's record TTFT (matched by X-Request-Id)
#   hold    ~10,000 slow streams held open; RSS per active stream
#   cg      instructions per event of the whole proxy under callgrind
#           (bench/callgrind.sh; load-independent, the primary CPU figure)
#   cost    instructions per kept-alive request (one-token stream, JSON),
#           per connection (accept + close), per TLS handshake (full and
#           resumed) and of a shadow leg per event, tokentap (records and
#           SLOs on) beside nginx and HAProxy, with the goals
#           (bench/cost.sh; its whole output in BUILD_DIR/bench-cost.txt)
#   reqcpu  CPU time per one-token request (the proxy's schedstat over the
#           requests it served), kept alive and a new connection each,
#           paired against nginx within each round
# Also, in the same rounds: tokentap with one shadow (--shadow cand=URL to a
# second tokentap-sim) and, with BENCH_TT_BASE=BINARY, a second tokentap
# binary (the build before a change) next to the current one.
# See bench/README.md for the method and the last figures.
#
# Knobs (environment): BENCH_ROUNDS (3), BENCH_ONEWAY=1 (also an NDJSON run with
# the sim's CLOCK_REALTIME stamps: true one-way delay), BENCH_HOLD (streams for
# the hold test, default min(10000, (ulimit -n - 64)/2)), BENCH_SKIP="hold mix100 ..."
# (the step names above),
# BENCH_SUMMARY=FILE prints the summary of an earlier bench-results.txt,
# BENCH_KEEP=1 keeps the temp dir, BENCH_TT_BASE=BINARY adds that tokentap as
# "tokentap (base)", BENCH_PIN=0 turns off pinning (proxies on CPU 0, the sims
# and the load generator on CPU 1, when there are 2+ CPUs and taskset),
# BENCH_PIN=one puts all of them on CPU 0 (no hop wakes another CPU).
# BENCH_MIX1_GAP (ms, 5) and BENCH_MIX1_DUR (s, 30) set mix1's pace and length
# (its p99 rests on 1 % of the duration/gap events a configuration gets).
# BENCH_WARM=0: no uncounted warm-up round (round 0) before the latency rounds.
# Results: the tables on stdout, raw lines in BUILD_DIR/bench-results.txt,
# medians and per-round spreads in BUILD_DIR/bench-results.json.
set -u

B=${1:-build}
case $B in /*) ;; *) B=$(pwd)/$B ;; esac
D=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/cg_lib.sh
. "$D/cg_lib.sh"                # haproxy_conf
ROUNDS=${BENCH_ROUNDS:-3}
MIX1_GAP=${BENCH_MIX1_GAP:-5}
MIX1_DUR=${BENCH_MIX1_DUR:-30}
SKIP=" ${BENCH_SKIP:-} "

for f in "$B/tokentap" "$B/tokentap-sim"; do
    [ -x "$f" ] || { echo "bench: $f missing (run make first)" >&2; exit 1; }
done
command -v nginx >/dev/null 2>&1 || NO_NGINX=1
command -v haproxy >/dev/null 2>&1 || NO_HAPROXY=1

ulimit -n "$(ulimit -Hn)" 2>/dev/null
NOFILE=$(ulimit -n)
# other work on a small box adds noise; give the whole run a head start
renice -n -10 $$ >/dev/null 2>&1 || true

T=$(mktemp -d /tmp/tokentap-bench.XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    sleep 0.3
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    if [ -n "${BENCH_KEEP:-}" ]; then echo "bench: kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cc -O2 -Wall -o "$T/sse_load" "$D/sse_load.c" -lm || exit 1

# pinning: the proxy under test never shares a CPU with the sim or the
# generator, and never migrates (other work on the box still preempts it);
# BENCH_PIN=one: everything on CPU 0, so that no hop wakes another CPU
PINP="" PINL="" PINDESC="not pinned"
if [ "${BENCH_PIN:-1}" = one ] && command -v taskset >/dev/null 2>&1; then
    PINP="taskset -c 0" PINL="taskset -c 0" PINDESC="proxies, sims and generator all on CPU 0"
elif [ "${BENCH_PIN:-1}" != 0 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null 2>&1; then
    PINP="taskset -c 0" PINL="taskset -c 1" PINDESC="proxies on CPU 0, sims and generator on CPU 1"
fi
L=$T/sse_load
RES=$T/results.txt
: >"$RES"

# BENCH_SUMMARY=FILE: only the summary of an earlier run's raw lines
if [ -z "${BENCH_SUMMARY:-}" ]; then

# Ports: every server binds port 0 and says which port it got (tokentap and
# tokentap-sim in a --ready-file; nginx and HAProxy get a socket already
# listening on fd 3 from `sse_load --listen-exec`, which writes its port);
# nothing chooses a port and releases it.
# up NAME FILE PID: the port in FILE once it exists (see sse_load.c)
up() {
    p=$("$L" --wait-ready "$2" "$3") && return 0
    echo "bench: $1 did not start:" >&2
    tail -3 "$T/$1.log" "$T/$1/out" "$T/$1/error.log" 2>/dev/null >&2
    BENCH_KEEP=1; exit 1
}

# ---- servers -------------------------------------------------------------------
# shellcheck disable=SC2086
$PINL "$B/tokentap-sim" --listen 127.0.0.1:0 --ready-file "$T/sim.ready" >"$T/sim.out" 2>"$T/sim.err" &
SIM_PID=$!; PIDS="$PIDS $SIM_PID"
up tokentap-sim "$T/sim.ready" "$SIM_PID"
SIM=$p
# the shadow's candidate: a second sim
# shellcheck disable=SC2086
$PINL "$B/tokentap-sim" --listen 127.0.0.1:0 --ready-file "$T/sim2.ready" >"$T/sim2.out" 2>"$T/sim2.err" &
SIM2_PID=$!; PIDS="$PIDS $SIM2_PID"
up tokentap-sim "$T/sim2.ready" "$SIM2_PID"
SIM2=$p

start_tt() { # name workers record-file|"" [more tokentap options]; TTBIN=binary
    n=$1 w=$2
    if [ -n "$3" ]; then rec="--record $3"; else rec=""; fi
    shift 3
    # shellcheck disable=SC2086
    $PINP "${TTBIN:-$B/tokentap}" --listen 127.0.0.1:0 --ready-file "$T/$n.ready" --upstream "http://127.0.0.1:$SIM" \
        --admin off --log-level warn --workers "$w" $rec "$@" >"$T/$n.log" 2>&1 &
    eval "${n}_PID=$!"
    PIDS="$PIDS $!"
    up "$n" "$T/$n.ready" "$!"
    eval "${n}_PORT=$p"
}

start_nginx() { # name
    d=$T/$1; mkdir -p "$d"
    # @PORT@: the port of the inherited socket (NGINX="3;", nginx's own
    # hand-over mechanism), which nginx matches by address.  nginx 1.22
    # crashes taking over a socket with master_process off, so there is a
    # master, and CPU and RSS are measured on its one worker.
    cat >"$d/nginx.conf.in" <<EOF
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile $NOFILE;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections $NOFILE; use epoll; }
http {
    access_log off;
    client_body_temp_path $d/body; proxy_temp_path $d/proxy;
    fastcgi_temp_path $d/fcgi; uwsgi_temp_path $d/uwsgi; scgi_temp_path $d/scgi;
    keepalive_timeout 600s; keepalive_requests 1000000;
    tcp_nodelay on;
    upstream sim { server 127.0.0.1:$SIM; keepalive 128; keepalive_requests 1000000; }
    server {
        listen 127.0.0.1:@PORT@ backlog=4096;
        location / {
            proxy_pass http://sim;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 600s;
        }
    }
}
EOF
    # shellcheck disable=SC2086
    $PINP "$L" --listen-exec "$d/port" sh -c 'sed "s/@PORT@/$LISTEN_PORT/" "$1.in" >"$1" &&
        NGINX="3;" exec nginx -p "$2" -e "$2/error.log" -c "$1"' sh "$d/nginx.conf" "$d" \
        >"$d/out" 2>&1 &
    m=$!
    PIDS="$PIDS $m"
    up "$1" "$d/port" "$m"
    w="" i=0
    while [ -z "$w" ] && [ $i -lt 1000 ]; do
        w=$(pgrep -x -P "$m" nginx 2>/dev/null | head -n 1); [ -n "$w" ] || sleep 0.01; i=$((i + 1))
    done
    [ -n "$w" ] || { echo "bench: nginx started no worker" >&2; BENCH_KEEP=1; exit 1; }
    eval "${1}_PORT=$p; ${1}_PID=$w; ${1}_MASTER=$m"
}

start_haproxy() { # name
    d=$T/$1; mkdir -p "$d"
    haproxy_conf "$d/haproxy.cfg" "fd@3" "$SIM" 4000
    # shellcheck disable=SC2086
    $PINP "$L" --listen-exec "$d/port" haproxy -db -f "$d/haproxy.cfg" >"$d/out" 2>&1 &
    eval "${1}_PID=$!"
    PIDS="$PIDS $!"
    up "$1" "$d/port" "$!"
    eval "${1}_PORT=$p"
}

CFGS="direct"
direct_PORT=$SIM; direct_PID=$SIM_PID
[ -z "${NO_NGINX:-}" ] && { start_nginx nginx; CFGS="$CFGS nginx"; }
[ -z "${NO_HAPROXY:-}" ] && { start_haproxy haproxy; CFGS="$CFGS haproxy"; }
start_tt tt 1 ""
start_tt ttrec 1 "$T/ttrec.jsonl"
CFGS="$CFGS tt ttrec"
if [ -n "${BENCH_TT_BASE:-}" ]; then
    TTBIN=$BENCH_TT_BASE start_tt ttbase 1 ""
    CFGS="$CFGS ttbase"
fi
# one shadow on every request (sample 1): what the primary pays for it
start_tt ttshadow 1 "" --shadow "cand=http://127.0.0.1:$SIM2"
CFGS="$CFGS ttshadow"

# mix100: 100 streams in all, the load of lat100 (5,000 events/s), shared
# by the sim direct, nginx and tokentap with and without records (and the
# base build): 25 (20) streams each.  100 each would be 20,000-25,000
# events/s, which saturates this 2-vCPU machine (direct p50 0.5-2 ms).
MIX100="" n=0
for c in $CFGS; do case $c in direct|nginx|tt|ttrec|ttbase) MIX100="$MIX100 $c"; n=$((n + 1)) ;; esac; done
MIX100_STREAMS=$((100 / n))

# load TEST CFG ROUND sse_load-args...  -> one line in $RES
load() {
    t=$1 c=$2 r=$3; shift 3
    eval "p=\$${c}_PORT; pid=\$${c}_PID"
    printf '  %-6s %-8s round %s ... ' "$t" "$c" "$r" >&2
    # shellcheck disable=SC2086
    out=$($PINL "$L" --connect "127.0.0.1:$p" --prefix "$t-$c-$r" --cpu-pid "$pid" --cpu-pid "$SIM_PID" "$@" | grep '^RESULT')
    [ "$r" = 0 ] || echo "test=$t cfg=$c round=$r $out" >>"$RES"    # round 0: warm-up, not counted
    echo "$out" | tr ' ' '\n' | sed -n 's/^evps=/evps /p; s/^lat_p99_us=/p99 /p' | tr '\n' ' ' >&2
    echo >&2
}
skip() { case $SKIP in *" $1 "*) return 0 ;; esac; return 1; }

# loadmix TEST ROUND "CFG..." sse_load-args...  -> one line per configuration
# in $RES: all of them in one sse_load run, the order turned by one each
# round (so that no configuration always follows the same one in the gap)
loadmix() {
    t=$1 r=$2 cfgs=$3; shift 3
    n=0; for c in $cfgs; do n=$((n + 1)); done
    k=$((r % n)) i=0 head="" tail=""
    for c in $cfgs; do
        eval "p=\$${c}_PORT"
        if [ $i -lt $k ]; then tail="$tail --connect $c=127.0.0.1:$p"; else head="$head --connect $c=127.0.0.1:$p"; fi
        i=$((i + 1))
    done
    printf '  %-6s %-8s round %s ... ' "$t" "all" "$r" >&2
    # shellcheck disable=SC2086
    out=$($PINL "$L" --prefix "$t-$r" $head $tail "$@" | grep '^RESULT target=')
    [ "$r" = 0 ] || echo "$out" | sed "s/^RESULT target=\([^ ]*\)/test=$t cfg=\1 round=$r RESULT/" >>"$RES"
    echo "$out" | sed -n 's/^RESULT target=\([^ ]*\) .* ow_p99_us=\([0-9.]*\).*/\1 \2/p' | tr '\n' ' ' >&2
    echo >&2
}

if ! skip cost && command -v valgrind >/dev/null 2>&1; then
    echo "bench: cost per request, connection, TLS handshake and shadow (bench/cost.sh) ..." >&2
    (cd "$D/.." && sh bench/cost.sh "$B") >"$B/bench-cost.txt" 2>"$T/cost.err" || tail -5 "$T/cost.err" >&2
    sed -n 's/^CG proxy=/test=cost proxy=/p' "$B/bench-cost.txt" >"$T/cost.txt"
fi

if ! skip cg && command -v valgrind >/dev/null 2>&1; then
    echo "bench: callgrind (bench/callgrind.sh) ..." >&2
    (cd "$D/.." && sh bench/callgrind.sh "$B") | sed 's/^CG /CG cfg=tt /' >"$T/cg.txt"
    if [ -n "${BENCH_TT_BASE:-}" ]; then
        (cd "$D/.." && CG_NO_NGINX=1 sh bench/callgrind.sh "$B" "$BENCH_TT_BASE") | sed 's/^CG /CG cfg=ttbase /' >>"$T/cg.txt"
    fi
fi

echo "bench: $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), ulimit -n $NOFILE, temp $T" >&2

if ! skip lat100 || ! skip lat1 || ! skip mix1 || ! skip mix100; then
    # round 0 warms every configuration up (upstream connections opened,
    # buffers allocated, pages touched) and is not counted: the first
    # round used to be the worst for every proxy (BENCH_WARM=0: none)
    r=1
    [ "${BENCH_WARM:-1}" = 0 ] || r=0
    while [ $r -le "$ROUNDS" ]; do
        for c in $CFGS; do
            skip lat100 || { recarg=""; [ "$c" = ttrec ] && recarg="--records $T/ttrec.jsonl"
                # shellcheck disable=SC2086
                load lat100 "$c" $r --stamp --align --streams 100 --ttft 20 --tokens 100 --gap 20 --warmup 1 --duration 3 $recarg; }
            skip lat1 || load lat1 "$c" $r --stamp --align --streams 1 --ttft 20 --tokens 100 --gap 20 --warmup 0.3 --duration 4
        done
        skip mix1 || loadmix mix1 $r "$CFGS" --stamp --align --streams 1 --ttft 20 --tokens 100 --gap "$MIX1_GAP" --warmup 0.3 --duration "$MIX1_DUR"
        skip mix100 || loadmix mix100 $r "$MIX100" --stamp --align --streams $MIX100_STREAMS --ttft 20 --tokens 100 --gap 20 --warmup 1 --duration 4
        r=$((r + 1))
    done
fi

if [ -n "${BENCH_ONEWAY:-}" ]; then
    for c in $CFGS; do
        load ow100 "$c" 1 --ollama --streams 100 --ttft 20 --tokens 100 --gap 20 --warmup 1 --duration 3
        load ow1 "$c" 1 --ollama --streams 1 --ttft 20 --tokens 100 --gap 20 --warmup 0.3 --duration 4
    done
fi

if ! skip tput; then
    r=1
    while [ $r -le "$ROUNDS" ]; do
        for c in $CFGS; do
            load tput "$c" $r --streams 32 --ttft 0 --tokens 2000 --gap 0 --warmup 1 --duration 3 --ramp 0
        done
        r=$((r + 1))
    done
fi

if ! skip wrk2; then
    start_tt tt2 2 ""
    r=1
    while [ $r -le "$ROUNDS" ]; do
        for c in tt tt2; do
            load wrk2 "$c" $r --streams 64 --ttft 0 --tokens 2000 --gap 0 --warmup 1 --duration 3 --ramp 0
        done
        r=$((r + 1))
    done
    kill "$tt2_PID" 2>/dev/null
fi

if ! skip wrkr; then
    # the same worker counts at a fixed, unsaturated rate (200 streams x 50
    # ev/s = 10,000 events/s), the proxies not pinned, so that 2 threads
    # can use 2 CPUs: CPU per event and its split over the threads
    kill "$tt2_PID" 2>/dev/null
    PINP_SAVE=$PINP; PINP=""
    start_tt tr1 1 ""
    start_tt tr2 2 ""
    PINP=$PINP_SAVE
    r=1
    while [ $r -le "$ROUNDS" ]; do
        for c in tr1 tr2; do
            load wrkr "$c" $r --streams 200 --ttft 20 --tokens 100 --gap 20 --warmup 1 --duration 3
        done
        r=$((r + 1))
    done
    kill "$tr1_PID" "$tr2_PID" 2>/dev/null
fi

# syscalls per delivered event (strace -c on the proxy for 3 s of the load;
# counts, not times: strace slows the proxy, so only the fixed-rate load
# is representative, and the gap-0 load is shown for what coalescing does)
if ! skip sys && command -v strace >/dev/null 2>&1; then
    for c in $CFGS; do
        [ "$c" = direct ] && continue
        eval "spid=\$${c}_PID"
        for w in "sys100:--streams 100 --ttft 20 --tokens 100 --gap 20" \
                 "systput:--streams 32 --ttft 0 --tokens 2000 --gap 0 --ramp 0"; do
            t=${w%%:*}
            (sleep 1.5; timeout -s INT 3 strace -c -f -p "$spid" -o "$T/strace.$t.$c" >/dev/null 2>&1) &
            stp=$!
            # shellcheck disable=SC2086
            load "$t" "$c" 1 ${w#*:} --warmup 1 --duration 4
            wait "$stp"
            # the strace window is 3 s of the load's steady rate
            ev=$(sed -n "s/^test=$t cfg=$c round=1 .* evps=\([0-9.]*\).*/\1/p" "$RES" | tail -1)
            awk -v t="$t" -v c="$c" -v ev="${ev:-0}" '
                /^-/ || /^%/ || NF < 5 { next }
                { n = $4; name = $NF }
                name == "total" { tot = n; next }
                { k = name; if (k ~ /^(recv|recvfrom|read|readv)$/) k = "read"; else if (k ~ /^(writev|write|send|sendto|sendmsg)$/) k = "write";
                  else if (k != "epoll_wait" && k != "epoll_ctl" && k != "ioctl") k = "other"; m[k] += n }
                END { if (ev <= 0 || tot == "") exit
                      printf "test=%s_calls cfg=%s round=1 per_event=%.3f", t, c, tot / 3 / ev
                      for (k in m) printf " %s=%.3f", k, m[k] / 3 / ev
                      printf "\n" }' "$T/strace.$t.$c" >>"$RES"
        done
    done
fi

if ! skip reqcpu; then
    # CPU per request: one-token streams (ttft 0, the usage chunk asked
    # for) back to back on 8 connections, 2 s; reqka keeps them alive,
    # reqconn opens a new connection for each request (the client closes
    # it after the response).  Proxy CPU from schedstat over the requests
    # that ended in the window; tokentap with records and SLOs on (ttslo)
    # and bare (tt).
    start_tt ttslo 1 "$T/ttslo.jsonl" --goodput "ttft:500 itl:50"
    RQ=""
    for c in nginx haproxy ttslo tt; do case " $CFGS ttslo " in *" $c "*) RQ="$RQ $c" ;; esac; done
    r=1
    while [ $r -le "$ROUNDS" ]; do
        for c in $RQ; do
            load reqka "$c" $r --streams 8 --ttft 0 --tokens 1 --gap 0 --usage --warmup 0.5 --duration 2 --ramp 0
            load reqconn "$c" $r --streams 8 --ttft 0 --tokens 1 --gap 0 --usage --close --warmup 0.5 --duration 2 --ramp 0
        done
        r=$((r + 1))
    done
    kill "$ttslo_PID" 2>/dev/null
fi

if ! skip ttft; then
    # 200 streams of 20 tokens, 50 ev/s each: ~10k events/s and ~450 requests/s
    r=1
    while [ $r -le "$ROUNDS" ]; do
        load ttft direct $r --streams 200 --ttft 20 --tokens 20 --gap 20 --warmup 1 --duration 3
        load ttft ttrec $r --streams 200 --ttft 20 --tokens 20 --gap 20 --warmup 1 --duration 3 --records "$T/ttrec.jsonl"
        r=$((r + 1))
    done
fi

if ! skip hold; then
    # each proxied stream costs tokentap three descriptors (the client, its
    # duplicate that reads the delivery acknowledgements, the upstream) and
    # nginx two; nginx needs some headroom beyond that (it fails at ~9,370
    # streams with 20,000).  With two a stream, tokentap ran out at ~6,600
    # of 9,000 and the streams it refused were counted as failed.
    HOLD=${BENCH_HOLD:-$(( (NOFILE - 2000) / 3 ))}
    [ "$HOLD" -gt 10000 ] && HOLD=10000
    # fresh processes so that RSS before/after is about the held streams only
    kill "$tt_PID" "$ttrec_PID" "$ttshadow_PID" ${ttbase_PID:-} 2>/dev/null
    [ -n "${nginx_MASTER:-}" ] && kill "$nginx_MASTER" 2>/dev/null
    [ -n "${haproxy_PID:-}" ] && kill "$haproxy_PID" 2>/dev/null
    sleep 0.5
    HCFGS="direct tthold"
    start_tt tthold 1 "$T/hold.jsonl"
    [ -z "${NO_NGINX:-}" ] && { start_nginx nghold; HCFGS="nghold $HCFGS"; }
    for c in $HCFGS; do
        sleep 1
        eval "hp=\$${c}_PID"
        # 10 tokens 1 s apart: every request ends after the window (--finish),
        # so "held" also means completed, and (tokentap) recorded
        recarg=""; [ "$c" = tthold ] && recarg="--records $T/hold.jsonl"
        # shellcheck disable=SC2086
        load hold "$c" 1 --streams "$HOLD" --ttft 100 --tokens 10 --gap 1000 --ramp 3 --warmup 3 --duration 4 \
            --finish 60 --rss-pid "$hp" $recarg
        [ "$c" != direct ] && kill "$hp" 2>/dev/null
    done
fi

[ -f "$T/cg.txt" ] && sed -n 's/^CG /test=cg /p' "$T/cg.txt" >>"$RES"
[ -f "$T/cost.txt" ] && cat "$T/cost.txt" >>"$RES"
cp "$RES" "$B/bench-results.txt" 2>/dev/null
else
    cp "$BENCH_SUMMARY" "$RES" || exit 1
fi

# ---- summary --------------------------------------------------------------------
NGV=$(nginx -v 2>&1 | sed 's/.*nginx\///')
HAV=$(haproxy -v 2>/dev/null | head -1 | awk '{print $3}')
echo
echo "tokentap bench $(date -u +%F), $(nproc) vCPU, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), nginx $NGV, haproxy $HAV, load avg $(cut -d' ' -f1-3 /proc/loadavg)"
if grep -q '^test=cost ' "$RES"; then
    sh "$D/cost.sh" --summary "$RES"
    if [ -z "${BENCH_SUMMARY:-}" ] && grep -q '^tokentap, ' "$B/bench-cost.txt" 2>/dev/null; then
        # where tokentap's instructions go in the rows that miss their goal
        sed -n '/^tokentap, /,$p' "$B/bench-cost.txt"
    elif grep -q '^goal not met' "$B/bench-cost.txt" 2>/dev/null; then
        echo "(the profiles of the goals not met: $B/bench-cost.txt)"
    fi
fi
awk -v rounds="$ROUNDS" -v json="$B/bench-results.json" -v pin="$PINDESC" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" '
function med(k,   n, i, j, a, t) {
    n = cnt[k]; if (!n) return "";
    for (i = 1; i <= n; i++) a[i] = val[k, i];
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
    return (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
function g(t, c, f) { return med(t SUBSEP c SUBSEP f) }
# config minus direct, paired within each round: "median min max" (us), or ""
function paired(t, c, f,   r, n, a, i, j, x) {
    n = 0
    for (r = 1; r <= rounds; r++)
        if ((t SUBSEP c SUBSEP f SUBSEP r) in rv && (t SUBSEP "direct" SUBSEP f SUBSEP r) in rv)
            a[++n] = rv[t, c, f, r] - rv[t, "direct", f, r]
    if (!n) return ""
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
    return ((n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2) " " a[1] " " a[n]
}
# config minus <ref>, paired within each round: "median min max at_or_below n" (us), or ""
function pairedvs(t, c, ref, f,   r, n, a, i, j, x, le) {
    n = 0; le = 0
    for (r = 1; r <= rounds; r++)
        if ((t SUBSEP c SUBSEP f SUBSEP r) in rv && (t SUBSEP ref SUBSEP f SUBSEP r) in rv) {
            a[++n] = rv[t, c, f, r] - rv[t, ref, f, r]
            if (a[n] <= 0) le++
        }
    if (!n) return ""
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
    return ((n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2) " " a[1] " " a[n] " " le " " n
}
function svs(x,   p) { if (x == "") return "-"; split(x, p, " "); return sprintf("%+.3f [%+.3f %+.3f] %d/%d", p[1] / 1000, p[2] / 1000, p[3] / 1000, p[4], p[5]) }
function spr(x,   p) { if (x == "") return "-"; split(x, p, " "); return sprintf("%+.3f [%+.3f %+.3f]", p[1] / 1000, p[2] / 1000, p[3] / 1000) }
# us CPU per event per round: "median min max"
function cpuev(c,   r, n, a, i, j, x) {
    n = 0
    for (r = 1; r <= rounds; r++)
        if (("tput" SUBSEP c SUBSEP "evps" SUBSEP r) in rv && rv["tput", c, "evps", r] > 0)
            a[++n] = rv["tput", c, "cpu0_pct", r] * 10000 / rv["tput", c, "evps", r]
    if (!n) return ""
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
    return ((n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2) " " a[1] " " a[n]
}
# CPU per event of <c> over that of nginx, paired within each round of test <t>: "median min max"
function ratio(t, c,   r, n, a, i, j, x) {
    n = 0
    for (r = 1; r <= rounds; r++)
        if ((t SUBSEP c SUBSEP "evps" SUBSEP r) in rv && (t SUBSEP "nginx" SUBSEP "evps" SUBSEP r) in rv &&
            rv[t, c, "evps", r] > 0 && rv[t, "nginx", "evps", r] > 0 && rv[t, "nginx", "cpu0_pct", r] > 0)
            a[++n] = (rv[t, c, "cpu0_pct", r] / rv[t, c, "evps", r]) / (rv[t, "nginx", "cpu0_pct", r] / rv[t, "nginx", "evps", r])
    if (!n) return ""
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
    return ((n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2) " " a[1] " " a[n]
}
# the one-way tables of tests <t100> (100 streams) and <t1> (one stream):
# percentiles, added over direct, and against nginx, paired within rounds
function ow_tables(t100, t1, how, pairing, l100, l1,   i, c) {
    printf "\nOne-way delay per event, %s, ms, median of %d rounds (%s)\n", how, rounds, pin
    printf "%-18s | %7s %7s %7s | %7s %7s %7s\n", "config", l100 " p50", "p90", "p99", l1 " p50", "p90", "p99"
    for (i = 1; i <= no; i++) { c = order[i]; if (g(t100, c, "ow_p50_us") == "" && g(t1, c, "ow_p50_us") == "") continue
        printf "%-18s | %7s %7s %7s | %7s %7s %7s\n", name[c], ms(g(t100, c, "ow_p50_us")), ms(g(t100, c, "ow_p90_us")),
          ms(g(t100, c, "ow_p99_us")), ms(g(t1, c, "ow_p50_us")), ms(g(t1, c, "ow_p90_us")), ms(g(t1, c, "ow_p99_us")) }
    printf "\nAdded one-way delay per event, ms: %s, median [min max]\n", pairing
    printf "%-18s | %-25s %-25s | %-25s %-25s\n", "config", l100 " +p50", "+p99", l1 " +p50", "+p99"
    for (i = 1; i <= no; i++) { c = order[i]; if (c == "direct" || (g(t100, c, "ow_p50_us") == "" && g(t1, c, "ow_p50_us") == "")) continue
        printf "%-18s | %-25s %-25s | %-25s %-25s\n", name[c], spr(paired(t100, c, "ow_p50_us")), spr(paired(t100, c, "ow_p99_us")),
          spr(paired(t1, c, "ow_p50_us")), spr(paired(t1, c, "ow_p99_us")) }
    if (g(t100, "nginx", "ow_p50_us") == "" && g(t1, "nginx", "ow_p50_us") == "") return
    printf "\nOne-way delay per event against nginx, ms: %s, config - nginx, median [min max], rounds at or below nginx\n", how
    printf "%-18s | %-30s %-30s | %-30s %-30s\n", "config", l100 " p50", "p99", l1 " p50", "p99"
    for (i = 1; i <= no; i++) { c = order[i]; if (c == "direct" || c == "nginx" || (g(t100, c, "ow_p50_us") == "" && g(t1, c, "ow_p50_us") == "")) continue
        printf "%-18s | %-30s %-30s | %-30s %-30s\n", name[c], svs(pairedvs(t100, c, "nginx", "ow_p50_us")), svs(pairedvs(t100, c, "nginx", "ow_p99_us")),
          svs(pairedvs(t1, c, "nginx", "ow_p50_us")), svs(pairedvs(t1, c, "nginx", "ow_p99_us")) }
}
function rat(x,   p) { if (x == "") return "-"; split(x, p, " "); return sprintf("%.3f [%.3f %.3f]", p[1], p[2], p[3]) }
function fmt(x, d) { return x == "" ? "-" : sprintf("%." d "f", x) }
function ms(x) { return x == "" ? "-" : sprintf("%.3f", x / 1000) }
function add(x, y) { return (x == "" || y == "") ? "-" : sprintf("%+.3f", (x - y) / 1000) }
# the per-request CPU of <c> over nginx, paired within each round of test <t>
# (<t2>: of <t> less <t2>: what the new connection adds): "median min max"
function rqratio(t, c, t2,   r, n, a, i, j, x, y) {
    n = 0
    for (r = 1; r <= rounds; r++) {
        x = usreq(t, c, r, t2); y = usreq(t, "nginx", r, t2)
        if (x != "" && y != "" && y > 0) a[++n] = x / y
    }
    if (!n) return ""
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
    return ((n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2) " " a[1] " " a[n]
}
# us of proxy CPU per request in round <r> of test <t> (less that of <t2>), or ""
function usreq(t, c, r, t2,   x, y) {
    if (!((t SUBSEP c SUBSEP "rps" SUBSEP r) in rv) || rv[t, c, "rps", r] <= 0) return ""
    x = rv[t, c, "cpu0_pct", r] * 10000 / rv[t, c, "rps", r]
    if (t2 == "") return x
    y = usreq(t2, c, r, "")
    return y == "" ? "" : x - y
}
# median over the rounds of usreq
function usmed(t, c, t2,   r, n, a, i, j, x) {
    n = 0
    for (r = 1; r <= rounds; r++) { x = usreq(t, c, r, t2); if (x != "") a[++n] = x }
    if (!n) return ""
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
    return (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
$1 == "test=cost" { ncost++; costl[ncost] = $0; next }
{
    t = ""; c = ""; rd = 0
    for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "test") t = kv[2]; if (kv[1] == "cfg") c = kv[2]; if (kv[1] == "round") rd = kv[2] }
    if (!(c in seen)) { seen[c] = 1; order[++no] = c }
    for (i = 1; i <= NF; i++) {
        eq = index($i, "="); if (!eq) continue
        f = substr($i, 1, eq - 1); v = substr($i, eq + 1)
        if (v !~ /^-?[0-9.]+$/) continue
        k = t SUBSEP c SUBSEP f; val[k, ++cnt[k]] = v + 0; rv[k, rd] = v + 0
    }
    has[t] = 1
    if (t == "cg") { ncg++; for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "cfg") cgc[ncg] = kv[2]
        if (kv[1] == "workload") cgw[ncg] = kv[2]; if (kv[1] == "ir_per_event") cgir[ncg] = kv[2]; if (kv[1] == "events") cgev[ncg] = kv[2] } }
    for (i = 1; i <= NF; i++) if ($i ~ /^threads_pct=/) thr[c] = substr($i, 13)
}
END {
    name["direct"] = "direct (sim)"; name["nginx"] = "nginx"; name["haproxy"] = "haproxy";
    name["tt"] = "tokentap"; name["ttrec"] = "tokentap+records"; name["tt2"] = "tokentap --workers 2";
    name["tthold"] = "tokentap"; name["nghold"] = "nginx"
    name["ttbase"] = "tokentap (base)"; name["ttshadow"] = "tokentap+shadow"; name["ttslo"] = "tokentap+rec+SLOs"
    if (has["cg"]) {
        printf "\nInstructions per event, whole proxy (callgrind, bench/callgrind.sh; repeatable, load-independent)\n"
        printf "%-18s | %-40s %12s %8s\n", "config", "workload", "Ir/event", "events"
        for (i = 1; i <= ncg; i++) printf "%-18s | %-40s %12s %8s\n", cgw[i] == "sim-nginx" ? "nginx" : name[cgc[i]], cgw[i], cgir[i], cgev[i]
    }
    if (g("mix100", "direct", "ow_p50_us") != "" || g("mix1", "direct", "ow_p50_us") != "")
        ow_tables("mix100", "mix1", "every configuration at once (interleaved in the gap; sim send stamp -> client read)",
                  "all at once: config - direct within each round", "100 in all", "1 each")
    if (has["lat100"] || has["lat1"]) {
        printf "\nPer-event lateness vs the sim schedule, ms (median of %d rounds); added = config - direct\n", rounds
        printf "%-18s | %-31s | %-31s\n", "", "100 streams x 50 ev/s", "1 stream x 50 ev/s"
        printf "%-18s | %7s %7s %7s %7s | %7s %7s %7s %7s\n", "config", "p50", "p99", "+p50", "+p99", "p50", "p99", "+p50", "+p99"
        for (i = 1; i <= no; i++) { c = order[i]; if (g("lat100", c, "lat_p50_us") == "" && g("lat1", c, "lat_p50_us") == "") continue
            printf "%-18s | %7s %7s %7s %7s | %7s %7s %7s %7s\n", name[c],
              ms(g("lat100", c, "lat_p50_us")), ms(g("lat100", c, "lat_p99_us")),
              add(g("lat100", c, "lat_p50_us"), g("lat100", "direct", "lat_p50_us")),
              add(g("lat100", c, "lat_p99_us"), g("lat100", "direct", "lat_p99_us")),
              ms(g("lat1", c, "lat_p50_us")), ms(g("lat1", c, "lat_p99_us")),
              add(g("lat1", c, "lat_p50_us"), g("lat1", "direct", "lat_p50_us")),
              add(g("lat1", c, "lat_p99_us"), g("lat1", "direct", "lat_p99_us")) }
    }
    if (has["lat100"] || has["lat1"]) {
        printf "\nAdded per-event latency, ms: config - direct paired within each round, median [min max] over %d rounds (%s)\n", rounds, pin
        printf "%-18s | %-25s %-25s | %-25s %-25s\n", "config", "100 streams +p50", "+p99", "1 stream +p50", "+p99"
        for (i = 1; i <= no; i++) { c = order[i]; if (c == "direct" || (g("lat100", c, "lat_p50_us") == "" && g("lat1", c, "lat_p50_us") == "")) continue
            printf "%-18s | %-25s %-25s | %-25s %-25s\n", name[c], spr(paired("lat100", c, "lat_p50_us")), spr(paired("lat100", c, "lat_p99_us")),
              spr(paired("lat1", c, "lat_p50_us")), spr(paired("lat1", c, "lat_p99_us")) }
    }
    if ((has["lat100"] || has["lat1"]) && g("lat100", "nginx", "lat_p50_us") != "") {
        printf "\nPer-event latency against nginx, ms: config - nginx paired within each round, median [min max], rounds at or below nginx\n"
        printf "%-18s | %-30s %-30s | %-30s %-30s\n", "config", "100 streams p50", "p99", "1 stream p50", "p99"
        for (i = 1; i <= no; i++) { c = order[i]; if (c == "direct" || c == "nginx" || (g("lat100", c, "lat_p50_us") == "" && g("lat1", c, "lat_p50_us") == "")) continue
            printf "%-18s | %-30s %-30s | %-30s %-30s\n", name[c], svs(pairedvs("lat100", c, "nginx", "lat_p50_us")), svs(pairedvs("lat100", c, "nginx", "lat_p99_us")),
              svs(pairedvs("lat1", c, "nginx", "lat_p50_us")), svs(pairedvs("lat1", c, "nginx", "lat_p99_us")) }
    }
    if (g("lat100", "direct", "ow_p50_us") != "" || g("lat1", "direct", "ow_p50_us") != "") {
        # the same events, timed from the send stamp of the sim: its
        # timer and wake-up jitter and the request path drop out
        ow_tables("lat100", "lat1", "each configuration in its own slot, sim send -> client read (the sim CLOCK_MONOTONIC stamp in each event)",
                  "config - direct paired within each round", "100 streams", "1 stream")
        if (g("lat100", "nginx", "ow_p50_us") != "" || g("lat1", "nginx", "ow_p50_us") != "") {
            printf "\nClient TTFT against nginx (the request path, once per stream), ms: config - nginx paired within each round, median [min max], rounds at or below nginx\n"
            printf "%-18s | %-30s %-30s | %-30s %-30s\n", "config", "100 streams p50", "p99", "1 stream p50", "p99"
            for (i = 1; i <= no; i++) { c = order[i]; if (c == "direct" || c == "nginx" || (g("lat100", c, "cttft_p50_us") == "" && g("lat1", c, "cttft_p50_us") == "")) continue
                printf "%-18s | %-30s %-30s | %-30s %-30s\n", name[c], svs(pairedvs("lat100", c, "nginx", "cttft_p50_us")), svs(pairedvs("lat100", c, "nginx", "cttft_all_p99_us")),
                  svs(pairedvs("lat1", c, "nginx", "cttft_p50_us")), svs(pairedvs("lat1", c, "nginx", "cttft_all_p99_us")) }
        }
    }
    if (has["ow100"]) {
        printf "\nOne-way delay sim write -> client read (NDJSON, sim CLOCK_REALTIME stamps), ms\n"
        printf "%-18s | %7s %7s | %7s %7s\n", "config", "100 p50", "p99", "1 p50", "p99"
        for (i = 1; i <= no; i++) { c = order[i]; if (g("ow100", c, "ow_p50_us") == "") continue
            printf "%-18s | %7s %7s | %7s %7s\n", name[c], ms(g("ow100", c, "ow_p50_us")), ms(g("ow100", c, "ow_p99_us")),
              ms(g("ow1", c, "ow_p50_us")), ms(g("ow1", c, "ow_p99_us")) }
    }
    if (has["tput"]) {
        printf "\nThroughput, 32 streams x 2000 events, gap 0 (median of %d rounds); per core = events/s / proxy CPU\n", rounds
        printf "%-18s | %9s %9s %8s %10s %12s\n", "config", "events/s", "proxy CPU", "sim CPU", "us CPU/ev", "ev/s per core"
        for (i = 1; i <= no; i++) { c = order[i]; e = g("tput", c, "evps"); if (e == "") continue
            pc = g("tput", c, "cpu0_pct"); sc = g("tput", c, "cpu1_pct")
            if (c == "direct") printf "%-18s | %9.0f %9s %7.0f%% %10s %12s\n", name[c], e, "-", sc, "-", "-"
            else { split(cpuev(c), q, " "); printf "%-18s | %9.0f %8.0f%% %7.0f%% %10.2f %12.0f   [%.2f %.2f]\n", name[c], e, pc, sc, pc * 10000 / e, e * 100 / pc, q[2], q[3] } }
    }
    if (has["tput"] || has["lat100"]) {
        printf "\nCPU per event relative to nginx, paired within each round: median [min max] over %d rounds (< 1: cheaper than nginx)\n", rounds
        printf "%-18s | %-26s | %-26s\n", "config", "32 streams, gap 0", "100 streams x 50 ev/s"
        for (i = 1; i <= no; i++) { c = order[i]; if (c == "direct" || c == "nginx") continue
            if (ratio("tput", c) == "" && ratio("lat100", c) == "") continue
            printf "%-18s | %-26s | %-26s\n", name[c], rat(ratio("tput", c)), rat(ratio("lat100", c)) }
        printf "%-18s | %-26s | %-26s\n", "nginx (us/event)", g("tput", "nginx", "evps") == "" ? "-" : sprintf("%.2f", g("tput", "nginx", "cpu0_pct") * 10000 / g("tput", "nginx", "evps")),
            g("lat100", "nginx", "evps") == "" ? "-" : sprintf("%.2f", g("lat100", "nginx", "cpu0_pct") * 10000 / g("lat100", "nginx", "evps"))
    }
    if (has["reqka"] || has["reqconn"]) {
        printf "\nCPU per one-token request (proxy schedstat CPU / requests, 8 connections back to back), us, median of %d rounds; x nginx: paired within each round, median [min max]\n", rounds
        printf "%-18s | %10s %7s %-20s | %10s %7s %-20s | %9s %-20s\n", "config", "kept req/s", "us/req", "x nginx", "conn req/s", "us/req", "x nginx", "conn - ka", "x nginx"
        for (i = 1; i <= no; i++) { c = order[i]; if (g("reqka", c, "rps") == "" && g("reqconn", c, "rps") == "") continue
            printf "%-18s | %10s %7s %-20s | %10s %7s %-20s | %9s %-20s\n", name[c], fmt(g("reqka", c, "rps"), 0), fmt(usmed("reqka", c, ""), 2),
              c == "nginx" ? "1" : rat(rqratio("reqka", c, "")), fmt(g("reqconn", c, "rps"), 0), fmt(usmed("reqconn", c, ""), 2),
              c == "nginx" ? "1" : rat(rqratio("reqconn", c, "")), fmt(usmed("reqconn", c, "reqka"), 2), c == "nginx" ? "1" : rat(rqratio("reqconn", c, "reqka")) }
        printf "(conn - ka: the new connection\047s own CPU, accept + close, per request; goal for tokentap+rec+SLOs: kept-alive <= nginx, conn - ka <= 1.5 x nginx)\n"
    }
    if (has["sys100_calls"] || has["systput_calls"]) {
        printf "\nSyscalls per delivered event (strace -c, 3 s of the load)\n"
        printf "%-18s | %-44s | %-44s\n", "", "100 streams x 50 ev/s", "32 streams, gap 0 (slowed by strace)"
        printf "%-18s | %6s %6s %6s %6s %6s %6s | %6s %6s %6s %6s %6s %6s\n", "config", "all", "wait", "read", "write", "ctl", "other", "all", "wait", "read", "write", "ctl", "other"
        for (i = 1; i <= no; i++) { c = order[i]; if (g("sys100_calls", c, "per_event") == "" && g("systput_calls", c, "per_event") == "") continue
            printf "%-18s |", name[c]
            for (qq = 1; qq <= 2; qq++) { t = qq == 1 ? "sys100_calls" : "systput_calls"
                printf " %6s %6s %6s %6s %6s %6s%s", fmt(g(t, c, "per_event"), 2), fmt(g(t, c, "epoll_wait"), 2), fmt(g(t, c, "read"), 2),
                    fmt(g(t, c, "write"), 2), fmt(g(t, c, "epoll_ctl"), 2), fmt(g(t, c, "other") + g(t, c, "ioctl"), 2), qq == 1 ? " |" : "\n" } }
    }
    if (has["wrkr"]) {
        printf "\n--workers at a fixed rate, 200 streams x 50 ev/s, proxies not pinned (median of %d rounds)\n", rounds
        printf "%-22s | %9s %9s %10s  %s\n", "config", "events/s", "proxy CPU", "us CPU/ev", "per-thread CPU (last round)"
        for (i = 1; i <= no; i++) { c = order[i]; e = g("wrkr", c, "evps"); if (e == "") continue
            printf "%-22s | %9.0f %8.1f%% %10.2f  %s\n", (c == "tr1" ? "tokentap --workers 1" : "tokentap --workers 2"), e, g("wrkr", c, "cpu0_pct"),
                g("wrkr", c, "cpu0_pct") * 10000 / e, thr[c] }
    }
    if (has["wrk2"]) {
        printf "\n--workers scaling, 64 streams x 2000 events, gap 0 (median of %d rounds)\n", rounds
        printf "%-22s | %9s %9s %8s  %s\n", "config", "events/s", "proxy CPU", "sim CPU", "per-thread CPU (last round)"
        for (i = 1; i <= no; i++) { c = order[i]; e = g("wrk2", c, "evps"); if (e == "") continue
            printf "%-22s | %9.0f %8.0f%% %7.0f%%  %s\n", (c == "tt" ? "tokentap --workers 1" : name[c]), e, g("wrk2", c, "cpu0_pct"), g("wrk2", c, "cpu1_pct"), thr[c] }
    }
    if (has["ttft"] || g("lat100", "ttrec", "rec_matched") != "") {
        printf "\nClient TTFT vs record TTFT (client - record), ms\n"
        printf "%-30s | %8s %9s %9s %9s %9s\n", "load", "matched", "diff p50", "diff p99", "|diff|p99", "|diff|max"
        if (g("lat100", "ttrec", "rec_matched") != "")
            printf "%-30s | %8d %9s %9s %9s %9s\n", "100 x 50 ev/s (median rounds)", g("lat100", "ttrec", "rec_matched"),
              ms(g("lat100", "ttrec", "ttft_diff_p50_us")), ms(g("lat100", "ttrec", "ttft_diff_p99_us")),
              ms(g("lat100", "ttrec", "ttft_absdiff_p99_us")), ms(g("lat100", "ttrec", "ttft_absdiff_max_us"))
        if (g("ttft", "ttrec", "rec_matched") != "")
            printf "%-30s | %8d %9s %9s %9s %9s\n", sprintf("200 str, %.0f ev/s, %.0f req/s", g("ttft", "ttrec", "evps"), g("ttft", "ttrec", "responses") / 3), g("ttft", "ttrec", "rec_matched"),
              ms(g("ttft", "ttrec", "ttft_diff_p50_us")), ms(g("ttft", "ttrec", "ttft_diff_p99_us")),
              ms(g("ttft", "ttrec", "ttft_absdiff_p99_us")), ms(g("ttft", "ttrec", "ttft_absdiff_max_us"))
    }
    if (has["hold"]) {
        printf "\nHeld slow streams (1 event/s each, 10 events a request; then every running request let end)\n"
        printf "%-12s | %7s %7s %9s %9s %10s %8s %9s %9s %9s %9s %8s\n", "proxy", "streams", "active", "RSS idle", "RSS held", "KiB/stream", "ev/s", "late p99", "jit p99", "completed", "failed", "recorded"
        for (i = 1; i <= no; i++) { c = order[i]; if (g("hold", c, "rss_kb") == "") continue
            a = g("hold", c, "active"); r0 = g("hold", c, "rss0_kb"); r1 = g("hold", c, "rss_kb")
            printf "%-12s | %7d %7d %7.1fMi %7.1fMi %10.1f %8.0f %7sms %7sms %9s %9s %8s\n", name[c], g("hold", c, "streams"), a,
              r0 / 1024, r1 / 1024, a ? (r1 - r0) / a : 0, g("hold", c, "evps"), ms(g("hold", c, "lat_p99_us")), ms(g("hold", c, "jit_p99_us")),
              fmt(g("hold", c, "completed"), 0), fmt(g("hold", c, "errors") + g("hold", c, "late_errors") + g("hold", c, "unfinished"), 0),
              fmt(g("hold", c, "rec_lines"), 0) }
    }
    errs = 0; for (k in cnt) { split(k, p, SUBSEP); if (p[3] == "errors") for (j = 1; j <= cnt[k]; j++) errs += val[k, j] }
    printf "\nload generator errors: %d\n", errs

    # JSON: medians of every field per test and config, paired added latency
    printf "{\"rounds\":%d,\"pinning\":\"%s\",\"load_avg\":\"%s\",\"errors\":%d,\"results\":[", rounds, pin, load, errs > json
    sep = ""
    for (t in has) for (i = 1; i <= no; i++) { c = order[i]; line = ""
        if (t == "cg") continue
        for (k in cnt) { split(k, p, SUBSEP); if (p[1] != t || p[2] != c || !cnt[k]) continue
            line = line sprintf("%s\"%s\":%s", line == "" ? "" : ",", p[3], med(k)) }
        if (line == "") continue
        extra = ""
        if (t ~ /^mix/ && c != "direct") {
            split(paired(t, c, "ow_p50_us"), a5, " "); split(paired(t, c, "ow_p99_us"), a9, " ")
            if (a5[1] != "") extra = sprintf(",\"added_ow_p50_us\":{\"median\":%s,\"min\":%s,\"max\":%s},\"added_ow_p99_us\":{\"median\":%s,\"min\":%s,\"max\":%s}", a5[1], a5[2], a5[3], a9[1], a9[2], a9[3])
        }
        if (t ~ /^lat/ && c != "direct") {
            split(paired(t, c, "lat_p50_us"), a5, " "); split(paired(t, c, "lat_p99_us"), a9, " ")
            if (a5[1] != "") extra = sprintf(",\"added_p50_us\":{\"median\":%s,\"min\":%s,\"max\":%s},\"added_p99_us\":{\"median\":%s,\"min\":%s,\"max\":%s}", a5[1], a5[2], a5[3], a9[1], a9[2], a9[3])
        }
        if (t == "tput" && c != "direct" && cpuev(c) != "") { split(cpuev(c), q, " ")
            extra = extra sprintf(",\"us_cpu_per_event\":{\"median\":%.3f,\"min\":%.3f,\"max\":%.3f}", q[1], q[2], q[3]) }
        printf "%s{\"test\":\"%s\",\"config\":\"%s\",\"name\":\"%s\",\"median\":{%s}%s}", sep, t, c, name[c], line, extra > json
        sep = ","
    }
    printf "],\"cost\":[" > json
    for (i = 1; i <= ncost; i++) { n = split(costl[i], kw, " "); line = ""
        for (j = 2; j <= n; j++) { eq = index(kw[j], "="); if (!eq) continue; f = substr(kw[j], 1, eq - 1); x = substr(kw[j], eq + 1)
            line = line sprintf("%s\"%s\":%s", line == "" ? "" : ",", f, x ~ /^-?[0-9]+(\.[0-9]+)?$/ ? x : "\"" x "\"") }
        printf "%s{%s}", (i > 1 ? "," : ""), line > json }
    printf "],\"callgrind\":[" > json
    for (i = 1; i <= ncg; i++) printf "%s{\"config\":\"%s\",\"workload\":\"%s\",\"ir_per_event\":%s,\"events\":%s}", (i > 1 ? "," : ""), cgc[i], cgw[i], cgir[i] + 0, cgev[i] + 0 > json
    printf "]}\n" > json
    close(json)
    printf "JSON: %s\n", json
}' "$RES"
