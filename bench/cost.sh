#!/bin/sh
# Cost per request, per connection, per TLS handshake and of a shadow leg,
# for tokentap beside nginx and HAProxy, counted by callgrind (instructions
# in user space: repeatable on a shared machine, unlike CPU time).
#
#   sh bench/cost.sh BUILD_DIR [TOKENTAP_BINARY]
#   sh bench/cost.sh --summary FILE     (the tables again, from the CG lines in FILE)
#
# Every proxy forwards to one tokentap-sim, with the upstream connection kept
# alive (tokentap's pool, nginx `keepalive 16`, HAProxy `http-reuse always`),
# and runs under callgrind twice per workload, the client sending K1 and then
# K2 units (bench/tls_conns.c: the same bytes to every proxy); Ir per unit =
# (Ir(K2) - Ir(K1)) / (units(K2) - units(K1)), which cancels start-up, the
# first upstream connect and shutdown, as bench/callgrind.sh does.  All of
# them listen on loopback TCP: tokentap on port 0 with --ready-file; nginx
# (master and one worker: it cannot take over a socket with master_process
# off; callgrind follows the fork, and both processes' counts are summed) and
# HAProxy (mode http, nbthread 1, option http-no-delay, foreground -db) on a
# socket handed over on fd 3 by `sse_load --listen-exec`.
#
# Proxies: tt = tokentap with records and SLOs on (--record FILE --goodput
# "ttft:500 itl:50"), ttnorec = the same without --record, nginx, haproxy;
# ttshadow = tt with --shadow cand=URL (the same sim) for the shadow rows.
# Workloads (unit):
#   ka-stream   one-token chat stream (stream:true, include_usage), K requests
#               on one kept-alive connection (request)
#   ka-json     the same as a non-streaming chat request (stream:false) (request)
#   conn        the one-token stream, each request on its own connection
#               (connection + request; minus ka-stream = accept + close)
#   tls-full    conn over TLS 1.3, TLS_AES_128_GCM_SHA256 and X25519 offered
#               alone by the client, a P-256 ECDSA certificate, no resumption
#               (TLS connection + request; minus conn = the full handshake)
#   tls-resume  the same, each connection resuming the previous one's session
#               ticket (K1 and K2 both open with one full handshake, so the
#               difference is resumed connections only)
#   stream100   the sim's 100-token stream, gap 10 ms, kept alive (event; the
#               sim's events, counted once on the sim directly)
# Prints one line per proxy and workload,
#   CG proxy=P workload=W unit=U ir_per_unit=N ir_k1=N ir_k2=N units=N ...
# (or error=WHY), then the tables, with the goals, and for tokentap's rows
# that miss their goal (COST_PROFILE=0: none, =all: every row) its functions'
# self Ir per unit
# (K2's profile minus K1's, callgrind_annotate).
# Knobs: COST_PROXIES ("tt ttnorec nginx haproxy"), COST_WORKLOADS ("ka-stream
# ka-json conn tls-full tls-resume stream100 shadow"), COST_K1 (2), COST_K2
# (32; many units, so that a read more or less in one of them, as timing
# has it, weighs little), COST_STREAM_K2 (8, for stream100), COST_KEEP=1 keeps the temp dir; CG_REP and CG_CLEARS as in
# bench/callgrind.sh.
set -u

R=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/cg_lib.sh
. "$R/bench/cg_lib.sh"

# ---- the tables, from CG lines (also bench/run.sh's summary) -----------------
summary() { # FILE...
    awk '
function f(x,   s, neg, out) {
    if (x == "") return "-"
    s = sprintf("%.0f", x); neg = ""; out = ""
    if (s ~ /^-/) { neg = "-"; s = substr(s, 2) }
    while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
    return neg s out
}
function v(p, w) { return ((p SUBSEP w) in ir) ? ir[p, w] : "" }
function d(a, b) { return (a == "" || b == "") ? "" : a - b }
# a cell: the figure, "n/a" when the proxy could not be counted (see below), or "-"
function cell(p, w, x) { if (x != "") return f(x); if ((p SUBSEP w) in err || (p SUBSEP "all") in err) return "n/a"; return "-" }
# a row; W: the workload whose errors show as n/a; LIM: tokentap / nginx at most
function row(name, unit, w, a, b, c, e, goal, lim,   r, met) {
    r = (a != "" && c != "" && c > 0) ? sprintf("%.2f", a / c) : "-"
    met = (r == "-" || lim == "") ? "-" : (a / c <= lim ? "yes" : "NO")
    printf "| %-46s | %-11s | %10s | %10s | %10s | %10s | %6s | %-16s | %-4s |\n", name, unit, cell("tt", w, a),
        cell("ttnorec", w, b), cell("nginx", w, c), cell("haproxy", w, e), r, goal, met
    if (met == "NO") unmet[++nunmet] = name
}
{
    p = ""; w = ""; x = ""
    for (i = 1; i <= NF; i++) { eq = index($i, "="); if (!eq) continue; k = substr($i, 1, eq - 1); val = substr($i, eq + 1)
        if (k == "proxy") p = val; else if (k == "workload") w = val; else if (k == "ir_per_unit") x = val
        else if (k == "error") e = val; else if (k == "tls") tls[p] = val; else if (k == "resumed") res[p, w] = val }
    if (p == "" || w == "") next
    if ($0 ~ / error=/) { err[p, w] = 1; sub(/.* error=/, ""); why[p, w] = $0; next }
    if (x != "") ir[p, w] = x
}
END {
    P["tt"] = "tokentap"; P["ttnorec"] = "tt no rec"; P["nginx"] = "nginx"; P["haproxy"] = "HAProxy"
    printf "\nCost per unit, callgrind instructions (Ir, user space), K1 vs K2 units; tokentap = records and SLOs on\n"
    printf "| %-46s | %-11s | %10s | %10s | %10s | %10s | %6s | %-16s | %-4s |\n", "workload", "unit", "tokentap", "tt no rec", "nginx", "HAProxy", "tt/ngx", "goal", "met?"
    printf "|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", "------------------------------------------------", "-------------", "------------", "------------", "------------", "------------", "--------", "------------------", "------"
    split("tt ttnorec nginx haproxy", PS, " ")
    for (i = 1; i <= 4; i++) { p = PS[i]
        ac[p] = d(v(p, "conn"), v(p, "ka-stream")); hf[p] = d(v(p, "tls-full"), v(p, "conn")); hr[p] = d(v(p, "tls-resume"), v(p, "conn")) }
    row("one-token stream, kept alive", "request", "ka-stream", v("tt", "ka-stream"), v("ttnorec", "ka-stream"), v("nginx", "ka-stream"), v("haproxy", "ka-stream"), "<= nginx", 1)
    row("non-streaming JSON, kept alive", "request", "ka-json", v("tt", "ka-json"), v("ttnorec", "ka-json"), v("nginx", "ka-json"), v("haproxy", "ka-json"), "<= nginx", 1)
    row("connection + one-token request (plain)", "connection", "conn", v("tt", "conn"), v("ttnorec", "conn"), v("nginx", "conn"), v("haproxy", "conn"), "", "")
    row("  accept + close (= conn - kept-alive request)", "connection", "conn", ac["tt"], ac["ttnorec"], ac["nginx"], ac["haproxy"], "<= 1.5 x nginx", 1.5)
    row("TLS connection + request, full handshake", "connection", "tls-full", v("tt", "tls-full"), v("ttnorec", "tls-full"), v("nginx", "tls-full"), v("haproxy", "tls-full"), "", "")
    row("  full handshake (= TLS conn - plain conn)", "handshake", "tls-full", hf["tt"], hf["ttnorec"], hf["nginx"], hf["haproxy"], "<= 1.1 x nginx", 1.1)
    row("TLS connection + request, resumed (ticket)", "connection", "tls-resume", v("tt", "tls-resume"), v("ttnorec", "tls-resume"), v("nginx", "tls-resume"), v("haproxy", "tls-resume"), "", "")
    row("  resumed handshake (= TLS conn - plain conn)", "handshake", "tls-resume", hr["tt"], hr["ttnorec"], hr["nginx"], hr["haproxy"], "<= 1.1 x nginx", 1.1)
    row("100-token stream, gap 10 ms, kept alive", "event", "stream100", v("tt", "stream100"), v("ttnorec", "stream100"), v("nginx", "stream100"), v("haproxy", "stream100"), "", "")
    row("  the same, one shadow (tokentap column)", "prim. event", "stream100", v("ttshadow", "stream100"), "", v("nginx", "stream100"), v("haproxy", "stream100"), "", "")
    sh = d(v("ttshadow", "stream100"), v("tt", "stream100")); base = v("tt", "stream100"); ng = v("nginx", "stream100")
    pct = (sh != "" && base > 0) ? sprintf("%+.1f %%", 100 * sh / base) : "-"
    met = (sh != "" && base > 0) ? (sh / base <= 0.25 ? "yes" : "NO") : "-"
    printf "| %-46s | %-11s | %10s | %10s | %10s | %10s | %6s | %-16s | %-4s |\n", "  shadow added (tt/ngx column: share of tt)", "prim. event", f(sh), "-", "-", "-", pct, "<= +25 % of tt", met
    if (met == "NO") unmet[++nunmet] = "shadow"
    if (sh != "" && ng > 0)
        printf "(shadow added = %+.1f %% of nginx per event; tokentap with the shadow = %.2f x nginx per event)\n", 100 * sh / ng, v("ttshadow", "stream100") / ng
    printf "(tt/ngx: tokentap / nginx; handshake rows: the TLS connection less the plain one, both with the same one-token request)\n"
    for (k in err) { split(k, q, SUBSEP); printf "not counted: %s %s: %s\n", q[1], q[2], why[q[1], q[2]] }
    for (k in res) { split(k, q, SUBSEP); split(res[k], rr, "/"); if (q[2] == "tls-resume" && rr[1] != rr[2]) printf "warning: %s %s resumed %s sessions\n", q[1], q[2], res[k] }
    for (p in tls) printf "TLS negotiated with %s: %s\n", P[p] != "" ? P[p] : p, tls[p]
    for (i = 1; i <= nunmet; i++) printf "goal not met: %s\n", unmet[i]
}' "$@"
}

if [ "${1:-}" = --summary ]; then
    shift
    summary "$@"
    exit
fi

cg_binaries "$@"
K1=${COST_K1:-2}
K2=${COST_K2:-32}
SK2=${COST_STREAM_K2:-8}
PROXIES=${COST_PROXIES:-tt ttnorec nginx haproxy}
WORKLOADS=" ${COST_WORKLOADS:-ka-stream ka-json conn tls-full tls-resume stream100 shadow} "
GOODPUT="ttft:500 itl:50"
for f in "$TT" "$B/tokentap-sim"; do
    [ -x "$f" ] || { echo "cost: $f missing (run make first)" >&2; exit 1; }
done
cg_setup

T=$(mktemp -d /tmp/tokentap-cost.XXXXXX)
SIMPID=""
trap '[ -n "$SIMPID" ] && kill "$SIMPID" 2>/dev/null; [ -n "${COST_KEEP:-}" ] || rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
L=$T/sse_load C=$T/tls_conns
cc -O2 -Wall -o "$L" "$R/bench/sse_load.c" -lm || exit 1
cc -O2 -Wall -o "$C" "$R/bench/tls_conns.c" -lssl -lcrypto || exit 1
# a P-256 ECDSA test certificate (HAProxy wants certificate and key in one file)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$T/key.pem" \
    -out "$T/cert.pem" -days 2 -subj /CN=localhost >"$T/openssl.log" 2>&1 || { cat "$T/openssl.log" >&2; exit 1; }
cat "$T/cert.pem" "$T/key.pem" >"$T/both.pem"

"$B/tokentap-sim" --listen 127.0.0.1:0 --ready-file "$T/sim.ready" >"$T/sim.out" 2>&1 &
SIMPID=$!
SIM=$("$L" --wait-ready "$T/sim.ready" "$SIMPID") || exit 1

MSG='"messages":[{"role":"user","content":"hi"}]'
printf '{"model":"m","stream":true,%s,"stream_options":{"include_usage":true},"sim":{"ttft_ms":5,"tokens":1,"gap_ms":10}}' "$MSG" >"$T/stream1.json"
printf '{"model":"m","stream":false,%s,"sim":{"ttft_ms":5,"tokens":1,"gap_ms":10}}' "$MSG" >"$T/json.json"
printf '{"model":"m","stream":true,%s,"stream_options":{"include_usage":true},"sim":{"ttft_ms":5,"tokens":100,"gap_ms":10}}' "$MSG" >"$T/stream100.json"
# the sim's events per 100-token request (the per-event denominator for all)
EVREQ=$(curl -sN -H 'Content-Type: application/json' --data "@$T/stream100.json" \
    "http://127.0.0.1:$SIM/v1/chat/completions" | grep -c '^data:')

# start PROXY DIR TLS(0/1): the proxy under callgrind; sets VP and PORT
start() {
    p=$1 d=$2 tls=$3
    case $p in
    tt|ttnorec|ttshadow)
        set --
        [ "$p" = ttnorec ] || set -- "$@" --record "$d/rec.jsonl"
        [ "$p" = ttshadow ] && set -- "$@" --shadow "cand=http://127.0.0.1:$SIM"
        [ "$tls" = 1 ] && set -- "$@" --tls-cert "$T/cert.pem" --tls-key "$T/key.pem"
        # shellcheck disable=SC2086
        valgrind --tool=callgrind --callgrind-out-file="$d/cg.%p" $TOGGLE \
            "$TT" --listen 127.0.0.1:0 --ready-file "$d/ready" --upstream "http://127.0.0.1:$SIM" \
            --admin off --log-level warn --goodput "$GOODPUT" "$@" >"$d/log" 2>&1 &
        VP=$!
        PORT=$("$L" --wait-ready "$d/ready" "$VP") ;;
    nginx)
        listen="127.0.0.1:@PORT@" ssl=""
        if [ "$tls" = 1 ]; then
            listen="$listen ssl"
            ssl="ssl_certificate $T/cert.pem; ssl_certificate_key $T/key.pem; ssl_protocols TLSv1.3; ssl_session_tickets on;"
        fi
        CG_NGINX_MASTER=on cg_nginx_conf "$d/nginx.conf.in" "$d" "$listen" "$SIM" "$ssl"
        "$L" --listen-exec "$d/port" sh -c 'sed "s/@PORT@/$LISTEN_PORT/" "$1.in" >"$1" &&
            NGINX="3;" exec valgrind --tool=callgrind --callgrind-out-file="$2/cg.%p" \
                nginx -p "$2" -e "$2/error.log" -c "$1"' sh "$d/nginx.conf" "$d" >"$d/log" 2>&1 &
        VP=$!
        PORT=$("$L" --wait-ready "$d/port" "$VP") ;;
    haproxy)
        bind="fd@3"
        [ "$tls" = 1 ] && bind="$bind ssl crt $T/both.pem ssl-min-ver TLSv1.3"
        haproxy_conf "$d/haproxy.cfg" "$bind" "$SIM" 100
        "$L" --listen-exec "$d/port" valgrind --tool=callgrind --callgrind-out-file="$d/cg.%p" \
            haproxy -db -f "$d/haproxy.cfg" >"$d/log" 2>&1 &
        VP=$!
        PORT=$("$L" --wait-ready "$d/port" "$VP") ;;
    esac
}

# count PROXY WORKLOAD K: one run; "$d/result" gets "IR" or "error=WHY"
count() {
    p=$1 w=$2 k=$3 d=$T/$1.$2.$3
    mkdir -p "$d"
    case $w in
    ka-stream) set -- --requests "$k" --body "$T/stream1.json" ;;
    ka-json)   set -- --requests "$k" --body "$T/json.json" ;;
    conn)      set -- --conns "$k" --body "$T/stream1.json" ;;
    tls-full)  set -- --tls --conns "$k" --body "$T/stream1.json" ;;
    tls-resume) set -- --tls --resume --conns "$k" --body "$T/stream1.json" ;;
    stream100) set -- --requests "$k" --body "$T/stream100.json" ;;
    esac
    tls=0; case $w in tls-*) tls=1 ;; esac
    if ! start "$p" "$d" "$tls"; then
        echo "error=did_not_start" >"$d/result"
        tail -5 "$d/log" "$d/error.log" 2>/dev/null >&2
        kill "$VP" 2>/dev/null; wait "$VP" 2>/dev/null
        return
    fi
    ok=1
    timeout 300 "$C" --connect "127.0.0.1:$PORT" "$@" >"$d/client" 2>"$d/client.err" || ok=0
    # each one's graceful stop (HAProxy's soft stop: it exits once idle)
    case $p in nginx) kill -QUIT "$VP" ;; haproxy) kill -USR1 "$VP" ;; *) kill -TERM "$VP" ;; esac
    wait "$VP"
    if [ $ok = 0 ]; then
        echo "error=client_failed:$(head -c 100 "$d/client.err" | tr -c 'A-Za-z0-9_.:-' _)" >"$d/result"
        sed 's/^/  /' "$d/client.err" >&2; tail -5 "$d/log" "$d/error.log" 2>/dev/null >&2
        return
    fi
    echo "$(cg_ir "$d"/cg.*) $(sed -n 's/.*resumed=\([0-9]*\).*cipher=\([^ ]*\) group=\([^ ]*\).*/\1 \2\/\3/p' "$d/client")" >"$d/result"
}

# workload PROXY WORKLOAD: K1 and K2 runs, one CG line
workload() {
    p=$1 w=$2 k2=$K2
    [ "$w" = stream100 ] && k2=$SK2
    printf '  %-9s %-11s ... ' "$p" "$w" >&2
    count "$p" "$w" "$K1"; count "$p" "$w" "$k2"
    r1=$(cat "$T/$p.$w.$K1/result") r2=$(cat "$T/$p.$w.$k2/result")
    case "$r1 $r2" in
    *error=*) e=$(echo "$r1 $r2" | sed 's/.*error=\([^ ]*\).*/\1/')
        echo "CG proxy=$p workload=$w error=$e" | tee -a "$T/cg.txt"; echo "error" >&2; return ;;
    esac
    unit=request n=$((k2 - K1))
    case $w in conn|tls-*) unit=connection ;; stream100) unit=event n=$(((k2 - K1) * EVREQ)) ;; esac
    echo "$r1 $r2" | awk -v p="$p" -v w="$w" -v u="$unit" -v n="$n" -v k1="$K1" -v k2="$k2" '{
        printf "CG proxy=%s workload=%s unit=%s ir_per_unit=%.0f ir_k1=%s ir_k2=%s units=%d k1=%d k2=%d", p, w, u, ($4 - $1) / n, $1, $4, n, k1, k2
        if (w ~ /^tls/) printf " resumed=%d/%d tls=%s", $5 - $2, k2 - k1, $6
        printf "\n" }' | tee -a "$T/cg.txt"
    sed -n 's/.* ir_per_unit=\([0-9]*\).*/\1/p' "$T/cg.txt" | tail -1 >&2
}

: >"$T/cg.txt"
echo "cost: K1=$K1 K2=$K2 (stream100: $SK2), the sim's stream100 has $EVREQ events a request" >&2
for p in $PROXIES; do
    if [ "$p" = nginx ] && ! command -v nginx >/dev/null 2>&1; then
        echo "CG proxy=nginx workload=all error=nginx_missing(sh_scripts/deps.sh_bench)" | tee -a "$T/cg.txt"; continue
    fi
    if [ "$p" = haproxy ] && ! command -v haproxy >/dev/null 2>&1; then
        echo "CG proxy=haproxy workload=all error=haproxy_missing(sh_scripts/deps.sh_bench)" | tee -a "$T/cg.txt"; continue
    fi
    for w in ka-stream ka-json conn tls-full tls-resume stream100; do
        case $WORKLOADS in *" $w "*) workload "$p" "$w" ;; esac
    done
done
case $WORKLOADS in *" shadow "*) case " $PROXIES " in *" tt "*) workload ttshadow stream100 ;; esac ;; esac

summary "$T/cg.txt" | tee "$T/summary.txt"

# where tokentap's instructions go, per unit, for the rows that miss their
# goal: each function's self Ir in the K2 run less the K1 run, over the units
# (for accept + close: the connection's less the kept-alive request's)
prof() { # PROXY WORKLOAD UNITS -> "IR FUNCTION" per unit (PROF_INC=yes: inclusive)
    k2=$K2; [ "$2" = stream100 ] && k2=$SK2
    for k in "$K1" "$k2"; do
        callgrind_annotate --inclusive="${PROF_INC:-no}" --auto=no --threshold=100 "$T/$1.$2.$k"/cg.* 2>/dev/null |
            awk -v k="$k" '/PROGRAM TOTALS|events annotated/ { next }
                $1 ~ /^[0-9,]+$/ { n = $1; gsub(/,/, "", n); $1 = ""; sub(/^ *\([^)]*\) */, ""); print k, n, $0 }'
    done | awk -v k1="$K1" -v u="$3" '{ k = $1; n = $2; $1 = ""; $2 = ""; sub(/^ +/, ""); s[$0] += (k == k1 ? -n : n) }
        END { for (f in s) printf "%.1f %s\n", s[f] / u, f }' |
        sed 's| \[[^]]*/\([^]/]*\)\]$| [\1]|'     # objects by their file name
}
profile() { # TITLE WORKLOAD UNITS [MINUS-WORKLOAD]
    [ "${COST_PROFILE:-1}" != 0 ] && [ -d "$T/tt.$2.$K2" ] || return 0
    prof tt "$2" "$3" >"$T/prof.a"
    if [ -n "${4:-}" ]; then prof tt "$4" "$((K2 - K1))" | awk '{ $1 = -$1; print }' >>"$T/prof.a"; fi
    echo
    echo "tokentap, $1: self Ir per unit by function (top 25; K2 run less K1 run)"
    awk '{ n = $1; $1 = ""; s[$0] += n } END { for (f in s) if (s[f] >= 0.5 || s[f] <= -0.5) printf "%10.0f %s\n", s[f], f }' "$T/prof.a" |
        sort -k1,1nr | head -25
}
# parts TITLE WORKLOAD: a request's instructions by what they are for, from
# the inclusive counts of the functions each part enters through (each
# counted once however deep it recurses); "forwarding" is what is left:
# accepting the request, parsing both heads, the upstream pool, reading
# and writing the bytes, the event loop
parts() {
    [ "${COST_PROFILE:-1}" != 0 ] && [ -d "$T/tt.$2.$K2" ] || return 0
    # "i COUNT FUNCTION" inclusive, "s COUNT FUNCTION" self
    { PROF_INC=yes prof tt "$2" "$((K2 - K1))" | sed 's/^/i /'
      prof tt "$2" "$((K2 - K1))" | sed 's/^/s /'; } >"$T/prof.i"
    echo
    echo "tokentap, $1: instructions per request by part"
    awk -v total="$(sed -n "s/^CG proxy=tt workload=$2 .*ir_per_unit=\([0-9]*\).*/\1/p" "$T/cg.txt" | head -n 1)" '
        # a part is the inclusive counts (i) of the functions it enters
        # through, or, where those also run other parts (the watch
        # callback writes the records that waited for an acknowledgement),
        # the self counts (s) of its own functions
        function part(name, kind, re) { names[++n] = name; kinds[n] = kind; pat[n] = re }
        BEGIN {
            part("request inspection (the body read for model, stream, max tokens)", "i", ":tt_inspect_finish$")
            part("decoding the response (framing, JSON, the think filter)", "i", ":tt_stream_(feed|end)$")
            part("the clock: metrics from the timestamps", "i", ":tt_metrics_compute$")
            part("SLO judgement", "i", ":tt_slo_judge$")
            part("aggregation (histograms, windows, /stats, recent requests)", "i", ":tt_agg_observe_at$")
            part("the record (JSON formatting)", "i", ":tt_record_format$")
            part("handing the record to the writer thread", "i", ":tt_recorder_submit$")
            part("delivery (delivery.c, the watch callback; self counts)", "s",
                 "(/delivery\\.c:|conn\\.c:(watch_cb|acking_done)$)")
        }
        # callgrind_annotate lists a function twice, once with its object
        # ([tokentap]) and once by file path: the first kind only, and each
        # function once, its largest line
        $0 !~ / \[[^]]*\]$/ { next }
        { kind = $1; c = $2; f = $0; sub(/^[^ ]+ [^ ]+ /, "", f); sub(/ \[[^]]*\]$/, "", f)
          for (i = 1; i <= n; i++)
              if (kind == kinds[i] && f ~ pat[i] && (!((i, f) in m) || c > m[i, f])) m[i, f] = c }
        END {
            for (k in m) { split(k, ix, SUBSEP); v[ix[1]] += m[k] }
            # a part none of whose functions was seen (renamed, inlined):
            # said, not silently counted as forwarding
            for (k in m) { split(k, ix, SUBSEP); found[ix[1]] = 1 }
            for (i = 1; i <= n; i++) {
                printf "%10.0f  %s%s\n", v[i], names[i], (i in found) ? "" : " (no such function in the profile)"
                sum += v[i] }
            if (total > 0) printf "%10.0f  forwarding and the rest (the total less the parts)\n%10.0f  total\n", total - sum, total
        }' "$T/prof.i"
}
# want ROW: print the profile of ROW (COST_PROFILE=all: of every row)
want() { [ "${COST_PROFILE:-1}" = all ] || grep -q "^goal not met: $1" "$T/summary.txt"; }
want 'one-token stream' && { profile "one-token stream, kept alive, per request" ka-stream "$((K2 - K1))"
    parts "one-token stream, kept alive" ka-stream; }
want 'non-streaming JSON' && { profile "non-streaming JSON, kept alive, per request" ka-json "$((K2 - K1))"
    parts "non-streaming JSON, kept alive" ka-json; }
want '  accept' && profile "accept + close, per connection" conn "$((K2 - K1))" ka-stream
want '  full handshake' && profile "TLS full handshake (TLS connection less plain)" tls-full "$((K2 - K1))" conn
want '  resumed handshake' && profile "TLS resumed handshake (TLS connection less plain)" tls-resume "$((K2 - K1))" conn
want shadow && [ -d "$T/ttshadow.stream100.$SK2" ] && {
    prof ttshadow stream100 "$(((SK2 - K1) * EVREQ))" >"$T/prof.s"
    prof tt stream100 "$(((SK2 - K1) * EVREQ))" | awk '{ $1 = -$1; print }' >>"$T/prof.s"
    echo; echo "tokentap, the shadow's added self Ir per primary event by function (top 25)"
    awk '{ n = $1; $1 = ""; s[$0] += n } END { for (f in s) if (s[f] >= 0.5 || s[f] <= -0.5) printf "%10.1f %s\n", s[f], f }' "$T/prof.s" |
        sort -k1,1nr | head -25
}
exit 0
