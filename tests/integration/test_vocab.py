"""One vocabulary (SPEC 15): every output groups failed requests by the same
fixed error kinds (metrics/errkind.h), so records, /metrics, /stats and the
report give the same counts per kind; docs/metrics.md lists those kinds."""
import collections
import json
import os
import re
import subprocess
import time

import harness
from harness import build_request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
def defined_kinds():
    """{name: (code, meaning)} of the X-macro rows in metrics/errkind.h"""
    with open(os.path.join(ROOT, "metrics", "errkind.h")) as f:
        text = f.read()
    body = text[text.index("#define TT_ERROR_KINDS(X)"):text.index("enum tt_errkind")]
    kinds = {}
    for row in body.replace("\\\n", " ").split("X(")[1:]:
        m = re.match(r'\s*(\w+),\s*"(\w+)",\s*"([^"]*)",(.*)', row, re.S)
        if m is None:
            raise harness.Failure(f"metrics/errkind.h: cannot read the row {row[:80]!r}")
        meaning = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(4))).replace('\\"', '"')
        kinds[m.group(2)] = (m.group(3), meaning)
    if len(kinds) < 10:
        raise harness.Failure(f"metrics/errkind.h: only {len(kinds)} kinds read")
    return kinds


def by_kind_records(recs):
    c = collections.Counter()
    for r in recs:
        if r.get("error") is not None:
            c[r["error"]["kind"]] += 1
    return dict(c)


def by_kind_metrics(t, px):
    r = harness.http(px.admin_port, "GET", "/metrics")
    t.eq(r.status, 200, "GET /metrics status")
    c = collections.Counter()
    for line in r.body.decode().splitlines():
        m = re.match(r'^tokentap_errors_total\{.*type="([^"]*)"\} (\d+)$', line)
        if m:
            c[m.group(1)] += int(m.group(2))
    return dict(c)


def by_kind_stats(t, px):
    r = harness.http(px.admin_port, "GET", "/stats")
    t.eq(r.status, 200, "GET /stats status")
    w = r.json()["windows"]["total"]
    n = sum(w["errors"].values())
    t.eq(n, w["requests"]["error"] + w["requests"]["cancelled"],
         "/stats errors by kind add up to the error and cancelled requests")
    return dict(w["errors"])


def by_kind_report(t, path):
    p = subprocess.run([os.path.join(t.build, "tokentap"), "report", path, "--format", "json"],
                       capture_output=True, text=True, timeout=60 * t.slow)
    t.eq(p.returncode, 0, f"tokentap report exit ({p.stderr[-500:]})")
    tables = json.loads(p.stdout)["tables"]
    errs = [x for x in tables if x["title"] == "Errors by type"]
    t.eq(len(errs), 1, "the report's errors table")
    cols = errs[0]["columns"]
    rows = [dict(zip(cols, row)) for row in errs[0]["rows"]]
    return {row["Type"]: row["Count"] for row in rows}, rows


def agree(t, px, nrecs, want):
    """records, /metrics, /stats and the report count <want> by kind"""
    recs = px.records(nrecs)
    got = by_kind_records(recs)
    t.eq(got, want, "records by error.kind")
    for r in recs:
        if r.get("error") is not None:
            t.check(r["error"]["kind"] in KINDS, f"error.kind {r['error']['kind']!r} is a kind")
    # the record is written before the aggregator is fed: wait for the last
    harness.wait_until(lambda: sum(by_kind_metrics(t, px).values()) >= sum(want.values()),
                       5 * t.slow, what="/metrics to count every error")
    t.eq(by_kind_metrics(t, px), want, "/metrics tokentap_errors_total by type")
    t.eq(by_kind_stats(t, px), want, "/stats errors by kind")
    rep, rows = by_kind_report(t, px.record_path)
    t.eq(rep, want, "tokentap report: Errors by type")
    return recs, rows


KINDS = defined_kinds()


@harness.timeout(90)
def test_error_kinds_agree_across_outputs(t):
    """tokentap's own 400/408/413, an upstream 400 with an OpenAI error body,
    two upstream 503s (server_error), a truncated stream, an error event
    mid-stream, a cancelled client and an ok request: each output groups
    them under the same kinds with the same counts, the upstream's own
    types kept as error.upstream_type"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--head-timeout", "1s",
                                                "--max-body-bytes", "1k"])
    # tokentap's own
    c = px.conn()
    c.send(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Foo : bar\r\n\r\n")
    t.eq(c.response().status, 400, "malformed head")
    c.close()
    c = px.conn()
    c.send(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    t.eq(c.response().status, 408, "slow head")
    c.close()
    t.eq(px.post("/echo", b"x" * 2000).status, 413, "body over the limit")
    # the upstream's
    r = px.post("/v1/chat/completions", harness.chat_body({"status": 400}))
    t.eq(r.status, 400, "upstream 400 forwarded")
    t.eq(r.json()["error"]["type"], "invalid_request_error", "the sim's error body")
    for _ in range(2):
        r = px.post("/v1/chat/completions", harness.chat_body({"status": 503}))
        t.eq(r.status, 503, "upstream 503 forwarded")
    r = px.post("/v1/chat/completions",
                harness.chat_body({"tokens": 20, "gap_ms": 5, "truncate_after": 5}))
    t.check(not r.complete, "the truncated stream reached the client cut")
    r = px.post("/v1/chat/completions",
                harness.chat_body({"tokens": 20, "gap_ms": 5, "error_after": 5}))
    t.eq(r.status, 200, "mid-stream error under 200")
    # a client that goes away mid-stream
    c = px.conn()
    c.send(build_request("POST", "/v1/chat/completions",
                         harness.chat_body({"tokens": 1000, "gap_ms": 20, "ttft_ms": 10})))
    head = c.read_head()
    t.eq(head.status, 200, "long stream status")
    c.read_body(head, "POST", stop=lambda r, body: body.count(b'"content":"tok') >= 3)
    c.close()
    px.records(9)       # the cancellation is recorded before the ok request
    r = px.post("/v1/chat/completions", harness.chat_body({"tokens": 3}))
    t.eq(r.status, 200, "an ok request")

    want = {"bad_request": 1, "request_timeout": 1, "payload_too_large": 1,
            "upstream_status": 3, "truncated": 1, "stream_error": 1, "cancelled": 1}
    recs, rows = agree(t, px, 10, want)

    ups = collections.Counter(r["error"].get("upstream_type") for r in recs
                              if r.get("error") and r["error"]["kind"] == "upstream_status")
    t.eq(dict(ups), {"invalid_request_error": 1, "server_error": 2},
         "error.upstream_type of the upstream's errors")
    for r in recs:
        e = r.get("error")
        if e is None:
            continue
        if e["kind"] == "upstream_status":
            # AIPerf's error.type stays the most specific name
            t.eq(e["type"], e["upstream_type"], "error.type of an upstream error")
            t.eq(e["code"], r["metadata"]["status"], "error.code of an upstream error")
        elif e["kind"] != "stream_error":
            t.check("upstream_type" not in e, f"no upstream_type for {e['kind']}: {e}")
            t.eq(e["type"], e["kind"], "error.type of tokentap's own error")
    row = next(x for x in rows if x["Type"] == "upstream_status")
    t.check("invalid_request_error" in row["Upstream types"]
            and "server_error" in row["Upstream types"],
            f"the report names the upstream's types: {row}")
    t.check("400" in row["Codes"] and "503" in row["Codes"], f"and their codes: {row}")


def test_dead_upstream_kinds_agree(t):
    """a dead upstream (502 upstream_connect) beside an own 400: the same
    counts in every output"""
    px = t.proxy(f"http://127.0.0.1:{t.dead_port()}", admin="auto")
    for _ in range(2):
        t.eq(px.post("/v1/chat/completions", harness.chat_body({})).status, 502,
             "dead upstream")
    c = px.conn()
    c.send(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Foo : bar\r\n\r\n")
    t.eq(c.response().status, 400, "malformed head")
    c.close()
    agree(t, px, 3, {"upstream_connect": 2, "bad_request": 1})


def test_report_reads_records_without_kind(t):
    """records written before error.kind are grouped by the same kinds: a
    known type is its kind, http_status and an upstream's own type under an
    error status are upstream_status, the type named as an upstream type"""
    base = {"schema": "tokentap.record/1",
            "metadata": {"request_start_ns": 1767225600000000000,
                         "request_end_ns": 1767225600100000000, "stream": True,
                         "status": 502, "was_cancelled": False},
            "metrics": {}}
    errs = [({"code": 502, "type": "upstream_connect", "message": "refused"}, 502),
            ({"code": 429, "type": "http_status", "message": "x"}, 429),
            ({"code": 400, "type": "invalid_request_error", "message": "x"}, 400),
            ({"code": 500, "type": "overloaded_error", "message": "x"}, 200)]
    path = os.path.join(t.tmp, "old.jsonl")
    with open(path, "w") as f:
        for i, (e, status) in enumerate(errs):
            r = json.loads(json.dumps(base))
            r["metadata"]["status"] = status
            r["metadata"]["x_request_id"] = f"r{i}"
            r["error"] = e
            f.write(json.dumps(r) + "\n")
    rep, rows = by_kind_report(t, path)
    t.eq(rep, {"upstream_connect": 1, "upstream_status": 2, "stream_error": 1},
         "old records by kind")
    row = next(x for x in rows if x["Type"] == "upstream_status")
    t.eq(row["Upstream types"], "invalid_request_error", "upstream types of old records")


def test_docs_list_the_defined_kinds(t):
    """docs/metrics.md section 4 lists exactly the kinds of
    metrics/errkind.h, with their codes"""
    with open(os.path.join(ROOT, "docs", "metrics.md")) as f:
        doc = f.read()
    sec = doc[doc.index("## 4. Outcomes and error kinds"):doc.index("## 5.")]
    rows = re.findall(r'^\| `(\w+)` \| ([^|]+) \| (.*) \|$', sec, re.M)
    documented = {name: (code.strip(), meaning) for name, code, meaning in rows}
    t.eq(sorted(documented), sorted(KINDS), "kinds in docs/metrics.md section 4")
    for name, row in KINDS.items():
        t.eq(documented[name], row, f"code and meaning of {name} in the docs")


def test_proxy_sets_only_defined_kinds(t):
    """every type tokentap's proxy records for its own errors is a kind
    (a misspelt one would count as proxy_error)"""
    call = re.compile(r'\b(?:fail_request|tt_request_set_error|leg_fail|cbs->failed|turn_fail)'
                      r'\s*\(([^;]*?)\);', re.S)
    seen = set()
    pdir = os.path.join(ROOT, "proxy")
    for fn in sorted(os.path.relpath(os.path.join(d, f), pdir)
                     for d, _, fs in os.walk(pdir) for f in fs):
        if not fn.endswith(".c"):
            continue
        with open(os.path.join(pdir, fn)) as f:
            src = f.read()
        for m in call.finditer(src):
            args = m.group(1)
            lits = re.findall(r'"([a-z_]+)"', args)
            # the type: the literal(s) before the message, a ternary's both arms
            tern = re.search(r'"([a-z_]+)"\s*:\s*"([a-z_]+)"', args)
            names = set(tern.groups()) if tern else set(lits[:1])
            for n in names:
                t.check(n in KINDS, f"proxy/{fn}: type {n!r} is no kind of metrics/errkind.h")
                seen.add(n)
    t.check({"bad_request", "upstream_connect", "truncated", "cancelled",
             "stream_parse_error"} <= seen,
            f"the scan found the proxy's types: {sorted(seen)}")
