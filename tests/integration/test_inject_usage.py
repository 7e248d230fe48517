"""--inject-usage (SPEC 11, docs/metrics.md): for an OpenAI-style streaming
request without stream_options.include_usage, tokentap asks the upstream for
usage and removes the usage-only chunk before the client.  The client must
get what it would have got without the option, event for event; the record
gets the server's counts and usage_injected.

Three kinds of upstream:
  - tokentap-sim generating chat and completions streams: it sends the usage
    chunk only when asked, so a proxy without the option is the reference
    (the sim's id and created differ per response; they are the only fields
    left out of the comparison);
  - tokentap-sim replaying a stream file this test writes (and the
    llama.cpp captures): the bytes without the usage chunk are worked out
    here from the file, and compared byte for byte, with every split;
  - a scripted upstream that keeps the requests it gets, for the forwarded
    bytes (rewritten body, Content-Length, shadows, bodies over the bound).
"""
import json
import os

import harness
from harness import Conn, FakeUpstream, build_request, sse_events, timeout
from test_slo import scrape, total

SPLITS = [("none", 1), ("random", 7), ("random", 99991), ("byte", 1)]
TOKENS = 9
INJECT = ["--inject-usage"]


def norm(body):
    """the SSE events of <body>, data JSON parsed, id/created left out"""
    out = []
    for ev in sse_events(body):
        d = ev.split(b"data:", 1)[1].strip()
        if d == b"[DONE]":
            out.append("[DONE]")
            continue
        o = json.loads(d)
        o.pop("id", None)
        o.pop("created", None)
        out.append(o)
    return out


def usage_only(ev):
    """is this raw SSE event a usage-only chunk (choices [], usage {...})?"""
    d = ev.split(b"data:", 1)[1].strip()
    if d == b"[DONE]":
        return False
    o = json.loads(d)
    return o.get("choices") == [] and isinstance(o.get("usage"), dict)


def without_usage(raw):
    """<raw> (LF-delimited SSE) with its usage-only events cut out, every
    other byte as it is"""
    parts = raw.split(b"\n\n")
    keep = [p for p in parts[:-1] if not usage_only(p)]
    return b"".join(p + b"\n\n" for p in keep) + parts[-1]


def stream_file(t):
    """a canned chat stream as a server sends it when usage was asked for"""
    base = {"id": "chatcmpl-fixed", "object": "chat.completion.chunk",
            "created": 1700000000, "model": "sim-model"}
    ev = [dict(base, choices=[{"index": 0, "delta": {"content": f"t{i} "},
                               "finish_reason": None}]) for i in range(TOKENS)]
    ev.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    ev.append(dict(base, choices=[], usage={"prompt_tokens": 7, "completion_tokens": TOKENS,
                                            "total_tokens": 7 + TOKENS}))
    data = b"".join(b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n"
                    for e in ev) + b"data: [DONE]\n\n"
    path = os.path.join(t.tmp, "usage.sse")
    with open(path, "wb") as f:
        f.write(data)
    return path, data


def chat(sim, **extra):
    return harness.chat_body(sim, **extra)


def cmpl(sim, **extra):
    d = {"model": "sim-model", "prompt": "hi", "stream": True, "sim": sim}
    d.update(extra)
    return d


def post(px, path, body, http10=False, chunked=False):
    c = Conn(px.port, timeout=30)
    try:
        raw = build_request("POST", path, body, chunked=chunked)
        if http10:
            raw = raw.replace(b" HTTP/1.1\r\n", b" HTTP/1.0\r\n", 1)
        r = c.request(raw)
    finally:
        c.close()
    return r


def last_record(px, n):
    return px.records(n)[n - 1]


@timeout(120)
def test_generated_streams_equal_uninjected(t):
    """chat and completions from the sim, every split: the client's events
    through --inject-usage equal those through a proxy without it; only the
    injected records have the server's usage"""
    sim = t.sim()
    on = t.proxy(sim.url, extra=INJECT)
    off = t.proxy(sim.url)
    n = 0
    for path, mk in (("/v1/chat/completions", chat), ("/v1/completions", cmpl)):
        for split, seed in SPLITS:
            body = mk({"tokens": TOKENS, "prompt_tokens": 11, "ttft_ms": 5, "gap_ms": 1,
                       "split": split, "seed": seed})
            a = post(on, path, body)
            b = post(off, path, body)
            n += 1
            what = f"{path} split={split}/{seed}"
            assert a.status == 200 and b.status == 200, (what, a, b)
            assert a.complete and a.chunked, (what, a)
            assert a.header("content-length") is None, what
            ea, eb = norm(a.body), norm(b.body)
            assert ea == eb, f"{what}: client events differ\n{ea}\n{eb}"
            assert not any(isinstance(e, dict) and "usage" in e for e in ea), what
            ra, rb = last_record(on, n), last_record(off, n)
            assert ra["metadata"].get("usage_injected") is True, (what, ra)
            assert ra["metadata"]["token_count_source"] == "usage", (what, ra["metadata"])
            assert ra["metrics"]["output_sequence_length"]["value"] == TOKENS, (what, ra["metrics"])
            assert ra["metrics"]["input_sequence_length"]["value"] == 11, (what, ra["metrics"])
            assert ra["metadata"]["bytes_out"] == len(a.body), (what, ra["metadata"])
            assert "usage_injected" not in rb["metadata"], (what, rb)
            assert "input_sequence_length" not in rb["metrics"], (what, rb["metrics"])
            assert rb["metadata"].get("token_count_source") != "usage", (what, rb["metadata"])


@timeout(120)
def test_replay_bytes_exact(t):
    """a replayed stream with its usage chunk: the client gets the file
    minus that chunk, byte for byte, with every split, on HTTP/1.1
    (chunked) and HTTP/1.0 (close-delimited)"""
    path, data = stream_file(t)
    want = without_usage(data)
    assert len(want) < len(data) and b'"usage"' not in want
    sim = t.sim()
    px = t.proxy(sim.url, extra=INJECT)
    n = 0
    for http10 in (False, True):
        for split, seed in SPLITS:
            r = post(px, "/v1/chat/completions",
                     chat({"replay": path, "split": split, "seed": seed}), http10=http10)
            n += 1
            what = f"http10={http10} split={split}/{seed}"
            assert r.status == 200 and r.complete, (what, r)
            assert r.framing == ("close" if http10 else "chunked"), (what, r.framing)
            assert r.body == want, f"{what}: {r.body[-300:]!r}"
            rec = last_record(px, n)
            assert rec["metadata"].get("usage_injected") is True, (what, rec)
            m = rec["metrics"]
            assert (m["input_sequence_length"]["value"], m["output_sequence_length"]["value"]) == (7, TOKENS), m
            assert rec["metadata"]["token_count_source"] == "usage", rec["metadata"]


@timeout(120)
def test_llamacpp_captures(t):
    """llama.cpp b10587's streams as it sends them with include_usage: the
    client gets them without the usage chunks, the record the server's
    counts (16 tokens of 42 prompt, 12 cached; n=2: 16 + 16 per choice)"""
    d = harness.FIXTURES
    cases = [("llamacpp-b10587-chat-include_usage-timings.sse", 42, 16, {}),
             ("llamacpp-b10587-chat-n2-include_usage.sse", None, 32, {"n": 2})]
    files = [(os.path.join(d, f), isl, osl, x) for f, isl, osl, x in cases]
    for f, _, _, _ in files:
        if not os.path.exists(f):
            raise harness.Skip(f"fixture {f} is missing")
    sim = t.sim()
    px = t.proxy(sim.url, extra=INJECT)
    n = 0
    for f, isl, osl, extra in files:
        data = open(f, "rb").read()
        want = without_usage(data)
        assert len(want) < len(data)
        for split, seed in SPLITS:
            r = post(px, "/v1/chat/completions",
                     chat({"replay": f, "split": split, "seed": seed}, **extra))
            n += 1
            what = f"{os.path.basename(f)} split={split}/{seed}"
            assert r.status == 200 and r.complete, (what, r)
            assert r.body == want, what
            rec = last_record(px, n)
            assert rec["metadata"].get("usage_injected") is True, (what, rec)
            m = rec["metrics"]
            assert m["output_sequence_length"]["value"] == osl, (what, m)
            if isl is not None:
                assert m["input_sequence_length"]["value"] == isl, (what, m)
                assert rec["metadata"]["usage"]["cached_input_tokens"] == 12, rec["metadata"]


@timeout(60)
def test_untouched_requests(t):
    """a request that asks for usage itself, a non-streaming request, and
    any request with the option off: the client's bytes are the server's,
    and no record says usage was injected"""
    path, data = stream_file(t)
    sim = t.sim()
    on = t.proxy(sim.url, extra=INJECT)
    off = t.proxy(sim.url)
    # already asks: the replayed usage chunk reaches the client
    r = post(on, "/v1/chat/completions",
             chat({"replay": path}, stream_options={"include_usage": True}))
    assert r.status == 200 and r.body == data, r
    rec = last_record(on, 1)
    assert "usage_injected" not in rec["metadata"], rec
    # include_usage false is the client's choice too
    r = post(on, "/v1/chat/completions",
             chat({"replay": path}, stream_options={"include_usage": False}))
    assert r.body == data and "usage_injected" not in last_record(on, 2)["metadata"]
    # non-streaming: same JSON through both proxies (id/created aside)
    for i, (p, mk) in enumerate((("/v1/chat/completions", chat), ("/v1/completions", cmpl))):
        body = mk({"tokens": TOKENS}, stream=False)
        a, b = post(on, p, body), post(off, p, body)
        ja, jb = a.json(), b.json()
        for j in (ja, jb):
            j.pop("id", None)
            j.pop("created", None)
        assert a.status == 200 and ja == jb, (ja, jb)
        assert a.header("content-length") == str(len(a.body)), a.headers
        assert "usage_injected" not in last_record(on, 3 + i)["metadata"]
    # off: the stream without usage, as the sim sends it when not asked
    r = post(off, "/v1/chat/completions", chat({"replay": path}))
    assert r.body == data
    assert "usage_injected" not in last_record(off, 3)["metadata"]


def test_injected_requests_are_counted(t):
    """tokentap_usage_injected_total counts the requests --inject-usage
    rewrote, and only those: two streams without include_usage are, a
    stream that asks itself and a non-streaming request are not; the
    records say the same"""
    path, data = stream_file(t)
    sim = t.sim()
    px = t.proxy(sim.url, extra=INJECT, admin="auto")
    for _ in range(2):
        r = post(px, "/v1/chat/completions", chat({"replay": path}))
        t.eq(r.body, without_usage(data), "client bytes of an injected request")
    r = post(px, "/v1/chat/completions",
             chat({"replay": path}, stream_options={"include_usage": True}))
    t.eq(r.body, data, "client bytes of a request that asked itself")
    t.eq(post(px, "/v1/chat/completions", chat({"tokens": 3}, stream=False)).status, 200,
         "non-streaming status")
    recs = px.records(4)
    t.eq(sum(1 for r in recs if r["metadata"].get("usage_injected")), 2, "records injected")
    text = scrape(t, px)
    t.eq(total(text, "tokentap_usage_injected_total", api="openai.chat"), 2,
         "tokentap_usage_injected_total")


SSE_REPLY = (b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"hi"},'
             b'"finish_reason":null}]}\n\n'
             b'data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
             b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":3,'
             b'"completion_tokens":1,"total_tokens":4}}\n\n'
             b'data: [DONE]\n\n')


def sse_upstream(sock, req, fake):
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                 b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(SSE_REPLY)
                 + SSE_REPLY)


def split_request(req):
    head, _, body = req.partition(b"\r\n\r\n")
    fields = {}
    for ln in head.split(b"\r\n")[1:]:
        k, _, v = ln.partition(b":")
        fields.setdefault(k.strip().lower().decode(), []).append(v.strip().decode())
    return fields, body


@timeout(60)
def test_forwarded_request(t):
    """what the upstream and a shadow get: the client's body with
    "stream_options":{"include_usage":true} added after its '{' (leading
    whitespace and all else unchanged) and a Content-Length for it, also for
    a chunked client body; the client gets the reply without its usage
    chunk, re-framed as chunked"""
    up = FakeUpstream(t, sse_upstream)
    sh = FakeUpstream(t, sse_upstream)
    px = t.proxy(up.url, extra=INJECT + ["--shadow", f"cand={sh.url}"])
    raw = b'  \n{"model":"m", "stream" : true,"messages":[{"role":"user","content":"{\\"stream_options\\":1}"}]}'
    want = b'  \n{"stream_options":{"include_usage":true},' + raw[4:]
    for i, chunked in enumerate((False, True)):
        r = post(px, "/v1/chat/completions", raw, chunked=chunked)
        assert r.status == 200 and r.chunked and r.complete, r
        assert r.header("content-length") is None, r.headers
        assert r.body == without_usage(SSE_REPLY), r.body
        rec = [x for x in px.records(2 * (i + 1)) if x["metadata"].get("role", "primary") != "shadow"][-1]
        assert rec["metadata"].get("usage_injected") is True, rec
        assert rec["metadata"]["bytes_in"] == len(raw), rec["metadata"]
        assert rec["metadata"]["bytes_out"] == len(r.body), rec["metadata"]
        harness.wait_until(lambda: len(sh.requests) > i, 5 * t.slow, what="shadow request")
        for fake in (up, sh):
            fields, body = split_request(fake.requests[i])
            assert body == want, (chunked, body)
            assert fields.get("content-length") == [str(len(want))], fields
            assert "transfer-encoding" not in fields, fields
    assert not up.errors and not sh.errors, (up.errors, sh.errors)


@timeout(60)
def test_forwarded_unchanged(t):
    """no rewrite: a body over what is held (inspect_max_bytes), a request that asks for
    usage, and the option off all reach the upstream as the client sent
    them, and the client gets the upstream's reply as it is"""
    up = FakeUpstream(t, sse_upstream)
    on = t.proxy(up.url, extra=INJECT)
    off = t.proxy(up.url)
    big = json.dumps({"model": "m", "stream": True,
                      "messages": [{"role": "user", "content": "x" * (1 << 20)}]}).encode()
    asks = b'{"model":"m","stream":true,"stream_options":{"include_usage":true}}'
    plain = b'{"model":"m","stream":true}'
    cases = [(on, big), (on, asks), (off, plain)]
    for i, (px, body) in enumerate(cases):
        r = post(px, "/v1/chat/completions", body)
        assert r.status == 200 and r.body == SSE_REPLY, (i, r)
        assert r.header("content-length") == str(len(SSE_REPLY)), (i, r.headers)
        fields, got = split_request(up.requests[i])
        assert got == body, (i, got[:200])
        assert fields.get("content-length") == [str(len(body))], (i, fields)
    recs = on.records(2) + off.records(1)
    for rec in recs:
        assert "usage_injected" not in rec["metadata"], rec
