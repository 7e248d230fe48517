#!/bin/sh
# make demo: tokentap in front of the built-in simulated model server, real
# streaming traffic through it with curl, then what tokentap measured:
# the records, the report, /stats and a few /metrics lines.
set -eu
BUILD=${1:-build}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
sim_pid="" tt_pid=""
cleanup() {
    [ -n "$tt_pid" ] && kill "$tt_pid" 2>/dev/null || true
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# wait for "<pattern>PORT" in <file>, print PORT
port_from() {
    i=0
    while [ $i -lt 100 ]; do
        p=$(sed -n "s/.*$2\([0-9][0-9]*\).*/\1/p" "$1" | head -n 1)
        [ -n "$p" ] && { echo "$p"; return 0; }
        sleep 0.05; i=$((i + 1))
    done
    echo "demo: no port found in $1:" >&2; cat "$1" >&2; return 1
}

"$BUILD/tokentap-sim" --listen 127.0.0.1:0 >"$work/sim.log" 2>&1 &
sim_pid=$!
sim_port=$(port_from "$work/sim.log" "listening on 127.0.0.1:")

SLO="time_to_first_token:300 inter_token_latency:40"
"$BUILD/tokentap" --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$sim_port" \
    --admin 127.0.0.1:0 --record "$work/records.jsonl" --goodput "$SLO" \
    >"$work/tokentap.log" 2>&1 &
tt_pid=$!
port=$(port_from "$work/tokentap.log" "listening on 127.0.0.1:")
admin=$(port_from "$work/tokentap.log" "admin 127.0.0.1:")
base="http://127.0.0.1:$port"

echo "== tokentap on :$port in front of tokentap-sim on :$sim_port (admin :$admin)"
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

# records are written by a background thread: wait for all nine
i=0
while [ "$(wc -l <"$work/records.jsonl")" -lt 10 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done

echo
echo "== one record per request (--record), in short:"
python3 scripts/demo_show.py records "$work/records.jsonl"
echo
if "$BUILD/tokentap" report "$work/records.jsonl" >"$work/report.txt" 2>&1; then
    echo "== tokentap report records.jsonl:"
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
echo "== live dashboard: http://127.0.0.1:$admin/dashboard"
hold=${DEMO_HOLD:-0}
if [ "$hold" -gt 0 ] 2>/dev/null; then
    echo "== keeping traffic flowing for $hold s (open the dashboard now)"
    end=$(($(date +%s) + hold)) i=0
    while [ "$(date +%s)" -lt "$end" ]; do
        i=$((i + 1)) m=demo-chat r=0
        [ $((i % 3)) = 0 ] && m=demo-reasoner r=$((i % 7 + 2))
        [ $((i % 17)) = 0 ] && st=',"status":503' || st=""
        send /v1/chat/completions "{\"model\":\"$m\",\"stream\":true,\"stream_options\":{\"include_usage\":true},
          \"sim\":{\"ttft_ms\":$((40 + i * 37 % 400)),\"reasoning_tokens\":$r,\"tokens\":$((5 + i * 13 % 60)),
          \"gap_ms\":$((8 + i % 5 * 6)),\"prompt_tokens\":$((20 + i * 71 % 3000))$st}}" >/dev/null
    done
fi
kill -TERM "$tt_pid"; wait "$tt_pid" 2>/dev/null && echo "== tokentap drained and exited 0"
tt_pid=""
