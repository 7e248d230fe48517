"""/metrics (SPEC 7): valid exposition under load, a real Prometheus
scraping it with conf/prometheus/tokentap-rules.yml loaded, and the model
label cap.  promtool and prometheus come from the Debian package
"prometheus" (scripts/deps.sh); tests needing them SKIP when absent."""
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import harness
from harness import chat_body
from test_slo import parallel, samples, scrape, stream, total

RULES = os.path.join(harness.REPO, "conf", "prometheus", "tokentap-rules.yml")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? \S+$')


def need(tool):
    exe = shutil.which(tool) or (f"/usr/bin/{tool}" if os.access(f"/usr/bin/{tool}", os.X_OK)
                                 else None)
    if exe is None:
        raise harness.Skip(f"{tool} not installed (Debian package 'prometheus'; "
                           "scripts/deps.sh installs it)")
    return exe


def promtool_check(t, text, what):
    """`promtool check metrics` on <text>: no problem reported, exit 0"""
    p = subprocess.run([need("promtool"), "check", "metrics"], input=text.encode(),
                       capture_output=True, timeout=30 * t.slow)
    out = (p.stdout + p.stderr).decode("utf-8", "replace").strip()
    t.check(p.returncode == 0 and out == "",
            f"promtool check metrics on {what}: exit {p.returncode}: {out[:600]}")


def check_no_duplicates(t, text, what):
    seen = set()
    types = set()
    for ln in text.splitlines():
        if ln.startswith("# TYPE "):
            name = ln.split()[2]
            t.check(name not in types, f"{what}: family {name} typed twice")
            types.add(name)
            continue
        if ln.startswith("#") or not ln:
            continue
        m = SAMPLE.match(ln)
        t.check(m is not None, f"{what}: unparsable line {ln[:200]!r}")
        key = (m.group(1), m.group(2))
        t.check(key not in seen, f"{what}: duplicate series {ln[:200]!r}")
        seen.add(key)


def model_values(text):
    return {lb.get("model") for lb, _ in samples(text, "tokentap_requests_total")}


@harness.timeout(60)
def test_promtool_accepts_metrics_under_load(t):
    """50 models (--model-label-cap 64), 100 streams in flight while
    /metrics is scraped over and over: every scrape passes `promtool check metrics`, with no duplicate
    series, and the final one counts every request"""
    need("promtool")
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto",
                 extra=["--goodput", "ttft:100 itl:20", "--model-label-cap", "64"])
    models = [f"model-{i:02d}" for i in range(50)]
    models[7] = 'we"ird\\model\nname'           # escaping in label values
    models[8] = "caf\u00e9/\u6a21\u578b"            # UTF-8
    fns = [stream(px, 20 + 3 * (i % 50), tokens=30, model=models[i % 50],
                  reasoning_tokens=5 if i % 4 == 0 else 0)
           for i in range(100)]
    done = threading.Event()
    result = {}

    def load():
        try:
            result["rs"] = parallel(fns)
        finally:
            done.set()
    th = threading.Thread(target=load)
    th.start()
    scrapes, inflight_seen = 0, 0
    while not done.is_set() or scrapes < 3:
        text = scrape(t, px)
        check_no_duplicates(t, text, f"scrape {scrapes}")
        promtool_check(t, text, f"scrape {scrapes}")
        inflight_seen = max(inflight_seen, total(text, "tokentap_inflight_requests"))
        scrapes += 1
    th.join()
    t.eq([r.status for r in result["rs"]], [200] * 100, "statuses")
    text = scrape(t, px)
    promtool_check(t, text, "the final scrape")
    check_no_duplicates(t, text, "the final scrape")
    t.eq(total(text, "tokentap_requests_total", outcome="ok"), 100, "requests_total{ok}")
    t.eq(len(model_values(text)), 50, "distinct model label values")
    t.eq(total(text, "tokentap_inflight_requests"), 0, "inflight after the load")
    t.check(inflight_seen > 0, f"no scrape saw a request in flight ({scrapes} scrapes)")
    t.eq(total(text, "tokentap_tokens_total", type="reasoning"), 25 * 5, "reasoning tokens")
    t.note(f"{scrapes} scrapes, up to {inflight_seen:.0f} in flight")


def test_prometheus_rules_pass_promtool(t):
    """conf/prometheus: the rules pass `promtool check rules`, the sample
    config `promtool check config`, and the burn-rate unit tests
    `promtool test rules`"""
    promtool = need("promtool")
    conf = os.path.join(harness.REPO, "conf", "prometheus")
    for args in (["check", "rules", RULES],
                 ["check", "config", os.path.join(conf, "prometheus.yml")],
                 ["test", "rules", os.path.join(conf, "tests", "tokentap-rules.test.yml")]):
        p = subprocess.run([promtool, *args], capture_output=True, timeout=60 * t.slow,
                           cwd=conf)
        t.check(p.returncode == 0, f"promtool {' '.join(args[:2])}: exit {p.returncode}: "
                + (p.stdout + p.stderr).decode("utf-8", "replace")[-1500:])


class Prometheus:
    """a real prometheus on loopback, scraping <targets> every second"""

    def __init__(self, t, targets, rules=()):
        exe = need("prometheus")
        self.port = None
        d = os.path.join(t.tmp, "prom")
        os.makedirs(d)
        cfg = os.path.join(d, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "  evaluation_interval: 1s\n")
            if rules:
                f.write("rule_files:\n" + "".join(f"  - {r}\n" for r in rules))
            f.write("scrape_configs:\n  - job_name: tokentap\n    static_configs:\n"
                    "      - targets: [" + ", ".join(f"'{x}'" for x in targets) + "]\n")
        self.proc = harness.Proc(t, "prometheus", [
            exe, f"--config.file={cfg}", f"--storage.tsdb.path={os.path.join(d, 'data')}",
            "--web.listen-address=127.0.0.1:0", "--log.level=warn"])
        harness.wait_until(lambda: self._ready(), 20 * t.slow, 0.1, "prometheus to be ready")

    def _ready(self):
        # prometheus has no readiness notification: its port (bound as 0,
        # read from /proc) and then GET /-/ready are polled to a deadline
        if not self.proc.alive():
            raise harness.Failure("prometheus exited: "
                                  + self.proc.stderr()[-600:].decode("utf-8", "replace"))
        if self.port is None:
            ports = harness.listening_ports(self.proc.pid)
            if not ports:
                return False
            self.port = ports[0]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, q):
        """the instant vector of <q>: [(labels, float)]"""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        with urllib.request.urlopen(url, timeout=5) as r:
            j = json.loads(r.read())
        if j.get("status") != "success":
            raise harness.Failure(f"query {q!r}: {j}")
        return [(s["metric"], float(s["value"][1])) for s in j["data"]["result"]]

    def poll(self, t, q, pred, what, timeout=20):
        last = []

        def ok():
            nonlocal last
            last = self.query(q)
            return last if last and pred(last) else None
        try:
            return harness.wait_until(ok, timeout * t.slow, 0.25, what)
        except harness.Failure:
            raise harness.Failure(f"{what}: {q!r} last returned {last}")


def near(x, want, tol=1e-9):
    return abs(x - want) <= tol


@harness.timeout(90)
def test_prometheus_scrapes_attainment(t):
    """a real Prometheus scrapes the admin listener: the PromQL attainment
    sum(good)/sum(requests) is 0.7 after 7 good of 10, and the recording
    rules of conf/prometheus/tokentap-rules.yml load and evaluate (rate
    attainment 0.5 over 10 more requests, 5 of them good)"""
    need("prometheus")
    promtool = need("promtool")
    p = subprocess.run([promtool, "check", "rules", RULES], capture_output=True, timeout=30)
    t.check(p.returncode == 0, "promtool check rules: "
            + (p.stdout + p.stderr).decode("utf-8", "replace")[-600:])
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--goodput", "time_to_first_token:200"])
    rs = parallel([stream(px, 400 if i < 3 else 50) for i in range(10)])
    t.eq([r.status for r in rs], [200] * 10, "statuses")

    prom = Prometheus(t, [f"127.0.0.1:{px.admin_port}"], rules=[RULES])
    att = "sum(tokentap_good_requests_total) / sum(tokentap_requests_total)"
    v = prom.poll(t, att, lambda r: True, "a first scrape of tokentap")
    t.near(v[0][1], 0.7, 1e-12, att)
    up = prom.query('up{job="tokentap"}')
    t.eq([x[1] for x in up], [1.0], "up{job=tokentap}")

    # counters move between scrapes: the rate-based recording rules see it
    rs = parallel([stream(px, 400 if i < 5 else 50) for i in range(10)])
    t.eq([r.status for r in rs], [200] * 10, "statuses (second batch)")
    prom.poll(t, "sum(tokentap_requests_total)", lambda r: r[0][1] == 20,
              "a scrape after the second batch")
    v = prom.poll(t, att, lambda r: near(r[0][1], 12 / 20), "attainment 12/20")
    # rate() over the window: increase 5 good of 10 (both extrapolated alike)
    rec = prom.poll(t, 'tokentap:slo_attainment:ratio_rate5m{job="tokentap"}',
                    lambda r: near(r[0][1], 0.5, 0.02),
                    "the recording rule tokentap:slo_attainment:ratio_rate5m")
    t.note(f"rate attainment {rec[0][1]:.4f}")
    prom.poll(t, 'tokentap:slo_objective:ratio', lambda r: near(r[0][1], 0.99),
              "the objective constant")
    goodput = prom.poll(t, 'tokentap:goodput:rate5m{job="tokentap"}', lambda r: r[0][1] > 0,
                        "tokentap:goodput:rate5m")
    rules = prom.query('ALERTS{alertname=~"TokentapSLO.*"}')
    t.note(f"goodput rate {goodput[0][1]:.3f}/s; burn alerts now: "
           f"{sorted(set(a[0]['alertname'] for a in rules))}")


def many_models(px, n, threads=8):
    """<n> fast non-streaming requests, model-<i> each, on keep-alive conns"""
    per = (n + threads - 1) // threads

    def worker(k):
        c = px.conn()
        try:
            for i in range(k * per, min(n, (k + 1) * per)):
                body = chat_body({"ttft_ms": 0, "tokens": 1}, stream=False, model=f"model-{i}")
                r = c.request(harness.build_request("POST", "/v1/chat/completions", body))
                if r.status != 200:
                    raise harness.Failure(f"request {i}: status {r.status}")
        finally:
            c.close()
    parallel([lambda k=k: worker(k) for k in range(threads)])


def series_count(text):
    return sum(1 for ln in text.splitlines() if ln and not ln.startswith("#"))


@harness.timeout(90)
def test_model_label_cap_holds(t):
    """2000 requests with 2000 distinct model names: /metrics shows at most
    32 model values plus __other__, nothing is lost, and the series count
    stays what 33 label sets give"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", record=False)
    many_models(px, 40)
    small = scrape(t, px)
    per_set = (series_count(small) - series_count_unlabelled(small)) / 33
    many_models(px, 2000)
    text = scrape(t, px)
    vals = model_values(text)
    t.eq(len(vals), 33, "distinct model label values")
    t.check("__other__" in vals, "no __other__ model label")
    t.eq(total(text, "tokentap_requests_total", outcome="ok"), 2040, "requests_total, all")
    # the 32 named models are among the first 40, each sent twice
    t.eq(total(text, "tokentap_requests_total", model="__other__"), 2040 - 2 * 32,
         "requests_total{model=__other__}")
    t.eq(series_count(text), series_count(small), "series count after 2000 more models")
    t.check(per_set == int(per_set), f"series per label set {per_set} not whole")
    t.check(len(text) < 1 << 20, f"/metrics is {len(text)} bytes")
    promtool = shutil.which("promtool")
    if promtool:
        promtool_check(t, text, "the capped scrape")
    t.note(f"{series_count(text)} series, {len(text)} bytes")


def series_count_unlabelled(text):
    """series without a model label (build info, inflight, ...)"""
    n = 0
    for ln in text.splitlines():
        if ln and not ln.startswith("#") and 'model="' not in ln:
            n += 1
    return n


def test_model_label_cap_flag(t):
    """--model-label-cap 5: the first five models keep their name, the
    other fifteen share __other__ (first come, first named)"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", record=False, extra=["--model-label-cap", "5"])
    many_models(px, 20, threads=1)
    text = scrape(t, px)
    t.eq(model_values(text), {f"model-{i}" for i in range(5)} | {"__other__"},
         "model label values")
    t.eq(total(text, "tokentap_requests_total", model="__other__"), 15,
         "requests_total{model=__other__}")



class Float(str):
    """a float of a JSON text, as written"""


def floats(v, path="", skip=("record",)):
    """(path, text) of every float in a JSON value parsed with
    parse_float=Float, leaving out members named in <skip>"""
    if isinstance(v, Float):
        yield path, str(v)
    elif isinstance(v, dict):
        for k, x in v.items():
            if k not in skip:
                yield from floats(x, f"{path}.{k}", skip)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from floats(x, f"{path}[{i}]", skip)


def test_stats_floats_rounded(t):
    """every float /stats computes has at most 3 decimals (ms to the
    microsecond): windows, upstreams, SLOs and recent requests alike (the
    recent requests' "record" is the record line as written, not /stats')"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", record=False,
                 extra=["--goodput", "ttft:100 itl:20"])
    fns = [stream(px, 7 + i, tokens=13, gap_ms=3) for i in range(6)]
    rs = parallel(fns)
    t.eq([r.status for r in rs], [200] * 6, "statuses")
    time.sleep(1.1)                 # age_s and uptime_s off whole seconds
    r = harness.http(px.admin_port, "GET", "/stats")
    t.eq(r.status, 200, "GET /stats status")
    st = json.loads(r.body, parse_float=Float)
    found = list(floats(st))
    long = [(p, x) for p, x in found
            if "e" in x.lower() or len(x.partition(".")[2]) > 3]
    t.check(not long, f"floats with more than 3 decimals in /stats: {long[:8]}")
    t.check(len(found) > 20, f"only {len(found)} floats in /stats")
    t.check(any(p.startswith(".recent") for p, _ in found), "no float in recent")
