#!/bin/sh
# Instructions per event of the whole proxy for each chunk shape of
# bench/bench_decode.c (the vLLM 0.24 chat fixture rewritten: a 19-digit
# timestamp, a negative integer, a float with exponent, an obfuscation
# string, escapes, a nested member, keys reordered, members inside the
# choice, all at once), replayed by tokentap-sim through tokentap (records
# on, SLOs on) and through nginx, counted by callgrind.
#
#   sh bench/proxy_shapes.sh [BUILD_DIR] [TOKENTAP_BINARY]
#
# Each shape is written twice (bench_decode --write): with the fixture's
# token events repeated R1 and R2 times.  Each proxy serves two requests
# of the short stream under one callgrind run and two of the long one
# under another; Ir per event = (Ir(long) - Ir(short)) / (events(long) -
# events(short)), so start-up, shutdown and everything paid once per
# request cancel and what is left is the cost of one more event of that
# shape.  Events are paced (PS_GAP, gap_ms 20) so that each read carries
# one (at 10, under callgrind, some runs had reads of two).
# Prints a table: shape, tokentap, x common, nginx, tokentap / nginx;
# and one machine-readable line per shape and proxy:
#   SHAPE shape=NAME proxy=tokentap|nginx ir_per_event=N events=N
# PS_R1 (2) and PS_R2 (12) set the repeats, PS_SHAPES the shapes.
set -u

R=$(pwd)
# shellcheck source=bench/cg_lib.sh
. "$R/bench/cg_lib.sh"
cg_binaries "$@"
FX=${TT_FIXTURES:-$R/../shared/fixtures/streams}/vllm-0.24-chat-include_usage.sse
R1=${PS_R1:-2}
R2=${PS_R2:-12}
GAP=${PS_GAP:-20}
SHAPES=${PS_SHAPES:-common int19 negint float obfusc escapes nested reorder inner mix}
[ -f "$FX" ] || { echo "proxy_shapes: $FX missing (fixtures not present)" >&2; exit 0; }
cg_setup
T=$(mktemp -d /tmp/tokentap-ps.XXXXXX)
SIMPID=""
trap '[ -n "$SIMPID" ] && kill "$SIMPID" 2>/dev/null; rm -rf "$T"' EXIT
cc -O2 -Wall -o "$T/sse_load" "$R/bench/sse_load.c" -lm || exit 1
cc -std=c11 -D_GNU_SOURCE -O2 -I"$R" -I/usr/share/include/llhttp "$R/bench/bench_decode.c" \
    "$B/libtt.a" -levent -lssl -lcrypto -lcjson -lpthread -lm -o "$T/bench_decode" || exit 1

"$B/tokentap-sim" --listen 127.0.0.1:0 --ready-file "$T/sim.ready" >"$T/sim.out" 2>&1 &
SIMPID=$!
SIM=$("$T/sse_load" --wait-ready "$T/sim.ready" "$SIMPID") || exit 1

body() { # FILE
    printf '{"model":"m","stream":true,"messages":[],"sim":{"replay":"%s","ttft_ms":5,"gap_ms":%s}}' "$1" "$GAP"
}

# tt FILE -> "IR EVENTS": tokentap under callgrind, two requests of FILE
tt() {
    rm -f "$T/tt.ready" "$T/rec.jsonl"
    valgrind --tool=callgrind --callgrind-out-file="$T/cg.tt" \
        $TOGGLE \
        "$TT" --listen 127.0.0.1:0 --ready-file "$T/tt.ready" \
        --upstream "http://127.0.0.1:$SIM" --admin off --log-level warn \
        --record "$T/rec.jsonl" --goodput "ttft:500 itl:50" >"$T/tt.log" 2>&1 &
    vp=$!
    port=$("$T/sse_load" --wait-ready "$T/tt.ready" "$vp") || { cat "$T/tt.log" >&2; exit 1; }
    for i in 1 2; do
        curl -sN -o /dev/null -H 'Content-Type: application/json' --data "$(body "$1")" \
            "http://127.0.0.1:$port/v1/chat/completions" || exit 1
    done
    kill -TERM "$vp"
    wait "$vp"
    echo "$(cg_ir "$T/cg.tt")" \
         "$(sed -n 's/.*"events":\([0-9]*\).*/\1/p' "$T/rec.jsonl" | awk '{s += $1} END {print s + 0}')"
}

# ng FILE -> "IR": nginx (one process, on a unix socket)
ng() {
    d=$T/ng; rm -rf "$d"; mkdir -p "$d"
    cg_nginx_conf "$d/nginx.conf" "$d" "unix:$d/sock" "$SIM"
    cg_nginx_start "$d"
    for i in 1 2; do
        curl -sN -o /dev/null --unix-socket "$d/sock" -H 'Content-Type: application/json' \
            --data "$(body "$1")" "http://sim/v1/chat/completions" || exit 1
    done
    kill -QUIT "$vp"
    wait "$vp"
    cg_ir "$d/cg"
}

have_nginx=1
command -v nginx >/dev/null 2>&1 || have_nginx=0
[ $have_nginx = 1 ] || echo "proxy_shapes: nginx missing, its column skipped (sh scripts/deps.sh bench installs it)"
printf '| shape | tokentap | x common | nginx | tokentap / nginx |\n|---|---|---|---|---|\n' >"$T/table"
base=""
for s in $SHAPES; do
    "$T/bench_decode" "$FX" --write "$s" "$R1" >"$T/$s.short.sse" || exit 1
    "$T/bench_decode" "$FX" --write "$s" "$R2" >"$T/$s.long.sse" || exit 1
    set -- $(tt "$T/$s.short.sse") $(tt "$T/$s.long.sse")
    d=$(($4 - $2))
    [ "$d" -gt 0 ] || { echo "SHAPE shape=$s proxy=tokentap error=no_events"; continue; }
    ir=$(( ($3 - $1) / d ))
    echo "SHAPE shape=$s proxy=tokentap ir_per_event=$ir events=$d"
    [ -n "$base" ] || base=$ir
    nir="" ratio=""
    if [ $have_nginx = 1 ]; then
        set -- $(ng "$T/$s.short.sse") $(ng "$T/$s.long.sse")
        nir=$(( ($2 - $1) / d ))
        echo "SHAPE shape=$s proxy=nginx ir_per_event=$nir events=$d"
        ratio=$(echo "$ir $nir" | awk '{ printf "%.2f", $1 / $2 }')
    fi
    echo "$s $ir $base $nir $ratio" | awk '{ printf "| %s | %d | %.2f | %s | %s |\n", $1, $2, $2 / $3, $4, $5 }' >>"$T/table"
done
cat "$T/table"
