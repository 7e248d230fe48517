"""SLOs and goodput (SPEC 6): who is good, how /metrics, /stats and the
records count it, per-model SLOs, SIGHUP reload, and bad specs."""
import os
import re
import socket
import threading
import time

import harness
from harness import chat_body

TTFT_SLO = "time_to_first_token:200"


def parallel(fns):
    """run the callables concurrently; their results in order (re-raises)"""
    out = [None] * len(fns)
    errs = []

    def run(i, f):
        try:
            out[i] = f()
        except Exception as e:      # reported below, on the test's thread
            errs.append(e)
    ths = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(fns)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    if errs:
        raise errs[0]
    return out


def stream(px, ttft_ms, tokens=4, model="sim-model", **sim):
    sim.update({"ttft_ms": ttft_ms, "tokens": tokens, "gap_ms": 5})
    return lambda: px.post("/v1/chat/completions", chat_body(sim, model=model))


def scrape(t, px):
    r = harness.http(px.admin_port, "GET", "/metrics")
    t.eq(r.status, 200, "GET /metrics status")
    return r.body.decode()


def rounded(n, d):
    """how far n / d may be from a /stats rate over duration_s d, both
    rounded to 3 decimals (0.0005 each)"""
    return 5e-4 + n * 5e-4 / (d * (d - 5e-4)) + 1e-9


def stats(t, px):
    r = harness.http(px.admin_port, "GET", "/stats")
    t.eq(r.status, 200, "GET /stats status")
    return r.json()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text, name):
    """[(labels dict, value)] of the samples named <name> in a scrape"""
    out = []
    for ln in text.splitlines():
        m = SAMPLE.match(ln)
        if m and m.group(1) == name:
            out.append((dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def total(text, name, **match):
    return sum(v for lb, v in samples(text, name)
               if all(lb.get(k) == w for k, w in match.items()))


def slo_of(rec):
    return rec["metadata"].get("slo") or {}


def test_goodput_seven_of_ten(t):
    """ten streams, three with TTFT 400 ms over a 200 ms SLO: /metrics says
    7 good of 10, /stats good_request_fraction 0.7 and goodput = 7 /
    duration_s, and the records' slo.good agree"""
    sim = t.sim()
    launched = time.monotonic()
    px = t.proxy(sim.url, admin="auto", extra=["--goodput", TTFT_SLO])
    ready = time.monotonic()
    rs = parallel([stream(px, 400 if i % 3 == 0 and i < 9 else 50) for i in range(10)])
    t.eq([r.status for r in rs], [200] * 10, "statuses")

    recs = px.records(10)
    t.eq(sum(1 for r in recs if slo_of(r).get("good") is True), 7, "records with slo.good")
    for r in recs:
        ttft = harness.metric(r, "time_to_first_token")
        bad = ttft > 200
        t.eq(slo_of(r).get("good"), not bad, f"slo.good of a request with TTFT {ttft:.1f} ms")
        t.eq(slo_of(r).get("violations"), ["time_to_first_token"] if bad else [],
             f"slo.violations (TTFT {ttft:.1f} ms)")

    m = scrape(t, px)
    t.eq(total(m, "tokentap_good_requests_total"), 7, "tokentap_good_requests_total")
    t.eq(total(m, "tokentap_requests_total", outcome="ok"), 10, "requests_total{outcome=ok}")
    t.eq(total(m, "tokentap_requests_total"), 10, "requests_total, all outcomes")
    t.eq(total(m, "tokentap_slo_violations_total", metric="time_to_first_token"), 3,
         "slo_violations_total{metric=time_to_first_token}")
    att = dict((lb["window"], v) for lb, v in samples(m, "tokentap_slo_attainment_ratio"))
    for w in ("1m", "5m", "1h"):
        t.near(att.get(w), 0.7, 1e-9, f"tokentap_slo_attainment_ratio{{window={w}}}")

    before = time.monotonic()
    st = stats(t, px)
    after = time.monotonic()
    t.eq(st.get("slo_configured"), True, "/stats slo_configured")
    for name in ("total", "1m", "5m", "1h"):
        w = st["windows"][name]
        d = w["duration_s"]
        # the aggregator starts before the listener accepts and ends at the query
        # (/stats rounds to 3 decimals: 0.0005 either way)
        t.check(before - ready - 5e-4 <= d <= after - launched + 5e-4,
                f"window {name}: duration_s {d} outside [{before - ready:.3f}, "
                f"{after - launched:.3f}] (time since start)")
        t.eq(w["requests"], {"ok": 10, "error": 0, "cancelled": 0, "total": 10},
             f"window {name} requests")
        t.eq(w["good_requests"], 7, f"window {name} good_requests")
        t.near(w["good_request_fraction"], 0.7, 1e-12, f"window {name} good_request_fraction")
        t.near(w["slo_attainment"], 0.7, 1e-12, f"window {name} slo_attainment")
        t.near(w["goodput"], 7 / d, rounded(7, d), f"window {name} goodput = 7 / duration_s")
        t.near(w["request_throughput"], 10 / d, rounded(10, d),
               f"window {name} request_throughput = 10 / duration_s")
    # every window is still younger than its length: all cover the uptime
    t.near(st["windows"]["total"]["duration_s"], st["uptime_s"], 1e-3,
           "total window duration_s vs uptime_s")


def cancelled(px):
    """a stream whose client goes away before the first token"""
    c = px.conn()
    c.send(harness.build_request("POST", "/v1/chat/completions",
                                 chat_body({"ttft_ms": 3000, "tokens": 4})))
    time.sleep(0.3)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    c.close()


def test_errors_and_cancellations_stay_in_denominator(t):
    """7 good + 3 slow + one HTTP 500 + one cancelled: good_request_fraction
    = 7/12, good_requests_total 7, the error and the cancellation are
    counted and judged not good"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--goodput", TTFT_SLO])
    fns = [stream(px, 400 if i < 3 else 50) for i in range(10)]
    fns.append(stream(px, 50, status=500))
    fns.append(lambda: cancelled(px))
    rs = parallel(fns)
    t.eq(sorted(r.status for r in rs[:11]), [200] * 10 + [500], "statuses")

    recs = px.records(12)
    t.eq(sum(1 for r in recs if slo_of(r).get("good") is True), 7, "records with slo.good")
    errs = [r for r in recs if r.get("error")]
    t.eq(sorted(r["error"]["code"] for r in errs), [499, 500], "error codes of the records")
    for r in errs:
        t.eq(slo_of(r).get("good"), False, f"slo.good of the {r['error']['code']} record")
    t.eq([r["metadata"]["was_cancelled"] for r in errs if r["error"]["code"] == 499], [True],
         "was_cancelled of the 499 record")

    m = scrape(t, px)
    t.eq(total(m, "tokentap_good_requests_total"), 7, "tokentap_good_requests_total")
    t.eq(total(m, "tokentap_requests_total", outcome="ok"), 10, "requests_total{outcome=ok}")
    t.eq(total(m, "tokentap_requests_total", outcome="error"), 1, "requests_total{outcome=error}")
    t.eq(total(m, "tokentap_requests_total", outcome="cancelled"), 1,
         "requests_total{outcome=cancelled}")
    st = stats(t, px)
    w = st["windows"]["total"]
    t.eq(w["requests"], {"ok": 10, "error": 1, "cancelled": 1, "total": 12}, "/stats requests")
    t.near(w["good_request_fraction"], 7 / 12, 5e-4, "good_request_fraction = 7 / (10 + 2)")
    t.near(w["goodput"], 7 / w["duration_s"], rounded(7, w["duration_s"]),
           "goodput = 7 / duration_s")
    t.near(w["request_throughput"], 10 / w["duration_s"], rounded(10, w["duration_s"]),
           "request_throughput = 10 valid / duration_s")


def test_missing_itl_makes_one_token_answer_not_good(t):
    """--goodput inter_token_latency:50: a one-token answer has no ITL and
    is not good; a five-token answer with 5 ms gaps is"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--goodput", "inter_token_latency:50"])
    r1 = stream(px, 20, tokens=1)()
    r5 = stream(px, 20, tokens=5)()
    t.eq((r1.status, r5.status), (200, 200), "statuses")
    one, five = px.records(2)
    t.eq(harness.metric(one, "inter_token_latency"), None, "ITL of a one-token answer")
    t.eq(harness.metric(one, "output_sequence_length"), 1, "OSL of the one-token answer")
    t.eq(slo_of(one), {"good": False, "violations": ["inter_token_latency"]},
         "slo of the one-token answer")
    t.eq(slo_of(five), {"good": True, "violations": []}, "slo of the five-token answer")
    m = scrape(t, px)
    t.eq(total(m, "tokentap_good_requests_total"), 1, "tokentap_good_requests_total")
    t.eq(total(m, "tokentap_slo_violations_total", metric="inter_token_latency"), 1,
         "slo_violations_total{metric=inter_token_latency}")


def test_missing_ttft_makes_non_streaming_not_good(t):
    """a TTFT SLO judges a non-streaming request not good: it has no TTFT,
    however fast it was; its request_latency is still recorded"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--goodput", "ttft:1000 e2el:5000"])
    r = px.post("/v1/chat/completions", chat_body({"ttft_ms": 10, "tokens": 3}, stream=False))
    t.eq(r.status, 200, "status")
    rec = px.records(1)[0]
    t.eq(rec["metadata"]["stream"], False, "metadata.stream")
    t.eq(harness.metric(rec, "time_to_first_token"), None, "TTFT of a non-streaming request")
    t.check(harness.metric(rec, "request_latency") is not None, "request_latency recorded")
    t.eq(slo_of(rec), {"good": False, "violations": ["time_to_first_token"]}, "slo")
    m = scrape(t, px)
    t.eq(total(m, "tokentap_good_requests_total"), 0, "tokentap_good_requests_total")
    t.eq(total(m, "tokentap_requests_total", outcome="ok"), 1, "the request is ok, not an error")


def test_per_model_slo_sections(t):
    """[slo.MODEL] replaces [slo] for that exact model name"""
    sim = t.sim()
    conf = os.path.join(t.tmp, "tokentap.conf")
    with open(conf, "w") as f:
        f.write("[slo]\ngoodput = ttft:1000\n\n[slo.strict/model-1]\ngoodput = ttft:10\n")
    px = t.proxy(sim.url, admin="auto", extra=["--config", conf])
    for model in ("lax", "strict/model-1", "strict/model-1x"):
        t.eq(stream(px, 50, model=model)().status, 200, f"status ({model})")
    recs = {r["metadata"]["model"]: r for r in px.records(3)}
    t.eq(slo_of(recs["lax"]).get("good"), True, "lax model judged by [slo]")
    t.eq(slo_of(recs["strict/model-1"]),
         {"good": False, "violations": ["time_to_first_token"]}, "strict model by [slo.MODEL]")
    t.eq(slo_of(recs["strict/model-1x"]).get("good"), True, "a different name: [slo]")
    m = scrape(t, px)
    t.eq(total(m, "tokentap_good_requests_total", model="strict/model-1"), 0,
         "good requests of the strict model")
    t.eq(total(m, "tokentap_good_requests_total"), 2, "good requests in all")


def test_sighup_reloads_slo(t):
    """[slo] goodput rewritten from ttft:1000 to ttft:10 and SIGHUP: requests
    after the reload are judged by the new SLO, nothing is dropped"""
    sim = t.sim()
    conf = os.path.join(t.tmp, "tokentap.conf")
    with open(conf, "w") as f:
        f.write("[slo]\ngoodput = time_to_first_token:1000\n")
    px = t.proxy(sim.url, admin="auto", extra=["--config", conf])
    for _ in range(2):
        t.eq(stream(px, 50)().status, 200, "status before the reload")
    before = px.records(2)
    t.eq([slo_of(r).get("good") for r in before], [True, True], "slo.good before the reload")

    # a stream in flight across the reload keeps going
    slow = {}
    th = threading.Thread(target=lambda: slow.update(r=stream(px, 50, tokens=40)()))
    th.start()
    with open(conf + ".new", "w") as f:
        f.write("[slo]\ngoodput = time_to_first_token:10\n")
    os.replace(conf + ".new", conf)
    px.reload()
    t.check(b"reload: SLOs now" in px.stderr(), "the reload not logged")
    for _ in range(2):
        t.eq(stream(px, 50)().status, 200, "status after the reload")
    th.join()
    t.eq(slow["r"].status, 200, "status of the stream in flight")
    t.check(slow["r"].complete, "the stream in flight across SIGHUP completed")

    recs = px.records(5)
    after = [r for r in recs[2:] if harness.metric(r, "output_sequence_length") != 40]
    t.eq(len(after), 2, "records after the reload")
    for r in after:
        t.eq(slo_of(r), {"good": False, "violations": ["time_to_first_token"]},
             "slo of a request after the reload (TTFT 50 ms > 10 ms)")
    m = scrape(t, px)
    t.eq(total(m, "tokentap_requests_total"), 5, "requests_total")
    t.check(total(m, "tokentap_good_requests_total") in (2, 3),
            "good_requests_total: the two before the reload (+ the one in flight, "
            "judged when it ends)")


BAD_SPECS = [
    ("bogus:100", "unknown metric 'bogus'"),
    ("ttft:-5", "negative"),
    ("ttft:fast", "not a number"),
    ("ttft:100 time_to_first_token:200", "duplicate metric 'time_to_first_token'"),
    ("ttft", "missing value"),
]


def test_bad_goodput_exits_2(t):
    """a bad --goodput (unknown tag, negative, non-numeric, duplicate after
    aliases, missing value) stops start-up with exit 2 and one line naming
    the flag and the problem; the same in a config file names FILE:LINE"""
    binary = os.path.join(t.build, "tokentap")
    if not os.access(binary, os.X_OK):
        raise harness.Skip(f"{binary} not built")
    import subprocess
    for spec, why in BAD_SPECS:
        p = subprocess.run([binary, "--upstream", "http://127.0.0.1:9", "--admin", "off",
                            "--listen", "127.0.0.1:0", "--goodput", spec],
                           capture_output=True, timeout=10 * t.slow)
        err = p.stderr.decode("utf-8", "replace")
        t.eq(p.returncode, 2, f"exit status for --goodput {spec!r} (stderr {err!r})")
        lines = err.strip().splitlines()
        t.eq(len(lines), 1, f"stderr lines for --goodput {spec!r}: {err!r}")
        t.check("--goodput" in lines[0] and why in lines[0],
                f"--goodput {spec!r}: message {lines[0]!r} should name --goodput and {why!r}")
    conf = os.path.join(t.tmp, "bad.conf")
    with open(conf, "w") as f:
        f.write("[slo]\ngoodput = ttft:1\n\n[slo.m]\ngoodput = ttft:-1\n")
    p = subprocess.run([binary, "--config", conf, "--upstream", "http://127.0.0.1:9",
                        "--admin", "off"], capture_output=True, timeout=10 * t.slow)
    err = p.stderr.decode("utf-8", "replace")
    t.eq(p.returncode, 2, f"exit status for a bad [slo.m] goodput (stderr {err!r})")
    t.check(f"{conf}:5" in err and "negative" in err,
            f"config error should name {conf}:5 and the reason: {err!r}")
