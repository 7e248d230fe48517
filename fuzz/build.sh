#!/bin/sh
# Builds the libFuzzer harnesses into build-fuzz/ (clang with libFuzzer,
# ASan and UBSan).  Run from the repository root:
#   sh fuzz/build.sh && ./build-fuzz/fuzz_stream -max_total_time=60 fuzz/corpus/stream
set -eu
CC=${CC:-clang}
OUT=${OUT:-build-fuzz}
mkdir -p "$OUT"
CFLAGS="-std=c11 -D_GNU_SOURCE -I. -g -O1 -Wall -Wextra -Werror -Wshadow \
-Wstrict-prototypes -Wmissing-prototypes \
-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
SRC="proxy/sse.c proxy/ndjson.c proxy/jsonarena.c proxy/stream.c proxy/inspect.c metrics/request.c"
for h in fuzz_sse fuzz_stream fuzz_inspect; do
    $CC $CFLAGS -o "$OUT/$h" "fuzz/$h.c" $SRC -lcjson -lpthread -lm
done
echo "built: $OUT/fuzz_sse $OUT/fuzz_stream $OUT/fuzz_inspect"
