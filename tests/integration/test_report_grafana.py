"""conf/grafana/tokentap.json (docs/metrics.md, "Grafana dashboard"): every
PromQL expression of every panel is parsed by promtool and evaluated by
Prometheus's own rule engine against series captured from a live tokentap
under simulator traffic.

How (no ports): the test drives traffic through tokentap in two batches,
scrapes /metrics after each, and turns the two scrapes into `input_series`
of a `promtool test rules` file (samples one minute apart, with job and
instance labels as a scrape adds them).  conf/prometheus/tokentap-rules.yml
is loaded, so expressions over its recording rules see them evaluated.
Each dashboard expression E becomes a promql_expr_test of
`count(E) > bool 0` expecting 1 at the second sample: it must parse,
evaluate, and return at least one series.  The dashboard's expressions are
also written as recording rules and pass `promtool check rules`.

tokentap_errors_total{upstream,api,type} (the errors-by-type panel) is
added by another change; until a scrape carries it, the test derives it
from the scrape's tokentap_requests_total{outcome="error"} with the type
the simulator's 503 gets, and says so in a note.
"""
import json
import os
import re
import subprocess

import harness
from harness import chat_body
from test_metrics import RULES, need
from test_slo import SAMPLE, scrape

DASH = os.path.join(harness.REPO, "conf", "grafana", "tokentap.json")


def exprs_of(dash):
    out = []
    for p in dash["panels"]:
        for sub in [p] + p.get("panels", []):
            for tg in sub.get("targets", []):
                out.append((sub["title"], tg["expr"]))
    return out


def batch(px, good, bad, errors):
    sims = ([{"ttft_ms": 20, "tokens": 4, "gap_ms": 3}] * good
            + [{"ttft_ms": 300, "tokens": 4, "gap_ms": 3}] * bad
            + [{"status": 503}] * errors)
    for s in sims:
        r = px.post("/v1/chat/completions", chat_body(s, stream_options={"include_usage": True}))
        assert r.status in (200, 503), r.status
    return len(sims)


def parse(text):
    """{series string: value} of a scrape"""
    out = {}
    for ln in text.splitlines():
        m = SAMPLE.match(ln)
        if m:
            out[m.group(1) + "{" + (m.group(2) or "") + "}"] = m.group(3)
    return out


def with_target(series):
    name, rest = series.split("{", 1)
    extra = 'job="tokentap",instance="127.0.0.1:9464"'
    return name + "{" + (extra + "," if rest != "}" else extra) + rest


@harness.timeout(120)
def test_grafana_dashboard_expressions_evaluate(t):
    promtool = need("promtool")
    with open(DASH) as f:
        dash = json.load(f)
    exprs = exprs_of(dash)
    t.check(len(exprs) >= 20, f"dashboard expressions: {len(exprs)}")
    for title, e in exprs:
        t.check("$" not in e, f"{title}: template variable in {e!r} (not evaluable as is)")

    # 1. promtool parses each, as recording rules
    rules = os.path.join(t.tmp, "dashboard-rules.yml")
    with open(rules, "w") as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, (_, e) in enumerate(exprs):
            f.write(f"      - record: dashboard:expr_{i}\n        expr: {json.dumps(e)}\n")
    p = subprocess.run([promtool, "check", "rules", rules], capture_output=True, timeout=60)
    t.check(p.returncode == 0, "promtool check rules (dashboard expressions): "
            + (p.stdout + p.stderr).decode("utf-8", "replace")[-1500:])

    # 2. live series: two scrapes around a second batch of traffic
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--goodput", "time_to_first_token:150"])
    n1 = batch(px, 4, 2, 1)
    px.records(n1)
    s1 = parse(scrape(t, px))
    n2 = batch(px, 6, 3, 2)
    px.records(n1 + n2)
    s2 = parse(scrape(t, px))
    if not any(k.startswith("tokentap_errors_total{") for k in s2):
        for s, d in ((s1, s1.copy()), (s2, s2.copy())):
            for k, v in d.items():
                if k.startswith("tokentap_requests_total{") and 'outcome="error"' in k:
                    lb = k[len("tokentap_requests_total{"):-1].replace(',outcome="error"', "")
                    s["tokentap_errors_total{" + lb + ',type="upstream_status"}'] = v
        t.note("tokentap_errors_total not in this build's scrape: derived from "
               "tokentap_requests_total{outcome=\"error\"} for the evaluation")

    tests = os.path.join(t.tmp, "dashboard-test.yml")
    with open(tests, "w") as f:
        f.write("rule_files:\n")
        f.write(f"  - {json.dumps(RULES)}\n")
        f.write("evaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n")
        for k in sorted(set(s1) | set(s2)):
            vals = f"{s1.get(k, '_')} {s2.get(k, '_')}"
            vals = vals.replace("+Inf", "Inf").replace("NaN", "NaN")
            f.write(f"      - series: {json.dumps(with_target(k))}\n        values: '{vals}'\n")
        f.write("    promql_expr_test:\n")
        for _, e in exprs:
            f.write(f"      - expr: {json.dumps('count(' + e + ') > bool 0')}\n"
                    "        eval_time: 1m\n        exp_samples:\n"
                    "          - labels: '{}'\n            value: 1\n")
    p = subprocess.run([promtool, "test", "rules", tests], capture_output=True, timeout=120)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    t.check(p.returncode == 0, "promtool test rules: every dashboard expression evaluates "
            "to at least one series:\n" + out[-4000:])
    t.note(f"{len(exprs)} expressions, {len(set(s1) | set(s2))} input series")
