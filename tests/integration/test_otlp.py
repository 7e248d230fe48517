"""Traces (SPEC 14; docs/traces.md): one OTLP span per request leg, sent to
a receiver in the test; W3C trace context continued and propagated.

The receiver is a loopback HTTP server here (port 0, its own threads) that
gunzips what arrives; protobuf bodies are decoded by protoc --decode_raw
(Debian's protobuf-compiler), an independent decoder, JSON ones by json.
Span attributes are compared with the same request's record.

Trace and parent ids that the test chooses start with the byte 0x0f (field
1 with the invalid wire type 7): --decode_raw, which guesses whether a
length-delimited field is a message, then shows them as bytes.  Span ids
tokentap picks at random are compared in the JSON tests.
"""
import codecs
import gzip
import json
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time

import harness
from harness import Failure, Skip, chat_body, metric, timeout

# ---------------------------------------------------------------- receiver


class Receiver(harness.Listener):
    """OTLP/HTTP receiver: answers each POST with the next status of
    <statuses> (then 200); with <hang>, accepts and never answers"""

    def __init__(self, t, statuses=(), hang=False, retry_after=None, tls=None):
        self.posts = []             # (path, headers dict, raw gunzipped body)
        self.script = list(statuses)
        self.hang = hang
        self.retry_after = retry_after
        self.cv = threading.Condition()
        self.errors = []
        self.done = threading.Event()
        self.socks = []
        self.tls = tls              # an ssl.SSLContext: an https receiver
        super().__init__(t)
        if tls is not None:
            self.url = self.url.replace("http://", "https://")

    def accepted(self, s):
        self.socks.append(s)
        threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s):
        try:
            if self.tls is not None:
                try:
                    s = self.tls.wrap_socket(s, server_side=True)
                except (ssl.SSLError, OSError):
                    return          # a client that does not trust us
            while True:
                raw = harness.read_request(s)
                if raw is None:
                    return
                if self.hang:
                    self.done.wait()
                    return
                head, _, body = raw.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                hdrs = {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(":")
                    hdrs[k.strip().lower()] = v.strip()
                with self.cv:
                    status = self.script.pop(0) if self.script else 200
                if status == 200:
                    if hdrs.get("content-encoding") != "gzip":
                        self.errors.append("export without Content-Encoding: gzip")
                    data = gzip.decompress(body)
                    with self.cv:
                        self.posts.append((method, path, hdrs, data))
                        self.cv.notify_all()
                extra = f"Retry-After: {self.retry_after}\r\n" if (
                    status != 200 and self.retry_after is not None) else ""
                s.sendall(f"HTTP/1.1 {status} X\r\nContent-Type: application/x-protobuf\r\n"
                          f"{extra}Content-Length: 0\r\n\r\n".encode())
        except OSError:
            return
        except Exception as e:          # reported at teardown
            self.errors.append(repr(e))

    def stop(self):
        self.done.set()
        super().stop()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass

    def spans(self, n, deadline):
        """the spans of all posts once there are at least <n>"""
        end = time.monotonic() + deadline
        with self.cv:
            while True:
                out = [sp for p in self.posts for sp in decode(p[2], p[3])]
                if len(out) >= n:
                    return out
                left = end - time.monotonic()
                if left <= 0:
                    raise Failure(f"{len(out)} spans arrived, want {n}")
                self.cv.wait(left)


# ---------------------------------------------------------------- decoding


def decode_raw(data):
    """protoc --decode_raw of <data> as nested [(field, value)] lists"""
    protoc = shutil.which("protoc")
    if protoc is None:
        raise Skip("protoc (protobuf-compiler) is not installed")
    p = subprocess.run([protoc, "--decode_raw"], input=data, capture_output=True,
                       timeout=30)
    if p.returncode != 0:
        raise Failure("protoc --decode_raw rejected the body: " + p.stderr.decode()[-300:])
    stack = [[]]
    for ln in p.stdout.decode("latin-1").splitlines():
        ln = ln.strip()
        if ln.endswith("{"):
            node = []
            stack[-1].append((int(ln.split()[0]), node))
            stack.append(node)
        elif ln == "}":
            stack.pop()
        elif ln:
            k, _, v = ln.partition(": ")
            if v.startswith('"'):
                val = codecs.escape_decode(v[1:-1].encode("latin-1"))[0]
            elif v.startswith("0x"):
                val = ("hex", int(v, 16), len(v) - 2)
            else:
                val = int(v)
            stack[-1].append((int(k), val))
    return stack[0]


def fields(msg, n):
    return [v for k, v in msg if k == n]


def one(msg, n, default=None):
    f = fields(msg, n)
    return f[0] if f else default


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def reencode(msg):
    """the wire bytes of a decode_raw tree: --decode_raw shows a bytes field
    whose random content parses as a message (a random trace or span id
    does, now and then) as that message, so it is written back"""
    out = bytearray()
    for k, v in msg:
        if isinstance(v, bytes):
            out += _varint(k << 3 | 2) + _varint(len(v)) + v
        elif isinstance(v, list):
            b = reencode(v)
            out += _varint(k << 3 | 2) + _varint(len(b)) + b
        elif isinstance(v, tuple):          # ("hex", value, digits): fixed64/32
            wide = v[2] > 8
            out += _varint(k << 3 | (1 if wide else 5)) + v[1].to_bytes(8 if wide else 4, "little")
        else:
            out += _varint(k << 3) + _varint(v)
    return bytes(out)


def as_bytes(v, size):
    """an id field of <size> bytes; a message-looking one written back (an
    id whose bytes do not survive that, e.g. an overlong varint, is "?")"""
    if isinstance(v, bytes):
        return v
    if isinstance(v, list):
        b = reencode(v)
        return b if len(b) == size else b"?"
    raise Failure(f"a bytes field decoded as {v!r}")


def any_value(av):
    """AnyValue: string 1, bool 2, int 3, double 4 (fixed64), array 5"""
    for k, v in av:
        if k == 1:
            return v.decode() if isinstance(v, bytes) else v
        if k == 2:
            return bool(v)
        if k == 3:
            return v if v < 1 << 63 else v - (1 << 64)
        if k == 4:
            return struct.unpack("<d", struct.pack("<Q", v[1]))[0]
        if k == 5:
            return [any_value(x) for x in fields(v, 1)]
    return None


def pb_spans(data):
    """the spans of an ExportTraceServiceRequest, as dicts like the JSON's"""
    out = []
    for rs in fields(decode_raw(data), 1):
        res = {one(kv, 1).decode(): any_value(one(kv, 2)) for kv in fields(one(rs, 1, []), 1)}
        for ss in fields(rs, 2):
            for sp in fields(ss, 2):
                d = {
                    "traceId": as_bytes(one(sp, 1), 16).hex(),
                    "spanId": as_bytes(one(sp, 2), 8).hex(),
                    "parentSpanId": as_bytes(one(sp, 4), 8).hex() if one(sp, 4) is not None else "",
                    "traceState": one(sp, 3, b"").decode(),
                    "name": one(sp, 5).decode(),
                    "kind": one(sp, 6),
                    "start": one(sp, 7)[1],
                    "end": one(sp, 8)[1],
                    "attrs": {one(kv, 1).decode(): any_value(one(kv, 2)) for kv in fields(sp, 9)},
                    "events": {one(e, 2).decode(): one(e, 1)[1] for e in fields(sp, 11)},
                    "links": [as_bytes(one(ln, 2), 8).hex() for ln in fields(sp, 13)],
                    "status": one(one(sp, 15, []), 3, 0),
                    "resource": res,
                }
                out.append(d)
    return out


def json_value(v):
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [json_value(x) for x in v["arrayValue"]["values"]]
    return None


def json_spans(data):
    out = []
    doc = json.loads(data)
    for rs in doc["resourceSpans"]:
        res = {a["key"]: json_value(a["value"]) for a in rs["resource"]["attributes"]}
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                out.append({
                    "traceId": sp["traceId"], "spanId": sp["spanId"],
                    "parentSpanId": sp.get("parentSpanId", ""),
                    "traceState": sp.get("traceState", ""),
                    "name": sp["name"], "kind": sp["kind"],
                    "start": int(sp["startTimeUnixNano"]), "end": int(sp["endTimeUnixNano"]),
                    "attrs": {a["key"]: json_value(a["value"]) for a in sp["attributes"]},
                    "events": {e["name"]: int(e["timeUnixNano"]) for e in sp.get("events", [])},
                    "links": [ln["spanId"] for ln in sp.get("links", [])],
                    "status": sp.get("status", {}).get("code", 0),
                    "resource": res,
                })
    return out


def decode(headers, data):
    if headers.get("content-type") == "application/json":
        return json_spans(data)
    if headers.get("content-type") != "application/x-protobuf":
        raise Failure(f"export with Content-Type {headers.get('content-type')!r}")
    return pb_spans(data)


def scrape(t, px):
    r = harness.http(px.admin_port, "GET", "/metrics")
    t.eq(r.status, 200, "/metrics status")
    out = {}
    for ln in r.body.decode().splitlines():
        if ln.startswith("tokentap_otlp_"):
            k, _, v = ln.rpartition(" ")
            out[k] = float(v)
    return out


TRACE = "0f" + "4bf92f3577b34da6a3ce929d0e0e47"
PARENT = "0f" + "f067aa0ba902b7"
SIM = {"tokens": 6, "ttft_ms": 30, "gap_ms": 5}


def check_span_matches_record(t, sp, rec):
    a = sp["attrs"]
    md = rec["metadata"]
    t.eq(sp["kind"], 3, "span kind (CLIENT)")
    t.eq(sp["name"], "chat sim-model", "span name")
    t.eq(sp["start"], md["request_start_ns"], "start = request_start_ns")
    t.eq(sp["end"], md["request_end_ns"], "end = request_end_ns")
    for attr, tag in (("tokentap.time_to_first_token", "time_to_first_token"),
                      ("tokentap.time_to_first_output_token", "time_to_first_output_token"),
                      ("tokentap.inter_token_latency", "inter_token_latency")):
        t.near(a.get(attr), metric(rec, tag) / 1000.0, 2e-6, attr)
    if metric(rec, "client_time_to_first_token") is not None:
        t.near(a.get("tokentap.client_time_to_first_token"),
               metric(rec, "client_time_to_first_token") / 1000.0, 2e-6,
               "tokentap.client_time_to_first_token")
    t.eq(a.get("gen_ai.usage.input_tokens"), metric(rec, "input_sequence_length"),
         "gen_ai.usage.input_tokens")
    t.eq(a.get("gen_ai.usage.output_tokens"), metric(rec, "output_sequence_length"),
         "gen_ai.usage.output_tokens")
    t.eq(a.get("gen_ai.operation.name"), "chat", "gen_ai.operation.name")
    t.eq(a.get("gen_ai.provider.name"), "openai", "gen_ai.provider.name")
    t.eq(a.get("gen_ai.request.model"), "sim-model", "gen_ai.request.model")
    t.eq(a.get("http.response.status_code"), 200, "http.response.status_code")
    t.eq(a.get("tokentap.x_request_id"), md["x_request_id"], "tokentap.x_request_id")
    t.eq(a.get("tokentap.role"), md["role"], "tokentap.role")
    t.eq(a.get("tokentap.upstream"), md["upstream"], "tokentap.upstream")
    t.check("error.type" not in a, f"error.type on an ok request: {a}")
    t.check(a.get("gen_ai.response.time_to_first_chunk", 0) > 0, "time_to_first_chunk")
    rid = a.get("gen_ai.response.id")
    t.check(isinstance(rid, str) and rid.startswith("chatcmpl-sim"), f"gen_ai.response.id: {rid!r}")
    for ev in ("first_token", "last_token"):
        t.check(ev in sp["events"], f"span event {ev}: {sorted(sp['events'])}")
    t.near((sp["events"]["first_token"] - sp["start"]) / 1e6,
           metric(rec, "time_to_first_token"), 0.002, "first_token event - start (ms)")
    # nothing of the prompt or the answer
    blob = json.dumps(sp)
    t.check("hi" not in [v for v in a.values() if isinstance(v, str)], "prompt text in a span")
    t.check("content" not in blob, "message content in a span")


# ---------------------------------------------------------------- tests


@timeout(60)
def test_otlp_protobuf_span_matches_record(t):
    """http/protobuf, gzip, decoded by protoc --decode_raw: one span per
    request, attributes equal to the record's, an incoming traceparent
    continued (same trace id, its span as the parent, tracestate kept)"""
    recv = Receiver(t)
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--otlp-endpoint", recv.url])
    r = px.post("/v1/chat/completions", chat_body(SIM), headers=[
        ("traceparent", f"00-{TRACE}-{PARENT}-01"), ("tracestate", "vendor=abc,other=1")])
    t.eq(r.status, 200, "status")
    rec = px.records(1)[0]
    spans = recv.spans(1, 10 * t.slow)
    t.eq(len(spans), 1, "spans")
    sp = spans[0]
    t.eq(recv.posts[0][1], "/v1/traces", "export path")
    t.eq(sp["traceId"], TRACE, "trace id continued")
    t.eq(sp["parentSpanId"], PARENT, "parent = the incoming span")
    t.eq(sp["traceState"], "vendor=abc,other=1", "tracestate kept")
    t.eq(sp["resource"].get("service.name"), "tokentap", "service.name")
    check_span_matches_record(t, sp, rec)


@timeout(60)
def test_otlp_json_propagate_and_invalid_traceparent(t):
    """http/json with --trace-propagate: the upstream gets a traceparent
    with the incoming trace id and tokentap's span id (the exported span's),
    the client's own traceparent replaced; an invalid traceparent starts a
    new trace and is not forwarded as it came"""
    recv = Receiver(t)
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--otlp-endpoint", recv.url, "--otlp-protocol",
                                 "http/json", "--trace-propagate"])
    trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    r = px.post("/echo/headers", {}, headers=[("traceparent", f"00-{trace}-{parent}-01")])
    t.eq(r.status, 200, "status")
    got = [v for k, v in r.json()["headers"] if k.lower() == "traceparent"]
    t.eq(len(got), 1, f"traceparent headers upstream: {got}")
    ver, tid, pid, flags = got[0].split("-")
    t.eq((ver, tid, flags), ("00", trace, "01"), "propagated trace id and flags")
    t.check(pid != parent, "the upstream's parent is tokentap's span, not the client's")
    bad = "00-" + trace.upper() + "-" + parent + "-01"      # uppercase: invalid
    r2 = px.post("/echo/headers", {}, headers=[("traceparent", bad)])
    got2 = [v for k, v in r2.json()["headers"] if k.lower() == "traceparent"]
    t.eq(len(got2), 1, f"traceparent headers upstream: {got2}")
    t.check(got2[0] != bad and trace not in got2[0].lower(),
            f"an invalid traceparent was continued: {got2[0]}")
    spans = recv.spans(2, 10 * t.slow)
    by_trace = {s["traceId"]: s for s in spans}
    sp = by_trace.get(trace)
    t.check(sp is not None, f"no span of trace {trace}: {spans}")
    t.eq(sp["spanId"], pid, "exported span id = the propagated parent id")
    t.eq(sp["parentSpanId"], parent, "exported span's parent = the client's span")
    sp2 = by_trace.get(got2[0].split("-")[1])
    t.check(sp2 is not None, "the invalid traceparent's request has a span in a new trace")
    t.eq(sp2["parentSpanId"], "", "a new trace's span has no parent")
    t.eq(sp2["spanId"], got2[0].split("-")[2], "its propagated id")
    t.eq(recv.posts[0][2].get("content-type"), "application/json", "content type")


@timeout(60)
def test_otlp_no_propagation_by_default(t):
    """without --trace-propagate the forwarded request is untouched: the
    client's traceparent goes on as it came, none is added otherwise"""
    recv = Receiver(t)
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--otlp-endpoint", recv.url])
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = px.post("/echo/headers", {}, headers=[("traceparent", tp)])
    t.eq([v for k, v in r.json()["headers"] if k.lower() == "traceparent"], [tp],
         "forwarded traceparent")
    r = px.post("/echo/headers", {})
    t.eq([v for k, v in r.json()["headers"] if k.lower() == "traceparent"], [],
         "no traceparent added")


@timeout(90)
def test_otlp_retry_503_loses_nothing(t):
    """a receiver answering 503 twice (Retry-After: 0), then 200: every
    span arrives, once"""
    recv = Receiver(t, statuses=[503, 503], retry_after=0)
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--otlp-endpoint", recv.url])
    n = 8
    for _ in range(n):
        t.eq(px.post("/v1/chat/completions", chat_body(SIM)).status, 200, "status")
    recs = px.records(n)
    spans = recv.spans(n, 20 * t.slow)
    t.eq(sorted(s["attrs"]["tokentap.x_request_id"] for s in spans),
         sorted(r["metadata"]["x_request_id"] for r in recs), "one span per record")
    t.eq(len(recv.script), 0, "both 503 answers were given")
    m = scrape(t, px)
    t.eq(m.get("tokentap_otlp_spans_exported_total"), float(n), "exported counter")
    t.eq(m.get('tokentap_otlp_spans_dropped_total{reason="export_failed"}'), 0.0,
         "export_failed drops")


def stream_all(t, px, n):
    for _ in range(n):
        c = px.conn()
        c.send(harness.build_request("POST", "/v1/chat/completions", chat_body(SIM)))
        r = c.response()
        t.eq(r.status, 200, "status")
        t.check(b"[DONE]" in r.body, "the whole stream arrived")
        c.close()


@timeout(60)
def test_otlp_dead_receiver_never_delays_clients(t):
    """nothing listening at the endpoint: every request is answered, every
    record written, TTFT as without an exporter; the exit is prompt"""
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--otlp-endpoint", f"http://127.0.0.1:{t.dead_port()}",
                                 "--drain-timeout", "2s"])
    stream_all(t, px, 10)
    recs = px.records(10)
    for r in recs:
        t.near(metric(r, "time_to_first_token"), 30, 25, "TTFT (ms)")
    start = time.monotonic()
    px.stop()
    t.check(time.monotonic() - start < 5 * t.slow, "exit within the drain time")


@timeout(60)
def test_otlp_hanging_receiver_and_queue_bound(t):
    """a receiver that accepts and never answers: clients and records are
    unaffected, the queue holds at --otlp-queue (drops counted on
    /metrics), and SIGTERM ends within the drain time"""
    recv = Receiver(t, hang=True)
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--otlp-endpoint", recv.url, "--otlp-queue", "3",
                                               "--drain-timeout", "2s"])
    n = 30
    stream_all(t, px, n)
    recs = px.records(n)
    t.eq(len(recs), n, "records")
    for r in recs:
        t.near(metric(r, "time_to_first_token"), 30, 25, "TTFT (ms)")
    m = scrape(t, px)
    dropped = m.get('tokentap_otlp_spans_dropped_total{reason="queue_full"}')
    # at most one queue in the hanging request and one queued
    t.check(dropped is not None and n - 2 * 3 <= dropped <= n - 3,
            f"queue_full drops {dropped} of {n} with a queue of 3")
    t.eq(m.get("tokentap_otlp_spans_exported_total"), 0.0, "nothing exported")
    start = time.monotonic()
    px.stop()
    t.check(time.monotonic() - start < 6 * t.slow,
            f"exit took {time.monotonic() - start:.1f}s with a hanging receiver")


@timeout(60)
def test_otlp_environment_variables(t):
    """OTEL_EXPORTER_OTLP_TRACES_ENDPOINT used as is, headers (percent-decoded),
    protocol and service name from the environment when no flag is given"""
    recv = Receiver(t)
    sim = t.sim()
    px = t.proxy(sim.url, env_extra={
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": recv.url + "/custom/traces",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",      # loses to the above
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20c2VjcmV0, x-tenant = a",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        "OTEL_SERVICE_NAME": "gateway-7"})
    t.eq(px.post("/v1/chat/completions", chat_body(SIM)).status, 200, "status")
    spans = recv.spans(1, 10 * t.slow)
    _, path, hdrs, _ = recv.posts[0]
    t.eq(path, "/custom/traces", "TRACES_ENDPOINT used as is")
    t.eq(hdrs.get("authorization"), "Basic c2VjcmV0", "header from the environment")
    t.eq(hdrs.get("x-tenant"), "a", "second header")
    t.eq(hdrs.get("content-type"), "application/json", "protocol from the environment")
    t.eq(spans[0]["resource"].get("service.name"), "gateway-7", "OTEL_SERVICE_NAME")
    px.stop()
    t.check(b"c2VjcmV0" not in open(px.err_path, "rb").read(), "a header value was logged")


@timeout(60)
def test_otlp_base_endpoint_env_and_flag_header(t):
    """OTEL_EXPORTER_OTLP_ENDPOINT gets /v1/traces; --otlp-header wins over
    the variables and may repeat; check-config never shows the values"""
    recv = Receiver(t)
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--otlp-header", "authorization=Bearer s3cr3t",
                                 "--otlp-header", "x-b=2"],
                 env_extra={"OTEL_EXPORTER_OTLP_ENDPOINT": recv.url + "/base/",
                            "OTEL_EXPORTER_OTLP_HEADERS": "x-ignored=1"})
    t.eq(px.post("/v1/chat/completions", chat_body(SIM)).status, 200, "status")
    recv.spans(1, 10 * t.slow)
    _, path, hdrs, _ = recv.posts[0]
    t.eq(path, "/base/v1/traces", "ENDPOINT + v1/traces")
    t.eq((hdrs.get("authorization"), hdrs.get("x-b"), hdrs.get("x-ignored")),
         ("Bearer s3cr3t", "2", None), "headers")
    p = subprocess.run([os.path.join(t.build, "tokentap"), "check-config", "--upstream",
                        sim.url, "--otlp-header", "authorization=Bearer s3cr3t"],
                       capture_output=True, timeout=30)
    out = p.stdout + p.stderr
    t.check(b"s3cr3t" not in out, "check-config printed a header value")


@timeout(120)
def test_otlp_https_receiver_with_its_ca(t):
    """an https receiver signed by a private CA: --otlp-ca (or
    OTEL_EXPORTER_OTLP_CERTIFICATE) verifies it, spans arrive; without it
    the receiver is not trusted and the spans are counted as failed"""
    exe = shutil.which("openssl")
    if not exe:
        raise Skip("the openssl command is not installed")
    cert, key = os.path.join(t.tmp, "recv.pem"), os.path.join(t.tmp, "recv.key")
    subprocess.run([exe, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=receiver",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    recv = Receiver(t, tls=ctx)
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--otlp-endpoint", recv.url, "--otlp-ca", cert])
    t.eq(px.post("/v1/chat/completions", chat_body(SIM)).status, 200, "status")
    t.eq(len(recv.spans(1, 10 * t.slow)), 1, "spans through TLS")
    px2 = t.proxy(sim.url, admin="auto", extra=["--otlp-endpoint", recv.url])
    t.eq(px2.post("/v1/chat/completions", chat_body(SIM)).status, 200, "status")
    harness.wait_until(lambda: scrape(t, px2).get(
        'tokentap_otlp_spans_dropped_total{reason="export_failed"}') or None,
        20 * t.slow, what="the untrusted receiver's span counted as failed")
    t.eq(len(recv.posts), 1, "posts the receiver accepted")
    px3 = t.proxy(sim.url, env_extra={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": recv.url + "/v1/traces",
                                      "OTEL_EXPORTER_OTLP_CERTIFICATE": cert})
    t.eq(px3.post("/v1/chat/completions", chat_body(SIM)).status, 200, "status")
    t.eq(len(recv.spans(2, 10 * t.slow)), 2, "spans with the CA from the environment")


@timeout(30)
def test_otlp_bad_values_name_the_flag(t):
    tt = os.path.join(t.build, "tokentap")
    cases = [
        (["--otlp-protocol", "grpc"], {}, b"--otlp-protocol"),
        (["--otlp-endpoint", "ftp://x"], {}, b"--otlp-endpoint"),
        (["--otlp-header", "novalue"], {}, b"--otlp-header"),
        (["--otlp-queue", "0"], {}, b"--otlp-queue"),
        (["--otlp-ca", "/nonexistent/ca.pem"], {}, b"otlp_ca"),
        ([], {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, b"OTEL_EXPORTER_OTLP_PROTOCOL"),
    ]
    for args, env, want in cases:
        e = dict(os.environ)
        e.update(env)
        p = subprocess.run([tt, "--upstream", "http://127.0.0.1:1", *args], env=e,
                           capture_output=True, timeout=30)
        t.check(p.returncode != 0, f"{args} {env} accepted")
        t.check(want in p.stderr, f"{args}: message {p.stderr[-300:]!r} lacks {want!r}")


@timeout(60)
def test_otlp_shadow_leg_span_linked(t):
    """a mirrored request: one span per leg, the same trace and parent, the
    shadow's linked to the primary's span"""
    recv = Receiver(t)
    sim = t.sim()
    cand = t.sim()
    px = t.proxy(sim.url, extra=["--otlp-endpoint", recv.url, "--otlp-protocol", "http/json",
                                 "--shadow", f"cand={cand.url}"])
    trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    r = px.post("/v1/chat/completions", chat_body(SIM),
                headers=[("traceparent", f"00-{trace}-{parent}-01")])
    t.eq(r.status, 200, "status")
    recs = px.records(2)
    spans = recv.spans(2, 10 * t.slow)
    roles = {s["attrs"]["tokentap.role"]: s for s in spans}
    t.eq(sorted(roles), ["primary", "shadow"], "one span per leg")
    pri, sh = roles["primary"], roles["shadow"]
    t.eq((pri["traceId"], sh["traceId"]), (trace, trace), "same trace")
    t.eq((pri["parentSpanId"], sh["parentSpanId"]), (parent, parent), "same parent")
    t.check(sh["spanId"] != pri["spanId"], "own span ids")
    t.eq(sh["links"], [pri["spanId"]], "the shadow's span links to the primary's")
    t.eq(sh["attrs"]["tokentap.upstream"], "cand", "shadow upstream")
    t.eq(sh["attrs"]["server.port"], cand.port, "shadow server.port")
    rec = [x for x in recs if x["metadata"]["role"] == "shadow"][0]
    t.near(sh["attrs"]["tokentap.time_to_first_token"], metric(rec, "time_to_first_token") / 1000,
           2e-6, "shadow TTFT")
