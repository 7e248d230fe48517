#!/bin/sh
# Decoding cost per event for each chunk shape of bench/bench_decode.c,
# counted by callgrind: Ir per event = (Ir(N2 iterations) - Ir(N1)) /
# (events(N2) - events(N1)) over the vLLM chat fixture rewritten into the
# shape, which cancels start-up.  Prints one line per shape with the share
# of events the fast path took and the ratio to the common chunk.
#
#   sh bench/decode_shapes.sh [LIBTT.a ...]      (default build/libtt.a)
#
# Several libraries (a build before a change and after) give one column
# each.  Needs valgrind and the shared fixtures (../shared/fixtures/streams).
set -u
R=$(pwd)
FX=${TT_FIXTURES:-$R/../shared/fixtures/streams}/vllm-0.24-chat-include_usage.sse
N1=${DS_N1:-20}
N2=${DS_N2:-60}
[ $# -gt 0 ] || set -- build/libtt.a
[ -f "$FX" ] || { echo "decode_shapes: $FX missing (fixtures not present)" >&2; exit 1; }
command -v valgrind >/dev/null 2>&1 || { echo "decode_shapes: valgrind missing" >&2; exit 1; }
T=$(mktemp -d /tmp/tokentap-ds.XXXXXX)
trap 'rm -rf "$T"' EXIT
i=0
for lib in "$@"; do
    cc -std=c11 -D_GNU_SOURCE -O2 -I. -I/usr/share/include/llhttp bench/bench_decode.c \
        "$lib" -levent -lssl -lcrypto -lcjson -lpthread -lm -o "$T/bd$i" || exit 1
    i=$((i + 1))
done
# count BIN N SHAPE -> "IR EVENTS FAST"
count() {
    valgrind --tool=callgrind --callgrind-out-file="$T/cg" "$1" "$FX" "$2" "$3" \
        >"$T/out" 2>/dev/null || exit 1
    echo "$(sed -n 's/^summary: //p' "$T/cg") $(sed -n 's/^\([0-9]*\) events, \([0-9]*\) fast.*/\1 \2/p' "$T/out")"
}
for shape in common int19 negint float obfusc escapes nested reorder inner mix; do
    line="$shape"
    j=0
    while [ $j -lt $i ]; do
        set -- $(count "$T/bd$j" "$N1" "$shape") $(count "$T/bd$j" "$N2" "$shape")
        ir=$(( ($4 - $1) / ($5 - $2) ))
        [ "$shape" = common ] && eval "base$j=$ir"
        eval "b=\$base$j"
        line="$line $(echo "$ir $b $6 $5" | awk '{ printf "%d (%.2fx, fast %d/%d)", $1, $1 / $2, $3, $4 }')"
        j=$((j + 1))
    done
    echo "$line"
done
