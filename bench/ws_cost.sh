#!/bin/sh
# Decoding cost per event of a Responses stream as SSE and as the server
# messages of WebSocket turns, plain and with permessage-deflate (inflate
# included), counted by callgrind inside bench/bench_ws.c's measured loops
# only (--toggle-collect=measure*): Ir per event = Ir / events decoded.
#
#   sh bench/ws_cost.sh [LIBTT.a]      (default build/libtt.a)
#
# Needs valgrind and the shared fixtures (../shared/fixtures/streams).
set -u
R=$(pwd)
FX=${TT_FIXTURES:-$R/../shared/fixtures/streams}/openai-responses-reasoning_summary-function_call.jsonl
ROUNDS=${WS_ROUNDS:-50}
LIB=${1:-build/libtt.a}
[ -f "$FX" ] || { echo "ws_cost: $FX missing (fixtures not present)" >&2; exit 1; }
command -v valgrind >/dev/null 2>&1 || { echo "ws_cost: valgrind missing" >&2; exit 1; }
T=$(mktemp -d /tmp/tokentap-ws.XXXXXX)
trap 'rm -rf "$T"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_ws.c "$LIB" -levent -lssl -lcrypto -lcjson -lz \
    -lpthread -lm -o "$T/bw" || exit 1
base=0
printf '%-6s %10s %8s %7s\n' mode events Ir/event ratio
for mode in sse ws wsz; do
    valgrind --tool=callgrind --toggle-collect='measure*' --callgrind-out-file="$T/cg" \
        "$T/bw" "$FX" "$mode" "$ROUNDS" >"$T/out" 2>/dev/null || exit 1
    ir=$(sed -n 's/^summary: //p' "$T/cg")
    ev=$(sed -n 's/^[a-z]*: \([0-9]*\) events.*/\1/p' "$T/out")
    per=$((ir / ev))
    [ "$mode" = sse ] && base=$per
    printf '%-6s %10s %8s %7s\n' "$mode" "$ev" "$per" \
        "$(awk -v a="$per" -v b="$base" 'BEGIN { printf "%.3f", a / b }')"
done
