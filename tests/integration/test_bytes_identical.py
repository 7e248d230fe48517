"""Byte transparency: response bodies, chunked framing and request bodies
pass through tokentap unchanged (SPEC 4)."""
import os
import socket
import threading

import harness
from harness import Conn, build_request, timeout

SPLITS = [("none", 1), ("random", 7), ("random", 1234567), ("byte", 1)]


def fixture_files():
    d = harness.FIXTURES
    if not os.path.isdir(d):
        raise harness.Skip(f"fixture directory {d} is missing")
    files = sorted(f for f in os.listdir(d)
                   if f.endswith((".sse", ".ndjson", ".jsonl")))
    if not files:
        raise harness.Skip(f"no .sse/.ndjson/.jsonl fixtures in {d}")
    return [os.path.join(d, f) for f in files]


def expected_body(path):
    """what tokentap-sim sends for a replay (sim/resp.c replay_load)"""
    raw = open(path, "rb").read()
    if not path.endswith(".jsonl"):
        return raw
    out = b""
    for line in raw.split(b"\n"):
        if line.endswith(b"\r"):
            line = line[:-1]
        if line:
            out += b"data: " + line + b"\n\n"
    return out


def route_for(path):
    """the API path a fixture belongs on, and a matching request body"""
    name = os.path.basename(path)
    if name.startswith("anthropic"):
        return "/v1/messages", {"model": "claude", "max_tokens": 64, "stream": True,
                                "messages": [{"role": "user", "content": "hi"}]}
    if name.startswith("gemini"):
        return ("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
                {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    if name.startswith("ollama"):
        return "/api/chat", {"model": "gemma3:1b", "messages": [{"role": "user", "content": "hi"}]}
    if name.startswith("openai-responses"):
        return "/v1/responses", {"model": "gpt", "input": "hi", "stream": True}
    if name.startswith("llamacpp-") and "native" in name:
        return "/completions", {"prompt": "hi", "stream": True, "n_predict": 16}
    if name.startswith("tgi-generate_stream"):
        return "/generate_stream", {"inputs": "hi", "parameters": {"max_new_tokens": 1}}
    return "/v1/chat/completions", harness.chat_body({})


def fetch(port, path, body):
    c = Conn(port, timeout=30)
    try:
        r = c.request(build_request("POST", path, body))
    finally:
        c.close()
    return r


@timeout(150)
def test_fixture_bytes_identical(t):
    """every captured stream, replayed with every split, reaches the client
    byte for byte: de-chunked body = what the sim sent, and the raw chunked
    body through the proxy = the raw chunked body read from the sim directly"""
    files = fixture_files()
    sim = t.sim()
    px = t.proxy(sim.url)
    problems = []
    n = 0
    for path in files:
        want = expected_body(path)
        api_path, base = route_for(path)
        for split, seed in SPLITS:
            body = dict(base)
            body["sim"] = {"replay": path, "ttft_ms": 0, "gap_ms": 0,
                           "split": split, "seed": seed}
            label = f"{os.path.basename(path)} split={split} seed={seed}"
            direct = fetch(sim.port, api_path, body)
            proxied = fetch(px.port, api_path, body)
            n += 1
            if direct.status != 200 or direct.body != want:
                problems.append(f"{label}: sim itself sent {direct.status} "
                                f"{len(direct.body)}B, fixture is {len(want)}B")
                continue
            if proxied.status != 200:
                problems.append(f"{label}: proxy answered {proxied.status}")
                continue
            if not proxied.complete:
                problems.append(f"{label}: body incomplete through the proxy")
            if proxied.body != want:
                i = next((k for k in range(min(len(want), len(proxied.body)))
                          if want[k] != proxied.body[k]), min(len(want), len(proxied.body)))
                problems.append(f"{label}: de-chunked body differs at byte {i} "
                                f"(got {len(proxied.body)}B, want {len(want)}B)")
            if proxied.framing != direct.framing:
                problems.append(f"{label}: framing {proxied.framing} through the proxy, "
                                f"{direct.framing} direct")
            elif proxied.raw_body != direct.raw_body:
                problems.append(f"{label}: raw {direct.framing} body differs from the "
                                "sim's (framing not preserved)")
    t.check(not problems, f"{len(problems)} of {n} replays differ: " + "; ".join(problems[:6]))
    t.note(f"{len(files)} fixtures x {len(SPLITS)} splits")


def test_request_body_content_length_forwarded(t):
    """a Content-Length body with every byte value reaches the upstream unchanged"""
    sim = t.sim()
    px = t.proxy(sim.url)
    body = bytes(range(256)) * 64 + b"\r\n0\r\n\r\n tail"
    r = harness.http(px.port, "POST", "/echo", body,
                     headers=[("Content-Type", "application/octet-stream")])
    t.eq(r.status, 200, "status")
    t.eq(r.header("X-Echo-Body-Bytes"), str(len(body)), "X-Echo-Body-Bytes")
    t.eq(r.header("X-Echo-Content-Length"), str(len(body)), "Content-Length upstream")
    t.eq(r.header("X-Echo-TE"), None, "Transfer-Encoding upstream")
    t.check(r.body == body, "echoed body differs from the body sent")


def test_request_body_chunked_forwarded(t):
    """a chunked request body (several chunks, one with an extension) is
    de-chunked identically by the upstream, and its framing bytes arrive
    unchanged at a raw upstream"""
    payload = [b"hello ", bytes(range(256)), b"", b"x" * 5000, b"end"]
    framed = b""
    for i, p in enumerate(payload):
        if not p:
            continue
        ext = b";name=value" if i == 1 else b""
        framed += b"%x%s\r\n" % (len(p), ext) + p + b"\r\n"
    framed += b"0\r\n\r\n"
    whole = b"".join(payload)
    head = (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")

    sim = t.sim()
    px = t.proxy(sim.url)
    c = px.conn()
    c.send(head)
    c.send(framed[:7])          # split inside a chunk-size line
    c.send(framed[7:])
    r = c.response("POST")
    c.close()
    t.eq(r.status, 200, "status")
    t.eq(r.header("X-Echo-TE"), "chunked", "Transfer-Encoding upstream")
    t.eq(r.header("X-Echo-Body-Bytes"), str(len(whole)), "X-Echo-Body-Bytes")
    t.check(r.body == whole, "de-chunked body differs")

    got = {}

    def handler(sock, req, fake):
        got["req"] = req
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    fake = t.fake(handler)
    px2 = t.proxy(fake.url, record=False)
    c = px2.conn()
    c.send(head + framed)
    r = c.response("POST")
    c.close()
    t.eq(r.status, 200, "status from the raw upstream")
    req = got.get("req", b"")
    t.check(b"\r\n\r\n" in req, "raw upstream got no request")
    upbody = req.split(b"\r\n\r\n", 1)[1]
    t.eq(upbody, framed, "chunked body bytes at the upstream")


@timeout(60)
def test_large_request_body_streamed(t):
    """a 20 MiB request body goes through (limit 32 MiB) and is echoed intact"""
    size = 20 * 1024 * 1024
    chunk = bytes((i * 7 + 3) & 0xFF for i in range(65536))
    body = chunk * (size // len(chunk))
    sim = t.sim()
    px = t.proxy(sim.url)
    c = px.conn(timeout=60)
    head = (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % size)
    err = []

    def sender():
        try:
            c.sock.sendall(head + body)
        except OSError as e:
            err.append(e)
    th = threading.Thread(target=sender, daemon=True)
    th.start()
    r = c.response("POST")
    th.join(30)
    c.close()
    t.check(not err, f"sending the body failed: {err}")
    t.eq(r.status, 200, "status")
    t.eq(r.header("X-Echo-Body-Bytes"), str(size), "X-Echo-Body-Bytes")
    t.eq(len(r.body), size, "echoed length")
    t.check(r.body == body, "echoed 20 MiB body differs")
