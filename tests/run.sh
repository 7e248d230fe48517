#!/bin/sh
# The whole test suite, as `make test` runs it: unit tests (cmocka) and
# integration tests (simulator + proxy on loopback), first on the release
# build, then on an AddressSanitizer/UndefinedBehaviorSanitizer build, then
# a short run of every fuzz target.
# Ends with one line: "N passed, N failed" (and skipped, when any).
# TT_SAN=0 skips the sanitizer pass and the fuzz run (make check).
set -u
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
results=$(mktemp)
trap 'rm -f "$results"' EXIT

suite() {
    name=$1 build=$2 flags=$3
    echo "== $name build ($build)"
    if ! make -s -j"$jobs" $flags all unit >/dev/null; then
        echo "FAIL build ($name)"
        echo "0 1 0" >>"$results"
        return
    fi
    # a runner that dies before its summary line is a failure, not silence
    before=$(wc -l <"$results")
    python3 tests/runner.py --build "$build" --summary "$results" --label "$name"
    if [ "$(wc -l <"$results")" -eq "$before" ]; then
        echo "FAIL $name: tests/runner.py ended without its summary"
        echo "0 1 0" >>"$results"
    fi
}

# the code must build warning-free with clang as well as gcc
if command -v clang >/dev/null 2>&1; then
    if make -s -j"$jobs" CC=clang BUILD=build-clang all unit >/dev/null 2>build-clang.log; then
        echo "ok   clang build (-Wall -Wextra -Werror)"; echo "1 0 0" >>"$results"
    else
        echo "FAIL clang build:"; sed 's/^/    /' build-clang.log | head -n 30; echo "0 1 0" >>"$results"
    fi
    rm -f build-clang.log
else
    echo "SKIP clang build: clang not installed"; echo "0 0 1" >>"$results"
fi

suite release build ""
if [ "${TT_SAN:-1}" != 0 ]; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        suite sanitizers build-san "SAN=1"
fi
# every libFuzzer target for a short bounded run (make test only; fails on
# any crash, keeping the input in build-fuzz/crashes/); TT_FUZZ=0 skips it
if [ "${TT_SAN:-1}" != 0 ] && [ "${TT_FUZZ:-1}" != 0 ]; then
    if command -v clang >/dev/null 2>&1; then
        echo "== fuzz (${TT_FUZZ_SECONDS:-10} s per target)"
        if make -s -j"$jobs" fuzz >/dev/null && make -s fuzz-run FUZZ_SECONDS="${TT_FUZZ_SECONDS:-10}"; then
            echo "1 0 0" >>"$results"
        else
            echo "0 1 0" >>"$results"
        fi
    else
        echo "SKIP fuzz: clang not installed"; echo "0 0 1" >>"$results"
    fi
fi
awk '{p+=$1; f+=$2; s+=$3} END {
    if (s > 0) printf "%d passed, %d failed, %d skipped\n", p, f, s;
    else printf "%d passed, %d failed\n", p, f;
    exit (f > 0 || p == 0) }' "$results"
