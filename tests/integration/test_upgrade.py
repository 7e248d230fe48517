"""Upgrade requests are tunnelled untouched (SPEC 4)."""
import socket
import time

import harness


def echo_after_101(sock, req, fake):
    """answer 101, then echo every byte until the peer closes"""
    fake.upgrade_request = req
    sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                 b"Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
    sock.settimeout(10)
    while True:
        try:
            b = sock.recv(65536)
        except socket.timeout:
            return
        if not b:
            return
        sock.sendall(b)


def test_upgrade_tunnel_both_ways(t):
    """101 passes through, then bytes flow both ways unchanged; the request
    is recorded as api "other" without a timeline of tokens"""
    fake = t.fake(echo_after_101)
    px = t.proxy(fake.url)
    c = px.conn()
    c.send(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    r = c.read_head()
    t.eq(r.status, 101, "status")
    t.eq((r.header("Upgrade") or "").lower(), "websocket", "Upgrade header")
    req = getattr(fake, "upgrade_request", b"")
    t.check(b"\r\nupgrade: websocket\r\n" in req.lower(), "Upgrade header not forwarded upstream")
    t.check(b"sec-websocket-key: dghlihnhbxbszsbub25jzq==" in req.lower(),
            "Sec-WebSocket-Key not forwarded upstream")
    # bytes both ways, including what an HTTP parser would choke on
    for payload in (b"\x81\x05hello", bytes(range(256)), b"GET / HTTP/1.1\r\n\r\n" * 3,
                    b"x" * 200000):
        start = len(c.data)
        c.sock.sendall(payload)
        while len(c.data) - start < len(payload):
            if c.fill() == 0:
                break
        t.eq(bytes(c.data[start:start + len(payload)]) == payload, True,
             f"echoed {len(payload)}-byte payload identical")
    c.close()
    rec = px.records(1)[0]
    t.eq(rec["metadata"]["api"], "other", "api")
    t.eq(rec["metadata"]["status"], 101, "status")
    t.check("time_to_first_token" not in rec["metrics"], "TTFT recorded for a tunnel")
    # SPEC 4: tunnels are "recorded as api:"other" with latency only"
    t.check(harness.metric(rec, "request_latency") is not None,
            f"tunnel record has no request_latency (metrics {rec['metrics']})")
    t.check(rec["error"] is None, f"tunnel recorded as error: {rec['error']}")


def ok_json(sock, req, fake):
    """answer every request on the connection 200 with a small JSON body"""
    while req is not None:
        body = b'{"ok":true}'
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        req = harness.read_request(sock)
        if req is not None:
            fake.requests.append(req)


def test_h2c_upgrade_dropped(t):
    """Upgrade: h2c (curl --http2 on http://) is dropped like any hop-by-hop
    field: the upstream sees neither Upgrade nor HTTP2-Settings nor their
    Connection tokens, the client gets HTTP/1.1 200, and the connection
    serves the next request"""
    fake = t.fake(ok_json)
    px = t.proxy(fake.url)
    c = px.conn()
    for raw in (b"GET /v1/models HTTP/1.1\r\nHost: x\r\n"
                b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
                b"Content-Type: application/json\r\nContent-Length: 17\r\n\r\n"
                b'{"model":"m-h2c"}',
                # HTTP2-Settings not named by Connection: dropped all the same
                b"GET /v1/models HTTP/1.1\r\nHost: x\r\n"
                b"Connection: Upgrade\r\nUpgrade: h2c\r\n"
                b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"):
        c.send(raw)
        r = c.response()
        t.eq(r.status, 200, "status")
        t.eq(r.version, "HTTP/1.1", "version")
        t.check(r.header("Upgrade") is None, "Upgrade in the answer")
    c.close()
    t.eq(len(fake.requests), 3, "requests at the upstream (one connection, kept alive)")
    for req in fake.requests:
        head = req.split(b"\r\n\r\n")[0].lower()
        t.check(b"\r\nupgrade:" not in head, f"Upgrade forwarded: {head!r}")
        t.check(b"http2-settings" not in head, f"HTTP2-Settings forwarded: {head!r}")
        t.check(b"\r\nconnection: upgrade" not in head, f"Connection: upgrade forwarded: {head!r}")
    t.check(fake.requests[1].endswith(b'{"model":"m-h2c"}'), "body forwarded")
    recs = px.records(3)
    t.eq(sorted(r["metadata"]["status"] for r in recs), [200, 200, 200], "recorded statuses")


def test_h2_prior_knowledge_refused_clearly(t):
    """the HTTP/2 preface (curl --http2-prior-knowledge) gets a 400 in the
    OpenAI error shape that says what to do, not llhttp's internal text"""
    fake = t.fake(ok_json)
    px = t.proxy(fake.url)
    c = px.conn()
    c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00\x00")
    r = c.response()
    c.close()
    t.eq(r.status, 400, "status")
    err = r.json()["error"]
    t.check("HTTP/2" in err["message"] and "HTTP/1.1" in err["message"],
            f"message: {err['message']!r}")
    t.check("Pause" not in err["message"], f"llhttp's text in the message: {err['message']!r}")
    t.eq(err["type"], "invalid_request_error", "type")
    t.eq(len(fake.requests), 0, "nothing reached the upstream")


def test_tunnel_bytes_counted(t):
    """a 101 tunnel's record counts the bytes that crossed it each way"""
    fake = t.fake(echo_after_101)
    px = t.proxy(fake.url)
    c = px.conn()
    c.send(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    r = c.read_head()
    t.eq(r.status, 101, "status")
    total = 0
    for payload in (b"\x81\x05hello", b"y" * 70000, bytes(range(256))):
        start = len(c.data)
        c.sock.sendall(payload)
        while len(c.data) - start < len(payload):
            if c.fill() == 0:
                break
        total += len(payload)
    c.close()
    rec = px.records(1)[0]
    t.eq(rec["metadata"]["bytes_in"], total, "bytes_in (client to upstream)")
    t.eq(rec["metadata"]["bytes_out"], total, "bytes_out (upstream to client)")
