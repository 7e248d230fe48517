#!/bin/sh
# Runs every libFuzzer target for a bounded time (make fuzz-run calls it):
#   sh fuzz/run.sh SECONDS build-fuzz/fuzz_x ...
# Each target starts from its committed seeds (fuzz/corpus/NAME) plus what
# earlier runs found (build-fuzz/corpus-fuzz_NAME, where new inputs go).
# Its whole log is kept in build-fuzz/logs/fuzz_NAME.log and a crashing
# input in build-fuzz/crashes/fuzz_NAME-crash-<sha1> (leak-, timeout-,
# oom- likewise).  Prints one line per target with its executions; a
# target that fails prints the report and the crash file, and the script
# exits 1 after running the others.
set -u
secs=$1
shift
mkdir -p build-fuzz/crashes build-fuzz/logs
failed=""
for f in "$@"; do
    n=$(basename "$f")
    mkdir -p "build-fuzz/corpus-$n"
    seeds=""
    [ -d "fuzz/corpus/${n#fuzz_}" ] && seeds="fuzz/corpus/${n#fuzz_}"
    dict=""
    [ -f "fuzz/${n#fuzz_}.dict" ] && dict="-dict=fuzz/${n#fuzz_}.dict"
    log="build-fuzz/logs/$n.log"
    # shellcheck disable=SC2086
    "$f" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="build-fuzz/crashes/$n-" $dict \
        "build-fuzz/corpus-$n" $seeds >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ]; then
        echo "ok   $n: ${execs:-?} executions in $secs s"
        continue
    fi
    failed="$failed $n"
    echo "FAIL $n (exit $rc); log: $log"
    # the end of the log: the sanitizer or libFuzzer report and where
    # the input was written ("Test unit written to ...")
    grep -v '^#[0-9]\|^stat::' "$log" | tail -n 40 | sed 's/^/    | /'
done
if [ -n "$failed" ]; then
    echo "fuzz: failing targets:$failed (inputs in build-fuzz/crashes/)"
    exit 1
fi
exit 0
