#!/bin/sh
# make demo: tokentap in front of the built-in simulated model server, real
# streaming traffic through it with curl, then what tokentap measured:
# the records, the report, /stats and a few /metrics lines.
set -eu
BUILD=${1:-build}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
sim_pid="" cand_pid="" tt_pid=""
cleanup() {
    [ -n "$tt_pid" ] && kill "$tt_pid" 2>/dev/null || true
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
    [ -n "$cand_pid" ] && kill "$cand_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# Every listener binds port 0; the programs write the addresses they got to
# --ready-file (by rename, once listening).  ready FILE PID LOG waits for
# the file (a short poll on its existence: the file appearing is the
# readiness, and a shell has no inotify), failing at once if PID exits.
ready() {
    i=0
    while [ ! -f "$1" ]; do
        if ! kill -0 "$2" 2>/dev/null || [ $i -ge 1000 ]; then
            echo "demo: $3 did not start:" >&2; cat "$3" >&2; return 1
        fi
        sleep 0.01; i=$((i + 1))
    done
}
# port_of FILE KEY: the port of "KEY":"HOST:PORT" in a ready file
port_of() { sed -n "s/.*\"$2\":\"[^\"]*:\([0-9][0-9]*\)\".*/\1/p" "$1"; }

"$BUILD/tokentap-sim" --listen 127.0.0.1:0 --ready-file "$work/sim.ready" >"$work/sim.log" 2>&1 &
sim_pid=$!
ready "$work/sim.ready" "$sim_pid" "$work/sim.log"
sim_port=$(port_of "$work/sim.ready" listen)
# a second simulator, 1.5 times slower, stands for a candidate server that
# gets a shadow copy of every request (docs/shadow.md)
"$BUILD/tokentap-sim" --listen 127.0.0.1:0 --latency-scale 1.5 --ready-file "$work/cand.ready" \
    >"$work/cand.log" 2>&1 &
cand_pid=$!
ready "$work/cand.ready" "$cand_pid" "$work/cand.log"
cand_port=$(port_of "$work/cand.ready" listen)

SLO="time_to_first_token:300 inter_token_latency:40"
"$BUILD/tokentap" --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$sim_port" \
    --shadow "candidate=http://127.0.0.1:$cand_port" \
    --admin 127.0.0.1:0 --record "$work/records.jsonl" --goodput "$SLO" \
    --ready-file "$work/tokentap.ready" >"$work/tokentap.log" 2>&1 &
tt_pid=$!
ready "$work/tokentap.ready" "$tt_pid" "$work/tokentap.log"
port=$(port_of "$work/tokentap.ready" listen)
admin=$(port_of "$work/tokentap.ready" admin)
base="http://127.0.0.1:$port"

echo "== tokentap on :$port in front of tokentap-sim on :$sim_port (admin :$admin),"
echo "   shadowing every request to a 1.5x slower candidate on :$cand_port"
echo "== SLOs: $SLO"
echo
echo "== a streaming chat completion with reasoning, as the client sees it:"
curl -sN "$base/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"demo-reasoner","stream":true,"stream_options":{"include_usage":true},
         "messages":[{"role":"user","content":"hi"}],
         "sim":{"ttft_ms":120,"reasoning_tokens":3,"tokens":4,"gap_ms":20}}' | cut -c1-150
echo
echo "== more traffic: other APIs, a slow first token, a non-streaming call, an upstream error"
send() { curl -sN -o /dev/null -w "   %{http_code}  $1  (%{time_total}s)\n" "$base$1" \
           -H "Content-Type: application/json" -d "$2" || true; }
send /v1/chat/completions '{"model":"demo-chat","stream":true,"sim":{"ttft_ms":80,"tokens":40,"gap_ms":15}}'
send /v1/chat/completions '{"model":"demo-chat","stream":true,"sim":{"ttft_ms":450,"tokens":20,"gap_ms":25}}'
send /v1/chat/completions '{"model":"demo-chat","stream":true,"sim":{"ttft_ms":60,"tokens":12,"tokens_per_event":3,"gap_ms":90}}'
send /v1/messages '{"model":"demo-claude","stream":true,"max_tokens":64,"sim":{"ttft_ms":100,"reasoning_tokens":5,"tokens":10,"gap_ms":10}}'
send "/v1beta/models/demo-gemini:streamGenerateContent?alt=sse" '{"contents":[],"sim":{"ttft_ms":90,"reasoning_tokens":2,"tokens":6,"gap_ms":30}}'
send /api/chat '{"model":"demo-ollama","sim":{"ttft_ms":70,"tokens":8,"gap_ms":12}}'
send /v1/chat/completions '{"model":"demo-chat","stream":false,"sim":{"ttft_ms":50,"tokens":16}}'
send /v1/chat/completions '{"model":"demo-chat","stream":true,"sim":{"status":503}}'
send /v1/chat/completions '{"model":"demo-chat","stream":true,"sim":{"ttft_ms":50,"tokens":30,"gap_ms":10,"truncate_after":5}}'

# records are written by a background thread, and each request has two
# legs (primary and candidate): wait for all twenty
wait_records() {
    i=0
    while [ "$(wc -l <"$work/records.jsonl")" -lt "$1" ] && [ $i -lt 200 ]; do
        sleep 0.05; i=$((i + 1))
    done
}
wait_records 20

echo
echo "== one record per request and leg (--record), in short:"
python3 scripts/demo_show.py records "$work/records.jsonl"
echo
if "$BUILD/tokentap" report "$work/records.jsonl" --upstream primary >"$work/report.txt" 2>&1; then
    echo "== tokentap report records.jsonl --upstream primary:"
    sed 's/^/   /' "$work/report.txt"
    echo
fi
echo "== /stats: live windows from the admin listener"
curl -s "http://127.0.0.1:$admin/stats" | python3 scripts/demo_show.py stats
echo
echo "== a few /metrics lines:"
curl -s "http://127.0.0.1:$admin/metrics" >"$work/metrics.txt"
for re in '^tokentap_slo_attainment_ratio' '^tokentap_good_requests_total' \
          '^tokentap_requests_total.*demo-chat' '^tokentap_slo_violations_total.*demo-chat' \
          '^tokentap_time_to_first_token_seconds_bucket.*demo-chat.*le="0.5"' \
          '^tokentap_tokens_total.*demo-reasoner'; do
    grep -E "$re" "$work/metrics.txt" | head -n 4
done | sed 's/^/   /'
echo
echo "== shadow traffic: 30 more chat requests, each also sent to the candidate"
j=0
while [ $j -lt 30 ]; do
    send /v1/chat/completions "{\"model\":\"demo-chat\",\"stream\":true,
      \"sim\":{\"ttft_ms\":$((60 + j * 7 % 90)),\"tokens\":$((10 + j % 9)),\"gap_ms\":12}}" >/dev/null
    j=$((j + 1))
done
wait_records 80
echo
echo "== live paired comparison (/stats comparisons.candidate, last minute):"
curl -s "http://127.0.0.1:$admin/stats" | python3 scripts/demo_show.py compare
echo
if "$BUILD/tokentap" report "$work/records.jsonl" --compare-upstreams primary,candidate \
        >"$work/compare.txt" 2>&1; then
    echo "== tokentap report records.jsonl --compare-upstreams primary,candidate (first paired table):"
    # the first part of the paired table: median difference per metric
    sed -n '/^Paired comparison/,/^└/p' "$work/compare.txt" | sed 's/^/   /'
    echo
fi
# The dashboard is served by tokentap's admin listener, so its link is only
# worth printing while tokentap runs: with DEMO_HOLD=N it does (for N s,
# traffic flowing); without, the demo ends here and says how to see it.
hold=${DEMO_HOLD:-0}
case $hold in
    ''|*[!0-9]*) echo "demo: DEMO_HOLD=$hold is not a number of seconds; not holding" >&2; hold=0 ;;
esac
if [ "$hold" -gt 0 ]; then
    end=$(($(date +%s) + hold)) i=0
    echo "== live dashboard, up for $hold s (until $(date -d "@$end" +%H:%M:%S 2>/dev/null || echo "$hold s from now"))"
    echo "   with traffic flowing; Ctrl-C ends the demo sooner (the link then stops answering):"
    echo "   http://127.0.0.1:$admin/dashboard"
    while [ "$(date +%s)" -lt "$end" ]; do
        i=$((i + 1)) m=demo-chat r=0
        [ $((i % 3)) = 0 ] && m=demo-reasoner r=$((i % 7 + 2))
        [ $((i % 17)) = 0 ] && st=',"status":503' || st=""
        send /v1/chat/completions "{\"model\":\"$m\",\"stream\":true,\"stream_options\":{\"include_usage\":true},
          \"sim\":{\"ttft_ms\":$((40 + i * 37 % 400)),\"reasoning_tokens\":$r,\"tokens\":$((5 + i * 13 % 60)),
          \"gap_ms\":$((8 + i % 5 * 6)),\"prompt_tokens\":$((20 + i * 71 % 3000))$st}}" >/dev/null
    done
else
    echo "== the live dashboard is served by tokentap, which the demo stops now. To watch it:"
    echo "      make demo DEMO_HOLD=60"
    echo "   keeps tokentap up for 60 s with traffic flowing and prints the dashboard's"
    echo "   address while it is live (Ctrl-C ends it sooner)."
fi
kill -TERM "$tt_pid"; wait "$tt_pid" 2>/dev/null && echo "== tokentap drained and exited 0"
tt_pid=""
