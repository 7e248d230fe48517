#!/bin/sh
# Instructions per event of the whole proxy (forwarding, decoding, the clock,
# metrics, the delay histogram, records), counted by callgrind: repeatable on
# a shared machine, unlike CPU time.
#
#   sh bench/callgrind.sh BUILD_DIR [TOKENTAP_BINARY]
#
# For each workload tokentap runs under callgrind twice, serving K1 and then
# K2 requests one after the other (curl, one connection each) from
# tokentap-sim; Ir per event = (Ir(K2) - Ir(K1)) / (events(K2) - events(K1)),
# which cancels start-up and shutdown.  Events are paced (gap_ms 10) so that
# each upstream read carries one event, the costly case a live stream has
# (at 3 ms, under callgrind's slowdown, 3-16 % of events shared a read, a
# different share each run: ±4 % on one binary's count).
# Workloads: the sim's own OpenAI chat stream (100 tokens, usage on), the
# same forwarded by nginx (sim-nginx: no decoding, for comparison; skipped
# with a message when nginx is missing), the
# same asked for by a 32 KiB chat body (sim-prompt32k, and through nginx),
# the same with one shadow (--shadow cand=URL, every request mirrored), and
# replays of the vLLM and OpenAI chat fixtures (../shared/fixtures/streams;
# skipped with a message when missing).  Prints one line per workload:
#   CG workload=NAME ir_per_event=N events=N
# and, with CG_TOP=1, the top functions of the K2 run.
# CG_GAP (ms, default 10) and CG_TOKENS (default 100) set the sim stream's
# pacing and length: CG_GAP=0 CG_TOKENS=2000 is the throughput load;
# CG_SIM_ONLY=1 stops after the sim stream (tokentap and nginx);
# CG_KEEPALIVE=1 sends each run's requests on one kept-alive connection.
# Copies count as vector loops, not as one instruction a byte, and the
# windowed metrics' slot clears (driven by the clock, not by events) are not counted;
# CG_REP=1 and CG_CLEARS=1 count them as callgrind otherwise would.
set -u

R=$(pwd)
# shellcheck source=bench/cg_lib.sh
. "$R/bench/cg_lib.sh"
cg_binaries "$@"
K1=${CG_K1:-2}
K2=${CG_K2:-8}
GAP=${CG_GAP:-10}
TOKENS=${CG_TOKENS:-100}
FX=$R/../shared/fixtures/streams
# copies as vector loops, ring slot clears not counted (CG_REP, CG_CLEARS)
cg_setup
T=$(mktemp -d /tmp/tokentap-cg.XXXXXX)
SIMPID=""
trap '[ -n "$SIMPID" ] && kill "$SIMPID" 2>/dev/null; [ -n "${CG_KEEP:-}" ] || rm -rf "$T"' EXIT
cc -O2 -Wall -o "$T/sse_load" "$R/bench/sse_load.c" -lm || exit 1

"$B/tokentap-sim" --listen 127.0.0.1:0 --ready-file "$T/sim.ready" >"$T/sim.out" 2>&1 &
SIMPID=$!
SIM=$("$T/sse_load" --wait-ready "$T/sim.ready" "$SIMPID") || exit 1

# requests K BODY URL [CURL-OPTION...]: K requests one after the other, a
# connection each; with CG_KEEPALIVE=1 all K on one kept-alive connection
# (one curl given the URL K times), so that the difference of two
# counts is per request without the connection's accept and close
requests() {
    k=$1 body=$2 url=$3; shift 3
    if [ -n "${CG_KEEPALIVE:-}" ]; then
        urls="" i=0
        while [ $i -lt "$k" ]; do urls="$urls $url"; i=$((i + 1)); done
        # shellcheck disable=SC2086
        curl -sN "$@" -H 'Content-Type: application/json' --data "$body" $urls >/dev/null || exit 1
        return
    fi
    i=0
    while [ $i -lt "$k" ]; do
        curl -sN -o /dev/null "$@" -H 'Content-Type: application/json' --data "$body" "$url" || exit 1
        i=$((i + 1))
    done
}

# run NAME K BODY -> prints "IR EVENTS" ($XARGS: more tokentap options)
run() {
    rm -f "$T/tt.ready" "$T/rec.jsonl"
    valgrind --tool=callgrind --callgrind-out-file="$T/cg.$1.$2" $TOGGLE \
        "$TT" --listen 127.0.0.1:0 --ready-file "$T/tt.ready" \
        --upstream "http://127.0.0.1:$SIM" --admin off --log-level warn \
        --record "$T/rec.jsonl" ${XARGS:-} >"$T/tt.$1.$2.log" 2>&1 &
    vp=$!
    port=$("$T/sse_load" --wait-ready "$T/tt.ready" "$vp") || { cat "$T/tt.$1.$2.log" >&2; exit 1; }
    requests "$2" "$3" "http://127.0.0.1:$port/v1/chat/completions"
    kill -TERM "$vp"
    wait "$vp"
    ir=$(sed -n 's/^summary: //p' "$T/cg.$1.$2")
    # the primary's events (a shadow leg has its own record)
    ev=$(grep '"role":"primary"' "$T/rec.jsonl" | sed -n 's/.*"events":\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
    echo "$ir $ev"
}

workload() { # NAME BODY
    set -- "$1" "$2" "$(run "$1" "$K1" "$2")" "$(run "$1" "$K2" "$2")"
    echo "$3 $4" | awk -v n="$1" '{ d = $4 - $2; if (d <= 0) { print "CG workload=" n " error=no_events"; exit }
        printf "CG workload=%s ir_per_event=%.0f events=%d\n", n, ($3 - $1) / d, d }'
    if [ -n "${CG_TOP:-}" ]; then
        callgrind_annotate --inclusive=no "$T/cg.$1.$K2" 2>/dev/null | sed -n '1,/^$/d; 1,45p' | head -45
    fi
}

# the same count for nginx forwarding the same streams (proxy_buffering off,
# as in bench/run.sh): what a proxy that does not decode spends in user
# space.  One process (master_process off) listening on a unix socket, so
# that nothing has to pick a port; events per request are the sim's, as
# tokentap counted them.
nginx_run() { # K BODY -> prints "IR"
    d=$T/ng.$1; mkdir -p "$d"
    cg_nginx_conf "$d/nginx.conf" "$d" "unix:$d/sock" "$SIM"
    cg_nginx_start "$d"
    requests "$1" "$2" "http://sim/v1/chat/completions" --unix-socket "$d/sock"
    kill -QUIT "$vp"
    wait "$vp"
    cg_ir "$d/cg"
}

SIMBODY="{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream_options\":{\"include_usage\":true},\"sim\":{\"ttft_ms\":5,\"tokens\":$TOKENS,\"gap_ms\":$GAP}}"
# nginx_workload NAME BODY: the workload just counted for tokentap, through nginx
nginx_workload() {
    [ -z "${CG_NO_NGINX:-}" ] || return 0
    if ! command -v nginx >/dev/null 2>&1; then
        echo "CG workload=$1-nginx skipped: nginx missing (sh scripts/deps.sh bench installs it)"
        return 0
    fi
    # events per request: the sim's stream as tokentap counted it
    EVREQ=$(grep '"role":"primary"' "$T/rec.jsonl" | head -n 1 | sed -n 's/.*"events":\([0-9]*\).*/\1/p')
    set -- "$1" "$(nginx_run "$K1" "$2")" "$(nginx_run "$K2" "$2")"
    echo "$2 $3" | awk -v n="$1-nginx" -v k1="$K1" -v k2="$K2" -v e="${EVREQ:-0}" '{ d = (k2 - k1) * e
        if (d <= 0 || $2 <= $1) { print "CG workload=" n " error=no_count"; exit }
        printf "CG workload=%s ir_per_event=%.0f events=%d\n", n, ($2 - $1) / d, d }'
}
workload sim "$SIMBODY"
nginx_workload sim "$SIMBODY"
[ -n "${CG_SIM_ONLY:-}" ] && exit 0
# the same stream asked for by a body that is mostly a 32 KiB user message
# (prose with newlines and quotes, escaped as JSON has them), the kind of
# request live chat traffic sends: the request inspector's work per body
# byte, spread over the events of one stream
awk -v tokens="$TOKENS" -v gap="$GAP" 'BEGIN {
    s = "Summarise the notes below.\\n"
    while (length(s) < 32768)
        s = s "The \\\"proxy\\\" forwards every byte unchanged and at once; it reads the stream in flight.\\n"
    printf "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"system\",\"content\":\"You are helpful.\"},"
    printf "{\"role\":\"user\",\"content\":\"%s\"}],\"stream_options\":{\"include_usage\":true},", s
    printf "\"sim\":{\"ttft_ms\":5,\"tokens\":%d,\"gap_ms\":%d}}", tokens, gap }' >"$T/prompt32k.json"
workload sim-prompt32k "@$T/prompt32k.json"
nginx_workload sim-prompt32k "@$T/prompt32k.json"
# the same with one shadow leg on every request (the sim serves both legs):
# per primary event, so it includes decoding the shadow's copy
XARGS="--shadow cand=http://127.0.0.1:$SIM"
workload sim+shadow "$SIMBODY"
XARGS=""
for f in vllm-0.24-chat-include_usage.sse openai-chat-tool_calls-include_usage.sse; do
    if [ -f "$FX/$f" ]; then
        workload "${f%.sse}" "{\"model\":\"m\",\"stream\":true,\"messages\":[],\"sim\":{\"replay\":\"$FX/$f\",\"ttft_ms\":5,\"gap_ms\":$GAP}}"
    else
        echo "CG workload=${f%.sse} skipped: $FX/$f missing (fixtures not present)"
    fi
done
