"""Shadow traffic (SPEC 10, docs/shadow.md): requests mirrored to candidate
servers, each leg decoded, timed and recorded like the primary, and no
shadow fault of any kind reaching the client.

The primary is a tokentap-sim replaying a stream file this test writes
(tokens at designed instants, same bytes every time), so "the client's
bytes are identical to the primary's" is an exact comparison with the file.
"The client never waits for the shadow" is shown by order, not by a
latency tolerance: a fault the test scripts (a fake shadow) is held until
the client has its whole response, so a proxy that made the client wait
for the shadow could not finish the request at all; a fault on a timer (a
refused, silent, slow or handshake-less shadow) is set to resolve well
after the primary's designed end, and the primary's record must end before
the shadow's.  The client TTFT with and without the shadow is noted, not
judged: it is a measurement, and noise on a loaded machine is not a defect.
"""
import json
import os
import socket
import statistics
import struct
import threading
import time

import harness
from harness import build_request, metric, timeline, timeout

TOKENS = 12
TTFT_MS = 120
ASAN = "quarantine_size_mb=1"
GAP_MS = 15


def stream_file(t):
    """a canned OpenAI chat stream: TOKENS token events, finish, usage, [DONE]"""
    path = os.path.join(t.tmp, "primary.sse")
    ev = []
    base = {"id": "chatcmpl-fixed", "object": "chat.completion.chunk",
            "created": 1700000000, "model": "sim-model"}
    for i in range(TOKENS):
        ev.append(dict(base, choices=[{"index": 0, "delta": {"content": f"tok{i} "},
                                       "finish_reason": None}]))
    ev.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    ev.append(dict(base, choices=[], usage={"prompt_tokens": 7, "completion_tokens": TOKENS,
                                            "total_tokens": 7 + TOKENS}))
    data = b"".join(b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n"
                    for e in ev) + b"data: [DONE]\n\n"
    with open(path, "wb") as f:
        f.write(data)
    return path, data


def body_for(path, extra_sim=None, big=0):
    sim = {"replay": path, "ttft_ms": TTFT_MS, "gap_ms": GAP_MS}
    sim.update(extra_sim or {})
    b = {"model": "sim-model", "stream": True,
         "messages": [{"role": "user", "content": "x" * big if big else "hi"}], "sim": sim}
    return b


def shadow(name, url, *sets):
    a = ["--shadow", f"{name}={url}"]
    for s in sets:
        a += ["--shadow-set", f"{name}.{s}"]
    return a


def client_request(px, body, headers=None):
    """(Response, client TTFT ms): one streamed request on a fresh connection"""
    c = px.conn(timeout=30)
    try:
        raw = build_request("POST", "/v1/chat/completions", body, headers)
        t0 = harness.now_ns()
        c.send(raw)
        r = c.response("POST")
    finally:
        c.close()
    i = r.body.find(b"tok0")
    ttft = (r.body_arrival_ns(i) - t0) / 1e6 if i >= 0 else None
    return r, ttft


def by_role(recs, rid=None):
    out = {"primary": [], "shadow": []}
    for r in recs:
        if rid is None or r["metadata"]["x_request_id"] == rid:
            out[r["metadata"]["role"]].append(r)
    return out


def wait_records(t, px, n):
    return px.records(n, timeout=15 * t.slow)


def metric_line(px, prefix):
    r = harness.http(px.admin_port, "GET", "/metrics")
    return [ln for ln in r.body.decode().splitlines() if ln.startswith(prefix)]


class Gate:
    """a fake shadow's fault held until the test lets it go: the handler
    calls wait(); the test calls release() once per request, after the
    client's response is complete"""

    def __init__(self, t):
        self.t = t
        self.sem = threading.Semaphore(0)

    def wait(self):
        if not self.sem.acquire(timeout=30 * self.t.slow):
            raise harness.Failure("the shadow was never released")

    def release(self):
        self.sem.release()


def isolation(t, shadow_url, sets=(), n=4, big=0, extra=(), gate=None):
    """the same requests through a proxy without a shadow and one with the
    given shadow: every client gets the primary's bytes whole; with <gate>
    each shadow request is let go only after its client is done.  Returns
    (proxy, client TTFTs with the shadow)"""
    path, data = stream_file(t)
    sim = t.sim()
    # under ASan freed memory waits in a quarantine: keep it small so that
    # RSS measures live memory
    base = t.proxy(sim.url, asan=ASAN)
    px = t.proxy(sim.url, admin="auto", extra=shadow("cand", shadow_url, *sets) + list(extra),
                 asan=ASAN)
    # warm both, so that neither pays an upstream connect in the figures
    for p in (base, px):
        r, _ = client_request(p, body_for(path), headers=[("X-Request-Id", "iso-warm")])
        t.eq(r.status, 200, "warm-up status")
        t.eq(r.body, data, "warm-up body bytes")
        if gate is not None and p is px:
            gate.release()
    without, with_ = [], []
    for i in range(n):
        for p, acc in ((base, without), (px, with_)):
            r, ttft = client_request(p, body_for(path, big=big),
                                     headers=[("X-Request-Id", f"iso-{i}")])
            t.eq(r.status, 200, "client status")
            t.eq(r.body, data, "client bytes equal the primary's stream")
            acc.append(ttft)
            if gate is not None and p is px:
                gate.release()
    t.note(f"client TTFT median {statistics.median(with_):.2f} ms with the shadow, "
           f"{statistics.median(without):.2f} ms without")
    rss, rss0 = px.rss_kib(), base.rss_kib()
    t.note(f"RSS {rss} KiB with the shadow, {rss0} KiB without")
    t.check(rss < rss0 + 48 * 1024 * t.slow, f"RSS {rss} KiB vs {rss0} KiB without the shadow")
    return px, with_


def primary_ends_first(t, recs):
    """every request's primary record ends before its shadow record: the
    client was served while the shadow's fault was still unresolved"""
    legs = {}
    for r in recs:
        legs.setdefault(r["metadata"]["x_request_id"], {})[r["metadata"]["role"]] = r
    for rid, leg in sorted(legs.items()):
        p, s = leg.get("primary"), leg.get("shadow")
        t.check(p is not None and s is not None, f"{rid}: both legs recorded ({sorted(leg)})")
        pe, se = p["metadata"]["request_end_ns"], s["metadata"]["request_end_ns"]
        t.check(pe < se, f"{rid}: the primary ended {(pe - se) / 1e6:.1f} ms after the shadow")


def shadow_errors(t, px, n, want_types, both=False):
    """the n + 1 shadow records (warm-up included) have only <want_types>
    errors; returns them, or every record with <both>"""
    recs = wait_records(t, px, 2 * (n + 1))
    sh = by_role(recs)["shadow"]
    t.check(len(sh) == n + 1, f"{len(sh)} shadow records, want {n + 1}")
    types = sorted({(r["error"] or {}).get("type") for r in sh})
    t.check(set(types) <= set(want_types), f"shadow error types {types}, want {want_types}")
    for r in sh:
        t.eq(r["metadata"]["upstream"], "cand", "shadow record upstream")
    return recs if both else sh


# ----------------------------------------------------------------------------


@timeout(40)
def test_shadow_leg_recorded_and_paired_with_primary(t):
    """one mirrored request: two records with the same x_request_id, one per
    leg (upstream, role), each with its own timeline from the shared t0;
    each leg's TTFT from its headers is at least what its own sim waits
    (the candidate twice the primary's), and /stats pairs the two"""
    path, data = stream_file(t)
    sim = t.sim()
    cand = t.sim(extra=["--latency-scale", "2"])
    px = t.proxy(sim.url, admin="auto", extra=shadow("cand", cand.url))
    r, _ = client_request(px, body_for(path), headers=[("X-Request-Id", "pair-1")])
    t.eq(r.status, 200, "status")
    t.eq(r.body, data, "client bytes")
    recs = by_role(wait_records(t, px, 2), "pair-1")
    t.eq(len(recs["primary"]), 1, "primary records")
    t.eq(len(recs["shadow"]), 1, "shadow records")
    p, s = recs["primary"][0], recs["shadow"][0]
    t.eq(p["metadata"]["upstream"], "primary", "primary upstream")
    t.eq(s["metadata"]["upstream"], "cand", "shadow upstream")
    t.eq(s["error"], None, "shadow error")
    t.eq(p["metadata"]["request_start_ns"], s["metadata"]["request_start_ns"], "shared t0")
    t.eq(metric(s, "output_sequence_length"), TOKENS, "shadow OSL")
    t.check(timeline(s, "upstream_connected") is not None, "shadow's own connect mark")
    # each sim starts its clock on the request the leg sent it after t0, and
    # the candidate waits 2 x TTFT: a sim never sends early, so these lower
    # bounds hold on any machine, and a shadow timed on the primary's marks
    # would come out near TTFT_MS
    pt, st_ = metric(p, "time_to_first_token"), metric(s, "time_to_first_token")
    t.note(f"TTFT: primary {pt:.2f} ms, shadow {st_:.2f} ms (from headers "
           f"{pt - timeline(p, 'response_headers'):.2f} and "
           f"{st_ - timeline(s, 'response_headers'):.2f})")
    t.check(pt >= TTFT_MS, f"primary TTFT {pt:.2f} ms < the sim's {TTFT_MS}")
    t.check(st_ >= 2 * TTFT_MS, f"shadow TTFT {st_:.2f} ms < its sim's {2 * TTFT_MS}")
    st = harness.http(px.admin_port, "GET", "/stats").json()
    cmp = st["comparisons"]["cand"]["windows"]["1m"]
    t.eq(cmp["pairs"], 1, "pairs in /stats")
    t.eq(cmp["finish_reason_agreement"], 1, "finish reasons agree")
    d = cmp["difference"]["time_to_first_token"]["median"]
    want = metric(s, "time_to_first_token") - metric(p, "time_to_first_token")
    t.near(d, want, 1e-3, "the one pair's TTFT difference is shadow minus primary")
    t.eq(cmp["difference"]["output_sequence_length"]["median"], 0, "OSL difference")
    t.check("cand" in st["upstreams"] and st["upstreams"]["cand"]["role"] == "shadow",
            "cand in /stats upstreams")
    t.eq(st["upstreams"]["cand"]["windows"]["1m"]["requests"]["ok"], 1, "cand ok count")
    t.eq(st["windows"]["1m"]["requests"]["ok"], 1, "top-level windows are the primary's")


@timeout(30)
def test_shadow_gets_its_authority_and_header_edits(t):
    """Host is the shadow's authority; set_header replaces the client's
    Authorization; remove_header drops one; other headers pass unchanged"""
    got = []

    def echo(sock, req, fake):
        got.append(req)
        body = b'{"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}'
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    fake = t.fake(echo)
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto",
                 extra=shadow("cand", fake.url + "/base", "set_header=Authorization: Bearer CAND",
                              "remove_header=X-Drop-Me"))
    r = px.post("/v1/chat/completions", harness.chat_body({"tokens": 2}, stream=False),
                headers=[("Authorization", "Bearer CLIENT"), ("X-Drop-Me", "1"),
                         ("X-Keep", "2")])
    t.eq(r.status, 200, "status")
    harness.wait_until(lambda: got, 5 * t.slow, what="the shadow's request")
    head = got[0].split(b"\r\n\r\n")[0].decode()
    lines = head.split("\r\n")
    t.eq(lines[0], "POST /base/v1/chat/completions HTTP/1.1", "request line")
    hdr = [ln.split(":", 1) for ln in lines[1:]]
    names = {k.lower(): v.strip() for k, v in hdr}
    t.eq(names.get("host"), f"127.0.0.1:{fake.port}", "Host")
    t.eq(names.get("authorization"), "Bearer CAND", "Authorization replaced")
    t.check("x-drop-me" not in names, "removed header absent")
    t.eq(names.get("x-keep"), "2", "other header kept")
    t.eq(sum(1 for k, _ in hdr if k.lower() == "authorization"), 1, "one Authorization")


@timeout(60)
def test_shadow_refusing_connections_never_reaches_client(t):
    """a shadow port that refuses: every client gets the primary's bytes
    whole; the shadow legs are recorded as upstream_connect errors"""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))           # bound, never listening: refused
    port = s.getsockname()[1]
    px, _ = isolation(t, f"http://127.0.0.1:{port}")
    shadow_errors(t, px, 4, ["upstream_connect"])
    s.close()


@timeout(60)
def test_shadow_that_never_answers_never_reaches_client(t):
    """a shadow that accepts and never answers: recorded as upstream_timeout
    after its response_timeout, three times the primary's designed length;
    every primary leg ends before its shadow leg: the client never waits"""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)                      # the kernel accepts; nobody reads
    px, _ = isolation(t, f"http://127.0.0.1:{ls.getsockname()[1]}",
                      sets=(f"response_timeout={1000 * t.slow}ms",))
    primary_ends_first(t, shadow_errors(t, px, 4, ["upstream_timeout"], both=True))
    ls.close()


@timeout(60)
def test_slow_shadow_never_slows_client(t):
    """a shadow five times slower: every primary leg ends before its shadow
    leg, and the shadow really took five times as long"""
    cand = t.sim(extra=["--latency-scale", "5"])
    px, _ = isolation(t, cand.url)
    recs = shadow_errors(t, px, 4, [None], both=True)
    primary_ends_first(t, recs)
    for r in by_role(recs)["shadow"]:
        t.check(metric(r, "time_to_first_token") - timeline(r, "response_headers")
                > 4 * TTFT_MS, "the shadow really was slower")


@timeout(90)
def test_shadow_not_reading_body_does_not_throttle_primary(t):
    """a 20 MiB request body: the shadow never reads it, its copy is dropped
    at buffer_bytes (counted as buffer_full), and the primary gets the body
    at full speed"""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    path, data = stream_file(t)
    sim = t.sim()
    base = t.proxy(sim.url)
    px = t.proxy(sim.url, admin="auto",
                 extra=shadow("cand", f"http://127.0.0.1:{ls.getsockname()[1]}",
                              "response_timeout=500ms"))
    secs = {}
    for name, p in (("without", base), ("with", px)):
        t0 = time.monotonic()
        r, _ = client_request(p, body_for(path, big=20 << 20))
        secs[name] = time.monotonic() - t0 - (TTFT_MS + TOKENS * GAP_MS) / 1000
        t.eq(r.status, 200, f"status {name} shadow")
        t.eq(r.body, data, f"client bytes {name} shadow")
    t.note(f"20 MiB upload: {secs['without'] * 1000:.0f} ms without a shadow, "
           f"{secs['with'] * 1000:.0f} ms with a non-reading one")
    t.check(secs["with"] <= 3 * secs["without"] + 0.5,
            f"upload with the shadow {secs['with']:.2f}s vs {secs['without']:.2f}s without")
    recs = wait_records(t, px, 2)
    sh = by_role(recs)["shadow"]
    t.eq((sh[0]["error"] or {}).get("type"), "shadow_dropped", "shadow record error")
    t.check("buffer_full" in sh[0]["error"]["message"], "drop reason in the record")
    lines = metric_line(px, 'tokentap_shadow_dropped_total{shadow="cand",reason="buffer_full"}')
    t.eq(lines, ['tokentap_shadow_dropped_total{shadow="cand",reason="buffer_full"} 1'],
         "drop counted")
    ls.close()


def reset_mid_stream(gate):
    def h(sock, req, fake):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        ev = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
        sock.sendall(b"%x\r\n" % len(ev) + ev + b"\r\n")
        gate.wait()                    # mid-stream until the client is done
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return h


@timeout(60)
def test_shadow_reset_mid_stream_never_reaches_client(t):
    """a shadow that stops mid-stream until each client has its whole
    response, then resets: recorded as truncated"""
    gate = Gate(t)
    fake = t.fake(reset_mid_stream(gate))
    px, _ = isolation(t, fake.url, gate=gate)
    primary_ends_first(t, shadow_errors(t, px, 4, ["truncated"], both=True))
    t.eq(fake.errors, [], "fake shadow errors")


@timeout(60)
def test_shadow_tls_handshake_hang_never_reaches_client(t):
    """an https:// shadow that never speaks TLS: cut at its connect_timeout,
    three times the primary's designed length, after every primary leg ended"""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    px, _ = isolation(t, f"https://127.0.0.1:{ls.getsockname()[1]}",
                      sets=(f"connect_timeout={1000 * t.slow}ms", "insecure=true"))
    primary_ends_first(t, shadow_errors(t, px, 4, ["upstream_connect_timeout"], both=True))
    ls.close()


def huge(gate):
    def h(sock, req, fake):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        ev = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"y" * 4000 + b'"}}]}\n\n'
        chunk = b"%x\r\n" % len(ev) + ev + b"\r\n"
        block = chunk * 64
        sock.sendall(block)
        gate.wait()                    # the rest once the client is done
        for _ in range(199):           # about 51 MB in all
            sock.sendall(block)
        sock.sendall(b"%x\r\n" % len(b"data: [DONE]\n\n") + b"data: [DONE]\n\n\r\n0\r\n\r\n")
    return h


@timeout(90)
def test_shadow_huge_response_keeps_rss_bounded(t):
    """a shadow that answers every request with 51 MB: drained as it comes,
    the proxy's RSS grows by no more than a few buffers"""
    gate = Gate(t)
    fake = t.fake(huge(gate))
    px, _ = isolation(t, fake.url, n=2, gate=gate)
    recs = wait_records(t, px, 6)
    primary_ends_first(t, recs)
    t.eq(fake.errors, [], "fake shadow errors")
    sh = by_role(recs)["shadow"]
    t.check(all(r["error"] is None for r in sh), f"shadow errors {[r['error'] for r in sh]}")
    t.check(all(r["metadata"]["bytes_out"] > 50_000_000 for r in sh), "shadow bodies read whole")
    rss = px.rss_kib()
    t.note(f"proxy RSS after 3 x 51 MB shadow responses: {rss} KiB")
    t.check(rss < 64 * 1024 * t.slow, f"RSS {rss} KiB")


BURST_EV = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"z" * 3000 + b'"}}]}\n\n'
BURST = BURST_EV * 1024 + b"data: [DONE]\n\n"     # about 3 MiB


def burst(sock, req, fake):
    """a shadow that sends its whole answer at once"""
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(BURST) + BURST)


@timeout(60)
def test_shadow_reads_no_faster_than_max_read_rate(t):
    """a shadow that sends 3 MiB at once, max_read_rate = 1m: its response
    is read in about 3 s (the rate, a 10 ms tick's worth at a time), decoded
    whole, while the client got the primary's stream at once"""
    path, data = stream_file(t)
    sim = t.sim()
    fake = t.fake(burst)
    px = t.proxy(sim.url, extra=shadow("cand", fake.url, "max_read_rate=1m"))
    r, _ = client_request(px, body_for(path), headers=[("X-Request-Id", "rate-1")])
    t.eq(r.body, data, "client bytes")
    recs = by_role(wait_records(t, px, 2), "rate-1")
    t.eq(fake.errors, [], "fake shadow errors")
    s = recs["shadow"][0]
    t.eq(s["error"], None, "shadow error")
    t.eq(s["metadata"]["bytes_out"], len(BURST), "shadow body bytes read")
    t.eq(s["metadata"]["answer_events"], 1024, "shadow events decoded")
    took = metric(s, "request_latency") - metric(s, "time_to_first_token")
    want = len(BURST) / (1 << 20) * 1000
    t.note(f"{len(BURST)} bytes at max_read_rate 1m read in {took:.0f} ms ({want:.0f} ms at the rate)")
    t.check(took > 0.9 * want, f"read in {took:.0f} ms: faster than 1 MiB/s")
    t.check(took < 1.5 * want * t.slow, f"read in {took:.0f} ms: far slower than 1 MiB/s")


def long_stream(t):
    path = os.path.join(t.tmp, "long.sse")
    ev = b"".join(b'data: {"choices":[{"index":0,"delta":{"content":"tok%d "}}]}\n\n' % i
                  for i in range(40))
    with open(path, "wb") as f:
        f.write(ev + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
                + b"data: [DONE]\n\n")
    return path


def cancel_after_first_token(px, path, rid):
    c = px.conn(timeout=30)
    c.send(build_request("POST", "/v1/chat/completions",
                         {"model": "m", "stream": True, "messages": [],
                          "sim": {"replay": path, "ttft_ms": 50, "gap_ms": 20}},
                         [("X-Request-Id", rid)]))
    c.read_head()
    while b"tok0" not in c.data:
        c.fill()
    c.close()


@timeout(40)
def test_client_cancel_cancels_shadow_legs(t):
    """the client goes after its first token: the shadow leg (default
    on_client_cancel = cancel) is recorded as cancelled, the primary too"""
    path = long_stream(t)
    sim = t.sim()
    cand = t.sim()
    px = t.proxy(sim.url, extra=shadow("cand", cand.url))
    cancel_after_first_token(px, path, "cx-1")
    recs = by_role(wait_records(t, px, 2), "cx-1")
    t.eq(recs["primary"][0]["error"]["type"], "cancelled", "primary cancelled")
    t.eq(recs["shadow"][0]["error"]["type"], "cancelled", "shadow cancelled")
    t.eq(recs["shadow"][0]["metadata"]["was_cancelled"], True, "shadow was_cancelled")


@timeout(40)
def test_client_cancel_lets_shadow_finish_when_asked(t):
    """on_client_cancel = finish: the shadow leg runs to its end"""
    path = long_stream(t)
    sim = t.sim()
    cand = t.sim()
    px = t.proxy(sim.url, extra=shadow("cand", cand.url, "on_client_cancel=finish"))
    cancel_after_first_token(px, path, "cx-2")
    recs = by_role(wait_records(t, px, 2), "cx-2")
    t.eq(recs["primary"][0]["error"]["type"], "cancelled", "primary cancelled")
    t.eq(recs["shadow"][0]["error"], None, "shadow finished")
    t.eq(recs["shadow"][0]["metadata"]["token_events"], 40, "shadow token events")


@timeout(40)
def test_sample_key_gives_one_decision_per_value(t):
    """sample 0.5 by X-User: every request of one user is mirrored or none
    is; over 40 users both decisions occur"""
    sim = t.sim()
    cand = t.sim()
    px = t.proxy(sim.url, extra=shadow("cand", cand.url, "sample=0.5", "sample_key=X-User"))
    users = [f"user-{i}" for i in range(40)]
    for rep in range(3):
        for u in users:
            r = px.post("/v1/chat/completions", harness.chat_body({"tokens": 1, "ttft_ms": 0},
                                                                  stream=False),
                        headers=[("X-User", u), ("X-Request-Id", f"{u}-{rep}")])
            t.eq(r.status, 200, "status")
    primary = 3 * len(users)
    recs = harness.wait_until(lambda: (lambda x: x if len(by_role(x)["primary"]) >= primary
                                       else None)(px.records()), 10 * t.slow, what="records")
    recs = px.records()
    mirrored = {}
    for r in by_role(recs)["shadow"]:
        u = r["metadata"]["x_request_id"].rsplit("-", 1)[0]
        mirrored[u] = mirrored.get(u, 0) + 1
    # every mirrored user was mirrored all 3 times (wait for stragglers)
    for u, k in mirrored.items():
        if k != 3:
            harness.wait_until(lambda: sum(1 for r in by_role(px.records())["shadow"]
                                           if r["metadata"]["x_request_id"].startswith(u + "-"))
                               == 3, 5 * t.slow, what=f"3 shadow records of {u}")
    t.check(0 < len(mirrored) < len(users), f"{len(mirrored)} of 40 users mirrored")
    t.note(f"{len(mirrored)} of 40 users mirrored at sample 0.5")


@timeout(30)
def test_other_and_upgrade_requests_are_not_mirrored(t):
    """paths default to the decoded LLM APIs: /echo (api other) and an
    Upgrade are never sent to the shadow"""
    sim = t.sim()
    cand = t.sim()
    px = t.proxy(sim.url, extra=shadow("cand", cand.url))
    r = px.post("/echo", b"hello")
    t.eq(r.status, 200, "echo status")
    c = px.conn()
    c.send(b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
    h = c.read_head()
    t.eq(h.status, 101, "upgrade status")
    c.close()
    px.records(2)
    st = cand.stats()
    t.eq(st["requests"], 0, "requests the candidate saw")


@timeout(150)
def test_sampling_10000_requests_within_binomial_bounds(t):
    """sample 0.3 over 10,000 requests: the candidate receives a count within
    5 standard deviations of 3,000 (binomial), and the shadow legs' ok count
    on /stats is that count"""
    sim = t.sim()
    cand = t.sim()
    px = t.proxy(sim.url, record=False, admin="auto",
                 extra=shadow("cand", cand.url, "sample=0.3"))
    body = json.dumps(harness.chat_body({"tokens": 1, "ttft_ms": 0}, stream=False)).encode()
    raw = build_request("POST", "/v1/chat/completions", body)
    n = 10000
    c = px.conn(timeout=30)
    batch = 50                          # pipelined, answered in order
    for i in range(0, n, batch):
        c.send(raw * batch)
        for _ in range(batch):
            r = c.response("POST")
            if r.status != 200:
                raise harness.Failure(f"request status {r.status}")
    c.close()
    sd = (n * 0.3 * 0.7) ** 0.5

    def settled():
        st = harness.http(px.admin_port, "GET", "/stats").json()
        return st if st["inflight"] == 0 and st["upstreams"]["cand"]["windows"]["total"][
            "requests"]["total"] == cand.stats()["requests"] + sum(
            st["upstreams"]["cand"]["dropped"].values()) else None
    st = harness.wait_until(settled, 10 * t.slow, what="shadow legs finished")
    w = st["upstreams"]["cand"]["windows"]["total"]["requests"]
    drops = st["upstreams"]["cand"]["dropped"]
    got = cand.stats()["requests"] + sum(drops.values())
    t.note(f"shadow legs: {w}, dropped {drops}")
    t.note(f"10000 requests at sample 0.3: {got} mirrored "
           f"(bounds {3000 - 5 * sd:.0f}..{3000 + 5 * sd:.0f})")
    t.check(abs(got - 3000) <= 5 * sd, f"{got} mirrored")
    t.eq(w["ok"], cand.stats()["requests"], "shadow legs ok on /stats")


@timeout(40)
def test_compare_output_digests_answers_never_the_text(t):
    """compare_output: each leg's record carries a 64-bit digest of its
    answer text and no text; /stats gives the exact-match fraction (the
    same sim output matches, a candidate writing other words does not)"""
    sim = t.sim()
    same = t.sim()

    def other(sock, req, fake):
        ev = (b'data: {"choices":[{"index":0,"delta":{"content":"something else"}}]}\n\n'
              b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
              b'data: [DONE]\n\n')
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(ev) + ev)
    diff = t.fake(other)
    px = t.proxy(sim.url, admin="auto", extra=["--compare-output"] + shadow("same", same.url)
                 + shadow("diff", diff.url))
    r = px.post("/v1/chat/completions", harness.chat_body({"tokens": 6}),
                headers=[("X-Request-Id", "dg-1")])
    t.eq(r.status, 200, "status")
    recs = wait_records(t, px, 3)
    dig = {x["metadata"]["upstream"]: x["metadata"].get("answer_digest") for x in recs}
    t.check(all(isinstance(v, str) and len(v) == 16 for v in dig.values()), f"digests {dig}")
    t.eq(dig["same"], dig["primary"], "same answer, same digest")
    t.check(dig["diff"] != dig["primary"], "other answer, other digest")
    raw = open(px.record_path, "rb").read()
    t.check(b"tok0" not in raw and b"something else" not in raw, "no answer text in records")
    cmp = harness.http(px.admin_port, "GET", "/stats").json()["comparisons"]
    t.eq(cmp["same"]["windows"]["1m"]["exact_match_fraction"], 1, "same: exact match")
    t.eq(cmp["diff"]["windows"]["1m"]["exact_match_fraction"], 0, "diff: no match")


@timeout(60)
def test_report_compare_upstreams_pairs_legs_of_one_file(t):
    """tokentap report FILE --compare-upstreams primary,cand: both legs of
    every mirrored request are paired by x_request_id; the paired median
    TTFT difference is what the slower candidate adds"""
    sim = t.sim()
    cand = t.sim(extra=["--latency-scale", "2"])
    px = t.proxy(sim.url, extra=shadow("cand", cand.url))
    for i in range(8):
        r = px.post("/v1/chat/completions", harness.chat_body({"tokens": 4, "ttft_ms": 60}),
                    headers=[("X-Request-Id", f"cu-{i}")])
        t.eq(r.status, 200, "status")
    recs = wait_records(t, px, 16)
    exe = os.path.join(t.build, "tokentap")
    import subprocess
    p = subprocess.run([exe, "report", px.record_path, "--compare-upstreams", "primary,cand",
                        "--format", "json"], capture_output=True, timeout=30 * t.slow)
    t.eq(p.returncode, 0, f"report exit status: {p.stderr[-300:]!r}")
    doc = json.loads(p.stdout)
    notes = " ".join(doc["notes"])
    t.check("upstream primary" in notes and "upstream cand" in notes, f"sets named: {notes}")
    t.check("8 requests in both sets" in notes, f"8 pairs: {notes}")
    paired = [tb for tb in doc["tables"] if tb["columns"][:3] == ["Metric", "pairs", "median d"]]
    t.eq(len(paired), 1, "one paired table")
    row = [r for r in paired[0]["rows"] if r[0] == "Time to First Token (ms)"][0]
    t.eq(row[1], 8, "TTFT pairs")
    # the report's median is the records' own: each request's candidate
    # TTFT minus its primary's, the linear median of the eight (printed
    # with two decimals).  The sims make the sign causal: neither leg can
    # see a token before its sim sends it, at 60 ms and at twice that.
    ttft = {}
    for x in recs:
        md = x["metadata"]
        ttft[(md["x_request_id"], md["upstream"])] = x["metrics"]["time_to_first_token"]["value"]
    for i in range(8):
        t.check(ttft[(f"cu-{i}", "primary")] >= 60.0, f"cu-{i}: primary TTFT >= 60 ms")
        t.check(ttft[(f"cu-{i}", "cand")] >= 120.0, f"cu-{i}: candidate TTFT >= 120 ms")
    d = sorted(ttft[(f"cu-{i}", "cand")] - ttft[(f"cu-{i}", "primary")] for i in range(8))
    t.near(row[2], (d[3] + d[4]) / 2, 0.0051, "paired median TTFT difference = the records'")
    t.note(f"paired median TTFT difference {row[2]} ms (designed 60)")
    bad = subprocess.run([exe, "report", px.record_path, "--compare-upstreams", "primary"],
                         capture_output=True, timeout=30)
    t.eq(bad.returncode, 2, "a bad pair is a usage error")
    t.check(b"expected A,B" in bad.stderr, f"the reason: {bad.stderr!r}")
